package tui

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
)

// Flows run the real bubbletea program (its goroutines, timers and
// renderer) around the console, driven by key presses. They wait on screen
// content with a deadline, never on sleeps.

func flowModel(t *testing.T, src *fakeSource, refresh time.Duration) *teatest.TestModel {
	t.Helper()
	m := New(Options{
		Config:  testConfig(),
		Context: "bundled",
		Source:  src,
		Refresh: refresh,
		Now:     func() time.Time { return fixtureNow.Add(3 * time.Second) },
		Dial: func(context.Context, string) (Source, error) {
			return nil, errors.New("no other contexts in this test")
		},
	})
	return teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 30))
}

// waitFor polls the program's output until cond holds (10s deadline); on
// timeout teatest fails the test with the output so far.
func waitFor(t *testing.T, tm *teatest.TestModel, what string, cond func(string) bool) {
	t.Helper()
	t.Logf("waiting for %s", what)
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return cond(string(b)) },
		teatest.WithDuration(2*time.Minute), teatest.WithCheckInterval(20*time.Millisecond))
}

func contains(s string) func(string) bool {
	return func(out string) bool { return strings.Contains(out, s) }
}

func TestFlowOverviewToStuckPartition(t *testing.T) {
	tm := flowModel(t, &fakeSource{}, time.Hour)
	waitFor(t, tm, "overview", contains("fraud-monitor"))
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // the worst group is first
	waitFor(t, tm, "group page", contains("STALLED!"))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute)).(*Model)
	p, ok := fm.top().page.(*groupPage)
	if !ok {
		t.Fatalf("final page %T", fm.top().page)
	}
	r, _ := p.tbl.VisibleRow(0)
	if r.Cells[colPPart] != "7" {
		t.Fatalf("worst partition shown first = %v", r.Cells)
	}
	if v := fm.View(); !regexp.MustCompile(`▸ orders +7 `).MatchString(v) {
		t.Fatalf("final frame does not put the cursor on partition 7:\n%s", v)
	}
}

func TestFlowPaletteToTopic(t *testing.T) {
	tm := flowModel(t, &fakeSource{}, time.Hour)
	waitFor(t, tm, "overview", contains("fraud-monitor"))
	tm.Type(":topic orders-by")
	tm.Send(tea.KeyMsg{Type: tea.KeyTab})
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitFor(t, tm, "topic page", contains("HOT 7.0x"))
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute)).(*Model)
	if got := crumbs(fm); got != "orders-by-tenant" {
		t.Fatalf("stack = %q", got)
	}
}

// The refresh loop keeps running on its timer: when the cluster stops
// answering the last data stays and the status line says STALE; when it
// answers again the marker goes away without a key press.
func TestFlowStaleAndRecovery(t *testing.T) {
	src := &fakeSource{}
	tm := flowModel(t, src, 200*time.Millisecond)
	waitFor(t, tm, "first data", contains("fraud-monitor"))
	src.setFail(errors.New("dial 127.0.0.1:9092: connection refused"))
	waitFor(t, tm, "stale marker", func(s string) bool { return strings.Contains(s, "STALE") && strings.Contains(s, "connection refused") })
	src.setFail(nil)
	waitFor(t, tm, "recovery", func(s string) bool {
		// The latest status line drawn no longer says STALE.
		i := strings.LastIndex(s, "bundled")
		return i >= 0 && !strings.Contains(s[i:], "STALE") && strings.Contains(s[i:], "ago")
	})
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute)).(*Model)
	if fm.lastErr != nil || fm.snap == nil {
		t.Fatalf("after recovery: lastErr=%v snap=%v", fm.lastErr, fm.snap != nil)
	}
}
