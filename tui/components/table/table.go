// Package table is the console's data table: a windowed renderer that draws
// only the rows on screen, with a "/" filter, sorting by any column and vim
// keys. It replaces bubbles/table for the big tables because bubbles renders
// about twice the visible rows through lipgloss on every keypress, which
// costs ~3 ms a frame at 10k rows (see /work/shared/reference/table-render.md);
// this one writes pre-extracted SGR sequences around hand-padded cells and
// costs tens of microseconds, whatever the row count.
//
// Rows are data (sanitised strings plus numeric sort keys); SetRows swaps the
// slice and recomputes the filtered, sorted index. The cursor follows the
// selected row's ID across refreshes, so a refresh never moves the user.
//
// Filter syntax: plain text matches rows containing it (case-insensitive,
// any column); a leading "~" or "r:" makes the rest a regular expression
// (Go RE2 syntax, case-insensitive).
package table

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/tui/components/textfield"
	"github.com/berth-dev/berth/tui/keys"
	"github.com/berth-dev/berth/tui/styles"
)

// Column describes one column.
type Column struct {
	Title string
	// Width is the column's natural content width in cells.
	Width int
	// Flex is the column's weight when columns whose content is wider than
	// their Width share the spare width (0 counts as 1). No column grows
	// past its widest cell: spare width beyond that stays blank at the
	// right, next to the numbers rather than pushing them away.
	Flex int
	// Right aligns the column to the right (numbers).
	Right bool
	// Numeric sorts the column by Row.Nums instead of the text.
	Numeric bool
	// Whole marks a text column that is never cut, like numbers: statuses
	// and verdicts, whose ending carries the meaning ("took effect 3/40!").
	Whole bool
	// Drop is the order in which columns are hidden when the terminal is too
	// narrow: the highest Drop goes first; 0 is never dropped.
	Drop int
}

// Row is one table row. Cells must already be sanitised display text.
type Row struct {
	// ID identifies the row across refreshes (the cursor follows it).
	ID    string
	Cells []string
	// Nums are the sort keys of Numeric columns, by column index. NaN (or a
	// short slice) sorts after every number.
	Nums []float64
	// Level colours the whole row.
	Level styles.Level
	// CellLevels, when set, colours cells individually (overrides Level).
	CellLevels []styles.Level
}

// gap is the space between columns; gutter holds the cursor mark.
const (
	gap        = 2
	gutterW    = 2
	cursorMark = "▸ "
	noMark     = "  "
	wheelStep  = 3
)

// Model is the table state. It is a value: Update returns the new one.
type Model struct {
	cols []Column
	rows []Row

	view   []int // indices into rows, filtered and sorted
	cursor int   // index into view
	offset int   // first visible index into view
	// touched is set once the user moves the cursor. Until then the cursor
	// stays on the first row across refreshes (the worst one, in the
	// default sorts); afterwards it follows the chosen row's ID.
	touched bool

	width, height int
	visCols       []int // indices of columns shown at this width
	widths        []int // widths of visCols
	// content is each column's widest cell over all rows (not only those
	// shown or matching the filter, so that scrolling and filtering never
	// move the columns).
	content []int

	sortCol  int // -1: the rows' own order
	sortDesc bool

	filter    string
	filterRe  *regexp.Regexp
	filterErr string
	filtering bool

	empty string

	keys   keys.Table
	fkeys  keys.Filter
	sgr    [styles.NumLevels]styles.SGR
	selSGR styles.SGR
	hdrSGR styles.SGR
	srtSGR styles.SGR
	dimSGR styles.SGR
}

// New returns a table with the given columns, styled by st.
func New(cols []Column, st *styles.Styles) Model {
	m := Model{cols: cols, sortCol: -1, keys: keys.DefaultTable(), fkeys: keys.DefaultFilter(), empty: "no rows"}
	for i := range m.sgr {
		if styles.Level(i) == styles.Normal {
			continue // the terminal's own foreground reads best on any background
		}
		m.sgr[i] = styles.Of(st.Levels[i])
	}
	m.selSGR = styles.Of(st.Selected)
	m.hdrSGR = styles.Of(st.Header)
	m.srtSGR = styles.Of(st.HeaderSorted)
	m.dimSGR = styles.Of(st.Muted)
	m.SetSize(80, 10)
	return m
}

