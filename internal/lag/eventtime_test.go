package lag

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
)

func TestParseEventTime(t *testing.T) {
	want := time.Date(2026, 11, 29, 8, 50, 0, 0, time.UTC)
	for in, ok := range map[string]bool{
		"2026-11-29T08:50:00Z":          true,
		"2026-11-29T09:50:00+01:00":     true,
		"2026-11-29T08:50:00.000Z":      true,
		"1795942200000":                 true,
		" 1795942200000 ":               true,
		"2026-11-29 08:50:00":           false,
		"yesterday":                     false,
		"":                              false,
		"1795942200000.5":               false,
		"99999999999999999999999999999": false,
	} {
		got, parsed := ParseEventTime(in)
		if parsed != ok || (ok && !got.Equal(want)) {
			t.Errorf("ParseEventTime(%q) = %v, %v", in, got, parsed)
		}
	}
}

// The event age is measured from the event time, not the record timestamp:
// an outbox that held an event for ten minutes shows ten minutes, however
// fresh the record's timestamp. Missing fields are counted, never guessed;
// a time ahead of now past the margin is clock error, not freshness.
func TestEventAgeBesideIngestAge(t *testing.T) {
	now := t0
	base := PartitionInput{Topic: Intern("orders"), Committed: 10, End: 20, Owner: Intern("m"),
		Probe: Probe{Known: true, Found: true, Timestamp: now.Add(-3 * time.Second), Type: backends.CreateTime}}
	ev := func(state EventState, at time.Time) EventProbe {
		return EventProbe{Rule: true, State: state, Time: at, Margin: 5 * time.Second}
	}
	rows := []PartitionLag{}
	for i, c := range []struct {
		probe     EventProbe
		known     bool
		age       time.Duration
		clockErr  bool
		committed int64
	}{
		{ev(EventFound, now.Add(-10*time.Minute)), true, 10 * time.Minute, false, 10},
		{ev(EventFound, now.Add(3*time.Second)), true, 0, false, 10},
		{ev(EventFound, now.Add(time.Minute)), true, 0, true, 10},
		{ev(EventMissing, time.Time{}), false, 0, false, 10},
		{ev(EventUnparsable, time.Time{}), false, 0, false, 10},
		{ev(EventFound, now.Add(-time.Hour)), true, 0, false, 20}, // caught up: nothing unprocessed
		{EventProbe{}, false, 0, false, 10},                       // no rule
	} {
		in := base
		in.Partition, in.Event, in.Committed = int32(i), c.probe, c.committed
		r := Evaluate(in, now, Config{})
		if r.EventAgeKnown != c.known || r.EventAge != c.age || r.EventClockError != c.clockErr {
			t.Errorf("case %d: known %v age %s clock error %v", i, r.EventAgeKnown, r.EventAge, r.EventClockError)
		}
		if r.Age != 3*time.Second && r.Lag > 0 {
			t.Errorf("case %d: the ingest age changed: %s", i, r.Age)
		}
		rows = append(rows, r)
	}
	g := RollUp(GroupInfo{Name: "g", EventSLO: 5 * time.Minute, SLO: time.Minute}, rows, Config{})
	if !g.MaxEventAgeKnown || g.MaxEventAge != 10*time.Minute || g.EventUnknown != 2 || g.EventClockErrors != 1 || !g.EventBreach || g.Breach {
		t.Fatalf("roll-up: max %s known %v unknown %d clock errors %d event breach %v breach %v",
			g.MaxEventAge, g.MaxEventAgeKnown, g.EventUnknown, g.EventClockErrors, g.EventBreach, g.Breach)
	}
}
