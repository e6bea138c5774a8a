// Package offsets is the console's offset-reset dialog: pick a mode and a
// scope, see the same dry-run table `berth offsets reset` prints, type the
// group's name to execute, and see the result or the refusal in place. It
// opens with R on a group (tui.RegisterAction, scope "group").
//
// The dialog never does I/O in Update: planning and executing run through
// env.Do, and the action (internal/actions.Resetter) enforces read-only,
// the active-member gate, the effects guard, compare-then-commit and the
// audit log exactly as it does for the CLI.
package offsets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/actions"
	reset "github.com/berth-dev/berth/internal/offsets"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/components/textfield"
)

// ResetterOpener builds the reset action (internal/actions.Resetter) for
// the console's attached cluster. The program that builds the console (it
// knows the backend, the audit file and the policies) hands it in as
// PageEnv.Services[ServiceName]; without one, or when it fails, the dialog
// says so and offers nothing.
type ResetterOpener = func(c backends.Cluster, env tui.PageEnv) (*actions.Resetter, error)

// ServiceName is this package's entry in PageEnv.Services.
const ServiceName = "offsets.reset"

func init() {
	tui.RegisterAction(tui.Action{
		Scope: "group",
		Key:   key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "reset offsets")),
		// Not Mutates: the dialog's dry run is useful in a read-only context;
		// the dialog disables execute there and the action refuses anyway.
		Mutates: false,
		Open:    func(env tui.PageEnv, group string) tui.Page { return New(env, group) },
	})
}

type step int

const (
	stepForm      step = iota // choosing mode, value and scope
	stepPlanning              // dry run in flight
	stepPlan                  // dry run shown
	stepConfirm               // typing the group's name
	stepExecuting             // execute in flight
	stepDone                  // result or refusal shown
)

// field is the focused form field.
type field int

const (
	fieldMode field = iota
	fieldValue
	fieldScope
	numFields
)

// Dialog is the reset dialog page.
type Dialog struct {
	env   tui.PageEnv
	group string

	step  step
	focus field
	mode  int // index into reset.Modes
	value string
	scope string

	formErr string
	req     actions.ResetRequest // the request behind plan (to dry-run it again)
	plan    *reset.Plan
	planErr string
	scroll  int

	confirm        string
	confirmEffects bool

	result  *actions.ResetResult
	execErr string

	// seq numbers requests so a result from an abandoned request (the user
	// edited the form meanwhile) is ignored.
	seq           int
	width, height int
}

var _ tui.Page = (*Dialog)(nil)
var _ tui.InputCapturer = (*Dialog)(nil)

// New opens the dialog for group.
func New(env tui.PageEnv, group string) *Dialog {
	d := &Dialog{env: env, group: group, scope: "all", width: 80, height: 24}
	if env.Size != nil {
		if w, h := env.Size(); w > 0 && h > 0 {
			d.width, d.height = w, h
		}
	}
	return d
}

// planMsg and execMsg carry results back from env.Do.
type planMsg struct {
	seq  int
	plan reset.Plan
	err  error
}

type execMsg struct {
	seq int
	res actions.ResetResult
	err error
}

func (d *Dialog) Init() tea.Cmd { return nil }

func (d *Dialog) Title() string { return "reset offsets " + sanitize.Text(d.group) }

func (d *Dialog) KeyBindings() []key.Binding {
	switch d.step {
	case stepForm:
		return []key.Binding{
			key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "dry run")),
			key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next field")),
			key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "mode")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close")),
		}
	case stepPlan:
		if d.refusal() != "" {
			return []key.Binding{
				key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "dry run again")),
				key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "edit")),
			}
		}
		ks := []key.Binding{key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "execute…"))}
		if d.plan != nil && d.plan.NeedsEffectsConfirmation() {
			ks = append(ks, key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "confirm replay effects")))
		}
		return append(ks, key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "edit")))
	case stepConfirm:
		return []key.Binding{
			key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "execute")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
		}
	default:
		return []key.Binding{key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "close"))}
	}
}

// CapturesKey reports that the dialog is modal while a form or the confirmation takes
// text, and while a plan is shown (esc returns to the form there).
func (d *Dialog) CapturesKey(msg tea.KeyMsg) bool {
	return d.step != stepDone || msg.String() == "esc"
}