// KeyBindings returns the table's keys (for help).
func (m Model) KeyBindings() []key.Binding { return m.keys.Bindings() }

// SetEmpty sets the text shown when there are no rows at all.
func (m *Model) SetEmpty(s string) { m.empty = s }

// SetSize sets the table's outer size: one header line, the rows, and one
// footer line (filter and row count).
func (m *Model) SetSize(w, h int) {
	if w < 10 {
		w = 10
	}
	if h < 3 {
		h = 3
	}
	m.width, m.height = w, h
	m.layout()
	m.clamp()
}

// Height is the table's outer height (header, rows and footer lines).
func (m Model) Height() int { return m.height }

// SetSort sorts by column col (-1: none), descending if desc.
func (m *Model) SetSort(col int, desc bool) {
	id := m.selectedID()
	m.sortCol, m.sortDesc = col, desc
	m.recompute(id)
	m.layout() // the sorted column's header needs room for its arrow
}

// Sort returns the sort column and direction.
func (m Model) Sort() (col int, desc bool) { return m.sortCol, m.sortDesc }

// SetFilter applies a filter as if typed (see the package doc for syntax).
func (m *Model) SetFilter(f string) {
	id := m.selectedID()
	m.filter = f
	m.compileFilter()
	m.recompute(id)
}

// Filter returns the current filter text.
func (m Model) Filter() string { return m.filter }

// Filtering reports whether the filter line is taking keystrokes.
func (m Model) Filtering() bool { return m.filtering }

// CapturesKey reports whether the table wants this key before any global
// handler: everything while typing a filter, and esc while a filter is set
// (esc clears the filter before it goes back).
func (m Model) CapturesKey(msg tea.KeyMsg) bool {
	if m.filtering {
		return true
	}
	return m.filter != "" && key.Matches(msg, m.fkeys.Cancel)
}

// SetRows replaces the rows. The cursor stays on the row with the same ID.
func (m *Model) SetRows(rows []Row) {
	id := m.selectedID()
	m.rows = rows
	m.content = contentWidths(len(m.cols), rows)
	m.recompute(id)
	m.layout()
	m.clamp()
}

// contentWidths is the widest cell of each column.
func contentWidths(n int, rows []Row) []int {
	out := make([]int, n)
	for i := range rows {
		for c, s := range rows[i].Cells {
			// A cell is never wider than its length in bytes (ASCII is
			// one cell a byte, wider characters take more bytes than
			// cells), so most cells are settled without measuring.
			if c < n && len(s) > out[c] {
				out[c] = max(out[c], cellWidth(s))
			}
		}
	}
	return out
}

