// Package termbg keeps berth's commands from asking the terminal for its
// background colour at start-up. bubbletea v1 asks in its package init
// (tea_init.go) for every program that links it: each berth command, not
// only the console, wrote the query to the terminal and, on a terminal
// that does not answer (some CI runners, serial consoles, editors' shells),
// waited termenv's 5 s timeout before doing anything. Only the console
// uses the answer (its adaptive colours), so it asks once itself (Query)
// before bubbletea takes the terminal's input.
package termbg

import (
	"os"

	"github.com/charmbracelet/lipgloss"
)

// Go initialises the first package, by import path, whose imports are all
// initialised: this one needs only lipgloss, which bubbletea imports too,
// and "github.com/berth-dev/..." sorts before "github.com/charmbracelet/
// bubbletea", so this runs before bubbletea's init, whose query lipgloss
// then answers from the value set here.
func init() {
	lipgloss.SetHasDarkBackground(true)
}

// Query asks the terminal on standard output for its background and sets
// lipgloss's answer. The console calls it before its program starts: the
// answer is read from the terminal, which would race the program's key
// reader.
func Query() {
	lipgloss.SetHasDarkBackground(lipgloss.NewRenderer(os.Stdout).HasDarkBackground())
}