func (d *Dialog) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		d.width, d.height = msg.Width, msg.Height
	case planMsg:
		if msg.seq != d.seq || d.step != stepPlanning {
			return d, nil
		}
		if msg.err != nil {
			d.step, d.planErr = stepForm, sanitize.Text(msg.err.Error())
			return d, nil
		}
		p := msg.plan
		d.plan, d.planErr, d.step, d.scroll, d.confirmEffects = &p, "", stepPlan, 0, false
	case execMsg:
		if msg.seq != d.seq || d.step != stepExecuting {
			return d, nil
		}
		d.step = stepDone
		res := msg.res
		d.result = &res
		if msg.err != nil {
			d.execErr = sanitize.Text(msg.err.Error())
		}
	case tea.KeyMsg:
		return d.key(msg)
	}
	return d, nil
}

func (d *Dialog) key(msg tea.KeyMsg) (tui.Page, tea.Cmd) {
	k := msg.String()
	switch d.step {
	case stepForm:
		return d.formKey(msg)
	case stepPlanning, stepExecuting:
		if k == "esc" && d.step == stepPlanning {
			d.seq++ // abandon: its result will be ignored
			d.step = stepForm
		}
	case stepPlan:
		switch k {
		case "esc", "backspace":
			d.step = stepForm
		case "up", "k":
			d.scroll = max(d.scroll-1, 0)
		case "down", "j":
			d.scroll++
		case "e":
			if d.plan.NeedsEffectsConfirmation() {
				d.confirmEffects = !d.confirmEffects
			}
		case "enter", "x":
			if d.refusal() != "" {
				// Refuse before asking for the group's name; enter checks
				// again (the consumers may have been stopped since).
				if k == "enter" {
					return d, d.planCmd(d.req)
				}
				return d, nil
			}
			if d.env.ReadOnly {
				return d, nil // shown as disabled; the action would refuse too
			}
			d.step, d.confirm = stepConfirm, ""
		}
	case stepConfirm:
		switch msg.Type {
		case tea.KeyEsc:
			d.step = stepPlan
		case tea.KeyEnter:
			if d.confirm != d.group {
				return d, nil
			}
			return d, d.execute()
		default:
			d.confirm, _ = textfield.Edit(d.confirm, msg)
		}
	case stepDone:
		switch k {
		case "esc":
			return d, tui.Back()
		case "n":
			d.step, d.result, d.execErr, d.plan = stepForm, nil, "", nil
		}
	}
	return d, nil
}

func (d *Dialog) formKey(msg tea.KeyMsg) (tui.Page, tea.Cmd) {
	switch msg.Type {
	case tea.KeyEsc:
		return d, tui.Back()
	case tea.KeyTab, tea.KeyDown:
		d.focus = (d.focus + 1) % numFields
		if d.focus == fieldValue && !needsValue(d.currentMode()) {
			d.focus++
		}
		return d, nil
	case tea.KeyShiftTab, tea.KeyUp:
		d.focus = (d.focus + numFields - 1) % numFields
		if d.focus == fieldValue && !needsValue(d.currentMode()) {
			d.focus--
		}
		return d, nil
	case tea.KeyEnter:
		req, err := d.request()
		if err != nil {
			d.formErr = err.Error()
			return d, nil
		}
		d.formErr, d.planErr = "", ""
		return d, d.planCmd(req)
	}
	// The arrows change the mode from any field (the text fields have no
	// cursor to move); h, l and space do too while the mode is focused.
	k := msg.String()
	if k == "left" || k == "right" || (d.focus == fieldMode && (k == "h" || k == "l" || k == " ")) {
		if k == "left" || k == "h" {
			d.mode = (d.mode + len(reset.Modes) - 1) % len(reset.Modes)
		} else {
			d.mode = (d.mode + 1) % len(reset.Modes)
		}
		d.value, d.formErr = "", ""
		if d.focus == fieldValue && !needsValue(d.currentMode()) {
			d.focus = fieldScope
		}
		return d, nil
	}
	if d.focus == fieldMode {
		return d, nil
	}
	target := &d.scope
	if d.focus == fieldValue {
		target = &d.value
	}
	*target, _ = textfield.Edit(*target, msg)
	return d, nil
}

// refusal is why the dry run shown cannot be executed, known before the
// confirmation is asked for ("" when it can): Kafka alters only an inactive
// group's offsets. The action checks again when executing.
func (d *Dialog) refusal() string {
	if d.plan == nil || len(d.plan.Members) == 0 {
		return ""
	}
	return (&actions.ActiveError{Group: d.plan.Group, State: d.plan.GroupState, Members: d.plan.Members}).Error()
}

func (d *Dialog) currentMode() reset.Mode { return reset.Modes[d.mode] }

func needsValue(m reset.Mode) bool {
	switch m {
	case reset.ToEarliest, reset.ToLatest, reset.ToCurrent:
		return false
	}
	return true
}

