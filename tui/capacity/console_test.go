package capacity

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/tui"
)

// emptySource is an attached cluster with nothing in it.
type emptySource struct{}

func (emptySource) Refresh(context.Context) (*tui.Snapshot, error) {
	return &tui.Snapshot{Observed: time.Now()}, nil
}
func (emptySource) Cluster() backends.Cluster { return nil }
func (emptySource) Close()                    {}

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

// In the real console the worksheet's keys behave as on every page outside
// editing: ":" opens the command line (not typed into the focused field)
// and q quits; while a field is edited, ":" and q are typed.
func TestConsoleCapacityKeysAsEverywhere(t *testing.T) {
	m := tui.New(tui.Options{Config: config.Default(), Context: "bundled", Source: emptySource{}, Refresh: time.Hour,
		Start: "capacity", Dial: func(context.Context, string) (tui.Source, error) { return nil, errors.New("no other contexts") }})
	out := &syncBuffer{}
	p := tea.NewProgram(m, tea.WithInput(nil), tea.WithOutput(out))
	done := make(chan tea.Model, 1)
	go func() { fm, _ := p.Run(); done <- fm }()
	t.Cleanup(p.Kill)
	p.Send(tea.WindowSizeMsg{Width: 120, Height: 40})
	wait := func(what, text string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), text) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (%q)", what, text)
			}
			time.Sleep(10 * time.Millisecond) // polling the output, not synchronising
		}
	}
	runes := func(s string) {
		for _, r := range s {
			p.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
		}
	}
	wait("the worksheet", "7 · Binding constraint")
	p.Send(tea.KeyMsg{Type: tea.KeyTab}) // to the peak rate
	p.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("editing", "editing: enter keep")
	runes("0:q")
	wait("q typed into the field", "1000000:q")
	p.Send(tea.KeyMsg{Type: tea.KeyEsc}) // undo: 100000 again, and not back
	wait("the edit undone", "enter or a digit edits")
	runes(":groups")
	p.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("the groups page", "berth › groups")
	runes("q")
	select {
	case fm := <-done:
		if fm == nil {
			t.Fatal("the program failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("q did not quit")
	}
}
