package dlq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/tui"
)

// PlanStatus is a stored plan with what `berth redrive status` says about
// it today: approvals against today's policy and allowed_signers, progress
// from the ledger, and whether it may be executed now.
type PlanStatus struct {
	File      redrive.File
	Redriven  int // records of this plan the ledger says are redriven
	Approvals int // approval signatures present (counted or not)
	Required  int
	Approved  bool
	Reason    string // why the plan is not approved
	State     string // pending approval, ready, partial (N left), done, expired
	Policy    string // today's review policy, one line
	// Signatures lists every signature with the principal allowed_signers
	// gives it, or why it does not count.
	Signatures []SignatureInfo
	// Refusal is why executing the plan now would be refused (the
	// executor's own preflight); empty when it may run.
	Refusal string
	// Warnings name each permanent class the plan includes, judged from
	// the records read now (raw: the page sanitises).
	Warnings []string
}

// SignatureInfo is one signature over a plan as an approver sees it.
type SignatureInfo struct {
	Role        approval.Role
	Fingerprint string
	Principal   string // from allowed_signers; empty when it does not verify
	Problem     string // why it does not verify or count
	SignedAt    time.Time
}

// Approved is the outcome of a stored approval.
type Approved struct {
	Principal   string
	Fingerprint string
	Decision    approval.Decision
}

// ExecRequest is how the console runs a plan.
type ExecRequest struct {
	Context  string // the console's context name, for the audit log
	ReadOnly bool   // refused by the executor when set
	Progress func(actions.Progress)
	Control  <-chan actions.Control
}

// Verification is the read-back after an execution and the re-failure watch.
type Verification struct {
	Checked    int
	Mismatches []string
	Watched    time.Duration
	Stopped    bool // the watch was stopped early (c or esc)
	Refailed   []string
}

// maxConsoleWatch bounds the console's re-failure watch: the console shows
// a short one (c stops it early); `berth redrive execute --watch` runs long
// ones headless.
const maxConsoleWatch = 30 * time.Second

// ---------------------------------------------------------------- runs

// phase of a console execution.
type phase int

const (
	phaseSending phase = iota + 1
	phaseVerifying
	phaseDone
)

// execRun is one execution started from the console. It outlives the page
// that started it: leaving the page keeps it running (the page says so),
// and opening the plan again shows it. Its state is written by the
// executing goroutine and read by pages through snapshot; every change
// wakes the pages' listeners.
type execRun struct {
	hash    string
	control chan actions.Control

	changes
	runState
	stopWatch   context.CancelFunc
	watchCancel bool
}

// runState is what a run's goroutine writes (under the changes lock) and
// the pages read through snapshot.
type runState struct {
	phase      phase
	started    time.Time
	progress   actions.Progress
	cancelling bool
	result     actions.Result
	err        error
	verify     *Verification
	verifyErr  error
}

// runView is a consistent copy of a run's state.
type runView struct {
	version uint64
	runState
}

// runs are the executions started in this console, by plan hash; a
// finished run stays until the same plan is run again, so reopening the
// plan shows its result.
var runs = newRegistry[*execRun]()

func runFor(hash string) *execRun { return runs.get(hash) }

// startRun registers a new run for hash unless one is still going.
func startRun(hash string) (*execRun, bool) {
	return runs.start(hash, func() *execRun {
		r := &execRun{hash: hash, control: make(chan actions.Control, 8), changes: newChanges(), runState: runState{phase: phaseSending, started: time.Now()}}
		r.progress.Plan = hash
		return r
	})
}

func (r *execRun) finished() bool { return r.snapshot().phase == phaseDone }

func (r *execRun) snapshot() runView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return runView{version: r.version, runState: r.runState}
}

// runMsg tells a page that the run changed.
type runMsg struct{ run *execRun }

// wait returns a command that delivers a runMsg once the run has changed
// since version seen (at once when it already has, or has finished).
func (r *execRun) wait(seen uint64) tea.Cmd {
	return func() tea.Msg {
		r.waitChange(seen, func() bool { return r.phase == phaseDone })
		return runMsg{run: r}
	}
}

