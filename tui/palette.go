package tui

import (
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/components/textfield"
	"github.com/berth-dev/berth/tui/keys"
	"github.com/berth-dev/berth/tui/styles"
)

// palette is the ":" command line: page names, their arguments (group and
// topic names from the latest snapshot), ctx NAME and quit, with completion.
// Arrows choose a suggestion and enter runs it; tab copies it to the line.
type palette struct {
	open      bool
	input     string
	sugg      []suggestion
	sel       int
	navigated bool // the user moved through suggestions with the arrows

	snap   *Snapshot
	keys   keys.Palette
	styles *styles.Styles
}

type suggestion struct {
	text, help string
	takesArg   bool
}

// maxSuggestions is how many suggestions are drawn above the line.
const maxSuggestions = 6

func newPalette(st *styles.Styles) palette {
	return palette{keys: keys.DefaultPalette(), styles: st}
}

func (p *palette) start(snap *Snapshot) {
	p.open, p.input, p.sel, p.navigated, p.snap = true, "", 0, false, snap
	p.suggest(nil)
}

// suggest recomputes the suggestions for the current input.
func (p *palette) suggest(contexts []string) {
	p.sugg = p.sugg[:0]
	p.sel, p.navigated = 0, false
	word, rest, hasArg := strings.Cut(p.input, " ")
	if !hasArg {
		for _, c := range commands() {
			if strings.HasPrefix(c.text, word) {
				p.sugg = append(p.sugg, c)
			}
		}
		for _, c := range commands() {
			if !strings.HasPrefix(c.text, word) && strings.Contains(c.text, word) {
				p.sugg = append(p.sugg, c)
			}
		}
		return
	}
	var cands []string
	switch word {
	case "ctx", "context":
		cands = contexts
	default:
		if spec, ok := lookupPage(word); ok && spec.Complete != nil {
			cands = spec.Complete(p.snap)
		}
	}
	rest = strings.TrimSpace(rest)
	var pre, sub []suggestion
	for _, c := range cands {
		s := suggestion{text: word + " " + c}
		switch {
		case strings.HasPrefix(c, rest):
			pre = append(pre, s)
		case strings.Contains(c, rest):
			sub = append(sub, s)
		}
	}
	p.sugg = append(append(p.sugg, pre...), sub...)
}

// commands lists every command the palette knows, sorted.
func commands() []suggestion {
	out := []suggestion{
		{text: "ctx", help: "switch context", takesArg: true},
		{text: "help", help: "keys"},
		{text: "quit", help: "leave berth"},
	}
	for _, s := range pageSpecs() {
		out = append(out, suggestion{text: s.Name, help: s.Help, takesArg: s.Complete != nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].text < out[j].text })
	return out
}

// updatePalette handles a key while the palette is open.
func (m *Model) updatePalette(msg tea.KeyMsg) tea.Cmd {
	p := &m.palette
	ctxs := m.opts.Config.ContextNames()
	switch {
	case key.Matches(msg, p.keys.Cancel):
		p.open = false
	case key.Matches(msg, p.keys.Run):
		line := strings.TrimSpace(p.input)
		if len(p.sugg) > 0 && (p.navigated || !known(line)) {
			line = p.sugg[p.sel].text
		}
		p.open = false
		return m.runCommand(line)
	case key.Matches(msg, p.keys.Complete):
		if len(p.sugg) > 0 {
			s := p.sugg[p.sel]
			p.input = s.text
			if s.takesArg && !strings.Contains(s.text, " ") {
				p.input += " "
			}
			p.suggest(ctxs)
		}
	case key.Matches(msg, p.keys.Next):
		if len(p.sugg) > 0 {
			p.sel = (p.sel + 1) % len(p.sugg)
			p.navigated = true
		}
	case key.Matches(msg, p.keys.Prev):
		if len(p.sugg) > 0 {
			p.sel = (p.sel - 1 + len(p.sugg)) % len(p.sugg)
			p.navigated = true
		}
	case key.Matches(msg, p.keys.Erase) && p.input == "":
		p.open = false // backspace on an empty line closes it, as in vim
	default:
		if in, ok := textfield.Edit(p.input, msg); ok {
			p.input = in
			p.suggest(ctxs)
		}
	}
	return nil
}

// known reports whether line starts with a command word.
func known(line string) bool {
	word, _, _ := strings.Cut(line, " ")
	switch word {
	case "ctx", "context", "q", "quit", "help":
		return true
	}
	_, ok := lookupPage(word)
	return ok
}

// runCommand runs one palette line.
func (m *Model) runCommand(line string) tea.Cmd {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil
	}
	switch f[0] {
	case "q", "quit":
		return tea.Quit
	case "help":
		m.help = true
		return nil
	case "ctx", "context":
		if len(f) < 2 {
			return m.setFlash(FlashMsg{Level: Info, Text: "contexts: " + strings.Join(m.opts.Config.ContextNames(), ", ")})
		}
		if f[1] == m.ctxName {
			return m.setFlash(FlashMsg{Level: Info, Text: "already on " + f[1]})
		}
		return m.switchContext(f[1])
	}
	return m.jump(f[0], f[1:])
}

// overlay draws the suggestions over the last lines of the body.
func (p *palette) overlay(lines []string, w int) []string {
	n := min(len(p.sugg), maxSuggestions, len(lines))
	if n == 0 {
		return lines
	}
	first := 0
	if p.sel >= n {
		first = p.sel - n + 1
	}
	out := append([]string(nil), lines...)
	for i := 0; i < n; i++ {
		s := p.sugg[first+i]
		mark := "  "
		if first+i == p.sel {
			mark = "▸ "
		}
		text := mark + sanitize.Text(s.text)
		if s.help != "" {
			text += "  " + s.help
		}
		if ansi.StringWidth(text) > w {
			text = ansi.Truncate(text, w, "…")
		}
		text += strings.Repeat(" ", max(0, w-ansi.StringWidth(text)))
		if first+i == p.sel {
			text = p.styles.Selected.Render(text)
		} else {
			text = p.styles.Palette.Render(text)
		}
		out[len(out)-n+i] = text
	}
	return out
}

// inputView is the ":" line itself.
func (p *palette) inputView(w int) string {
	line := ":" + sanitize.Text(p.input) + "█"
	if ansi.StringWidth(line) > w {
		line = ansi.TruncateLeft(line, ansi.StringWidth(line)-w, "")
	}
	return p.styles.PaletteMatch.Render(line) + strings.Repeat(" ", max(0, w-ansi.StringWidth(line)))
}
