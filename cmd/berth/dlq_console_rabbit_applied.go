package main

import (
	"context"

	"github.com/berth-dev/berth/redrive/sor"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

var _ tuidlq.Applier = (*consoleQueues)(nil)

// Applied asks the system of record of the RabbitMQ DLQ's policy which
// idempotency keys already took effect, so the classes page can say so
// instead of "transient" (the plan's check 2 asks the same question).
func (s *consoleQueues) Applied(ctx context.Context, dlq string, keys []string) (map[string]bool, bool, error) {
	pol, _ := s.base.cfg.RedrivePolicyFor(dlq)
	if pol.SystemOfRecord == nil {
		return nil, false, nil
	}
	applied, err := sor.Applied(ctx, *pol.SystemOfRecord, keys)
	return applied, true, err
}
