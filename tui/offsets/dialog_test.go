package offsets

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/internal/monitor"
	reset "github.com/berth-dev/berth/internal/offsets"
	"github.com/berth-dev/berth/tui"
)

var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

type fixture struct {
	kc       *kafkatest.Cluster
	cluster  *kafka.Cluster
	env      tui.PageEnv
	log      *audit.Log
	readOnly bool // what the action layer is told, whatever the page env says
}

// newFixture starts a cluster with orders (2 partitions x 10 records, a
// minute apart from t0) and group g committed at 5, and wires the dialog's
// env.Do to run synchronously against it.
func newFixture(t *testing.T, partitions int32) *fixture {
	t.Helper()
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", partitions, 1, nil)
	commits := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		kc.ProduceTo(t, "orders", p, 10, t0, time.Minute)
		commits[p] = 5
	}
	kc.Commit(t, "g", map[string]map[int32]int64{"orders": commits})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kafka.Dial(ctx, kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cluster := kafka.NewCluster(cl)
	t.Cleanup(cluster.Close)
	log, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Groups = []config.GroupPolicy{{Match: "pay*", Effects: true}}
	f := &fixture{kc: kc, cluster: cluster, log: log}
	f.env = tui.PageEnv{
		Config:  cfg,
		Context: "test",
		Size:    func() (int, int) { return 100, 30 },
		Do: func(fn func(context.Context, backends.Cluster) tea.Msg) tea.Cmd {
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				return fn(ctx, cluster)
			}
		},
	}
	f.env.Services = map[string]any{ServiceName: ResetterOpener(func(c backends.Cluster, env tui.PageEnv) (*actions.Resetter, error) {
		return &actions.Resetter{Backend: kafka.ResetsOn(c.(*kafka.Cluster)), Audit: log, Context: env.Context,
			ReadOnly: env.ReadOnly || f.readOnly, Actor: "tui-tester",
			Effects: func(g string) bool { p, _ := env.Config.GroupPolicyFor(g); return p.Effects }}, nil
	})}
	return f
}

// send delivers a message and runs the resulting commands synchronously,
// feeding their messages back (as the app would route them).
func send(d *Dialog, msg tea.Msg) tea.Msg {
	var last tea.Msg
	for msg != nil {
		_, cmd := d.Update(msg)
		msg = nil
		if cmd != nil {
			msg = cmd()
			last = msg
		}
	}
	return last
}

func keys(d *Dialog, ks ...string) tea.Msg {
	var last tea.Msg
	for _, k := range ks {
		var msg tea.KeyMsg
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		case "tab":
			msg = tea.KeyMsg{Type: tea.KeyTab}
		case "right":
			msg = tea.KeyMsg{Type: tea.KeyRight}
		case "left":
			msg = tea.KeyMsg{Type: tea.KeyLeft}
		case "backspace":
			msg = tea.KeyMsg{Type: tea.KeyBackspace}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		if m := send(d, msg); m != nil {
			last = m
		}
	}
	return last
}

// typeText types s one rune at a time.
func typeText(d *Dialog, s string) {
	for _, r := range s {
		keys(d, string(r))
	}
}

func (f *fixture) committed(t *testing.T, group string) map[int32]int64 {
	t.Helper()
	resp, err := f.kc.Admin.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// chooseMode moves the mode selector to m.
func chooseMode(t *testing.T, d *Dialog, m reset.Mode) {
	t.Helper()
	for i := 0; i < int(numFields) && d.focus != fieldMode; i++ {
		send(d, tea.KeyMsg{Type: tea.KeyShiftTab})
	}
	for i := 0; i < len(reset.Modes) && d.currentMode() != m; i++ {
		keys(d, "right")
	}
	if d.currentMode() != m {
		t.Fatalf("mode selector never reached %s", m)
	}
}

func assertFits(t *testing.T, view string, w, h int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) != h {
		t.Fatalf("view has %d lines, want %d:\n%s", len(lines), h, view)
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			t.Fatalf("line %d is %d cells wide (> %d): %q", i, ansi.StringWidth(l), w, l)
		}
	}
}

