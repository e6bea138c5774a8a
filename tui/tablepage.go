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

	// rows builds the table rows from a snapshot. When async is set it runs
	// in a tea.Cmd (off the UI goroutine), so it must be a pure function of
	// the snapshot: no page state may be read or written.
	rows  func(s *Snapshot) []table.Row
	async bool
	// rowsGen numbers row builds; only the newest is installed. loaded is
	// set once rows were installed (until then the table says "loading",
	// not "no rows").
	rowsGen uint64
	loaded  bool
	// onSnapshot, when set, runs on the UI goroutine for each snapshot
	// (remembered brokers) before rows are built.
	onSnapshot func(s *Snapshot)
	// extra, when set, computes page-specific data with the rows, off the
	// UI goroutine (e.g. charts); install receives it on the UI goroutine.
	extra   func(s *Snapshot, width int) any
	install func(v any)
	// header renders lines above the table (may be nil).
	header func(s *Snapshot, width int) []string
	// headerLines is how many lines header takes at most (reserved).
	headerLines func(height int) int
	// headerCache holds the header rendered for headerFor (snapshot, width):
	// it changes once per refresh, not per keypress.
	headerCache []string
	headerFor   struct {
		snap          *Snapshot
		width, height int
	}
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
		// The header may count from more than the snapshot (the broker
		// switch's down set): a SnapshotMsg redraws it even when the
		// snapshot is the same.
		p.headerCache = nil
		p.resize()
		if p.snap == nil {
			break
		}
		if p.onSnapshot != nil {
			p.onSnapshot(p.snap)
		}
		if !p.async {
			p.tbl.SetRows(p.rows(p.snap))
			p.loaded = true
			break
		}
		// Build, filter and sort the rows off the UI goroutine: a refresh
		// of 10,000 partitions must not delay the next key.
		p.rowsGen++
		gen, snap, build, extra, width := p.rowsGen, p.snap, p.rows, p.extra, p.width
		col, desc, filter := p.tbl.Params()
		cols := p.tbl.Columns()
		return p.self, p.env.Route(func() tea.Msg {
			msg := rowsMsg{gen: gen, prep: table.Prepare(cols, build(snap), col, desc, filter)}
			if extra != nil {
				msg.extra = extra(snap, width)
			}
			return msg
		})
	case rowsMsg:
		if msg.gen == p.rowsGen {
			p.tbl.SetPrepared(msg.prep)
			p.loaded = true
			if p.install != nil && msg.extra != nil {
				p.install(msg.extra)
				p.headerCache = nil
			}
		}
		return p.self, nil
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
	if mm, ok := msg.(tea.MouseMsg); ok {
		mm.Y -= len(p.headerView()) // the table starts below the header
		msg = mm
	}
	var cmd tea.Cmd
	p.tbl, cmd = p.tbl.Update(msg)
	return p.self, cmd
}

// maxHeader is the most lines the header may take at this height.
func (p *tablePage) maxHeader() int {
	if p.headerLines == nil {
		return 0
	}
	return max(0, p.headerLines(p.height))
}

// headerView returns the header for the current snapshot and size,
// rendered once per (snapshot, size) rather than per keypress.
func (p *tablePage) headerView() []string {
	hmax := p.maxHeader()
	if p.header == nil || p.snap == nil || hmax == 0 {
		return nil
	}
	if p.headerFor.snap != p.snap || p.headerFor.width != p.width || p.headerFor.height != p.height || p.headerCache == nil {
		p.headerCache = p.header(p.snap, p.width)
		p.headerFor.snap, p.headerFor.width, p.headerFor.height = p.snap, p.width, p.height
	}
	lines := p.headerCache
	if len(lines) > hmax {
		lines = lines[:hmax]
	}
	return lines
}

// resize gives the table what the header leaves.
func (p *tablePage) resize() {
	p.tbl.SetSize(p.width, p.height-len(p.headerView()))
}

func (p *tablePage) View() string {
	lines := p.headerView()
	if p.tbl.Height() != p.height-len(lines) {
		p.resize() // the header changed size since the last resize
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	switch {
	case p.snap == nil:
		b.WriteString(p.env.Styles.Muted.Render("  waiting for the first refresh…"))
		return b.String()
	case !p.loaded:
		b.WriteString(p.env.Styles.Muted.Render("  loading…"))
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

// rowsMsg carries rows built off the UI goroutine back to their page.
type rowsMsg struct {
	gen   uint64
	prep  table.Prepared
	extra any
}

// openActionMsg asks the app to build and push an action's page (the app
// gives it its own environment, so its results route back to it).
type openActionMsg struct {
	action Action
	target string
}
