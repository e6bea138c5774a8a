package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/NimbleMarkets/ntcharts/sparkline"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

func init() {
	RegisterPageSpec(PageSpec{Name: "group", Help: "one group: members, per-partition lag, age chart", Factory: newGroup, Complete: groupNames})
}

// Columns of a group's partition table.
const (
	colPTopic = iota
	colPPart
	colPCommitted
	colPEnd
	colPLag
	colPAge
	colPEvent
	colPStatus
	colPETA
	colPLoss
	colPMember
	numPCols
)

func partitionLagColumns() []table.Column {
	return []table.Column{
		colPTopic:     {Title: "TOPIC", Width: 8, Flex: 1},
		colPPart:      {Title: "P", Width: 3, Right: true, Numeric: true},
		colPCommitted: {Title: "COMMITTED", Width: 9, Right: true, Numeric: true},
		colPEnd:       {Title: "END", Width: 7, Right: true, Numeric: true},
		colPLag:       {Title: "LAG", Width: 6, Right: true, Numeric: true},
		colPAge:       {Title: "AGE", Width: 6, Right: true, Numeric: true},
		// Event-time age (lag.event_time topics; blank elsewhere): the
		// first column to go on a narrow terminal.
		colPEvent:  {Title: "EVENT AGE", Width: 9, Right: true, Numeric: true, Drop: 3},
		colPStatus: {Title: "STATUS", Width: 8, Whole: true},
		colPETA:    {Title: "CATCH-UP", Width: 8, Right: true, Numeric: true},
		colPLoss:   {Title: "LOSS IN", Width: 7, Right: true, Numeric: true},
		colPMember: {Title: "MEMBER", Width: 16, Flex: 1, Drop: 1},
	}
}

// groupPage shows one group: a summary, its members, a chart of its maximum
// age and total lag over the last minutes, and one row per partition with
// the worst (oldest) first.
type groupPage struct {
	tablePage
	name string // as given (raw group name, or its sanitised form)
	// ageRows and lagRows are the charts drawn once per refresh: ntcharts
	// renders each canvas cell through lipgloss (~1 ms a frame), so the
	// frame reuses these strings instead of calling View per keypress.
	ageRows, lagRows []string
}

// chartHeight is the height of the sparklines (plus one label line).
const chartHeight = 3

func newGroup(env PageEnv) Page {
	p := &groupPage{}
	if len(env.Args) > 0 {
		p.name = strings.Join(env.Args, " ")
	}
	p.self = p
	p.env, p.title = env, sanitize.Text(p.name)
	p.tbl = table.New(partitionLagColumns(), env.Styles)
	p.tbl.SetSort(colPAge, true)
	p.tbl.SetEmpty("the group has no committed offsets or assignments")
	p.rows, p.async = p.partitionRows, true
	p.extra = p.drawCharts
	p.install = func(v any) {
		c := v.(charts)
		p.ageRows, p.lagRows = c.age, c.lag
	}
	p.enter = func(r table.Row) tea.Cmd {
		topic, _, _ := strings.Cut(r.ID, "\x00")
		return Open("topic", topic)
	}
	p.header = p.headerView
	p.headerLines = func(h int) int {
		if h < 14 {
			return 2 // summary and members only: the rows matter more
		}
		return 3 + chartHeight
	}
	p.keys = actionKeys(env, "group")
	for i := range p.keys {
		run := p.keys[i].run
		// Actions on a group page act on the group, whatever row is selected.
		p.keys[i].run = func(table.Row, bool) tea.Cmd { return run(table.Row{ID: p.groupName()}, true) }
	}
	// Actions on a partition row (the record viewer's "v") get the row's
	// raw topic, partition and the group's committed offset on it. They go
	// before the group's actions: reading comes before changing, and the
	// status line shows the first keys.
	var rowKeys []pageKey
	for _, k := range actionKeys(env, "partition") {
		run := k.run
		k.run = func(r table.Row, ok bool) tea.Cmd {
			t, found := p.partitionTarget(r)
			if !ok || !found {
				return nil
			}
			return run(table.Row{ID: t.Encode()}, true)
		}
		rowKeys = append(rowKeys, k)
	}
	p.keys = append(append([]pageKey{membersKey(p.groupName)}, rowKeys...), p.keys...)
	return p
}

