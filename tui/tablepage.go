package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/tui/components/table"
)

// tablePage is the shape most built-in pages share: a few header lines
// (summary, chart) above a table of rows built from the snapshot. The page
// rebuilds rows on each SnapshotMsg; the table keeps the cursor on the same
// row ID, the filter and the sort.
type tablePage struct {
	// self is the embedding page: Update returns it, so the stack keeps
	// the outer type (and its methods), not this embedded part.
	self  Page
	env   PageEnv
	title string
	tbl   table.Model
	snap  *Snapshot

	width, height int

	// rows builds the table rows from a snapshot.
	rows func(s *Snapshot) []table.Row
	// header renders lines above the table (may be nil).
	header func(s *Snapshot, width int) []string
	// headerLines is how many lines header takes at most (reserved).
	headerLines func(height int) int
	// enter opens the selected row (may be nil).
	enter func(r table.Row) tea.Cmd
	// keys are the page's own keys (beyond the table's), with handlers.
	keys []pageKey
}

// pageKey is a page-specific key with its handler; disabled keys stay in
// help with their reason, and pressing them flashes the reason.
type pageKey struct {
	binding  key.Binding
	run      func(r table.Row, ok bool) tea.Cmd
	disabled string // reason, "" when enabled
}

func (p *tablePage) Init() tea.Cmd { return nil }

func (p *tablePage) Title() string { return p.title }

func (p *tablePage) KeyBindings() []key.Binding {
	var out []key.Binding
	open := key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open"))
	if p.enter != nil {
		out = append(out, open)
	}
	for _, k := range p.keys {
		b := k.binding
		if k.disabled != "" {
			h := b.Help()
			b.SetHelp(h.Key, h.Desc+" (disabled)")
		}
		out = append(out, b)
	}
	for _, b := range p.tbl.KeyBindings() {
		if b.Help().Key == "enter" {
			continue
		}
		out = append(out, b)
	}
	return out
}

// CapturesKey lets the table's filter take typed text.
func (p *tablePage) CapturesKey(msg tea.KeyMsg) bool { return p.tbl.CapturesKey(msg) }

func (p *tablePage) Update(msg tea.Msg) (Page, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.width, p.height = msg.Width, msg.Height
		p.resize()
	case SnapshotMsg:
		p.snap = msg.Snap
		p.resize()
		if p.snap != nil {
			p.tbl.SetRows(p.rows(p.snap))
		}
	case tea.KeyMsg:
		if p.tbl.Filtering() {
			break
		}
		if p.enter != nil && msg.Type == tea.KeyEnter {
			if r, ok := p.tbl.Selected(); ok {
				return p.self, p.enter(r)
			}
			return p.self, nil
		}
		for _, k := range p.keys {
			if key.Matches(msg, k.binding) {
				if k.disabled != "" {
					return p.self, Flash(Error, k.binding.Help().Desc+": "+k.disabled)
				}
				r, ok := p.tbl.Selected()
				return p.self, k.run(r, ok)
			}
		}
	}
	var cmd tea.Cmd
	p.tbl, cmd = p.tbl.Update(msg)
	return p.self, cmd
}

func (p *tablePage) headerHeight() int {
	if p.headerLines == nil {
		return 0
	}
	return p.headerLines(p.height)
}

func (p *tablePage) resize() {
	p.tbl.SetSize(p.width, p.height-p.headerHeight())
}

func (p *tablePage) View() string {
	hh := p.headerHeight()
	var b strings.Builder
	if hh > 0 {
		var lines []string
		if p.header != nil && p.snap != nil {
			lines = p.header(p.snap, p.width)
		}
		for i := 0; i < hh; i++ {
			if i < len(lines) {
				b.WriteString(lines[i])
			}
			b.WriteByte('\n')
		}
	}
	if p.snap == nil {
		b.WriteString(p.env.Styles.Muted.Render("  waiting for the first refresh…"))
		return b.String()
	}
	b.WriteString(p.tbl.View())
	return b.String()
}

// actionKeys turns the actions registered for scope into page keys that
// open them on the selected row. A mutating action in a read-only context
// stays listed, disabled with the reason.
func actionKeys(env PageEnv, scope string) []pageKey {
	var out []pageKey
	for _, a := range env.Actions(scope) {
		a := a
		k := pageKey{binding: a.Key}
		if a.Mutates && env.ReadOnly {
			k.disabled = env.ReadOnlyReason
			if k.disabled == "" {
				k.disabled = "read-only context"
			}
		}
		k.run = func(r table.Row, ok bool) tea.Cmd {
			if !ok {
				return nil
			}
			return func() tea.Msg { return openActionMsg{action: a, target: r.ID} }
		}
		out = append(out, k)
	}
	return out
}

// openActionMsg asks the app to build and push an action's page (the app
// gives it its own environment, so its results route back to it).
type openActionMsg struct {
	action Action
	target string
}
