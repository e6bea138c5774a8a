package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/rabbittest"
	"github.com/berth-dev/berth/redrive"
)

func ids(ms []Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MessageID)
	}
	return out
}

// fiveDeadLetters is a classic work queue whose 5 messages (m0..m4) were
// rejected into its classic DLQ.
func fiveDeadLetters(t *testing.T) (*amqp.Connection, rabbittest.Topology) {
	t.Helper()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn, nil, nil)
	publishConfirmed(t, conn, tp.WorkX, tp.Key, workMessages(5)...)
	kill(t, conn, tp.Work, 5)
	eventually(t, 10*time.Second, "5 dead letters", func() bool { return readyCount(t, conn, tp.DLQ) == 5 })
	return conn, tp
}

func TestClassicDLQRoundTripAndBrowse(t *testing.T) {
	t.Parallel()
	conn, tp := fiveDeadLetters(t)

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	dlqs, err := c.DLQs(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range dlqs {
		if d.Name == tp.DLQ {
			found = true
			if len(d.Sources) != 1 || d.Sources[0] != tp.Work || d.Found != "wiring" {
				t.Errorf("dlq %+v: want source %s found by wiring", d, tp.Work)
			}
		}
	}
	if !found {
		t.Fatalf("DLQ %s not discovered from the dead-letter wiring", tp.DLQ)
	}

	opts := BrowseOptions{Limit: 100, Extractors: Extractors{ErrorHeader: "error"}}
	for pass := 0; pass < 2; pass++ {
		res, err := c.Browse(context.Background(), tp.DLQ, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(ids(res.Messages)); got != "[m0 m1 m2 m3 m4]" || !res.Complete {
			t.Fatalf("pass %d: browse read %s (complete %v); want m0..m4 in order", pass, got, res.Complete)
		}
		m := res.Messages[0]
		d := m.Death
		if len(d.Deaths) != 1 || d.Deaths[0].Reason != ReasonRejected || d.Deaths[0].Queue != tp.Work ||
			d.Deaths[0].Exchange != tp.WorkX || fmt.Sprint(d.Deaths[0].RoutingKeys) != "[rk.work]" || d.Deaths[0].Count != 1 || d.Deaths[0].Time == nil {
			t.Errorf("x-death %+v", d.Deaths)
		}
		if d.FirstDeathQueue != tp.Work || d.FirstDeathReason != ReasonRejected || d.FirstDeathExchange != tp.WorkX || d.DeliveryCount != nil {
			t.Errorf("first death %+v", d)
		}
		if x, k, ok := d.Target(); !ok || x != tp.WorkX || k != tp.Key {
			t.Errorf("target %q %q %v", x, k, ok)
		}
		if m.EventID != "m0" || m.ErrorHeader == "" {
			t.Errorf("event id %q error %q", m.EventID, m.ErrorHeader)
		}
		classes := Classes(res.Messages, redrive.DefaultRules)
		if len(classes) != 1 || classes[0].Count != 5 || classes[0].OriginalTopic != tp.Work || classes[0].Exception != ReasonRejected || !classes[0].Transient {
			t.Errorf("classes %+v: want one transient class (timeouts) of 5 from %s", classes, tp.Work)
		}
		if n := readyCount(t, conn, tp.DLQ); n != 5 {
			t.Fatalf("after browse pass %d the DLQ holds %d messages, want 5", pass, n)
		}
	}
	// A partial browse keeps order too.
	res, err := c.Browse(context.Background(), tp.DLQ, BrowseOptions{Limit: 2})
	if err != nil || fmt.Sprint(ids(res.Messages)) != "[m0 m1]" || res.Complete {
		t.Fatalf("partial browse: %v %v complete=%v", ids(res.Messages), err, res.Complete)
	}
	res, err = c.Browse(context.Background(), tp.DLQ, BrowseOptions{Limit: 10})
	if err != nil || fmt.Sprint(ids(res.Messages)) != "[m0 m1 m2 m3 m4]" {
		t.Fatalf("after a partial browse: %v %v", ids(res.Messages), err)
	}
}

func TestQuorumDLQRoundTripAndBrowse(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn,
		amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(1)},
		amqp.Table{"x-queue-type": "quorum"})
	publishConfirmed(t, conn, tp.WorkX, tp.Key, workMessages(3)...)
	// Requeue until the delivery limit dead-letters each message.
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "3 dead letters by delivery limit", func() bool {
		if d, ok, err := ch.Get(tp.Work, false); err != nil {
			t.Fatal(err)
		} else if ok {
			_ = d.Nack(false, true)
		}
		return readyCount(t, conn, tp.DLQ) == 3
	})
	ch.Close()

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	eventually(t, 20*time.Second, "the management API to see the DLQ's messages", func() bool {
		q, err := c.Queue(context.Background(), "/", tp.DLQ)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := q.Total()
		return ok && n == 3
	})
	// Refused by default: nothing touched.
	_, err = c.Browse(context.Background(), tp.DLQ, BrowseOptions{})
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("browse of a quorum DLQ: %v; want a refusal explaining the side effects", err)
	}
	// Accepted: the whole queue is read and returned in order, each count +1.
	for pass := int64(0); pass < 2; pass++ {
		res, err := c.Browse(context.Background(), tp.DLQ, BrowseOptions{AcceptQuorumSideEffects: true, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(ids(res.Messages)); got != "[m0 m1 m2]" {
			t.Fatalf("pass %d read %s, want m0 m1 m2 in order", pass, got)
		}
		for _, m := range res.Messages {
			if m.Death.DeliveryCount == nil || *m.Death.DeliveryCount != pass {
				t.Errorf("pass %d: %s x-delivery-count %v, want %d (the refused browse touched nothing)", pass, m.MessageID, m.Death.DeliveryCount, pass)
			}
			if m.Death.Reason() != ReasonDeliveryLimit || m.Death.OriginalQueue() != tp.Work {
				t.Errorf("%s: reason %q queue %q, want delivery_limit from %s", m.MessageID, m.Death.Reason(), m.Death.OriginalQueue(), tp.Work)
			}
		}
		if n := readyCount(t, conn, tp.DLQ); n != 3 {
			t.Fatalf("pass %d left %d messages, want 3", pass, n)
		}
	}
	// A partial read of a quorum queue would reorder it: refused.
	if _, err := c.Browse(context.Background(), tp.DLQ, BrowseOptions{AcceptQuorumSideEffects: true, Limit: 2}); !errors.As(err, &refused) {
		t.Errorf("partial quorum browse: %v; want refused", err)
	}
}

func TestQuorumDLQWithDeliveryLimitIsNeverBrowsed(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	q := uniq(t, "qdl")
	declareQueue(t, conn, q, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(2)})
	publishConfirmed(t, conn, "", q, amqp.Publishing{MessageId: "only"})
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	var refused *RefusedError
	if _, err := c.Browse(context.Background(), q, BrowseOptions{AcceptQuorumSideEffects: true}); !errors.As(err, &refused) {
		t.Fatalf("browse with a delivery limit: %v; want refused even when side effects are accepted", err)
	}
	if n := readyCount(t, conn, q); n != 1 {
		t.Fatalf("%d messages left, want 1", n)
	}
}

