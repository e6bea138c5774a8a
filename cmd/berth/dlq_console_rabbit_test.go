package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/tui"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
	"github.com/berth-dev/berth/tui/styles"
)

// The console's RabbitMQ dead-letter pages, driven through the pages'
// Update with key presses against the real local RabbitMQ and the real
// QueueService (the CLI's functions): the same consoleDriver as the Kafka
// pages use.

// rabbitConsole is a RabbitMQ context for the console: its config file
// (for the CLI, which must see the same plans), audit log and page env.
type rabbitConsole struct {
	config, audit string
	env           tui.PageEnv
}

func newRabbitConsole(t *testing.T, policy string, readOnly bool) *rabbitConsole {
	t.Helper()
	lipgloss.SetColorProfile(termenv.Ascii)
	dir := t.TempDir()
	rc := &rabbitConsole{audit: filepath.Join(dir, "audit.log")}
	t.Setenv("BERTH_AUDIT_FILE", rc.audit)
	// policy continues the redrive section ("  policies:\n...").
	rc.config = writeConfig(t, rabbitConfig{Store: filepath.Join(dir, "redrive.db")}.yaml()+policy)
	cfg, err := config.Load(rc.config)
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(io.Discard, io.Discard)
	a.cfg, a.ctxName, a.ctx, a.timeout = cfg, "rmq", cfg.Contexts["rmq"], 10*time.Second
	src, err := dialRabbitConsole(a, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	cl := src.Cluster()
	rc.env = tui.PageEnv{
		Config: cfg, Context: "rmq", Styles: styles.New(), ReadOnly: readOnly, ReadOnlyReason: "--read-only", Services: consoleServices(),
		Size: func() (int, int) { return consoleW, consoleH },
		Do: func(fn func(ctx context.Context, c backends.Cluster) tea.Msg) tea.Cmd {
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				return fn(ctx, cl)
			}
		},
		Route: func(cmd tea.Cmd) tea.Cmd { return cmd },
	}
	return rc
}

func (rc *rabbitConsole) berth(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runBerth(t, append(args, "--config", rc.config)...)
}

var hashLine = regexp.MustCompile(`hash ([0-9a-f]{64})`)

func mustContain(t *testing.T, v string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(v, w) {
			t.Fatalf("the console lacks %q:\n%s", w, v)
		}
	}
}

// drainIDs gets every message of a queue (acking it) and returns their
// message ids in order and whether each was marked redelivered.
func drainIDs(t *testing.T, ch *amqp.Channel, q string) ([]string, []bool, []amqp.Delivery) {
	t.Helper()
	var ids []string
	var redelivered []bool
	var ds []amqp.Delivery
	for {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ids, redelivered, ds
		}
		ids, redelivered, ds = append(ids, d.MessageId), append(redelivered, d.Redelivered), append(ds, d)
	}
}

