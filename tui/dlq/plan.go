package dlq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

// PlanPage makes a plan from a request (or shows a stored one): every
// record's verdict, counts by verdict and by class, and whether the plan is
// blocked. A plan made here is put in the cluster's plan store unless the
// context is read-only. For a stored plan it also shows what an approver
// signs (hash, author, policy, the signatures present, today's approval
// decision) and offers the two actions on it: a approves (signs with the
// operator's SSH key), X executes (after the operator types the hash),
// with a progress bar, pause, resume and cancel.
type PlanPage struct {
	planPageBase
	progress *scanProgress
	req      *actions.PlanRequest
	file     *redrive.File
	stored   string

	// status is today's view of the stored plan (nil until loaded).
	status *PlanStatus

	run     *execRun
	view    runView
	results bool // the table shows the run's outcome per record
}

type promptMode int

const (
	promptNone promptMode = iota
	promptKey
	promptConfirm
	promptAuthorKey
)

// scanProgress is written by the check running off the UI goroutine and
// read by the page on each tick.
type scanProgress struct{ read, total atomic.Int64 }

type progressTick struct{}

const progressEvery = 200 * time.Millisecond

type planMsg struct {
	file   redrive.File
	stored string
}

// statusMsg is a plan's status read (PlanStatus, QueuePlanStatus);
// statusErrMsg why it could not be.
type (
	statusMsg[S any] struct{ st S }
	statusErrMsg     struct{ err error }
)

type (
	runStartedMsg struct {
		run   *execRun
		fresh bool
	}
	runStartErrMsg struct{ err error }
)

var (
	keyApprove = binding("a", "approve (sign with your SSH key)")
	keyExecute = binding("X", "execute")
	keyPause   = binding("p", "pause/resume")
	keyCancel  = binding("c", "cancel after the batch in flight")
	keyStatus  = binding("u", "reload approvals")
	keySign    = binding("S", "sign as the plan's author")
)

// NewPlanPage checks req and shows the resulting plan.
func NewPlanPage(env tui.PageEnv, req actions.PlanRequest) *PlanPage {
	p := newPlanPage(env)
	p.req, p.loading, p.progress = &req, true, &scanProgress{}
	return p
}

// NewStoredPlanPage shows a plan read from the store.
func NewStoredPlanPage(env tui.PageEnv, f redrive.File) *PlanPage {
	p := newPlanPage(env)
	p.file, p.stored = &f, "in the plan store"
	p.rows()
	return p
}

// newStoredPlanPageWith opens a stored plan and starts an action on it
// ("a" or "X") once its status is loaded.
func newStoredPlanPageWith(env tui.PageEnv, f redrive.File, action string) *PlanPage {
	p := NewStoredPlanPage(env, f)
	p.pending = action
	return p
}

func newPlanPage(env tui.PageEnv) *PlanPage {
	return &PlanPage{planPageBase: newPlanPageBase(env, verdictTable(env))}
}

func verdictTable(env tui.PageEnv) table.Model {
	return table.New([]table.Column{
		{Title: "P:OFFSET", Width: 8},
		{Title: "VERDICT", Width: 16},
		{Title: "EVENT", Width: 16, Flex: 1, Drop: 2},
		{Title: "CLASS", Width: 12, Drop: 3},
		{Title: "DETAIL", Width: 30, Flex: 3, Drop: 1},
	}, env.Styles)
}

// layout gives the table the lines the header leaves.
func (p *PlanPage) layout() { p.fit(p.head()) }

