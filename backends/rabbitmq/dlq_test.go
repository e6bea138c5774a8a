package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
)

// topology is a work exchange routing to a work queue whose dead letters go
// through a DLX to a DLQ; every name is unique to the test.
type topology struct {
	workX, work, dlx, dlq, key string
}

func newTopology(t *testing.T, conn *amqp.Connection, workArgs, dlqArgs amqp.Table) topology {
	t.Helper()
	tp := topology{workX: uniq(t, "work-x"), work: uniq(t, "work"), dlx: uniq(t, "dlx"), dlq: uniq(t, "dlq"), key: "rk.work"}
	declareExchange(t, conn, tp.workX)
	declareExchange(t, conn, tp.dlx)
	args := amqp.Table{"x-dead-letter-exchange": tp.dlx, "x-dead-letter-routing-key": "dead"}
	for k, v := range workArgs {
		args[k] = v
	}
	declareQueue(t, conn, tp.work, args)
	declareQueue(t, conn, tp.dlq, dlqArgs)
	bind(t, conn, tp.work, tp.key, tp.workX)
	bind(t, conn, tp.dlq, "dead", tp.dlx)
	return tp
}

// kill takes n messages from queue and rejects them without requeue.
func kill(t *testing.T, conn *amqp.Connection, queue string, n int) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i := 0; i < n; i++ {
		var d amqp.Delivery
		eventually(t, 10*time.Second, "a message to reject", func() bool {
			var ok bool
			d, ok, err = ch.Get(queue, false)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
	}
}

func workMessages(n int) []amqp.Publishing {
	var out []amqp.Publishing
	for i := 0; i < n; i++ {
		out = append(out, amqp.Publishing{
			MessageId: fmt.Sprintf("m%d", i),
			Timestamp: time.Unix(1_700_000_000+int64(i), 0),
			Headers:   amqp.Table{"error": fmt.Sprintf("timeout after %d ms on order ord-%d", 100+i, i), "n": int32(i)},
			Body:      []byte(fmt.Sprintf(`{"eventId":"e%d","n":%d}`, i, i)),
		})
	}
	return out
}

func ids(ms []Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MessageID)
	}
	return out
}

