package dlq

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/components/table"
)

// The scaffolding the Kafka and RabbitMQ dead-letter pages share: every
// page but a record's is a table with a few lines above it, and most of
// them fill it from a read off the UI goroutine. What a page shows and
// which keys it adds stay in the page; the plumbing (size, the table's
// keys, loading and the error) lives here once.

// tablePage is embedded in every page built around a table.
type tablePage struct {
	env  tui.PageEnv
	tbl  table.Model
	w, h int
	// above is how many lines the page shows above the table.
	above int
}

func newTablePage(env tui.PageEnv, above int, cols []table.Column) tablePage {
	return tablePage{env: env, above: above, tbl: table.New(cols, env.Styles)}
}

// fitToConsole sizes a new page to the console (once the table is set up:
// its sort and empty text do not depend on the size).
func (t *tablePage) fitToConsole() {
	if t.env.Size != nil {
		t.setSize(t.env.Size())
	}
}

func (t *tablePage) setSize(w, h int) { t.w, t.h = w, h; t.tbl.SetSize(w, max(h-t.above, 3)) }

func (t *tablePage) CapturesKey(msg tea.KeyMsg) bool { return t.tbl.CapturesKey(msg) }

// bindings is the page's own keys, then the table's (help lists them in
// that order), in a new slice.
func (t *tablePage) bindings(own ...key.Binding) []key.Binding {
	return append(append([]key.Binding{}, own...), t.tbl.KeyBindings()...)
}

// toTable passes a message on to the table (moves, sort, filter, clicks).
func (t *tablePage) toTable(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	t.tbl, cmd = t.tbl.Update(msg)
	return cmd
}

// update is the end of every table page's Update: a new size, the page's
// own keys (never while the table's filter is being typed: they are text
// then), and the table for the rest. keys reports done false for a key
// it leaves to the table.
func (t *tablePage) update(msg tea.Msg, keys func(tea.KeyMsg) (tea.Cmd, bool)) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		t.setSize(msg.Width, msg.Height)
	case tea.KeyMsg:
		if !t.tbl.Filtering() {
			if cmd, done := keys(msg); done {
				return cmd
			}
		}
	}
	return t.toTable(msg)
}

// render is the lines above the table, then the table, cut to the page.
func (t *tablePage) render(above ...string) string {
	return body(append(above, strings.Split(t.tbl.View(), "\n")...), t.w, t.h)
}

// route sends a command's message back to this page even while another
// page is on top (a run's progress, a tick).
func (t *tablePage) route(cmd tea.Cmd) tea.Cmd {
	if t.env.Route != nil {
		return t.env.Route(cmd)
	}
	return cmd
}

// listKey handles a key on a list page: enter opens the selected row
// (open gets its ID), u reloads; done is false for keys it leaves to the
// table.
func (t *tablePage) listKey(msg tea.KeyMsg, reload func() tea.Cmd, open func(id string) tea.Cmd) (tea.Cmd, bool) {
	switch {
	case key.Matches(msg, keyOpen):
		return t.onSelected(open), true
	case key.Matches(msg, keyReload):
		return reload(), true
	}
	return nil, false
}

// onSelected is what open does with the selected row's ID; nothing when
// the table is empty.
func (t *tablePage) onSelected(open func(id string) tea.Cmd) tea.Cmd {
	if r, ok := t.tbl.Selected(); ok {
		return open(r.ID)
	}
	return nil
}

// loadingPage is a tablePage filled by a read off the UI goroutine: it is
// loading until the read answers, then holds the read's error, if any.
type loadingPage struct {
	tablePage
	loading bool
	err     string
}

// update is tablePage.update that also takes a failed read.
func (p *loadingPage) update(msg tea.Msg, keys func(tea.KeyMsg) (tea.Cmd, bool)) tea.Cmd {
	if msg, ok := msg.(errMsg); ok {
		p.loading, p.err = false, msg.err.Error()
	}
	return p.tablePage.update(msg, keys)
}

// loaded marks the read answered, without error.
func (p *loadingPage) loaded() { p.loading, p.err = false, "" }

// listView is a list page: one status line (loading, the error, or what
// the list holds and its keys), then the table.
func (p *loadingPage) listView(loadingText, status string) string {
	switch {
	case p.loading:
		status = loadingText
	case p.err != "":
		status = "error: " + sanitize.Text(p.err)
	}
	return p.render(status)
}

// classTitle is a records or messages page's title: the DLQ and the class
// listed, or all (what the page lists) for every class.
func classTitle(dlq, class, all string) string {
	if class == "" {
		return sanitize.Text(dlq) + " · " + all
	}
	return sanitize.Text(dlq) + " · " + class
}

// picks is the selection being built on one DLQ's pages: whole classes,
// single items outside them (Kafka records by their coordinates, RabbitMQ
// messages by their event id), and whether ordering hazards may go in.
type picks[K comparable] struct {
	classes map[string]bool
	items   map[K]bool
	hazards bool
}

func newPicks[K comparable]() picks[K] {
	return picks[K]{classes: map[string]bool{}, items: map[K]bool{}}
}

// has reports whether the item k of class is selected.
func (s *picks[K]) has(class string, k K) bool { return s.classes[class] || s.items[k] }

func (s *picks[K]) toggleClass(class string) {
	if s.classes[class] {
		delete(s.classes, class)
	} else {
		s.classes[class] = true
	}
}

// toggleItem selects or unselects the item k of class. Unselecting one
// item of a selected class keeps the rest of the class (others) selected
// as single items.
func (s *picks[K]) toggleItem(class string, k K, others []K) {
	switch {
	case s.classes[class]:
		delete(s.classes, class)
		for _, o := range others {
			s.items[o] = true
		}
	case s.items[k]:
		delete(s.items, k)
	default:
		s.items[k] = true
	}
}

// line is the selection line of the classes and records pages: n
// selected (what, say "record(s)") and the ordering hazards.
func (s *picks[K]) line(n int, what string) string {
	hz := "ordering hazards excluded"
	if s.hazards {
		hz = "ordering hazards INCLUDED (H)"
	}
	return fmt.Sprintf("selected %d %s · %s · x select · p plan", n, what, hz)
}

// pickKeys is what a classes or records page does with the keys
// pickKey handles; nil for a key the page does not offer.
type pickKeys struct {
	open   func(row table.Row) tea.Cmd // enter on the selected row
	all    func() tea.Cmd              // a: every record of the DLQ
	toggle func(row table.Row)         // x on the selected row
	plan   func() tea.Cmd              // p
	reload func() tea.Cmd              // u
}

// pickKey handles a key of a classes or records page: enter, a, x, H, p
// and u; done is false for keys it leaves to the table.
func (s *picks[K]) pickKey(msg tea.KeyMsg, tbl table.Model, k pickKeys) (tea.Cmd, bool) {
	row, ok := tbl.Selected()
	switch {
	case key.Matches(msg, keyOpen):
		if ok {
			return k.open(row), true
		}
		return nil, true
	case k.all != nil && key.Matches(msg, keyAll):
		return k.all(), true
	case key.Matches(msg, keySelect):
		if ok {
			k.toggle(row)
		}
		return nil, true
	case key.Matches(msg, keyHazard):
		s.hazards = !s.hazards
		return nil, true
	case key.Matches(msg, keyPlan):
		return k.plan(), true
	case k.reload != nil && key.Matches(msg, keyReload):
		return k.reload(), true
	}
	return nil, false
}