func (p *PlanPage) Init() tea.Cmd {
	if p.req == nil {
		if r := runFor(p.file.Hash); r != nil {
			p.attach(r)
			return tea.Batch(p.loadStatus(), p.listen())
		}
		return p.loadStatus()
	}
	req := *p.req
	prog := p.progress
	req.Progress = func(read, total int64) { prog.read.Store(read); prog.total.Store(total) }
	readOnly, reason, ctxName := p.env.ReadOnly, p.env.ReadOnlyReason, p.env.Context
	return tea.Batch(p.tick(), do(p.env, func(ctx context.Context, s Service) tea.Msg {
		f, err := s.Plan(ctx, req)
		if err != nil {
			return errMsg{err}
		}
		// Audited before it is stored, as `berth redrive plan` does: a
		// plan the audit log cannot record is not stored.
		if a, can := s.(PlanActions); can {
			if err := a.RecordPlan(ctx, f, ctxName, !readOnly); err != nil {
				return planMsg{file: f, stored: "not stored: " + err.Error()}
			}
		}
		stored := "stored in the cluster's plan store"
		if readOnly {
			stored = "not stored: read-only (" + reason + ")"
		} else if err := s.Store(ctx, f); err != nil {
			stored = "not stored: " + err.Error()
		}
		return planMsg{file: f, stored: stored}
	}))
}

// loadStatus reads today's approvals and progress of the stored plan.
func (p *PlanPage) loadStatus() tea.Cmd {
	hash, ro := p.file.Hash, p.env.ReadOnly
	return doActions(p.env, func(err error) tea.Msg { return statusErrMsg{err} }, func(ctx context.Context, s PlanActions) tea.Msg {
		st, err := s.PlanStatus(ctx, hash, ro)
		if err != nil {
			return statusErrMsg{err}
		}
		return statusMsg[PlanStatus]{st}
	})
}

// tick redraws the scan's progress while the checks run.
func (p *PlanPage) tick() tea.Cmd {
	return p.route(tea.Tick(progressEvery, func(time.Time) tea.Msg { return progressTick{} }))
}

func (p *PlanPage) Title() string {
	if p.file != nil {
		return planTitle(p.file.Hash, "")
	}
	return planTitle("", p.req.DLQ)
}

// running reports whether an execution of this plan is under way.
func (p *PlanPage) running() bool { return p.run != nil && p.view.phase != phaseDone }

func (p *PlanPage) CapturesKey(msg tea.KeyMsg) bool { return p.capturesKey(msg, p.running()) }

func (p *PlanPage) rows() {
	rows := make([]table.Row, 0, len(p.file.Plan.Records))
	for _, r := range p.file.Plan.Records {
		verdict := "include"
		if !r.Included {
			verdict = string(r.Reason)
		}
		row := table.Row{ID: coordID(r.Coord()), Cells: []string{coordID(r.Coord()), verdict, sanitize.Text(r.EventID), r.Class, sanitize.Text(r.Detail)}}
		switch {
		case r.Reason == redrive.ReasonCheckFailed:
			row.Level = styles.Bad
		case !r.Included:
			row.Level = styles.Warn
		}
		rows = append(rows, row)
	}
	p.tbl.SetRows(rows)
}

// outcomeRows replaces the verdicts with what the run did to each record.
func (p *PlanPage) outcomeRows(res actions.Result) {
	sent := map[redrive.Coord]redrive.LedgerEntry{}
	for _, e := range res.Ledger {
		sent[redrive.Coord{Partition: e.Partition, Offset: e.Offset}] = e
	}
	skipped := map[redrive.Coord]actions.Skip{}
	for _, s := range res.Skipped {
		skipped[redrive.Coord{Partition: s.Partition, Offset: s.Offset}] = s
	}
	failed := map[redrive.Coord]string{}
	for _, f := range res.Failed {
		for _, c := range f.Records {
			failed[c] = f.Error
		}
	}
	p.tbl = table.New([]table.Column{
		{Title: "P:OFFSET", Width: 8},
		{Title: "OUTCOME", Width: 16},
		{Title: "EVENT", Width: 16, Flex: 1, Drop: 2},
		{Title: "CLASS", Width: 12, Drop: 3},
		{Title: "DETAIL", Width: 30, Flex: 3, Drop: 1},
	}, p.env.Styles)
	rows := make([]table.Row, 0, len(p.file.Plan.Records))
	for _, r := range p.file.Plan.Records {
		c := r.Coord()
		outcome, detail, level := "not sent", "", styles.Dim
		if res.Cancelled {
			detail = "cancelled before its batch"
		}
		if e, ok := sent[c]; ok {
			outcome, detail, level = "sent", fmt.Sprintf("→ %s[%d]@%d", sanitize.Text(e.Target), e.TargetPartition, e.TargetOffset), styles.Good
		} else if s, ok := skipped[c]; ok {
			outcome, detail, level = string(s.Reason), sanitize.Text(s.Detail), styles.Warn
		} else if e, ok := failed[c]; ok {
			outcome, detail, level = "failed", sanitize.Text(e), styles.Bad
		}
		rows = append(rows, table.Row{ID: coordID(c), Cells: []string{coordID(c), outcome, sanitize.Text(r.EventID), r.Class, detail}, Level: level})
	}
	p.tbl.SetRows(rows)
	p.results = true
}

