package actions

import (
	"context"

	"github.com/berth-dev/berth/redrive/sor"
)

// Applied asks the system of record of dlq's policy which of these
// idempotency keys already have their effect committed: a record that
// failed after its side effect (a payment captured, then the ledger call
// failed) reads "transient" by its exception, yet redriving it would apply
// it twice. configured is false when the policy has no system of record
// (nothing can be said). It reads only.
func (c PlannerConsole) Applied(ctx context.Context, dlq string, keys []string) (applied map[string]bool, configured bool, err error) {
	pol, err := c.P.PolicyFor(dlq)
	if err != nil {
		return nil, false, err
	}
	if pol.SystemOfRecord == nil {
		return nil, false, nil
	}
	applied, err = sor.Applied(ctx, *pol.SystemOfRecord, keys)
	return applied, true, err
}
