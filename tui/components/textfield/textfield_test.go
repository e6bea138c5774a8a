package textfield

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// Every text field shares one editing behaviour: ctrl+w erases a word,
// ctrl+u the line; pasted line breaks become spaces.
func TestTextFieldEditing(t *testing.T) {
	steps := []struct {
		msg  tea.KeyMsg
		want string
	}{
		{tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("topic orders")}, "topic orders"},
		{tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}, "topic orders "},
		{tea.KeyMsg{Type: tea.KeyCtrlW}, "topic "},
		{tea.KeyMsg{Type: tea.KeyBackspace}, "topic"},
		{tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(" a\r\nb\tc\x1b"), Paste: true}, "topic a  b c"},
		{tea.KeyMsg{Type: tea.KeyBackspace, Alt: true}, "topic a  b "},
		{tea.KeyMsg{Type: tea.KeyCtrlU}, ""},
		{tea.KeyMsg{Type: tea.KeyCtrlW}, ""},
	}
	v := ""
	for _, s := range steps {
		var ok bool
		if v, ok = Edit(v, s.msg); !ok || v != s.want {
			t.Fatalf("after %q: %q (edit=%v), want %q", s.msg, v, ok, s.want)
		}
	}
	if _, ok := Edit("x", tea.KeyMsg{Type: tea.KeyEnter}); ok {
		t.Fatal("enter is not an edit")
	}
}
