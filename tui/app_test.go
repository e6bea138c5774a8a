package tui

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/monitor"
)

func TestStartsOnOverviewWithWorstGroupFirst(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	if got := crumbs(m); got != "overview" {
		t.Fatalf("stack = %q, want overview", got)
	}
	p := m.top().page.(*overviewPage)
	r, ok := p.tbl.VisibleRow(0)
	if !ok || r.ID != "fraud-monitor" {
		t.Fatalf("first group = %q, want fraud-monitor (oldest max age)", r.ID)
	}
	v := m.View()
	for _, want := range []string{"1 under min ISR: acks=all writes blocked", "orders-by-tenant-3 7.0x median", "shipment-jobs.DLT 12", "3/3 brokers up"} {
		if !strings.Contains(v, want) {
			t.Errorf("overview lacks %q:\n%s", want, v)
		}
	}
}

func TestNavigateToGroupByKeysAndBack(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, "c") // groups page
	if got := crumbs(m); got != "groups" {
		t.Fatalf("after c: %q", got)
	}
	// Sorted by max age: fraud-monitor, sales-analytics, email-notifier.
	press(m, "j", "enter")
	if got := crumbs(m); got != "groups > sales-analytics" {
		t.Fatalf("after j enter: %q", got)
	}
	press(m, "esc")
	if got := crumbs(m); got != "groups" {
		t.Fatalf("after esc: %q", got)
	}
	// The cursor is where it was.
	if r, _ := m.top().page.(*groupsPage).tbl.Selected(); r.ID != "sales-analytics" {
		t.Fatalf("cursor on %q after back", r.ID)
	}
}

func TestGroupPageShowsStuckPartitionFirst(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, "enter") // overview's first row: fraud-monitor
	g, ok := m.top().page.(*groupPage)
	if !ok {
		t.Fatalf("top page is %T", m.top().page)
	}
	r, _ := g.tbl.VisibleRow(0)
	if r.Cells[colPPart] != "7" || !strings.HasPrefix(r.Cells[colPStatus], "STALLED") {
		t.Fatalf("first row = %v, want partition 7 STALLED", r.Cells)
	}
	v := m.View()
	if !strings.Contains(v, "max age 7m12s (orders-7)") {
		t.Errorf("summary lacks the worst partition:\n%s", v)
	}
	if !strings.Contains(v, "behind") {
		t.Errorf("stuck partition should read 'behind' for time to catch up:\n%s", v)
	}
}

func TestPaletteCompletesAndOpensGroup(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, ":")
	typeText(m, "group fr")
	if len(m.palette.sugg) != 1 || m.palette.sugg[0].text != "group fraud-monitor" {
		t.Fatalf("suggestions = %+v", m.palette.sugg)
	}
	press(m, "tab")
	if m.palette.input != "group fraud-monitor" {
		t.Fatalf("tab completed to %q", m.palette.input)
	}
	press(m, "enter")
	if got := crumbs(m); got != "fraud-monitor" {
		t.Fatalf("stack = %q", got)
	}
}

// A ":" jump starts a fresh breadcrumb trail, as in k9s; esc retraces only
// the pages opened from it, then lands on the overview.
func TestPaletteJumpStartsAFreshTrail(t *testing.T) {
	m, _ := newTestModel(t, 120, 30)
	press(m, "c", "enter", "m")
	if got := crumbs(m); got != "groups > fraud-monitor > members" {
		t.Fatalf("drill-down trail = %q", got)
	}
	press(m, ":")
	typeText(m, "topic orders")
	press(m, "enter")
	if got := crumbs(m); got != "orders" {
		t.Fatalf("after :topic orders the trail is %q", got)
	}
	if first := strings.SplitN(m.View(), "\n", 2)[0]; !strings.HasPrefix(first, "berth › orders   ") {
		t.Fatalf("breadcrumbs still show the old trail: %q", first)
	}
	press(m, "C") // a drill-down from the jump: configs
	if got := crumbs(m); got != "orders > configs" {
		t.Fatalf("drill-down after the jump = %q", got)
	}
	press(m, "esc")
	if got := crumbs(m); got != "orders" {
		t.Fatalf("esc = %q", got)
	}
	press(m, "esc")
	if got := crumbs(m); got != "overview" {
		t.Fatalf("esc past the jump = %q, want the overview (not the old trail)", got)
	}
}