// cellWidth is s's width in cells (len for printable ASCII).
func cellWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || s[i] < 0x20 {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

// Prepared is a row set already filtered and sorted, built off the UI
// goroutine with Prepare so that a refresh of 10,000 rows costs Update only
// a slice swap and a cursor search.
type Prepared struct {
	rows    []Row
	view    []int
	content []int
	col     int
	desc    bool
	filter  string
}

// Prepare filters and sorts rows as a table with these columns, sort and
// filter would. It touches no table state: call it from a tea.Cmd.
func Prepare(cols []Column, rows []Row, sortCol int, desc bool, filter string) Prepared {
	t := Model{cols: cols, rows: rows, sortCol: sortCol, sortDesc: desc, filter: filter, height: 3}
	t.compileFilter()
	t.recompute("")
	return Prepared{rows: rows, view: t.view, content: contentWidths(len(cols), rows), col: sortCol, desc: desc, filter: filter}
}

// SetPrepared installs rows from Prepare. If the user changed the sort or
// the filter since Prepare started, the view is recomputed here instead.
func (m *Model) SetPrepared(p Prepared) {
	if p.col != m.sortCol || p.desc != m.sortDesc || p.filter != m.filter {
		m.SetRows(p.rows)
		return
	}
	id := m.selectedID()
	m.rows, m.view, m.content = p.rows, p.view, p.content
	m.follow(id)
	m.layout()
	m.clamp()
}

// Params returns what Prepare needs: the sort column, direction and filter.
func (m Model) Params() (sortCol int, desc bool, filter string) {
	return m.sortCol, m.sortDesc, m.filter
}

// Columns returns the table's columns.
func (m Model) Columns() []Column { return m.cols }

// Rows returns all rows (unfiltered).
func (m Model) Rows() []Row { return m.rows }

// Len is the number of rows shown (after the filter).
func (m Model) Len() int { return len(m.view) }

// Cursor is the cursor's index among the rows shown.
func (m Model) Cursor() int { return m.cursor }

// Offset is the index of the first row on screen.
func (m Model) Offset() int { return m.offset }

// Selected returns the row under the cursor.
func (m Model) Selected() (Row, bool) {
	if m.cursor < 0 || m.cursor >= len(m.view) {
		return Row{}, false
	}
	return m.rows[m.view[m.cursor]], true
}

// VisibleRow returns the i-th row shown (after filter and sort).
func (m Model) VisibleRow(i int) (Row, bool) {
	if i < 0 || i >= len(m.view) {
		return Row{}, false
	}
	return m.rows[m.view[i]], true
}

// Select moves the cursor to the row with this ID, if shown.
func (m *Model) Select(id string) bool {
	for i, r := range m.view {
		if m.rows[r].ID == id {
			m.cursor = i
			m.touched = true
			m.clamp()
			return true
		}
	}
	return false
}

func (m Model) selectedID() string {
	if r, ok := m.Selected(); ok {
		return r.ID
	}
	return ""
}

func (m Model) bodyHeight() int { return m.height - 2 }

// Update handles keys and the mouse wheel.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		if m.filtering {
			m.updateFilter(msg)
			return m, nil
		}
		m.updateKey(msg)
	case tea.MouseMsg:
		if msg.Action != tea.MouseActionPress {
			break
		}
		switch msg.Button {
		case tea.MouseButtonWheelUp, tea.MouseButtonWheelDown:
			m.touched = true
		}
		switch msg.Button {
		case tea.MouseButtonWheelUp:
			m.move(-wheelStep)
		case tea.MouseButtonWheelDown:
			m.move(wheelStep)
		case tea.MouseButtonLeft:
			m.click(msg.X, msg.Y)
		}
	}
	return m, nil
}

// click handles a left click at (x, y), relative to the table's top-left:
// on the header it sorts by that column (again: reverses), on a row it
// selects the row.
func (m *Model) click(x, y int) {
	switch {
	case y == 0:
		if n := m.columnAt(x); n >= 0 {
			m.sortByVisible(n)
		}
	case y >= 1 && y <= m.bodyHeight():
		if i := m.offset + y - 1; i < len(m.view) {
			m.cursor, m.touched = i, true
			m.clamp()
		}
	}
}

// columnAt is the index among the visible columns at cell x, or -1.
func (m Model) columnAt(x int) int {
	x -= gutterW
	for i, w := range m.widths {
		if x >= 0 && x < w+gap {
			return i
		}
		x -= w + gap
	}
	return -1
}

func (m *Model) updateKey(msg tea.KeyMsg) {
	page := m.bodyHeight()
	switch {
	case key.Matches(msg, m.keys.Up, m.keys.Down, m.keys.PageUp, m.keys.PageDown, m.keys.Home, m.keys.End):
		m.touched = true
	}
	switch {
	case key.Matches(msg, m.keys.Up):
		m.move(-1)
	case key.Matches(msg, m.keys.Down):
		m.move(1)
	case key.Matches(msg, m.keys.PageUp):
		m.move(-page)
	case key.Matches(msg, m.keys.PageDown):
		m.move(page)
	case key.Matches(msg, m.keys.Home):
		m.cursor = 0
		m.clamp()
	case key.Matches(msg, m.keys.End):
		m.cursor = len(m.view) - 1
		m.clamp()
	case key.Matches(msg, m.keys.Filter):
		m.filtering = true
	case key.Matches(msg, m.fkeys.Cancel):
		if m.filter != "" {
			m.SetFilter("")
		}
	case key.Matches(msg, m.keys.SortCol):
		n, _ := strconv.Atoi(msg.String())
		m.sortByVisible(n - 1)
	case key.Matches(msg, m.keys.SortNext):
		m.stepSort(1)
	case key.Matches(msg, m.keys.SortPrev):
		m.stepSort(-1)
	case key.Matches(msg, m.keys.SortFlip):
		if m.sortCol < 0 && len(m.visCols) > 0 {
			m.SetSort(m.visCols[0], true)
		} else {
			m.SetSort(m.sortCol, !m.sortDesc)
		}
	}
}

