package capacity

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// BenchmarkKeystroke is one typed digit (recompute) plus the redraw the
// console does after it, at 200x50; BenchmarkView is the redraw alone, the
// baseline of the same run.
func BenchmarkKeystroke(b *testing.B) {
	m := sized(New(nil, nil), 200, 50)
	keys := []tea.KeyMsg{typed("1"), backspace}
	i := 0
	for b.Loop() {
		m, _ = m.Update(keys[i%2])
		_ = m.View()
		i++
	}
}

func BenchmarkView(b *testing.B) {
	m := sized(New(nil, nil), 200, 50)
	for b.Loop() {
		_ = m.View()
	}
}
