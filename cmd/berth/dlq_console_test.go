package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/tui"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
	"github.com/berth-dev/berth/tui/styles"
)

// The console's plan actions, driven through the pages' Update with key
// messages against an in-process broker and the real Service.

const consoleW, consoleH = 160, 40

// consoleDriver feeds a page the messages its commands produce, as the
// console's event loop does: every command runs in its own goroutine and
// its message is delivered in arrival order. Commands that wait for an
// execution's progress return when the execution moves on, so the tests
// synchronise on progress, never on a clock.
type consoleDriver struct {
	t       *testing.T
	env     tui.PageEnv
	page    tui.Page
	msgs    chan tea.Msg
	pending int
	pushed  []tui.Page
	flashes []string
	back    bool
}

func consoleEnv(t *testing.T, f *redriveFixture, readOnly bool, watch time.Duration) tui.PageEnv {
	t.Helper()
	lipgloss.SetColorProfile(termenv.Ascii)
	cfg, err := config.Load(f.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Redrive.VerifyWatch = watch
	c, err := kafka.Dial(context.Background(), kafka.Options{Bootstrap: f.kc.Addrs, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	t.Cleanup(cl.Close)
	return tui.PageEnv{
		Config: cfg, Context: "test", Styles: styles.New(), ReadOnly: readOnly, ReadOnlyReason: "--read-only", Services: consoleServices(),
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
}

func drive(t *testing.T, env tui.PageEnv, page tui.Page) *consoleDriver {
	t.Helper()
	// Buffered: a command whose page was left behind can still finish.
	d := &consoleDriver{t: t, env: env, page: page, msgs: make(chan tea.Msg, 1024)}
	d.page, _ = d.page.Update(tea.WindowSizeMsg{Width: consoleW, Height: consoleH})
	d.start(page.Init())
	d.settle(func() bool { return false })
	return d
}

func (d *consoleDriver) start(c tea.Cmd) {
	if c == nil {
		return
	}
	d.pending++
	go func() { d.msgs <- c() }()
}

// deliver handles one message as the app would.
func (d *consoleDriver) deliver(m tea.Msg) {
	switch msg := m.(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			d.start(c)
		}
	case tui.PushMsg:
		next := msg.Factory(d.env)
		d.page = next // the pushed page is the one the operator sees now
		d.pushed = append(d.pushed, next)
		d.page, _ = d.page.Update(tea.WindowSizeMsg{Width: consoleW, Height: consoleH})
		d.start(next.Init())
	case tui.FlashMsg:
		d.flashes = append(d.flashes, msg.Text)
	case tui.BackMsg:
		d.back = true
	case nil:
	default:
		var more tea.Cmd
		d.page, more = d.page.Update(msg)
		d.start(more)
	}
}

// settle delivers messages until no command is left or stop holds; a
// deadline turns a console that stops answering into a failure, not a hang.
func (d *consoleDriver) settle(stop func() bool) {
	d.t.Helper()
	deadline := time.After(60 * time.Second)
	for d.pending > 0 && !stop() {
		select {
		case m := <-d.msgs:
			d.pending--
			d.deliver(m)
		case <-deadline:
			d.t.Fatalf("the console stopped answering; view:\n%s", d.page.View())
		}
	}
}

// until runs commands until the view contains want.
func (d *consoleDriver) until(want string) string {
	d.t.Helper()
	v := d.view()
	d.settle(func() bool { v = d.view(); return strings.Contains(v, want) })
	if !strings.Contains(v, want) {
		d.t.Fatalf("the console never showed %q:\n%s", want, v)
	}
	return v
}

// press delivers a key, then runs what it started until stop (or to the end).
func (d *consoleDriver) press(k tea.KeyMsg, stop func() bool) {
	d.t.Helper()
	if c, ok := d.page.(tui.InputCapturer); !ok || !c.CapturesKey(k) {
		// Keys the app would take first: they must not reach a page that
		// has not claimed them.
		for _, global := range []string{"c", "q", "esc"} {
			if k.String() == global {
				d.t.Fatalf("the app, not the page, would get %q", global)
			}
		}
	}
	var cmd tea.Cmd
	d.page, cmd = d.page.Update(k)
	d.start(cmd)
	d.settle(stop)
}

func (d *consoleDriver) typeText(s string) {
	for _, r := range s {
		d.press(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}}, func() bool { return false })
	}
}

func (d *consoleDriver) view() string {
	d.t.Helper()
	v := d.page.View()
	if strings.ContainsRune(v, 0x1b) {
		d.t.Fatalf("an escape sequence reached the view:\n%q", v)
	}
	if n := strings.Count(v, "\n") + 1; n != consoleH {
		d.t.Fatalf("view has %d lines, want %d", n, consoleH)
	}
	return v
}

func keyRunes(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

var (
	keyEnterMsg = tea.KeyMsg{Type: tea.KeyEnter}
	keyEscMsg   = tea.KeyMsg{Type: tea.KeyEsc}
	keyEraseMsg = tea.KeyMsg{Type: tea.KeyCtrlU}
	never       = func() bool { return false }
)

// signatures returns the roles of the signatures stored with the plan.
func storedSignatures(t *testing.T, f *redriveFixture, plan string) []string {
	t.Helper()
	c, err := kafka.Dial(context.Background(), kafka.Options{Bootstrap: f.kc.Addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pf, err := kafka.NewPlanStore(c).Plan(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range pf.Signatures {
		out = append(out, string(s.Role)+" "+s.Fingerprint)
	}
	return out
}

func auditActions(t *testing.T, file string) string {
	t.Helper()
	log, err := audit.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	return strings.Join(actions, " ")
}

// approveWith opens the key prompt with a, replaces the default path with
// key and signs.
func approveWith(d *consoleDriver, key string) string {
	d.t.Helper()
	d.press(keyRunes("a"), never)
	if v := d.view(); !strings.Contains(v, "approve with SSH private key") {
		d.t.Fatalf("a did not ask for the key:\n%s", v)
	}
	d.press(keyEraseMsg, never)
	d.typeText(key)
	d.press(keyEnterMsg, never)
	return d.view()
}

func TestConsoleApproveRefusesAuthorAndStrangerThenCounts(t *testing.T) {
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	mallory, _ := sshKey(t, dir, "mallory")
	f := newRedriveFixture(t, 6, reviewPolicy(signers, ""))
	plan := f.plan(t, "--key", alice)
	env := consoleEnv(t, f, false, 0)

	d := drive(t, env, tuidlq.NewPlansPage(env))
	v := d.view()
	for _, want := range []string{plan[:12], "0/1", "pending approval"} {
		if !strings.Contains(v, want) {
			t.Fatalf("plans view lacks %q:\n%s", want, v)
		}
	}
	// a on the plan opens what the approver signs, then the key prompt
	// with the default key.
	d.press(keyRunes("a"), never)
	if len(d.pushed) != 1 {
		t.Fatal("a did not open the plan")
	}
	v = d.view()
	for _, want := range []string{"hash " + plan, "by ", "approvals 0/1: not approved: 0 of 1 required approvals", "author   alice@hc SHA256:",
		"today: review required, 1 approval(s)", "X execute: disabled (plan " + plan[:12] + " is not approved", "~/.ssh/id_ed25519"} {
		if !strings.Contains(v, want) {
			t.Fatalf("plan view lacks %q:\n%s", want, v)
		}
	}
	// On a small terminal the prompt and the decision stay on screen.
	d.page, _ = d.page.Update(tea.WindowSizeMsg{Width: 80, Height: 8})
	small := d.page.View()
	if lines := strings.Split(small, "\n"); len(lines) != 8 || !strings.Contains(small, "approve with SSH private key") || !strings.Contains(small, "approvals 0/1") {
		t.Fatalf("80x8 plan page (%d lines):\n%s", len(lines), small)
	}
	for _, l := range strings.Split(small, "\n") {
		if lipgloss.Width(l) > 80 {
			t.Fatalf("line wider than 80: %q", l)
		}
	}
	d.page, _ = d.page.Update(tea.WindowSizeMsg{Width: consoleW, Height: consoleH})
	d.press(keyEscMsg, never)

	// The author's own key: refused in place, nothing stored.
	if v := approveWith(d, alice); !strings.Contains(v, "author cannot approve") {
		t.Fatalf("self-approval not refused:\n%s", v)
	}
	// A key allowed_signers does not list: refused, nothing stored.
	if v := approveWith(d, mallory); !strings.Contains(v, "not in allowed_signers") {
		t.Fatalf("stranger's approval not refused:\n%s", v)
	}
	if sigs := storedSignatures(t, f, plan); len(sigs) != 1 || !strings.HasPrefix(sigs[0], "author ") {
		t.Fatalf("a refused approval was stored: %v", sigs)
	}
	// X is refused with the reason and opens no prompt.
	d.press(keyRunes("X"), never)
	if v := d.view(); !strings.Contains(v, "execute disabled: plan "+plan[:12]+" is not approved") || strings.Contains(v, "type the first 8 digits") {
		t.Fatalf("X on an unapproved plan:\n%s", v)
	}
	// A listed key: stored, and the plan now reads approved.
	v = approveWith(d, bob)
	for _, want := range []string{"approval stored: signed as bob@hc", "approvals 1/1: approved by bob@hc", "state ready", "approval bob@hc SHA256:", "a approve · X execute", "1 approval(s)"} {
		if !strings.Contains(v, want) {
			t.Fatalf("after bob's approval the view lacks %q:\n%s", want, v)
		}
	}
	if sigs := storedSignatures(t, f, plan); len(sigs) != 2 {
		t.Fatalf("stored signatures: %v", sigs)
	}
	if got := auditActions(t, f.audit); strings.Count(got, "redrive.approved") != 1 {
		t.Fatalf("audit log: %s", got)
	}
	// A missing key file is refused with the file named.
	if v := approveWith(d, filepath.Join(dir, "nope")); !strings.Contains(v, "cannot read "+filepath.Join(dir, "nope")) {
		t.Fatalf("missing key:\n%s", v)
	}
}

func TestConsoleExecuteIsDisabledInReadOnly(t *testing.T) {
	f := newRedriveFixture(t, 4, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t)
	env := consoleEnv(t, f, true, 0)
	d := drive(t, env, tuidlq.NewPlansPage(env))
	d.press(keyRunes("X"), never)
	v := d.view()
	for _, want := range []string{"X execute: disabled (read-only: --read-only)", "a approve: disabled (read-only: --read-only)", "execute disabled: read-only: --read-only"} {
		if !strings.Contains(v, want) {
			t.Fatalf("read-only plan view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "type the first 8 digits") {
		t.Fatalf("X opened the confirmation in a read-only context:\n%s", v)
	}
	// The action layer refuses too, whatever a page does.
	c, err := kafka.Dial(context.Background(), kafka.Options{Bootstrap: f.kc.Addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	svc := newConsoleRedrive(kafka.NewCluster(c), env.Config)
	if _, err := svc.Execute(context.Background(), plan, tuidlq.ExecRequest{Context: "test", ReadOnly: true}); !errors.Is(err, actions.ErrReadOnly) {
		t.Fatalf("read-only execute through the service: %v", err)
	}
	if _, err := svc.Approve(context.Background(), plan, approval.Signature{PlanHash: plan, Role: approval.RoleApproval}, "test", true); !errors.Is(err, actions.ErrReadOnly) {
		t.Fatalf("read-only approve through the service: %v", err)
	}
	if got := auditActions(t, f.audit); !strings.Contains(got, "redrive.refused") {
		t.Fatalf("the read-only refusal is not in the audit log: %s", got)
	}
	if got := f.state(t, plan); got != 0 {
		t.Fatalf("read-only sent %d records", got)
	}
}

// unreviewedPlanOnConsole stores a plan of n records under a policy
// without review (batches of 10, no rate to speak of) and opens :plans on
// a console whose re-failure watch lasts watch.
func unreviewedPlanOnConsole(t *testing.T, n int, watch time.Duration) (*redriveFixture, string, *consoleDriver) {
	t.Helper()
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t, "--batch-size", "10", "--rate", "10000")
	env := consoleEnv(t, f, false, watch)
	return f, plan, drive(t, env, tuidlq.NewPlansPage(env))
}

func TestConsoleExecuteRunsToCompletion(t *testing.T) {
	const n = 30
	f, plan, d := unreviewedPlanOnConsole(t, n, 200*time.Millisecond)
	d.press(keyRunes("X"), never)
	if v := d.view(); !strings.Contains(v, "type the first 8 digits of the plan hash to execute") {
		t.Fatalf("X did not ask for the hash:\n%s", v)
	}
	// A wrong hash sends nothing.
	d.typeText("00000000")
	d.press(keyEnterMsg, never)
	if v := d.view(); !strings.Contains(v, `"00000000" is not the plan's first 8 hash digits; nothing sent`) {
		t.Fatalf("wrong hash:\n%s", v)
	}
	if got := f.state(t, plan); got != 0 {
		t.Fatalf("a wrong confirmation sent %d records", got)
	}
	d.press(keyRunes("X"), never)
	d.typeText(plan[:8])
	d.press(keyEnterMsg, never) // runs to the end: the listener re-arms until the run is done
	v := d.until("verified:")
	for _, want := range []string{"100%", fmt.Sprintf("result: sent %d · skipped 0 · failed 0", n), fmt.Sprintf("verified: %d copies read back, 0 mismatch(es); re-failed 0 within 200ms", n), "OUTCOME", "→ ledger-events["} {
		if !strings.Contains(v, want) {
			t.Fatalf("finished view lacks %q:\n%s", want, v)
		}
	}
	if got := f.state(t, plan); got != n {
		t.Fatalf("target has %d of %d", got, n)
	}
	// The status reloads from the ledger: done, and X says why it is off.
	v = d.until("state done")
	if !strings.Contains(v, fmt.Sprintf("redriven %d of %d", n, n)) || !strings.Contains(v, "X execute: disabled (nothing left to send") {
		t.Fatalf("after the run:\n%s", v)
	}
	got := auditActions(t, f.audit)
	for _, want := range []string{"redrive.execute.started", "redrive.batch.sent", "redrive.execute.finished", "redrive.verified"} {
		if !strings.Contains(got, want) {
			t.Fatalf("audit log lacks %s: %s", want, got)
		}
	}
}

// Once a plan has sent everything the console verifies it (read-back, then
// the re-failure watch): the keys then say what they do (q does not claim
// that esc leaves anything running), and c stops only the watch: the
// read-back still checks every copy, even when c comes before the watch
// has begun.
func TestConsoleKeysDuringTheVerification(t *testing.T) {
	const n = 10
	// No consumer group reads the target, so only a key ends this watch.
	f, plan, d := unreviewedPlanOnConsole(t, n, 10*time.Minute)
	d.press(keyEnterMsg, never)
	d.press(keyRunes("X"), never)
	d.typeText(plan[:8])
	d.press(keyEnterMsg, func() bool { return strings.Contains(d.view(), "c or esc stop the re-failure watch") })
	v := d.view()
	if !strings.Contains(v, "ctrl+c quits") || strings.Contains(v, "p pause") {
		t.Fatalf("action line while verifying:\n%s", v)
	}
	d.press(keyRunes("q"), func() bool { return strings.Contains(d.view(), "only the re-failure watch runs") })
	if v := d.view(); strings.Contains(v, "leaves it running") || !strings.Contains(v, "c or esc stops it") {
		t.Fatalf("q while verifying:\n%s", v)
	}
	d.press(keyRunes("c"), func() bool { return strings.Contains(d.view(), "verif") && !strings.Contains(d.view(), "verifying:") })
	v = d.until("verified:")
	if want := fmt.Sprintf("verified: %d copies read back, 0 mismatch(es); re-failed 0 before the watch was stopped after", n); !strings.Contains(v, want) {
		t.Fatalf("after c while verifying, want %q:\n%s", want, v)
	}
	if strings.Contains(v, "only the re-failure watch runs") {
		t.Fatalf("the watch's note outlived it:\n%s", v)
	}
	if got := f.state(t, plan); got != n {
		t.Fatalf("target has %d of %d", got, n)
	}
}

func TestConsolePauseThenCancelLeavesWholeBatches(t *testing.T) {
	const n, batch = 40, 4
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	// 8 records/s in batches of 4: a batch every half second, so the test
	// acts between batches.
	plan := f.plan(t, "--batch-size", fmt.Sprint(batch), "--rate", "8")
	env := consoleEnv(t, f, false, 0)
	d := drive(t, env, tuidlq.NewPlansPage(env))
	d.press(keyEnterMsg, never)
	d.press(keyRunes("X"), never)
	d.typeText(plan[:8])
	d.press(keyEnterMsg, func() bool { return strings.Contains(d.view(), fmt.Sprintf(") sent %d already sent", batch)) })
	v := d.view()
	if !strings.Contains(v, "executing ") || !strings.Contains(v, fmt.Sprintf("/%d (", n)) || !strings.Contains(v, "eta") {
		t.Fatalf("no progress bar with counts and ETA:\n%s", v)
	}
	d.press(keyRunes("p"), func() bool { return strings.Contains(d.view(), "PAUSED") })
	v = d.view()
	if !strings.Contains(v, "PAUSED") {
		t.Fatalf("pause not shown:\n%s", v)
	}
	// q does not quit under a running execution: it says how to stop it.
	d.press(keyRunes("q"), func() bool { return strings.Contains(d.view(), "c cancels after the batch in flight") })
	// esc asks before leaving the execution behind.
	// (The run is paused: nothing moves until a key says so, so the driver
	// stops as soon as the page answers.)
	d.press(keyEscMsg, func() bool { return strings.Contains(d.view(), "keeps running if you leave") })
	if v := d.view(); !strings.Contains(v, "keeps running if you leave") || d.back {
		t.Fatalf("esc during the execution:\n%s", v)
	}
	// esc again leaves it running in the background, and says so.
	d.press(keyEscMsg, func() bool { return d.back && len(d.flashes) > 0 })
	if !d.back || !strings.Contains(strings.Join(d.flashes, " "), "continues in the background") {
		t.Fatalf("leaving the execution: back %v, flashes %v", d.back, d.flashes)
	}
	// The plans list shows it paused; opening the plan again attaches to
	// the same execution, and c there cancels it.
	d = drive(t, env, tuidlq.NewPlansPage(env))
	if v := d.view(); !strings.Contains(v, "paused ") {
		t.Fatalf("plans list while the execution is paused:\n%s", v)
	}
	d.press(keyEnterMsg, func() bool { return strings.Contains(d.view(), "PAUSED") })
	d.press(keyRunes("c"), func() bool { return strings.Contains(d.view(), "result:") })
	v = d.until("verified:")
	if !strings.Contains(v, "CANCELLED") {
		t.Fatalf("cancel not shown:\n%s", v)
	}
	var sent int
	if _, err := fmt.Sscanf(v[strings.Index(v, "result: sent "):], "result: sent %d", &sent); err != nil {
		t.Fatal(err)
	}
	if sent == 0 || sent >= n || sent%batch != 0 {
		t.Fatalf("cancelled after %d records: want whole batches of %d, some but not all", sent, batch)
	}
	if got := f.state(t, plan); got != sent {
		t.Fatalf("target has %d copies, the console says %d", got, sent)
	}
	if !strings.Contains(v, fmt.Sprintf("verified: %d copies read back, 0 mismatch(es)", sent)) {
		t.Fatalf("read-back after the cancel:\n%s", v)
	}
}

// TestConsoleSignsItsOwnPlanAsAuthor makes a plan from a DLQ's classes in
// the console, signs it as its author there (review needs the author's
// signature), and has another key approve it.
func TestConsoleSignsItsOwnPlanAsAuthor(t *testing.T) {
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	f := newRedriveFixture(t, 5, reviewPolicy(signers, ""))
	env := consoleEnv(t, f, false, 0)
	d := drive(t, env, tuidlq.NewClassesPage(env, "ledger-events.DLT"))
	d.press(keyRunes("x"), never)
	d.press(keyRunes("p"), never) // checks the selection, stores the plan
	v := d.view()
	for _, want := range []string{"stored in the cluster's plan store", "(unsigned)", "not approved: the plan carries no author signature", "S sign as its author"} {
		if !strings.Contains(v, want) {
			t.Fatalf("new plan lacks %q:\n%s", want, v)
		}
	}
	d.press(keyRunes("S"), never)
	d.press(keyEraseMsg, never)
	d.typeText(alice)
	d.press(keyEnterMsg, never)
	v = d.view()
	for _, want := range []string{"signed as the plan's author", "author   alice@hc", "not approved: 0 of 1 required approvals"} {
		if !strings.Contains(v, want) {
			t.Fatalf("after signing as author the view lacks %q:\n%s", want, v)
		}
	}
	// Signing again is refused: the author's signature stays.
	d.press(keyRunes("S"), never)
	if v := d.view(); !strings.Contains(v, "sign as author disabled: the plan already carries its author's signature") {
		t.Fatalf("second author signature:\n%s", v)
	}
	if v := approveWith(d, alice); !strings.Contains(v, "author cannot approve") {
		t.Fatalf("self-approval of a console plan:\n%s", v)
	}
	if v := approveWith(d, bob); !strings.Contains(v, "approvals 1/1: approved by bob@hc") || !strings.Contains(v, "a approve · X execute\n") {
		t.Fatalf("bob's approval:\n%s", v)
	}
	if got := auditActions(t, f.audit); !strings.Contains(got, "redrive.plan redrive.plan.signed") || !strings.Contains(got, "redrive.approved") {
		t.Fatalf("audit log: %s", got)
	}
}

// A stored plan holds locations, digests, targets and verdicts only: the
// plan page shows each record's event id and class derived from the record
// as it is now, and the review (counts per target, idempotency keys), as
// `berth redrive show` does.
func TestConsoleStoredPlanShowsEventIDsDerivedFromTheRecords(t *testing.T) {
	f := newRedriveFixture(t, 3, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	f.plan(t)
	env := consoleEnv(t, f, false, 0)
	d := drive(t, env, tuidlq.NewPlansPage(env))
	d.press(keyEnterMsg, never)
	v := d.until("evt-0002")
	// The review: every target with its count, and the included keys.
	for _, want := range []string{"evt-0000", "evt-0001", "include", "targets: ledger-events 3", "idempotency keys: evt-0000, evt-0002, evt-0001"} {
		if !strings.Contains(v, want) {
			t.Fatalf("stored plan page lacks %q:\n%s", want, v)
		}
	}
}