// valueHint says what the value field takes for the mode.
func valueHint(m reset.Mode) string {
	switch m {
	case reset.ToOffset:
		return "offset N (clamped to the log)"
	case reset.ShiftBy:
		return "±N (e.g. -100)"
	case reset.ToDatetime:
		return "RFC 3339 time; no zone means UTC"
	case reset.ByDuration:
		return "how long ago: 15m, 2h, PT15M"
	case reset.FromGroup:
		return "the group to copy committed offsets from"
	case reset.FromFile:
		return "CSV file of topic,partition,offset lines"
	}
	return ""
}

// request validates the form (pure: no I/O; a --from-file path is read by
// the planning command).
func (d *Dialog) request() (actions.ResetRequest, error) {
	m := d.currentMode()
	spec := reset.Spec{Mode: m}
	v := strings.TrimSpace(d.value)
	if needsValue(m) && v == "" {
		return actions.ResetRequest{}, fmt.Errorf("%s needs a value: %s", m, valueHint(m))
	}
	switch m {
	case reset.ToOffset:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return actions.ResetRequest{}, fmt.Errorf("to-offset: %q is not a non-negative offset", v)
		}
		spec.Offset = n
	case reset.ShiftBy:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n == 0 {
			return actions.ResetRequest{}, fmt.Errorf("shift-by: %q is not a non-zero count (e.g. -100)", v)
		}
		spec.Shift = n
	case reset.ToDatetime:
		t, err := reset.ParseDatetime(v)
		if err != nil {
			return actions.ResetRequest{}, err
		}
		spec.Time = t
	case reset.ByDuration:
		dur, err := reset.ParseDuration(v)
		if err != nil {
			return actions.ResetRequest{}, err
		}
		spec.Duration = dur
	case reset.FromGroup:
		spec.Group = v
	case reset.FromFile:
		spec.FileName = v
	}
	scope, err := parseScope(d.scope)
	if err != nil {
		return actions.ResetRequest{}, err
	}
	if scope.Empty() && m != reset.FromFile && m != reset.FromGroup {
		return actions.ResetRequest{}, errors.New(`scope: "all" (topics the group committed) or topics: T T:0,3`)
	}
	return actions.ResetRequest{Group: d.group, Spec: spec, Scope: scope}, nil
}

// parseScope reads the scope field: "all", or space-separated T / T:0,3.
func parseScope(s string) (reset.Scope, error) {
	var sc reset.Scope
	for _, w := range strings.Fields(s) {
		if w == "all" {
			sc.AllTopics = true
			continue
		}
		ts, err := reset.ParseTopicScope(w)
		if err != nil {
			return sc, errors.New(strings.TrimPrefix(err.Error(), "--"))
		}
		sc.Topics = append(sc.Topics, ts)
	}
	if sc.AllTopics && len(sc.Topics) > 0 {
		return sc, errors.New(`scope: "all" or topics, not both`)
	}
	return sc, nil
}

func (d *Dialog) resetter(c backends.Cluster) (*actions.Resetter, error) {
	open, ok := d.env.Services[ServiceName].(ResetterOpener)
	if !ok {
		return nil, errors.New("offset resets are not available in this console")
	}
	return open(c, d.env)
}

func (d *Dialog) planCmd(req actions.ResetRequest) tea.Cmd {
	d.req = req
	d.seq++
	d.step = stepPlanning
	seq := d.seq
	return d.env.Do(func(ctx context.Context, c backends.Cluster) tea.Msg {
		r, err := d.resetter(c)
		if err != nil {
			return planMsg{seq: seq, err: err}
		}
		if req.Spec.Mode == reset.FromFile {
			f, err := os.Open(req.Spec.FileName)
			if err != nil {
				return planMsg{seq: seq, err: fmt.Errorf("from-file: %w", err)}
			}
			rows, err := reset.ParseCSV(req.Spec.FileName, f)
			f.Close()
			if err != nil {
				return planMsg{seq: seq, err: err}
			}
			req.Spec.File = rows
		}
		p, err := r.Plan(ctx, req)
		return planMsg{seq: seq, plan: p, err: err}
	})
}

func (d *Dialog) execute() tea.Cmd {
	d.seq++
	d.step = stepExecuting
	seq, plan, opts := d.seq, *d.plan, actions.ResetOptions{ConfirmReplayEffects: d.confirmEffects}
	return d.env.Do(func(ctx context.Context, c backends.Cluster) tea.Msg {
		r, err := d.resetter(c)
		if err != nil {
			return execMsg{seq: seq, err: err}
		}
		res, err := r.Execute(ctx, plan, opts)
		return execMsg{seq: seq, res: res, err: err}
	})
}

