package dlq

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

// What the Kafka and RabbitMQ plan pages share: the page base
// (planPageBase: size, header fit, key capture, the common messages), the
// prompts (an SSH key to approve or sign with, the hash to execute), the
// note an action leaves, which actions are available, the action line, the
// signature list, the progress bar, leaving a running plan, and the change
// signal, registry and end-of-run flash of an execution running in the
// background. The table pages' scaffolding is in pages.go.

// planUI is embedded in both plan pages.
type planUI struct {
	styles *styles.Styles
	// mode is the prompt open, if any; input is its text field.
	mode  promptMode
	input textinput.Model
	// note is the outcome of the last action (a refusal, a disabled
	// action's reason), shown in place.
	note    string
	noteBad bool
	busy    string // an action in flight ("signing…")
	// statusErr is why the plan's status (its approvals) could not be
	// read: no action starts without it.
	statusErr string
	// after loading the status, start this action (a or X from :plans).
	pending string
	leaving bool // esc pressed once while the plan executes
	bar     progress.Model
}

func newPlanUI(env tui.PageEnv) planUI {
	u := planUI{styles: env.Styles, input: textinput.New(), bar: progress.New(progress.WithDefaultGradient(), progress.WithoutPercentage())}
	u.input.Cursor.SetMode(cursor.CursorStatic) // no blink timer
	u.input.CharLimit = 4096
	return u
}

func (u *planUI) layoutUI(w int) {
	u.bar.Width = max(min(w-24, 60), 10)
	u.input.Width = max(min(w-60, 60), 12)
}

func (u *planUI) level(l styles.Level) interface{ Render(...string) string } {
	if u.styles == nil {
		return plain{}
	}
	return u.styles.Levels[l]
}

type plain struct{}

func (plain) Render(s ...string) string { return strings.Join(s, " ") }

func (u *planUI) noteLevel() styles.Level {
	if u.noteBad {
		return styles.Bad
	}
	return styles.Good
}

// planState is what a plan page knows that decides which actions it
// offers now.
type planState struct {
	made       bool // the plan is checked (made here) or read (stored)
	haveStatus bool // its status is read
	running    bool // an execution of it is under way in this console
	refusal    string
	// madeHere: made on this page, so S may sign it as its author, unless
	// it carries the author's signature already.
	madeHere, authorSigned bool
}

// whyDisabled says why action a (a, X or S) cannot start now ("" when it
// can): the plan still being checked, read-only, no status yet, an action
// in flight, the plan executing; then X refused by the status, S on a plan
// not made here or signed already.
func (u *planUI) whyDisabled(env tui.PageEnv, a string, st planState) string {
	switch {
	case !st.made:
		return "the plan is still being checked"
	case env.ReadOnly:
		return "read-only: " + env.ReadOnlyReason
	case u.statusErr != "":
		return u.statusErr
	case !st.haveStatus:
		return "reading the plan's approvals…"
	case u.busy != "":
		return u.busy
	case st.running:
		return "the plan is executing"
	case a == "X" && st.refusal != "":
		return st.refusal
	case a == "S" && !st.madeHere:
		return "only a plan made on this page (sign at creation: berth redrive plan --key)"
	case a == "S" && st.authorSigned:
		return "the plan already carries its author's signature"
	}
	return ""
}

// startPending starts the action waiting for the plan's status (a or X
// pressed on a plans list), once the status is read.
func (u *planUI) startPending(action func(a string) tea.Cmd) tea.Cmd {
	a := u.pending
	if a == "" {
		return nil
	}
	u.pending = ""
	return action(a)
}

// statusFailed keeps why the plan's status could not be read; the action
// waiting for it does not start.
func (u *planUI) statusFailed(err error) { u.statusErr, u.pending = err.Error(), "" }

var actionNames = map[string]string{"a": "approve", "X": "execute", "S": "sign as author"}

// refuse says in place why action a is disabled; false when it is not.
func (u *planUI) refuse(a, why string) bool {
	if why == "" {
		return false
	}
	u.note, u.noteBad = actionNames[a]+" disabled: "+why, true
	return true
}

