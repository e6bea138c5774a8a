package actions

// The RabbitMQ run loop (rabbit_run.go) against the real broker: the
// policy is stood in for (noPolicy and the others below) so that these
// exercise what the loop does with what it consumes; the policy itself is
// tested in rabbit_admit_test.go and through the CLI.

import (
	"cmp"
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
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/rabbittest"
	"github.com/berth-dev/berth/redrive"
)

// rabbitClient dials the test broker (a 5 s timeout unless o says).
func rabbitClient(t testing.TB, o rabbitmq.Options) *rabbitmq.Client {
	t.Helper()
	o.Timeout = cmp.Or(o.Timeout, 5*time.Second)
	c, err := rabbitmq.Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// messageIDs are ms' message ids, in order.
func messageIDs(ms []rabbitmq.Message) []string {
	out := make([]string, len(ms))
	for i := range ms {
		out[i] = ms[i].MessageID
	}
	return out
}

// deadLettered is the set-up most runs here start from: a topology of its
// own whose DLQ holds rabbittest.WorkMessages(n), dead-lettered from the
// work queue, a client with the management API and a SQLite ledger.
func deadLettered(t *testing.T, n int) (*amqp.Connection, rabbittest.Topology, *rabbitmq.Client, *rabbitmq.Ledger) {
	t.Helper()
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	tp := rabbittest.NewTopology(t, conn, nil, nil)
	rabbittest.PublishConfirmed(t, conn, tp.WorkX, tp.Key, rabbittest.WorkMessages(n)...)
	rabbittest.Kill(t, conn, tp.Work, n)
	rabbittest.Eventually(t, 10*time.Second, fmt.Sprintf("%d dead letters", n), func() bool { return rabbittest.ReadyCount(t, conn, tp.DLQ) == n })
	return conn, tp, rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL()}), sqliteLedger(t)
}