// fiveDeadLetters is a classic work queue whose 5 messages (m0..m4) were
// rejected into its classic DLQ.
func fiveDeadLetters(t *testing.T) (*amqp.Connection, topology) {
	t.Helper()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn, nil, nil)
	publishConfirmed(t, conn, tp.workX, tp.key, workMessages(5)...)
	kill(t, conn, tp.work, 5)
	eventually(t, 10*time.Second, "5 dead letters", func() bool { return readyCount(t, conn, tp.dlq) == 5 })
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
		if d.Name == tp.dlq {
			found = true
			if len(d.Sources) != 1 || d.Sources[0] != tp.work || d.Found != "wiring" {
				t.Errorf("dlq %+v: want source %s found by wiring", d, tp.work)
			}
		}
	}
	if !found {
		t.Fatalf("DLQ %s not discovered from the dead-letter wiring", tp.dlq)
	}

	opts := BrowseOptions{Limit: 100, Extractors: Extractors{ErrorHeader: "error"}}
	for pass := 0; pass < 2; pass++ {
		res, err := c.Browse(context.Background(), tp.dlq, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(ids(res.Messages)); got != "[m0 m1 m2 m3 m4]" || !res.Complete {
			t.Fatalf("pass %d: browse read %s (complete %v); want m0..m4 in order", pass, got, res.Complete)
		}
		m := res.Messages[0]
		d := m.Death
		if len(d.Deaths) != 1 || d.Deaths[0].Reason != ReasonRejected || d.Deaths[0].Queue != tp.work ||
			d.Deaths[0].Exchange != tp.workX || fmt.Sprint(d.Deaths[0].RoutingKeys) != "[rk.work]" || d.Deaths[0].Count != 1 || d.Deaths[0].Time == nil {
			t.Errorf("x-death %+v", d.Deaths)
		}
		if d.FirstDeathQueue != tp.work || d.FirstDeathReason != ReasonRejected || d.FirstDeathExchange != tp.workX || d.DeliveryCount != nil {
			t.Errorf("first death %+v", d)
		}
		if x, k, ok := d.Target(); !ok || x != tp.workX || k != tp.key {
			t.Errorf("target %q %q %v", x, k, ok)
		}
		if m.EventID != "m0" || m.ErrorHeader == "" {
			t.Errorf("event id %q error %q", m.EventID, m.ErrorHeader)
		}
		classes := Classes(res.Messages, redrive.DefaultRules)
		if len(classes) != 1 || classes[0].Count != 5 || classes[0].OriginalTopic != tp.work || classes[0].Exception != ReasonRejected || !classes[0].Transient {
			t.Errorf("classes %+v: want one transient class (timeouts) of 5 from %s", classes, tp.work)
		}
		if n := readyCount(t, conn, tp.dlq); n != 5 {
			t.Fatalf("after browse pass %d the DLQ holds %d messages, want 5", pass, n)
		}
	}
	// A partial browse keeps order too.
	res, err := c.Browse(context.Background(), tp.dlq, BrowseOptions{Limit: 2})
	if err != nil || fmt.Sprint(ids(res.Messages)) != "[m0 m1]" || res.Complete {
		t.Fatalf("partial browse: %v %v complete=%v", ids(res.Messages), err, res.Complete)
	}
	res, err = c.Browse(context.Background(), tp.dlq, BrowseOptions{Limit: 10})
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
	publishConfirmed(t, conn, tp.workX, tp.key, workMessages(3)...)
	// Requeue until the delivery limit dead-letters each message.
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "3 dead letters by delivery limit", func() bool {
		if d, ok, err := ch.Get(tp.work, false); err != nil {
			t.Fatal(err)
		} else if ok {
			_ = d.Nack(false, true)
		}
		return readyCount(t, conn, tp.dlq) == 3
	})
	ch.Close()

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	eventually(t, 20*time.Second, "the management API to see the DLQ's messages", func() bool {
		q, err := c.Queue(context.Background(), "/", tp.dlq)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := q.Total()
		return ok && n == 3
	})
	// Refused by default: nothing touched.
	_, err = c.Browse(context.Background(), tp.dlq, BrowseOptions{})
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("browse of a quorum DLQ: %v; want a refusal explaining the side effects", err)
	}
	// Accepted: the whole queue is read and returned in order, each count +1.
	for pass := int64(0); pass < 2; pass++ {
		res, err := c.Browse(context.Background(), tp.dlq, BrowseOptions{AcceptQuorumSideEffects: true, Limit: 10})
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
			if m.Death.Reason() != ReasonDeliveryLimit || m.Death.OriginalQueue() != tp.work {
				t.Errorf("%s: reason %q queue %q, want delivery_limit from %s", m.MessageID, m.Death.Reason(), m.Death.OriginalQueue(), tp.work)
			}
		}
		if n := readyCount(t, conn, tp.dlq); n != 3 {
			t.Fatalf("pass %d left %d messages, want 3", pass, n)
		}
	}
	// A partial read of a quorum queue would reorder it: refused.
	if _, err := c.Browse(context.Background(), tp.dlq, BrowseOptions{AcceptQuorumSideEffects: true, Limit: 2}); !errors.As(err, &refused) {
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
	res, err := c.BrowseEach(context.Background(), tp.dlq, BrowseOptions{Limit: 10}, func(m Message) error {
		got = append(got, fmt.Sprintf("%d:%s", m.Position, m.MessageID))
		return nil
	})
	if err != nil || fmt.Sprint(got) != "[0:m0 1:m1 2:m2 3:m3 4:m4]" || res.Read != 5 || !res.Complete || res.Messages != nil {
		t.Fatalf("BrowseEach: %v %v read=%d complete=%v kept=%d; want m0..m4 at 0..4, 5 read, complete, none kept", got, err, res.Read, res.Complete, len(res.Messages))
	}

	stop := errors.New("enough")
	got = nil
	_, err = c.BrowseEach(context.Background(), tp.dlq, BrowseOptions{Limit: 10}, func(m Message) error {
		got = append(got, m.MessageID)
		if len(got) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || fmt.Sprint(got) != "[m0 m1]" {
		t.Fatalf("stopped browse: %v after %v; want the callback's error after m0 m1", err, got)
	}
	eventually(t, 10*time.Second, "the DLQ whole again", func() bool { return readyCount(t, conn, tp.dlq) == 5 })
	after, err := c.Browse(context.Background(), tp.dlq, BrowseOptions{Limit: 10})
	if err != nil || fmt.Sprint(ids(after.Messages)) != "[m0 m1 m2 m3 m4]" || after.Read != 5 {
		t.Fatalf("after a stopped browse: %v %v read=%d; want m0..m4 in order", ids(after.Messages), err, after.Read)
	}
}