func TestPaletteArrowsPickSuggestion(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, ":")
	typeText(m, "gr")
	// "group" then "groups": down picks the second.
	if len(m.palette.sugg) < 2 || m.palette.sugg[1].text != "groups" {
		t.Fatalf("suggestions = %+v", m.palette.sugg)
	}
	press(m, "down", "enter")
	if got := crumbs(m); got != "groups" {
		t.Fatalf("stack = %q, want groups", got)
	}
}

func TestPaletteUnknownPageFlashes(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, ":")
	typeText(m, "zzz")
	press(m, "enter")
	if m.flash.Level != Error || !strings.Contains(m.flash.Text, "no such page") {
		t.Fatalf("flash = %+v", m.flash)
	}
}

func TestFilterTakesKeysAndQDoesNotQuit(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, "c", "/")
	if press(m, "q") {
		t.Fatal("q while typing a filter quit the console")
	}
	p := m.top().page.(*groupsPage)
	if p.tbl.Filter() != "q" {
		t.Fatalf("filter = %q", p.tbl.Filter())
	}
	press(m, "backspace")
	typeText(m, "FRAUD")
	press(m, "enter")
	if p.tbl.Len() != 1 {
		t.Fatalf("filter FRAUD shows %d rows", p.tbl.Len())
	}
	// esc clears the filter first, then goes back.
	press(m, "esc")
	if p.tbl.Filter() != "" || crumbs(m) != "groups" {
		t.Fatalf("esc: filter %q, stack %q", p.tbl.Filter(), crumbs(m))
	}
	press(m, "esc")
	if crumbs(m) != "overview" {
		t.Fatalf("second esc: stack %q", crumbs(m))
	}
	if !press(m, "q") {
		t.Fatal("q did not quit")
	}
}

func TestRegexFilter(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, "c", "/")
	typeText(m, "~^(email|sales)-")
	press(m, "enter")
	if n := m.top().page.(*groupsPage).tbl.Len(); n != 2 {
		t.Fatalf("regex filter shows %d rows, want 2", n)
	}
}

func TestSortByColumnKeys(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, "c", "1") // sort by GROUP ascending
	p := m.top().page.(*groupsPage)
	if r, _ := p.tbl.VisibleRow(0); r.ID != "email-notifier" {
		t.Fatalf("sorted by name: first %q", r.ID)
	}
	press(m, "1") // again: descending
	if r, _ := p.tbl.VisibleRow(0); r.ID != "sales-analytics" {
		t.Fatalf("sorted by name desc: first %q", r.ID)
	}
	if !strings.Contains(m.View(), "GROUP▼") {
		t.Fatal("header does not mark the sort column")
	}
}

func TestRefreshFailureKeepsDataAndMarksStale(t *testing.T) {
	m, src := newTestModel(t, 120, 30)
	src.setFail(errors.New("dial 127.0.0.1:9092: connection refused"))
	send(m, refreshTickMsg{gen: m.gen})
	if m.snap == nil || m.lastErr == nil {
		t.Fatalf("snap=%v lastErr=%v", m.snap != nil, m.lastErr)
	}
	v := m.View()
	if !strings.Contains(v, "fraud-monitor") {
		t.Fatal("last good data left the screen after a failed refresh")
	}
	if !strings.Contains(v, "STALE") || !strings.Contains(v, "connection refused") {
		t.Fatalf("status line does not say stale / the error:\n%s", lastLine(v))
	}
	// The flash clears itself; the stale marker stays until a good refresh.
	send(m, flashClearMsg{id: m.flashID})
	if strings.Contains(m.View(), "connection refused") {
		t.Fatal("flash did not clear")
	}
	src.setFail(nil)
	send(m, refreshTickMsg{gen: m.gen})
	if strings.Contains(m.View(), "STALE") {
		t.Fatal("still stale after a good refresh")
	}
}

func TestStaleResultsAreDropped(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	before := m.snap
	// A refresh from an older sequence or generation must not apply.
	send(m, refreshedMsg{gen: m.gen, seq: m.seq - 1, snap: fixtureSnapshot(99)})
	send(m, refreshedMsg{gen: m.gen - 1, seq: m.seq, snap: fixtureSnapshot(98)})
	if m.snap != before {
		t.Fatal("a stale refresh replaced the snapshot")
	}
	// A page result from before a context switch is dropped too.
	got := 0
	probe := &probePage{onMsg: func(tea.Msg) { got++ }}
	m.stack = append(m.stack, entry{id: 999, page: probe})
	send(m, routedMsg{gen: m.gen - 1, pageID: 999, msg: "old"})
	send(m, routedMsg{gen: m.gen, pageID: 999, msg: "new"})
	if got != 1 {
		t.Fatalf("page got %d routed messages, want 1 (the current generation)", got)
	}
}