// sortByVisible sorts by the n-th column on screen; again toggles direction.
// Numeric columns start descending (biggest lag first), text ascending.
func (m *Model) sortByVisible(n int) {
	if n < 0 || n >= len(m.visCols) {
		return
	}
	c := m.visCols[n]
	if c == m.sortCol {
		m.SetSort(c, !m.sortDesc)
		return
	}
	m.SetSort(c, m.cols[c].Numeric)
}

func (m *Model) stepSort(d int) {
	if len(m.visCols) == 0 {
		return
	}
	pos := -1
	for i, c := range m.visCols {
		if c == m.sortCol {
			pos = i
		}
	}
	pos = ((pos+d)%len(m.visCols) + len(m.visCols)) % len(m.visCols)
	c := m.visCols[pos]
	m.SetSort(c, m.cols[c].Numeric)
}

func (m *Model) updateFilter(msg tea.KeyMsg) {
	switch {
	case key.Matches(msg, m.fkeys.Accept):
		m.filtering = false
	case key.Matches(msg, m.fkeys.Cancel):
		m.filtering = false
		m.SetFilter("")
	default:
		if f, ok := textfield.Edit(m.filter, msg); ok && f != m.filter {
			m.SetFilter(f)
		}
	}
}

func (m *Model) move(d int) {
	m.cursor += d
	m.clamp()
}

// clamp keeps the cursor in range and on screen.
func (m *Model) clamp() {
	n := len(m.view)
	if m.cursor >= n {
		m.cursor = n - 1
	}
	if m.cursor < 0 {
		m.cursor = 0
	}
	h := m.bodyHeight()
	if m.offset > m.cursor {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	if m.offset > n-h {
		m.offset = n - h
	}
	if m.offset < 0 {
		m.offset = 0
	}
}

func (m *Model) compileFilter() {
	m.filterRe, m.filterErr = nil, ""
	pat, isRe := regexPattern(m.filter)
	if !isRe {
		return
	}
	re, err := regexp.Compile("(?i)" + pat)
	if err != nil {
		m.filterErr = "bad regex"
		return
	}
	m.filterRe = re
}

// regexPattern reports whether f is a regex filter and returns its pattern.
func regexPattern(f string) (string, bool) {
	switch {
	case strings.HasPrefix(f, "~"):
		return f[1:], true
	case strings.HasPrefix(f, "r:"):
		return f[2:], true
	}
	return f, false
}

func (m *Model) matches(r Row, lower string) bool {
	if m.filterRe != nil {
		for _, c := range r.Cells {
			if m.filterRe.MatchString(c) {
				return true
			}
		}
		return false
	}
	if m.filterErr != "" {
		return true // a half-typed regex shows everything rather than nothing
	}
	for _, c := range r.Cells {
		if containsFold(c, lower) {
			return true
		}
	}
	return false
}

// containsFold is strings.Contains(strings.ToLower(s), lower) without
// allocating for ASCII text.
func containsFold(s, lower string) bool {
	if lower == "" {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), lower)
		}
	}
	n := len(lower)
outer:
	for i := 0; i+n <= len(s); i++ {
		for j := 0; j < n; j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				continue outer
			}
		}
		return true
	}
	return false
}

// recompute rebuilds the filtered, sorted view and puts the cursor back on id.
func (m *Model) recompute(id string) {
	view := m.view[:0]
	if cap(view) < len(m.rows) {
		view = make([]int, 0, len(m.rows))
	}
	pat, _ := regexPattern(m.filter)
	if pat == "" {
		for i := range m.rows {
			view = append(view, i)
		}
	} else {
		lower := strings.ToLower(m.filter)
		for i := range m.rows {
			if m.matches(m.rows[i], lower) {
				view = append(view, i)
			}
		}
	}
	m.view = view
	if c := m.sortCol; c >= 0 && c < len(m.cols) {
		numeric, desc, rows := m.cols[c].Numeric, m.sortDesc, m.rows
		sort.SliceStable(view, func(a, b int) bool {
			ra, rb := &rows[view[a]], &rows[view[b]]
			var cmp int
			if numeric {
				cmp = cmpNum(num(ra, c), num(rb, c))
			} else {
				cmp = strings.Compare(cell(ra, c), cell(rb, c))
			}
			if desc {
				cmp = -cmp
			}
			return cmp < 0
		})
	}
	m.follow(id)
	m.clamp()
}

