package styles

import (
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// renderWith builds the style sheet on a renderer for a true-colour TTY and
// renders a "bad" status with it.
func renderWith(t *testing.T) string {
	t.Helper()
	r := lipgloss.NewRenderer(io.Discard, termenv.WithTTY(true), termenv.WithProfile(termenv.TrueColor))
	old := lipgloss.DefaultRenderer()
	lipgloss.SetDefaultRenderer(r)
	t.Cleanup(func() { lipgloss.SetDefaultRenderer(old) })
	s := New()
	return s.Levels[Bad].Render("STALLED") + Of(s.Selected).Wrap("row")
}

// NO_COLOR (https://no-color.org) is honoured by termenv, which lipgloss
// asks for the colour profile: with it set, nothing is coloured even on a
// true-colour terminal. This pins that behaviour for our styles.
func TestNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	if got := renderWith(t); got != "STALLEDrow" {
		t.Fatalf("NO_COLOR: got %q, want plain text", got)
	}
}

func TestColourWithoutNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	if got := renderWith(t); !strings.Contains(got, "\x1b[") {
		t.Fatalf("without NO_COLOR a true-colour terminal got no colour: %q", got)
	}
}

func TestSGRMatchesRender(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard, termenv.WithTTY(true), termenv.WithProfile(termenv.TrueColor))
	old := lipgloss.DefaultRenderer()
	lipgloss.SetDefaultRenderer(r)
	defer lipgloss.SetDefaultRenderer(old)
	st := New().Levels[Warn]
	if got, want := Of(st).Wrap("LAGGING"), st.Render("LAGGING"); got != want {
		t.Fatalf("SGR wrap %q != Render %q", got, want)
	}
}