// openKeyPrompt asks for the SSH key to approve with (or, author, to sign
// the plan as its author).
func (u *planUI) openKeyPrompt(author bool) tea.Cmd {
	u.note, u.leaving = "", false
	u.mode = promptKey
	if author {
		u.mode = promptAuthorKey
	}
	u.input.Placeholder = ""
	u.input.SetValue(defaultKeyPath())
	u.input.CursorEnd()
	return u.input.Focus()
}

// openConfirm asks for the plan hash's first 8 digits before executing.
func (u *planUI) openConfirm() tea.Cmd {
	u.mode = promptConfirm
	u.input.Placeholder = "8 hex digits"
	u.input.SetValue("")
	u.input.CursorEnd()
	return u.input.Focus()
}

var (
	keySubmit = key.NewBinding(key.WithKeys("enter"))
	keyAbort  = key.NewBinding(key.WithKeys("esc"))
)

// promptKey handles a key while a prompt is open: esc closes it, enter
// signs with the key file given (sign) or, when the hash typed matches,
// executes (execute).
func (u *planUI) promptKey(msg tea.KeyMsg, hash string, sign func(path string, author bool) tea.Cmd, execute func() tea.Cmd) tea.Cmd {
	switch {
	case key.Matches(msg, keyAbort):
		u.mode = promptNone
		u.input.Blur()
		u.note, u.noteBad = "", false
		return nil
	case key.Matches(msg, keySubmit):
		mode, value := u.mode, strings.TrimSpace(u.input.Value())
		u.mode = promptNone
		u.input.Blur()
		if mode == promptKey || mode == promptAuthorKey {
			if value == "" {
				u.note, u.noteBad = "no key file given; nothing signed", true
				return nil
			}
			u.busy = "signing and storing the approval…"
			if mode == promptAuthorKey {
				u.busy = "signing the plan as its author…"
			}
			return sign(value, mode == promptAuthorKey)
		}
		if !strings.EqualFold(value, hash[:8]) {
			u.note, u.noteBad = fmt.Sprintf("execute: %q is not the plan's first 8 hash digits; nothing sent", sanitize.Text(value)), true
			return nil
		}
		u.busy = "starting the execution…"
		return execute()
	}
	var cmd tea.Cmd
	u.input, cmd = u.input.Update(msg)
	return cmd
}

func (u *planUI) promptLine() string {
	switch u.mode {
	case promptKey:
		return "approve with SSH private key (unencrypted OpenSSH): " + u.input.View() + "  enter sign · esc cancel"
	case promptAuthorKey:
		return "sign as the plan's author with SSH private key: " + u.input.View() + "  enter sign · esc cancel"
	}
	return "type the first 8 digits of the plan hash to execute: " + u.input.View() + "  enter run · esc cancel"
}

// signedMsg is the outcome of a signature made at a plan page's prompt
// (an approval, or the author's) and the plan's status (S: PlanStatus or
// QueuePlanStatus) read after it.
type signedMsg[S any] struct {
	ok     *Approved
	author bool
	st     *S
	err    error // nothing was stored
	stErr  error // stored, but the status could not be read after
}

// signPlan signs the plan hash in role with the SSH key at path; verb
// starts the error for a key that cannot be read ("approve: …").
func signPlan(path string, subj approval.Subject, role approval.Role, verb string) (approval.Signature, error) {
	signer, err := approval.LoadSigner(expandHome(path))
	if err != nil {
		return approval.Signature{}, errors.New(verb + ": " + strings.TrimPrefix(err.Error(), "--key: "))
	}
	return approval.Sign(subj, signer, role, time.Now())
}

