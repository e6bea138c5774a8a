package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/rabbittest"
)

// BenchmarkRabbitRedriveScale is RabbitMQ's figure a user gets: N
// payment messages (BERTH_SCALE_RECORDS, default 10,000) dead-lettered into
// a DLQ on the machine's RabbitMQ (with x-death as the broker writes it),
// the real PostgreSQL as system of record (one in ten captured) and as the
// redrive ledger, and the berth binary running redrive plan --all and
// execute --yes (pipelined confirms, ledger intent and completion, audit of
// each chunk mirrored to the berth.audit stream, acks after confirms, the
// depth check). Beside it, in the same run, two baselines of the broker's
// own: a plain confirmed publish of the same messages (window 500, one
// channel: more channels, bigger windows or transient messages were no
// faster into one classic queue here) and a bare move of them from one
// queue to another (consume, confirmed publish, ack: the broker's share of
// a redrive without Berth's ledger, checks or audit), then a move of
// them that passes over one in ten as this plan has execute do
// (movePassingOver: what that costs the broker, which the bare move does
// not pay). ratio is execute's messages/s over the publish's, move-ratio
// over the move's, pass-move-ratio over the passing move's. Between plan
// and execute a second person approves the plan and `redrive show -o json`
// prints it; after it, `redrive status` reports it: each step's wall time
// and peak RSS are logged. It fails
// unless every included message reached the work queue and the captured
// ones stayed; it never asserts a duration.
//
//	BERTH_SCALE_RECORDS=100000 go test ./cmd/berth -run '^$' -bench RabbitRedriveScale -benchtime 1x -timeout 30m
//
// BERTH_SCALE_QUEUE_MODE=lazy declares every queue lazy.
// BERTH_SCALE_STEPS=plan stops after the plan; BERTH_SCALE_STEPS=memory
// leaves out the baseline (at 1,000,000 messages it is minutes long, and
// only the ratio needs it); BERTH_SCALE_STEPS=execute leaves out the
// baseline and the reviews too (`redrive approve` and `show` each read the
// whole DLQ again: at 1,000,000 messages, many minutes each), with a
// policy that requires no review. Each step's figures are logged as soon
// as it ends, so a run stopped later still has them.
func BenchmarkRabbitRedriveScale(b *testing.B) {
	n := 10000
	if v, _ := strconv.Atoi(os.Getenv("BERTH_SCALE_RECORDS")); v > 0 {
		n = v
	}
	var execS, execCPU, baseS, moveS, passS, planS float64
	var peak, planPeak, planBytes float64
	sent := 0
	for i := 0; i < b.N; i++ {
		r := rabbitRedriveAtScale(b, n)
		execS += r.exec.wall.Seconds()
		execCPU += r.exec.cpu.Seconds()
		planS += r.plan.wall.Seconds()
		baseS += r.baseline.Seconds()
		moveS += r.move.Seconds()
		passS += r.passMove.Seconds()
		peak, planPeak = max(peak, r.exec.mib()), max(planPeak, r.plan.mib())
		sent += r.sent
		planBytes += float64(r.planBytes)
	}
	// BERTH_SCALE_STEPS leaves out the execute ("plan") or the baseline
	// ("memory"): their metrics are reported only when measured.
	if execS > 0 {
		b.ReportMetric(float64(sent)/execS, "msgs/s")
		b.ReportMetric(peak, "execute-peak-RSS-MiB")
		if sent > 0 {
			b.ReportMetric(execCPU*1e6/float64(sent), "execute-CPU-µs/msg")
		}
	}
	if baseS > 0 {
		b.ReportMetric(float64(n*b.N)/baseS, "baseline-msgs/s")
		b.ReportMetric((float64(sent)/execS)/(float64(n*b.N)/baseS), "ratio")
		b.ReportMetric(float64(n*b.N)/moveS, "move-msgs/s")
		b.ReportMetric((float64(sent)/execS)/(float64(n*b.N)/moveS), "move-ratio")
		// The plan sends 9 in 10 (sent): the passing move sends as many.
		b.ReportMetric(float64(sent)/passS, "pass-move-msgs/s")
		b.ReportMetric((float64(sent)/execS)/(float64(sent)/passS), "pass-move-ratio")
	}
	b.ReportMetric(planS/float64(b.N), "plan-s")
	b.ReportMetric(planPeak, "plan-peak-RSS-MiB")
	b.ReportMetric(planBytes/float64(n*b.N), "plan-B/msg")
}