// A classic DLQ with four rejected messages: its classes, a class selected
// into a plan that `berth redrive status` sees, signed by its author in the
// console, approved there by another signer (the author refused), executed
// after the dry run: the messages are back in the original queue, the DLQ
// is empty, the ledger has them and every step is in the audit log.
func TestConsoleRabbitDLQClassToExecutedPlan(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 4)
	dir := t.TempDir()
	alice, alicePub := sshKey(t, dir, "alice")
	bob, bobPub := sshKey(t, dir, "bob")
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, []byte("alice@hc "+alicePub+"\nbob@hc "+bobPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc := newRabbitConsole(t, fmt.Sprintf(`  policies:
    - match: "berth.test.cmd.dlq.*"
      review: required
      approvals: 1
      allowed_signers: %s
`, signers), false)
	env := rc.env

	// :dlq lists the DLQ with the queue that dead-letters into it.
	d := drive(t, env, tuidlq.NewQueueListPage(env))
	// Filtered to this DLQ first: the broker is shared, and other tests'
	// DLQs can fill the screen above it.
	d.press(keyRunes("/"), never)
	d.press(keyRunes(dlq), never)
	d.press(keyEnterMsg, never)
	v := d.until(dlq)
	row := "" // the first line naming it (the footer names the filter)
	for _, l := range strings.Split(v, "\n") {
		if strings.Contains(l, dlq) {
			row = l
			break
		}
	}
	if !strings.Contains(row, work[:28]) || !strings.Contains(row, "classic") {
		t.Fatalf("the DLQ's row lacks its type or original queue:\n%s", v)
	}

	// Its classes: one class of 4, rejected in the work queue.
	d = drive(t, env, tuidlq.NewQueueClassesPage(env, dlq))
	v = d.until("1 class(es)")
	mustContain(t, v, "4 message(s) read", "basic.consume without ack", "rejected", work[:28])
	d.press(keyRunes("x"), never)
	mustContain(t, d.view(), "selected 4 message(s)")

	// One message's x-death and headers.
	d.press(keyRunes("a"), never)
	mustContain(t, d.view(), "job-0", "job-3")
	d.press(keyEnterMsg, never)
	mustContain(t, d.view(), "event id        job-0 (message_id)", "x-death         1 entr(ies)", "rejected x1 in "+work, "body (2 bytes")

	// p plans the selected class: checked, stored, audited.
	d = drive(t, env, tuidlq.NewQueueClassesPage(env, dlq))
	d.until("1 class(es)")
	d.press(keyRunes("x"), never)
	d.press(keyRunes("p"), never)
	v = d.until("approvals 0/1")
	mustContain(t, v, "include 4", "stored in the redrive store", "pending approval")
	m := hashLine.FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("no plan hash shown:\n%s", v)
	}
	hash := m[1]
	// S signs it as its author.
	d.press(keyRunes("S"), never)
	d.press(keyEraseMsg, never)
	d.typeText(alice)
	d.press(keyEnterMsg, never)
	mustContain(t, d.view(), "signed as the plan's author", "author   alice@hc")
	// Authorship is given once.
	d.press(keyRunes("S"), never)
	mustContain(t, d.view(), "sign as author disabled: the plan already carries its author's signature")

	// The command line sees the console's plan.
	out, errOut, code := rc.berth(t, "redrive", "status", "-o", "json")
	if code != 0 || !strings.Contains(out, hash) || !strings.Contains(out, "pending approval") {
		t.Fatalf("berth redrive status does not list the console's plan: %d %s %s", code, out, errOut)
	}

	// :plans, a on the plan: the author is refused, bob's approval counts.
	d = drive(t, env, tuidlq.NewQueuePlansPage(env))
	mustContain(t, d.until(hash[:12]), "0/1", "pending approval")
	d.press(keyRunes("a"), never)
	d.until("approve with SSH private key")
	d.press(keyEraseMsg, never)
	d.typeText(alice)
	d.press(keyEnterMsg, never)
	mustContain(t, d.view(), "author cannot approve", "nothing stored")
	d.press(keyRunes("a"), never)
	d.press(keyEraseMsg, never)
	d.typeText(bob)
	d.press(keyEnterMsg, never)
	mustContain(t, d.view(), "approval stored: signed as bob@hc", "approvals 1/1")

	// X: the dry run first, then the hash typed, then the run.
	d.press(keyRunes("X"), never)
	mustContain(t, d.view(), "DRY RUN: would redrive 4 message(s)", "type the first 8 digits")
	d.typeText(hash[:8])
	d.press(keyEnterMsg, never)
	v = d.until("verified: DLQ depth")
	mustContain(t, v, "result: sent 4", "failed 0", "DLQ depth 4 → 0 with 4 acked, 0 returned: ok")

	ids, _, ds := drainIDs(t, ch, work)
	if fmt.Sprint(ids) != "[job-0 job-1 job-2 job-3]" {
		t.Errorf("the work queue got %v", ids)
	}
	for _, del := range ds {
		if del.Headers["berth-redrive-plan"] != hash {
			t.Errorf("%s lacks the plan header: %v", del.MessageId, del.Headers)
		}
	}
	if q, err := ch.QueueDeclarePassive(dlq, false, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Errorf("the DLQ holds %d (%v), want 0", q.Messages, err)
	}
	out, _, _ = rc.berth(t, "redrive", "status", hash[:12], "-o", "json")
	var st struct {
		Redriven int    `json:"redriven"`
		State    string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Redriven != 4 || st.State != "done" {
		t.Errorf("ledger status: %v %s", err, out)
	}
	got := auditActions(t, rc.audit)
	for _, want := range []string{"redrive.plan", "redrive.plan.signed", "redrive.approved", "redrive.execute", "redrive.verified"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit log lacks %s: %s", want, got)
		}
	}
	if n := strings.Count(got, "redrive.approved"); n != 1 {
		t.Errorf("%d approvals audited, want 1 (the refused one stores nothing): %s", n, got)
	}
	// Running it again has nothing left to send.
	d = drive(t, env, tuidlq.NewQueuePlansPage(env))
	mustContain(t, d.until(hash[:12]), "done")
}