func TestDialogDryRunThenTypedConfirmationExecutes(t *testing.T) {
	f := newFixture(t, 2)
	d := New(f.env, "g")
	chooseMode(t, d, reset.ToOffset)
	keys(d, "tab")
	typeText(d, "2")
	keys(d, "enter") // dry run
	if d.step != stepPlan {
		t.Fatalf("after enter: step %d, errors %q %q", d.step, d.formErr, d.planErr)
	}
	v := d.View()
	for _, want := range []string{"CURRENT", "NEW", "CHANGE", "replay 3 record(s) (2026-11-29 08:02:00Z → 2026-11-29 08:04:00Z)", "-3", "enter: execute"} {
		if !strings.Contains(v, want) {
			t.Fatalf("dry-run view lacks %q:\n%s", want, v)
		}
	}
	assertFits(t, v, 100, 30)

	// Execute needs the group's name typed exactly.
	keys(d, "enter")
	if d.step != stepConfirm {
		t.Fatalf("enter on the plan: step %d", d.step)
	}
	typeText(d, "gg")
	keys(d, "enter")
	if d.step != stepConfirm || f.committed(t, "g")[0] != 5 {
		t.Fatalf("a wrong name executed: step %d, offsets %v", d.step, f.committed(t, "g"))
	}
	if !strings.Contains(d.View(), "does not match") {
		t.Fatalf("no mismatch hint:\n%s", d.View())
	}
	keys(d, "backspace", "enter")
	if d.step != stepDone {
		t.Fatalf("typed name: step %d", d.step)
	}
	if c := f.committed(t, "g"); c[0] != 2 || c[1] != 2 {
		t.Fatalf("committed %v, want 2 and 2", c)
	}
	if v := d.View(); !strings.Contains(v, "Executed: offsets committed (verified") || !strings.Contains(v, "audit entry 2") {
		t.Fatalf("result not shown in place:\n%s", v)
	}
	entries, _ := f.log.List()
	if len(entries) != 2 || entries[1].Actor != "tui-tester" || entries[1].Target != "g" {
		t.Fatalf("audit %+v", entries)
	}
	// esc closes the dialog.
	if _, ok := keys(d, "esc").(tui.BackMsg); !ok {
		t.Fatal("esc on the result does not close the dialog")
	}
}

