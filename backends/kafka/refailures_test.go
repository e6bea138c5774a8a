package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

// TestWatchEndsWhenTheConsumersPassTheCopies: the re-failure watch ends as
// soon as every group reading the copies' topic has committed past them
// (and reports the copy that failed again meanwhile), instead of running
// out its window; closing Stop leaves it early; with no group on the topic
// it watches the whole window and says why.
func TestWatchEndsWhenTheConsumersPassTheCopies(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "pay", 2, 1, nil)
	kc.CreateTopic(t, "pay.DLT", 1, 1, nil)
	ctx := context.Background()
	c, err := Dial(ctx, Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := NewCluster(c)
	from, err := k.DLQEnds(ctx, "pay.DLT")
	if err != nil {
		t.Fatal(err)
	}
	copies := []redrive.LedgerEntry{
		{Target: "pay", TargetPartition: 0, TargetOffset: 4},
		{Target: "pay", TargetPartition: 1, TargetOffset: 9},
	}
	commit := func(group string, p0, p1 int64) {
		t.Helper()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "pay", Partition: 0, At: p0})
		offs.Add(kadm.Offset{Topic: "pay", Partition: 1, At: p1})
		if _, err := kc.Admin.CommitOffsets(ctx, group, offs); err != nil {
			t.Fatal(err)
		}
	}

	// No group reads "pay": the whole (short) window.
	w := Watch{DLQ: "pay.DLT", Plan: "p1", From: from, Max: 700 * time.Millisecond, Copies: copies}
	res, err := k.WatchRefailuresUntil(ctx, w)
	if err != nil || res.Ended != WatchTimeout || len(res.Groups) != 0 {
		t.Fatalf("no consumers: %+v %v", res, err)
	}

	// A group behind the copies, then past them, with a re-failure between.
	commit("payments-svc", 5, 3)
	stop := make(chan struct{})
	done := make(chan WatchResult, 1)
	go func() {
		w := w
		w.Max, w.Stop = 2*time.Minute, stop
		r, err := k.WatchRefailuresUntil(ctx, w)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	kc.Produce(t, &kgo.Record{Topic: "pay.DLT", Value: []byte("again"), Headers: []kgo.RecordHeader{
		{Key: redrive.HeaderPlan, Value: []byte("p1")}, {Key: redrive.HeaderOrigin, Value: []byte("pay.DLT/0/3")}}})
	commit("payments-svc", 5, 10)
	res = <-done
	if res.Ended != WatchCaughtUp || len(res.Groups) != 1 || len(res.Refailed) != 1 || res.Refailed[0].Origin != "pay.DLT/0/3" {
		t.Fatalf("caught up: %+v", res)
	}

	// A second group that never catches up: the operator leaves early.
	commit("audit-svc", 0, 0)
	close(stop)
	w.Max, w.Stop = 2*time.Minute, stop
	res, err = k.WatchRefailuresUntil(ctx, w)
	if err != nil || res.Ended != WatchStopped {
		t.Fatalf("stopped: %+v %v", res, err)
	}
}