// View renders exactly d.height lines no wider than d.width.
func (d *Dialog) View() string {
	var lines []string
	add := func(s string) { lines = append(lines, s) }
	st := d.env.Styles
	title := func(s string) string {
		if st != nil {
			return st.Title.Render(s)
		}
		return s
	}
	muted := func(s string) string {
		if st != nil {
			return st.Muted.Render(s)
		}
		return s
	}
	bad := func(s string) string {
		if st != nil {
			return st.FlashError.Render(s)
		}
		return s
	}

	add(title(fmt.Sprintf("Reset offsets of group %s", sanitize.Text(d.group))) + muted("  context "+sanitize.Text(d.env.Context)))
	if d.env.ReadOnly {
		reason := d.env.ReadOnlyReason
		if reason == "" {
			reason = "read-only context"
		}
		add(bad("read-only: " + reason + " (dry run only; execute is disabled)"))
	}
	add("")
	switch d.step {
	case stepForm, stepPlanning:
		d.formView(add, muted, bad)
		if d.step == stepPlanning {
			add("")
			add(muted("Computing the dry run… (esc to cancel)"))
		}
	case stepPlan, stepConfirm, stepExecuting, stepDone:
		d.planView(add, muted, bad)
	}
	return fit(lines, d.width, d.height)
}

func (d *Dialog) formView(add func(string), muted, bad func(string) string) {
	cursor := func(f field) string {
		if d.focus == f && d.step == stepForm {
			return "▸ "
		}
		return "  "
	}
	m := d.currentMode()
	add(fmt.Sprintf("%sMode:   ‹ %s ›  %s", cursor(fieldMode), m, muted("(←/→)")))
	if needsValue(m) {
		v := sanitize.Text(d.value)
		if d.focus == fieldValue {
			v += "_"
		}
		add(fmt.Sprintf("%sValue:  %s  %s", cursor(fieldValue), v, muted(valueHint(m))))
	} else {
		add(muted("  Value:  (none for " + string(m) + ")"))
	}
	sc := sanitize.Text(d.scope)
	if d.focus == fieldScope {
		sc += "_"
	}
	add(fmt.Sprintf("%sScope:  %s  %s", cursor(fieldScope), sc, muted(`"all" = partitions the group committed; or T T:0,3`)))
	add("")
	add(muted("enter: dry run (nothing is changed)   tab: next field   esc: close"))
	if d.formErr != "" {
		add(bad(sanitize.Text(d.formErr)))
	}
	if d.planErr != "" {
		add(bad("dry run failed: " + d.planErr))
	}
}