// With active members the dry run says the reset is refused, and enter
// does not ask for the group's name (a refusal after the name was typed
// wasted the operator's time); it dry-runs again instead.
func TestDialogRefusesActiveGroupBeforeAskingForItsName(t *testing.T) {
	f := newFixture(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kc.Addrs...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"),
		kgo.ClientID("ledger-writer"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	defer func() { cancel(); <-done; cl.Close() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		gs, err := f.kc.Admin.DescribeGroups(context.Background(), "g")
		if err == nil && gs["g"].State == "Stable" && len(gs["g"].Members) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer never joined: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
	d := New(f.env, "g")
	keys(d, "enter") // to-earliest, all
	if d.step != stepPlan || !strings.Contains(d.View(), "ledger-writer") {
		t.Fatalf("dry run does not warn about the member:\n%s", d.View())
	}
	v := d.View()
	if !strings.Contains(v, "refused: group g has 1 active member(s)") || strings.Contains(v, "enter: execute") {
		t.Fatalf("the dry run does not refuse up front:\n%s", v)
	}
	d.Update(tea.WindowSizeMsg{Width: 40, Height: 30}) // narrow: the refusal wraps, its end is read
	if v := strings.Join(strings.Fields(d.View()), " "); !strings.Contains(v, "stop its consumers first") {
		t.Fatalf("the refusal is cut at 40 columns:\n%s", d.View())
	}
	d.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	keys(d, "enter", "x")
	typeText(d, "g")
	keys(d, "enter")
	v = d.View()
	if d.step != stepPlan || strings.Contains(v, "Type the group's name") || !strings.Contains(v, "refused: group g has 1 active member(s)") {
		t.Fatalf("the dialog asked for confirmation of a refused reset (step %d):\n%s", d.step, v)
	}
	if c := f.committed(t, "g"); c[0] != 5 {
		t.Fatalf("refused reset committed %v", c)
	}
}

func TestDialogReadOnly(t *testing.T) {
	f := newFixture(t, 2)
	f.env.ReadOnly, f.env.ReadOnlyReason = true, "context prod has read_only: true"
	d := New(f.env, "g")
	keys(d, "enter")
	if d.step != stepPlan {
		t.Fatalf("a dry run must work read-only: %q", d.planErr)
	}
	keys(d, "enter")
	if d.step != stepPlan || !strings.Contains(d.View(), "execute disabled") || !strings.Contains(d.View(), "read_only: true") {
		t.Fatalf("execute offered read-only: step %d\n%s", d.step, d.View())
	}
	// Even if a page let it through, the action refuses.
	f.env.ReadOnly = false
	f.readOnly = true
	d = New(f.env, "g")
	keys(d, "enter", "enter")
	typeText(d, "g")
	keys(d, "enter")
	if !strings.Contains(d.View(), "Not executed: refused: the context is read-only") {
		t.Fatalf("action-layer refusal not shown:\n%s", d.View())
	}
	if c := f.committed(t, "g"); c[0] != 5 {
		t.Fatalf("read-only reset committed %v", c)
	}
}

func TestDialogEffectsNeedExplicitConfirmation(t *testing.T) {
	f := newFixture(t, 1)
	f.kc.Commit(t, "payments-capture", map[string]map[int32]int64{"orders": {0: 8}})
	d := New(f.env, "payments-capture")
	chooseMode(t, d, reset.ShiftBy)
	keys(d, "tab")
	typeText(d, "-3")
	keys(d, "enter")
	if v := d.View(); !strings.Contains(v, "effect-producing") || !strings.Contains(v, "[ ] e:") {
		t.Fatalf("no effects warning/checkbox:\n%s", v)
	}
	keys(d, "enter")
	typeText(d, "payments-capture")
	keys(d, "enter")
	if v := d.View(); !strings.Contains(v, "Not executed") || !strings.Contains(v, "effect-producing") {
		t.Fatalf("unconfirmed replay not refused in place:\n%s", v)
	}
	keys(d, "n", "enter", "e")
	if !strings.Contains(d.View(), "[x] e:") {
		t.Fatalf("checkbox not ticked:\n%s", d.View())
	}
	keys(d, "enter")
	typeText(d, "payments-capture")
	keys(d, "enter")
	if c := f.committed(t, "payments-capture"); c[0] != 5 {
		t.Fatalf("confirmed replay committed %v, want 5", c)
	}
}

func TestDialogFormValidation(t *testing.T) {
	f := newFixture(t, 1)
	d := New(f.env, "g")
	chooseMode(t, d, reset.ToOffset)
	keys(d, "tab")
	typeText(d, "abc")
	if msg := keys(d, "enter"); msg != nil {
		t.Fatalf("an invalid form started a dry run: %#v", msg)
	}
	if !strings.Contains(d.View(), `to-offset: "abc" is not a non-negative offset`) {
		t.Fatalf("no error in place:\n%s", d.View())
	}
	chooseMode(t, d, reset.ToDatetime)
	keys(d, "tab")
	typeText(d, "2026-11-29T08:06:00")
	keys(d, "tab")
	for range 3 {
		keys(d, "backspace")
	}
	typeText(d, "orders:7")
	keys(d, "enter")
	if !strings.Contains(d.View(), "dry run failed") || !strings.Contains(d.View(), "partition 7") {
		t.Fatalf("scope error not shown:\n%s", d.View())
	}
}

func TestDialogManyPartitionsScrollAndFit(t *testing.T) {
	f := newFixture(t, 40)
	d := New(f.env, "g")
	for _, size := range [][2]int{{80, 24}, {100, 30}, {60, 12}} {
		d.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		assertFits(t, d.View(), size[0], size[1])
	}
	d.Update(tea.WindowSizeMsg{Width: 120, Height: 24})
	keys(d, "enter")
	v := d.View()
	assertFits(t, v, 120, 24)
	if !strings.Contains(v, "more row(s)") || !strings.Contains(v, "Total: replay 200 record(s)") {
		t.Fatalf("long plan not windowed:\n%s", v)
	}
	firstRow := func() []string {
		lines := strings.Split(d.View(), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "TOPIC") {
				return strings.Fields(lines[i+1])
			}
		}
		t.Fatalf("no table:\n%s", d.View())
		return nil
	}
	if r := firstRow(); r[1] != "0" {
		t.Fatalf("first row %v, want partition 0", r)
	}
	keys(d, "j", "j")
	if r := firstRow(); r[1] != "2" {
		t.Fatalf("after scrolling two rows the first row is %v", r)
	}
}

func TestDialogArrowsChangeModeFromAnyField(t *testing.T) {
	f := newFixture(t, 1)
	d := New(f.env, "g")
	chooseMode(t, d, reset.ToOffset)
	keys(d, "tab")
	typeText(d, "12")
	if d.focus != fieldValue || d.value != "12" {
		t.Fatalf("focus %d value %q", d.focus, d.value)
	}
	keys(d, "right")
	if d.currentMode() != reset.ShiftBy || d.value != "" {
		t.Fatalf("right on the value field: mode %s value %q", d.currentMode(), d.value)
	}
	// Letters type into the field rather than change the mode.
	typeText(d, "hl")
	if d.currentMode() != reset.ShiftBy || d.value != "hl" {
		t.Fatalf("letters changed the mode: %s %q", d.currentMode(), d.value)
	}
	// A mode without a value moves the focus off the value field.
	chooseMode(t, d, reset.ToOffset)
	keys(d, "tab")
	for d.currentMode() != reset.ToEarliest {
		keys(d, "left")
	}
	if d.focus != fieldScope {
		t.Fatalf("focus stayed on a value field the mode does not have: %d", d.focus)
	}
}

// consoleSource attaches the real console to the test cluster, as
// cmd/berth does: the monitor refreshes snapshots, Cluster serves actions.
type consoleSource struct {
	cluster *kafka.Cluster
	mon     *monitor.Monitor
}

func (s *consoleSource) Refresh(ctx context.Context) (*tui.Snapshot, error) {
	snap, err := s.mon.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	return &snap, nil
}
func (s *consoleSource) Cluster() backends.Cluster { return s.cluster }
func (s *consoleSource) Close()                    {}

// TestFlowRFromGroupPageResetsOffsets drives the whole console (the real
// bubbletea program): open the group page, press R, dry run, type the
// group's name, execute.
func TestFlowRFromGroupPageResetsOffsets(t *testing.T) {
	f := newFixture(t, 2)
	src := &consoleSource{cluster: f.cluster, mon: monitor.New(f.cluster, kafka.NewTimestampReader(f.cluster.Client()), monitor.Config{})}
	m := tui.New(tui.Options{Config: f.env.Config, Context: "test", Source: src, Refresh: time.Hour, Timeout: 10 * time.Second, Services: f.env.Services,
		Dial: func(context.Context, string) (tui.Source, error) { return nil, errors.New("no other contexts") }})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 30))
	wait := func(s string) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return strings.Contains(string(b), s) },
			teatest.WithDuration(2*time.Minute), teatest.WithCheckInterval(20*time.Millisecond))
	}
	tm.Type(":group g")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("R reset offsets")
	tm.Type("R")
	wait("Reset offsets of group g")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("enter: execute")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	tm.Type("g")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("Executed: offsets committed")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	tm.WaitFinished(t, teatest.WithFinalTimeout(time.Minute))
	if c := f.committed(t, "g"); c[0] != 0 || c[1] != 0 {
		t.Fatalf("console reset committed %v, want 0 and 0", c)
	}
}

