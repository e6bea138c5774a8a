package capacity

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/berth-dev/berth/backends"
	engine "github.com/berth-dev/berth/capacity"
	"github.com/berth-dev/berth/tui"
)

func TestMain(m *testing.M) {
	// Plain text: an escape sequence in a view can then only come from
	// unsanitised input.
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

func sized(m Model, w, h int) Model {
	m, _ = m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

func press(m Model, keys ...tea.KeyMsg) Model {
	for _, k := range keys {
		m, _ = m.Update(k)
	}
	return m
}

func typed(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

var (
	tab       = tea.KeyMsg{Type: tea.KeyTab}
	enter     = tea.KeyMsg{Type: tea.KeyEnter}
	clearLine = tea.KeyMsg{Type: tea.KeyCtrlU}
	backspace = tea.KeyMsg{Type: tea.KeyBackspace}
	pgdown    = tea.KeyMsg{Type: tea.KeyPgDown}
	pgup      = tea.KeyMsg{Type: tea.KeyPgUp}
)

// focusField tabs to f and replaces its text, one keystroke at a time.
func focusField(m Model, f engine.Field, text string) Model {
	for m.Focused() != f {
		m = press(m, tab)
	}
	m = press(m, clearLine)
	for _, r := range text {
		m = press(m, typed(string(r)))
	}
	return m
}

// checkView asserts the view's shape: exactly h lines, none wider than w,
// and no NaN, Inf or escape sequence.
func checkView(t *testing.T, m Model, w, h int) string {
	t.Helper()
	v := m.View()
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		t.Fatalf("%dx%d: %d lines", w, h, len(lines))
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Fatalf("%dx%d: line %d is %d cells: %q", w, h, i, n, l)
		}
	}
	for _, bad := range []string{"NaN", "Inf", "\x1b"} {
		if strings.Contains(v, bad) {
			t.Fatalf("view contains %q:\n%s", bad, v)
		}
	}
	return v
}

func TestModel_SeedFiguresOnOpen(t *testing.T) {
	m := sized(New(nil, nil), 200, 60)
	v := checkView(t, m, 200, 60)
	for _, want := range []string{"19.53 MiB/s", "1.769 TB/day", "1.609 TiB/day", "4.83 TiB", "14.48 TiB", "97.66 MiB/s",
		"57.22 GiB", "45.78 GiB", "60,000/s", "300,000/s", "10 per group", "30 total", "50 per group", "150 total",
		"488.28 MiB/s", "48,000/s", "≥50 partitions", "6,000/s", "7.2×", "≈609/s each",
		"19.53 MiB/s × (3 groups + 2 follower copies)"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q", want)
		}
	}
}

// TestModel_RecomputesOnEveryKeystroke retypes the average rate one key at
// a time: after each key the results are those of the text on screen,
// never of an earlier text.
func TestModel_RecomputesOnEveryKeystroke(t *testing.T) {
	m := sized(New(nil, nil), 160, 60)
	m = press(m, clearLine)
	if err := m.Worksheet().Errors[engine.AvgRate]; err == nil || err.Error() != "is empty" {
		t.Fatalf("after clearing: %v", err)
	}
	for _, r := range "40000" {
		m = press(m, typed(string(r)))
		want := engine.Form(m.Form()).Worksheet()
		for _, o := range engine.Outputs() {
			got, okG := m.Worksheet().Value(o)
			exp, okE := want.Value(o)
			if okG != okE || got != exp {
				t.Fatalf("after %q: %s shows %v (%v), text says %v (%v)", m.Form()[engine.AvgRate], o.JSON(), got, okG, exp, okE)
			}
		}
		checkView(t, m, 160, 60)
	}
	v := checkView(t, m, 160, 60)
	if !strings.Contains(v, "39.06 MiB/s") || !strings.Contains(v, "20 per group") {
		t.Errorf("40,000 events/s not reflected:\n%s", v)
	}
	m = press(m, backspace) // "4000": below... still valid, and recomputed
	if x, _ := m.Worksheet().Value(engine.ConsumersPerGroup); x != 2 {
		t.Errorf("after backspace consumers = %v, want 2", x)
	}
}