func (p *PlanPage) attach(r *execRun) {
	p.run, p.view = r, r.snapshot()
	if p.view.phase == phaseDone {
		p.finish()
	}
}

// listen waits for the run's next change; the message comes back to this
// page even while another page is on top.
func (p *PlanPage) listen() tea.Cmd { return p.route(p.run.wait(p.view.version)) }

func (p *PlanPage) finish() {
	v := p.view
	p.runOver()
	var ref *actions.Refusal
	switch {
	case errors.As(v.err, &ref):
		p.note, p.noteBad = "execution refused, nothing sent: "+ref.Why(), true
	case v.err != nil && v.result.Sent == 0 && len(v.result.Failed) == 0 && len(v.result.Skipped) == 0:
		p.note, p.noteBad = "execution failed: "+v.err.Error(), true
	default:
		p.outcomeRows(v.result)
	}
}

func (p *PlanPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	defer p.layout()
	if p.takeCommon(msg) {
		return p, nil
	}
	switch msg := msg.(type) {
	case planMsg:
		p.loaded()
		f := msg.file
		p.file, p.stored = &f, msg.stored
		p.rows()
		if strings.HasPrefix(msg.stored, "not stored") {
			p.statusErr = "approve and execute need the plan in the plan store"
			return p, nil
		}
		return p, p.loadStatus()
	case statusMsg[PlanStatus]:
		p.setStatus(msg.st)
		return p, p.startPending(p.action)
	case signedMsg[PlanStatus]:
		showSigned(&p.planUI, msg, p.setStatus)
		return p, nil
	case runStartedMsg:
		if msg.fresh && p.results {
			// A new run: back to the verdicts until it has outcomes.
			p.tbl, p.results = verdictTable(p.env), false
			p.rows()
		}
		p.attach(msg.run)
		p.runAttached(msg.fresh)
		return p, p.listen()
	case runStartErrMsg:
		p.busy = ""
		p.note, p.noteBad = "execute: "+msg.err.Error(), true
		return p, nil
	case runMsg:
		if msg.run != p.run {
			return p, nil
		}
		p.view = p.run.snapshot()
		if p.view.phase == phaseDone {
			p.finish()
			return p, p.loadStatus()
		}
		return p, p.listen()
	case progressTick:
		if p.loading {
			return p, p.tick()
		}
		return p, nil
	case tea.KeyMsg:
		if cmd, done := p.planKey(msg, p); done {
			return p, cmd
		}
	}
	return p, p.toTable(msg)
}

func (p *PlanPage) planHash() string {
	if p.file == nil {
		return ""
	}
	return p.file.Hash
}

// reloadStatus reads the status again (u) once it was read: a plan not
// stored has none.
func (p *PlanPage) reloadStatus() tea.Cmd {
	if p.file != nil && p.status != nil {
		return p.loadStatus()
	}
	return nil
}

