// Package capacity is the console's capacity worksheet page: a form of load
// figures beside the worksheet's results, recomputed on every keystroke.
// An invalid field shows its error beside it and blanks only the results
// computed from it; nothing stale, NaN or Inf is ever shown. Prefill from a
// live topic arrives as a message (the model does no I/O): the page adapter
// (page.go) runs the measurement through the console's env.Do.
package capacity

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	engine "github.com/berth-dev/berth/capacity"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/styles"
)

// KeyMap is the worksheet's keys. Outside editing, keys behave as on every
// page (":" opens the command line, q quits); while a field is being
// edited, everything typed goes to it.
type KeyMap struct {
	Next, Prev, Edit, Prefill, TakeMeasured, ScrollUp, ScrollDown key.Binding
	// While editing.
	Done, Undo key.Binding
}

// DefaultKeyMap is the worksheet's default keys.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Next:         key.NewBinding(key.WithKeys("tab", "down", "j"), key.WithHelp("tab/↓", "next field")),
		Prev:         key.NewBinding(key.WithKeys("shift+tab", "up", "k"), key.WithHelp("shift+tab/↑", "previous field")),
		Edit:         key.NewBinding(key.WithKeys("enter", "e"), key.WithHelp("enter", "edit (or type a figure)")),
		Prefill:      key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "prefill from the topic")),
		TakeMeasured: key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "take measured over typed")),
		ScrollUp:     key.NewBinding(key.WithKeys("pgup"), key.WithHelp("pgup", "scroll results up")),
		ScrollDown:   key.NewBinding(key.WithKeys("pgdown"), key.WithHelp("pgdn", "scroll results down")),
		Done:         key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "keep (topic: prefill)")),
		Undo:         key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "undo the edit")),
	}
}

// MeasuredMsg carries a prefill measurement (or its failure) back to the
// model. Gen ties it to the request; an older one is ignored.
type MeasuredMsg struct {
	Gen int
	M   engine.Measurement
	Err error
}

// MeasureFunc starts a measurement of topic ("" or "*" for all topics) and
// returns the command whose message is a MeasuredMsg carrying gen.
type MeasureFunc func(topic string, gen int) tea.Cmd

// topicRow is the focus index of the "prefill from topic" field, after the
// worksheet's fields.
const topicRow = int(engine.NumFields)

// Model is the worksheet page's state.
type Model struct {
	st      *styles.Styles
	keys    KeyMap
	inputs  [engine.NumFields]textinput.Model
	topic   textinput.Model
	focus   int
	ws      engine.Worksheet
	measure MeasureFunc // nil: no cluster attached, prefill unavailable

	measured [engine.NumFields]bool
	// typed marks figures the planner typed: a prefill never overwrites
	// them; it offers its figure instead (offer), taken with a.
	typed     [engine.NumFields]bool
	offer     [engine.NumFields]string
	source    string // where measured values came from
	measuring bool
	gen       int
	status    string // the last measurement's outcome
	statusBad bool

	// editing is set while the focused field takes every key; before is
	// its text when editing started (esc restores it).
	editing bool
	before  string
	// marks are the field's typed/measured/offer marks when editing
	// started, restored with its text by esc.
	marks struct {
		typed, measured bool
		offer           string
	}

	width, height int
	scroll        int
}

// New builds the worksheet at the HarborCart defaults. measure may be nil.
func New(st *styles.Styles, measure MeasureFunc) Model {
	if st == nil {
		st = styles.New()
	}
	m := Model{st: st, keys: DefaultKeyMap(), measure: measure, width: 80, height: 24}
	form := engine.DefaultForm()
	for _, f := range engine.Fields() {
		m.inputs[f] = newInput(form[f])
	}
	m.topic = newInput("")
	m.topic.Placeholder = "topic, or * for all"
	m.topic.CharLimit = 249 // Kafka's topic name limit
	m.recompute()
	return m
}

func newInput(value string) textinput.Model {
	ti := textinput.New()
	ti.Prompt = ""
	ti.CharLimit = 40
	ti.Width = inputW - 1
	ti.Cursor.SetMode(cursor.CursorStatic) // no blink timers: a form, not an animation
	ti.SetValue(value)
	return ti
}

// Init has nothing to start.
func (m Model) Init() tea.Cmd { return nil }

// SetSize sets the body size the view renders into.
func (m *Model) SetSize(width, height int) {
	m.width, m.height = max(width, 1), max(height, 1)
	m.clampScroll()
}

