package actions

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/redrive"
)

// planProgress is what `redrive status` judges a plan's state from, on
// both backends.
type planProgress struct {
	Included, Redriven int
	// Started: the ledger holds something of the plan (sent, or on
	// RabbitMQ also in doubt or failed).
	Started  bool
	Blocked  bool
	Approved bool
	Created  time.Time
}

// state is the plan's state, judged in execute's order of refusals so that
// a plan execute would refuse (blocked, dated ahead of the clock, expired,
// not approved) never reads "ready"; one function, so that the backends
// cannot drift apart again (RabbitMQ's status called a future plan ready).
func (p planProgress) state(now time.Time, maxAge time.Duration) string {
	switch {
	case p.Redriven >= p.Included && p.Included > 0:
		return "done"
	case p.Started:
		return fmt.Sprintf("partial (%d left)", p.Included-p.Redriven)
	case p.Blocked:
		return "blocked"
	case p.Created.Sub(now) > ClockMargin:
		return "dated in the future"
	case maxAge > 0 && now.Sub(p.Created) > maxAge:
		return "expired"
	case !p.Approved:
		return "pending approval"
	}
	return "ready"
}

// futureApproval refuses to approve a plan dated ahead of this clock, on
// both backends: an approval given now would count once the clock reaches
// the plan's date, and the plan would then run until plan_max_age past
// it, long after the approver looked at it.
func futureApproval(hash string, created, now time.Time) error {
	if ahead := created.Sub(now); ahead > ClockMargin {
		return Refuse(ErrPlanFromFuture, "plan %s claims to be made %s in the future (%s): nothing stored; make it again",
			redrive.ShortHash(hash), ahead.Round(time.Second), redrive.FormatCreatedAt(created))
	}
	return nil
}
