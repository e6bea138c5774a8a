package tui

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/tui/tuitest"
)

// startRaw runs the console on the fixture at 120x30 (tuitest: keys as raw
// bytes from a pipe) and waits for the overview.
func startRaw(t *testing.T) *tuitest.Program {
	t.Helper()
	m := New(Options{
		Config:  testConfig(),
		Context: "bundled",
		Source:  &fakeSource{},
		Refresh: time.Hour,
		Now:     func() time.Time { return fixtureNow.Add(3 * time.Second) },
		Dial: func(context.Context, string) (Source, error) {
			return nil, errors.New("no other contexts in this test")
		},
	})
	rp := tuitest.Start(t, m, 120, 30)
	rp.WaitFor("the overview", "fraud-monitor")
	return rp
}

// Keys that arrive in one read (tmux send-keys ':topic orders' Enter) go
// to the command line after ":" and open the orders topic, as typed ones do.
func TestBurstAfterColonGoesToTheCommandLine(t *testing.T) {
	rp := startRaw(t)
	rp.Write(":topic orders\r")
	rp.WaitFor("the orders topic", "berth › orders ")
	if got := crumbs(rp.Quit().(*Model)); got != "orders" {
		t.Fatalf("stack after the burst = %q, want the orders topic", got)
	}
}

// A burst of cursor keys moves the cursor once per key (bubbletea reads
// "jjj" as one key that matches no binding).
func TestBurstOfCursorKeysMovesPerKey(t *testing.T) {
	rp := startRaw(t)
	rp.Write("c")
	rp.WaitFor("the groups page", "berth › groups")
	rp.Write("jj\r")
	rp.WaitFor("the third group", "berth › groups › ")
	m := rp.Quit().(*Model)
	if got := crumbs(m); got != "groups > "+m.top().page.Title() || m.top().page.Title() == "fraud-monitor" {
		t.Fatalf("stack = %q: jj did not move two rows", got)
	}
}

// A bracketed paste is text: with no text field open it is dropped with a
// message, never read as keys (the "q" in it does not quit, the "c" does not
// open the groups page); one that starts with ":" fills the command line
// without running it; in an open filter it is typed.
func TestBracketedPasteIsText(t *testing.T) {
	rp := startRaw(t)
	rp.Write("\x1b[200~cq\rorders\x1b[201~")
	rp.WaitFor("the paste refused", "paste ignored")
	rp.Write("\x1b[200~:topic orders\r\n\x1b[201~")
	rp.WaitFor("the command line filled", ":topic orders")
	m := rp.Quit().(*Model)
	if got := crumbs(m); got != "overview" {
		t.Fatalf("a paste navigated: stack = %q", got)
	}
	if !m.palette.open || m.palette.input != "topic orders" {
		t.Fatalf("palette open=%v input=%q, want open with the pasted command, not run", m.palette.open, m.palette.input)
	}

	rp = startRaw(t)
	rp.Write("c/")
	rp.WaitFor("the filter", "/█")
	rp.Write("\x1b[200~fraud\x1b[0m\x1b[201~")
	rp.WaitFor("the pasted filter", "/fraud[0m█")
	m = rp.Quit().(*Model)
	if p := m.top().page.(*groupsPage); p.tbl.Filter() != "fraud[0m" {
		t.Fatalf("filter = %q (the paste's escape byte must be dropped)", p.tbl.Filter())
	}
}

// Keys typed ahead reach the page they were typed for: "c", enter and "m"
// in one read open the groups page, the first group, then its members
// (enter opens the group through a command; the "m" after it waits for it).
func TestTypeAheadReachesThePageItWasTypedFor(t *testing.T) {
	rp := startRaw(t)
	rp.Write("c\rm")
	rp.WaitFor("the members page", "› members")
	if got := crumbs(rp.Quit().(*Model)); got != "groups > fraud-monitor > members" {
		t.Fatalf("stack = %q, want groups > fraud-monitor > members", got)
	}
}
