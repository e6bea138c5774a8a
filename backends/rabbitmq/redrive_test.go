package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

func sqliteLedger(t testing.TB) *Ledger {
	t.Helper()
	l, err := OpenLedger(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// planFor browses the DLQ and plans the selection.
func planFor(t testing.TB, c *Client, dlq string, sel redrive.QueueSelection, l *Ledger) redrive.QueuePlan {
	t.Helper()
	res, err := c.Browse(context.Background(), dlq, BrowseOptions{Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	done, err := l.RedrivenAmong(context.Background(), res.Messages)
	if err != nil {
		t.Fatal(err)
	}
	p, err := redrive.MakeQueuePlan(FactsOf(res.Messages), sel, redrive.PolicySnapshot{}, redrive.QueueCheckInput{Redriven: done}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster, p.Vhost, p.DLQ, p.QueueType = c.ClusterName(), c.Vhost(), dlq, res.Type
	return p
}

// drain consumes every message of queue (acking), returning them in order.
func drain(t testing.TB, conn *amqp.Connection, queue string) []amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

func TestRedriveClassicRoundTrip(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn, nil, nil)
	publishConfirmed(t, conn, tp.workX, tp.key, workMessages(6)...)
	kill(t, conn, tp.work, 6)
	eventually(t, 10*time.Second, "6 dead letters", func() bool { return readyCount(t, conn, tp.dlq) == 6 })

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	l := sqliteLedger(t)
	p := planFor(t, c, tp.dlq, redrive.QueueSelection{EventIDs: []string{"m1", "m3", "m4"}}, l)
	if n := len(p.Included()); n != 3 {
		t.Fatalf("plan includes %d, want 3", n)
	}
	res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}, Window: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 3 || len(res.Failed) != 0 || len(res.NotFound) != 0 {
		t.Fatalf("result %+v", res)
	}
	got := drain(t, conn, tp.work)
	var names []string
	for _, d := range got {
		names = append(names, d.MessageId)
		if d.Headers[HeaderPlan] != p.Hash() || d.Headers[HeaderAttempt] != int64(1) || d.Headers[HeaderOrigin] != "%2F/"+tp.dlq {
			t.Errorf("%s: redrive headers %v", d.MessageId, d.Headers)
		}
		if _, ok := d.Headers["x-death"]; !ok {
			t.Errorf("%s: x-death dropped; it must be kept so the history continues", d.MessageId)
		}
		if d.Headers["error"] == nil || d.Headers["n"] == nil {
			t.Errorf("%s: application headers lost: %v", d.MessageId, d.Headers)
		}
	}
	if fmt.Sprint(names) != "[m1 m3 m4]" {
		t.Errorf("work queue received %v, want m1 m3 m4 in order", names)
	}
	// The unselected messages are still in the DLQ, in order.
	after, err := c.Browse(context.Background(), tp.dlq, BrowseOptions{})
	if err != nil || fmt.Sprint(ids(after.Messages)) != "[m0 m2 m5]" {
		t.Fatalf("DLQ after redrive: %v %v; want m0 m2 m5", ids(after.Messages), err)
	}
	entries, err := l.Entries(context.Background(), p.Hash())
	if err != nil || len(entries) != 3 {
		t.Fatalf("ledger %v %v", entries, err)
	}
	for _, e := range entries {
		if e.State != StateConfirmed || e.Exchange != tp.workX || e.RoutingKey != tp.key {
			t.Errorf("ledger entry %+v", e)
		}
	}
	// Running the same plan again sends nothing.
	res, err = c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}})
	if err != nil || res.Sent != 0 || res.AlreadySent != 0 {
		t.Fatalf("second run: %+v %v", res, err)
	}
	// A new plan over the same DLQ excludes what the ledger has.
	p2 := planFor(t, c, tp.dlq, redrive.QueueSelection{All: true}, l)
	if len(p2.Included()) != 3 {
		t.Errorf("second plan includes %d, want the 3 left", len(p2.Included()))
	}
}