// step runs a step of the redrive and fails the benchmark when it fails.
func (r *scaleRig) step(t testing.TB, name string, args ...string) step {
	t.Helper()
	s := r.run(t, args...)
	if s.code != 0 {
		t.Fatalf("%s: exit %d: %s", name, s.code, s.stderr)
	}
	return s
}

// rabbitScaleRun is one run of the measurement.
type rabbitScaleRun struct {
	plan, exec step
	sent       int
	// baseline is the plain confirmed publish's time, move the bare move's,
	// passMove the move passing over what the plan leaves.
	baseline, move, passMove time.Duration
	// planBytes is the plan file's size.
	planBytes int64
}

func rabbitRedriveAtScale(t testing.TB, n int) rabbitScaleRun {
	t.Helper()
	isolateConfig(t)
	rabbitQueue(t)
	dsn, pg := rmqPostgres(t)
	ctx := context.Background()
	sfx := strconv.FormatInt(time.Now().UnixNano(), 10)
	table := "scale_rmq_payments_" + sfx
	if _, err := pg.Exec(ctx, "create table "+table+" (idem text primary key)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pg.Exec(context.Background(), "drop table if exists "+table) })
	var rows [][]any
	for i := 0; i < n; i += 10 {
		rows = append(rows, []any{sfx + "-" + paymentID(i)})
	}
	if _, err := pg.CopyFrom(ctx, pgx.Identifier{table}, []string{"idem"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(testAMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the queues are deleted (cleanups run last-in first-out).
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	work, dlq, base, moved, passed := "berth.scale.work."+sfx, "berth.scale.dlq."+sfx, "berth.scale.baseline."+sfx, "berth.scale.moved."+sfx, "berth.scale.passed."+sfx
	queues := []string{work, dlq, base, moved, passed}
	for _, q := range queues {
		if _, err := ch.QueueDeclare(q, true, false, false, false, scaleQueueArgs()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			for _, q := range queues {
				_, _ = c.QueueDelete(q, false, false, false)
			}
		}
	})
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []interface{}{work}, "time": time.Now().Truncate(time.Second)}
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		v := paymentValue(i)
		msgs[i] = amqp.Publishing{MessageId: sfx + "-evt-" + strconv.Itoa(i), DeliveryMode: amqp.Persistent, ContentType: "application/json", Timestamp: time.Now().Truncate(time.Second),
			Headers: amqp.Table{"x-death": []interface{}{death}, "x-first-death-queue": work, "x-first-death-reason": "rejected", "x-first-death-exchange": "",
				"x-exception": "java.net.SocketTimeoutException: Read timed out"},
			Body: []byte(fmt.Sprintf(`{"idem":"%s-%s",%s`, sfx, paymentID(i), v[1:]))}
	}
	publishAll := func(queue string) time.Duration {
		t.Helper()
		pc, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		if err := pc.Confirm(false); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		const window = 500
		for from := 0; from < n; from += window {
			var ds []*amqp.DeferredConfirmation
			for _, m := range msgs[from:min(n, from+window)] {
				d, err := pc.PublishWithDeferredConfirm("", queue, true, false, m)
				if err != nil {
					t.Fatal(err)
				}
				ds = append(ds, d)
			}
			for _, d := range ds {
				if ok, err := d.WaitContext(ctx); !ok || err != nil {
					t.Fatalf("publish to %s not confirmed: %v", queue, err)
				}
			}
		}
		return time.Since(start)
	}
	publishAll(dlq)

	r := &scaleRig{bin: buildBerth(t), dir: t.TempDir(), n: n}
	var alicePub, bobPub string
	r.author, alicePub = sshKey(t, r.dir, "alice")
	r.approver, bobPub = sshKey(t, r.dir, "bob")
	signers := filepath.Join(r.dir, "allowed_signers")
	if err := os.WriteFile(signers, []byte("alice@hc "+alicePub+"\nbob@hc "+bobPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := os.Getenv("BERTH_SCALE_STEPS")
	review := "required"
	if steps == "execute" {
		review = "none"
	}
	r.config = rabbitConfig{Audit: filepath.Join(r.dir, "audit.log"), Store: dsn, Policies: fmt.Sprintf(`    - match: "berth.scale.dlq.*"
      idempotency_key: json:idem
      require_idempotency_key: true
      system_of_record:
        driver: postgres
        dsn: %s
        query: select 1 from %s where idem = $1
      review: %s
      approvals: 1
      allowed_signers: %s
`, dsn, table, review, signers)}.write(t)
	planFile := filepath.Join(r.dir, "plan.json")
	// Every step reads the whole DLQ (the plan, and the review of approve,
	// show and status) within 10 x --timeout (the plan) or --timeout: a
	// generous bound so that a busy machine changes the figures, not the
	// outcome.
	timeout := fmt.Sprintf("%ds", 60+n/1000)
	plan := r.run(t, "--timeout", timeout, "redrive", "plan", dlq, "--all", "--read", strconv.Itoa(n+1), "--rate", "1000000", "--batch-size", "500",
		"--key", r.author, "--out", planFile, "-o", "json")
	if plan.code != 0 {
		t.Fatalf("redrive plan: exit %d: %s", plan.code, plan.stderr)
	}
	var made struct {
		Hash      string `json:"hash"`
		Stored    bool   `json:"stored"`
		StoreNote string `json:"store_note"`
		Totals    struct {
			Selected, Included int
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(plan.stdout), &made); err != nil {
		t.Fatal(err)
	}
	if !made.Stored {
		t.Fatalf("redrive plan: the plan was not stored (%s), so execute cannot find it", made.StoreNote)
	}
	captured := len(rows)
	if made.Totals.Selected != n || made.Totals.Included != n-captured {
		t.Fatalf("plan totals %+v", made.Totals)
	}
	st, err := os.Stat(planFile)
	if err != nil {
		t.Fatal(err)
	}
	// Logged now: the plan's figures stand even when a later step fails.
	stepLog(t, "redrive plan:    %8.2fs  peak RSS %6.0f MiB  plan file %d bytes (%.1f bytes/message)", plan.wall.Seconds(), plan.mib(), st.Size(), float64(st.Size())/float64(n))
	out := rabbitScaleRun{plan: plan, planBytes: st.Size()}
	if steps == "plan" {
		return out
	}
	hash := made.Hash[:16]
	logStep := func(name string, s step) {
		stepLog(t, "redrive %-12s %8.2fs  peak RSS %6.0f MiB", name+":", s.wall.Seconds(), s.mib())
	}
	if steps != "execute" {
		approve := r.step(t, "redrive approve", "--timeout", timeout, "redrive", "approve", hash, "--key", r.approver, "--yes", "-o", "json")
		logStep("approve", approve)
		show := r.step(t, "redrive show", "--timeout", timeout, "redrive", "show", hash, "-o", "json")
		logStep("show -o json", show)
		var shown struct {
			Records []json.RawMessage `json:"records"`
			Review  struct {
				Keys []string `json:"idempotency_keys"`
				Gone []string `json:"gone"`
			} `json:"review"`
		}
		if err := json.Unmarshal([]byte(show.stdout), &shown); err != nil || len(shown.Records) != n || len(shown.Review.Keys) != made.Totals.Included || len(shown.Review.Gone) != 0 {
			t.Fatalf("redrive show: %d records, %d keys, %d gone (%v); want %d, %d, 0", len(shown.Records), len(shown.Review.Keys), len(shown.Review.Gone), err, n, made.Totals.Included)
		}
	}
	out.exec = r.step(t, "redrive execute", "--timeout", timeout, "redrive", "execute", hash, "--yes", "-o", "json")
	var done struct {
		Sent int `json:"sent"`
	}
	if err := json.Unmarshal([]byte(out.exec.stdout), &done); err != nil || done.Sent != made.Totals.Included {
		t.Fatalf("execute: %v %s", err, out.exec.stdout)
	}
	out.sent = done.Sent
	stepLog(t, "redrive execute: %8.2fs  peak RSS %6.0f MiB  %.0f messages/s (sent / wall time of the command, depth check included); Berth's own CPU %.2fs (%.0f%% of one core, %.0f µs a message)",
		out.exec.wall.Seconds(), out.exec.mib(), float64(done.Sent)/out.exec.wall.Seconds(),
		out.exec.cpu.Seconds(), 100*out.exec.cpu.Seconds()/out.exec.wall.Seconds(), float64(out.exec.cpu.Microseconds())/float64(max(1, done.Sent)))
	q, err := ch.QueueDeclarePassive(work, true, false, false, false, nil)
	if err != nil || q.Messages != done.Sent {
		t.Fatalf("work queue holds %d, sent %d (%v)", q.Messages, done.Sent, err)
	}
	status := r.step(t, "redrive status", "--timeout", timeout, "redrive", "status", hash, "-o", "json")
	var state struct {
		Redriven int `json:"redriven"`
	}
	if err := json.Unmarshal([]byte(status.stdout), &state); err != nil || state.Redriven != done.Sent {
		t.Fatalf("redrive status: redriven %d (%v), sent %d", state.Redriven, err, done.Sent)
	}
	logStep("status", status)
	t.Logf("messages %d (included %d, captured %d)", n, made.Totals.Included, captured)
	// The command's own account of the run (from its start, after loading
	// and checking the plan): what the wall time spent outside it.
	if i := strings.LastIndex(out.exec.stderr, "\nredrive "); i >= 0 {
		t.Logf("  %s", strings.TrimSpace(out.exec.stderr[i:]))
	}
	if steps == "memory" || steps == "execute" {
		return out
	}
	baseline := publishAll(base)
	t.Logf("baseline confirmed publish (window 500) of the same %d messages: %.2fs, %.0f messages/s",
		n, baseline.Seconds(), float64(n)/baseline.Seconds())
	out.baseline = baseline
	out.move = moveAll(t, conn, base, moved, n)
	t.Logf("baseline move (consume, confirmed publish, ack) of the same %d messages: %.2fs, %.0f messages/s",
		n, out.move.Seconds(), float64(n)/out.move.Seconds())
	out.passMove = movePassingOver(t, conn, moved, passed, n)
	t.Logf("baseline move passing over one in ten as the plan does (held unacked, a channel per 1,000 deliveries, each ack alone) of the same %d messages: %.2fs, %.0f messages/s sent",
		n, out.passMove.Seconds(), float64(n-captured)/out.passMove.Seconds())
	return out
}

// stepLog logs a step's figures, and says them on stderr at once too: a
// benchmark's log is printed only when it ends, and a run of a million
// messages can be stopped (or time out) hours in.
func stepLog(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Logf(format, args...)
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// scaleQueueArgs declares the benchmark's queues: classic, or lazy when
// BERTH_SCALE_QUEUE_MODE=lazy (RabbitMQ 3.x's advice for long queues such
// as DLQs: a classic queue keeps its messages on its process's heap, and
// on this machine publishing into one 100,000 deep ran 2-4 times slower).
func scaleQueueArgs() amqp.Table {
	if mode := os.Getenv("BERTH_SCALE_QUEUE_MODE"); mode != "" {
		return amqp.Table{"x-queue-mode": mode}
	}
	return nil
}

// moveAll moves n messages from one queue to another as a redrive does,
// without Berth: consumed (prefetch 2,000), published in windows of 500
// with confirms, each window acked at once (multiple) once confirmed, with
// one window confirming while the next is published (as execute pipelines
// them). It is the broker's own cost of a redrive, timed.
func moveAll(t testing.TB, conn *amqp.Connection, from, to string, n int) time.Duration {
	t.Helper()
	cc, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if err := cc.Qos(2000, 0, false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deliveries, err := cc.Consume(from, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := newWindowMover(t, conn, to, 1, func(w moveWindow) error { return cc.Ack(w.ds[len(w.ds)-1].DeliveryTag, true) })
	defer m.pc.Close()
	for got := 0; got < n; got++ {
		d, open := <-deliveries
		if !open {
			t.Fatalf("the consumer of %s closed after %d of %d messages", from, got, n)
		}
		m.move(d)
	}
	m.finish()
	return time.Since(start)
}

// moveWindow is a window of moved messages: the deliveries and their
// publishes' confirms.
type moveWindow struct {
	ds  []amqp.Delivery
	dcs []*amqp.DeferredConfirmation
}

// windowMover publishes consumed messages to a queue with confirms in
// windows of 500 and settles each (its confirms, then ack) in a goroutine
// while the next ones are published, up to queued windows waiting.
type windowMover struct {
	t       testing.TB
	pc      *amqp.Channel
	to      string
	w       moveWindow
	windows chan moveWindow
	settled chan error
}

func newWindowMover(t testing.TB, conn *amqp.Connection, to string, queued int, ack func(moveWindow) error) *windowMover {
	m := &windowMover{t: t, pc: rabbittest.ConfirmChannel(t, conn), to: to, windows: make(chan moveWindow, queued), settled: make(chan error, 1)}
	go func() {
		var err error
		for w := range m.windows {
			if err == nil {
				err = confirmedAll(w.dcs, to)
			}
			if err == nil {
				err = ack(w)
			}
		}
		m.settled <- err
	}()
	return m
}

// move publishes d's message (its properties and body) to the queue.
func (m *windowMover) move(d amqp.Delivery) {
	m.t.Helper()
	dc, err := m.pc.PublishWithDeferredConfirm("", m.to, true, false, amqp.Publishing{Headers: d.Headers, ContentType: d.ContentType,
		DeliveryMode: d.DeliveryMode, MessageId: d.MessageId, Timestamp: d.Timestamp, Body: d.Body})
	if err != nil {
		m.t.Fatal(err)
	}
	m.w.ds, m.w.dcs = append(m.w.ds, d), append(m.w.dcs, dc)
	if len(m.w.ds) == 500 {
		m.windows <- m.w
		m.w = moveWindow{}
	}
}

// finish settles the last window and waits for every window to settle.
func (m *windowMover) finish() {
	m.t.Helper()
	if len(m.w.ds) > 0 {
		m.windows <- m.w
	}
	close(m.windows)
	if err := <-m.settled; err != nil {
		m.t.Fatal(err)
	}
}

// movePassingOver moves n messages from one queue to another as this
// benchmark's plan has execute do, without Berth: one message in ten (the
// first, as the plan captures messages 0, 10, 20 ...) held unacked until
// the end, the others published in windows of 500 with confirms, three
// windows in flight, each acked alone once its window is confirmed (an
// ack for many would take the held ones with it), and a new channel every
// 1,000 deliveries (RabbitMQ 3.10 walks past what a channel holds on each
// ack). It is the broker's share of this redrive: what passing over the
// messages a plan leaves costs it, which the bare move does not pay.
func movePassingOver(t testing.TB, conn *amqp.Connection, from, to string, n int) time.Duration {
	t.Helper()
	var chans []*amqp.Channel
	defer func() {
		for _, c := range chans {
			c.Close()
		}
	}()
	consume := func(i int) (*amqp.Channel, <-chan amqp.Delivery) {
		c, err := conn.Channel()
		if err == nil {
			err = c.Qos(2000, 0, false)
		}
		var ds <-chan amqp.Delivery
		if err == nil {
			ds, err = c.Consume(from, "pass-"+strconv.Itoa(i), false, false, false, false, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, c)
		return c, ds
	}
	m := newWindowMover(t, conn, to, 2, func(w moveWindow) error {
		for _, d := range w.ds {
			if err := d.Ack(false); err != nil {
				return err
			}
		}
		return nil
	})
	defer m.pc.Close()
	start := time.Now()
	segs := 0
	cc, deliveries := consume(segs)
	for got, inSeg := 0, 0; got < n; {
		d, open := <-deliveries
		if !open {
			segs++
			cc, deliveries = consume(segs)
			inSeg = 0
			continue
		}
		if inSeg++; inSeg == 1000 {
			if err := cc.Cancel("pass-"+strconv.Itoa(segs), false); err != nil {
				t.Fatal(err)
			}
		}
		if got++; (got-1)%10 != 0 {
			m.move(d)
		} // else held: passed over, back in place at the end
	}
	m.finish()
	return time.Since(start)
}

// confirmedAll waits for a window's confirms: an error unless the broker
// confirmed every publish to queue.
func confirmedAll(dcs []*amqp.DeferredConfirmation, queue string) error {
	for _, d := range dcs {
		if ok, err := d.WaitContext(context.Background()); !ok || err != nil {
			return fmt.Errorf("move to %s not confirmed: %v", queue, err)
		}
	}
	return nil
}
