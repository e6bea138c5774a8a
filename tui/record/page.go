package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aymanbagabas/go-osc52/v2"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/internal/savefile"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/components/textfield"
	"github.com/berth-dev/berth/tui/styles"
)

// Loaded is what a Loader read: records to append, and whether more may
// follow (the next call reads after the last one).
type Loaded struct {
	Records []Record
	// More is set when the source may hold records after these.
	More bool
	// Note replaces the page's note ("no record at the committed offset
	// yet: the group has read everything").
	Note string
}

// Loader reads the next records of a source. It runs off the UI goroutine
// (through env.Do) and is called again, with the same closure, when the
// user steps past the last record read.
type Loader func(ctx context.Context, c backends.Cluster) (Loaded, error)

// Page is the record viewer.
type Page struct {
	env   tui.PageEnv
	title string
	recs  []Record
	cur   int // index into recs
	note  string

	load    Loader
	more    bool // load may find more records
	loading bool
	err     string

	w, h   int
	scroll int
	// view is the current record wrapped to the page width, styled: it
	// changes with the record and the width, not per keypress.
	view    []string
	viewFor struct{ cur, w int }
	// logical is the current record laid out and sanitised, before
	// wrapping: a resize re-wraps it without pretty-printing again.
	logical    []line
	logicalFor int

	saving *savePrompt
}

// savePrompt is the "save to file" line while the user types a path.
type savePrompt struct {
	path string
	raw  bool // write the payload's bytes, not the text view
}

// Keys of the viewer.
var (
	keyUp   = key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "scroll up"))
	keyDown = key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "scroll down"))
	keyPgUp = key.NewBinding(key.WithKeys("pgup", "ctrl+b", "ctrl+u"), key.WithHelp("pgup", "page up"))
	keyPgDn = key.NewBinding(key.WithKeys("pgdown", "ctrl+f", "ctrl+d", " "), key.WithHelp("pgdn/space", "page down"))
	keyHome = key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top"))
	keyEnd  = key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "bottom"))
	keyNext = key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "next record"))
	keyPrev = key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "previous record"))
	keyCopy = key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "copy (OSC 52)"))
	keySave = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "save as text"))
	keyRaw  = key.NewBinding(key.WithKeys("S"), key.WithHelp("S", "save the payload's bytes"))

	keyAccept = key.NewBinding(key.WithKeys("enter"))
	keyCancel = key.NewBinding(key.WithKeys("esc"))
)

// New shows recs, starting at recs[start]; the user steps through them
// with n and p. The breadcrumb is the record's Where, or title (sanitised
// here) while there is no record.
func New(env tui.PageEnv, title string, recs []Record, start int) *Page {
	p := &Page{env: env, title: sanitize.Text(title), recs: recs, cur: max(0, min(start, len(recs)-1))}
	if env.Size != nil {
		p.w, p.h = env.Size()
	}
	return p
}

// NewLoading shows the records load reads, off the UI goroutine; note is
// shown until the first read returns.
func NewLoading(env tui.PageEnv, title, note string, load Loader) *Page {
	p := New(env, title, nil, 0)
	p.load, p.more, p.loading, p.note = load, true, true, note
	return p
}

type loadedMsg struct {
	l   Loaded
	err error
}

func (p *Page) fetch() tea.Cmd {
	if p.load == nil || p.env.Do == nil {
		return nil
	}
	load := p.load
	p.loading = true
	return p.env.Do(func(ctx context.Context, c backends.Cluster) tea.Msg {
		l, err := load(ctx, c)
		return loadedMsg{l, err}
	})
}

func (p *Page) Init() tea.Cmd {
	if p.load != nil && len(p.recs) == 0 {
		return p.fetch()
	}
	return nil
}

func (p *Page) Title() string {
	if r, ok := p.current(); ok && r.Where != "" {
		return sanitize.Text(r.Where)
	}
	return p.title
}

func (p *Page) KeyBindings() []key.Binding {
	return []key.Binding{keyNext, keyPrev, keyCopy, keySave, keyRaw, keyDown, keyUp, keyPgDn, keyPgUp, keyHome, keyEnd}
}

// CapturesKey takes every key while a file name is being typed.
func (p *Page) CapturesKey(tea.KeyMsg) bool { return p.saving != nil }

func (p *Page) current() (Record, bool) {
	if p.cur < 0 || p.cur >= len(p.recs) {
		return Record{}, false
	}
	return p.recs[p.cur], true
}

