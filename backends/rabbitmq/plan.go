package rabbitmq

import (
	"errors"
	"fmt"
	"os"

	"github.com/berth-dev/berth/redrive"
)

// RabbitMQ redrive plans are plan format v2 (redrive.QueuePlan): the checks
// that make them are pure and live in package redrive; this file only
// reads and writes plan files and derives, from a browsed message, what the
// checks and a reviewer know about it.

// Facts is what the checks and a reviewer know about m (derived with the
// extractors it was read with).
func (m Message) Facts() redrive.QueueMessage {
	x, k, ok := m.Death.Target()
	return redrive.QueueMessage{
		Position: m.Position, EventID: m.EventID, EventIDSource: m.EventIDSource, IdempotencyKey: m.IdempotencyKey, Class: m.Class,
		OriginalQueue: m.Death.OriginalQueue(), DeathReason: m.Death.Reason(), Exchange: x, RoutingKey: k, Routed: ok,
		PriorRedrives: m.PriorRedrives, OrderingKey: m.OrderingKey, Timestamp: m.Timestamp, Digest: m.Digest,
	}
}

// FactsOf is Facts for every message, in order.
func FactsOf(msgs []Message) []redrive.QueueMessage {
	out := make([]redrive.QueueMessage, len(msgs))
	for i, m := range msgs {
		out[i] = m.Facts()
	}
	return out
}

// WritePlan writes a plan file (format v2, one line).
func WritePlan(path string, p redrive.QueuePlan) error {
	b, err := p.Encode()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ErrPlanEdited means a plan file's content does not hash to the hash it
// carries (edited after it was made; its approvals would not cover it).
//
// It is the same sentinel as redrive.ErrHashMismatch (errors.Is matches
// either) with the message RabbitMQ users already see.
var ErrPlanEdited = redrive.PlanEditedError("content does not match its hash (edited?)")

// ReadPlan reads a plan file and checks its hash: a plan edited by hand is
// refused (its approvals would not cover it), and so is a v1 plan
// (redrive.ErrQueuePlanV1: make it again).
func ReadPlan(path string) (redrive.QueuePlan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return redrive.QueuePlan{}, fmt.Errorf("plan %s: %w", path, errors.Unwrap(err))
	}
	p, err := redrive.DecodeQueuePlan(b)
	if err != nil {
		return redrive.QueuePlan{}, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}