// follow puts the cursor back on the row with this ID, if the user chose
// one; an untouched cursor stays on the first row.
func (m *Model) follow(id string) {
	if !m.touched {
		m.cursor = 0
		return
	}
	if id == "" {
		return
	}
	for i, r := range m.view {
		if m.rows[r].ID == id {
			m.cursor = i
			return
		}
	}
}

func num(r *Row, c int) float64 {
	if c < len(r.Nums) {
		return r.Nums[c]
	}
	return math.NaN()
}

func cell(r *Row, c int) string {
	if c < len(r.Cells) {
		return r.Cells[c]
	}
	return ""
}

// cmpNum orders numbers. NaN ("no value") counts as -Inf, so it goes last
// in the usual descending view of a numeric column (biggest first).
func cmpNum(a, b float64) int {
	if math.IsNaN(a) {
		a = math.Inf(-1)
	}
	if math.IsNaN(b) {
		b = math.Inf(-1)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// layout decides which columns fit and how wide each is. Widths follow
// the content: every column first gets its floor (its Width, and never less
// than its title, with room for the sort arrow on the sorted column, so a
// header is never cut); columns that drop out first when even the floors do
// not fit. The space left goes to the columns whose content is wider than
// their floor, shared by their Flex weights, text columns up to a cap (a long name must not push every number off the
// screen); what is left after that lets capped names grow to their full
// length. Cells still too wide are elided in the middle (see writeCell).
func (m *Model) layout() {
	avail := m.width - gutterW
	vis := make([]int, 0, len(m.cols))
	for i := range m.cols {
		vis = append(vis, i)
	}
	floor := func(c int) int {
		w := max(m.cols[c].Width, ansi.StringWidth(m.cols[c].Title))
		if c == m.sortCol {
			w = max(w, ansi.StringWidth(m.cols[c].Title)+1)
		}
		return w
	}
	need := func(v []int) int {
		t := 0
		for _, c := range v {
			t += floor(c)
		}
		return t + gap*(len(v)-1)
	}
	for len(vis) > 1 && need(vis) > avail {
		drop, best := -1, 0
		for i, c := range vis {
			if d := m.cols[c].Drop; d > best {
				drop, best = i, d
			}
		}
		if drop < 0 {
			break
		}
		vis = append(vis[:drop], vis[drop+1:]...)
	}
	widths := make([]int, len(vis))
	capped := make([]int, len(vis)) // what each column would like, capped
	full := make([]int, len(vis))   // its whole content
	nameCap := max(24, min(48, avail/3))
	for i, c := range vis {
		widths[i] = floor(c)
		content := widths[i]
		if c < len(m.content) {
			content = max(content, m.content[c])
		}
		full[i], capped[i] = content, content
		if !m.cols[c].Right && !m.cols[c].Whole {
			capped[i] = max(widths[i], min(content, nameCap))
		}
	}
	weight := make([]int, len(vis))
	for i, c := range vis {
		weight[i] = max(1, m.cols[c].Flex)
	}
	// Numbers and statuses first: a cut number is a wrong number.
	numbers := make([]int, len(vis))
	for i, c := range vis {
		numbers[i] = widths[i]
		if m.cols[c].Right || m.cols[c].Whole {
			numbers[i] = full[i]
		}
	}
	spare := avail - need2(widths)
	spare = share(widths, numbers, weight, spare)
	// Still short of a number or a status: names give up cells (widest
	// first, down to their title) rather than cut a number.
	for i := range vis {
		for widths[i] < numbers[i] {
			wi := -1
			for j, cj := range vis {
				if m.cols[cj].Right || m.cols[cj].Whole || widths[j] <= max(6, ansi.StringWidth(m.cols[cj].Title)) {
					continue
				}
				if wi < 0 || widths[j] > widths[wi] {
					wi = j
				}
			}
			if wi < 0 {
				break
			}
			widths[wi]--
			widths[i]++
		}
	}
	spare = share(widths, capped, weight, spare)
	share(widths, full, weight, spare)
	// Still too wide (only undroppable columns left): shrink the widest.
	for over := need2(widths) - avail; over > 0; over = need2(widths) - avail {
		wi := 0
		for i := range widths {
			if widths[i] > widths[wi] {
				wi = i
			}
		}
		if widths[wi] <= 3 {
			break
		}
		cut := over
		if cut > widths[wi]-3 {
			cut = widths[wi] - 3
		}
		widths[wi] -= cut
	}
	m.visCols, m.widths = vis, widths
}

// share gives up to spare cells to the columns narrower than want, in
// proportion to their weights and never past want; it returns what is left.
func share(widths, want, weight []int, spare int) int {
	for spare > 0 {
		total := 0
		for i := range widths {
			if want[i] > widths[i] {
				total += weight[i]
			}
		}
		if total == 0 {
			return spare
		}
		given := 0
		for i := range widths {
			if want[i] > widths[i] {
				add := min(want[i]-widths[i], spare*weight[i]/total)
				widths[i] += add
				given += add
			}
		}
		if given == 0 { // fewer cells than shares: one each, left to right
			for i := range widths {
				if given < spare && want[i] > widths[i] {
					widths[i]++
					given++
				}
			}
		}
		spare -= given
	}
	return spare
}

func need2(w []int) int {
	t := 0
	for _, x := range w {
		t += x
	}
	return t + gap*(len(w)-1)
}

// View renders header, visible rows and the footer: exactly height lines,
// each exactly width cells.
func (m Model) View() string {
	var b strings.Builder
	b.Grow((m.width + 32) * m.height)
	m.writeHeader(&b)
	h := m.bodyHeight()
	end := m.offset + h
	if end > len(m.view) {
		end = len(m.view)
	}
	lines := 0
	for i := m.offset; i < end; i++ {
		b.WriteByte('\n')
		m.writeRow(&b, &m.rows[m.view[i]], i == m.cursor)
		lines++
	}
	if len(m.view) == 0 && h > 0 {
		b.WriteByte('\n')
		msg := m.empty
		if len(m.rows) > 0 {
			msg = "no rows match the filter"
		}
		writePadded(&b, m.dimSGR.Wrap(noMark+msg), m.width-gutterW-ansi.StringWidth(msg))
		lines++
	}
	for ; lines < h; lines++ {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(" ", m.width))
	}
	b.WriteByte('\n')
	m.writeFooter(&b)
	return b.String()
}

func writePadded(b *strings.Builder, s string, pad int) {
	b.WriteString(s)
	for ; pad > 0; pad-- {
		b.WriteByte(' ')
	}
}

func (m Model) writeHeader(b *strings.Builder) {
	b.WriteString(noMark)
	for i, c := range m.visCols {
		if i > 0 {
			b.WriteString("  ")
		}
		title := m.cols[c].Title
		sgr := m.hdrSGR
		if c == m.sortCol {
			sgr = m.srtSGR
			arrow := "▲"
			if m.sortDesc {
				arrow = "▼"
			}
			// The arrow always shows: it replaces the title's last letter
			// when the column is exactly as wide as its title.
			if w := m.widths[i]; ansi.StringWidth(title)+1 > w {
				title = ansi.Truncate(title, max(0, w-1), "")
			}
			title += arrow
		}
		b.WriteString(sgr.Prefix)
		writeCell(b, title, m.widths[i], m.cols[c].Right)
		b.WriteString(sgr.Suffix)
	}
	b.WriteString(strings.Repeat(" ", m.trailing()))
}

// trailing is the blank space right of the last column.
func (m Model) trailing() int {
	t := m.width - gutterW - need2(m.widths)
	if t < 0 {
		return 0
	}
	return t
}

func (m Model) writeRow(b *strings.Builder, r *Row, selected bool) {
	if selected {
		b.WriteString(m.selSGR.Prefix)
		b.WriteString(cursorMark)
		for i, c := range m.visCols {
			if i > 0 {
				b.WriteString("  ")
			}
			writeCell(b, cell(r, c), m.widths[i], m.cols[c].Right)
		}
		b.WriteString(strings.Repeat(" ", m.trailing()))
		b.WriteString(m.selSGR.Suffix)
		return
	}
	b.WriteString(noMark)
	if r.CellLevels == nil {
		sgr := m.sgr[r.Level]
		b.WriteString(sgr.Prefix)
		for i, c := range m.visCols {
			if i > 0 {
				b.WriteString("  ")
			}
			writeCell(b, cell(r, c), m.widths[i], m.cols[c].Right)
		}
		b.WriteString(sgr.Suffix)
	} else {
		for i, c := range m.visCols {
			if i > 0 {
				b.WriteString("  ")
			}
			lv := r.Level
			if c < len(r.CellLevels) {
				lv = r.CellLevels[c]
			}
			sgr := m.sgr[lv]
			b.WriteString(sgr.Prefix)
			writeCell(b, cell(r, c), m.widths[i], m.cols[c].Right)
			b.WriteString(sgr.Suffix)
		}
	}
	b.WriteString(strings.Repeat(" ", m.trailing()))
}

// writeCell writes s truncated ("…") or padded to exactly w cells.
func writeCell(b *strings.Builder, s string, w int, right bool) {
	if w <= 0 {
		return
	}
	sw, ascii := len(s), true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || s[i] < 0x20 {
			ascii = false
			break
		}
	}
	if !ascii {
		sw = ansi.StringWidth(s)
	}
	if sw > w {
		if !right && w >= 6 {
			writeElided(b, s, sw, w, ascii)
			return
		}
		if ascii {
			b.WriteString(s[:w-1])
		} else {
			t := ansi.Truncate(s, w-1, "")
			b.WriteString(t)
			for p := w - 1 - ansi.StringWidth(t); p > 0; p-- {
				b.WriteByte(' ')
			}
		}
		b.WriteString("…")
		return
	}
	if right {
		writePadded(b, "", w-sw)
		b.WriteString(s)
		return
	}
	writePadded(b, s, w-sw)
}