func TestContextSwitch(t *testing.T) {
	m, src := newTestModel(t, 80, 24)
	press(m, ":")
	typeText(m, "ctx prod")
	press(m, "enter")
	if m.ctxName != "prod" || !m.readOnly || !src.closed {
		t.Fatalf("ctx=%s readOnly=%v oldClosed=%v", m.ctxName, m.readOnly, src.closed)
	}
	if !strings.Contains(lastLine(m.View()), "READ-ONLY") {
		t.Fatalf("no read-only badge: %q", lastLine(m.View()))
	}
	// A failed switch keeps the current context.
	press(m, ":")
	typeText(m, "ctx bundled")
	press(m, "enter")
	if m.ctxName != "prod" || m.flash.Level != Error {
		t.Fatalf("after failed switch: ctx=%s flash=%+v", m.ctxName, m.flash)
	}
}

func TestReadOnlyActionIsDisabledWithReason(t *testing.T) {
	pushed := 0
	RegisterAction(Action{
		Scope:   "group",
		Key:     key.NewBinding(key.WithKeys("Z"), key.WithHelp("Z", "test reset")),
		Mutates: true,
		Open:    func(PageEnv, string) Page { pushed++; return &probePage{} },
	})
	t.Cleanup(func() {
		registry.Lock()
		registry.actions = registry.actions[:len(registry.actions)-1]
		registry.Unlock()
	})
	m, _ := newTestModel(t, 80, 24, func(o *Options) { o.ReadOnly, o.ReadOnlyReason = true, "context prod has read_only: true" })
	press(m, "c", "Z")
	if pushed != 0 {
		t.Fatal("a mutating action opened in a read-only context")
	}
	if !strings.Contains(m.flash.Text, "read_only") {
		t.Fatalf("flash = %q, want the reason", m.flash.Text)
	}
	press(m, "?")
	if v := m.View(); !strings.Contains(v, "test reset (disabled)") || !strings.Contains(v, "read-only: context prod has read_only: true") {
		t.Fatalf("help does not show the disabled action:\n%s", m.View())
	}

	// Writable: the action opens with the selected group as its target.
	m2, _ := newTestModel(t, 80, 24)
	press(m2, "c", "Z")
	if pushed != 1 || len(m2.stack) != 2 {
		t.Fatalf("pushed=%d stack=%q", pushed, crumbs(m2))
	}
}

func TestUntrustedTextIsEscaped(t *testing.T) {
	m, _ := newTestModel(t, 120, 40)
	check := func(where string) {
		t.Helper()
		v := m.View()
		if strings.ContainsAny(v, "\x1b\x07") {
			t.Fatalf("%s: raw escape or BEL reached the screen", where)
		}
		if !strings.Contains(v, `\e[2J`) && !strings.Contains(v, `\e[41m`) && !strings.Contains(v, `\e[5m`) {
			t.Fatalf("%s: escaped text not visible:\n%s", where, v)
		}
	}
	press(m, "t")
	check("topics")
	press(m, "home", "enter")
	check("topic")
	press(m, "C")
	check("configs")
	press(m, ":")
	typeText(m, "group fraud-monitor")
	press(m, "enter")
	check("group members")
}

func TestHostileGroupNameIsEscapedEverywhere(t *testing.T) {
	const evilGroup = "grp\x1b]0;owned\x07\x1b[2J"
	m, _ := newTestModel(t, 100, 30, func(o *Options) {
		o.Source = &fakeSource{snap: func(seq int) *monitor.Snapshot {
			s := fixtureSnapshot(seq)
			g := s.Groups[0]
			g.Group = evilGroup
			g.Members = []backends.Member{{ID: "m", ClientID: "c", Host: "/h\x1b[5m"}}
			s.Groups = append(s.Groups, g)
			return s
		}}
	})
	for _, nav := range [][]string{{"o"}, {"c"}, {"/"}} {
		press(m, nav...)
	}
	typeText(m, "grp")
	press(m, "enter", "enter")
	if got := crumbs(m); got != `groups > grp\e]0;owned\x07\e[2J` {
		t.Fatalf("stack = %q", got)
	}
	v := m.View()
	if strings.ContainsAny(v, "\x1b\x07") || !strings.Contains(v, `h\e[5m`) {
		t.Fatalf("raw escape reached the screen or the host is not shown escaped:\n%s", v)
	}
	// The palette completes the escaped name and opens the same group.
	press(m, ":")
	typeText(m, "group grp")
	press(m, "tab", "enter")
	if g, ok := m.top().page.(*groupPage); !ok || g.groupName() != evilGroup {
		t.Fatalf("palette did not open the hostile group: %s", crumbs(m))
	}
}