func sqliteLedger(t testing.TB) *rabbitmq.Ledger {
	t.Helper()
	l, err := rabbitmq.OpenLedger(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// queuePlanFor browses the DLQ and plans the selection.
func queuePlanFor(t testing.TB, c *rabbitmq.Client, dlq string, sel redrive.QueueSelection, l *rabbitmq.Ledger) redrive.QueuePlan {
	t.Helper()
	res, err := c.Browse(context.Background(), dlq, rabbitmq.BrowseOptions{Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	done, err := l.RedrivenAmong(context.Background(), res.Messages)
	if err != nil {
		t.Fatal(err)
	}
	p, err := redrive.MakeQueuePlan(rabbitmq.FactsOf(res.Messages), sel, redrive.PolicySnapshot{}, redrive.QueueCheckInput{Redriven: done}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster, p.Vhost, p.DLQ, p.QueueType = c.ClusterName(), c.Vhost(), dlq, res.Type
	return p
}

func TestRedriveClassicRoundTrip(t *testing.T) {
	t.Parallel()
	conn, tp, c, l := deadLettered(t, 6)
	p := queuePlanFor(t, c, tp.DLQ, redrive.QueueSelection{EventIDs: []string{"m1", "m3", "m4"}}, l)
	if n := len(p.Included()); n != 3 {
		t.Fatalf("plan includes %d, want 3", n)
	}
	res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 3 || len(res.Failed) != 0 || len(res.NotFound) != 0 {
		t.Fatalf("result %+v", res)
	}
	got := rabbittest.Drain(t, conn, tp.Work)
	var names []string
	for _, d := range got {
		names = append(names, d.MessageId)
		if d.Headers[rabbitmq.HeaderPlan] != p.Hash() || d.Headers[rabbitmq.HeaderAttempt] != int64(1) || d.Headers[rabbitmq.HeaderOrigin] != "%2F/"+tp.DLQ {
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
	after, err := c.Browse(context.Background(), tp.DLQ, rabbitmq.BrowseOptions{})
	if err != nil || fmt.Sprint(messageIDs(after.Messages)) != "[m0 m2 m5]" {
		t.Fatalf("DLQ after redrive: %v %v; want m0 m2 m5", messageIDs(after.Messages), err)
	}
	entries, err := l.Entries(context.Background(), p.Hash())
	if err != nil || len(entries) != 3 {
		t.Fatalf("ledger %v %v", entries, err)
	}
	for _, e := range entries {
		if e.State != rabbitmq.StateConfirmed || e.Exchange != tp.WorkX || e.RoutingKey != tp.Key {
			t.Errorf("ledger entry %+v", e)
		}
	}
	// Running the same plan again sends nothing.
	res, err = executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{})
	if err != nil || res.Sent != 0 || res.AlreadySent != 0 {
		t.Fatalf("second run: %+v %v", res, err)
	}
	// A new plan over the same DLQ excludes what the ledger has.
	p2 := queuePlanFor(t, c, tp.DLQ, redrive.QueueSelection{All: true}, l)
	if len(p2.Included()) != 3 {
		t.Errorf("second plan includes %d, want the 3 left", len(p2.Included()))
	}
}

// A publish returned unroutable fails however many chunks are in flight:
// the returns of a later chunk, drained while an earlier one settles, are
// kept for it, never read as arrivals (its DLQ copy would be acked: lost).
func TestRedriveUnroutableAcrossChunksStaysInTheDLQ(t *testing.T) {
	t.Parallel()
	const n = 40
	conn, tp, c, l := deadLettered(t, n)
	p := queuePlanFor(t, c, tp.DLQ, redrive.QueueSelection{All: true}, l)
	ch, _ := conn.Channel()
	if err := ch.QueueUnbind(tp.Work, tp.Key, tp.WorkX, nil); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	// One message a chunk: every chunk's return can arrive while an
	// earlier chunk settles.
	res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || len(res.Failed) != n || res.Returned != n {
		t.Fatalf("sent %d, failed %d, returned %d; want 0 sent and all %d failed, returned", res.Sent, len(res.Failed), res.Returned, n)
	}
	if got := rabbittest.ReadyCount(t, conn, tp.DLQ); got != n {
		t.Fatalf("the DLQ holds %d, want all %d back", got, n)
	}
}

func TestRedriveUnroutableIsAFailure(t *testing.T) {
	t.Parallel()
	conn, tp, c, l := deadLettered(t, 3)
	p := queuePlanFor(t, c, tp.DLQ, redrive.QueueSelection{All: true}, l)

	// The binding is gone: publishes are confirmed but returned.
	ch, _ := conn.Channel()
	if err := ch.QueueUnbind(tp.Work, tp.Key, tp.WorkX, nil); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || len(res.Failed) != 3 || !strings.Contains(res.Failed[0].Error, "312") {
		t.Fatalf("result %+v; want 3 failures returned with NO_ROUTE (312)", res)
	}
	if n := rabbittest.ReadyCount(t, conn, tp.DLQ); n != 3 {
		t.Fatalf("the DLQ holds %d, want all 3 back", n)
	}
	after, _ := c.Browse(context.Background(), tp.DLQ, rabbitmq.BrowseOptions{})
	if fmt.Sprint(messageIDs(after.Messages)) != "[m0 m1 m2]" {
		t.Errorf("DLQ order after failures: %v", messageIDs(after.Messages))
	}
	states, _ := l.PlanStates(context.Background(), p.Hash())
	if states["m0"] != rabbitmq.StateFailed {
		t.Errorf("ledger state %q, want failed", states["m0"])
	}

	// The exchange is gone: the broker closes the channel; still failures.
	ch, _ = conn.Channel()
	if err := ch.ExchangeDelete(tp.WorkX, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	res, err = executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || len(res.Failed) != 3 {
		t.Fatalf("missing exchange: %+v", res)
	}
	if n := rabbittest.ReadyCount(t, conn, tp.DLQ); n != 3 {
		t.Fatalf("the DLQ holds %d, want all 3 back", n)
	}
}

func TestRedriveRefusals(t *testing.T) {
	t.Parallel()
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	q := rabbittest.Uniq(t, "qdlq")
	rabbittest.DeclareQueue(t, conn, q, amqp.Table{"x-queue-type": "quorum"})
	c := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL()})
	l := sqliteLedger(t)
	p := redrive.QueuePlan{Vhost: "/", DLQ: q, QueueType: "quorum", Selection: redrive.QueueSelection{All: true},
		Records: []redrive.QueueRecord{redrive.QueueRecord{EventID: "e1", Verdict: redrive.Verdict{Included: true}}.WithOrigin(redrive.QueueOrigin{RoutingKey: q})}}
	// What may run is the policy's (rabbitAdmission) to decide: none,
	// no run.
	if _, err := executeRabbit(context.Background(), c, p, l, nil, RabbitExecOptions{}); err == nil || !strings.Contains(err.Error(), "needs an Admission") {
		t.Errorf("no admission: %v; want refused", err)
	}
	var facts backends.Queue
	var refused *rabbitmq.RefusedError
	if _, err := executeRabbit(context.Background(), c, p, l, refuseRun{got: &facts}, RabbitExecOptions{}); !errors.As(err, &refused) {
		t.Errorf("admission's refusal: %v; want it returned", err)
	}
	if facts.Type != backends.QueueQuorum {
		t.Errorf("the admission was told the DLQ is %q; want quorum (from the management API)", facts.Type)
	}
	ro := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL(), ReadOnly: true})
	if _, err := executeRabbit(context.Background(), ro, p, l, noPolicy{}, RabbitExecOptions{}); err == nil || !strings.Contains(err.Error(), "read-only") {
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
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	dlq, work := rabbittest.Uniq(t, "qdlq"), rabbittest.Uniq(t, "work")
	rabbittest.DeclareQueue(t, conn, dlq, amqp.Table{"x-queue-type": "quorum"})
	rabbittest.DeclareQueue(t, conn, work, nil)
	fillDLQ(t, conn, dlq, work, 3)
	c := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL()})
	rabbittest.Eventually(t, 20*time.Second, "statistics for the quorum DLQ", func() bool {
		q, err := c.Queue(context.Background(), "/", dlq)
		n, ok := q.Total()
		return err == nil && ok && n == 3
	})
	l := sqliteLedger(t)
	res, err := c.Browse(context.Background(), dlq, rabbitmq.BrowseOptions{Limit: 10, AcceptQuorumSideEffects: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := redrive.MakeQueuePlan(rabbitmq.FactsOf(res.Messages), redrive.QueueSelection{EventIDs: []string{"ev-00001"}}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Vhost, p.DLQ, p.QueueType = "/", dlq, "quorum"
	p.AcceptQuorumSideEffects = true
	r, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{})
	if err != nil || r.Sent != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	if got := rabbittest.Drain(t, conn, work); len(got) != 1 || got[0].MessageId != "ev-00001" {
		t.Fatalf("work queue got %v", sortedIDs(got))
	}
	rabbittest.Eventually(t, 10*time.Second, "the other two back in the DLQ", func() bool { return rabbittest.ReadyCount(t, conn, dlq) == 2 })
	left := rabbittest.Drain(t, conn, dlq)
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
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	dlq, work := rabbittest.Uniq(t, "dlq"), rabbittest.Uniq(t, "work")
	rabbittest.DeclareQueue(t, conn, dlq, nil)
	rabbittest.DeclareQueue(t, conn, work, nil)
	const n = 1600 // a segment ends after 500 deliveries holding 100: several segments
	msgs := deadLetters(work, n)
	for start := 0; start < n; start += 500 {
		rabbittest.PublishConfirmed(t, conn, "", dlq, msgs[start:min(start+500, n)]...)
	}
	c := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL(), Timeout: 30 * time.Second})
	var facts []rabbitmq.Message
	var picked, left []string
	for i, m := range msgs {
		facts = append(facts, rabbitmq.ToMessage(i, amqp.Delivery{MessageId: m.MessageId, DeliveryMode: m.DeliveryMode, Headers: m.Headers, Body: m.Body}, rabbitmq.Extractors{}))
		if i%3 == 0 {
			left = append(left, m.MessageId)
		} else {
			picked = append(picked, m.MessageId)
		}
	}
	p, err := redrive.MakeQueuePlan(rabbitmq.FactsOf(facts), redrive.QueueSelection{EventIDs: picked}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Vhost, p.DLQ, p.QueueType = c.Vhost(), dlq, "classic"
	res, err := executeRabbit(context.Background(), c, p, sqliteLedger(t), noPolicy{}, RabbitExecOptions{Window: 100, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != len(picked) || len(res.NotFound) != 0 || res.Verification == nil || !res.Verification.OK {
		t.Fatalf("sent %d of %d, not found %d, verification %+v", res.Sent, len(picked), len(res.NotFound), res.Verification)
	}
	var sent []string
	for _, d := range rabbittest.Drain(t, conn, work) {
		sent = append(sent, d.MessageId)
	}
	if fmt.Sprint(sent) != fmt.Sprint(picked) {
		t.Errorf("work queue received %d messages, not the %d selected in DLQ order", len(sent), len(picked))
	}
	after, err := c.Browse(context.Background(), dlq, rabbitmq.BrowseOptions{Limit: n})
	if err != nil || fmt.Sprint(messageIDs(after.Messages)) != fmt.Sprint(left) {
		t.Fatalf("DLQ after the run holds %d messages (%v), not the %d passed over in their order", len(after.Messages), err, len(left))
	}
}

// The console's pause and cancel: a run paused before its second chunk
// publishes nothing more while paused; cancelled there, it stops cleanly
// (the first chunk sent and recorded, the rest in the DLQ in order, no
// ledger intent for what was not published), and running the plan again
// sends exactly the rest.
func TestRedrivePauseThenCancelBetweenChunksResumes(t *testing.T) {
	t.Parallel()
	conn, tp, c, l := deadLettered(t, 6)
	p := queuePlanFor(t, c, tp.DLQ, redrive.QueueSelection{All: true}, l)
	calls := 0
	paused := make(chan struct{})
	decide := make(chan bool)
	type outcome struct {
		res RabbitResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: 2, Verify: true, Pause: func(ctx context.Context) bool {
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
	if n := rabbittest.ReadyCount(t, conn, tp.Work); n > 2 {
		t.Fatalf("the work queue holds %d while paused after one chunk of 2", n)
	}
	decide <- false // cancel from the pause
	o := <-done
	if o.err != nil || o.res.Stopped != RabbitCancelled || o.res.Sent != 2 || len(o.res.Failed) != 0 {
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
		if e.State != rabbitmq.StateConfirmed {
			t.Errorf("ledger entry %+v: want confirmed", e)
		}
	}
	after, err := c.Browse(context.Background(), tp.DLQ, rabbitmq.BrowseOptions{})
	if err != nil || fmt.Sprint(messageIDs(after.Messages)) != "[m2 m3 m4 m5]" {
		t.Fatalf("DLQ after the cancel: %v %v; want m2..m5 in order", messageIDs(after.Messages), err)
	}

	// Cancel before anything was published: nothing is lost either way.
	cancel := make(chan struct{})
	close(cancel)
	res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: 2, Cancel: cancel})
	if err != nil || res.Stopped != RabbitCancelled {
		t.Fatalf("run cancelled at once: %+v %v", res, err)
	}
	sent := 2 + res.Sent
	// Resume: exactly the rest, in order.
	res, err = executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: 2})
	if err != nil || res.Sent != 6-sent || res.AlreadySent != 0 || len(res.Failed) != 0 || res.Stopped != "" {
		t.Fatalf("resumed run: %+v %v (sent before: %d)", res, err, sent)
	}
	var got []string
	for _, d := range rabbittest.Drain(t, conn, tp.Work) {
		got = append(got, d.MessageId)
	}
	if fmt.Sprint(got) != "[m0 m1 m2 m3 m4 m5]" {
		t.Errorf("the work queue got %v, want m0..m5 once each, in order", got)
	}
	if n := rabbittest.ReadyCount(t, conn, tp.DLQ); n != 0 {
		t.Errorf("the DLQ holds %d after the resumed run", n)
	}
}

// Before it reads anything, execution hands its policy what the
// management API says about the DLQ (internal/actions refuses an auto-delete
// DLQ: its consumer leaving would make RabbitMQ delete it with every message
// not redriven); a refusal leaves the DLQ untouched.
func TestExecuteGivesTheAdmissionTheDLQsFacts(t *testing.T) {
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	dlq := rabbittest.Uniq(t, "dlq")
	if _, err := ch.QueueDeclare(dlq, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.QueueDelete(dlq, false, false, false) })
	for i := 0; i < 2; i++ {
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: fmt.Sprint("m", i), Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	c := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL()})
	p := redrive.QueuePlan{Vhost: c.Vhost(), DLQ: dlq, QueueType: "classic", Records: []redrive.QueueRecord{redrive.QueueRecord{EventID: "m0", Verdict: redrive.Verdict{Included: true}}.WithOrigin(redrive.QueueOrigin{RoutingKey: dlq})}}
	var facts backends.Queue
	_, err = executeRabbit(context.Background(), c, p, sqliteLedger(t), refuseRun{got: &facts}, RabbitExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "refused by the test's admission") {
		t.Fatalf("err %v; want the admission's refusal", err)
	}
	if !facts.AutoDelete || facts.Type != backends.QueueClassic {
		t.Errorf("the admission was told %+v; want an auto-delete classic queue", facts)
	}
	if q, err := ch.QueueDeclarePassive(dlq, false, true, false, false, nil); err != nil || q.Messages != 2 {
		t.Errorf("the DLQ must be untouched: %v %+v", err, q)
	}
}

// orderAdmission is the ordering half of rabbitAdmission: what
// the run passes over stays behind; recheck stands for the checks run again.
type orderAdmission struct {
	noPolicy
	order   *redrive.QueueOrdering
	recheck map[string]redrive.Verdict
	allow   bool
}

func (a *orderAdmission) PassedOver(m redrive.QueueMessage) {
	a.order.StaysBehind(m.OrderingKey, m.Position)
}

func (a *orderAdmission) Admit(_ context.Context, msgs []redrive.QueueMessage) (map[string]redrive.Verdict, error) {
	return a.order.Admit(msgs, a.recheck, a.allow), nil
}

// Ordering is checked again as the run consumes the DLQ (it was not, before
// plan format v2): the run tells its policy every message it passes over
// and asks before each chunk, with each message's place in the order read,
// so when an older message of the same ordering key stays in the DLQ —
// skipped by the checks run again at execute, or before the run — the newer
// one is skipped as ordering_hazard and stays too, unless hazards are
// allowed. Another key is not held up.
func TestExecuteRechecksOrderingAsItConsumes(t *testing.T) {
	t.Parallel()
	loop := redrive.Verdict{Reason: redrive.ReasonLoopLimit, Detail: "limit 1 today"}
	for _, tc := range []struct {
		name    string
		allow   bool
		skip    map[string]redrive.Verdict // before the run
		recheck map[string]redrive.Verdict // as consumed
		sent    string
		hazard  bool
	}{
		{name: "recheck skips the older", recheck: map[string]redrive.Verdict{"m0": loop}, sent: "[m2]", hazard: true},
		{name: "preflight skips the older", skip: map[string]redrive.Verdict{"m0": loop}, sent: "[m2]", hazard: true},
		{name: "hazards allowed", allow: true, skip: map[string]redrive.Verdict{"m0": loop}, sent: "[m1 m2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := rabbittest.Need(t)
			rabbittest.NeedManagement(t)
			tp := rabbittest.NewTopology(t, conn, nil, nil)
			msgs := rabbittest.WorkMessages(3)
			for i, key := range []string{"ord-1", "ord-1", "ord-2"} {
				msgs[i].Headers["order"] = key
			}
			rabbittest.PublishConfirmed(t, conn, tp.WorkX, tp.Key, msgs...)
			rabbittest.Kill(t, conn, tp.Work, 3)
			rabbittest.Eventually(t, 10*time.Second, "3 dead letters", func() bool { return rabbittest.ReadyCount(t, conn, tp.DLQ) == 3 })
			c := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL()})
			pol := redrive.PolicySnapshot{OrderingKey: "header:order"}
			res, err := c.Browse(context.Background(), tp.DLQ, rabbitmq.BrowseOptions{Limit: 10, Extractors: rabbitmq.Extractors{OrderingKey: pol.OrderingKey}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := redrive.MakeQueuePlan(rabbitmq.FactsOf(res.Messages), redrive.QueueSelection{All: true}, pol, redrive.QueueCheckInput{AllowHazards: tc.allow}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			p.Cluster, p.Vhost, p.DLQ, p.QueueType = c.ClusterName(), c.Vhost(), tp.DLQ, res.Type
			if p.Totals().Included != 3 {
				t.Fatalf("the plan includes %d, want all 3 (no hazard when it was made)", p.Totals().Included)
			}
			o := RabbitExecOptions{Skip: tc.skip}
			r, err := executeRabbit(context.Background(), c, p, sqliteLedger(t), &orderAdmission{order: redrive.NewQueueOrdering(), recheck: tc.recheck, allow: tc.allow}, o)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(sortedIDs(rabbittest.Drain(t, conn, tp.Work))); got != tc.sent {
				t.Errorf("sent %s, want %s", got, tc.sent)
			}
			var hazard *RabbitSkip
			for i := range r.Skipped {
				if r.Skipped[i].EventID == "m1" {
					hazard = &r.Skipped[i]
				}
			}
			if tc.hazard && (hazard == nil || hazard.Reason != redrive.ReasonOrderingHazard || !strings.Contains(hazard.Detail, "ord-1")) {
				t.Errorf("skipped %+v, want m1 as ordering_hazard naming its key", r.Skipped)
			}
			if !tc.hazard && hazard != nil {
				t.Errorf("hazards allowed, yet m1 was skipped: %+v", hazard)
			}
			want := 3 - len(strings.Fields(strings.Trim(tc.sent, "[]")))
			rabbittest.Eventually(t, 10*time.Second, "the rest back in the DLQ", func() bool { return rabbittest.ReadyCount(t, conn, tp.DLQ) == want })
		})
	}
}

// noPolicy is a rabbitPolicy that decides nothing: every DLQ may run and
// every message found is sent. The policy (rabbitAdmission) is tested on
// its own and through the CLI; the tests that use this exercise the run
// loop and the broker.
type noPolicy struct{}

func (noPolicy) Runnable(redrive.QueuePlan, backends.Queue) error { return nil }
func (noPolicy) PassedOver(redrive.QueueMessage)                  {}
func (noPolicy) Admit(context.Context, []redrive.QueueMessage) (map[string]redrive.Verdict, error) {
	return nil, nil
}

// refuseRun refuses every run, keeping the DLQ facts the run gave it.
type refuseRun struct {
	noPolicy
	got *backends.Queue
}

func (a refuseRun) Runnable(_ redrive.QueuePlan, q backends.Queue) error {
	*a.got = q
	return &rabbitmq.RefusedError{Why: "refused by the test's admission"}
}

// excludeAdmission excludes the ids it is given and keeps every message
// it was asked about, as the run derived it.
type excludeAdmission struct {
	noPolicy
	exclude map[string]redrive.Verdict
	asked   map[string]redrive.QueueMessage
}

func (a *excludeAdmission) Admit(_ context.Context, msgs []redrive.QueueMessage) (map[string]redrive.Verdict, error) {
	for _, m := range msgs {
		a.asked[m.EventID] = m
	}
	return a.exclude, nil
}

// Finding 3 of issue 13: execute matched DLQ messages by message_id only,
// so a different body published into the DLQ with an approved message's id
// was redriven under the approved plan. Execute must compare each
// message's content digest with the plan's, send nothing that differs, and
// report it.
func TestExecuteRefusesAMessageWhoseContentChanged(t *testing.T) {
	t.Parallel()
	conn, tp, c, l := deadLettered(t, 2)
	p := queuePlanFor(t, c, tp.DLQ, redrive.QueueSelection{EventIDs: []string{"m1"}}, l)
	if n := len(p.Included()); n != 1 {
		t.Fatalf("plan includes %d, want 1", n)
	}

	// After approval, someone takes the real m1 out of the DLQ and puts a
	// forged message there: same message_id and x-death, another body.
	// Messages gotten before m1 stay unacked and return in place when the
	// channel closes.
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var real amqp.Delivery
	for real.MessageId != "m1" {
		d, ok, err := ch.Get(tp.DLQ, false)
		if err != nil || !ok {
			t.Fatalf("m1 not found in the DLQ: %v", err)
		}
		real = d
	}
	if err := real.Ack(false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	forged := amqp.Publishing{MessageId: real.MessageId, Timestamp: real.Timestamp, Headers: real.Headers,
		Body: []byte(`{"eventId":"e1","n":1,"amount":999999}`)}
	rabbittest.PublishConfirmed(t, conn, "", tp.DLQ, forged)
	rabbittest.Eventually(t, 10*time.Second, "the forged message in the DLQ", func() bool { return rabbittest.ReadyCount(t, conn, tp.DLQ) == 2 })

	res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 {
		t.Errorf("sent %d: the forged message went out under the approved plan", res.Sent)
	}
	if got := rabbittest.Drain(t, conn, tp.Work); len(got) != 0 {
		t.Errorf("the work queue received %d message(s), first body %s", len(got), got[0].Body)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].EventID != "m1" || res.Skipped[0].Reason != ReasonChanged {
		t.Errorf("skipped %+v, want m1 reported as %s", res.Skipped, ReasonChanged)
	}
	if len(res.NotFound) != 0 {
		t.Errorf("not found %v: a changed message is reported as changed, not missing", res.NotFound)
	}
	// Nothing is lost: both messages are still in the DLQ.
	rabbittest.Eventually(t, 10*time.Second, "both messages back in the DLQ", func() bool { return rabbittest.ReadyCount(t, conn, tp.DLQ) == 2 })
}

// Findings 1 and 2 of issue 13 on RabbitMQ: a plan's author can edit their
// own plan file (its hash is an unkeyed SHA-256 they can recompute) and
// sign it: change a record's target, or its idempotency key so that the
// system-of-record check asks about another payment. The message's content
// digest still matches, but what execution judges and sends must be derived
// from the message itself: the run hands its Admission (internal/actions,
// which skips a target the message does not derive to as derived_mismatch)
// the target and key the consumed message derives to, whatever the plan in
// memory says, and a message the Admission excludes is not sent, stays in
// the DLQ and is reported with the Admission's reason.
func TestExecuteDerivesTargetAndKeyFromTheMessage(t *testing.T) {
	t.Parallel()
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	tp := rabbittest.NewTopology(t, conn, nil, nil)
	elsewhere := rabbittest.Uniq(t, "elsewhere")
	rabbittest.DeclareQueue(t, conn, elsewhere, nil)
	rabbittest.PublishConfirmed(t, conn, tp.WorkX, tp.Key, rabbittest.WorkMessages(3)...)
	rabbittest.Kill(t, conn, tp.Work, 3)
	rabbittest.Eventually(t, 10*time.Second, "3 dead letters", func() bool { return rabbittest.ReadyCount(t, conn, tp.DLQ) == 3 })

	c := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL()})
	l := sqliteLedger(t)
	p := queuePlanFor(t, c, tp.DLQ, redrive.QueueSelection{All: true}, l)
	var m2Key string
	for i := range p.Records {
		r := &p.Records[i]
		switch r.EventID {
		case "m1": // finding 2: another target, never shown as such at review
			*r = r.WithOrigin(redrive.QueueOrigin{RoutingKey: elsewhere})
		case "m2": // finding 1: another idempotency key (an invisible character):
			// a v2 plan holds no key, and execute derives it from the message
			m2Key = r.IdempotencyKey
			r.IdempotencyKey += "\u200b"
		}
	}
	const why redrive.Reason = "excluded_by_admission"
	adm := &excludeAdmission{exclude: map[string]redrive.Verdict{"m1": {Reason: why}}, asked: map[string]redrive.QueueMessage{}}
	res, err := executeRabbit(context.Background(), c, p, l, adm, RabbitExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := adm.asked["m1"]; m.Exchange != tp.WorkX || m.RoutingKey != tp.Key || !m.Routed {
		t.Errorf("the admission was told m1 goes to exchange %q key %q (routed %v), want the message's dead-lettering: %q %q", m.Exchange, m.RoutingKey, m.Routed, tp.WorkX, tp.Key)
	}
	if m := adm.asked["m2"]; m2Key == "" || m.IdempotencyKey != m2Key {
		t.Errorf("the admission was told m2's key is %q, want the message's %q", m.IdempotencyKey, m2Key)
	}
	if n := rabbittest.ReadyCount(t, conn, elsewhere); n != 0 {
		t.Errorf("%d message(s) went to the edited target", n)
	}
	got := rabbittest.Drain(t, conn, tp.Work)
	if fmt.Sprint(sortedIDs(got)) != "[m0 m2]" {
		t.Errorf("the work queue received %v, want m0 and m2 (whose key is the message's, whatever the plan in memory said)", sortedIDs(got))
	}
	for _, d := range got {
		if d.MessageId == "m2" && d.Headers[rabbitmq.HeaderAttempt] != int64(1) {
			t.Errorf("m2 was sent with attempt %v, want 1 (derived from the message)", d.Headers[rabbitmq.HeaderAttempt])
		}
	}
	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.EventID] = string(s.Reason)
	}
	if len(skipped) != 1 || skipped["m1"] != string(why) {
		t.Errorf("skipped %+v, want m1 as %s", res.Skipped, why)
	}
	rabbittest.Eventually(t, 10*time.Second, "m1 back in the DLQ", func() bool { return rabbittest.ReadyCount(t, conn, tp.DLQ) == 1 })
}
