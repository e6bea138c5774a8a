package dlq

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/actions"
)

// After a Kafka plan has sent everything, esc leaves the re-failure watch
// at once, as c does (and enter does in the CLI): the watch stops, the page
// stays to show the result instead of asking "esc again", and the help line
// says so. Only the watch is stopped: nothing sent is undone.
func TestEscStopsTheReFailureWatch(t *testing.T) {
	stopped := 0
	r := &execRun{
		hash: strings.Repeat("a", 64), control: make(chan actions.Control, 8), changes: newChanges(),
		runState:  runState{phase: phaseVerifying, result: actions.Result{Sent: 3}},
		stopWatch: func() { stopped++ },
	}
	p := &PlanPage{run: r, view: r.snapshot()}
	if line := p.actionLine(); !strings.Contains(line, "esc stop the re-failure watch") || !strings.Contains(line, "sent stays sent") {
		t.Fatalf("help line while watching: %q", line)
	}
	cmd, done := p.runKey(tea.KeyMsg{Type: tea.KeyEsc})
	if !done {
		t.Fatal("esc was left to the table while watching")
	}
	if cmd != nil {
		t.Fatalf("esc left the page (%T) instead of stopping the watch", cmd())
	}
	if stopped != 1 || p.leaving {
		t.Fatalf("after one esc: watch stopped %d times, leaving %v (note %q)", stopped, p.leaving, p.note)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.watchCancel || r.result.Sent != 3 {
		t.Fatalf("after esc: watch cancelled %v, sent %d", r.watchCancel, r.result.Sent)
	}
}
