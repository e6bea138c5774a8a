package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// QueuePlanPage makes a RabbitMQ plan from a selection (or shows a stored
// one): every message's verdict, counts by verdict and class, blocked or
// not; then what an approver signs and the actions: a approve, S sign as
// author, X execute (the dry run first, then the hash typed), with
// progress, p pause/resume and c cancel between chunks.
type QueuePlanPage struct {
	planPageBase
	req  *QueuePlanRequest
	plan *QueuePlan

	status *QueuePlanStatus
	dry    *QueueDryRun

	run  *qRun
	view qRunView
}

type (
	queuePlanMsg struct{ plan QueuePlan }
	queueDryMsg  struct {
		dry QueueDryRun
		err error
	}
	queueRunMsg     struct{ run *qRun }
	queueRunStarted struct {
		run   *qRun
		fresh bool
	}
)

// NewQueuePlanPage checks req and shows the resulting plan.
func NewQueuePlanPage(env tui.PageEnv, req QueuePlanRequest) *QueuePlanPage {
	p := newQueuePlanPage(env)
	p.req, p.loading = &req, true
	return p
}

// NewStoredQueuePlanPage shows a plan from the redrive store; action ("a"
// or "X", or "") starts once its status is read.
func NewStoredQueuePlanPage(env tui.PageEnv, st QueuePlanStatus, action string) *QueuePlanPage {
	p := newQueuePlanPage(env)
	plan := st.Plan
	p.plan, p.pending = &plan, action
	p.rows()
	return p
}

func newQueuePlanPage(env tui.PageEnv) *QueuePlanPage {
	return &QueuePlanPage{planPageBase: newPlanPageBase(env, queueVerdictTable(env))}
}

func queueVerdictTable(env tui.PageEnv) table.Model {
	return table.New([]table.Column{
		{Title: "POS", Width: 5, Right: true, Numeric: true},
		{Title: "VERDICT", Width: 16},
		{Title: "LEDGER", Width: 10},
		{Title: "EVENT", Width: 16, Flex: 1, Drop: 2},
		{Title: "CLASS", Width: 12, Drop: 3},
		{Title: "TARGET", Width: 18, Flex: 1, Drop: 4},
		{Title: "DETAIL", Width: 30, Flex: 3, Drop: 1},
	}, env.Styles)
}

// layout gives the table the lines the header leaves.
func (p *QueuePlanPage) layout() { p.fit(p.head()) }

func (p *QueuePlanPage) Init() tea.Cmd {
	if p.req == nil {
		if r := qRunFor(p.plan.Hash); r != nil {
			p.run, p.view = r, r.snapshot()
			return tea.Batch(p.loadStatus(), p.listen())
		}
		return p.loadStatus()
	}
	req := *p.req
	return doQueues(p.env, errOf, func(ctx context.Context, s QueueService) tea.Msg {
		pl, err := s.Plan(ctx, req)
		if err != nil {
			return errMsg{err}
		}
		return queuePlanMsg{pl}
	})
}

func (p *QueuePlanPage) loadStatus() tea.Cmd {
	hash, ro := p.plan.Hash, p.env.ReadOnly
	return doQueues(p.env, func(err error) tea.Msg { return statusErrMsg{err} }, func(ctx context.Context, s QueueService) tea.Msg {
		st, err := s.PlanStatus(ctx, hash, ro)
		if err != nil {
			return statusErrMsg{err}
		}
		return statusMsg[QueuePlanStatus]{st}
	})
}

func (p *QueuePlanPage) listen() tea.Cmd { return p.route(p.run.wait(p.view.version)) }

func (p *QueuePlanPage) Title() string {
	if p.plan != nil {
		return planTitle(p.plan.Hash, "")
	}
	return planTitle("", p.req.DLQ)
}

// running reports whether an execution of this plan is under way.
func (p *QueuePlanPage) running() bool { return p.run != nil && !p.view.done }

func (p *QueuePlanPage) CapturesKey(msg tea.KeyMsg) bool { return p.capturesKey(msg, p.running()) }

func target(r QueuePlanRecord) string {
	if r.Exchange == "" {
		return "queue " + r.RoutingKey
	}
	return fmt.Sprintf("%q %s", r.Exchange, r.RoutingKey)
}