// showSigned says in place what a signature did and takes the status read
// after it.
func showSigned[S any](u *planUI, m signedMsg[S], setStatus func(S)) {
	u.busy = ""
	if m.err != nil {
		u.note, u.noteBad = m.err.Error(), true
		return
	}
	who := m.ok.Principal
	if who == "" {
		who = "(no allowed_signers configured)"
	}
	u.note, u.noteBad = fmt.Sprintf("approval stored: signed as %s (%s)", sanitize.Text(who), m.ok.Fingerprint), false
	if m.author {
		u.note = "signed as the plan's author with " + m.ok.Fingerprint + " (your key never counts as an approval)"
	}
	if m.st != nil {
		setStatus(*m.st)
	} else if m.stErr != nil {
		u.statusErr = m.stErr.Error()
	}
}

// runControl is what the keys of a running plan do.
type runControl struct {
	pause, cancel func()
	// line is the action line while the plan sends, quit the note for q
	// then (the run keeps going), leave what esc, pressed twice, returns.
	line, quit string
	leave      func() tea.Cmd
	// watching: everything is sent and only the re-failure watch is left
	// (Kafka; the RabbitMQ console runs no watch).
	watching bool
}

// What the keys do while only the re-failure watch is left, said the way
// they work: c and esc stop the watch at once and show the result (as
// enter and ctrl+c do in the CLI); p has nothing left to pause; q does not
// quit under a running watch, it says how (ctrl+c quits at once). What was
// sent stays sent whatever is pressed.
const (
	watchLine = "c or esc stop the re-failure watch (what was sent stays sent) · ctrl+c quits"
	watchNote = "everything is sent, only the re-failure watch runs: c or esc stops it and shows the result, ctrl+c quits at once (what was sent stays sent)"
)

// runningLine is the action line while a plan runs.
func (c runControl) runningLine() string {
	if c.watching {
		return watchLine
	}
	return c.line
}

// runKey handles the keys of a plan executing; done is false for keys it
// leaves to the table.
func (u *planUI) runKey(msg tea.KeyMsg, c runControl) (tea.Cmd, bool) {
	leaving := u.leaving
	u.leaving = false
	if c.watching {
		switch msg.String() {
		case "c", "esc":
			c.cancel()
			return nil, true
		case "p", "q":
			u.note, u.noteBad = watchNote, false
			return nil, true
		}
		return nil, false
	}
	switch msg.String() {
	case "p":
		c.pause()
		return nil, true
	case "c":
		c.cancel()
		return nil, true
	case "q":
		u.note, u.noteBad = c.quit, true
		return nil, true
	case "esc":
		if !leaving {
			u.leaving = true
			u.note, u.noteBad = "the execution keeps running if you leave: esc again to leave it in the background (:plans shows it), c to cancel", false
			return nil, true
		}
		u.note = ""
		return c.leave(), true
	}
	return nil, false
}

// runOver drops the questions about a run that has ended (the "esc again
// to leave it running" prompt, "the plan is executing", the watch's keys)
// before the page shows how it ended.
func (u *planUI) runOver() {
	if u.leaving || strings.HasPrefix(u.note, "the plan is executing") || u.note == watchNote {
		u.note = ""
	}
	u.leaving = false
}

// leaveRunning goes back, leaving the execution of the plan hash running.
func leaveRunning(hash string, notify tea.Cmd) tea.Cmd {
	return tea.Batch(tui.Back(), tui.Flash(tui.Info, "redrive "+hash[:12]+" continues in the background; :plans shows its progress"), notify)
}

// actionLine says which actions are available, or why not; running is
// the line while the plan executes ("" when it does not).
func (u *planUI) actionLine(running string, disabled func(string) string, offerSign bool) string {
	if u.busy != "" {
		return u.busy
	}
	if running != "" {
		return running
	}
	parts := []string{}
	for _, a := range []struct{ key, name string }{{"a", "a approve"}, {"X", "X execute"}} {
		if why := disabled(a.key); why == "" {
			parts = append(parts, a.name)
		} else {
			parts = append(parts, a.name+": disabled ("+sanitize.Text(why)+")")
		}
	}
	if offerSign && disabled("S") == "" {
		parts = append(parts, "S sign as its author (review needs the author's signature)")
	}
	return strings.Join(parts, " · ")
}