// setStatus takes a fresh status, with the plan's signatures as stored now.
func (p *PlanPage) setStatus(st PlanStatus) {
	p.status, p.statusErr = &st, ""
	if st.File.Hash == p.file.Hash {
		f := st.File
		p.file = &f
		if !p.results {
			p.rows() // a stored plan's records arrive derived with its status
		}
	}
}

// disabled says why an action cannot start now ("" when it can).
func (p *PlanPage) disabled(action string) string {
	st := planState{made: p.file != nil, haveStatus: p.status != nil, running: p.running(), madeHere: p.req != nil}
	if p.status != nil {
		st.refusal = p.status.Refusal
	}
	if p.file != nil {
		st.authorSigned = p.file.Author() != nil
	}
	return p.whyDisabled(p.env, action, st)
}

// action opens the prompt of a (approve), S (sign as author) or X
// (execute), or says in place why it is disabled.
func (p *PlanPage) action(a string) tea.Cmd {
	if p.refuse(a, p.disabled(a)) {
		return nil
	}
	if a == "X" {
		p.note, p.leaving = "", false
		return p.openConfirm()
	}
	return p.openKeyPrompt(a == "S")
}

// runKey handles the execution's keys; done is false for keys it leaves to
// the table.
func (p *PlanPage) runKey(msg tea.KeyMsg) (tea.Cmd, bool) {
	return p.planUI.runKey(msg, p.control())
}

// control is what the execution's keys do, and the action line that says
// so. Once everything is sent only the re-failure watch is left: c and esc
// stop it at once (leaving a watch in the background would only hide it).
func (p *PlanPage) control() runControl {
	return runControl{
		pause: func() {
			if p.view.cancelling {
				return
			}
			if p.view.progress.Paused {
				p.run.send(actions.Resume)
			} else {
				p.run.send(actions.Pause)
			}
		},
		cancel:   p.run.cancel,
		line:     "p pause/resume · c cancel (finishes the batch in flight) · esc leave it running",
		quit:     "the plan is executing: c cancels after the batch in flight, esc leaves it running (ctrl+c quits at once: the open batch is aborted, run the plan again to resume)",
		leave:    func() tea.Cmd { return leaveRunning(p.file.Hash, p.run.notifyWhenDone()) },
		watching: p.view.phase == phaseVerifying,
	}
}

// signCmd signs with the key file given at the prompt: an approval, or
// (author) the author's signature over a plan made here.
func (p *PlanPage) signCmd(path string, author bool) tea.Cmd {
	hash, ctxName, ro := p.file.Hash, p.env.Context, p.env.ReadOnly
	subj := approval.Subject{PlanHash: hash, Cluster: p.file.Plan.Cluster}
	type msg = signedMsg[PlanStatus]
	return doActions(p.env, func(err error) tea.Msg { return msg{err: err} }, func(ctx context.Context, s PlanActions) tea.Msg {
		var a Approved
		if author {
			sig, err := signPlan(path, subj, approval.RoleAuthor, "sign")
			if err != nil {
				return msg{err: err}
			}
			if err := s.SignAsAuthor(ctx, hash, sig, ctxName, ro); err != nil {
				return msg{err: err}
			}
			a = Approved{Fingerprint: sig.Fingerprint}
		} else {
			sig, err := signPlan(path, subj, approval.RoleApproval, "approve")
			if err != nil {
				return msg{err: err}
			}
			if a, err = s.Approve(ctx, hash, sig, ctxName, ro); err != nil {
				return msg{err: err}
			}
		}
		st, err := s.PlanStatus(ctx, hash, ro)
		if err != nil {
			return msg{ok: &a, stErr: err, author: author}
		}
		return msg{ok: &a, st: &st, author: author}
	})
}

