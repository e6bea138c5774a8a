// Package keys holds the keymaps more than one page shares: the global keys
// the app handles on every page, the table's (cursor, sort, filter), the ":"
// command line's and the editing keys of every one-line text field.
//
// A page's own keys are not here: each page declares them as key.Bindings in
// its own file or package (tui/page_*.go, tui/capacity, tui/offsets,
// tui/record, tui/dlq) and returns them from KeyBindings. Row actions
// registered with tui.RegisterAction carry their key in the Action (R on a
// group, v on a partition, D on a DLQ topic). The `?` help screen is built
// from the global bindings, the active page's KeyBindings and the text-field
// keys, so a key shows in help only when it is declared as a binding: match
// those with key.Matches. (The offsets dialog and the DLQ plan pages still
// compare a few modal keys, such as esc, enter and y, as strings.)
package keys

import "github.com/charmbracelet/bubbles/key"

// Global are the keys the app handles on every page.
type Global struct {
	Quit     key.Binding
	Help     key.Binding
	Back     key.Binding
	Palette  key.Binding
	Refresh  key.Binding
	Overview key.Binding
	Topics   key.Binding
	Groups   key.Binding
	Brokers  key.Binding
}

// DefaultGlobal returns the global keymap.
func DefaultGlobal() Global {
	return Global{
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Palette:  key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "command")),
		Refresh:  key.NewBinding(key.WithKeys("ctrl+r"), key.WithHelp("ctrl+r", "refresh now")),
		Overview: key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "overview")),
		Topics:   key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "topics")),
		Groups:   key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "consumer groups")),
		Brokers:  key.NewBinding(key.WithKeys("b"), key.WithHelp("b", "brokers")),
	}
}

// Bindings lists the global keys in help order.
func (g Global) Bindings() []key.Binding {
	return []key.Binding{g.Palette, g.Overview, g.Topics, g.Groups, g.Brokers, g.Back, g.Refresh, g.Help, g.Quit}
}

// Table are the keys of a table (cursor, filter, sort).
type Table struct {
	Up       key.Binding
	Down     key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Home     key.Binding
	End      key.Binding
	Filter   key.Binding
	SortNext key.Binding
	SortPrev key.Binding
	SortFlip key.Binding
	SortCol  key.Binding // 1..9: sort by that column
	Open     key.Binding
}

// DefaultTable returns the table keymap: arrows and vim keys (j/k, g/G,
// ctrl+f/ctrl+b) both work. Digits sort by a column, so pages are reached
// with letters (o, t, c, b) or the ":" palette.
func DefaultTable() Table {
	return Table{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+b", "ctrl+u"), key.WithHelp("pgup/ctrl+b", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+f", "ctrl+d", " "), key.WithHelp("pgdn/ctrl+f", "page down")),
		Home:     key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("home/g", "first row")),
		End:      key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end/G", "last row")),
		Filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		SortNext: key.NewBinding(key.WithKeys(">"), key.WithHelp(">", "sort by next column")),
		SortPrev: key.NewBinding(key.WithKeys("<"), key.WithHelp("<", "sort by previous column")),
		SortFlip: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reverse sort")),
		SortCol:  key.NewBinding(key.WithKeys("1", "2", "3", "4", "5", "6", "7", "8", "9"), key.WithHelp("1-9", "sort by column")),
		Open:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
	}
}

// Bindings lists the table keys in help order.
func (t Table) Bindings() []key.Binding {
	return []key.Binding{t.Up, t.Down, t.PageUp, t.PageDown, t.Home, t.End, t.Open, t.Filter, t.SortCol, t.SortNext, t.SortPrev, t.SortFlip}
}

// Filter are the keys while typing a filter.
// Editing the filter's text: TextField.
type Filter struct {
	Accept key.Binding
	Cancel key.Binding
}

// DefaultFilter returns the filter-input keymap.
func DefaultFilter() Filter {
	return Filter{
		Accept: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "keep filter")),
		Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
	}
}

// Palette are the keys of the ":" command line.
type Palette struct {
	Run      key.Binding
	Cancel   key.Binding
	Complete key.Binding
	Next     key.Binding
	Prev     key.Binding
	Erase    key.Binding
}

// DefaultPalette returns the command-line keymap.
func DefaultPalette() Palette {
	return Palette{
		Run:      key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "run")),
		Cancel:   key.NewBinding(key.WithKeys("esc", "ctrl+c"), key.WithHelp("esc", "cancel")),
		Complete: key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "complete")),
		Next:     key.NewBinding(key.WithKeys("down", "ctrl+n"), key.WithHelp("↓", "next suggestion")),
		Prev:     key.NewBinding(key.WithKeys("up", "ctrl+p", "shift+tab"), key.WithHelp("↑", "previous suggestion")),
		Erase:    key.NewBinding(key.WithKeys("backspace", "ctrl+h"), key.WithHelp("backspace", "erase")),
	}
}

// TextField are the editing keys every one-line text field shares (the
// command line, filters, dialog fields): see tui/components/textfield.
type TextField struct {
	Erase     key.Binding
	EraseWord key.Binding
	Clear     key.Binding
}

// DefaultTextField returns the text-editing keymap (shell conventions).
func DefaultTextField() TextField {
	return TextField{
		Erase:     key.NewBinding(key.WithKeys("backspace", "ctrl+h"), key.WithHelp("backspace", "erase a character")),
		EraseWord: key.NewBinding(key.WithKeys("ctrl+w", "alt+backspace"), key.WithHelp("ctrl+w", "erase a word")),
		Clear:     key.NewBinding(key.WithKeys("ctrl+u"), key.WithHelp("ctrl+u", "erase the line")),
	}
}

// Bindings lists the text-editing keys in help order.
func (t TextField) Bindings() []key.Binding { return []key.Binding{t.Erase, t.EraseWord, t.Clear} }
