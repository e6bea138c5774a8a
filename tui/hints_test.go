package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// hintsPage names enter twice, as a page listing its own keys before its
// table's does.
type hintsPage struct{}

func (hintsPage) Init() tea.Cmd                    { return nil }
func (p hintsPage) Update(tea.Msg) (Page, tea.Cmd) { return p, nil }
func (hintsPage) View() string                     { return "" }
func (hintsPage) Title() string                    { return "hints" }
func (hintsPage) KeyBindings() []key.Binding {
	b := func(k, d string) key.Binding { return key.NewBinding(key.WithKeys(k), key.WithHelp(k, d)) }
	return []key.Binding{b("enter", "open"), b("u", "reload"), b("enter", "open"), b("/", "filter")}
}

// The status line's hints name each key once.
func TestHintsNameEachKeyOnce(t *testing.T) {
	m := New(Options{})
	m.stack = []entry{{page: hintsPage{}}}
	got := m.hints(200)
	if strings.Count(got, "enter") != 1 || !strings.Contains(got, "u reload") || !strings.Contains(got, "/ filter") {
		t.Fatalf("hints %q", got)
	}
}