// In a read-only context the console reads the DLQ (every message stays,
// in order) but stores no plan and refuses approve and execute, saying why.
func TestConsoleRabbitReadOnlyBrowsesAndRefuses(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 3)
	// A hostile message put straight into the DLQ, behind the dead letters
	// (dead-lettering is asynchronous: wait for them): its id, header and
	// body must reach the screen escaped, never as terminal control.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		q, err := ch.QueueDeclarePassive(dlq, false, false, false, false, nil)
		if err == nil && q.Messages == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 3 dead letters never reached %s", dlq)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: "evil\x1b[2J", Headers: amqp.Table{"note": "\x1b[31mred\x1b]0;title\x07"},
		Body: []byte("payload \x1b[2Jcleared")}); err != nil {
		t.Fatal(err)
	}
	rc := newRabbitConsole(t, "", true)
	env := rc.env
	d := drive(t, env, tuidlq.NewQueueClassesPage(env, dlq))
	d.until("4 message(s) read")
	d.press(keyRunes("a"), never)
	d.press(keyRunes("G"), never) // the last message: the hostile one
	d.press(keyEnterMsg, never)
	mustContain(t, d.view(), `event id        evil\e[2J (message_id)`, "note = hex:1b5b33316d726564", `payload \e[2Jcleared`)

	d = drive(t, env, tuidlq.NewQueueClassesPage(env, dlq))
	d.until("4 message(s) read")
	d.press(keyRunes("x"), never)
	d.press(keyRunes("p"), never)
	v := d.until("include 3")
	mustContain(t, v, "read-only context: the plan was not stored")
	d.press(keyRunes("a"), never)
	mustContain(t, d.view(), "approve disabled: read-only: --read-only")
	d.press(keyRunes("X"), never)
	mustContain(t, d.view(), "execute disabled: read-only: --read-only")

	// A plan stored from the command line, opened read-only.
	file := filepath.Join(t.TempDir(), "plan.json")
	if _, errOut, code := rc.berth(t, "redrive", "plan", dlq, "--original-queue", work, "--out", file); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	d = drive(t, env, tuidlq.NewQueuePlansPage(env))
	v = d.until("1 plan(s)")
	mustContain(t, v, "ready")
	d.press(keyRunes("X"), never)
	v = d.until("execute disabled")
	mustContain(t, v, "execute disabled: read-only: --read-only", "a approve: disabled (read-only")

	// Browsing (twice: the list, the plan) left every message in place.
	ids, redelivered, _ := drainIDs(t, ch, dlq)
	if fmt.Sprint(ids) != "[job-0 job-1 job-2 evil\x1b[2J]" {
		t.Errorf("the DLQ holds %q after browsing, want job-0..2 and the hostile one, in order", ids)
	}
	for i, r := range redelivered {
		if !r {
			t.Errorf("message %d not marked redelivered: was it read at all?", i)
		}
	}
	if got := auditActions(t, rc.audit); strings.Contains(got, "redrive.approved") || strings.Contains(got, "redrive.execute") {
		t.Errorf("read-only console changed something: %s", got)
	}
}

