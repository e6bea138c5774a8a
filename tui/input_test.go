package tui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// rawProgram runs the console as bubbletea runs it, reading bytes from a
// pipe as it would from the terminal, so a write arrives as one read: the
// way tmux send-keys, a paste or a laggy link delivers keys.
type rawProgram struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *syncBuffer
	done chan tea.Model
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startRaw(t *testing.T, mods ...func(*Options)) *rawProgram {
	t.Helper()
	opts := Options{
		Config:  testConfig(),
		Context: "bundled",
		Source:  &fakeSource{},
		Refresh: time.Hour,
		Now:     func() time.Time { return fixtureNow.Add(3 * time.Second) },
		Dial: func(context.Context, string) (Source, error) {
			return nil, errors.New("no other contexts in this test")
		},
	}
	for _, f := range mods {
		f(&opts)
	}
	pr, pw := io.Pipe()
	rp := &rawProgram{t: t, in: pw, out: &syncBuffer{}, done: make(chan tea.Model, 1)}
	p := tea.NewProgram(New(opts), tea.WithInput(pr), tea.WithOutput(rp.out))
	go func() {
		fm, err := p.Run()
		if err != nil {
			fm = nil // killed by the cleanup after a failure
		}
		rp.done <- fm
	}()
	t.Cleanup(func() { p.Kill(); pw.Close() })
	p.Send(tea.WindowSizeMsg{Width: 120, Height: 30})
	rp.waitFor("the overview", "fraud-monitor")
	return rp
}

// write sends bytes as one read.
func (rp *rawProgram) write(s string) {
	rp.t.Helper()
	if _, err := rp.in.Write([]byte(s)); err != nil {
		rp.t.Fatal(err)
	}
}

// waitFor waits (10s at most) for text in the program's output.
func (rp *rawProgram) waitFor(what, text string) {
	rp.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(rp.out.String(), text) {
		if time.Now().After(deadline) {
			rp.t.Fatalf("timed out waiting for %s (%q)", what, text)
		}
		time.Sleep(10 * time.Millisecond) // polling the output, not synchronising
	}
}

// quit ends the program with ctrl+c and returns its final model.
func (rp *rawProgram) quit() *Model {
	rp.t.Helper()
	rp.write("\x03")
	select {
	case fm := <-rp.done:
		if fm == nil {
			rp.t.Fatal("the program failed")
		}
		return fm.(*Model)
	case <-time.After(10 * time.Second):
		rp.t.Fatal("the program did not quit on ctrl+c")
	}
	return nil
}

// Keys that arrive in one read (tmux send-keys ':topic orders' Enter) go
// to the command line after ":" and open the orders topic, as typed ones do.
func TestBurstAfterColonGoesToTheCommandLine(t *testing.T) {
	rp := startRaw(t)
	rp.write(":topic orders\r")
	rp.waitFor("the orders topic", "berth › orders ")
	if got := crumbs(rp.quit()); got != "orders" {
		t.Fatalf("stack after the burst = %q, want the orders topic", got)
	}
}

// A burst of cursor keys moves the cursor once per key (bubbletea reads
// "jjj" as one key that matches no binding).
func TestBurstOfCursorKeysMovesPerKey(t *testing.T) {
	rp := startRaw(t)
	rp.write("c")
	rp.waitFor("the groups page", "berth › groups")
	rp.write("jj\r")
	rp.waitFor("the third group", "berth › groups › ")
	m := rp.quit()
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
	rp.write("\x1b[200~cq\rorders\x1b[201~")
	rp.waitFor("the paste refused", "paste ignored")
	rp.write("\x1b[200~:topic orders\r\n\x1b[201~")
	rp.waitFor("the command line filled", ":topic orders")
	m := rp.quit()
	if got := crumbs(m); got != "overview" {
		t.Fatalf("a paste navigated: stack = %q", got)
	}
	if !m.palette.open || m.palette.input != "topic orders" {
		t.Fatalf("palette open=%v input=%q, want open with the pasted command, not run", m.palette.open, m.palette.input)
	}

	rp = startRaw(t)
	rp.write("c/")
	rp.waitFor("the filter", "/█")
	rp.write("\x1b[200~fraud\x1b[0m\x1b[201~")
	rp.waitFor("the pasted filter", "/fraud[0m█")
	m = rp.quit()
	if p := m.top().page.(*groupsPage); p.tbl.Filter() != "fraud[0m" {
		t.Fatalf("filter = %q (the paste's escape byte must be dropped)", p.tbl.Filter())
	}
}
