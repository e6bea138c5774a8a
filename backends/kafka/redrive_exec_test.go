package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

func TestWatchRefailuresFindsThePlansRecords(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "x.DLT", 2, 1, nil)
	ctx := context.Background()
	c, err := Dial(ctx, Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := NewCluster(c)
	kc.Produce(t, &kgo.Record{Topic: "x.DLT", Value: []byte("before the watch"), Headers: []kgo.RecordHeader{{Key: redrive.HeaderPlan, Value: []byte("p1")}}})
	from, err := k.DLQEnds(ctx, "x.DLT")
	if err != nil {
		t.Fatal(err)
	}
	kc.Produce(t,
		&kgo.Record{Topic: "x.DLT", Value: []byte("again"), Headers: []kgo.RecordHeader{
			{Key: redrive.HeaderPlan, Value: []byte("p1")}, {Key: redrive.HeaderOrigin, Value: []byte("x.DLT/0/7")},
			{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")}}},
		&kgo.Record{Topic: "x.DLT", Value: []byte("another plan"), Headers: []kgo.RecordHeader{{Key: redrive.HeaderPlan, Value: []byte("p2")}}},
		&kgo.Record{Topic: "x.DLT", Value: []byte("a fresh failure")},
	)
	got, err := k.WatchRefailures(ctx, "x.DLT", "p1", from, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Origin != "x.DLT/0/7" || got[0].Exception != "java.net.SocketTimeoutException" {
		t.Fatalf("re-failures = %+v, want the one record of plan p1 after the watch began", got)
	}
}