// rows shows each record's verdict and, once the status is read, what the
// ledger says of it (confirmed, intent: in doubt, failed).
func (p *QueuePlanPage) rows() {
	failed := map[string]string{}
	skipped := map[string]QueueSkip{}
	if p.run != nil && p.view.done {
		for _, f := range p.view.result.Failed {
			failed[f.EventID] = f.Error
		}
		for _, s := range p.view.result.Skipped {
			skipped[s.EventID] = s
		}
	}
	rows := make([]table.Row, 0, len(p.plan.Records))
	for _, r := range p.plan.Records {
		verdict := "include"
		if !r.Included {
			verdict = string(r.Reason)
		}
		ledger, detail := "-", r.Detail
		if p.status != nil {
			switch st := p.status.States[r.EventID]; st {
			case "confirmed":
				ledger = "sent"
			case "intent":
				ledger = "in doubt"
				detail = "published by a run that stopped before its confirm: resent on resume (consumers deduplicate by message_id)"
			case "":
			default:
				ledger = st
			}
		}
		if e, ok := failed[r.EventID]; ok {
			ledger, detail = "failed", e
		}
		if s, ok := skipped[r.EventID]; ok {
			ledger, detail = string(s.Reason), s.Detail
		}
		row := table.Row{ID: r.EventID + "\x00" + fmt.Sprint(r.Position), Cells: []string{fmt.Sprint(r.Position), verdict, ledger, sanitize.Text(r.EventID), r.Class, sanitize.Text(target(r)), sanitize.Text(detail)},
			Nums: []float64{float64(r.Position)}}
		switch {
		case ledger == "failed" || r.Reason == redrive.ReasonCheckFailed:
			row.Level = styles.Bad
		case ledger == "sent":
			row.Level = styles.Good
		case !r.Included:
			row.Level = styles.Warn
		}
		rows = append(rows, row)
	}
	p.tbl.SetRows(rows)
}

func (p *QueuePlanPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	defer p.layout()
	if p.takeCommon(msg) {
		return p, nil
	}
	switch msg := msg.(type) {
	case queuePlanMsg:
		p.loaded()
		pl := msg.plan
		p.plan = &pl
		p.rows()
		if !pl.Stored {
			p.statusErr = "approve and execute need the plan in the redrive store"
			return p, nil
		}
		return p, p.loadStatus()
	case statusMsg[QueuePlanStatus]:
		p.setStatus(msg.st)
		return p, p.startPending(p.action)
	case signedMsg[QueuePlanStatus]:
		showSigned(&p.planUI, msg, p.setStatus)
		return p, nil
	case queueDryMsg:
		p.busy = ""
		if msg.err != nil {
			p.note, p.noteBad = "execution refused, nothing sent: "+msg.err.Error(), true
			return p, p.loadStatus()
		}
		d := msg.dry
		p.dry = &d
		return p, p.openConfirm()
	case queueRunStarted:
		p.run, p.view = msg.run, msg.run.snapshot()
		p.runAttached(msg.fresh)
		return p, p.listen()
	case queueRunMsg:
		if msg.run != p.run {
			return p, nil
		}
		p.view = p.run.snapshot()
		if p.view.done {
			p.finish()
			return p, p.loadStatus()
		}
		return p, p.listen()
	case tea.KeyMsg:
		if cmd, done := p.planKey(msg, p); done {
			return p, cmd
		}
	}
	return p, p.toTable(msg)
}

func (p *QueuePlanPage) planHash() string {
	if p.plan == nil {
		return ""
	}
	return p.plan.Hash
}

// reloadStatus reads the status again (u) of a plan in the redrive
// store (a stored plan whose first read failed, too).
func (p *QueuePlanPage) reloadStatus() tea.Cmd {
	if p.plan != nil && (p.plan.Stored || p.status != nil) {
		return p.loadStatus()
	}
	return nil
}

// setStatus takes a fresh status, with the plan as stored now (its
// author's signature, say), keeping what the page made it with.
func (p *QueuePlanPage) setStatus(st QueuePlanStatus) {
	p.status, p.statusErr = &st, ""
	if st.Plan.Hash == p.plan.Hash {
		pl := st.Plan
		pl.Notes, pl.StoreNote = p.plan.Notes, p.plan.StoreNote
		p.plan = &pl
	}
	p.rows()
}