// TestModel_InvalidFieldBlanksOnlyDependents: an invalid field shows its
// error next to it; the results computed from it show "—"; the others keep
// their numbers.
func TestModel_InvalidFieldBlanksOnlyDependents(t *testing.T) {
	for _, tc := range []struct {
		f          engine.Field
		text       string
		err        string
		dependent  engine.Output
		unaffected engine.Output
	}{
		{engine.AvgRate, "", "is empty", engine.IngestMiBPerS, engine.PeakMiBPerS},
		{engine.AvgRate, "-5", "must not be negative", engine.ConsumersPerGroup, engine.PartitionCapPerS},
		{engine.AvgRate, "abc", "not a number", engine.HotPartitionPerS, engine.PeakGrossGiB},
		{engine.AvgRate, "99999999999999", "absurdly large", engine.DeliveriesPerS, engine.PeakDeliveriesPerS},
		{engine.PeakRate, "100", "below the average rate", engine.PeakEgressMiBPerS, engine.EgressMiBPerS},
		{engine.EventSize, "1K", "unknown unit", engine.RetentionReplicatedTiB, engine.ConsumersTotal},
		{engine.Retention, "72", "needs a unit", engine.RetentionLogicalTiB, engine.IngestTiBPerDay},
		{engine.ReplicationFactor, "0", "must be at least 1", engine.EgressMiBPerS, engine.DeliveriesPerS},
		{engine.ConsumerRate, "0", "must be greater than 0", engine.MinPartitionsForPeak, engine.IngestMiBPerS},
		{engine.Partitions, "0", "must be at least 1", engine.OtherPartitionPerS, engine.ConsumersPerGroup},
		{engine.Partitions, "2.5", "not a whole number", engine.PartitionCapPerS, engine.MinPartitionsForPeak},
		{engine.HotKeyShare, "2", "absurdly large", engine.HotPartitionMultiple, engine.PartitionCapPerS},
		{engine.Compression, "0.5", "must be at least 1", engine.PeakMiBPerS, engine.PeakConsumersTotal},
		{engine.Headroom, "lots", "not a number", engine.ConsumersTotal, engine.IngestMiBPerS},
	} {
		t.Run(tc.f.Flag()+"="+tc.text, func(t *testing.T) {
			m := focusField(sized(New(nil, nil), 200, 60), tc.f, tc.text)
			v := checkView(t, m, 200, 60)
			fieldLine := lineWith(v, "▸ "+tc.f.Label())
			if !strings.Contains(fieldLine, "✗ ") {
				t.Errorf("field line %q not marked invalid", fieldLine)
			}
			// next to the field the error may be cut; in full below the form
			if full := lineWith(v, tc.f.Label()+": "); !strings.Contains(full, tc.err) {
				t.Errorf("full error line %q lacks %q", full, tc.err)
			}
			dep := resultLine(v, tc.dependent)
			if !strings.Contains(dep, "—") || !strings.Contains(dep, "needs a valid "+tc.f.Label()) {
				t.Errorf("dependent %s line %q: want — and the reason", tc.dependent.JSON(), dep)
			}
			if x, ok := m.Worksheet().Value(tc.unaffected); !ok {
				t.Errorf("unaffected %s unavailable", tc.unaffected.JSON())
			} else if line := resultLine(v, tc.unaffected); !strings.Contains(line, engine.FormatValue(tc.unaffected, x)) {
				t.Errorf("unaffected %s line %q lacks %s", tc.unaffected.JSON(), line, engine.FormatValue(tc.unaffected, x))
			}
			// correcting the field restores everything
			m = focusField(m, tc.f, engine.DefaultForm()[tc.f])
			if !m.Worksheet().Valid() {
				t.Errorf("still invalid after restoring: %v", m.Worksheet().Err())
			}
		})
	}
}

