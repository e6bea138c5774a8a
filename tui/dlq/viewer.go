package dlq

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/record"
)

// openViewer opens the record viewer on a list page's rows, in their order
// on screen, at the row with this id; n and p step through the rest.
func openViewer[T any](tbl table.Model, byID map[string]T, id, title string, view func(T) record.Record) tea.Cmd {
	var recs []record.Record
	start := -1
	for i := 0; i < tbl.Len(); i++ {
		row, _ := tbl.VisibleRow(i)
		x, found := byID[row.ID]
		if !found {
			continue
		}
		if row.ID == id {
			start = len(recs)
		}
		recs = append(recs, view(x))
	}
	if start < 0 {
		return nil
	}
	return tui.Push(func(env tui.PageEnv) tui.Page { return record.New(env, title, recs, start) })
}

// The record viewer's entry points on the dead-letter pages: a Kafka DLQ
// record and a RabbitMQ DLQ message, with their diagnostics as the
// viewer's fields. The viewer sanitises every field, header and payload.

// dlqRecord is a Kafka DLQ record for the viewer.
func dlqRecord(dlq string, r redrive.Parsed, done bool, class string, applied map[string]bool) record.Record {
	state := "pending"
	switch {
	case done:
		state = "redriven or settled (ledger)"
	case r.IdempotencyKey != "" && applied[r.IdempotencyKey]:
		state = "pending, but the system of record has its key: it already took effect"
	}
	d := r.Diag
	out := record.Record{
		Where: fmt.Sprintf("%s %d:%d", dlq, r.Partition, r.Offset),
		Fields: []record.Field{
			{Label: "partition", Value: fmt.Sprint(r.Partition)},
			{Label: "offset", Value: fmt.Sprint(r.Offset)},
			{Label: "timestamp", Value: r.Timestamp.UTC().Format(time.RFC3339)},
			{Label: "state", Value: state},
			{Label: "event id", Value: dash(r.EventID)},
			{Label: "idempotency key", Value: dash(r.IdempotencyKey)},
			{Label: "class", Value: class},
			{Label: "conventions", Value: dash(strings.Join(d.Conventions, ", "))},
			{Label: "first origin", Value: hop(d.FirstOrigin())},
			{Label: "last hop", Value: hop(d.LastHop()) + fmt.Sprintf("  (%d hop(s))", len(d.Hops))},
			{Label: "exception", Value: dash(d.ExceptionName())},
			{Label: "message", Value: dash(d.Message)},
			{Label: "attempts", Value: fmt.Sprintf("%d   prior redrives %d", d.Attempts, d.PriorRedrives())},
		},
		HasKey: true, KeyNull: r.KeyNull, Key: r.Key,
		ValueName: "payload", Value: r.Value,
	}
	for _, pr := range d.Problems {
		out.Fields = append(out.Fields, record.Field{Label: "problem", Value: pr})
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, record.Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// queueRecord is a RabbitMQ DLQ message for the viewer: its properties,
// the x-death history parsed (one field per entry), the other headers and
// the body.
func queueRecord(dlq string, m QueueMessage, class string, applied map[string]bool) record.Record {
	state := "pending"
	switch {
	case m.Redriven:
		state = "redriven (ledger: confirmed)"
	case m.IdempotencyKey != "" && applied[m.IdempotencyKey]:
		state = "pending, but the system of record has its key: it already took effect"
	}
	ts := "-"
	if m.PublisherTimestamp != nil {
		ts = m.PublisherTimestamp.UTC().Format(time.RFC3339) + " (publisher's clock)"
	}
	f := []record.Field{
		{Label: "position", Value: fmt.Sprintf("%d  %s  redelivered=%v", m.Position, state, m.Redelivered)},
		{Label: "event id", Value: dash(m.EventID) + " (" + dash(m.EventIDSource) + ")"},
		{Label: "message id", Value: dash(m.MessageID)},
		{Label: "idempotency key", Value: dash(m.IdempotencyKey)},
		{Label: "ordering key", Value: dash(m.OrderingKey)},
		{Label: "class", Value: class},
		{Label: "original queue", Value: dash(m.OriginalQueue) + "   reason " + dash(m.Reason)},
		{Label: "redrive target", Value: fmt.Sprintf("exchange %q routing key %s", m.Exchange, dash(m.RoutingKey))},
		{Label: "error", Value: dash(m.Error)},
		{Label: "published at", Value: ts},
		{Label: "prior redrives", Value: fmt.Sprint(m.PriorRedrives)},
	}
	if m.DeliveryCount != nil {
		f = append(f, record.Field{Label: "delivery count", Value: fmt.Sprintf("%d (x-delivery-count, quorum)", *m.DeliveryCount)})
	}
	if m.FirstDeathQueue != "" {
		f = append(f, record.Field{Label: "first death", Value: fmt.Sprintf("%s in %s via %q", m.FirstDeathReason, m.FirstDeathQueue, m.FirstDeathExchange)})
	}
	f = append(f, record.Field{Label: "x-death", Value: fmt.Sprintf("%d entr(ies), most recent first", len(m.Deaths))})
	for i, d := range m.Deaths {
		at := "?"
		if d.Time != nil {
			at = d.Time.UTC().Format(time.RFC3339)
		}
		f = append(f, record.Field{Label: fmt.Sprintf("  [%d]", i), Value: fmt.Sprintf("%s x%d in %s via %q keys %s at %s", d.Reason, d.Count, d.Queue, d.Exchange, strings.Join(d.RoutingKeys, ","), at)})
	}
	for _, bad := range m.Malformed {
		f = append(f, record.Field{Label: "malformed", Value: bad})
	}
	out := record.Record{Where: fmt.Sprintf("%s #%d", dlq, m.Position), Fields: f, ValueName: "body", Value: m.Body, ContentType: m.ContentType}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, record.Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// hop is an origin as text (raw: the viewer sanitises it).
func hop(o *redrive.Origin) string {
	if o == nil {
		return "-"
	}
	s := o.Topic
	if o.HasPartition {
		s += fmt.Sprintf("[%d]", o.Partition)
	}
	if o.HasOffset {
		s += fmt.Sprintf("@%d", o.Offset)
	}
	if !o.Timestamp.IsZero() {
		s += " " + o.Timestamp.UTC().Format(time.RFC3339)
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