func (p *QueuePlanPage) finish() {
	p.runOver()
	v := p.view
	var ref *ExecRefusal
	switch {
	case errors.As(v.err, &ref):
		p.note, p.noteBad = "execution refused, nothing sent: "+ref.Reason, true
	case v.err != nil:
		p.note, p.noteBad = "execution stopped: "+v.err.Error(), true
	}
	p.rows()
}

// disabled says why an action cannot start now ("" when it can).
func (p *QueuePlanPage) disabled(action string) string {
	st := planState{made: p.plan != nil, haveStatus: p.status != nil, running: p.running(), madeHere: p.req != nil}
	if p.status != nil {
		st.refusal = p.status.Refusal
	}
	if p.plan != nil {
		st.authorSigned = p.plan.AuthorKey != ""
	}
	return p.whyDisabled(p.env, action, st)
}

// action opens the prompt of a (approve) or S (sign as author), or for X
// (execute) makes the dry run first; or says in place why it is disabled.
func (p *QueuePlanPage) action(a string) tea.Cmd {
	if p.refuse(a, p.disabled(a)) {
		return nil
	}
	p.note, p.leaving, p.dry = "", false, nil
	if a != "X" {
		return p.openKeyPrompt(a == "S")
	}
	// The dry run first, as `berth redrive execute` without --yes: the
	// preflight with today's data and what would be sent.
	p.busy = "dry run: checking approvals, the ledger and the system of record again…"
	hash, ro := p.plan.Hash, p.env.ReadOnly
	return doQueues(p.env, func(err error) tea.Msg { return queueDryMsg{err: err} }, func(ctx context.Context, s QueueService) tea.Msg {
		d, err := s.DryRun(ctx, hash, ro)
		return queueDryMsg{dry: d, err: err}
	})
}

func (p *QueuePlanPage) runKey(msg tea.KeyMsg) (tea.Cmd, bool) {
	return p.planUI.runKey(msg, p.control())
}

// control is what the execution's keys do, and the action line that says
// so (the console runs no re-failure watch on RabbitMQ: `berth redrive
// execute --watch` does).
func (p *QueuePlanPage) control() runControl {
	return runControl{
		pause: func() {
			if !p.view.cancelling {
				p.run.setPaused(!p.view.paused)
			}
		},
		cancel: p.run.cancel,
		line:   "p pause/resume · c cancel (between chunks: the chunk in flight settles) · esc leave it running",
		quit:   "the plan is executing: c cancels between chunks, esc leaves it running (ctrl+c quits at once: messages not yet acked return to the DLQ, run the plan again to resume)",
		leave:  func() tea.Cmd { return leaveRunning(p.plan.Hash, p.run.notifyWhenDone()) },
	}
}