// A run paused and then cancelled from the plan page stops between chunks
// with nothing lost; X again sends the rest, in order. The plan (made on
// the command line) sends one message a second, one per chunk, so the
// operator's keys land between chunks.
func TestConsoleRabbitPauseCancelResume(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 4)
	rc := newRabbitConsole(t, "", false)
	file := filepath.Join(t.TempDir(), "plan.json")
	if _, errOut, code := rc.berth(t, "redrive", "plan", dlq, "--all", "--rate", "1", "--batch-size", "1", "--out", file); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	env := rc.env
	d := drive(t, env, tuidlq.NewQueuePlansPage(env))
	d.until("ready")
	d.press(keyRunes("X"), never)
	v := d.until("DRY RUN: would redrive 4 message(s)")
	hash := hashLine.FindStringSubmatch(v)[1]
	d.typeText(hash[:8])
	d.press(keyEnterMsg, func() bool { return strings.Contains(d.page.View(), ") sent 1 already sent") })

	shows := func(what string) func() bool { return func() bool { return strings.Contains(d.page.View(), what) } }
	// While it runs a command always waits for its next change: press keys
	// until the page shows their effect, not until the commands end.
	d.press(keyRunes("p"), shows("PAUSED"))
	mustContain(t, d.view(), "PAUSED before the next chunk")
	d.press(keyRunes("c"), shows("CANCELLED"))
	v = d.until("CANCELLED")
	m := regexp.MustCompile(`result: sent (\d)`).FindStringSubmatch(v)
	if m == nil || m[1] == "0" || m[1] == "4" {
		t.Fatalf("a cancelled run should have sent part of the plan:\n%s", v)
	}
	sent := int(m[1][0] - '0')
	if q, err := ch.QueueDeclarePassive(dlq, false, false, false, false, nil); err != nil || q.Messages != 4-sent {
		t.Fatalf("the DLQ holds %d (%v) after sending %d of 4", q.Messages, err, sent)
	}
	// X again: the rest, nothing twice.
	d.press(keyRunes("X"), never)
	mustContain(t, d.until("DRY RUN: would redrive 4 message(s)"), fmt.Sprintf("%d of them confirmed by an earlier run", sent))
	d.typeText(hash[:8])
	d.press(keyEnterMsg, never)
	v = d.until("verified: DLQ depth")
	// What the cancelled run sent is already sent (the ledger), as the CLI says.
	mustContain(t, v, fmt.Sprintf("result: sent %d · already sent %d · skipped 0 · failed 0", 4-sent, sent))
	ids, _, _ := drainIDs(t, ch, work)
	if fmt.Sprint(ids) != "[job-0 job-1 job-2 job-3]" {
		t.Errorf("the work queue got %v, want each message once, in order", ids)
	}
	got := auditActions(t, rc.audit)
	if strings.Count(got, "redrive.execute.started") != 2 || strings.Count(got, "redrive.execute.finished")+strings.Count(got, "redrive.execute.cancelled") != 2 {
		t.Errorf("want two runs audited (start and end each): %s", got)
	}
}

// A quorum DLQ cannot be read without side effects: the console says why
// and asks; y reads it (each delivery count +1), and a plan made from that
// read accepts the side effects, as --accept-requeue-side-effects does.
func TestConsoleRabbitQuorumDLQAsksBeforeReading(t *testing.T) {
	isolateConfig(t)
	rabbitQueue(t)
	conn, err := amqp.Dial(testAMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, _ := conn.Channel()
	sfx := fmt.Sprint(time.Now().UnixNano())
	work, dlq := "berth.test.cmd.qwork."+sfx, "berth.test.cmd.qdlq."+sfx
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	must(err)
	_, err = ch.QueueDeclare(work, false, true, false, false, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	must(err)
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			c.QueueDelete(work, false, false, false)
			c.QueueDelete(dlq, false, false, false)
		}
	})
	for i := 0; i < 2; i++ {
		must(ch.Publish("", work, false, false, amqp.Publishing{MessageId: fmt.Sprintf("q-%d", i), Body: []byte(`{}`)}))
	}
	for i := 0; i < 2; {
		d, ok, err := ch.Get(work, false)
		must(err)
		if ok {
			must(d.Reject(false))
			i++
		}
	}
	// A quorum queue is read whole or not at all: the browse needs the
	// management API's count, which RabbitMQ emits every 5 s.
	waitManagementCount(t, dlq, 2)
	rc := newRabbitConsole(t, "", false)
	env := rc.env
	d := drive(t, env, tuidlq.NewQueueClassesPage(env, dlq))
	v := d.until("without side effects")
	mustContain(t, v, "quorum queue", "x-delivery-count", "y: read it anyway")
	d.press(keyRunes("y"), never)
	v = d.until("2 message(s) read")
	mustContain(t, v, "quorum", "side effects: each message's x-delivery-count grew by 1")
	d.press(keyRunes("x"), never)
	d.press(keyRunes("p"), never)
	v = d.until("include 2")
	mustContain(t, v, "stored in the redrive store")
	m := hashLine.FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("no hash:\n%s", v)
	}
	out, errOut, code := rc.berth(t, "redrive", "show", m[1][:12], "-o", "json")
	if code != 0 || !strings.Contains(out, `"queue_type": "quorum"`) {
		t.Fatalf("show: %d %s", code, out)
	}
	// Showing the plan does not read the quorum DLQ again (that would move
	// every message and count a delivery): it says the review is not
	// derived, and each message was delivered twice, by the console's read
	// and the plan's.
	if strings.Contains(out, `"review": {`) || !strings.Contains(errOut, "review is not derived") {
		t.Errorf("show of a quorum plan: want no derived review and a note why:\n%s%s", out, errOut)
	}
	for i := 0; i < 2; i++ {
		d, ok, err := ch.Get(dlq, false)
		must(err)
		if !ok || d.Headers["x-delivery-count"] != int64(2) {
			t.Errorf("message %d: got %v, x-delivery-count %v; want 2 (the console's read and the plan's, not show's)", i, ok, d.Headers["x-delivery-count"])
		}
	}
	if _, err := os.Stat(rc.audit); err != nil {
		t.Fatal(err)
	}
}