func TestEveryPageFitsTheScreen(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}, {200, 50}} {
		m, _ := newTestModel(t, size[0], size[1])
		for _, nav := range [][]string{{"o"}, {"t"}, {"t", "j", "enter"}, {"c"}, {"c", "enter"}, {"b"}, {"?"}, {"esc", ":"}} {
			press(m, nav...)
			assertFits(t, m.View(), size[0], size[1], crumbs(m))
		}
	}
}

// fakeSwitch is the demo's broker switch: like the bundled broker, a
// broker it takes down leaves the metadata (see src below).
type fakeSwitch struct {
	mu    sync.Mutex
	down  map[int32]bool
	calls []string
}

func (f *fakeSwitch) Addrs() []string {
	return []string{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"}
}

func (f *fakeSwitch) Down() []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int32
	for id := range f.down {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (f *fakeSwitch) SetDown(id int32, down bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("b %d %v", id, map[bool]string{true: "down", false: "up"}[down]))
	if down {
		f.down[id] = true
	} else {
		delete(f.down, id)
	}
	return nil
}

// src serves the fixture without the brokers the switch took down.
func (f *fakeSwitch) src(seq int) *monitor.Snapshot {
	s := fixtureSnapshot(seq)
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Cluster.Brokers = slices.DeleteFunc(slices.Clone(s.Cluster.Brokers), func(b backends.Broker) bool { return f.down[b.ID] })
	return s
}

func newSwitchModel(t *testing.T, sw *fakeSwitch) *Model {
	m, src := newTestModel(t, 100, 24, func(o *Options) { o.Brokers = sw })
	src.snap = sw.src
	return m
}

// A broker taken down from the brokers page is listed on every later visit
// (although it left the metadata) and x brings it back; the overview counts
// it; x asks first, and only a y typed alone confirms.
func TestBrokerSwitchStateOutlivesThePage(t *testing.T) {
	sw := &fakeSwitch{down: map[int32]bool{}}
	m := newSwitchModel(t, sw)
	press(m, "b", "j", "x")
	if len(sw.calls) != 0 || !strings.Contains(lastLine(m.View()), "take broker 1 down (simulated)?") {
		t.Fatalf("x did not ask first: calls %v, status %q", sw.calls, lastLine(m.View()))
	}
	press(m, "y")
	if len(sw.calls) != 1 || sw.calls[0] != "b 1 down" {
		t.Fatalf("calls = %v", sw.calls)
	}
	send(m, refreshTickMsg{gen: m.gen}) // broker 1 leaves the metadata
	if !regexp.MustCompile(`▸ +1 +127\.0\.0\.1:9093 .*DOWN \(sim\)`).MatchString(m.View()) {
		t.Fatalf("broker not shown down:\n%s", m.View())
	}
	press(m, "o")
	send(m, refreshTickMsg{gen: m.gen})
	if v := m.View(); !strings.Contains(v, "2/3 brokers up (1 down, simulated)") {
		t.Fatalf("overview does not count the downed broker:\n%s", v)
	}
	press(m, "b", "j")
	if !regexp.MustCompile(`▸ +1 .*DOWN \(sim\)`).MatchString(m.View()) {
		t.Fatalf("broker 1 not listed on a new visit:\n%s", m.View())
	}
	press(m, "x", "n")
	if len(sw.calls) != 1 || !strings.Contains(lastLine(m.View()), "cancelled") {
		t.Fatalf("n did not cancel: calls %v", sw.calls)
	}
	press(m, "x", "y")
	if len(sw.calls) != 2 || sw.calls[1] != "b 1 up" {
		t.Fatalf("calls = %v", sw.calls)
	}
	send(m, refreshTickMsg{gen: m.gen})
	press(m, "o")
	if v := m.View(); !strings.Contains(v, "3/3 brokers up") || strings.Contains(v, "simulated") {
		t.Fatalf("overview after bringing broker 1 back:\n%s", v)
	}
	// Without the switch, the key does nothing and help does not list it.
	m2, _ := newTestModel(t, 80, 24)
	press(m2, "b", "?")
	if strings.Contains(m2.View(), "take broker down") {
		t.Fatal("broker toggle offered without the demo")
	}
}

// A broker the demo started down (--down-broker) is never in the metadata:
// it is still listed, and counted.
func TestBrokerDownFromTheStartIsListed(t *testing.T) {
	sw := &fakeSwitch{down: map[int32]bool{2: true}}
	m := newSwitchModel(t, sw)
	send(m, refreshTickMsg{gen: m.gen})
	if v := m.View(); !strings.Contains(v, "2/3 brokers up (1 down, simulated)") {
		t.Fatalf("overview:\n%s", v)
	}
	press(m, "b")
	if !regexp.MustCompile(` 2 +127\.0\.0\.1:9094 .*DOWN \(sim\)`).MatchString(m.View()) {
		t.Fatalf("broker 2 not listed:\n%s", m.View())
	}
}

// A burst or a paste cannot answer a confirmation: "xy" arriving in one
// read asks, and the y in it answers no.
func TestBurstCannotConfirm(t *testing.T) {
	sw := &fakeSwitch{down: map[int32]bool{}}
	m := newSwitchModel(t, sw)
	press(m, "b", "j")
	send(m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")})
	send(m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("yy")})
	send(m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")})
	send(m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("y"), Paste: true})
	if len(sw.calls) != 0 {
		t.Fatalf("a burst or paste confirmed: %v", sw.calls)
	}
}

func TestQuitKeys(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	if !press(m, "ctrl+c") {
		t.Fatal("ctrl+c did not quit")
	}
}

// assertFits checks a frame is exactly h lines of exactly w cells.
func assertFits(t *testing.T, v string, w, h int, where string) {
	t.Helper()
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		t.Fatalf("%s at %dx%d: %d lines", where, w, h, len(lines))
	}
	for i, l := range lines {
		if lw := ansi.StringWidth(l); lw != w {
			t.Fatalf("%s at %dx%d: line %d is %d cells: %q", where, w, h, i, lw, l)
		}
	}
}