// Every field edits the same way: ctrl+u clears it (Scope included),
// ctrl+w erases a word, pasted text is typed.
func TestDialogFieldsShareTextEditing(t *testing.T) {
	d := New(tui.PageEnv{}, "g")
	keys(d, "tab") // to-earliest has no value: tab goes to Scope
	if d.focus != fieldScope || d.scope != "all" {
		t.Fatalf("focus %d scope %q", d.focus, d.scope)
	}
	d.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	if d.scope != "" {
		t.Fatalf("ctrl+u left scope %q", d.scope)
	}
	d.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("orders:0,1 payments\n"), Paste: true})
	d.Update(tea.KeyMsg{Type: tea.KeyCtrlW})
	if d.scope != "orders:0,1 " {
		t.Fatalf("paste then ctrl+w: scope %q", d.scope)
	}
	keys(d, "right", "right", "right") // a mode with a value
	if !needsValue(d.currentMode()) {
		t.Fatalf("mode %s takes no value", d.currentMode())
	}
	d.focus = fieldValue
	typeText(d, "15m")
	d.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	if d.value != "" {
		t.Fatalf("ctrl+u left value %q", d.value)
	}
}

// The dry run's table header is never cut, whatever the width: each column
// is at least its title's width, numbers stay whole, and a long impact
// gives up cells (cut with "…" in its cell, the CLI prints it whole). At
// 100 columns an unclamped plan shows every impact whole.
func TestDialogDryRunHeaderIsNeverCut(t *testing.T) {
	f := newFixture(t, 2)
	for _, c := range []struct {
		offset  string
		w, h    int
		titles  []string
		clamped bool
	}{
		{"2", 100, 30, []string{"TOPIC", "PART", "CURRENT", "NEW", "CHANGE", "IMPACT"}, false},
		{"2", 60, 24, []string{"TOPIC", "PART", "CURRENT", "NEW", "CHANGE", "IMPACT"}, false},
		// Asked past the log end: clamped to it, and the CLAMPED column
		// says so beside an impact that now has less room.
		{"999", 100, 30, []string{"TOPIC", "PART", "CURRENT", "NEW", "CHANGE", "IMPACT", "CLAMPED"}, true},
		{"999", 70, 24, []string{"TOPIC", "PART", "CURRENT", "NEW", "CHANGE", "IMPACT", "CLAMPED"}, true},
		// Too narrow for every title: the last columns drop out whole.
		{"999", 40, 24, []string{"TOPIC", "PART", "CURRENT", "NEW", "CHANGE"}, false},
	} {
		d := New(f.env, "g")
		d.Update(tea.WindowSizeMsg{Width: c.w, Height: c.h})
		chooseMode(t, d, reset.ToOffset)
		keys(d, "tab")
		typeText(d, c.offset)
		keys(d, "enter")
		if d.step != stepPlan {
			t.Fatalf("--to-offset %s: step %d, errors %q %q", c.offset, d.step, d.formErr, d.planErr)
		}
		v := d.View()
		assertFits(t, v, c.w, c.h)
		lines := strings.Split(v, "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "TOPIC") })
		if i < 0 {
			t.Fatalf("--to-offset %s at %d columns: no table header:\n%s", c.offset, c.w, v)
		}
		if got := strings.Fields(lines[i]); !slices.Equal(got, c.titles) {
			t.Errorf("--to-offset %s at %d columns: header %q, want %q whole", c.offset, c.w, lines[i], c.titles)
		}
		row := lines[i+1]
		if fs := strings.Fields(row); len(fs) < 5 || fs[0] != "orders" || fs[2] != "5" {
			t.Errorf("--to-offset %s at %d columns: row %q lost its numbers", c.offset, c.w, row)
		}
		if c.clamped && !strings.Contains(row, "asked 999") && !strings.Contains(row, "…") {
			t.Errorf("--to-offset %s at %d columns: row %q does not show the clamp", c.offset, c.w, row)
		}
		if !c.clamped && c.w == 100 && !strings.Contains(row, "replay 3 record(s) (2026-11-29 08:02:00Z → 2026-11-29 08:04:00Z)") {
			t.Errorf("at 100 columns the impact is cut: %q", row)
		}
	}
}