// send passes a control to the executor (between batches) without ever
// blocking the UI: the channel is buffered, and a full buffer means the
// same requests are already queued.
func (r *execRun) send(c actions.Control) {
	select {
	case r.control <- c:
	default:
	}
}

// cancel asks the executor to finish the batch in flight and stop; during
// verification it stops the re-failure watch.
func (r *execRun) cancel() {
	r.update(func() {
		r.cancelling = true
		if r.phase == phaseVerifying && r.stopWatch != nil {
			r.watchCancel = true
			r.stopWatch()
		}
	})
	r.send(actions.Cancel)
}

// execute runs the plan, then verifies what it sent; it is the body of the
// goroutine a page starts from a tea.Cmd.
func (r *execRun) execute(s PlanActions, req ExecRequest, watch time.Duration) {
	req.Progress = func(p actions.Progress) { r.update(func() { r.progress = p }) }
	req.Control = r.control
	res, err := s.Execute(context.Background(), r.hash, req)
	r.update(func() {
		r.result, r.err = res, err
		var refused *actions.Refusal
		if errors.As(err, &refused) || err != nil && res.Sent == 0 && len(res.Failed) == 0 {
			r.phase = phaseDone
		} else {
			r.phase = phaseVerifying
		}
	})
	if r.snapshot().phase == phaseDone {
		return
	}
	// Read back what was sent (also after a cancel: what went out must be
	// right); watch for re-failures only after a run that went to its end.
	if res.Cancelled || err != nil {
		watch = 0
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	r.update(func() { r.stopWatch = stop })
	v, verr := s.Verify(ctx, r.hash, watch, req.Context)
	r.update(func() {
		r.verify, r.verifyErr, r.phase = &v, verr, phaseDone
	})
}

// notifyWhenDone returns a command that waits for the run to end and
// then shows its result in the status line (changes.notifyWhenDone).
func (r *execRun) notifyWhenDone() tea.Cmd {
	return r.changes.notifyWhenDone(func() bool { return r.phase == phaseDone }, func() tui.FlashMsg {
		v := r.snapshot()
		var ref *actions.Refusal
		switch {
		case errors.As(v.err, &ref):
			return refusedFlash(r.hash, ref.Why())
		case v.err != nil || len(v.result.Failed) > 0 || v.verify != nil && len(v.verify.Mismatches) > 0:
			return stoppedFlash(r.hash, fmt.Sprintf("sent %d, skipped %d, failed %d", v.result.Sent, len(v.result.Skipped), failedRecords(v.result)), v.err)
		}
		return endedFlash(r.hash, v.result.Cancelled, v.result.Sent, len(v.result.Skipped))
	})
}

// stateText is a running plan's state for the plans list.
func (r *execRun) stateText() (string, bool) {
	v := r.snapshot()
	switch v.phase {
	case phaseVerifying:
		return "verifying", true
	case phaseDone:
		return "", false
	}
	pr := v.progress
	return runStateText(v.cancelling, pr.Paused, pr.Done(), pr.Total), true
}

// ---------------------------------------------------------------- text

// expandHome turns a leading ~/ into the home directory.
func expandHome(p string) string {
	p = strings.TrimSpace(p)
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

func defaultKeyPath() string { return "~/.ssh/id_ed25519" }

func signatureLine(s SignatureInfo) string {
	who := sanitize.Text(s.Principal)
	if who == "" {
		who = "?"
	}
	line := fmt.Sprintf("  %-8s %s %s", s.Role, who, s.Fingerprint)
	if s.Problem != "" {
		line += " — does not count: " + sanitize.Text(s.Problem)
	}
	return line
}

// skipSummary counts skipped records by reason.
func skipSummary(skips []actions.Skip) string {
	by := map[redrive.Reason]int{}
	for _, s := range skips {
		by[s.Reason]++
	}
	return reasonSummary(by)
}

// reasonSummary is skip counts by reason as "record_gone 1, …", the words
// both backends' result lines use.
func reasonSummary(by map[redrive.Reason]int) string {
	var parts []string
	for r, n := range by {
		parts = append(parts, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func failedRecords(r actions.Result) int {
	n := 0
	for _, f := range r.Failed {
		n += len(f.Records)
	}
	return n
}

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