// Form is the text currently in the fields.
func (m Model) Form() engine.Form {
	var f engine.Form
	for _, fd := range engine.Fields() {
		f[fd] = m.inputs[fd].Value()
	}
	return f
}

// Worksheet is the worksheet computed from the current text.
func (m Model) Worksheet() engine.Worksheet { return m.ws }

// Measured reports whether field f holds a measured (not typed) value.
func (m Model) Measured(f engine.Field) bool { return m.measured[f] }

// Focused is the focused field, or NumFields for the topic field.
func (m Model) Focused() engine.Field { return engine.Field(m.focus) }

// SetTopic puts a topic in the prefill field.
func (m *Model) SetTopic(topic string) { m.topic.SetValue(topic) }

// Editing reports whether the focused field is being edited.
func (m Model) Editing() bool { return m.editing }

// Offer is the measured figure a prefill offered for f instead of
// overwriting what the planner typed ("" when none).
func (m Model) Offer(f engine.Field) string { return m.offer[f] }

// Measuring reports whether a prefill is running.
func (m Model) Measuring() bool { return m.measuring }

func (m *Model) recompute() { m.ws = m.Form().Worksheet() }

// StartMeasure asks for a prefill from the topic field's topic; nil when
// there is no cluster or one is already running.
func (m *Model) StartMeasure() tea.Cmd {
	if m.measure == nil {
		m.status, m.statusBad = "prefill needs an attached Kafka cluster", true
		return nil
	}
	if m.measuring {
		return nil
	}
	topic := strings.TrimSpace(m.topic.Value())
	if topic == "" {
		m.status, m.statusBad = "type a topic (or * for all topics) to prefill from", true
		return nil
	}
	m.gen++
	m.measuring = true
	m.status, m.statusBad = "measuring "+sanitize.Text(topic)+"…", false
	return m.measure(topic, m.gen)
}

// Update handles keys, sizes and measurement results.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.SetSize(msg.Width, msg.Height)
		return m, nil
	case MeasuredMsg:
		return m.applyMeasurement(msg), nil
	case tea.KeyMsg:
		return m.handleKey(msg)
	}
	return m, nil
}

func (m Model) handleKey(msg tea.KeyMsg) (Model, tea.Cmd) {
	if m.editing {
		return m.editKey(msg)
	}
	switch {
	case key.Matches(msg, m.keys.Next):
		m.focus = (m.focus + 1) % (topicRow + 1)
	case key.Matches(msg, m.keys.Prev):
		m.focus = (m.focus + topicRow) % (topicRow + 1)
	case key.Matches(msg, m.keys.Edit):
		m.startEdit(false)
	case msg.Type == tea.KeyCtrlU:
		m.startEdit(true)
	case msg.Paste:
		// Pasted text replaces the focused field's, as a typed figure does.
		m.startEdit(true)
		return m.editKey(msg)
	case m.focus < topicRow && startsValue(msg):
		// Typing a figure over the focused one, as in a spreadsheet.
		m.startEdit(true)
		return m.editKey(msg)
	case key.Matches(msg, m.keys.Prefill):
		return m, m.StartMeasure()
	case key.Matches(msg, m.keys.TakeMeasured):
		m.takeMeasured()
	case key.Matches(msg, m.keys.ScrollDown):
		m.scroll += max(1, m.resultsHeight()-1)
		m.clampScroll()
	case key.Matches(msg, m.keys.ScrollUp):
		m.scroll -= max(1, m.resultsHeight()-1)
		m.clampScroll()
	}
	return m, nil
}

// startsValue reports whether msg is a character a figure begins with.
func startsValue(msg tea.KeyMsg) bool {
	if msg.Type != tea.KeyRunes || len(msg.Runes) != 1 || msg.Alt || msg.Paste {
		return false
	}
	r := msg.Runes[0]
	return r >= '0' && r <= '9' || r == '.'
}

// input is the focused text field.
func (m *Model) input() *textinput.Model {
	if m.focus == topicRow {
		return &m.topic
	}
	return &m.inputs[m.focus]
}

// startEdit makes the focused field take every key; clear empties it first.
func (m *Model) startEdit(clear bool) {
	in := m.input()
	m.editing, m.before = true, in.Value()
	if m.focus < topicRow {
		f := engine.Field(m.focus)
		m.marks.typed, m.marks.measured, m.marks.offer = m.typed[f], m.measured[f], m.offer[f]
	}
	if clear {
		in.SetValue("")
	}
	in.CursorEnd()
	in.Focus()
	m.changed()
}