func (p *Page) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.w, p.h = msg.Width, msg.Height
		p.clamp()
	case loadedMsg:
		p.loading = false
		if msg.err != nil {
			p.err = msg.err.Error()
			return p, nil
		}
		p.err = ""
		first := len(p.recs) == 0
		p.recs = append(p.recs, msg.l.Records...)
		p.more = msg.l.More && len(msg.l.Records) > 0
		if msg.l.Note != "" {
			p.note = msg.l.Note
		}
		if !first && len(msg.l.Records) > 0 {
			p.step(1) // the user asked for the next record
		}
	case savedMsg:
		if msg.err != nil {
			return p, tui.Flash(tui.Error, msg.err.Error())
		}
		return p, tui.Flash(tui.Info, fmt.Sprintf("saved %d bytes to %s", msg.n, sanitize.Text(msg.path)))
	case tea.KeyMsg:
		if p.saving != nil {
			return p, p.promptKey(msg)
		}
		return p, p.key(msg)
	case tea.MouseMsg:
		switch msg.Button {
		case tea.MouseButtonWheelUp:
			p.scrollBy(-3)
		case tea.MouseButtonWheelDown:
			p.scrollBy(3)
		}
	}
	return p, nil
}

func (p *Page) key(msg tea.KeyMsg) tea.Cmd {
	page := max(p.bodyHeight()-1, 1)
	switch {
	case key.Matches(msg, keyUp):
		p.scrollBy(-1)
	case key.Matches(msg, keyDown):
		p.scrollBy(1)
	case key.Matches(msg, keyPgUp):
		p.scrollBy(-page)
	case key.Matches(msg, keyPgDn):
		p.scrollBy(page)
	case key.Matches(msg, keyHome):
		p.scroll = 0
	case key.Matches(msg, keyEnd):
		p.scroll = len(p.lines())
		p.clamp()
	case key.Matches(msg, keyNext):
		if p.cur+1 < len(p.recs) {
			p.step(1)
			return nil
		}
		if p.more && !p.loading {
			return p.fetch()
		}
		if !p.loading {
			return tui.Flash(tui.Info, "no more records")
		}
	case key.Matches(msg, keyPrev):
		if p.cur > 0 {
			p.step(-1)
		}
	case key.Matches(msg, keyCopy):
		r, ok := p.current()
		if !ok {
			return nil
		}
		return copyCmd(Text(r))
	case key.Matches(msg, keySave), key.Matches(msg, keyRaw):
		r, ok := p.current()
		if !ok {
			return nil
		}
		raw := key.Matches(msg, keyRaw)
		p.saving = &savePrompt{path: defaultPath(r, raw), raw: raw}
	}
	return nil
}

func (p *Page) step(d int) {
	p.cur = max(0, min(p.cur+d, len(p.recs)-1))
	p.scroll = 0
}

// promptKey edits the file name; enter saves (off the UI goroutine).
func (p *Page) promptKey(msg tea.KeyMsg) tea.Cmd {
	s := p.saving
	switch {
	case key.Matches(msg, keyCancel):
		p.saving = nil
	case key.Matches(msg, keyAccept):
		p.saving = nil
		r, ok := p.current()
		path := strings.TrimSpace(s.path) // a pasted path's line break is not part of it
		if !ok || path == "" {
			return nil
		}
		data := []byte(Text(r))
		if s.raw {
			data = r.Value
		}
		return saveCmd(path, data)
	default:
		// The console's one line editing: backspace, ctrl+w, ctrl+u; a
		// paste is cleaned of line breaks and control characters.
		s.path, _ = textfield.Edit(s.path, msg)
	}
	return nil
}

// defaultPath is a file name in the working directory built from where the
// record is, with anything but letters, digits, dots and dashes replaced.
func defaultPath(r Record, raw bool) string {
	name := strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-':
			return c
		}
		return '-'
	}, r.Where)
	for strings.Contains(name, "--") {
		name = strings.ReplaceAll(name, "--", "-")
	}
	name = strings.Trim(name, "-.")
	if name == "" {
		name = "record"
	}
	if raw {
		return "record-" + name + ".bin"
	}
	return "record-" + name + ".txt"
}

type savedMsg struct {
	path string
	n    int
	err  error
}

// saveCmd writes data to a new file (or a device or pipe, in place): an
// existing file is never replaced. `berth records --save-value` writes
// through the same savefile.Write.
func saveCmd(path string, data []byte) tea.Cmd {
	return func() tea.Msg {
		abs, err := savefile.Write(path, data, false)
		if errors.Is(err, savefile.ErrExists) {
			return savedMsg{err: fmt.Errorf("save: %s already exists: nothing written (choose another name)", abs)}
		}
		if err != nil {
			return savedMsg{err: fmt.Errorf("save: %v", err)}
		}
		return savedMsg{path: abs, n: len(data)}
	}
}