// executeCmd starts the execution in its own goroutine (it outlives the
// operation timeout and this page) and returns at once.
func (p *PlanPage) executeCmd() tea.Cmd {
	hash := p.file.Hash
	req := ExecRequest{Context: p.env.Context, ReadOnly: p.env.ReadOnly}
	watch := time.Duration(0)
	if p.env.Config != nil {
		watch = min(p.env.Config.Redrive.VerifyWatch, maxConsoleWatch)
	}
	return doActions(p.env, func(err error) tea.Msg { return runStartErrMsg{err} }, func(_ context.Context, s PlanActions) tea.Msg {
		r, fresh := startRun(hash)
		if fresh {
			go r.execute(s, req, watch)
		}
		return runStartedMsg{run: r, fresh: fresh}
	})
}

// Summary returns the plan's header lines: hash and author, counts by
// verdict, counts by class, blocked state.
func Summary(f redrive.File) []string {
	t := f.Plan.Totals()
	target := f.Plan.Target
	if target == "" {
		target = "original topics"
	}
	signed := "unsigned"
	if a := f.Author(); a != nil {
		signed = "signed " + a.Fingerprint
	}
	by := ""
	if f.Plan.Author != "" { // who made it here; a stored plan's author is its verified signature
		by = " by " + sanitize.Text(f.Plan.Author)
	}
	lines := []string{fmt.Sprintf("plan %s  %s → %s %s(%s), %d approval(s)", f.Hash[:16], sanitize.Text(f.Plan.DLQ), sanitize.Text(target), by+" ", signed, len(f.Approvals()))}
	lines = append(lines, totalsLines(t)...)
	lines = append(lines, reviewLines(f.Plan)...)
	if blocked, why := f.Plan.Blocked(); blocked {
		lines = append(lines, "BLOCKED: "+sanitize.Text(why))
	} else {
		lines = append(lines, fmt.Sprintf("policy when made: review %s, %d approval(s) needed, rate %d/s, batches of %d", f.Plan.Policy.Review, f.Plan.Policy.Approvals, f.Plan.Rate, f.Plan.BatchSize))
	}
	return lines
}

// totalsLines are a plan's counts by verdict and by class.
func totalsLines(t redrive.Totals) []string {
	var reasons []string
	for _, r := range redrive.Reasons {
		if n := t.ByReason[r]; n > 0 {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		}
	}
	line := fmt.Sprintf("selected %d · include %d · exclude %d", t.Selected, t.Included, t.Excluded)
	if len(reasons) > 0 {
		line += " (" + strings.Join(reasons, ", ") + ")"
	}
	var classes []string
	for c := range t.ByClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var parts []string
	for _, c := range classes {
		cc := t.ByClass[c]
		parts = append(parts, fmt.Sprintf("%s %d/%d", c, cc.Included, cc.Selected))
	}
	return []string{line, "by class (included/selected): " + strings.Join(parts, ", ")}
}

// reviewKeys bounds the idempotency keys the header lists.
const reviewKeys = 6

// reviewLines are what a reviewer signs besides the totals: where the
// records go (every target, with counts: the plan's per-record targets are
// signed and re-derived at execute) and, once the records were read, the
// idempotency keys of those included.
func reviewLines(p redrive.Plan) []string {
	s := actions.Summarise(p, nil, nil)
	derived := len(p.Records) > 0
	for _, r := range p.Records {
		derived = derived && r.Derived()
	}
	return reviewText(s.Targets, s.Keys, derived)
}

// reviewText is reviewLines on either backend: every target with its
// counts, and the included records' idempotency keys when they were derived
// from the records.
func reviewText(targets []actions.TargetCount, keys []string, derived bool) []string {
	var ts []string
	for _, t := range targets {
		x := fmt.Sprintf("%s %d", sanitize.Text(t.Target), t.Included)
		if t.Excluded > 0 {
			x += fmt.Sprintf(" (+%d excluded)", t.Excluded)
		}
		ts = append(ts, x)
	}
	lines := []string{"targets: " + strings.Join(ts, ", ")}
	if !derived || len(keys) == 0 {
		return lines
	}
	all := len(keys)
	more := ""
	if len(keys) > reviewKeys {
		keys, more = keys[:reviewKeys], fmt.Sprintf(" … and %d more (berth redrive show -o json lists all)", all-reviewKeys)
	}
	shown := make([]string, len(keys))
	for i, k := range keys {
		shown[i] = dash(sanitize.Text(k))
	}
	return append(lines, "idempotency keys: "+strings.Join(shown, ", ")+more)
}

