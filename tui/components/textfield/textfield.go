// Package textfield is the one editing behaviour every one-line text field
// of the console shares (the ":" command line, table filters, dialog
// fields), so the same keys edit everywhere: typed and pasted text is
// added at the end, backspace erases a character, ctrl+w (or
// alt+backspace) the word before it, ctrl+u the whole line (keys.TextField).
//
// Fields built on bubbles' textinput (the capacity worksheet, the redrive
// prompts) get the same keys from textinput's own keymap.
package textfield

import (
	"strings"
	"unicode"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/tui/keys"
)

var km = keys.DefaultTextField()

// Edit applies msg to value. It reports whether msg was an editing key;
// when it was not (enter, esc, tab, arrows…), value is returned unchanged
// and the caller handles the key.
func Edit(value string, msg tea.KeyMsg) (string, bool) {
	switch {
	case msg.Type == tea.KeyRunes && msg.Paste:
		return value + Clean(string(msg.Runes)), true
	case msg.Type == tea.KeyRunes && !msg.Alt: // alt+letter is a shortcut, not text
		return value + Clean(string(msg.Runes)), true
	case msg.Type == tea.KeySpace:
		return value + " ", true
	case key.Matches(msg, km.EraseWord):
		return dropWord(value), true
	case key.Matches(msg, km.Erase):
		r := []rune(value)
		if len(r) == 0 {
			return value, true
		}
		return string(r[:len(r)-1]), true
	case key.Matches(msg, km.Clear):
		return "", true
	}
	return value, false
}

// dropWord erases the last word and the spaces after it, as a shell's
// ctrl+w does.
func dropWord(s string) string {
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	return s[:strings.LastIndexFunc(s, unicode.IsSpace)+1]
}

// Clean makes pasted or burst text fit a one-line field: line breaks and
// tabs become spaces, other control characters are dropped (a pasted
// escape sequence must not reach the terminal through the field's echo).
func Clean(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