func lastLine(v string) string {
	i := strings.LastIndexByte(v, '\n')
	return v[i+1:]
}

// probePage records the messages it gets.
type probePage struct{ onMsg func(tea.Msg) }

func (p *probePage) Init() tea.Cmd { return nil }
func (p *probePage) Update(msg tea.Msg) (Page, tea.Cmd) {
	if s, ok := msg.(string); ok && p.onMsg != nil {
		p.onMsg(s)
	}
	return p, nil
}
func (p *probePage) View() string               { return "probe" }
func (p *probePage) Title() string              { return "probe" }
func (p *probePage) KeyBindings() []key.Binding { return nil }

// An unreachable cluster at start: the body says so in full (the status line
// only has room for the start of the error), and ctrl+r retries at once.
func TestUnreachableAtStartExplainsAndRetries(t *testing.T) {
	dials := 0
	m, _ := newTestModel(t, 80, 24, func(o *Options) {
		o.Source = nil
		o.Dial = func(context.Context, string) (Source, error) {
			dials++
			if dials < 3 {
				return nil, errors.New("kafka 127.0.0.1:1: unreachable: connect: connection refused (after 10s, the --timeout)")
			}
			return &fakeSource{}, nil
		}
	})
	v := m.View()
	if !strings.Contains(v, "cannot read the cluster of context bundled") || !strings.Contains(v, "connection refused") || !strings.Contains(v, "--timeout)") {
		t.Fatalf("no full explanation:\n%s", v)
	}
	assertFits(t, v, 80, 24, "no data")
	press(m, "ctrl+r")
	if dials != 2 {
		t.Fatalf("ctrl+r did not redial (dials=%d)", dials)
	}
	press(m, "ctrl+r")
	if m.snap == nil || !strings.Contains(m.View(), "fraud-monitor") {
		t.Fatalf("no data after a successful dial:\n%s", m.View())
	}
}

