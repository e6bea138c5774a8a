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
	d, _ := redrive.ParseDigest(m.Digest) // ContentDigest's text
	return redrive.QueueMessage{
		Position: m.Position, EventID: m.EventID, EventIDSource: m.EventIDSource, IdempotencyKey: m.IdempotencyKey, Class: m.Class,
		OriginalQueue: m.Death.OriginalQueue(), DeathReason: m.Death.Reason(), Exchange: x, RoutingKey: k, Routed: ok,
		PriorRedrives: m.PriorRedrives, OrderingKey: m.OrderingKey, Timestamp: m.Timestamp, Digest: d,
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

// WritePlan writes a plan file (format v2, one line), a row at a time.
func WritePlan(path string, p redrive.QueuePlan) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := p.EncodeTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
	f, err := os.Open(path)
	if err != nil {
		return redrive.QueuePlan{}, fmt.Errorf("plan %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	p, err := redrive.DecodeQueuePlanFrom(f)
	if err != nil {
		return redrive.QueuePlan{}, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}