// warningLines are a plan's warnings (a permanent class included), one
// line each, kept on a short terminal too.
func warningLines(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = "WARNING: " + sanitize.Text(w)
	}
	return out
}

// maxSignatureLines bounds the signature list in the header.
const maxSignatureLines = 4

// head is everything above the table (fitHead: compact on a short
// terminal).
func (p *PlanPage) head() []string { return p.fitHead(p.fullHead) }

func (p *PlanPage) fullHead(compact bool) []string {
	if p.file == nil {
		return nil
	}
	head := Summary(*p.file)
	if compact {
		head = head[:2]
	}
	head = append(head, "hash "+p.file.Hash+"  · "+sanitize.Text(p.stored))
	switch {
	case p.statusErr != "":
		head = append(head, "approvals: "+sanitize.Text(p.statusErr))
	case p.status == nil:
		head = append(head, "approvals: reading…")
	default:
		st := p.status
		dec := fmt.Sprintf("approved by %s", strings.Join(approvers(st), ", "))
		if st.Required == 0 {
			dec = "no review required"
		} else if !st.Approved {
			dec = "not approved: " + sanitize.Text(st.Reason)
		}
		head = append(head, fmt.Sprintf("approvals %d/%d: %s · state %s · redriven %d of %d · today: %s",
			st.Approvals, st.Required, dec, st.State, st.Redriven, p.file.Plan.Totals().Included, sanitize.Text(st.Policy)))
		head = append(head, signatureLines(st.Signatures, compact)...)
		head = append(head, warningLines(st.Warnings)...)
	}
	return append(head, p.tail(p.actionLine(), p.runLines())...)
}

func approvers(st *PlanStatus) []string {
	var out []string
	for _, s := range st.Signatures {
		if s.Role == approval.RoleApproval && s.Problem == "" && s.Principal != "" {
			out = append(out, sanitize.Text(s.Principal))
		}
	}
	if len(out) == 0 {
		return []string{"-"}
	}
	return out
}

// actionLine says which actions are available, or why not.
func (p *PlanPage) actionLine() string {
	running := ""
	if p.running() {
		running = p.control().runningLine()
	}
	return p.planUI.actionLine(running, p.disabled, p.req != nil)
}