// lineWith returns the first line of v that contains s (after the form's
// gutter for result lines).
func lineWith(v, s string) string {
	for _, l := range strings.Split(v, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// resultLine returns the results column's line for o: the label after the
// "•" marker or its blank, not a section heading that shares a word.
func resultLine(v string, o engine.Output) string {
	for _, l := range strings.Split(v, "\n") {
		if strings.Contains(l, "• "+o.Label()+" ") || strings.Contains(l, "   "+o.Label()+" ") {
			return l
		}
	}
	return ""
}

func TestModel_FitsEverySize(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {100, 30}, {120, 40}, {200, 50}, {60, 20}, {40, 10}, {20, 5}, {1, 1}} {
		m := sized(New(nil, nil), sz[0], sz[1])
		checkView(t, m, sz[0], sz[1])
		m = focusField(m, engine.EventSize, "garbage that is long enough to overflow any narrow column")
		checkView(t, m, sz[0], sz[1])
		m = press(m, pgdown, pgdown, pgdown)
		checkView(t, m, sz[0], sz[1])
	}
}

func TestModel_ScrollResults(t *testing.T) {
	m := sized(New(nil, nil), 100, 20)
	top := checkView(t, m, 100, 20)
	if !strings.Contains(top, "1 · Average ingest") || strings.Contains(top, "8 · Hot key") {
		t.Fatalf("first page:\n%s", top)
	}
	for range 10 {
		m = press(m, pgdown)
	}
	bottom := checkView(t, m, 100, 20)
	if strings.Contains(bottom, "1 · Average ingest") || !strings.Contains(bottom, "8 · Hot key") {
		t.Fatalf("after scrolling to the end:\n%s", bottom)
	}
	for range 10 {
		m = press(m, pgup)
	}
	if v := checkView(t, m, 100, 20); v != top {
		t.Fatalf("scrolling back does not return to the top:\n%s", v)
	}
}

// fakeMeasure records requests and answers with a fixed measurement.
type fakeMeasure struct {
	topics []string
	m      engine.Measurement
	err    error
}

func (f *fakeMeasure) fn(topic string, gen int) tea.Cmd {
	f.topics = append(f.topics, topic)
	return func() tea.Msg { return MeasuredMsg{Gen: gen, M: f.m, Err: f.err} }
}

var ordersLoad = engine.Measurement{Topic: "orders", Window: 5 * time.Second, AvgRate: 1234.5, PeakRate: 4000,
	EventSize: 700, Sampled: 100, Partitions: 6, ReplicationFactor: 3, Retention: 7 * 24 * time.Hour, Groups: 2}

func TestModel_Prefill(t *testing.T) {
	fake := &fakeMeasure{m: ordersLoad}
	m := sized(New(nil, fake.fn), 160, 50)
	m.SetTopic("orders")
	for m.Focused() != engine.NumFields {
		m = press(m, tab)
	}
	m = press(m, enter) // edit the topic
	m, cmd := m.Update(enter)
	if cmd == nil || !m.Measuring() || len(fake.topics) != 1 || fake.topics[0] != "orders" {
		t.Fatalf("enter on the topic field: cmd %v measuring %v requests %v", cmd != nil, m.Measuring(), fake.topics)
	}
	// p while measuring does not start another
	if m2, cmd2 := m.Update(typed("p")); cmd2 != nil || len(fake.topics) != 1 {
		t.Fatalf("second measurement started: %v", m2.Measuring())
	}
	m, _ = m.Update(cmd())
	form := m.Form()
	for f, want := range map[engine.Field]string{engine.AvgRate: "1234.5", engine.PeakRate: "4000", engine.EventSize: "700B",
		engine.Partitions: "6", engine.ReplicationFactor: "3", engine.Retention: "7d", engine.Groups: "2"} {
		if form[f] != want || !m.Measured(f) {
			t.Errorf("%s = %q (measured %v), want %q measured", f.Flag(), form[f], m.Measured(f), want)
		}
	}
	if m.Measured(engine.ConsumerRate) || form[engine.ConsumerRate] != "2000" {
		t.Errorf("consumer rate touched by prefill")
	}
	v := checkView(t, m, 160, 50)
	if !strings.Contains(v, "m = orders, measured over 5s") || !strings.Contains(lineWith(v, "average rate"), "1234.5") {
		t.Errorf("prefill not shown:\n%s", v)
	}
	if x, _ := m.Worksheet().Value(engine.PartitionCapPerS); x != 12000 {
		t.Errorf("results not recomputed from prefill: cap %v", x)
	}
	// typing over a measured field makes it the planner's value
	m = focusField(m, engine.Partitions, "12")
	if m.Measured(engine.Partitions) || !m.Measured(engine.AvgRate) {
		t.Errorf("override marks: partitions %v avg %v", m.Measured(engine.Partitions), m.Measured(engine.AvgRate))
	}
}

func TestModel_PrefillFailureAndStaleAnswers(t *testing.T) {
	fake := &fakeMeasure{err: errors.New("kafka 127.0.0.1:9: unreachable\nwithin 10s")}
	m := sized(New(nil, fake.fn), 120, 40)
	m.SetTopic("orders")
	cmd := m.StartMeasure()
	before := m.Form()
	m, _ = m.Update(cmd())
	if m.Measuring() || m.Form() != before {
		t.Fatal("a failed prefill changed the form")
	}
	if v := checkView(t, m, 120, 40); !strings.Contains(v, "prefill failed: kafka 127.0.0.1:9: unreachable within 10s") {
		t.Errorf("failure not shown:\n%s", v)
	}
	// an answer to an older request is dropped
	fake.err = nil
	fake.m = ordersLoad
	cmd = m.StartMeasure()
	m, _ = m.Update(MeasuredMsg{Gen: 0, M: ordersLoad})
	if !m.Measuring() || m.Measured(engine.AvgRate) {
		t.Fatal("stale answer applied")
	}
	m, _ = m.Update(cmd())
	if !m.Measured(engine.AvgRate) {
		t.Fatal("current answer not applied")
	}
}

func TestModel_PrefillSanitisesTopic(t *testing.T) {
	hostile := ordersLoad
	hostile.Topic = "ord\x1b]52;c;cHduZWQ=\x07ers\x1b[2J"
	fake := &fakeMeasure{m: hostile}
	m := sized(New(nil, fake.fn), 160, 50)
	m.SetTopic("x")
	m, _ = m.Update(m.StartMeasure()())
	checkView(t, m, 160, 50) // fails on any escape byte
}

func TestModel_NoCluster(t *testing.T) {
	m := sized(New(nil, nil), 120, 40)
	m.SetTopic("orders")
	if cmd := m.StartMeasure(); cmd != nil {
		t.Fatal("measurement without a cluster")
	}
	if v := checkView(t, m, 120, 40); !strings.Contains(v, "prefill needs an attached Kafka cluster") {
		t.Errorf("no explanation:\n%s", v)
	}
}

// Outside editing the worksheet's keys behave as everywhere (":" opens
// the command line, q quits, esc goes back, ? helps); while a field is
// being edited it takes every key but ctrl+c, so 2:1 can be typed, and esc
// undoes the edit.
func TestModel_KeysOutsideAndInsideEditing(t *testing.T) {
	m := sized(New(nil, nil), 120, 40)
	esc := tea.KeyMsg{Type: tea.KeyEsc}
	for _, k := range []tea.KeyMsg{typed("q"), typed(":"), typed("?"), typed("c"), esc, {Type: tea.KeyCtrlR}} {
		if m.CapturesKey(k) {
			t.Errorf("%q captured outside editing: it would not reach the console", k.String())
		}
	}
	m = press(m, typed("q"), typed(":"))
	if m.Editing() || m.Form()[engine.AvgRate] != engine.DefaultForm()[engine.AvgRate] {
		t.Fatalf("q or : was typed into a field: %q", m.Form()[engine.AvgRate])
	}
	for m.Focused() != engine.Compression {
		m = press(m, tab)
	}
	m = press(m, enter)
	if !m.Editing() {
		t.Fatal("enter did not start editing")
	}
	for _, k := range []tea.KeyMsg{typed("q"), typed(":"), typed("?"), esc, tab, enter, backspace} {
		if !m.CapturesKey(k) {
			t.Errorf("%q not captured while editing", k.String())
		}
	}
	if m.CapturesKey(tea.KeyMsg{Type: tea.KeyCtrlC}) {
		t.Error("ctrl+c captured: it must always quit")
	}
	m = press(m, clearLine, typed("2"), typed(":"), typed("1"), enter)
	if m.Editing() || m.Form()[engine.Compression] != "2:1" || !m.Worksheet().Valid() {
		t.Errorf("compression %q (editing %v): %v", m.Form()[engine.Compression], m.Editing(), m.Worksheet().Err())
	}
	// A paste outside editing goes into the focused field, replacing it.
	paste := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("3:1\n"), Paste: true}
	if !m.CapturesKey(paste) {
		t.Fatal("a paste is not taken by the worksheet")
	}
	for m.Focused() != engine.Compression {
		m = press(m, tab)
	}
	m = press(m, paste)
	if got := m.Form()[engine.Compression]; got != "3:1 " || !m.Editing() {
		t.Fatalf("pasted compression %q (editing %v), want the paste, its line break a space", got, m.Editing())
	}
	m = press(m, clearLine, typed("3"), typed(":"), typed("1"), enter)
	for m.Focused() != engine.Compression {
		m = press(m, tab)
	}
	// A digit starts an edit over the figure; esc undoes it.
	before := m.Form()[m.Focused()]
	m = press(m, typed("9"), typed("9"))
	if !m.Editing() || m.Form()[m.Focused()] != "99" {
		t.Fatalf("digits: %q editing %v", m.Form()[m.Focused()], m.Editing())
	}
	m = press(m, esc)
	if m.Editing() || m.Form()[m.Focused()] != before {
		t.Fatalf("esc left %q (editing %v), want %q", m.Form()[m.Focused()], m.Editing(), before)
	}
}