// partitionTarget finds the partition behind a row (whose cells are
// sanitised) in the last snapshot.
func (p *groupPage) partitionTarget(r table.Row) (PartitionTarget, bool) {
	topic, part, _ := strings.Cut(r.ID, "\x00")
	g, ok := p.lookup(p.snap)
	if !ok {
		return PartitionTarget{}, false
	}
	for _, pl := range g.Partitions {
		if strconv.Itoa(int(pl.Partition)) == part && sanitize.Text(pl.Topic.String()) == topic {
			return PartitionTarget{Group: g.Group, Topic: pl.Topic.String(), Partition: pl.Partition, Committed: pl.Committed}, true
		}
	}
	return PartitionTarget{}, false
}

// Update redraws the charts on resize (they are drawn once per refresh).
func (p *groupPage) Update(msg tea.Msg) (Page, tea.Cmd) {
	_, cmd := p.tablePage.Update(msg)
	if ws, ok := msg.(tea.WindowSizeMsg); ok && p.snap != nil {
		snap, draw := p.snap, p.drawCharts
		redraw := p.env.Route(func() tea.Msg { return chartsMsg{snap: snap, c: draw(snap, ws.Width)} })
		return p, tea.Batch(cmd, redraw)
	}
	if m, ok := msg.(chartsMsg); ok && m.snap == p.snap {
		if c, ok := m.c.(charts); ok {
			p.ageRows, p.lagRows = c.age, c.lag
			p.headerCache = nil
		}
	}
	return p, cmd
}

// chartsMsg delivers charts redrawn for a new width.
type chartsMsg struct {
	snap *Snapshot
	c    any
}

// groupName is the group's real name once seen in a snapshot.
func (p *groupPage) groupName() string {
	if g, ok := p.lookup(p.snap); ok {
		return g.Group
	}
	return p.name
}

// lookup finds the group by its raw or sanitised name.
func (p *groupPage) lookup(s *Snapshot) (monitor.Group, bool) {
	if s == nil {
		return monitor.Group{}, false
	}
	if g, ok := s.Group(p.name); ok {
		return g, true
	}
	for _, g := range s.Groups {
		if sanitize.Text(g.Group) == p.name {
			return g, true
		}
	}
	return monitor.Group{}, false
}

// partitionRows runs off the UI goroutine: it reads only the snapshot and
// p.name, which never changes.
func (p *groupPage) partitionRows(s *Snapshot) []table.Row {
	g, ok := p.lookup(s)
	if !ok {
		return nil
	}
	clients := map[string]string{}
	for _, m := range g.Members {
		c := m.ClientID
		if m.Host != "" {
			c += "@" + strings.TrimPrefix(m.Host, "/")
		}
		clients[m.ID] = c
	}
	// One backing array for all cells and sort keys: 10,000 rows are built
	// per refresh, and per-row slices were most of the garbage.
	n := len(g.Partitions)
	cells := make([]string, n*numPCols)
	nums := make([]float64, n*numPCols)
	names := rowNames{clients: clients, owners: map[lag.Name]string{}, topics: map[lag.Name]string{}}
	rows := make([]table.Row, 0, n)
	for i, pl := range g.Partitions {
		c, k := cells[i*numPCols:(i+1)*numPCols:(i+1)*numPCols], nums[i*numPCols:(i+1)*numPCols:(i+1)*numPCols]
		rows = append(rows, partitionLagRow(pl, names, c, k))
	}
	return rows
}

// rowNames caches the sanitised text of the topics and members a group's
// rows name: thousands of rows share a few of each.
type rowNames struct {
	clients map[string]string // member id -> client id@host
	owners  map[lag.Name]string
	topics  map[lag.Name]string
}

func (n rowNames) topic(t lag.Name) string {
	s, ok := n.topics[t]
	if !ok {
		s = sanitize.Text(t.String())
		n.topics[t] = s
	}
	return s
}

func (n rowNames) owner(o lag.Name) string {
	if o == 0 {
		return "(unassigned)"
	}
	s, ok := n.owners[o]
	if !ok {
		id := o.String()
		c, known := n.clients[id]
		if !known {
			c = id
		}
		s = sanitize.Text(c)
		n.owners[o] = s
	}
	return s
}

