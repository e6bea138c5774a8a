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
	p, r := watchingPage(&stopped)
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

// watchingPage is a Kafka plan page whose run has sent everything and is
// in its re-failure watch; stopped counts the watch's stops.
func watchingPage(stopped *int) (*PlanPage, *execRun) {
	r := &execRun{
		hash: strings.Repeat("a", 64), control: make(chan actions.Control, 8), changes: newChanges(),
		runState:  runState{phase: phaseVerifying, result: actions.Result{Sent: 3}},
		stopWatch: func() { *stopped++ },
	}
	return &PlanPage{run: r, view: r.snapshot()}, r
}

// Every key a running plan takes does what the screen says it does, on
// the Kafka page (sending, then its re-failure watch) and the RabbitMQ page
// alike: the action line names each key's effect, and q (which does not
// quit under a run) says what the keys do now. During the watch nothing is
// left to pause or to leave running: c and esc stop the watch, and q and p
// say so rather than "esc leaves it running".
func TestRunKeysSayWhatTheyDo(t *testing.T) {
	t.Run("kafka watch", func(t *testing.T) {
		stopped := 0
		p, _ := watchingPage(&stopped)
		line := p.actionLine()
		for _, want := range []string{"c or esc stop the re-failure watch", "what was sent stays sent", "ctrl+c quits"} {
			if !strings.Contains(line, want) {
				t.Fatalf("action line while watching lacks %q: %q", want, line)
			}
		}
		for _, k := range []string{"q", "p"} {
			p.note = ""
			cmd, done := p.runKey(keyMsg(k))
			if !done || cmd != nil || stopped != 0 {
				t.Fatalf("%s during the watch: taken %v, cmd %v, watch stopped %d times", k, done, cmd != nil, stopped)
			}
			if strings.Contains(p.note, "leaves it running") || !strings.Contains(p.note, "c or esc stops it") || !strings.Contains(p.note, "ctrl+c quits") {
				t.Fatalf("%s during the watch says %q", k, p.note)
			}
		}
		p.runOver()
		if p.note != "" {
			t.Fatalf("the watch's note outlives it: %q", p.note)
		}
		if _, done := p.runKey(keyMsg("c")); !done || stopped != 1 {
			t.Fatalf("c during the watch: taken %v, stopped %d", done, stopped)
		}
	})
	sending := map[string]runningPage{
		"kafka sending": func() (*planUI, func() string, func(tea.KeyMsg) (tea.Cmd, bool), func() (paused, cancelling bool)) {
			r := &execRun{hash: strings.Repeat("b", 64), control: make(chan actions.Control, 8), changes: newChanges(), runState: runState{phase: phaseSending}}
			p := &PlanPage{run: r, view: r.snapshot()}
			return &p.planUI, p.actionLine, p.runKey, func() (bool, bool) {
				select {
				case c := <-r.control:
					return c == actions.Pause, r.snapshot().cancelling
				default:
					return false, r.snapshot().cancelling
				}
			}
		},
		"rabbitmq sending": func() (*planUI, func() string, func(tea.KeyMsg) (tea.Cmd, bool), func() (paused, cancelling bool)) {
			r := &qRun{hash: strings.Repeat("c", 64), cancelCh: make(chan struct{}), changes: newChanges()}
			p := &QueuePlanPage{run: r, view: r.snapshot()}
			return &p.planUI, p.actionLine, p.runKey, func() (bool, bool) { v := r.snapshot(); return v.paused, v.cancelling }
		},
	}
	for name, open := range sending {
		t.Run(name, func(t *testing.T) {
			u, line, key, state := open()
			l := line()
			for _, want := range []string{"p pause/resume", "c cancel", "esc leave it running"} {
				if !strings.Contains(l, want) {
					t.Fatalf("action line while sending lacks %q: %q", want, l)
				}
			}
			if _, done := key(keyMsg("q")); !done || !strings.Contains(u.note, "esc leaves it running") || !strings.Contains(u.note, "ctrl+c quits at once") {
				t.Fatalf("q while sending: taken %v, note %q", done, u.note)
			}
			if _, done := key(keyMsg("p")); !done {
				t.Fatal("p while sending was left to the table")
			}
			if paused, _ := state(); !paused {
				t.Fatal("p while sending did not pause")
			}
			if cmd, done := key(keyMsg("esc")); !done || cmd != nil || !u.leaving || !strings.Contains(u.note, "esc again to leave it") {
				t.Fatalf("first esc while sending: taken %v, left %v, note %q", done, cmd != nil, u.note)
			}
			if _, done := key(keyMsg("c")); !done {
				t.Fatal("c while sending was left to the table")
			}
			if _, cancelling := state(); !cancelling || u.leaving {
				t.Fatalf("c while sending: cancelling %v, still leaving %v", cancelling, u.leaving)
			}
		})
	}
}

// runningPage opens a plan page with a run sending: its shared UI state,
// action line, key handler and the run's paused and cancelling state.
type runningPage func() (*planUI, func() string, func(tea.KeyMsg) (tea.Cmd, bool), func() (paused, cancelling bool))

func keyMsg(k string) tea.KeyMsg {
	if k == "esc" {
		return tea.KeyMsg{Type: tea.KeyEsc}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}
