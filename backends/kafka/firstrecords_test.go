package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/kafkatest"
)

// FirstRecords answers many positions at once, each with the first data
// record at or after it and its headers and value: positions of one
// partition close together share a read, far ones get a later round, and
// a position at the end has no record.
func TestFirstRecordsAnswersEveryPosition(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "events", 1, 1, nil)
	kc.CreateTopic(t, "other", 1, 1, nil)
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, &kgo.Record{Topic: "events", Value: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(i))}}})
	}
	recs = append(recs, &kgo.Record{Topic: "other", Value: []byte(`{"n":"other"}`), Headers: []kgo.RecordHeader{{Key: "n", Value: []byte("o")}}})
	kc.Produce(t, recs...)
	cl := dialCluster(t, kc)
	q := func(topic string, off, end int64) backends.RecordAt {
		return backends.RecordAt{OffsetQuery: backends.OffsetQuery{TopicPartition: backends.TopicPartition{Topic: topic}, Offset: off}, End: end}
	}
	queries := []backends.RecordAt{q("events", 150, 200), q("events", 0, 200), q("events", 5, 200), q("other", 0, 1), q("events", 199, 200), q("events", 200, 200)}
	start := time.Now()
	got, err := cl.FirstRecords(tctx(t), queries)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`{"n":150}`, `{"n":0}`, `{"n":5}`, `{"n":"other"}`, `{"n":199}`, ""} {
		a := got[i]
		if want == "" {
			if a.Found {
				t.Errorf("query %d at the end found %+v", i, a.Record)
			}
			continue
		}
		if !a.Found || string(a.Record.Value) != want || a.Record.Offset != queries[i].Offset || len(a.Record.Headers) != 1 {
			t.Errorf("query %d: found %v, %s at %d", i, a.Found, a.Record.Value, a.Record.Offset)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}