// Keys typed before any data arrives go where the screen says: the palette
// works without a snapshot, and the page opened shows its rows once data
// comes. (A peer console sent such keys to the wrong widget while loading.)
func TestKeysBeforeFirstDataAreNotMisrouted(t *testing.T) {
	var src *fakeSource
	m, _ := newTestModel(t, 80, 24, func(o *Options) {
		o.Source = nil
		o.Dial = func(context.Context, string) (Source, error) {
			if src == nil {
				return nil, errors.New("not yet")
			}
			return src, nil
		}
	})
	press(m, ":")
	typeText(m, "groups")
	press(m, "enter")
	if got := crumbs(m); got != "groups" {
		t.Fatalf("stack = %q", got)
	}
	src = &fakeSource{}
	press(m, "ctrl+r")
	if !strings.Contains(m.View(), "fraud-monitor") {
		t.Fatalf("groups page empty after data arrived:\n%s", m.View())
	}
}

// A click lands on the row drawn under the pointer: screen line 0 is the
// breadcrumbs, 1 the table header, 2 the first row (groups page, no header).
func TestMouseClickSelectsTheRowUnderThePointer(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, "c")
	send(m, tea.MouseMsg{Action: tea.MouseActionPress, Button: tea.MouseButtonLeft, X: 10, Y: 3})
	if r, _ := m.top().page.(*groupsPage).tbl.Selected(); r.ID != "sales-analytics" {
		t.Fatalf("click on screen line 3 selected %q", r.ID)
	}
	// On the overview the table sits below the summary lines.
	press(m, "o")
	lines := strings.Split(m.View(), "\n")
	y := -1
	for i, l := range lines {
		if strings.Contains(l, "email-notifier") {
			y = i
		}
	}
	send(m, tea.MouseMsg{Action: tea.MouseActionPress, Button: tea.MouseButtonLeft, X: 10, Y: y})
	if r, _ := m.top().page.(*overviewPage).tbl.Selected(); r.ID != "email-notifier" {
		t.Fatalf("click on the email-notifier line selected %q", r.ID)
	}
}

func TestEnterOnPartitionOpensItsTopic(t *testing.T) {
	m, _ := newTestModel(t, 80, 24)
	press(m, "enter", "enter")
	if got := crumbs(m); got != "overview > fraud-monitor > orders" {
		t.Fatalf("stack = %q", got)
	}
}

// Group names that differ only by invisible characters (zero-width space,
// BOM, line separator, tag characters) are shown escaped on the groups page
// and in the breadcrumbs, so two look-alike groups never print the same.
func TestInvisibleCharactersInGroupNamesAreShownEscaped(t *testing.T) {
	names := map[string]string{
		"pay\u200bments":          `pay\u{200B}ments`,
		"\ufeffbom-group":         `\u{FEFF}bom-group`,
		"line\u2028sep":           `line\u{2028}sep`,
		"tag\U000E0041\U000E007F": `tag\u{E0041}\u{E007F}`,
	}
	m, _ := newTestModel(t, 140, 40, func(o *Options) {
		o.Source = &fakeSource{snap: func(seq int) *monitor.Snapshot {
			s := fixtureSnapshot(seq)
			for name := range names {
				g := s.Groups[0]
				g.Group = name
				s.Groups = append(s.Groups, g)
			}
			return s
		}}
	})
	press(m, "c")
	v := m.View()
	for raw, escaped := range names {
		if !strings.Contains(v, escaped) {
			t.Errorf("groups page does not show %q escaped as %s:\n%s", raw, escaped, v)
		}
	}
	if strings.ContainsAny(v, "\u200b\ufeff\u2028\U000E0041\U000E007F") {
		t.Fatalf("an invisible character reached the screen:\n%s", v)
	}
	press(m, "/")
	typeText(m, "pay")
	press(m, "enter", "enter")
	if got := crumbs(m); !strings.Contains(got, `pay\u{200B}ments`) {
		t.Fatalf("breadcrumbs = %q, want the escaped name", got)
	}
}