// writeElided writes s (sw cells wide) in exactly w cells with its middle
// replaced by "…", so that the ending stays visible: names that differ only
// at the end (orders-by-tenant-7, -11; eu-west-1-canary, -stable) stay
// distinguishable. The tail is about two fifths of the cell, starting at a
// separator when one falls inside it (orders-by-ten…-11).
func writeElided(b *strings.Builder, s string, sw, w int, ascii bool) {
	tail := (w - 1) * 2 / 5
	if ascii {
		t := s[len(s)-tail:]
		if i := strings.IndexAny(t[:len(t)-1], "-_.:/@ "); i >= 0 && len(t)-i >= 2 {
			tail = len(t) - i
		}
		head := w - 1 - tail
		b.WriteString(s[:head])
		b.WriteString("…")
		b.WriteString(s[len(s)-tail:])
		return
	}
	// Wide or escaped text: cut by cells from both ends.
	h := ansi.Truncate(s, w-1-tail, "")
	t := ansi.TruncateLeft(s, sw-tail, "")
	for ansi.StringWidth(t) > tail {
		_, n := utf8.DecodeRuneInString(t)
		t = t[n:]
	}
	b.WriteString(h)
	b.WriteString("…")
	b.WriteString(t)
	for p := w - 1 - ansi.StringWidth(h) - ansi.StringWidth(t); p > 0; p-- {
		b.WriteByte(' ')
	}
}