// barLine is the progress bar of an execution after label ("executing "),
// at the percentage its counts show (0 before the total is known).
func (u *planUI) barLine(label string, pr actions.Progress) string {
	pct := 0
	if pr.Total > 0 {
		pct = pr.Percent()
	}
	return label + u.bar.ViewAs(float64(pct)/100) + fmt.Sprintf(" %3d%%", pct)
}

// sendingLines are both brokers' plan pages' lines while a run sends: the
// bar and the counts of `berth redrive execute`'s progress line
// (actions.Progress.Counts), so the console and the CLI count the same run
// the same, then state. Before the run's first report they say what it
// does first (starting) instead, with state when held (paused, cancelling):
// 0/0 would read as done.
func (u *planUI) sendingLines(starting string, pr actions.Progress, state string, held bool) []string {
	if pr.Total == 0 {
		if held {
			starting += " · " + state
		}
		return []string{starting}
	}
	return []string{u.barLine("executing ", pr), pr.Counts() + " · " + state}
}

// firstThree is the lines of the first three of n items (line(i)), then
// how many more there are (more, a format with %d): the header keeps the
// table on screen.
func firstThree(n int, line func(i int) string, more string) []string {
	var out []string
	for i := range n {
		if i == 3 {
			out = append(out, fmt.Sprintf(more, n-i))
			break
		}
		out = append(out, line(i))
	}
	return out
}

// tail is the end of a plan page's header: actions, the run, the note and
// the prompt.
func (u *planUI) tail(action string, run []string) []string {
	out := append([]string{action}, run...)
	if u.note != "" {
		out = append(out, u.level(u.noteLevel()).Render(sanitize.Text(u.note)))
	}
	if u.mode != promptNone {
		out = append(out, u.promptLine())
	}
	return out
}

// signatureLines lists the signatures over a plan, one a line (a count on
// a short terminal).
func signatureLines(sigs []SignatureInfo, compact bool) []string {
	var out []string
	for i, s := range sigs {
		if compact {
			return []string{fmt.Sprintf("  %d signature(s) (a taller terminal lists them)", len(sigs))}
		}
		if i == maxSignatureLines {
			out = append(out, fmt.Sprintf("  … and %d more signature(s)", len(sigs)-i))
			break
		}
		out = append(out, signatureLine(s))
	}
	if len(sigs) == 0 {
		out = append(out, "  no signatures")
	}
	return out
}

// stateLevel colours a plan's state in the plans lists.
func stateLevel(state string) styles.Level {
	switch {
	case state == "done":
		return styles.Good
	case state == "blocked" || state == "error":
		return styles.Bad
	case state == "expired":
		return styles.Dim
	case state == "pending approval" || strings.HasPrefix(state, "partial"):
		return styles.Warn
	}
	return styles.Normal
}

// changes is an execution's change signal: every update bumps the version
// and wakes whoever waits for the next change.
type changes struct {
	mu        sync.Mutex
	version   uint64
	changed   chan struct{}
	notifying bool
}

func newChanges() changes { return changes{changed: make(chan struct{})} }