// A prefill never overwrites a figure the planner typed: it keeps it,
// shows the measured one beside it with how long it measured, and a takes
// the measured figures.
func TestModel_PrefillKeepsTypedFigures(t *testing.T) {
	fake := &fakeMeasure{m: ordersLoad}
	m := sized(New(nil, fake.fn), 160, 50)
	m = focusField(m, engine.PeakRate, "200000")
	m = press(m, enter)
	m.SetTopic("orders")
	m, _ = m.Update(m.StartMeasure()())
	form := m.Form()
	if form[engine.PeakRate] != "200000" || m.Measured(engine.PeakRate) || m.Offer(engine.PeakRate) != "4000" {
		t.Fatalf("peak %q measured %v offer %q", form[engine.PeakRate], m.Measured(engine.PeakRate), m.Offer(engine.PeakRate))
	}
	if form[engine.AvgRate] != "1234.5" || !m.Measured(engine.AvgRate) {
		t.Fatalf("untyped average not prefilled: %q", form[engine.AvgRate])
	}
	v := checkView(t, m, 160, 50)
	if !strings.Contains(lineWith(v, "peak rate"), "measured 4000") || !strings.Contains(v, "measured over 5s") ||
		!strings.Contains(v, "kept 1 typed figure") {
		t.Fatalf("offer not shown:\n%s", v)
	}
	// At 80 columns the figure beside the field does not fit: the focused
	// field's line below the form says it.
	for m.Focused() != engine.PeakRate {
		m = press(m, tab)
	}
	small := sized(m, 80, 24)
	checkView(t, small, 80, 24)
	if form := ansi.Strip(strings.Join(small.formLines(small.formWidth()), " ")); !strings.Contains(strings.Join(strings.Fields(form), " "),
		"peak rate: typed 200000, measured 4000 (orders, measured over 5s); a takes it") {
		t.Fatalf("offer not explained at 80x24:\n%s", checkView(t, small, 80, 24))
	}
	m = press(m, typed("a"))
	if m.Form()[engine.PeakRate] != "4000" || !m.Measured(engine.PeakRate) || m.Offer(engine.PeakRate) != "" {
		t.Fatalf("a did not take the measured peak: %q", m.Form()[engine.PeakRate])
	}
}