func (m Model) writeFooter(b *strings.Builder) {
	var left string
	switch {
	case m.filtering:
		left = "/" + m.filter + "█"
	case m.filter != "":
		left = "filter: " + m.filter
	}
	if m.filterErr != "" {
		left += "  (" + m.filterErr + ")"
	}
	right := strconv.Itoa(len(m.view))
	if len(m.view) != len(m.rows) {
		right += "/" + strconv.Itoa(len(m.rows))
	}
	right += " rows"
	if len(m.view) > m.bodyHeight() {
		right = strconv.Itoa(m.offset+1) + "-" + strconv.Itoa(min(m.offset+m.bodyHeight(), len(m.view))) + " of " + right
	}
	avail := m.width - gutterW
	rw := len(right)
	lw := ansi.StringWidth(left)
	if lw+rw+2 > avail {
		left = ansi.Truncate(left, max(0, avail-rw-3), "…")
		lw = ansi.StringWidth(left)
	}
	line := noMark + left + strings.Repeat(" ", max(0, avail-lw-rw)) + right
	if ansi.StringWidth(line) > m.width {
		line = ansi.Truncate(line, m.width, "")
	}
	b.WriteString(m.dimSGR.Wrap(line))
	if pad := m.width - ansi.StringWidth(line); pad > 0 {
		b.WriteString(strings.Repeat(" ", pad))
	}
}