// A publish returned unroutable fails however many chunks are in flight:
// the returns of a later chunk, drained while an earlier one settles, are
// kept for it, never read as arrivals (its DLQ copy would be acked: lost).
func TestRedriveUnroutableAcrossChunksStaysInTheDLQ(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn, nil, nil)
	const n = 40
	publishConfirmed(t, conn, tp.workX, tp.key, workMessages(n)...)
	kill(t, conn, tp.work, n)
	eventually(t, 10*time.Second, "the dead letters", func() bool { return readyCount(t, conn, tp.dlq) == n })
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	l := sqliteLedger(t)
	p := planFor(t, c, tp.dlq, redrive.QueueSelection{All: true}, l)
	ch, _ := conn.Channel()
	if err := ch.QueueUnbind(tp.work, tp.key, tp.workX, nil); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	// One message a chunk: every chunk's return can arrive while an
	// earlier chunk settles.
	res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}, Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || len(res.Failed) != n || res.Returned != n {
		t.Fatalf("sent %d, failed %d, returned %d; want 0 sent and all %d failed, returned", res.Sent, len(res.Failed), res.Returned, n)
	}
	if got := readyCount(t, conn, tp.dlq); got != n {
		t.Fatalf("the DLQ holds %d, want all %d back", got, n)
	}
}

func TestRedriveUnroutableIsAFailure(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn, nil, nil)
	publishConfirmed(t, conn, tp.workX, tp.key, workMessages(3)...)
	kill(t, conn, tp.work, 3)
	eventually(t, 10*time.Second, "3 dead letters", func() bool { return readyCount(t, conn, tp.dlq) == 3 })
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	l := sqliteLedger(t)
	p := planFor(t, c, tp.dlq, redrive.QueueSelection{All: true}, l)

	// The binding is gone: publishes are confirmed but returned.
	ch, _ := conn.Channel()
	if err := ch.QueueUnbind(tp.work, tp.key, tp.workX, nil); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || len(res.Failed) != 3 || !strings.Contains(res.Failed[0].Error, "312") {
		t.Fatalf("result %+v; want 3 failures returned with NO_ROUTE (312)", res)
	}
	if n := readyCount(t, conn, tp.dlq); n != 3 {
		t.Fatalf("the DLQ holds %d, want all 3 back", n)
	}
	after, _ := c.Browse(context.Background(), tp.dlq, BrowseOptions{})
	if fmt.Sprint(ids(after.Messages)) != "[m0 m1 m2]" {
		t.Errorf("DLQ order after failures: %v", ids(after.Messages))
	}
	states, _ := l.PlanStates(context.Background(), p.Hash())
	if states["m0"] != StateFailed {
		t.Errorf("ledger state %q, want failed", states["m0"])
	}

	// The exchange is gone: the broker closes the channel; still failures.
	ch, _ = conn.Channel()
	if err := ch.ExchangeDelete(tp.workX, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	res, err = c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}, Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || len(res.Failed) != 3 {
		t.Fatalf("missing exchange: %+v", res)
	}
	if n := readyCount(t, conn, tp.dlq); n != 3 {
		t.Fatalf("the DLQ holds %d, want all 3 back", n)
	}
}

func TestRedriveRefusals(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	q := uniq(t, "qdlq")
	declareQueue(t, conn, q, amqp.Table{"x-queue-type": "quorum"})
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	l := sqliteLedger(t)
	p := redrive.QueuePlan{Vhost: "/", DLQ: q, QueueType: "quorum", Selection: redrive.QueueSelection{All: true},
		Records: []redrive.QueueRecord{{EventID: "e1", Exchange: "", RoutingKey: q, Verdict: redrive.Verdict{Included: true}}}}
	// What may run is the Admission's (internal/actions) to decide: none,
	// no run.
	if _, err := c.Execute(context.Background(), p, l, ExecOptions{}); err == nil || !strings.Contains(err.Error(), "needs an Admission") {
		t.Errorf("no admission: %v; want refused", err)
	}
	var facts backends.Queue
	var refused *RefusedError
	if _, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: refuseRun{got: &facts}}); !errors.As(err, &refused) {
		t.Errorf("admission's refusal: %v; want it returned", err)
	}
	if facts.Type != backends.QueueQuorum {
		t.Errorf("the admission was told the DLQ is %q; want quorum (from the management API)", facts.Type)
	}
	ro := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL(), ReadOnly: true})
	if _, err := ro.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("read-only: %v", err)
	}
}