func (d *Dialog) planView(add func(string), muted, bad func(string) string) {
	p := d.plan
	if p == nil {
		return
	}
	mode := strings.TrimSpace(p.Spec.String() + " " + p.Scope.String())
	add(fmt.Sprintf("Dry run: %s · group %s, %d member(s)", sanitize.Text(mode), sanitize.Text(p.GroupState), len(p.Members)))
	rows := [][]string{{"TOPIC", "PART", "CURRENT", "NEW", "CHANGE", "IMPACT", "CLAMPED"}}
	clamped := false
	for _, r := range p.Partitions {
		rows = append(rows, []string{sanitize.Text(r.Topic), fmt.Sprint(r.Partition), r.CurrentText(), fmt.Sprint(r.Target), r.ChangeText(), r.Impact(), r.ClampText()})
		clamped = clamped || r.Clamped
	}
	if !clamped {
		// A column of blanks would take the impact's room (at 100
		// columns its time span): CLAMPED shows when a row is clamped.
		for i := range rows {
			rows[i] = rows[i][:len(rows[i])-1]
		}
	}
	table := columns(rows, map[int]bool{1: true, 2: true, 3: true, 4: true}, d.width)
	// Footer lines below the table: totals, warnings, the step's prompt.
	var footer []string
	footer = append(footer, fmt.Sprintf("Total: replay %d record(s), skip %d record(s).", p.ReplayTotal(), p.SkipTotal()))
	for _, w := range p.Warnings {
		footer = append(footer, "WARNING: "+sanitize.Text(w))
	}
	switch d.step {
	case stepPlan:
		if why := d.refusal(); why != "" {
			// Wrapped: what to do ("stop its consumers first") ends it.
			for _, l := range strings.Split(ansi.Wrap(sanitize.Text(why), max(d.width, 20), " "), "\n") {
				footer = append(footer, bad(l))
			}
			footer = append(footer, muted("enter: dry run again   esc: edit"))
			break
		}
		if p.NeedsEffectsConfirmation() {
			box := "[ ]"
			if d.confirmEffects {
				box = "[x]"
			}
			footer = append(footer, box+" e: I confirm replaying this effect-producing group's side effects")
		}
		if d.env.ReadOnly {
			footer = append(footer, muted("execute disabled (read-only)   esc: edit"))
		} else {
			footer = append(footer, "enter: execute…   esc: edit   ↑/↓: scroll")
		}
	case stepConfirm:
		footer = append(footer, fmt.Sprintf("Type the group's name to commit exactly these offsets: %s_", sanitize.Text(d.confirm)))
		if d.confirm != "" && !strings.HasPrefix(d.group, d.confirm) {
			footer = append(footer, bad("does not match the group name"))
		}
		footer = append(footer, muted("enter: execute   esc: cancel"))
	case stepExecuting:
		footer = append(footer, muted("Executing: re-checking the group, then committing…"))
	case stepDone:
		if d.execErr != "" {
			footer = append(footer, bad("Not executed: "+d.execErr))
		} else if d.result != nil && d.result.Executed {
			v := "verified: the offsets read back match the plan"
			if !d.result.Verified {
				v = "NOT verified: " + sanitize.Text(d.result.Warning)
			}
			footer = append(footer, fmt.Sprintf("Executed: offsets committed (%s); audit entry %d.", v, d.result.AuditSeq))
		}
		footer = append(footer, muted("esc: close   n: another reset"))
	}
	// The table gets what the footer leaves; it scrolls.
	header := 3 // title, blank, dry-run line
	if d.env.ReadOnly {
		header++ // the read-only line
	}
	room := d.height - header - len(footer)
	if room < 2 {
		room = 2
	}
	body := table[1:]
	if d.scroll > len(body)-1 {
		d.scroll = max(len(body)-1, 0)
	}
	add(table[0])
	shown := body[d.scroll:]
	if len(shown) > room-1 {
		more := len(shown) - (room - 2)
		shown = append(shown[:room-2:room-2], muted(fmt.Sprintf("… %d more row(s) (↑/↓)", more)))
	}
	for _, l := range shown {
		add(l)
	}
	for _, l := range footer {
		add(l)
	}
}

// columns aligns rows (the first is the header) with two spaces between
// columns; right marks right-aligned columns (numbers). The lines fit
// width as the console's tables do (tui/components/table): a header is
// never cut (a column is never narrower than its title) and numbers stay
// whole; when the rows are wider than width, the widest text column gives
// up cells and its cells are cut with "…" (the CLI prints them whole).
// Before, the lines were laid out at their natural width and fit cut
// every line at the screen's edge, the header's last titles included.
func columns(rows [][]string, right map[int]bool, width int) []string {
	var widths, floors []int
	for ri, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths, floors = append(widths, 0), append(floors, 0)
			}
			widths[i] = max(widths[i], ansi.StringWidth(c))
			if ri == 0 {
				floors[i] = ansi.StringWidth(c)
			}
		}
	}
	// Too narrow even for the titles: the last columns drop out whole
	// (as the console's tables drop theirs) rather than show a cut title.
	for len(floors) > 1 {
		t := 2 * (len(floors) - 1)
		for _, f := range floors {
			t += f
		}
		if t <= width {
			break
		}
		floors, widths = floors[:len(floors)-1], widths[:len(widths)-1]
	}
	total := func() int {
		t := 2 * max(len(widths)-1, 0)
		for _, w := range widths {
			t += w
		}
		return t
	}
	for over := total() - width; over > 0; over = total() - width {
		wi := -1
		for i, w := range widths {
			if right[i] || w <= floors[i] {
				continue
			}
			if wi < 0 || w > widths[wi] {
				wi = i
			}
		}
		if wi < 0 {
			break // only titles and numbers left: fit cuts the row
		}
		widths[wi]-- // one cell at a time: the widest text columns shrink together
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		r = r[:min(len(r), len(widths))]
		var b strings.Builder
		for i, c := range r {
			if ansi.StringWidth(c) > widths[i] {
				c = ansi.Truncate(c, widths[i], "…")
			}
			pad := strings.Repeat(" ", widths[i]-ansi.StringWidth(c))
			if right[i] {
				b.WriteString(pad + c)
			} else if i < len(r)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
			if i < len(r)-1 {
				b.WriteString("  ")
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

// fit returns exactly h lines, each truncated to w cells.
func fit(lines []string, w, h int) string {
	if h < 1 {
		h = 1
	}
	out := make([]string, h)
	for i := 0; i < h && i < len(lines); i++ {
		out[i] = ansi.Truncate(lines[i], w, "…")
	}
	return strings.Join(out, "\n")
}