// stopEdit ends editing (the text stays as typed).
func (m *Model) stopEdit() {
	m.editing = false
	m.input().Blur()
}

// editKey handles a key while the focused field is being edited.
func (m Model) editKey(msg tea.KeyMsg) (Model, tea.Cmd) {
	switch {
	case key.Matches(msg, m.keys.Undo):
		m.input().SetValue(m.before)
		if m.focus < topicRow {
			f := engine.Field(m.focus)
			m.typed[f], m.measured[f], m.offer[f] = m.marks.typed, m.marks.measured, m.marks.offer
			m.recompute()
		}
		m.stopEdit()
		return m, nil
	case key.Matches(msg, m.keys.Done):
		m.stopEdit()
		if m.focus == topicRow {
			return m, m.StartMeasure()
		}
		m.focus++
		return m, nil
	case msg.Type == tea.KeyTab || msg.Type == tea.KeyDown:
		m.stopEdit()
		m.focus = (m.focus + 1) % (topicRow + 1)
		return m, nil
	case msg.Type == tea.KeyShiftTab || msg.Type == tea.KeyUp:
		m.stopEdit()
		m.focus = (m.focus + topicRow) % (topicRow + 1)
		return m, nil
	}
	var cmd tea.Cmd
	*m.input(), cmd = m.input().Update(msg)
	m.changed()
	return m, cmd
}

// changed records an edit of the focused field: a figure that differs from
// what it was when editing started is the planner's own from now on.
func (m *Model) changed() {
	if m.focus == topicRow {
		return
	}
	f := engine.Field(m.focus)
	if m.inputs[f].Value() != m.before {
		m.typed[f], m.measured[f], m.offer[f] = true, false, ""
	}
	m.recompute()
}

// takeMeasured replaces typed figures with the ones the last prefill
// offered beside them.
func (m *Model) takeMeasured() {
	n := 0
	for _, f := range engine.Fields() {
		if m.offer[f] == "" {
			continue
		}
		m.inputs[f].SetValue(m.offer[f])
		m.offer[f], m.typed[f], m.measured[f] = "", false, true
		n++
	}
	if n == 0 {
		m.status, m.statusBad = "no measured figures are waiting (p prefills from the topic field)", false
		return
	}
	m.status, m.statusBad = fmt.Sprintf("took %d measured figure(s) from %s", n, m.source), false
	m.recompute()
}