// waitManagementCount polls the management API until it reports n messages
// in queue (statistics are emitted every 5 s); the poll returns as soon as
// they are.
func waitManagementCount(t *testing.T, queue string, n int) {
	t.Helper()
	u := strings.TrimRight(testManagementURL(), "/") + "/api/queues/%2F/" + url.PathEscape(queue) + "?columns=messages"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if req.URL.User == nil {
			req.SetBasicAuth("guest", "guest")
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var q struct {
				Messages *int `json:"messages"`
			}
			err = json.NewDecoder(resp.Body).Decode(&q)
			resp.Body.Close()
			if err == nil && q.Messages != nil && *q.Messages == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the management API never reported %d messages in %s", n, queue)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A stored RabbitMQ plan opened in the console shows what a reviewer signs
// derived from its messages, as `berth redrive show` does: the target with
// its count and the included messages' idempotency keys (the plan file has
// neither key nor class).
func TestConsoleRabbitStoredPlanShowsTheReviewDerivedFromTheMessages(t *testing.T) {
	isolateConfig(t)
	_, _, dlq, _ := rmqDLQWith(t, []rmqTestMsg{{"job-0", "A", "k0", time.Now()}, {"job-1", "B", "k1", time.Now()}})
	rc := newRabbitConsole(t, fmt.Sprintf("  policies:\n    - match: %q\n      idempotency_key: json:idem\n", dlq), false)
	file := filepath.Join(t.TempDir(), "plan.json")
	if _, errOut, code := rc.berth(t, "redrive", "plan", dlq, "--all", "--out", file); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	if raw, _ := os.ReadFile(file); strings.Contains(string(raw), `"k0"`) {
		t.Fatalf("the plan file holds an idempotency key: %s", raw)
	}
	d := drive(t, rc.env, tuidlq.NewQueuePlansPage(rc.env))
	d.until("ready")
	d.press(keyEnterMsg, never)
	mustContain(t, d.until("idempotency keys:"), "idempotency keys: k0, k1", "targets: (default exchange) -> ")
}

// The config's class rules (redrive.classes) judge a RabbitMQ DLQ's classes
// as they judge a Kafka DLQ's: a rule calling rejections permanent makes
// `berth dlq classes` and the console's classes page say permanent, where
// the default rules alone do not know the class.
func TestRabbitDLQClassesUseTheConfiguredRules(t *testing.T) {
	isolateConfig(t)
	_, _, _, dlq := rmqDLQ(t, 2)
	rc := newRabbitConsole(t, "  classes:\n    permanent: ['^rejected: ']\n", false)
	verdict := func(args ...string) string {
		t.Helper()
		out, errOut, code := runBerth(t, append([]string{"dlq", "classes", dlq, "-o", "json"}, args...)...)
		var cls []struct {
			Verdict string `json:"verdict"`
			Pattern string `json:"pattern"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &cls) != nil || len(cls) != 1 {
			t.Fatalf("dlq classes %v: exit %d %s %s", args, code, out, errOut)
		}
		return cls[0].Verdict
	}
	if v := verdict("--amqp", testAMQPURL(), "--management", testManagementURL()); v != "unknown" {
		t.Fatalf("default rules: verdict %q, want unknown", v)
	}
	if v := verdict("--config", rc.config); v != "permanent" {
		t.Fatalf("configured rule: verdict %q, want permanent", v)
	}
	d := drive(t, rc.env, tuidlq.NewQueueClassesPage(rc.env, dlq))
	mustContain(t, d.until("1 class(es)"), "permanent")
}

// The console's progress of a RabbitMQ run counts as `berth redrive
// execute`'s progress lines do, against the real RabbitMQ: two DLQs alike
// (five dead letters each), each planned whole, then one message's payment
// captured in the system of record, so the run's checks skip it. The CLI
// runs one plan: every line is out of the plan's five, and the last is
// 5/5 with the one skipped. The console runs the other, paused once the
// skip is reported, and shows the CLI's counts: out of five, the skipped
// message among the done (the console used to leave skipped messages out
// of done). Its result says the same as the CLI's last line.
func TestConsoleRabbitProgressCountsAsTheCLI(t *testing.T) {
	isolateConfig(t)
	db := filepath.Join(t.TempDir(), "sor.db")
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	if _, err := sdb.Exec(`create table done(k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	deadLetters := func() (string, string) {
		_, _, _, dlq, sfx := rmqDeadLettered(t, "prog", true, func(sfx string) []amqp.Publishing {
			msgs := make([]amqp.Publishing, 5)
			for i := range msgs {
				// Event ids and keys unique to each DLQ: the ledger
				// matches event ids across plans.
				msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("%s-job-%d", sfx, i), Body: fmt.Appendf(nil, `{"idem":"%s-k%d"}`, sfx, i)}
			}
			return msgs
		})
		return dlq, sfx
	}
	cliDLQ, cliSfx := deadLetters()
	conDLQ, conSfx := deadLetters()
	rc := newRabbitConsole(t, fmt.Sprintf(`  policies:
    - match: "berth.test.prog.dlq.*"
      review: none
      idempotency_key: json:idem
      system_of_record: {driver: sqlite, dsn: %s, query: "select 1 from done where k = ?"}
`, db), false)
	// Two messages a second, one a chunk: the console's pause lands
	// mid-run.
	plan := func(dlq string) string {
		t.Helper()
		out, errOut, code := rc.berth(t, "redrive", "plan", dlq, "--all", "--rate", "2", "--batch-size", "1", "--out", filepath.Join(t.TempDir(), "plan.json"), "-o", "json")
		var p struct {
			Hash string `json:"hash"`
		}
		if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil {
			t.Fatalf("plan %s: exit %d %v %s", dlq, code, err, errOut)
		}
		return p.Hash
	}
	cliPlan, conPlan := plan(cliDLQ), plan(conDLQ)
	if _, err := sdb.Exec(`insert into done values (?), (?)`, cliSfx+"-k1", conSfx+"-k1"); err != nil {
		t.Fatal(err)
	}

	// counted checks a progress count as the CLI's rule has it: out of the
	// plan's five included, done the sum of what was settled, the
	// percentage rounded down.
	counts := regexp.MustCompile(`(\d+)/(\d+) \((\d+)%\) sent (\d+) already sent (\d+) skipped (\d+) failed (\d+)`)
	counted := func(who, s string) []int {
		t.Helper()
		m := counts.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("%s shows no progress counts:\n%s", who, s)
		}
		n := make([]int, 7)
		for i := range n {
			n[i], _ = strconv.Atoi(m[i+1])
		}
		if done, total, pct := n[0], n[1], n[2]; total != 5 || done != n[3]+n[4]+n[5]+n[6] || pct != 100*done/total {
			t.Fatalf("%s counts %q; want done = sent + already sent + skipped + failed, out of the plan's 5:\n%s", who, m[0], s)
		}
		return n
	}
	_, errOut, code := rc.berth(t, "redrive", "execute", cliPlan[:12], "--yes")
	if code != 0 {
		t.Fatalf("execute: exit %d %s", code, errOut)
	}
	for _, l := range progressLines(t, errOut) {
		counted("the CLI", l)
	}
	lastProgress(t, errOut, "5/5 (100%) sent 4 already sent 0 skipped 1 failed 0, ")

	env := rc.env
	d := drive(t, env, tuidlq.NewQueuePlansPage(env))
	d.until(conPlan[:12])
	d.press(keyRunes("/"), never)
	d.typeText(conPlan[:12])
	d.press(keyEnterMsg, never)
	d.press(keyRunes("X"), never)
	mustContain(t, d.until("DRY RUN"), "DRY RUN: would redrive 4 message(s)", "skipped now 1")
	d.typeText(conPlan[:8])
	shows := func(what string) func() bool { return func() bool { return strings.Contains(d.page.View(), what) } }
	// Once the skip is reported, p: the run stops before its next chunk.
	d.press(keyEnterMsg, shows(" skipped 1 failed "))
	d.press(keyRunes("p"), shows("PAUSED"))
	if n := counted("the console", d.view()); n[5] != 1 {
		t.Fatalf("the console, paused, counts %d skipped; want the one:\n%s", n[5], d.view())
	}
	d.press(keyRunes("p"), shows("result:"))
	mustContain(t, d.until("verified: DLQ depth"), "result: sent 4 · already sent 0 · skipped 1 (effect_committed 1) · failed 0")
}
