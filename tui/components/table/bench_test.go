package table

import (
	"fmt"
	"testing"

	btable "github.com/charmbracelet/bubbles/table"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/berth-dev/berth/tui/styles"
)

// benchColumns and benchRows are a partition-lag table: 10 columns that fill
// 200 cells, ASCII data, a coloured status per row.
func benchColumns() []Column {
	return []Column{
		{Title: "TOPIC", Width: 40, Flex: 1},
		{Title: "P", Width: 5, Right: true, Numeric: true},
		{Title: "COMMITTED", Width: 12, Right: true, Numeric: true},
		{Title: "END", Width: 12, Right: true, Numeric: true},
		{Title: "LAG", Width: 10, Right: true, Numeric: true},
		{Title: "AGE", Width: 8, Right: true, Numeric: true},
		{Title: "STATUS", Width: 8},
		{Title: "CATCH-UP", Width: 9, Right: true},
		{Title: "LOSS IN", Width: 8, Right: true},
		{Title: "MEMBER", Width: 40},
	}
}

func benchRows(n int) []Row {
	lv := []styles.Level{styles.Normal, styles.Warn, styles.Bad, styles.Normal}
	st := []string{"OK", "LAGGING", "STALLED", "OK"}
	out := make([]Row, n)
	for i := range out {
		out[i] = Row{
			ID: fmt.Sprint(i),
			Cells: []string{
				fmt.Sprintf("harborcart.orders.events.v1-%03d", i/50), fmt.Sprint(i % 50),
				fmt.Sprint(100000 + i), fmt.Sprint(100500 + i), fmt.Sprint(500), fmt.Sprintf("%ds", i%600),
				st[i%4], "2m10s", "2d23h", fmt.Sprintf("consumer-%d@10.0.0.%d", i%12, i%250),
			},
			Nums:  []float64{0, float64(i % 50), float64(100000 + i), float64(100500 + i), 500, float64(i % 600)},
			Level: lv[i%4],
		}
	}
	return out
}

// withColour renders with a true-colour profile, as in a real terminal
// (without it lipgloss emits no escapes and the benchmark under-measures).
func withColour(b *testing.B) {
	lipgloss.SetColorProfile(termenv.TrueColor)
	b.Cleanup(func() { lipgloss.SetColorProfile(termenv.Ascii) })
}

// BenchmarkView measures one keypress frame (cursor down + View) of a
// 10,000-row table at 200x50, against bubbles/table doing the same in the
// same run (Baseline). Compare with:
//
//	go test ./tui/components/table/ -run '^$' -bench . -benchmem
func BenchmarkView(b *testing.B) {
	withColour(b)
	rows := benchRows(10000)
	b.Run("Windowed/rows=10000/200x50", func(b *testing.B) {
		m := New(benchColumns(), styles.New())
		m.SetSize(200, 50)
		m.SetRows(rows)
		m.SetSort(5, true)
		down := tea.KeyMsg{Type: tea.KeyDown}
		up := tea.KeyMsg{Type: tea.KeyUp}
		m, _ = m.Update(tea.KeyMsg{Type: tea.KeyPgDown})
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			k := down
			if i%200 >= 100 {
				k = up
			}
			m, _ = m.Update(k)
			_ = m.View()
		}
	})
	b.Run("Baseline-bubbles/rows=10000/200x50", func(b *testing.B) {
		cols := benchColumns()
		bc := make([]btable.Column, len(cols))
		for i, c := range cols {
			bc[i] = btable.Column{Title: c.Title, Width: c.Width}
		}
		br := make([]btable.Row, len(rows))
		for i, r := range rows {
			br[i] = btable.Row(r.Cells)
		}
		t := btable.New(btable.WithColumns(bc), btable.WithRows(br), btable.WithHeight(49), btable.WithWidth(200), btable.WithFocused(true))
		t.SetCursor(5000)
		down := tea.KeyMsg{Type: tea.KeyDown}
		up := tea.KeyMsg{Type: tea.KeyUp}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			k := down
			if i%200 >= 100 {
				k = up
			}
			t, _ = t.Update(k)
			_ = t.View()
		}
	})
}

// BenchmarkPrepare is the off-thread part of a refresh: filter and sort
// 10,000 rows (runs in a tea.Cmd, not in Update).
func BenchmarkPrepare(b *testing.B) {
	rows := benchRows(10000)
	cols := benchColumns()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = Prepare(cols, rows, 5, true, "")
	}
}

// BenchmarkRefreshShare puts what content-sized columns cost next to the
// rest of a refresh of the same 10,000 rows, in one run: the widths are
// measured inside Prepare (off the UI goroutine); SetPrepared, on the UI
// goroutine, only lays the columns out.
func BenchmarkRefreshShare(b *testing.B) {
	rows, cols := benchRows(10000), benchColumns()
	b.Run("prepare", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = Prepare(cols, rows, 5, true, "")
		}
	})
	b.Run("content-widths", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = contentWidths(len(cols), rows)
		}
	})
	b.Run("set-prepared", func(b *testing.B) {
		m := New(cols, styles.New())
		m.SetSize(200, 50)
		m.SetSort(5, true)
		p := Prepare(cols, rows, 5, true, "")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			m.SetPrepared(p)
		}
	})
}