// Terminal is where the clipboard sequence is written: the terminal the
// console runs on. Tests replace it.
var Terminal io.Writer = os.Stdout

// copyCmd puts text on the clipboard with OSC 52, which works over SSH and
// in tmux (with `set -g set-clipboard on`). The sequence is one write, so
// the terminal never sees it interleaved with a frame.
func copyCmd(text string) tea.Cmd {
	return func() tea.Msg {
		seq := osc52.New(text)
		if strings.HasPrefix(os.Getenv("TERM"), "screen") && os.Getenv("TMUX") == "" {
			seq = seq.Screen()
		}
		if _, err := io.WriteString(Terminal, seq.String()); err != nil {
			return tui.FlashMsg{Level: tui.Error, Text: "copy: " + err.Error()}
		}
		return tui.FlashMsg{Level: tui.Info, Text: fmt.Sprintf("copied %d bytes to the clipboard (OSC 52)", len(text))}
	}
}

// bodyHeight is the lines left for the record: the page less its top line
// and, while saving, the prompt line.
func (p *Page) bodyHeight() int {
	h := p.h - 1
	if p.saving != nil {
		h--
	}
	return max(h, 1)
}

func (p *Page) scrollBy(d int) {
	p.scroll += d
	p.clamp()
}

func (p *Page) clamp() {
	p.scroll = max(0, min(p.scroll, len(p.lines())-p.bodyHeight()))
}

// lines is the current record wrapped to the width, rebuilt only when the
// record or the width changes.
func (p *Page) lines() []string {
	r, ok := p.current()
	if !ok {
		return nil
	}
	if p.view != nil && p.viewFor.cur == p.cur && p.viewFor.w == p.w {
		return p.view
	}
	if p.logical == nil || p.logicalFor != p.cur {
		p.logical, p.logicalFor = r.laid, p.cur
		if p.logical == nil {
			p.logical = lines(r)
		}
	}
	st := p.env.Styles
	var out []string
	for _, l := range p.logical {
		pad := strings.Repeat(" ", l.indent)
		head := l.head
		if head != "" && st != nil {
			head = st.Label.Render(head)
		}
		avail := p.w - l.indent - ansi.StringWidth(l.head)
		for i, piece := range wrap(l.text, avail, p.w-l.indent-l.hang) {
			if st != nil {
				switch l.kind {
				case section:
					piece = st.Title.Render(piece)
				case muted:
					piece = st.Muted.Render(piece)
				}
			}
			if i == 0 {
				out = append(out, pad+head+piece)
				continue
			}
			out = append(out, pad+strings.Repeat(" ", l.hang)+piece)
		}
	}
	p.view, p.viewFor.cur, p.viewFor.w = out, p.cur, p.w
	return out
}

func (p *Page) View() string {
	var top string
	switch {
	case p.err != "":
		top = p.level(styles.Bad, "error: "+sanitize.Text(p.err))
	case len(p.recs) == 0 && p.loading:
		top = p.level(styles.Dim, "reading… "+sanitize.Text(p.note))
	case len(p.recs) == 0:
		top = p.level(styles.Dim, firstNonEmpty(sanitize.Text(p.note), "no records"))
	default:
		all := p.lines()
		n := fmt.Sprint(len(p.recs))
		if p.more {
			n += "+"
		}
		top = fmt.Sprintf("record %d of %s · lines %d-%d of %d", p.cur+1, n, min(p.scroll+1, len(all)), min(p.scroll+p.bodyHeight(), len(all)), len(all))
		if p.loading {
			top += " · reading more…"
		}
		top = p.level(styles.Dim, top+" · n/p next/previous · y copy · s save")
	}
	out := []string{top}
	all := p.lines()
	end := min(p.scroll+p.bodyHeight(), len(all))
	if p.scroll < end {
		out = append(out, all[p.scroll:end]...)
	}
	for len(out) < 1+p.bodyHeight() {
		out = append(out, "")
	}
	if s := p.saving; s != nil {
		what := "save as text to"
		if s.raw {
			what = "save the payload's bytes to"
		}
		out = append(out, p.level(styles.Accent, what+": ")+sanitize.Text(s.path)+"█"+p.level(styles.Dim, "  enter save · esc cancel"))
	}
	for i, l := range out {
		if ansi.StringWidth(l) > p.w {
			out[i] = ansi.Truncate(l, p.w, "…")
		}
	}
	return strings.Join(out[:min(len(out), max(p.h, 1))], "\n")
}

func (p *Page) level(l styles.Level, s string) string {
	if p.env.Styles == nil {
		return s
	}
	return p.env.Styles.Levels[l].Render(s)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