// partitionLagRow renders one partition of a group.
// cells and nums are the row's storage (numPCols each).
func partitionLagRow(pl lag.PartitionLag, names rowNames, cells []string, nums []float64) table.Row {
	cells[colPTopic] = names.topic(pl.Topic)
	cells[colPPart] = strconv.Itoa(int(pl.Partition))
	nums[colPPart] = num(pl.Partition)
	cells[colPCommitted] = fmtOffset(pl.Committed)
	nums[colPCommitted] = num(pl.Committed)
	cells[colPEnd] = strconv.FormatInt(pl.End, 10)
	nums[colPEnd] = num(pl.End)
	cells[colPLag] = strconv.FormatInt(pl.Lag, 10)
	nums[colPLag] = num(pl.Lag)
	ageKnown := pl.AgeKnown || pl.Lag == 0
	cells[colPAge] = fmtAge(pl.Age, ageKnown)
	if pl.AgeApprox && pl.Age > 0 {
		cells[colPAge] = "≤" + cells[colPAge]
	}
	if pl.ClockSkew {
		cells[colPAge] += "⚠"
	}
	nums[colPAge] = durKey(pl.Age, ageKnown)
	cells[colPEvent], nums[colPEvent] = eventAgeCell(pl)
	status := pl.Status.String()
	if pl.Status == lag.EXPIRED && pl.Lost > 0 {
		status = fmt.Sprintf("EXPIRED -%d", pl.Lost)
	}
	if pl.Breach {
		status += "!"
	}
	cells[colPStatus] = status
	switch {
	case pl.Lag == 0:
		cells[colPETA], nums[colPETA] = "0s", 0
	case pl.FallingBehind && pl.Status == lag.OK:
		// Consuming as fast as producing with a small, young lag: the
		// backlog is steady, not growing; "behind" would cry wolf.
		cells[colPETA], nums[colPETA] = "steady", 1e17
	case pl.FallingBehind:
		cells[colPETA], nums[colPETA] = "behind", 1e18
	case pl.ETAKnown:
		cells[colPETA], nums[colPETA] = durations.Format(pl.ETA), pl.ETA.Seconds()
	default:
		cells[colPETA], nums[colPETA] = "-", unknown
	}
	if pl.TimeToLossKnown {
		cells[colPLoss], nums[colPLoss] = durations.Format(pl.TimeToLoss), pl.TimeToLoss.Seconds()
		if pl.RetentionRisk {
			cells[colPLoss] += "!"
		}
	} else {
		cells[colPLoss], nums[colPLoss] = "-", unknown
	}
	cells[colPMember] = names.owner(pl.Owner)
	lv := statusLevel(pl.Status)
	if pl.Breach && lv < styles.Bad {
		lv = styles.Bad
	}
	var cellLv []styles.Level
	if pl.RetentionRisk {
		cellLv = make([]styles.Level, numPCols)
		for i := range cellLv {
			cellLv[i] = lv
		}
		cellLv[colPLoss] = styles.Bad
	}
	return table.Row{
		ID:         cells[colPTopic] + "\x00" + cells[colPPart],
		Cells:      cells,
		Nums:       nums,
		Level:      lv,
		CellLevels: cellLv,
	}
}

// eventSummary is the group's event-time freshness ("" when none of its
// topics has an event-time rule).
func eventSummary(g lag.GroupLag) string {
	if !g.MaxEventAgeKnown && g.EventUnknown == 0 {
		return ""
	}
	var parts []string
	if g.MaxEventAgeKnown {
		s := "event age " + durations.Format(g.MaxEventAge)
		if g.EventSLO > 0 {
			s += " (SLO " + durations.Format(g.EventSLO)
			if g.EventBreach {
				s += " BREACHED"
			}
			s += ")"
		}
		parts = append(parts, s)
	}
	if g.EventUnknown > 0 {
		parts = append(parts, fmt.Sprintf("%d without event time", g.EventUnknown))
	}
	if g.EventClockErrors > 0 {
		parts = append(parts, fmt.Sprintf("%d with producer clock ahead", g.EventClockErrors))
	}
	return strings.Join(parts, ", ")
}

// eventAgeCell is the event-time age: blank without a rule, "?" plus why
// when the field was missing or unparsable, "⚠" for a producer clock ahead.
func eventAgeCell(pl lag.PartitionLag) (string, float64) {
	switch {
	case !pl.EventRule:
		return "", unknown
	case pl.EventAgeKnown:
		c := durations.Format(pl.EventAge)
		if pl.EventClockError {
			c += "⚠"
		}
		return c, pl.EventAge.Seconds()
	case pl.EventState > lag.EventFound:
		return "? " + pl.EventState.String(), unknown
	}
	return "?", unknown
}

// charts are the two sparklines, drawn off the UI goroutine.
type charts struct{ age, lag []string }