// runLines show the execution: a progress bar with counts and ETA while it
// runs, the result and the verification when it is over.
func (p *PlanPage) runLines() []string {
	if p.run == nil {
		return nil
	}
	v := p.view
	pr := v.progress
	switch v.phase {
	case phaseSending:
		state := fmt.Sprintf("elapsed %s · eta %s", round(pr.Elapsed), round(pr.ETA))
		switch {
		case v.cancelling:
			state = "CANCELLING: finishing the batch in flight…"
		case pr.Paused:
			state = "PAUSED (p resumes)"
		}
		return p.sendingLines("executing: running the checks again and re-reading the records…", pr, state, v.cancelling || pr.Paused)
	case phaseVerifying:
		line := "verifying: reading back every copy and comparing payload hashes"
		if !v.result.Cancelled && v.err == nil && p.env.Config != nil {
			if w := min(p.env.Config.Redrive.VerifyWatch, maxConsoleWatch); w > 0 {
				line += fmt.Sprintf(", then watching %s for re-failures for %s (c or esc stops the watch)", sanitize.Text(p.file.Plan.DLQ), w)
			}
		}
		return []string{p.barLine("executed ", pr), pr.Counts(), line}
	}
	var ref *actions.Refusal
	if errors.As(v.err, &ref) || v.err != nil && v.result.Sent == 0 && len(v.result.Failed) == 0 && len(v.result.Skipped) == 0 {
		return nil // the note says why
	}
	res := v.result
	out := fmt.Sprintf("result: sent %d · skipped %d", res.Sent, len(res.Skipped))
	if len(res.Skipped) > 0 {
		out += " (" + skipSummary(res.Skipped) + ")"
	}
	out += fmt.Sprintf(" · failed %d", failedRecords(res))
	if res.Cancelled {
		out += " · CANCELLED: X runs the rest (what is sent is skipped)"
	}
	lines := []string{p.barLine("", pr), p.level(p.resultLevel()).Render(out)}
	if v.err != nil {
		lines = append(lines, p.level(styles.Bad).Render("stopped: "+sanitize.Text(v.err.Error())))
	}
	lines = append(lines, firstThree(len(res.Failed), func(i int) string {
		f := res.Failed[i]
		return fmt.Sprintf("  failed batch of %d record(s): %s", len(f.Records), sanitize.Text(f.Error))
	}, "  … and %d more failed batch(es)")...)
	switch {
	case v.verifyErr != nil:
		lines = append(lines, p.level(styles.Bad).Render("verification failed: "+sanitize.Text(v.verifyErr.Error())))
	case v.verify != nil:
		vr := v.verify
		watched := fmt.Sprintf("re-failed %d within %s", len(vr.Refailed), round(vr.Watched))
		switch {
		case vr.Stopped:
			watched = fmt.Sprintf("re-failed %d before the watch was stopped after %s", len(vr.Refailed), round(vr.Watched))
		case vr.Watched == 0:
			watched = "no re-failure watch"
		}
		line := fmt.Sprintf("verified: %d copies read back, %d mismatch(es); %s", vr.Checked, len(vr.Mismatches), watched)
		lvl := styles.Good
		if len(vr.Mismatches) > 0 || len(vr.Refailed) > 0 {
			lvl = styles.Bad
		}
		lines = append(lines, p.level(lvl).Render(line))
		for i, m := range append(append([]string{}, vr.Mismatches...), vr.Refailed...) {
			if i == 3 {
				break
			}
			lines = append(lines, "  "+sanitize.Text(m))
		}
	}
	return lines
}

func (p *PlanPage) resultLevel() styles.Level {
	r := p.view.result
	switch {
	case len(r.Failed) > 0 || p.view.err != nil:
		return styles.Bad
	case r.Cancelled:
		return styles.Warn
	}
	return styles.Good
}

func (p *PlanPage) View() string { return p.renderPlan(p.checking, p.file != nil, p.head) }

// checking is what the page shows while the checks run.
func (p *PlanPage) checking() []string {
	lines := []string{"checking the selection: ledger, system of record, loop guard, duplicates, ordering scan…"}
	if total := p.progress.total.Load(); total > 0 {
		read := p.progress.read.Load()
		lines = append(lines, fmt.Sprintf("ordering scan: %d/%d records (%d%%)", read, total, read*100/total))
	}
	return lines
}

// ---------------------------------------------------------------- plans

// PlansPage lists the plans in the cluster's plan store, each with its
// approvals against today's policy, its progress from the ledger and its
// state, as `berth redrive status` does; a and X start the actions on the
// selected plan.
type PlansPage struct {
	loadingPage
	files    []redrive.File
	statuses []PlanStatus // nil when the Service cannot approve or execute
}

type (
	plansMsg    struct{ files []redrive.File }
	statusesMsg struct{ sts []PlanStatus }
)

