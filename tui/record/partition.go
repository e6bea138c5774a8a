package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/charmbracelet/bubbles/key"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/tui"
)

// batch is how many records one read of a partition returns; n past the
// last one reads the next batch.
const batch = 20

func init() {
	// On a group's partition row: the record the group is stuck on.
	tui.RegisterAction(tui.Action{
		Scope: "partition",
		Key:   key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "view record")),
		Open: func(env tui.PageEnv, target string) tui.Page {
			t, err := tui.DecodePartitionTarget(target)
			if err != nil {
				return nil
			}
			return NewPartition(env, t)
		},
	})
}

// NewPartition shows the record at a group's committed offset on one
// partition (the next record the group will read, the one a stalled group
// is stuck on) and the records after it.
func NewPartition(env tui.PageEnv, t tui.PartitionTarget) *Page {
	where := fmt.Sprintf("%s[%d]", t.Topic, t.Partition)
	note := fmt.Sprintf("%s at %s's committed offset %d", where, t.Group, t.Committed)
	if t.Committed < 0 {
		note = fmt.Sprintf("%s: %s has no committed offset", where, t.Group)
	}
	return NewLoading(env, where, note, partitionLoader(t))
}

// partitionLoader reads the partition from the committed offset, a batch
// at a time; the first batch's note says how the first record relates to
// the committed offset.
func partitionLoader(t tui.PartitionTarget) Loader {
	next, first := t.Committed, true
	if next < 0 {
		next = 0 // never committed: from the log start
	}
	return func(ctx context.Context, c backends.Cluster) (Loaded, error) {
		rr, ok := c.(backends.RecordReader)
		if !ok {
			return Loaded{}, errors.New("this cluster cannot read records (RabbitMQ queues have no offsets)")
		}
		got, err := rr.ReadRecords(ctx, t.Topic, t.Partition, next, batch)
		if err != nil {
			return Loaded{}, err
		}
		out := Loaded{More: true}
		now := time.Now()
		for _, r := range got.Records {
			out.Records = append(out.Records, FromKafka(r, t, now))
			next = r.Offset + 1
		}
		if n := len(got.Records); n == 0 || got.Records[n-1].Offset+1 >= got.End {
			out.More = false
		}
		if first {
			first = false
			out.Note = CommittedNote(t, got)
			if len(out.Records) > 0 {
				out.Records[0].Note = out.Note
			}
		}
		// Lay the records out here, off the UI goroutine: pretty-printing
		// a megabyte of JSON takes tens of milliseconds.
		for i := range out.Records {
			out.Records[i].laid = lines(out.Records[i])
		}
		return out, nil
	}
}

// CommittedNote says what the group's committed offset points at.
func CommittedNote(t tui.PartitionTarget, got backends.RecordRange) string {
	where := fmt.Sprintf("%s[%d]", t.Topic, t.Partition)
	c := t.Committed
	switch {
	case c < 0 && len(got.Records) == 0:
		return fmt.Sprintf("%s has no committed offset on %s, and the partition holds no records", t.Group, where)
	case c < 0:
		return fmt.Sprintf("%s has no committed offset on %s: showing from the log start (offset %d); where it starts reading depends on its auto.offset.reset", t.Group, where, got.LogStart)
	case c < got.LogStart:
		return fmt.Sprintf("%s's committed offset %d on %s was deleted by retention (the log starts at %d): %d records were lost to it; showing from %d",
			t.Group, c, where, got.LogStart, got.LogStart-c, got.LogStart)
	case len(got.Records) == 0:
		return fmt.Sprintf("no record at %s's committed offset %d on %s yet: the group has read everything (end %d)", t.Group, c, where, got.End)
	case got.Records[0].Offset > c:
		return fmt.Sprintf("offset %d (%s's committed offset) holds no data record (a transaction marker or a compacted gap): the next record is at %d",
			c, t.Group, got.Records[0].Offset)
	}
	return fmt.Sprintf("the record at %s's committed offset %d on %s: the next record the group will read", t.Group, c, where)
}

// FromKafka is a Kafka record as the viewer shows it; t, when it names a
// group, relates the offset to the group's committed offset.
func FromKafka(r backends.Record, t tui.PartitionTarget, now time.Time) Record {
	off := fmt.Sprint(r.Offset)
	switch {
	case t.Group == "" || t.Committed < 0:
	case r.Offset == t.Committed:
		off += " (the committed offset)"
	case r.Offset > t.Committed:
		off += fmt.Sprintf(" (committed + %d)", r.Offset-t.Committed)
	}
	ts := r.Timestamp.UTC().Format(time.RFC3339Nano)
	if tt := r.TimestampType.String(); tt != "" {
		ts += " (" + tt + ")"
	}
	if age := now.Sub(r.Timestamp); age >= 0 {
		ts += ", " + durations.Format(age) + " ago"
	}
	out := Record{
		Where: fmt.Sprintf("%s[%d]@%d", r.Topic, r.Partition, r.Offset),
		Fields: []Field{
			{"topic", r.Topic},
			{"partition", fmt.Sprint(r.Partition)},
			{"offset", off},
			{"timestamp", ts},
		},
		HasKey: true, KeyNull: r.KeyNull, Key: r.Key, Value: r.Value,
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return out
}