func (m Model) applyMeasurement(msg MeasuredMsg) Model {
	if msg.Gen != m.gen || !m.measuring {
		return m // an older request's answer
	}
	m.measuring = false
	if msg.Err != nil {
		m.status, m.statusBad = "prefill failed: "+sanitize.Text(oneLine(msg.Err.Error())), true
		return m
	}
	form := m.Form()
	filled := msg.M.Prefill(&form)
	applied, kept := 0, 0
	for _, f := range filled {
		if msg.M.Window == 0 && (f == engine.AvgRate || f == engine.PeakRate) {
			continue // the rate was not measured
		}
		if m.typed[f] {
			// The planner's figure stays; the measured one is offered.
			if m.inputs[f].Value() != form[f] {
				m.offer[f] = form[f]
				kept++
			}
			continue
		}
		m.inputs[f].SetValue(form[f])
		m.measured[f], m.offer[f] = true, ""
		applied++
	}
	m.source = sanitize.Text(msg.M.Source())
	m.status, m.statusBad = fmt.Sprintf("prefilled %d fields from %s", applied, m.source), false
	if kept > 0 {
		m.status += fmt.Sprintf("; kept %d typed figure(s): measured shown beside them, a takes them", kept)
	}
	m.recompute()
	return m
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// KeyBindings are the page's own keys, for help and the status line.
func (m Model) KeyBindings() []key.Binding {
	if m.editing {
		return []key.Binding{m.keys.Done, m.keys.Undo}
	}
	return []key.Binding{m.keys.Edit, m.keys.Prefill, m.keys.TakeMeasured, m.keys.Next, m.keys.Prev, m.keys.ScrollDown, m.keys.ScrollUp}
}

// CapturesKey reports whether the page takes a key before the console's
// global keys: while a field is being edited it takes every key but ctrl+c,
// so ":" (as in 2:1), q and esc (undo) reach it; otherwise keys behave as on
// every page (":" opens the command line, q quits, esc goes back) and the
// page gets the rest. A paste is text: it goes into the focused field.
func (m Model) CapturesKey(msg tea.KeyMsg) bool {
	return (m.editing || msg.Paste) && msg.Type != tea.KeyCtrlC
}

// ---- view ----

const (
	labelW = 21 // gutter and label
	inputW = 13
	valueW = 18 // widest value: "31,200,000 events", "1,114 s (18m 34s)"
)

// formWidth leaves the results at least 40 cells where it can: the form
// needs 36 for labels, values and the mark, the rest carries units and errors.
func (m Model) formWidth() int {
	return min(max(m.width*9/20, 36), 64, m.width)
}

func (m Model) resultsHeight() int { return max(m.height-1, 1) }

func (m *Model) clampScroll() {
	n := len(m.resultLines(m.width))
	m.scroll = max(0, min(m.scroll, n-m.resultsHeight()))
}

// View renders exactly height lines of at most width cells: the form on
// the left, the results on the right, a status line at the bottom.
func (m Model) View() string {
	fw := m.formWidth()
	rw := m.width - fw - 2
	left := m.formLines(fw)
	var right []string
	if rw >= 20 {
		right = m.resultLines(rw)
		end := min(len(right), m.scroll+m.resultsHeight())
		right = right[min(m.scroll, end):end]
	}
	h := m.resultsHeight()
	lines := make([]string, 0, m.height)
	for i := range h {
		l := ""
		if i < len(left) {
			l = left[i]
		}
		l = fit(l, fw)
		if i < len(right) {
			l += "  " + fit(right[i], rw)
		}
		lines = append(lines, fit(l, m.width))
	}
	if m.height > 1 {
		lines = append(lines, fit(m.statusLine(), m.width))
	}
	return strings.Join(lines, "\n")
}

// fit cuts or pads s to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
}

func (m Model) formLines(w int) []string {
	st := m.st
	out := []string{st.Title.Render("Capacity worksheet")}
	for _, f := range engine.Fields() {
		gutter := "  "
		if m.focus == int(f) {
			gutter = "▸ "
		}
		label := fit(f.Label(), labelW-2)
		mark := " "
		switch {
		case m.ws.Errors[f] != nil:
			mark = st.Levels[styles.Bad].Render("✗")
		case m.offer[f] != "":
			mark = st.Levels[styles.Warn].Render("≠")
		case m.measured[f]:
			mark = st.Levels[styles.Accent].Render("m")
		}
		head := gutter + label
		if m.focus == int(f) {
			head = st.Selected.Render(head)
		}
		line := head + " " + fit(m.inputs[f].View(), inputW) + mark
		// What follows the value must fit whole or not at all: a unit cut
		// to "…" says nothing. The focused field's error is repeated in
		// full below the form.
		room := w - labelW - 1 - inputW - 1 - 1
		if err := m.ws.Errors[f]; err != nil {
			if room >= 10 {
				line += " " + st.Levels[styles.Bad].Render(ansi.Truncate(err.Error(), room, "…"))
			}
		} else if o := "measured " + m.offer[f]; m.offer[f] != "" && ansi.StringWidth(o) <= room {
			line += " " + st.Levels[styles.Warn].Render(o)
		} else if u := f.Unit(); u != "" && ansi.StringWidth(u) <= room {
			line += " " + st.Muted.Render(u)
		}
		out = append(out, line)
	}
	gutter := "  "
	if m.focus == topicRow {
		gutter = "▸ "
	}
	prefill := "prefill from"
	hint := "enter, then enter: prefill"
	if m.editing && m.focus == topicRow {
		hint = "enter: prefill"
	}
	if m.measure == nil {
		hint = "no cluster"
	}
	line := gutter + fit(prefill, labelW-2) + " " + fit(m.topic.View(), inputW)
	if room := w - labelW - 1 - inputW - 2; ansi.StringWidth(hint) <= room {
		line += "  " + st.Muted.Render(hint)
	}
	out = append(out, line)
	if m.source != "" {
		out = append(out, st.Muted.Render("m = "+m.source))
		for _, f := range engine.Fields() {
			if m.offer[f] != "" {
				out = append(out, st.Levels[styles.Warn].Render("≠ = typed figure kept; a takes the measured"))
				break
			}
		}
	}
	// The focused field's error in full (next to the field it may be cut).
	if m.focus < topicRow {
		f := engine.Field(m.focus)
		switch err := m.ws.Errors[f]; {
		case err != nil:
			out = append(out, st.Levels[styles.Bad].Render(f.Label()+": "+err.Error()))
		case m.offer[f] != "":
			// Wrapped: at 80 columns the figure beside the field does not fit.
			text := fmt.Sprintf("%s: typed %s, measured %s (%s); a takes it",
				f.Label(), sanitize.Text(m.inputs[f].Value()), m.offer[f], m.source)
			for _, l := range strings.Split(ansi.Wrap(text, max(w, 10), " "), "\n") {
				out = append(out, st.Levels[styles.Warn].Render(l))
			}
		default:
			out = append(out, st.Muted.Render(f.Help()))
		}
	}
	return out
}