func sortedIDs(ds []amqp.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.MessageId)
	}
	sort.Strings(out)
	return out
}

// A quorum DLQ can be redriven (internal/actions admits it when the plan
// accepts the side effects):
// the selected message goes, the others stay (moved to the back, counted).
func TestRedriveQuorumDLQWithAcceptance(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	dlq, work := uniq(t, "qdlq"), uniq(t, "work")
	declareQueue(t, conn, dlq, amqp.Table{"x-queue-type": "quorum"})
	declareQueue(t, conn, work, nil)
	fillDLQ(t, conn, dlq, work, 3)
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	eventually(t, 20*time.Second, "statistics for the quorum DLQ", func() bool {
		q, err := c.Queue(context.Background(), "/", dlq)
		n, ok := q.Total()
		return err == nil && ok && n == 3
	})
	l := sqliteLedger(t)
	res, err := c.Browse(context.Background(), dlq, BrowseOptions{Limit: 10, AcceptQuorumSideEffects: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := redrive.MakeQueuePlan(FactsOf(res.Messages), redrive.QueueSelection{EventIDs: []string{"ev-00001"}}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Vhost, p.DLQ, p.QueueType = "/", dlq, "quorum"
	p.AcceptQuorumSideEffects = true
	r, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}})
	if err != nil || r.Sent != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	if got := drain(t, conn, work); len(got) != 1 || got[0].MessageId != "ev-00001" {
		t.Fatalf("work queue got %v", sortedIDs(got))
	}
	eventually(t, 10*time.Second, "the other two back in the DLQ", func() bool { return readyCount(t, conn, dlq) == 2 })
	left := drain(t, conn, dlq)
	if fmt.Sprint(sortedIDs(left)) != "[ev-00000 ev-00002]" {
		t.Fatalf("DLQ kept %v", sortedIDs(left))
	}
}

// A run that passes over many messages consumes the DLQ on one channel per
// segment (acks behind held messages cost RabbitMQ what the channel holds):
// across the segments every selected message is sent once, in DLQ order,
// and every one passed over is back in the DLQ at its position.
func TestRedrivePassesOverManyAcrossSegmentsInOrder(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	dlq, work := uniq(t, "dlq"), uniq(t, "work")
	declareQueue(t, conn, dlq, nil)
	declareQueue(t, conn, work, nil)
	const n = 1600 // a segment ends after 500 deliveries holding 100: several segments
	msgs := deadLetters(work, n)
	for start := 0; start < n; start += 500 {
		publishConfirmed(t, conn, "", dlq, msgs[start:min(start+500, n)]...)
	}
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL(), Timeout: 30 * time.Second})
	var facts []Message
	var picked, left []string
	for i, m := range msgs {
		facts = append(facts, ToMessage(i, amqp.Delivery{MessageId: m.MessageId, DeliveryMode: m.DeliveryMode, Headers: m.Headers, Body: m.Body}, Extractors{}))
		if i%3 == 0 {
			left = append(left, m.MessageId)
		} else {
			picked = append(picked, m.MessageId)
		}
	}
	p, err := redrive.MakeQueuePlan(FactsOf(facts), redrive.QueueSelection{EventIDs: picked}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Vhost, p.DLQ, p.QueueType = c.Vhost(), dlq, "classic"
	res, err := c.Execute(context.Background(), p, sqliteLedger(t), ExecOptions{Admission: noPolicy{}, Window: 100, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != len(picked) || len(res.NotFound) != 0 || res.Verification == nil || !res.Verification.OK {
		t.Fatalf("sent %d of %d, not found %d, verification %+v", res.Sent, len(picked), len(res.NotFound), res.Verification)
	}
	var sent []string
	for _, d := range drain(t, conn, work) {
		sent = append(sent, d.MessageId)
	}
	if fmt.Sprint(sent) != fmt.Sprint(picked) {
		t.Errorf("work queue received %d messages, not the %d selected in DLQ order", len(sent), len(picked))
	}
	after, err := c.Browse(context.Background(), dlq, BrowseOptions{Limit: n})
	if err != nil || fmt.Sprint(ids(after.Messages)) != fmt.Sprint(left) {
		t.Fatalf("DLQ after the run holds %d messages (%v), not the %d passed over in their order", len(after.Messages), err, len(left))
	}
}
