package actions

import (
	"fmt"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/redrive"
)

// The two judgements a RabbitMQ run makes besides the checks and ordering
// (rabbitAdmission in rabbitmq.go): whether the plan may run on its DLQ at
// all, and whether a consumed message goes where the plan signed. The
// transport reports the facts (the DLQ's type and settings, what each
// message derives to) and the run loop (rabbit_run.go) sends what is
// admitted.

// ReasonDerivedChanged skips an included record whose plan entry says
// what its message does not: another target than the message's
// dead-lettering derives to (the plan was edited after its checks ran; they
// asked about the plan's values, not the message's). The idempotency key
// and prior redrives are not in a plan: they are derived from the consumed
// message and checked then.
const ReasonDerivedChanged redrive.Reason = "derived_mismatch"

// Runnable refuses a plan whose DLQ cannot be consumed safely, from what
// the broker says about it (dlq: the management API's view, or only the
// plan's queue type without the API).
func (a *rabbitAdmission) Runnable(p redrive.QueuePlan, dlq backends.Queue) error {
	return rabbitRunnable(p, dlq)
}

// rabbitRunnable refuses what cannot run safely: an auto-delete DLQ, a
// stream, a quorum DLQ with a delivery limit, and a quorum DLQ (unselected
// messages would be moved and counted) unless the plan accepts it.
func rabbitRunnable(p redrive.QueuePlan, dlq backends.Queue) error {
	refused := func(format string, args ...any) error {
		return &rabbitmq.RefusedError{Why: fmt.Sprintf(format, args...)}
	}
	if dlq.AutoDelete {
		// Execution consumes the DLQ; when that consumer goes, RabbitMQ
		// deletes an auto-delete queue with every message left in it.
		return refused("DLQ %q is auto-delete: RabbitMQ deletes it, with the messages not redriven, when the redrive's consumer leaves; refusing (move the messages to a durable queue first)", p.DLQ)
	}
	switch dlq.Type {
	case backends.QueueClassic:
		return nil
	case backends.QueueQuorum:
		if dlq.Wiring.DeliveryLimit != nil {
			return refused("DLQ %q is a quorum queue with delivery limit %d: passing over unselected messages counts deliveries and could drop them; refusing", p.DLQ, *dlq.Wiring.DeliveryLimit)
		}
		if !p.AcceptQuorumSideEffects {
			return refused("DLQ %q is a quorum queue: unselected and failed messages go back to the end with x-delivery-count + 1; make the plan with --accept-requeue-side-effects to allow it", p.DLQ)
		}
		return nil
	case backends.QueueStream:
		return refused("%q is a stream: messages cannot be removed one by one, so it cannot be redriven from", p.DLQ)
	}
	return fmt.Errorf("DLQ type unknown (no management API and none in the plan)")
}

// shareIncluded has the admission look records up in a run's index of
// the included records (every message admitted is in it) instead of
// building its own.
func (a *rabbitAdmission) shareIncluded(included map[string]*redrive.QueueRecord) {
	a.included = included
}

// targets splits a chunk into the messages whose plan row names the
// target their dead-lettering derives to under the plan's target mode, and
// the others, skipped as derived_mismatch (the plan was edited after its
// checks ran: such a message is never sent elsewhere).
func (a *rabbitAdmission) targets(msgs []redrive.QueueMessage) (match []redrive.QueueMessage, mismatch map[string]redrive.Verdict) {
	if a.included == nil {
		a.included = a.p.Included()
	}
	mismatch = map[string]redrive.Verdict{}
	for _, m := range msgs {
		var rec redrive.QueueRecord
		if r := a.included[m.EventID]; r != nil {
			rec = *r
		}
		x, k, ok := m.Target(a.p.Target == redrive.QueueTargetQueue)
		if !ok || x != rec.Exchange() || k != rec.RoutingKey() {
			mismatch[m.EventID] = redrive.Verdict{Reason: ReasonDerivedChanged,
				Detail: fmt.Sprintf("the plan sends it to exchange %q key %q; the message's dead-lettering says exchange %q key %q", rec.Exchange(), rec.RoutingKey(), x, k)}
			continue
		}
		match = append(match, m)
	}
	return match, mismatch
}
