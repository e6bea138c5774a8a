package monitor

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/redrive"
)

// Event-time age comes from the record's payload or header, not its
// timestamp: an outbox that held events for ten minutes before publishing
// them shows ten minutes of event age beside a few seconds of ingest age,
// to the second. A missing or unparsable field is counted, a time ahead of
// now past the margin is clock error.
func TestEventTimeBesideIngestAge(t *testing.T) {
	jsonField, _ := redrive.ParseField("json:event.time")
	header, _ := redrive.ParseField("header:event-time")
	r := newRig(t, 1, Config{
		EventTime: []EventRule{{Match: "outbox-*", Field: jsonField, Margin: 5 * time.Second}, {Match: "clicks", Field: header, Margin: 5 * time.Second}},
		EventSLO:  func(string) time.Duration { return 5 * time.Minute },
	})
	// One partition each: the test client's partitioner picks partitions.
	for _, n := range []string{"outbox-a", "outbox-b", "outbox-c", "outbox-d", "outbox-e", "clicks", "plain"} {
		r.kc.CreateTopic(t, n, 1, 1, nil)
	}
	now := r.clock.now()
	ingest := now.Add(-4 * time.Second)
	payload := func(at string) []byte { return []byte(fmt.Sprintf(`{"id":"o-1","event":{"time":%s}}`, at)) }
	rfc := func(d time.Duration) string { return strconv.Quote(now.Add(d).UTC().Format(time.RFC3339Nano)) }
	r.kc.Produce(t,
		// p0: RFC 3339, ten minutes before it was published.
		&kgo.Record{Topic: "outbox-a", Timestamp: ingest, Value: payload(rfc(-10 * time.Minute))},
		// p1: epoch milliseconds (a JSON number), 90 s before.
		&kgo.Record{Topic: "outbox-b", Timestamp: ingest, Value: payload(strconv.FormatInt(now.Add(-90*time.Second).UnixMilli(), 10))},
		// p2: no such field; p3: not a time; p4: a minute in the future.
		&kgo.Record{Topic: "outbox-c", Timestamp: ingest, Value: []byte(`{"id":"o-3"}`)},
		&kgo.Record{Topic: "outbox-d", Timestamp: ingest, Value: payload(`"soon"`)},
		&kgo.Record{Topic: "outbox-e", Timestamp: ingest, Value: payload(rfc(time.Minute))},
		&kgo.Record{Topic: "clicks", Timestamp: ingest, Headers: []kgo.RecordHeader{{Key: "event-time", Value: []byte(now.Add(-42 * time.Second).UTC().Format(time.RFC3339))}}},
		&kgo.Record{Topic: "plain", Timestamp: ingest, Value: payload(rfc(-time.Hour))},
	)
	r.kc.Commit(t, "shipper", map[string]map[int32]int64{"outbox-a": {0: 0}, "outbox-b": {0: 0}, "outbox-c": {0: 0}, "outbox-d": {0: 0}, "outbox-e": {0: 0}, "clicks": {0: 0}, "plain": {0: 0}})

	s := r.refresh(t)
	for _, c := range []struct {
		topic    string
		p        int32
		known    bool
		age      time.Duration
		state    lag.EventState
		clockErr bool
	}{
		{"outbox-a", 0, true, 10 * time.Minute, lag.EventFound, false},
		{"outbox-b", 0, true, 90 * time.Second, lag.EventFound, false},
		{"outbox-c", 0, false, 0, lag.EventMissing, false},
		{"outbox-d", 0, false, 0, lag.EventUnparsable, false},
		{"outbox-e", 0, true, 0, lag.EventFound, true},
		{"clicks", 0, true, 42 * time.Second, lag.EventFound, false},
	} {
		row := partRow(t, s, "shipper", c.topic, c.p)
		if row.EventAgeKnown != c.known || row.EventAge != c.age || row.EventState != c.state || row.EventClockError != c.clockErr {
			t.Errorf("%s[%d]: event age %s known %v state %s clock error %v", c.topic, c.p, row.EventAge, row.EventAgeKnown, row.EventState, row.EventClockError)
		}
		if row.Age != 4*time.Second {
			t.Errorf("%s[%d]: ingest age %s, want the record timestamp's 4s", c.topic, c.p, row.Age)
		}
	}
	if plain := partRow(t, s, "shipper", "plain", 0); plain.EventRule || plain.EventAgeKnown {
		t.Errorf("a topic without a rule has an event age: %+v", plain)
	}
	g, _ := s.Group("shipper")
	if g.MaxEventAge != 10*time.Minute || g.EventUnknown != 2 || g.EventClockErrors != 1 || !g.EventBreach || g.Breach {
		t.Fatalf("roll-up: max event age %s, unknown %d, clock errors %d, event breach %v, breach %v", g.MaxEventAge, g.EventUnknown, g.EventClockErrors, g.EventBreach, g.Breach)
	}
	// The event time moves with the clock without reading the records again.
	r.clock.add(30 * time.Second)
	s = r.refresh(t)
	if row := partRow(t, s, "shipper", "outbox-a", 0); row.EventAge != 10*time.Minute+30*time.Second {
		t.Fatalf("event age after 30s: %s", row.EventAge)
	}
}