func TestConfiguredDLQsInReducedMode(t *testing.T) {
	t.Parallel()
	needRabbit(t)
	c := testClient(t, Options{AMQPURL: amqpURL()})
	dlqs, err := c.DLQs(context.Background(), []config.DLQPair{{DLQ: "jobs.dlq", Original: "jobs"}})
	if err != nil || len(dlqs) != 1 || dlqs[0].Found != "config" || dlqs[0].Sources[0] != "jobs" {
		t.Fatalf("%+v %v", dlqs, err)
	}
	var refused *RefusedError
	if _, err := c.Browse(context.Background(), "jobs.dlq", BrowseOptions{}); !errors.As(err, &refused) {
		t.Fatalf("browse with unknown type in reduced mode: %v; want a refusal asking for the type", err)
	}
}

// BrowseEach (what redrive plan reads with) hands the messages over one at
// a time, in order with their positions; the callback's error stops the
// browse, and every message read, handed over or not, is back in place.
func TestBrowseEachHandsOverInOrderAndStopsOnError(t *testing.T) {
	t.Parallel()
	conn, tp := fiveDeadLetters(t)
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})

	var got []string
	res, err := c.BrowseEach(context.Background(), tp.DLQ, BrowseOptions{Limit: 10}, func(m Message) error {
		got = append(got, fmt.Sprintf("%d:%s", m.Position, m.MessageID))
		return nil
	})
	if err != nil || fmt.Sprint(got) != "[0:m0 1:m1 2:m2 3:m3 4:m4]" || res.Read != 5 || !res.Complete || res.Messages != nil {
		t.Fatalf("BrowseEach: %v %v read=%d complete=%v kept=%d; want m0..m4 at 0..4, 5 read, complete, none kept", got, err, res.Read, res.Complete, len(res.Messages))
	}

	stop := errors.New("enough")
	got = nil
	_, err = c.BrowseEach(context.Background(), tp.DLQ, BrowseOptions{Limit: 10}, func(m Message) error {
		got = append(got, m.MessageID)
		if len(got) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || fmt.Sprint(got) != "[m0 m1]" {
		t.Fatalf("stopped browse: %v after %v; want the callback's error after m0 m1", err, got)
	}
	eventually(t, 10*time.Second, "the DLQ whole again", func() bool { return readyCount(t, conn, tp.DLQ) == 5 })
	after, err := c.Browse(context.Background(), tp.DLQ, BrowseOptions{Limit: 10})
	if err != nil || fmt.Sprint(ids(after.Messages)) != "[m0 m1 m2 m3 m4]" || after.Read != 5 {
		t.Fatalf("after a stopped browse: %v %v read=%d; want m0..m4 in order", ids(after.Messages), err, after.Read)
	}
}

// A browse longer than one segment (one channel's prefetch) reads the
// messages in queue order across its channels, and leaves the queue as it
// was: the same depth and the same order, whether it read the whole queue
// or stopped part-way through a segment.
func TestMultiSegmentBrowseKeepsOrderAndDepth(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	q := uniq(t, "segments")
	declareQueue(t, conn, q, nil)
	n := 2*browseSegment + 500
	msgs := make([]amqp.Publishing, n)
	want := make([]string, n)
	for i := range msgs {
		want[i] = fmt.Sprintf("s%d", i)
		msgs[i] = amqp.Publishing{MessageId: want[i], Body: []byte(want[i])}
	}
	publishConfirmed(t, conn, "", q, msgs...)
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})

	read := func(limit int) ([]string, BrowseResult) {
		t.Helper()
		var got []string
		res, err := c.BrowseEach(context.Background(), q, BrowseOptions{Limit: limit}, func(m Message) error {
			if m.Position != len(got) {
				t.Fatalf("message %s at position %d, want %d", m.MessageID, m.Position, len(got))
			}
			got = append(got, m.MessageID)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, res
	}
	for _, limit := range []int{n + 1, browseSegment + 7} {
		got, res := read(limit)
		wantRead := min(limit, n)
		if fmt.Sprint(got) != fmt.Sprint(want[:wantRead]) || res.Read != wantRead || res.Complete != (limit > n) {
			t.Fatalf("browse of %d: read %d (complete %v), in order %v; want %d in queue order", limit, res.Read, res.Complete, fmt.Sprint(got) == fmt.Sprint(want[:len(got)]), wantRead)
		}
		if d := readyCount(t, conn, q); d != n {
			t.Fatalf("after a browse of %d the queue holds %d ready, want %d", limit, d, n)
		}
	}
	// The queue's own consumer finds every message, in the original order.
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var after []string
	for {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		after = append(after, d.MessageId)
	}
	if fmt.Sprint(after) != fmt.Sprint(want) {
		t.Fatalf("after the browses a consumer got %d messages, in the original order: %v", len(after), fmt.Sprint(after) == fmt.Sprint(want))
	}
}