// update changes the state under the lock and wakes every listener.
func (c *changes) update(fn func()) {
	c.mu.Lock()
	fn()
	c.version++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// waitChange blocks until the version differs from seen or done (called
// under the lock) holds.
func (c *changes) waitChange(seen uint64, done func() bool) {
	c.mu.Lock()
	for c.version == seen && !done() {
		ch := c.changed
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	c.mu.Unlock()
}

// waitDone blocks until done holds.
func (c *changes) waitDone(done func() bool) {
	for {
		c.mu.Lock()
		v, d := c.version, done()
		c.mu.Unlock()
		if d {
			return
		}
		c.waitChange(v, done)
	}
}

// firstNotifier reports whether this is the first call (only one status
// line notice per run).
func (c *changes) firstNotifier() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.notifying
	c.notifying = true
	return first
}

// notifyWhenDone returns a command that waits until the run is done
// (done is called under the lock) and then shows flash, its result, in
// the status line whichever page is open (a flash is handled by the app,
// not routed to a page). Only the first caller gets one: leaving the plan
// page twice does not flash twice.
func (c *changes) notifyWhenDone(done func() bool, flash func() tui.FlashMsg) tea.Cmd {
	if !c.firstNotifier() {
		return nil
	}
	return func() tea.Msg {
		c.waitDone(done)
		return flash()
	}
}

// The status line flashes at the end of a run of plan hash.
func refusedFlash(hash, reason string) tui.FlashMsg {
	return tui.FlashMsg{Level: tui.Error, Text: "redrive " + hash[:12] + " refused: " + reason}
}

// stoppedFlash: counts is what the run did ("sent 3, failed 1"), err why
// it stopped, if it did.
func stoppedFlash(hash, counts string, err error) tui.FlashMsg {
	text := "redrive " + hash[:12] + " stopped: " + counts
	if err != nil {
		text += ": " + err.Error()
	}
	return tui.FlashMsg{Level: tui.Error, Text: text}
}

func endedFlash(hash string, cancelled bool, sent, skipped int) tui.FlashMsg {
	state := "finished"
	if cancelled {
		state = "cancelled"
	}
	return tui.FlashMsg{Level: tui.Info, Text: fmt.Sprintf("redrive %s %s: sent %d, skipped %d, failed 0", hash[:12], state, sent, skipped)}
}

// runStateText is an executing plan's state in the plans lists: done of
// total settled.
func runStateText(cancelling, paused bool, done, total int) string {
	pct := 0
	if total > 0 {
		pct = done * 100 / total
	}
	switch {
	case cancelling:
		return fmt.Sprintf("cancelling %d%%", pct)
	case paused:
		return fmt.Sprintf("paused %d%%", pct)
	}
	return fmt.Sprintf("executing %d%%", pct)
}

// registry holds the executions started in this console, by plan hash
// (Kafka and RabbitMQ runs each have one): a finished run stays until the
// same plan is run again, so reopening the plan shows its result.
type registry[R interface{ finished() bool }] struct {
	mu sync.Mutex
	m  map[string]R
}

func newRegistry[R interface{ finished() bool }]() *registry[R] {
	return &registry[R]{m: map[string]R{}}
}

func (g *registry[R]) get(hash string) R {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[hash]
}

// start registers a run made by fresh for hash unless one is still going
// (then it returns that one and false).
func (g *registry[R]) start(hash string, fresh func() R) (R, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.m[hash]; ok && !r.finished() {
		return r, false
	}
	r := fresh()
	g.m[hash] = r
	return r, true
}

// planListBindings are the keys of both plans lists.
var planListBindings = []key.Binding{keyOpen, keyApprove, keyExecute, keyReload}

// planListKey handles a key on a plans list: enter opens the selected plan
// (a or X open it and start that action once its status is read: open
// gets the plan's hash and "", "a" or "X"), u reloads the list; done is
// false for keys it leaves to the table.
func (t *tablePage) planListKey(msg tea.KeyMsg, reload func() tea.Cmd, open func(hash, action string) tea.Cmd) (tea.Cmd, bool) {
	action := ""
	switch {
	case key.Matches(msg, keyApprove):
		action = "a"
	case key.Matches(msg, keyExecute):
		action = "X"
	default:
		return t.listKey(msg, reload, func(hash string) tea.Cmd { return open(hash, "") })
	}
	return t.onSelected(func(hash string) tea.Cmd { return open(hash, action) }), true
}

// planPageBase is what both plan pages embed: the verdict table below a
// header that grows and shrinks (approvals, the run, a prompt), the
// check that makes the plan (loading, its error), and the actions.
type planPageBase struct {
	loadingPage
	planUI
}

// newPlanPageBase starts a plan page with its table of verdicts, sized to
// the console (no header yet: the plan is not made or read).
func newPlanPageBase(env tui.PageEnv, verdicts table.Model) planPageBase {
	b := planPageBase{loadingPage: loadingPage{tablePage: tablePage{env: env, tbl: verdicts}}, planUI: newPlanUI(env)}
	if env.Size != nil {
		b.w, b.h = env.Size()
		b.fit(nil)
	}
	return b
}

func (p *planPageBase) KeyBindings() []key.Binding {
	return p.bindings(keyApprove, keyExecute, keySign, keyPause, keyCancel, keyStatus)
}

// capturesKey takes every key while a prompt is open, and the execution's
// keys (c would otherwise open consumer groups, esc and q would leave it
// behind unasked) while the plan executes.
func (p *planPageBase) capturesKey(msg tea.KeyMsg, running bool) bool {
	if p.mode != promptNone {
		return true
	}
	if running {
		switch msg.String() {
		case "c", "p", "esc", "q":
			return true
		}
	}
	return p.tbl.CapturesKey(msg)
}

// takeCommon takes the messages both plan pages take the same way (a new
// size: the deferred layout fits the table; the check that failed; the
// status that could not be read); false for the others.
func (p *planPageBase) takeCommon(msg tea.Msg) bool {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.w, p.h = msg.Width, msg.Height
	case errMsg:
		p.loading, p.err = false, msg.err.Error()
	case statusErrMsg:
		p.statusFailed(msg.err)
	default:
		return false
	}
	return true
}

