// Package tuitest runs a console model as bubbletea runs it, for tests: the
// program's own goroutines and renderer, keys read as raw bytes from a pipe
// as from a terminal (so one write arrives as one read, the way tmux
// send-keys, a paste or a laggy link delivers keys), and the output kept so
// a test can wait for text on screen.
package tuitest

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Program is a running bubbletea program.
type Program struct {
	t    testing.TB
	p    *tea.Program
	in   *io.PipeWriter
	out  *syncBuffer
	done chan tea.Model
}

// Start runs model at w x h; the test's cleanup kills it.
func Start(t testing.TB, model tea.Model, w, h int) *Program {
	t.Helper()
	pr, pw := io.Pipe()
	tp := &Program{t: t, in: pw, out: &syncBuffer{}, done: make(chan tea.Model, 1)}
	tp.p = tea.NewProgram(model, tea.WithInput(pr), tea.WithOutput(tp.out))
	go func() {
		fm, err := tp.p.Run()
		if err != nil {
			fm = nil // killed by the cleanup after a failure
		}
		tp.done <- fm
	}()
	t.Cleanup(func() { tp.p.Kill(); pw.Close() })
	tp.p.Send(tea.WindowSizeMsg{Width: w, Height: h})
	return tp
}

// Write sends raw bytes, as one read.
func (tp *Program) Write(s string) {
	tp.t.Helper()
	if _, err := tp.in.Write([]byte(s)); err != nil {
		tp.t.Fatal(err)
	}
}

// Send delivers a message, as a key press or any other event.
func (tp *Program) Send(msg tea.Msg) { tp.p.Send(msg) }

// Type sends each rune of s as its own key press.
func (tp *Program) Type(s string) {
	for _, r := range s {
		tp.p.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

// WaitFor waits (10 s at most) for text in the program's output.
func (tp *Program) WaitFor(what, text string) {
	tp.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tp.out.String(), text) {
		if time.Now().After(deadline) {
			tp.t.Fatalf("timed out waiting for %s (%q)", what, text)
		}
		time.Sleep(10 * time.Millisecond) // polling the output, not synchronising
	}
}

// Quit ends the program with ctrl+c, as typed, and returns its final model.
func (tp *Program) Quit() tea.Model {
	tp.t.Helper()
	tp.Write("\x03")
	return tp.Wait()
}

// Wait returns the final model once the program has ended (10 s at most).
func (tp *Program) Wait() tea.Model {
	tp.t.Helper()
	select {
	case fm := <-tp.done:
		if fm == nil {
			tp.t.Fatal("the program failed")
		}
		return fm
	case <-time.After(10 * time.Second):
		tp.t.Fatal("the program did not end")
	}
	return nil
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
