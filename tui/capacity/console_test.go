package capacity

import (
	"context"
	"errors"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/tuitest"
)

// emptySource is an attached cluster with nothing in it.
type emptySource struct{}

func (emptySource) Refresh(context.Context) (*tui.Snapshot, error) {
	return &tui.Snapshot{Observed: time.Now()}, nil
}
func (emptySource) Cluster() backends.Cluster { return nil }
func (emptySource) Close()                    {}

// In the real console the worksheet's keys behave as on every page outside
// editing: ":" opens the command line (not typed into the focused field)
// and q quits; while a field is edited, ":" and q are typed.
func TestConsoleCapacityKeysAsEverywhere(t *testing.T) {
	m := tui.New(tui.Options{Config: config.Default(), Context: "bundled", Source: emptySource{}, Refresh: time.Hour,
		Start: "capacity", Dial: func(context.Context, string) (tui.Source, error) { return nil, errors.New("no other contexts") }})
	p := tuitest.Start(t, m, 120, 40)
	p.WaitFor("the worksheet", "7 · Binding constraint")
	p.Send(tea.KeyMsg{Type: tea.KeyTab}) // to the peak rate
	p.Send(tea.KeyMsg{Type: tea.KeyEnter})
	p.WaitFor("editing", "editing: enter keep")
	p.Type("0:q")
	p.WaitFor("q typed into the field", "1000000:q")
	p.Send(tea.KeyMsg{Type: tea.KeyEsc}) // undo: 100000 again, and not back
	p.WaitFor("the edit undone", "enter or a digit edits")
	p.Type(":groups")
	p.Send(tea.KeyMsg{Type: tea.KeyEnter})
	p.WaitFor("the groups page", "berth › groups")
	p.Type("q")
	p.Wait()
}