// NewPlansPage builds the ":plans" page.
func NewPlansPage(env tui.PageEnv) tui.Page {
	p := &PlansPage{loadingPage: loadingPage{loading: true, tablePage: newTablePage(env, 1, []table.Column{
		{Title: "PLAN", Width: 12},
		{Title: "DLQ", Width: 16, Flex: 1},
		{Title: "CREATED", Width: 16, Drop: 2},
		{Title: "AUTHOR", Width: 12, Flex: 1, Drop: 3},
		{Title: "INCLUDE", Width: 7, Right: true, Numeric: true},
		{Title: "REDRIVEN", Width: 8, Right: true, Numeric: true, Drop: 1},
		{Title: "APPROVALS", Width: 9, Right: true},
		{Title: "STATE", Width: 16, Flex: 1},
	})}}
	p.tbl.SetEmpty("no plans (make one from :dlq, or berth redrive plan)")
	p.fitToConsole()
	return p
}

func (p *PlansPage) load() tea.Cmd {
	p.loading = true
	ro := p.env.ReadOnly
	return do(p.env, func(ctx context.Context, s Service) tea.Msg {
		if a, ok := s.(PlanActions); ok {
			sts, err := a.Status(ctx, ro)
			if err != nil {
				return errMsg{err}
			}
			return statusesMsg{sts}
		}
		fs, err := s.Plans(ctx)
		if err != nil {
			return errMsg{err}
		}
		return plansMsg{fs}
	})
}

func (p *PlansPage) Init() tea.Cmd              { return p.load() }
func (p *PlansPage) Title() string              { return "redrive plans" }
func (p *PlansPage) KeyBindings() []key.Binding { return p.bindings(planListBindings...) }

// rows lists the plans; a plan executing in this console shows its
// progress instead of its stored state.
func (p *PlansPage) rows() {
	rows := make([]table.Row, 0, len(p.files))
	for i, f := range p.files {
		t := f.Plan.Totals()
		redriven, approvals, state, level := "-", fmt.Sprint(len(f.Approvals())), "ready", styles.Normal
		if b, _ := f.Plan.Blocked(); b {
			state, level = "blocked", styles.Bad
		}
		if p.statuses != nil {
			st := p.statuses[i]
			redriven, approvals, state = fmt.Sprint(st.Redriven), fmt.Sprintf("%d/%d", st.Approvals, st.Required), st.State
			level = stateLevel(st.State)
		}
		if r := runFor(f.Hash); r != nil {
			if s, ok := r.stateText(); ok {
				state, level = s, styles.Accent
			}
		}
		rows = append(rows, table.Row{ID: f.Hash, Level: level, Cells: []string{f.Hash[:12], sanitize.Text(f.Plan.DLQ), f.Plan.CreatedAt.UTC().Format("2006-01-02 15:04"),
			sanitize.Text(f.Plan.Author), fmt.Sprint(t.Included), redriven, approvals, sanitize.Text(state)},
			Nums: []float64{0, 0, 0, 0, float64(t.Included), 0}})
	}
	p.tbl.SetRows(rows)
}

func (p *PlansPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	switch msg := msg.(type) {
	case plansMsg:
		p.loaded()
		p.files, p.statuses = msg.files, nil
		p.rows()
	case statusesMsg:
		p.loaded()
		p.statuses = msg.sts
		p.files = make([]redrive.File, len(msg.sts))
		for i, st := range msg.sts {
			p.files[i] = st.File
		}
		p.rows()
	case tui.SnapshotMsg:
		p.rows() // executions move on between reloads
	}
	return p, p.update(msg, func(msg tea.KeyMsg) (tea.Cmd, bool) {
		return p.planListKey(msg, p.load, func(hash, action string) tea.Cmd {
			for _, f := range p.files {
				if f.Hash == hash {
					return tui.Push(func(env tui.PageEnv) tui.Page { return newStoredPlanPageWith(env, f, action) })
				}
			}
			return nil
		})
	})
}

func (p *PlansPage) View() string {
	return p.listView("reading the plan store…", fmt.Sprintf("%d plan(s) in the cluster's plan store · enter: what an approver signs · a approve · X execute · u reload", len(p.files)))
}
