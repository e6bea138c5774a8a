package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/tui/keys"
)

// helpView renders "?" help from the keymaps themselves: the global keys and
// the active page's keys, laid out in as many columns as fit. Disabled keys
// are listed with the reason they are disabled (their help text says it).
func (m *Model) helpView(w, h int) string {
	type item struct{ k, d string }
	var items []item
	section := func(title string, bs []key.Binding) {
		if len(bs) == 0 {
			return
		}
		items = append(items, item{k: "", d: title})
		for _, b := range bs {
			hp := b.Help()
			if hp.Key == "" {
				continue
			}
			items = append(items, item{k: hp.Key, d: hp.Desc})
		}
	}
	section("global", globalKeysFor(m.snap, m.keys.Bindings())) // RabbitMQ: page_queues.go
	section(strings.ToLower(m.top().page.Title()), m.top().page.KeyBindings())
	section("command line (:)", []key.Binding{m.palette.keys.Complete, m.palette.keys.Next, m.palette.keys.Run, m.palette.keys.Cancel})
	section("text fields (:, /, dialogs)", keys.DefaultTextField().Bindings())

	kw := 0
	for _, it := range items {
		kw = max(kw, ansi.StringWidth(it.k))
	}
	colW := 0
	for _, it := range items {
		colW = max(colW, kw+2+ansi.StringWidth(it.d))
	}
	colW = min(colW+3, w)
	rows := h - 3
	cols := max(1, w/colW)
	need := (len(items) + rows - 1) / rows
	if need > cols {
		// Too many for the screen: use narrower columns rather than hide keys.
		cols = need
		colW = max(12, w/cols)
	}
	grid := make([]string, rows)
	for i, it := range items {
		c, r := i/rows, i%rows
		if c >= cols {
			break
		}
		var cell string
		if it.k == "" {
			cell = m.styles.Title.Render(it.d)
		} else {
			cell = m.styles.HelpKey.Render(padRight(it.k, kw)) + "  " + m.styles.HelpDesc.Render(it.d)
		}
		if ansi.StringWidth(cell) > colW-1 {
			cell = ansi.Truncate(cell, colW-1, "…")
		}
		grid[r] = padRight(grid[r], colW*c) + cell
	}
	title := m.styles.Title.Render("keys") + m.styles.Muted.Render("  (any key closes)")
	if m.readOnly {
		// Why actions are disabled, on a line of its own so it is never cut.
		title += "   " + m.styles.ReadOnly.Render("read-only: "+m.readOnlyReason)
	}
	syntax := m.styles.Muted.Render("filter: text matches any column, any case; ~re or r:re is a regular expression")
	return title + "\n" + fit(syntax, w) + "\n\n" + strings.Join(grid, "\n")
}

// padRight pads s with spaces to w cells.
func padRight(s string, w int) string {
	if sw := ansi.StringWidth(s); sw < w {
		return s + strings.Repeat(" ", w-sw)
	}
	return s
}