// runAttached notes an execution that has started, or (fresh false) was
// running in this console already.
func (u *planUI) runAttached(fresh bool) {
	u.busy = ""
	if !fresh {
		u.note, u.noteBad = "this plan is already executing in this console", false
	}
}

// planTitle is the plan's hash once it is made, its DLQ before.
func planTitle(hash, dlq string) string {
	if hash != "" {
		return "plan " + hash[:12]
	}
	return "plan " + sanitize.Text(dlq)
}

// fit gives the table the lines the header (head) leaves.
func (p *planPageBase) fit(head []string) {
	p.above = len(head)
	p.setSize(p.w, p.h)
	p.layoutUI(p.w)
}

// fitHead is the header above the table, built by full. On a short
// terminal the details go first (class counts, the policy when made, one
// line per signature), so the decision, the actions, the run and any
// prompt stay on screen.
func (p *planPageBase) fitHead(full func(compact bool) []string) []string {
	if h := full(false); len(h) <= p.h-4 || p.h == 0 {
		return h
	}
	return full(true)
}

// renderPlan is the page: what the check is doing while it runs, why it
// failed, or the header (once the plan is made) over the table.
func (p *planPageBase) renderPlan(checking func() []string, made bool, head func() []string) string {
	switch {
	case p.loading:
		return body(checking(), p.w, p.h)
	case p.err != "":
		return body([]string{"cannot plan: " + sanitize.Text(p.err)}, p.w, p.h)
	case !made:
		return body(nil, p.w, p.h)
	}
	return p.render(head()...)
}

// planKeyPage is what a plan page does with the keys planKey handles.
type planKeyPage interface {
	planHash() string // "" until the plan is made
	signCmd(path string, author bool) tea.Cmd
	executeCmd() tea.Cmd
	running() bool
	runKey(tea.KeyMsg) (tea.Cmd, bool) // the keys of a running plan
	action(a string) tea.Cmd           // a, X or S
	reloadStatus() tea.Cmd             // u
}

// planKey handles a key on plan page p: the open prompt, the keys of a
// running plan, then a, X, S and u; done is false for keys it leaves to
// the table.
func (p *planPageBase) planKey(msg tea.KeyMsg, page planKeyPage) (tea.Cmd, bool) {
	if p.mode != promptNone {
		return p.promptKey(msg, page.planHash(), page.signCmd, page.executeCmd), true
	}
	if page.running() {
		if cmd, done := page.runKey(msg); done {
			return cmd, true
		}
	}
	if p.tbl.Filtering() {
		return nil, false
	}
	switch {
	case key.Matches(msg, keyApprove):
		return page.action("a"), true
	case key.Matches(msg, keyExecute):
		return page.action("X"), true
	case key.Matches(msg, keySign):
		return page.action("S"), true
	case key.Matches(msg, keyStatus):
		return page.reloadStatus(), true
	}
	return nil, false
}