// signCmd signs with the key file given at the prompt: an approval, or
// (author) the author's signature over a plan made here.
func (p *QueuePlanPage) signCmd(path string, author bool) tea.Cmd {
	hash, cluster, ro := p.plan.Hash, p.plan.Cluster, p.env.ReadOnly
	type msg = signedMsg[QueuePlanStatus]
	return doQueues(p.env, func(err error) tea.Msg { return msg{err: err} }, func(ctx context.Context, s QueueService) tea.Msg {
		role, verb := approval.RoleApproval, "approve"
		if author {
			role, verb = approval.RoleAuthor, "sign"
		}
		sig, err := signPlan(path, approval.Subject{PlanHash: hash, Cluster: cluster}, role, verb)
		if err != nil {
			return msg{err: err}
		}
		var a Approved
		if author {
			if err := s.SignAsAuthor(ctx, hash, sig, ro); err != nil {
				return msg{err: err}
			}
			a = Approved{Fingerprint: sig.Fingerprint}
		} else if a, err = s.Approve(ctx, hash, sig, ro); err != nil {
			return msg{err: err}
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
func (p *QueuePlanPage) executeCmd() tea.Cmd {
	hash, ro := p.plan.Hash, p.env.ReadOnly
	return doQueues(p.env, func(err error) tea.Msg { return queueDryMsg{err: err} }, func(_ context.Context, s QueueService) tea.Msg {
		r, fresh := startQRun(hash)
		if fresh {
			go r.execute(s, ro)
		}
		return queueRunStarted{run: r, fresh: fresh}
	})
}

// QueuePlanSummary is a RabbitMQ plan's header lines.
func QueuePlanSummary(pl QueuePlan) []string {
	t := pl.Totals
	signed := "unsigned"
	if pl.AuthorKey != "" {
		signed = "signed " + pl.AuthorKey
	}
	tgt := "each message's original exchange and routing key (x-death)"
	if pl.Target == "original_queue" {
		tgt = "the queue each message died in (default exchange)"
	}
	lines := []string{fmt.Sprintf("plan %s  %s (vhost %s, %s) → %s  by %s (%s)", pl.Hash[:16], sanitize.Text(pl.DLQ), sanitize.Text(pl.Vhost), sanitize.Text(dash(pl.QueueType)), tgt, sanitize.Text(pl.Author), signed)}
	lines = append(lines, totalsLines(t)...)
	lines = append(lines, reviewText(pl.Review.Targets, pl.Review.Keys, pl.Review.Derived)...)
	if n := pl.Review.AlreadySent; n > 0 {
		lines = append(lines, fmt.Sprintf("%d message(s) already sent by this plan (the ledger has them confirmed; no longer in the DLQ)", n))
	}
	if n := len(pl.Review.Changed) + len(pl.Review.Gone); n > 0 {
		lines = append(lines, fmt.Sprintf("%d message(s) changed or gone from the DLQ since the plan was made (execute skips them): %s", n,
			sanitize.Text(strings.Join(append(append([]string{}, pl.Review.Changed...), pl.Review.Gone...), ", "))))
	}
	if n := len(pl.Review.NotVisible); n > 0 {
		lines = append(lines, fmt.Sprintf("%d message(s) not visible (not found while other consumers held messages of the DLQ; execute sends only those back in the DLQ when it runs): %s", n,
			sanitize.Text(strings.Join(pl.Review.NotVisible, ", "))))
	}
	if pl.Review.Unseen != "" {
		lines = append(lines, "note: "+sanitize.Text(pl.Review.Unseen))
	}
	lines = append(lines, warningLines(pl.Review.Warnings)...)
	if pl.Blocked {
		lines = append(lines, "BLOCKED: "+sanitize.Text(pl.BlockedReason))
	} else {
		lines = append(lines, fmt.Sprintf("policy when made: review %s, %d approval(s) needed, rate %d/s, %d publishes per confirm window", pl.Policy.Review, pl.Policy.Approvals, pl.Rate, pl.Window))
	}
	return lines
}

// head is everything above the table (fitHead: compact on a short
// terminal).
func (p *QueuePlanPage) head() []string { return p.fitHead(p.fullHead) }

func (p *QueuePlanPage) fullHead(compact bool) []string {
	if p.plan == nil {
		return nil
	}
	head := QueuePlanSummary(*p.plan)
	if compact {
		// A warning is kept on a short terminal too.
		head = append(head[:2:2], warningLines(p.plan.Review.Warnings)...)
	}
	where := "in the redrive store"
	if p.req != nil {
		where = "stored in the redrive store (berth redrive status lists it)"
		if !p.plan.Stored {
			where = p.plan.StoreNote
		}
	}
	head = append(head, "hash "+p.plan.Hash+"  · "+sanitize.Text(where))
	if !compact {
		for _, n := range p.plan.Notes {
			head = append(head, sanitize.Text(n))
		}
	}
	switch {
	case p.statusErr != "":
		head = append(head, "approvals: "+sanitize.Text(p.statusErr))
	case p.status == nil:
		head = append(head, "approvals: reading…")
	default:
		st := p.status
		dec := "approved"
		switch {
		case st.Required == 0:
			dec = "no review required"
		case !st.Approved:
			dec = "not approved: " + sanitize.Text(st.Reason)
		}
		line := fmt.Sprintf("approvals %d/%d: %s · state %s · redriven %d of %d", st.Approvals, st.Required, dec, st.State, st.Redriven, p.plan.Totals.Included)
		if st.Intent > 0 || st.Failed > 0 {
			line += fmt.Sprintf(" (in doubt %d, failed %d)", st.Intent, st.Failed)
		}
		head = append(head, line+" · today: "+sanitize.Text(st.Policy))
		head = append(head, signatureLines(st.Signatures, compact)...)
	}
	run := p.runLines()
	if p.dry != nil && p.mode == promptConfirm {
		run = append(run, p.dryLines()...)
	}
	return append(head, p.tail(p.actionLine(), run)...)
}

func (p *QueuePlanPage) dryLines() []string {
	d := p.dry
	line := fmt.Sprintf("DRY RUN: would redrive %d message(s) from %s (selected %d, excluded %d, skipped now %d)", d.WouldSend, sanitize.Text(p.plan.DLQ), d.Totals.Selected, d.Totals.Excluded, len(d.Skipped))
	if st := p.status; st != nil && st.Redriven > 0 {
		line += fmt.Sprintf(" · %d of them confirmed by an earlier run (the ledger): only acked from the DLQ, not sent again", st.Redriven)
	}
	if len(d.Approvers) > 0 {
		line += " · approved by " + sanitize.Text(strings.Join(d.Approvers, ", "))
	}
	return append([]string{line}, firstThree(len(d.Skipped), func(i int) string {
		s := d.Skipped[i]
		return fmt.Sprintf("  skipped #%d %s: %s %s", s.Position, sanitize.Text(s.EventID), s.Reason, sanitize.Text(s.Detail))
	}, "  … and %d more skipped")...)
}

func (p *QueuePlanPage) actionLine() string {
	running := ""
	if p.running() {
		running = p.control().runningLine()
	}
	return p.planUI.actionLine(running, p.disabled, p.req != nil)
}

func (p *QueuePlanPage) runLines() []string {
	if p.run == nil {
		return nil
	}
	v := p.view
	pr := v.progress
	if !v.done {
		state := fmt.Sprintf("elapsed %s · eta %s", round(time.Since(v.started)), round(pr.ETA))
		switch {
		case v.cancelling:
			state = "CANCELLING: the chunk in flight settles, then it stops…"
		case v.paused:
			state = "PAUSED before the next chunk (p resumes)"
		}
		return p.sendingLines("executing: running the checks again and reading "+sanitize.Text(p.plan.DLQ)+"…", pr, state, v.cancelling || v.paused)
	}
	var ref *ExecRefusal
	if errors.As(v.err, &ref) {
		return nil // the note says why
	}
	res := v.result
	out := queueResultLine(res)
	lvl := styles.Good
	switch {
	case len(res.Failed) > 0 || v.err != nil:
		lvl = styles.Bad
	case res.Cancelled:
		out += " · CANCELLED: X sends the rest (the ledger says what arrived)"
		lvl = styles.Warn
	}
	lines := []string{p.level(lvl).Render(out)}
	if res.Stopped != "" && !res.Cancelled {
		lines = append(lines, p.level(styles.Bad).Render("stopped: "+sanitize.Text(res.Stopped)))
	}
	lines = append(lines, firstThree(len(res.Failed), func(i int) string {
		f := res.Failed[i]
		return fmt.Sprintf("  failed %s → %q %s: %s", sanitize.Text(f.EventID), sanitize.Text(f.Exchange), sanitize.Text(f.RoutingKey), sanitize.Text(f.Error))
	}, "  … and %d more failed")...)
	if vr := res.Verification; vr != nil {
		line := fmt.Sprintf("verified: DLQ depth %d → %d with %d acked, %d returned: ok", vr.Before, vr.After, vr.Acked, vr.Returned)
		l := styles.Good
		if !vr.OK {
			line = fmt.Sprintf("verification PROBLEM: %s", vr.Problem)
			l = styles.Bad
		}
		lines = append(lines, p.level(l).Render(sanitize.Text(line)))
	}
	for _, w := range res.Warnings {
		lines = append(lines, p.level(styles.Bad).Render("warning: "+sanitize.Text(w)))
	}
	return lines
}

// queueResultLine says what a run did in the words of the Kafka plan page
// and `berth redrive execute`: sent, already sent (the ledger's
// already_redriven included), skipped with reasons (a message no longer in
// the DLQ is record_gone), failed; resends are RabbitMQ's extra.
func queueResultLine(res QueueResult) string {
	already, skipped, by := res.AlreadySent, 0, map[redrive.Reason]int{}
	for _, s := range res.Skipped {
		if s.Reason == redrive.ReasonAlreadyRedriven {
			already++
			continue
		}
		by[s.Reason]++
		skipped++
	}
	if n := len(res.NotFound); n > 0 {
		by[actions.ReasonGone] += n
		skipped += n
	}
	out := fmt.Sprintf("result: sent %d · already sent %d · skipped %d", res.Sent, already, skipped)
	if skipped > 0 {
		out += " (" + reasonSummary(by) + ")"
	}
	out += fmt.Sprintf(" · failed %d", len(res.Failed))
	if res.Resent > 0 {
		out += fmt.Sprintf(" · %d of the sent resent (an earlier run stopped before their confirm)", res.Resent)
	}
	return out
}

func (p *QueuePlanPage) View() string { return p.renderPlan(p.checking, p.plan != nil, p.head) }

// checking is what the page shows while the plan is made.
func (p *QueuePlanPage) checking() []string {
	return []string{"reading " + sanitize.Text(p.req.DLQ) + " and checking the selection: ledger, system of record, loop guard, duplicates, ordering by business key…"}
}

// ---------------------------------------------------------------- runs

// qRun is one RabbitMQ execution started from the console; it outlives
// the page that started it (leaving keeps it running, :plans shows it,
// opening the plan again reattaches).
type qRun struct {
	hash     string
	cancelCh chan struct{}
	once     sync.Once

	changes
	qRunState
}

// qRunState is what a run's goroutine writes (under the changes lock) and
// the pages read through snapshot.
type qRunState struct {
	done       bool
	started    time.Time
	progress   actions.Progress // counted as the CLI counts (actions.RabbitProgress)
	paused     bool
	cancelling bool
	result     QueueResult
	err        error
}

// qRunView is a consistent copy of a run's state.
type qRunView struct {
	version uint64
	qRunState
}

var qruns = newRegistry[*qRun]()

func qRunFor(hash string) *qRun { return qruns.get(hash) }

func startQRun(hash string) (*qRun, bool) {
	return qruns.start(hash, func() *qRun {
		return &qRun{hash: hash, cancelCh: make(chan struct{}), changes: newChanges(), qRunState: qRunState{started: time.Now()}}
	})
}

func (r *qRun) finished() bool { return r.snapshot().done }

func (r *qRun) snapshot() qRunView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return qRunView{version: r.version, qRunState: r.qRunState}
}

func (r *qRun) wait(seen uint64) tea.Cmd {
	return func() tea.Msg {
		r.waitChange(seen, func() bool { return r.done })
		return queueRunMsg{run: r}
	}
}

func (r *qRun) setPaused(on bool) { r.update(func() { r.paused = on; r.progress.Paused = on }) }

func (r *qRun) cancel() {
	r.update(func() { r.cancelling = true })
	r.once.Do(func() { close(r.cancelCh) })
}

// pause blocks while the run is paused; false when it was cancelled.
func (r *qRun) pause(ctx context.Context) bool {
	for {
		r.mu.Lock()
		if r.cancelling {
			r.mu.Unlock()
			return false
		}
		if !r.paused {
			r.mu.Unlock()
			return true
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (r *qRun) execute(s QueueService, readOnly bool) {
	res, err := s.Execute(context.Background(), r.hash, QueueExecRequest{
		ReadOnly: readOnly,
		// Counted here, on the run's goroutine: the result's lists are
		// the run's, and only their lengths are kept.
		Progress: func(p QueueProgress) {
			r.update(func() {
				r.progress = actions.RabbitProgress(r.hash, p.Included, p.Rate, p.Result, time.Since(r.started), r.paused)
			})
		},
		Pause:  r.pause,
		Cancel: r.cancelCh,
	})
	r.update(func() { r.result, r.err, r.done = res, err, true })
}

// notifyWhenDone returns a command that waits for the run to end and
// then shows its result in the status line (changes.notifyWhenDone).
func (r *qRun) notifyWhenDone() tea.Cmd {
	return r.changes.notifyWhenDone(func() bool { return r.done }, func() tui.FlashMsg {
		v := r.snapshot()
		var ref *ExecRefusal
		switch {
		case errors.As(v.err, &ref):
			return refusedFlash(r.hash, ref.Reason)
		case v.err != nil || len(v.result.Failed) > 0:
			return stoppedFlash(r.hash, fmt.Sprintf("sent %d, failed %d", v.result.Sent, len(v.result.Failed)), v.err)
		}
		return endedFlash(r.hash, v.result.Cancelled, v.result.Sent, len(v.result.Skipped))
	})
}

// stateText is a running plan's state for the plans list.
func (r *qRun) stateText() (string, bool) {
	v := r.snapshot()
	if v.done {
		return "", false
	}
	pr := v.progress
	return runStateText(v.cancelling, v.paused, pr.Done(), pr.Total), true
}

// ---------------------------------------------------------------- plans

// QueuePlansPage is ":plans" on a RabbitMQ context: the plans in the
// redrive store as `berth redrive status` lists them.
type QueuePlansPage struct {
	loadingPage
	statuses []QueuePlanStatus
}

type queueStatusesMsg struct{ sts []QueuePlanStatus }

// NewQueuePlansPage builds ":plans" on RabbitMQ.
func NewQueuePlansPage(env tui.PageEnv) tui.Page {
	p := &QueuePlansPage{loadingPage: loadingPage{loading: true, tablePage: newTablePage(env, 1, []table.Column{
		{Title: "PLAN", Width: 12},
		{Title: "VHOST", Width: 6, Drop: 4},
		{Title: "DLQ", Width: 16, Flex: 1},
		{Title: "CREATED", Width: 16, Drop: 2},
		{Title: "AUTHOR", Width: 12, Flex: 1, Drop: 3},
		{Title: "INCLUDE", Width: 7, Right: true, Numeric: true},
		{Title: "REDRIVEN", Width: 8, Right: true, Numeric: true, Drop: 1},
		{Title: "IN DOUBT", Width: 8, Right: true, Numeric: true, Drop: 5},
		{Title: "APPROVALS", Width: 9, Right: true},
		{Title: "STATE", Width: 16, Flex: 1},
	})}}
	p.tbl.SetEmpty("no plans (make one from :dlq, or berth redrive plan)")
	p.fitToConsole()
	return p
}

func (p *QueuePlansPage) load() tea.Cmd {
	p.loading = true
	ro := p.env.ReadOnly
	return doQueues(p.env, errOf, func(ctx context.Context, s QueueService) tea.Msg {
		sts, err := s.Status(ctx, ro)
		if err != nil {
			return errMsg{err}
		}
		return queueStatusesMsg{sts}
	})
}

func (p *QueuePlansPage) Init() tea.Cmd              { return p.load() }
func (p *QueuePlansPage) Title() string              { return "redrive plans" }
func (p *QueuePlansPage) KeyBindings() []key.Binding { return p.bindings(planListBindings...) }

func (p *QueuePlansPage) rows() {
	rows := make([]table.Row, 0, len(p.statuses))
	for _, st := range p.statuses {
		pl := st.Plan
		state, level := st.State, stateLevel(st.State)
		if r := qRunFor(pl.Hash); r != nil {
			if s, ok := r.stateText(); ok {
				state, level = s, styles.Accent
			}
		}
		rows = append(rows, table.Row{ID: pl.Hash, Level: level, Cells: []string{pl.Hash[:12], sanitize.Text(pl.Vhost), sanitize.Text(pl.DLQ), pl.CreatedAt.UTC().Format("2006-01-02 15:04"),
			sanitize.Text(pl.Author), fmt.Sprint(pl.Totals.Included), fmt.Sprint(st.Redriven), fmt.Sprint(st.Intent), fmt.Sprintf("%d/%d", st.Approvals, st.Required), sanitize.Text(state)},
			Nums: []float64{0, 0, 0, 0, 0, float64(pl.Totals.Included), float64(st.Redriven), float64(st.Intent)}})
	}
	p.tbl.SetRows(rows)
}

func (p *QueuePlansPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	switch msg := msg.(type) {
	case queueStatusesMsg:
		p.loaded()
		p.statuses = msg.sts
		p.rows()
	case tui.SnapshotMsg:
		p.rows() // executions move on between reloads
	}
	return p, p.update(msg, func(msg tea.KeyMsg) (tea.Cmd, bool) {
		return p.planListKey(msg, p.load, func(hash, action string) tea.Cmd {
			for _, st := range p.statuses {
				if st.Plan.Hash == hash {
					return tui.Push(func(env tui.PageEnv) tui.Page { return NewStoredQueuePlanPage(env, st, action) })
				}
			}
			return nil
		})
	})
}

func (p *QueuePlansPage) View() string {
	return p.listView("reading the redrive store…", fmt.Sprintf("%d plan(s) in the redrive store (redrive.store_dsn) · enter: what an approver signs · a approve · X execute · u reload", len(p.statuses)))
}