// The demo's attach line is shown when the console opens (the line the
// demo printed before is hidden behind the full-screen console).
func TestNoticeShownAtStart(t *testing.T) {
	const notice = "another terminal: export BERTH_CONFIG=/tmp/demo/berth-demo.yaml"
	m, _ := newTestModel(t, 80, 24, func(o *Options) { o.Notice = notice })
	if v := m.View(); !strings.Contains(strings.Join(strings.Fields(v), " "), "export BERTH_CONFIG=/tmp/demo/berth-demo.yaml") {
		t.Fatalf("notice not on the first screen:\n%s", v)
	}
	send(m, flashClearMsg{id: m.flashID})
	if strings.Contains(m.View(), "BERTH_CONFIG") {
		t.Fatal("the notice stayed after its time")
	}
	// The first key puts it away (it covers the page's last lines).
	m, _ = newTestModel(t, 80, 24, func(o *Options) { o.Notice = notice })
	press(m, "c")
	if v := m.View(); strings.Contains(v, "BERTH_CONFIG") || !strings.Contains(crumbs(m), "groups") {
		t.Fatalf("the notice stayed after a key:\n%s", v)
	}
}

// roSource is a source whose cluster a read-only context names.
type roSource struct{ *fakeSource }

func (roSource) ReadOnly() (bool, string) {
	return true, "cluster c1 is the cluster of context prod, which is read_only"
}

// A context that is not read-only but reaches a read-only context's
// cluster makes the console read-only once attached, with the reason.
func TestConsoleIsReadOnlyOnAReadOnlyCluster(t *testing.T) {
	m, _ := newTestModel(t, 100, 24, func(o *Options) {
		o.Config.Contexts["staging"] = config.Context{Kind: "kafka", Bootstrap: []string{"prod:9092"}}
		dial := o.Dial
		o.Dial = func(ctx context.Context, name string) (Source, error) {
			if name == "staging" {
				return roSource{&fakeSource{}}, nil
			}
			return dial(ctx, name)
		}
	})
	if m.readOnly {
		t.Fatal("the bundled context started read-only")
	}
	press(m, ":")
	typeText(m, "ctx staging")
	press(m, "enter")
	if m.ctxName != "staging" || !m.readOnly || !strings.Contains(m.readOnlyReason, "context prod") {
		t.Fatalf("ctx=%s readOnly=%v reason=%q", m.ctxName, m.readOnly, m.readOnlyReason)
	}
	if !strings.Contains(lastLine(m.View()), "READ-ONLY") {
		t.Fatalf("no read-only badge: %q", lastLine(m.View()))
	}
}

// x, y and o typed while the switch takes longer than gateWait to answer
// (a loaded machine): the toggle's result arrives after the brokers page is
// gone, and the overview counts it at once, not only after the next
// refresh; a refresh that read the switch before the flip does not undo it.
func TestBrokerToggleAnsweredAfterLeavingThePage(t *testing.T) {
	sw := &fakeSwitch{down: map[int32]bool{1: true}}
	m := newSwitchModel(t, sw)
	send(m, refreshTickMsg{gen: m.gen})
	press(m, "b", "j", "x")
	if !strings.Contains(lastLine(m.View()), "bring broker 1 back up?") {
		t.Fatalf("x did not ask: %q", lastLine(m.View()))
	}
	stale := m.refreshCmd() // started before the flip: reads broker 1 down
	staleMsg := stale()
	_, toggle := m.Update(keyMsg("y")) // the switch's answer, not delivered yet
	send(m, gateOpenMsg{id: m.gate})   // the switch is slower than gateWait
	press(m, "o")
	if !strings.Contains(m.View(), "berth › overview") {
		t.Fatalf("o did not open the overview:\n%s", m.View())
	}
	run(m, toggle)
	if len(sw.calls) != 1 || sw.calls[0] != "b 1 up" {
		t.Fatalf("calls = %v", sw.calls)
	}
	// Broker 1 is no longer counted as simulated down; it is counted up
	// once the metadata lists it again.
	if v := m.View(); strings.Contains(v, "simulated") {
		t.Fatalf("overview right after the answer:\n%s", v)
	}
	if !strings.Contains(lastLine(m.View()), "broker 1 back up") {
		t.Fatalf("no word of the toggle: %q", lastLine(m.View()))
	}
	send(m, staleMsg)
	if v := m.View(); strings.Contains(v, "simulated") {
		t.Fatalf("a refresh from before the flip undid it:\n%s", v)
	}
	send(m, refreshTickMsg{gen: m.gen})
	if v := m.View(); !strings.Contains(v, "3/3 brokers up") || strings.Contains(v, "simulated") {
		t.Fatalf("overview after the next refresh:\n%s", v)
	}
}
