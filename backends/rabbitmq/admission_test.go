package rabbitmq

import (
	"context"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

// noPolicy is an Admission that decides nothing: every DLQ may run and
// every message found is sent. The policy is internal/actions' (tested
// there); the tests that use it exercise the I/O.
type noPolicy struct{}

func (noPolicy) Runnable(redrive.QueuePlan, backends.Queue) error { return nil }
func (noPolicy) PassedOver(redrive.QueueMessage)                  {}
func (noPolicy) Admit(context.Context, []redrive.QueueMessage) (map[string]redrive.Verdict, error) {
	return nil, nil
}

// refuseRun refuses every run, keeping the DLQ facts the run gave it.
type refuseRun struct {
	noPolicy
	got *backends.Queue
}

func (a refuseRun) Runnable(_ redrive.QueuePlan, q backends.Queue) error {
	*a.got = q
	return &RefusedError{Why: "refused by the test's admission"}
}

// excludeAdmission excludes the ids it is given and keeps every message
// it was asked about, as the run derived it.
type excludeAdmission struct {
	noPolicy
	exclude map[string]redrive.Verdict
	asked   map[string]redrive.QueueMessage
}

func (a *excludeAdmission) Admit(_ context.Context, msgs []redrive.QueueMessage) (map[string]redrive.Verdict, error) {
	for _, m := range msgs {
		a.asked[m.EventID] = m
	}
	return a.exclude, nil
}