// drawCharts draws the group's history as two sparklines of half the page
// width each. It runs in a tea.Cmd (ntcharts renders every canvas cell
// through lipgloss, about 1 ms), so it reads only the snapshot and p.name.
func (p *groupPage) drawCharts(s *Snapshot, width int) any {
	g, ok := p.lookup(s)
	if !ok {
		return nil
	}
	w := max(10, (width-4)/2)
	age := sparkline.New(w, chartHeight, sparkline.WithStyle(p.env.Styles.ChartAge))
	lg := sparkline.New(w, chartHeight, sparkline.WithStyle(p.env.Styles.ChartLag))
	hist := g.History
	if len(hist) > w {
		hist = hist[len(hist)-w:]
	}
	for _, pt := range hist {
		age.Push(pt.MaxAge.Seconds())
		lg.Push(float64(pt.TotalLag))
	}
	age.Draw()
	lg.Draw()
	return charts{age: strings.Split(age.View(), "\n"), lag: strings.Split(lg.View(), "\n")}
}

func (p *groupPage) headerView(s *Snapshot, w int) []string {
	st := p.env.Styles
	g, ok := p.lookup(s)
	if !ok {
		return []string{st.Levels[styles.Bad].Render("group " + sanitize.Text(p.name) + " not found in the last refresh")}
	}
	status := st.Levels[statusLevel(g.Status)].Render(g.Status.String())
	age := "max age " + fmtAge(g.MaxAge, g.MaxAgeKnown || g.TotalLag == 0)
	if g.MaxAgeKnown && g.MaxAge > 0 {
		age += fmt.Sprintf(" (%s-%d)", sanitize.Text(g.MaxAgeTopic), g.MaxAgePartition)
	}
	slo := "SLO " + durations.Format(g.SLO)
	if g.Breach {
		slo = st.Levels[styles.Bad].Render(slo + " BREACHED")
	}
	summary := strings.Join([]string{
		sanitize.Text(g.State), status, age, fmt.Sprintf("lag %d", g.TotalLag), slo,
	}, " · ")
	if g.AgeSkew >= 3 {
		summary += st.Levels[styles.Warn].Render(fmt.Sprintf(" · age skew %.0fx", g.AgeSkew))
	}
	if ev := eventSummary(g.GroupLag); ev != "" {
		lv := styles.Normal
		if g.EventBreach || g.EventClockErrors > 0 {
			lv = styles.Bad
		}
		summary += st.Levels[lv].Render(" · " + ev)
	}
	if g.Err != "" {
		summary = st.Levels[styles.Bad].Render("error: " + sanitize.Text(g.Err))
	}

	members := st.Label.Render(fmt.Sprintf("members (%d) ", len(g.Members)))
	var ms []string
	for _, m := range g.Members {
		ms = append(ms, fmt.Sprintf("%s@%s[%d]", sanitize.Text(m.ClientID), sanitize.Text(strings.TrimPrefix(m.Host, "/")), len(m.Assigned)))
	}
	if len(ms) == 0 {
		ms = append(ms, "none")
	}
	if len(g.IdleMembers) > 0 {
		ms = append(ms, st.Levels[styles.Warn].Render(fmt.Sprintf("%d idle (no partitions)", len(g.IdleMembers))))
	}
	members += strings.Join(ms, "  ")

	lines := []string{fit(summary, w), fit(members, w)}
	if p.maxHeader() <= 2 {
		return lines
	}
	span := "no history yet"
	if n := len(g.History); n > 1 {
		span = "last " + durations.Format(g.History[n-1].At.Sub(g.History[0].At))
	}
	cw := max(10, (w-4)/2)
	peakAge, peakLag := time.Duration(0), int64(0)
	for _, pt := range g.History {
		peakAge = max(peakAge, pt.MaxAge)
		peakLag = max(peakLag, pt.TotalLag)
	}
	l1 := padRight(fit(st.ChartAge.Render("max age")+st.Muted.Render(fmt.Sprintf(" peak %s, %s", durations.Format(peakAge), span)), cw), cw+4)
	l2 := fit(st.ChartLag.Render("total lag")+st.Muted.Render(fmt.Sprintf(" peak %d", peakLag)), cw)
	lines = append(lines, l1+l2)
	ageRows, lagRows := p.ageRows, p.lagRows
	for i := 0; i < chartHeight; i++ {
		var a, b string
		if i < len(ageRows) {
			a = ageRows[i]
		}
		if i < len(lagRows) {
			b = lagRows[i]
		}
		lines = append(lines, padRight(fit(a, cw), cw+4)+fit(b, cw))
	}
	lines = append(lines, "")
	return lines
}

// fit cuts s to w cells.
func fit(s string, w int) string {
	if ansi.StringWidth(s) > w {
		return ansi.Truncate(s, w, "…")
	}
	return s
}
