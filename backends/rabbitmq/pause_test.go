package rabbitmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/redrive"
)

// The console's pause and cancel: a run paused before its second chunk
// publishes nothing more while paused; cancelled there, it stops cleanly
// (the first chunk sent and recorded, the rest in the DLQ in order, no
// ledger intent for what was not published), and running the plan again
// sends exactly the rest.
func TestRedrivePauseThenCancelBetweenChunksResumes(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn, nil, nil)
	publishConfirmed(t, conn, tp.workX, tp.key, workMessages(6)...)
	kill(t, conn, tp.work, 6)
	eventually(t, 10*time.Second, "6 dead letters", func() bool { return readyCount(t, conn, tp.dlq) == 6 })

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	l := sqliteLedger(t)
	p := planFor(t, c, tp.dlq, redrive.QueueSelection{All: true}, l)
	calls := 0
	paused := make(chan struct{})
	decide := make(chan bool)
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}, Window: 2, Verify: true, Pause: func(ctx context.Context) bool {
			calls++
			if calls == 1 {
				return true
			}
			paused <- struct{}{}
			return <-decide
		}})
		done <- outcome{res, err}
	}()
	select {
	case <-paused:
	case o := <-done:
		t.Fatalf("the run ended without pausing before its second chunk: %+v %v", o.res, o.err)
	}
	// Paused before the second chunk: it has not been published (the
	// first chunk may still be settling).
	if n := readyCount(t, conn, tp.work); n > 2 {
		t.Fatalf("the work queue holds %d while paused after one chunk of 2", n)
	}
	decide <- false // cancel from the pause
	o := <-done
	if o.err != nil || o.res.Stopped != Cancelled || o.res.Sent != 2 || len(o.res.Failed) != 0 {
		t.Fatalf("cancelled run: %+v %v", o.res, o.err)
	}
	if v := o.res.Verification; v == nil || !v.OK || v.DepthAfter != 4 {
		t.Errorf("verification after the cancel: %+v", v)
	}
	entries, err := l.Entries(context.Background(), p.Hash())
	if err != nil || len(entries) != 2 {
		t.Fatalf("ledger after the cancel: %+v %v; want the 2 sent only", entries, err)
	}
	for _, e := range entries {
		if e.State != StateConfirmed {
			t.Errorf("ledger entry %+v: want confirmed", e)
		}
	}
	after, err := c.Browse(context.Background(), tp.dlq, BrowseOptions{})
	if err != nil || fmt.Sprint(ids(after.Messages)) != "[m2 m3 m4 m5]" {
		t.Fatalf("DLQ after the cancel: %v %v; want m2..m5 in order", ids(after.Messages), err)
	}

	// Cancel before anything was published: nothing is lost either way.
	cancel := make(chan struct{})
	close(cancel)
	res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}, Window: 2, Cancel: cancel})
	if err != nil || res.Stopped != Cancelled {
		t.Fatalf("run cancelled at once: %+v %v", res, err)
	}
	sent := 2 + res.Sent
	// Resume: exactly the rest, in order.
	res, err = c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}, Window: 2})
	if err != nil || res.Sent != 6-sent || res.AlreadySent != 0 || len(res.Failed) != 0 || res.Stopped != "" {
		t.Fatalf("resumed run: %+v %v (sent before: %d)", res, err, sent)
	}
	var got []string
	for _, d := range drain(t, conn, tp.work) {
		got = append(got, d.MessageId)
	}
	if fmt.Sprint(got) != "[m0 m1 m2 m3 m4 m5]" {
		t.Errorf("the work queue got %v, want m0..m5 once each, in order", got)
	}
	if n := readyCount(t, conn, tp.dlq); n != 0 {
		t.Errorf("the DLQ holds %d after the resumed run", n)
	}
}