// The binding constraint is the first thing in the results.
func TestModel_BindingConstraintFirst(t *testing.T) {
	v := checkView(t, sized(New(nil, nil), 120, 40), 120, 40)
	first := ""
	for _, l := range strings.Split(v, "\n") {
		if i := strings.Index(l, " · "); i >= 0 {
			first = l
			break
		}
	}
	if !strings.Contains(first, "7 · Binding constraint") {
		t.Fatalf("first section line %q:\n%s", first, v)
	}
}

// TestPage_OpensWithTopic: ":capacity orders" prefills through env.Do and
// the Measure hook cmd/berth installs.
func TestPage_OpensWithTopic(t *testing.T) {
	var gotTopic string
	Measure = func(ctx context.Context, c backends.Cluster, topic string, window time.Duration) (engine.Measurement, error) {
		gotTopic = topic
		if window < time.Second || window > measureWindow {
			t.Errorf("window %v", window)
		}
		return ordersLoad, nil
	}
	defer func() { Measure = nil }()
	env := tui.PageEnv{
		Args: []string{"orders"},
		Size: func() (int, int) { return 120, 40 },
		Do: func(fn func(ctx context.Context, c backends.Cluster) tea.Msg) tea.Cmd {
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				return fn(ctx, nil)
			}
		},
	}
	p := NewPage(env)
	cmd := p.Init()
	if cmd == nil {
		t.Fatal("no prefill started")
	}
	p, _ = p.Update(cmd())
	if gotTopic != "orders" || !p.(*Page).Measured(engine.Partitions) || p.Title() != "capacity" {
		t.Fatalf("topic %q, measured %v", gotTopic, p.(*Page).Measured(engine.Partitions))
	}
	if v := p.View(); !strings.Contains(v, "m = orders, measured over 5s") {
		t.Errorf("view:\n%s", v)
	}
}