// resultLines renders the worksheet's sections for a column w cells wide:
// label and value, plus the working when there is room. A figure computed
// from the focused field is marked "•".
func (m Model) resultLines(w int) []string {
	st := m.st
	var out []string
	focused := engine.Field(m.focus)
	lw := min(28, max(w-valueW-3, 8))
	for _, s := range bindingFirst(m.ws.Sections()) {
		out = append(out, st.Title.Render(fmt.Sprintf("%d · %s", s.Number, s.Title)))
		for _, l := range s.Lines {
			dep := " "
			if m.focus < topicRow && dependsOn(l.Output, focused) {
				dep = st.Levels[styles.Accent].Render("•")
			}
			label := fit(l.Output.Label(), lw)
			value, style := l.Value, st.Levels[styles.Normal]
			switch l.State {
			case engine.Invalid:
				value, style = "—", st.Levels[styles.Warn]
			case engine.NotApplicable:
				value, style = "n/a", st.Muted
			}
			line := dep + " " + label + " " + style.Render(padLeft(value, valueW))
			if rest := w - 2 - lw - 1 - valueW - 2; rest >= 12 {
				// The working, or why the figure is unavailable.
				why := st.Muted
				if l.State == engine.Invalid {
					why = st.Levels[styles.Warn]
				}
				line += "  " + why.Render(ansi.Truncate(l.Working, rest, "…"))
			}
			out = append(out, line)
		}
		switch {
		case s.Note != "" && s.Number == 7:
			// The binding constraint's verdict is read whole: wrapped.
			for _, l := range strings.Split(ansi.Wrap(s.Note, max(w-2, 10), " "), "\n") {
				out = append(out, "  "+st.Muted.Render(l))
			}
		case s.Note != "":
			out = append(out, "  "+st.Muted.Render(s.Note))
		}
	}
	return out
}

// bindingFirst puts the binding constraint (step 7) at the top: it is
// the answer a planner looks for, and at the bottom it was cut off.
func bindingFirst(ss []engine.Section) []engine.Section {
	out := make([]engine.Section, 0, len(ss))
	for _, s := range ss {
		if s.Number == 7 {
			out = append(out, s)
		}
	}
	for _, s := range ss {
		if s.Number != 7 {
			out = append(out, s)
		}
	}
	return out
}

func dependsOn(o engine.Output, f engine.Field) bool {
	for _, d := range o.Deps() {
		if d == f {
			return true
		}
	}
	return false
}

func padLeft(s string, w int) string {
	return strings.Repeat(" ", max(0, w-ansi.StringWidth(s))) + s
}

func (m Model) statusLine() string {
	if m.status != "" {
		if m.statusBad {
			return m.st.Levels[styles.Bad].Render(m.status)
		}
		return m.st.Levels[styles.Good].Render(m.status)
	}
	n := len(m.ws.Errors)
	if n > 0 {
		return m.st.Levels[styles.Warn].Render(fmt.Sprintf("%d invalid field(s); results that need them show —", n)) +
			m.st.Muted.Render("  ·  "+m.keysHint())
	}
	return m.st.Muted.Render(m.keysHint())
}

// keysHint is the worksheet's key line, by mode.
func (m Model) keysHint() string {
	if m.editing {
		return "editing: enter keep  esc undo  ctrl+u clear  ctrl+w erase word"
	}
	return "enter or a digit edits  tab/↑↓ move  p prefill  pgup/pgdn scroll  esc back"
}
