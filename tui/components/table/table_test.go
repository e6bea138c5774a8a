package table

import (
	"fmt"
	"math"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/berth-dev/berth/tui/styles"
)

func cols() []Column {
	return []Column{
		{Title: "NAME", Width: 10, Flex: 1},
		{Title: "LAG", Width: 6, Right: true, Numeric: true},
		{Title: "NOTE", Width: 20, Drop: 1},
	}
}

func rows(n int) []Row {
	out := make([]Row, n)
	for i := range out {
		out[i] = Row{ID: fmt.Sprint(i), Cells: []string{fmt.Sprintf("row-%04d", i), fmt.Sprint(i % 7), "note"}, Nums: []float64{0, float64(i % 7), 0}}
	}
	return out
}

func keyOf(s string) tea.KeyMsg {
	switch s {
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	case "home":
		return tea.KeyMsg{Type: tea.KeyHome}
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func press(m Model, ks ...string) Model {
	for _, k := range ks {
		m, _ = m.Update(keyOf(k))
	}
	return m
}

func newTable(n, w, h int) Model {
	m := New(cols(), styles.New())
	m.SetSize(w, h)
	m.SetRows(rows(n))
	return m
}

func TestViewIsExactlyTheScreenAndWindowed(t *testing.T) {
	m := newTable(10000, 80, 12)
	m = press(m, "pgdown", "j", "j")
	v := m.View()
	lines := strings.Split(v, "\n")
	if len(lines) != 12 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w != 80 {
			t.Fatalf("line %d is %d wide: %q", i, w, l)
		}
	}
	// 10 body rows: pgdown moves 10, then two more: cursor on row 12.
	if m.Cursor() != 12 || !strings.Contains(v, "▸ row-0012") {
		t.Fatalf("cursor %d:\n%s", m.Cursor(), v)
	}
	if !strings.Contains(lines[11], "4-13 of 10000 rows") {
		t.Fatalf("footer = %q", lines[11])
	}
}

func TestHomeEndAndWheel(t *testing.T) {
	m := newTable(100, 80, 12)
	m = press(m, "end")
	if m.Cursor() != 99 {
		t.Fatalf("end: %d", m.Cursor())
	}
	m = press(m, "g")
	if m.Cursor() != 0 {
		t.Fatalf("g: %d", m.Cursor())
	}
	m, _ = m.Update(tea.MouseMsg{Action: tea.MouseActionPress, Button: tea.MouseButtonWheelDown})
	if m.Cursor() != wheelStep {
		t.Fatalf("wheel: %d", m.Cursor())
	}
}

func TestSortNumericDescThenByName(t *testing.T) {
	m := newTable(20, 80, 30)
	m = press(m, "2") // LAG: numeric columns start descending
	r, _ := m.VisibleRow(0)
	if r.Cells[1] != "6" {
		t.Fatalf("first lag = %s", r.Cells[1])
	}
	// Stable: equal lags keep their order (row-0006 before row-0013).
	r2, _ := m.VisibleRow(1)
	if r.ID != "6" || r2.ID != "13" {
		t.Fatalf("order %s, %s", r.ID, r2.ID)
	}
	m = press(m, "2")
	if r, _ := m.VisibleRow(0); r.Cells[1] != "0" {
		t.Fatalf("ascending first lag = %s", r.Cells[1])
	}
}

func TestUnknownNumbersSortLast(t *testing.T) {
	m := New(cols(), styles.New())
	m.SetRows([]Row{
		{ID: "a", Cells: []string{"a", "?"}, Nums: []float64{0, math.NaN()}},
		{ID: "b", Cells: []string{"b", "5"}, Nums: []float64{0, 5}},
	})
	m.SetSort(1, true)
	if r, _ := m.VisibleRow(0); r.ID != "b" {
		t.Fatalf("unknown value sorted first")
	}
}

func TestCursorFollowsRowAcrossRefresh(t *testing.T) {
	m := newTable(50, 80, 12)
	m = press(m, "j", "j", "j") // row 3
	fresh := rows(50)
	// The refresh reorders rows: row "3" is now at the end.
	fresh = append(fresh[:3], append(fresh[4:], fresh[3])...)
	m.SetRows(fresh)
	if r, _ := m.Selected(); r.ID != "3" {
		t.Fatalf("cursor on %s after refresh", r.ID)
	}
}

func TestFilterSubstringRegexAndCapture(t *testing.T) {
	m := newTable(200, 80, 12)
	m = press(m, "/")
	if !m.CapturesKey(keyOf("q")) {
		t.Fatal("filter input does not capture keys")
	}
	m = press(m, "R", "O", "W", "-", "0", "1", "9")
	if m.Len() != 10 { // row-0190..row-0199
		t.Fatalf("substring filter: %d rows", m.Len())
	}
	m = press(m, "enter")
	if m.CapturesKey(keyOf("q")) {
		t.Fatal("accepted filter still captures ordinary keys")
	}
	if !m.CapturesKey(keyOf("esc")) {
		t.Fatal("esc should clear an active filter before going back")
	}
	m.SetFilter("r:^row-00[0-4]5$")
	if m.Len() != 5 {
		t.Fatalf("regex filter: %d rows", m.Len())
	}
	m.SetFilter("~[")
	if m.Len() != 200 || !strings.Contains(m.View(), "bad regex") {
		t.Fatalf("bad regex: %d rows", m.Len())
	}
	m = press(m, "esc")
	if m.Filter() != "" {
		t.Fatal("esc did not clear the filter")
	}
}

func TestNarrowDropsColumnsByPriority(t *testing.T) {
	m := newTable(3, 30, 6)
	v := m.View()
	if strings.Contains(v, "NOTE") {
		t.Fatalf("NOTE should be dropped at 30 columns:\n%s", v)
	}
	m.SetSize(80, 6)
	if !strings.Contains(m.View(), "NOTE") {
		t.Fatal("NOTE missing at 80 columns")
	}
}

func TestWideAndControlTextIsPaddedByWidth(t *testing.T) {
	m := New(cols(), styles.New())
	m.SetSize(40, 5)
	m.SetRows([]Row{{ID: "x", Cells: []string{"注文注文注文注文注文", "1", "é"}}})
	for i, l := range strings.Split(m.View(), "\n") {
		if w := ansi.StringWidth(l); w != 40 {
			t.Fatalf("line %d is %d wide: %q", i, w, l)
		}
	}
}

func TestMain(m *testing.M) {
	// Plain text: widths and marks are checked without colour codes.
	lipgloss.SetColorProfile(termenv.Ascii)
	m.Run()
}

// An untouched cursor stays on the first row when a refresh re-sorts the
// rows: the worst row is what the user should see selected on arrival.
// (It used to follow whichever row happened to be first at the first
// refresh, ending up mid-table.)
func TestUntouchedCursorStaysOnTop(t *testing.T) {
	m := newTable(5, 80, 12)
	m.SetSort(1, true)
	first, _ := m.Selected()
	fresh := rows(5)
	fresh[0].Nums[1], fresh[0].Cells[1] = 99, "99"
	m.SetRows(fresh)
	if m.Cursor() != 0 {
		t.Fatalf("cursor moved to %d", m.Cursor())
	}
	if r, _ := m.Selected(); r.ID == first.ID {
		t.Fatalf("the new worst row %s should be selected, not %s", "0", first.ID)
	}
}

func TestMouseClickSelectsAndSorts(t *testing.T) {
	m := newTable(20, 80, 12)
	m, _ = m.Update(tea.MouseMsg{Action: tea.MouseActionPress, Button: tea.MouseButtonLeft, X: 5, Y: 4})
	if m.Cursor() != 3 {
		t.Fatalf("click on the 4th row: cursor %d", m.Cursor())
	}
	// The LAG column starts after NAME's width plus the gap and gutter.
	x := gutterW + m.widths[0] + gap + 1
	m, _ = m.Update(tea.MouseMsg{Action: tea.MouseActionPress, Button: tea.MouseButtonLeft, X: x, Y: 0})
	if col, desc := m.Sort(); col != 1 || !desc {
		t.Fatalf("header click: sort %d desc=%v", col, desc)
	}
	// The clicked row stays selected through the re-sort.
	if r, _ := m.Selected(); r.ID != "3" {
		t.Fatalf("selection moved to %s", r.ID)
	}
}

// Issue 15: COUNT in a 5-wide column read "COUN▼" once sorted, and LAST
// SEEN "LAST SE…". A header is a floor: never cut, with room for its arrow.
func TestHeadersAreNeverCut(t *testing.T) {
	m := New([]Column{
		{Title: "CLASS", Width: 12, Flex: 1},
		{Title: "COUNT", Width: 5, Right: true, Numeric: true},
		{Title: "LAST SEEN", Width: 8, Right: true, Numeric: true},
	}, styles.New())
	m.SetSize(60, 5)
	m.SetRows([]Row{{ID: "a", Cells: []string{"c-1", "13", "0s"}, Nums: []float64{0, 13, 0}}})
	m.SetSort(1, true)
	hdr := strings.Split(m.View(), "\n")[0]
	if !strings.Contains(hdr, "COUNT▼") || !strings.Contains(hdr, "LAST SEEN") || strings.Contains(hdr, "…") {
		t.Fatalf("header: %q", hdr)
	}
}

// Names get what they need up to a cap; beyond it the middle is elided so
// that names differing only at the end stay apart, and numbers are whole.
func TestLongNamesKeepTheirEndingsAndNumbersAreWhole(t *testing.T) {
	m := New([]Column{
		{Title: "GROUP", Width: 8, Flex: 1},
		{Title: "LAG", Width: 3, Right: true, Numeric: true},
		{Title: "WORST", Width: 6},
	}, styles.New())
	m.SetSize(60, 6)
	m.SetRows([]Row{
		{ID: "1", Cells: []string{"payments-capture-eu-west-1-canary", "123456789", "orders-by-tenant-7"}},
		{ID: "2", Cells: []string{"payments-capture-eu-west-1-stable", "1", "orders-by-tenant-11"}},
	})
	v := m.View()
	lines := strings.Split(v, "\n")
	if !strings.Contains(lines[1], "…") || !strings.Contains(lines[1], "-canary ") || !strings.Contains(lines[2], "-stable ") || !strings.HasPrefix(strings.TrimLeft(lines[1], "▸ "), "payments-") {
		t.Fatalf("endings lost:\n%s", v)
	}
	if !strings.Contains(lines[1], "123456789") || !strings.Contains(v, "orders-by-tenant-7") || !strings.Contains(v, "orders-by-tenant-11") {
		t.Fatalf("a number or a short name was cut:\n%s", v)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w != 60 {
			t.Fatalf("line %d is %d wide: %q", i, w, l)
		}
	}
	// Wide: everything whole, and the spare width stays at the right
	// rather than padding the name column.
	m.SetSize(120, 6)
	v = m.View()
	if !strings.Contains(v, "payments-capture-eu-west-1-canary  123456789") {
		t.Fatalf("at 120 columns:\n%s", v)
	}
}

func TestElisionKeepsTheEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		w    int
		want string
	}{
		{"orders-by-tenant-11", 16, "orders-by-te…-11"},
		{"orders-by-tenant-7", 16, "orders-by-ten…-7"},
		{"abcdefghijklmnopqrstuvwxyz", 11, "abcdef…wxyz"},
		{"注文注文注文注文注文注文", 11, "注文注…注文"},
	} {
		var b strings.Builder
		writeCell(&b, c.in, c.w, false)
		if b.String() != c.want || ansi.StringWidth(b.String()) != c.w {
			t.Errorf("writeCell(%q, %d) = %q, want %q", c.in, c.w, b.String(), c.want)
		}
	}
}

// A Whole column (a status, a verdict) is never cut, however narrow: its
// ending is the point ("took effect 40/40!"); the name gives way instead.
func TestWholeColumnsAreNeverCut(t *testing.T) {
	// The classes page at 80 columns: the floors alone fill the screen.
	m := New([]Column{
		{Title: "SEL", Width: 3},
		{Title: "EXCEPTION", Width: 20, Flex: 1},
		{Title: "MESSAGE PATTERN", Width: 24, Flex: 3},
		{Title: "COUNT", Width: 5, Right: true, Numeric: true},
		{Title: "VERDICT", Width: 9, Whole: true},
	}, styles.New())
	m.SetSize(80, 5)
	m.SetSort(3, true)
	m.SetRows([]Row{{ID: "a", Cells: []string{"", "LedgerClientException", "Listener failed; ledger service returned HTTP <n> Service Unavailable", "93", "took effect 93/93!"}}})
	v := m.View()
	if !strings.Contains(v, "took effect 93/93!") || !strings.Contains(v, "COUNT▼") || !strings.Contains(v, "…") {
		t.Fatalf("the verdict or the header was cut, or the names were not:\n%s", v)
	}
}
