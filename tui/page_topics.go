package tui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

func init() {
	RegisterPageSpec(PageSpec{Name: "topics", Aliases: []string{"tp"}, Help: "topics: partitions, messages, produce rate, ISR, hot", Factory: newTopics})
	RegisterPageSpec(PageSpec{Name: "topic", Help: "one topic: partitions with leader, replicas, ISR, offsets", Factory: newTopic, Complete: topicNames})
	RegisterPageSpec(PageSpec{Name: "configs", Help: "one topic's configs", Factory: newConfigs, Complete: topicNames})
}

const (
	colTName = iota
	colTParts
	colTRF
	colTMsgs
	colTRate
	colTISR
	colTHot
	numTCols
)

func topicColumns() []table.Column {
	return []table.Column{
		colTName:  {Title: "TOPIC", Width: 16, Flex: 1},
		colTParts: {Title: "PARTS", Width: 5, Right: true, Numeric: true},
		colTRF:    {Title: "RF", Width: 2, Right: true, Numeric: true, Drop: 2},
		colTMsgs:  {Title: "MESSAGES", Width: 10, Right: true, Numeric: true},
		colTRate:  {Title: "RATE", Width: 7, Right: true, Numeric: true},
		colTISR:   {Title: "ISR", Width: 14, Whole: true},
		colTHot:   {Title: "HOT", Width: 10, Drop: 1},
	}
}

// worstISR is a topic's worst partition health and how many are unhealthy.
func worstISR(t monitor.Topic) (lag.ISRClass, int) {
	worst, n := lag.Healthy, 0
	for _, h := range t.Health {
		if h.Class != lag.Healthy {
			n++
		}
		worst = max(worst, h.Class)
	}
	return worst, n
}

func topicRows(s *Snapshot) []table.Row {
	rows := make([]table.Row, 0, len(s.Topics))
	for _, t := range s.Topics {
		cells := make([]string, numTCols)
		nums := make([]float64, numTCols)
		cells[colTName] = sanitize.Text(t.Name)
		cells[colTParts], nums[colTParts] = fmt.Sprint(len(t.Partitions)), num(len(t.Partitions))
		cells[colTRF], nums[colTRF] = fmt.Sprint(t.ReplicationFactor), num(t.ReplicationFactor)
		var msgs int64
		for _, p := range t.Partitions {
			msgs += max(0, p.HighWatermark-p.LogStart)
		}
		cells[colTMsgs], nums[colTMsgs] = fmt.Sprint(msgs), num(msgs)
		known := false
		for _, r := range t.Rates {
			known = known || r.Known
		}
		cells[colTRate], nums[colTRate] = fmtRate(t.Skew.TotalRate, known), t.Skew.TotalRate
		worst, n := worstISR(t)
		lv := isrLevel(worst)
		switch worst {
		case lag.Healthy:
			cells[colTISR] = "ok"
		case lag.UnderMinISR:
			cells[colTISR] = fmt.Sprintf("%d under min!", n)
		case lag.Offline:
			cells[colTISR] = fmt.Sprintf("%d offline!", n)
		default:
			cells[colTISR] = fmt.Sprintf("%d under-rep", n)
		}
		nums[colTISR] = num(int(worst)*100000 + n)
		if len(t.Skew.Hot) > 0 {
			h := t.Skew.Hot[0]
			cells[colTHot] = fmt.Sprintf("p%d %.1fx", h.Partition, h.Ratio)
			nums[colTHot] = h.Ratio
			if lv < styles.Warn {
				lv = styles.Warn
			}
		} else {
			nums[colTHot] = unknown
		}
		if t.Internal {
			lv = styles.Dim
		}
		rows = append(rows, table.Row{ID: t.Name, Cells: cells, Nums: nums, Level: lv})
	}
	return rows
}

type topicsPage struct{ tablePage }

func newTopics(env PageEnv) Page {
	p := &topicsPage{}
	p.self = p
	p.env, p.title = env, "topics"
	p.tbl = table.New(topicColumns(), env.Styles)
	p.tbl.SetSort(colTName, false)
	p.tbl.SetEmpty("no topics")
	p.rows, p.async = topicRows, true
	p.enter = func(r table.Row) tea.Cmd { return Open("topic", r.ID) }
	p.keys = actionKeys(env, "topic")
	return p
}

func topicNames(s *Snapshot) []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.Topics))
	for _, t := range s.Topics {
		out = append(out, sanitize.Text(t.Name))
	}
	return out
}

// findTopic finds a topic by its raw or sanitised name.
func findTopic(s *Snapshot, name string) (monitor.Topic, bool) {
	if s == nil {
		return monitor.Topic{}, false
	}
	for _, t := range s.Topics {
		if t.Name == name {
			return t, true
		}
	}
	for _, t := range s.Topics {
		if sanitize.Text(t.Name) == name {
			return t, true
		}
	}
	return monitor.Topic{}, false
}

const (
	colPPartition = iota
	colPLeader
	colPReplicas
	colPISR
	colPStart
	colPEndOff
	colPRate
	colPState
	numTPCols
)

func topicPartitionColumns() []table.Column {
	return []table.Column{
		colPPartition: {Title: "P", Width: 3, Right: true, Numeric: true},
		colPLeader:    {Title: "LEADER", Width: 6, Right: true, Numeric: true},
		colPReplicas:  {Title: "REPLICAS", Width: 8},
		colPISR:       {Title: "ISR", Width: 8},
		colPStart:     {Title: "START", Width: 9, Right: true, Numeric: true},
		colPEndOff:    {Title: "END", Width: 9, Right: true, Numeric: true},
		colPRate:      {Title: "RATE", Width: 7, Right: true, Numeric: true},
		colPState:     {Title: "STATE", Width: 12, Flex: 1},
	}
}

// topicPage lists one topic's partitions: leader, replicas and ISR (problems
// highlighted), log start and end, produce rate, hot marker. "C" opens the
// topic's configs.
type topicPage struct {
	tablePage
	name string
}

func newTopic(env PageEnv) Page {
	p := &topicPage{name: strings.Join(env.Args, " ")}
	p.self = p
	p.env, p.title = env, sanitize.Text(p.name)
	p.tbl = table.New(topicPartitionColumns(), env.Styles)
	p.tbl.SetSort(colPPartition, false)
	p.tbl.SetEmpty("no partitions")
	p.rows, p.async = p.partitionRows, true
	p.header = p.headerView
	p.headerLines = func(int) int { return 3 }
	p.keys = append([]pageKey{{
		binding: key.NewBinding(key.WithKeys("C"), key.WithHelp("C", "configs")),
		run:     func(table.Row, bool) tea.Cmd { return Open("configs", p.name) },
	}}, actionKeys(env, "topic")...)
	for i := 1; i < len(p.keys); i++ {
		run := p.keys[i].run
		p.keys[i].run = func(table.Row, bool) tea.Cmd { return run(table.Row{ID: p.topicName()}, true) }
	}
	return p
}

func (p *topicPage) topicName() string {
	if t, ok := findTopic(p.snap, p.name); ok {
		return t.Name
	}
	return p.name
}

func (p *topicPage) headerView(s *Snapshot, w int) []string {
	st := p.env.Styles
	t, ok := findTopic(s, p.name)
	if !ok {
		return []string{st.Levels[styles.Bad].Render("topic " + sanitize.Text(p.name) + " not found in the last refresh")}
	}
	ret := "∞"
	if t.Retention > 0 {
		ret = durations.Format(t.Retention)
	}
	cleanup := sanitize.Text(t.Configs["cleanup.policy"])
	if cleanup == "" {
		cleanup = "delete"
	}
	tsType := sanitize.Text(t.Configs["message.timestamp.type"])
	line := fmt.Sprintf("%d partitions · RF %d · min.insync %d · retention %s · %s", len(t.Partitions), t.ReplicationFactor, t.MinISR, ret, cleanup)
	if tsType != "" {
		line += " · " + tsType
	}
	known := false
	for _, r := range t.Rates {
		known = known || r.Known
	}
	line2 := "produce " + fmtRate(t.Skew.TotalRate, known)
	if len(t.Skew.Hot) > 0 {
		var hs []string
		for _, h := range t.Skew.Hot {
			hs = append(hs, fmt.Sprintf("p%d %.1fx median", h.Partition, h.Ratio))
		}
		line2 += st.Levels[styles.Warn].Render(" · hot: " + strings.Join(hs, ", "))
	}
	worst, n := worstISR(t)
	if worst != lag.Healthy {
		line2 += st.Levels[isrLevel(worst)].Render(fmt.Sprintf(" · %d partition(s) with ISR problems", n))
		for _, h := range t.Health {
			if h.WritesBlocked {
				line2 += st.Levels[styles.Bad].Render(fmt.Sprintf(" · p%d: %s", h.Partition, isrText(h)))
				break
			}
		}
	}
	return []string{fit(line, w), fit(line2, w), fit(p.readers(s), w)}
}

// readers lists the groups that consume the topic, worst age first, with
// their status and maximum age on this topic alone.
func (p *topicPage) readers(s *Snapshot) string {
	st := p.env.Styles
	type reader struct {
		name   string
		status lag.Status
		age    time.Duration
		lag    int64
	}
	var rs []reader
	topic := p.topicNameIn(s)
	tn := lag.Intern(topic)
	for _, g := range s.Groups {
		r := reader{name: g.Group}
		found := false
		for _, pl := range g.Partitions {
			if pl.Topic != tn {
				continue
			}
			found = true
			r.status = max(r.status, pl.Status)
			r.age = max(r.age, pl.Age)
			r.lag += pl.Lag
		}
		if found {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return st.Label.Render("read by ") + st.Muted.Render("no consumer group")
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].age > rs[j].age })
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		txt := fmt.Sprintf("%s %s %s", sanitize.Text(r.name), r.status, durations.Format(r.age))
		parts = append(parts, st.Levels[statusLevel(r.status)].Render(txt))
	}
	return st.Label.Render("read by ") + strings.Join(parts, " · ")
}

// topicNameIn is the topic's raw name in s.
func (p *topicPage) topicNameIn(s *Snapshot) string {
	if t, ok := findTopic(s, p.name); ok {
		return t.Name
	}
	return p.name
}

func (p *topicPage) partitionRows(s *Snapshot) []table.Row {
	t, ok := findTopic(s, p.name)
	if !ok {
		return nil
	}
	hot := map[int32]lag.HotPartition{}
	for _, h := range t.Skew.Hot {
		hot[h.Partition] = h
	}
	rows := make([]table.Row, 0, len(t.Partitions))
	for i, pt := range t.Partitions {
		cells := make([]string, numTPCols)
		nums := make([]float64, numTPCols)
		cells[colPPartition], nums[colPPartition] = fmt.Sprint(pt.Partition), num(pt.Partition)
		if pt.Leader < 0 {
			cells[colPLeader], nums[colPLeader] = "none", -1
		} else {
			cells[colPLeader], nums[colPLeader] = fmt.Sprint(pt.Leader), num(pt.Leader)
		}
		cells[colPReplicas] = fmtIDs(pt.Replicas)
		cells[colPISR] = fmtIDs(pt.ISR)
		cells[colPStart], nums[colPStart] = fmt.Sprint(pt.LogStart), num(pt.LogStart)
		cells[colPEndOff], nums[colPEndOff] = fmt.Sprint(pt.HighWatermark), num(pt.HighWatermark)
		nums[colPRate] = unknown
		cells[colPRate] = "-"
		if i < len(t.Rates) {
			r := t.Rates[i]
			cells[colPRate] = fmtRate(r.Rate, r.Known)
			if r.Known {
				nums[colPRate] = r.Rate
			}
		}
		var state []string
		cellLv := make([]styles.Level, numTPCols)
		if i < len(t.Health) {
			h := t.Health[i]
			if h.Class != lag.Healthy {
				state = append(state, isrShort(h))
				lv := isrLevel(h.Class)
				cellLv[colPISR] = lv
				cellLv[colPState] = lv
				if h.Class == lag.Offline {
					cellLv[colPLeader] = lv
				}
				cells[colPISR] += "!"
			}
			if h.Elections > 0 {
				state = append(state, fmt.Sprintf("%d election(s)", h.Elections))
				cellLv[colPLeader] = max(cellLv[colPLeader], styles.Warn)
			}
			nums[colPState] = num(int(h.Class))
		}
		if h, ok := hot[pt.Partition]; ok {
			state = append(state, fmt.Sprintf("HOT %.1fx", h.Ratio))
			cellLv[colPRate] = styles.Warn
			if cellLv[colPState] < styles.Warn {
				cellLv[colPState] = styles.Warn
			}
			nums[colPState] += 0.5
		}
		if pt.Err != "" {
			state = append(state, sanitize.Text(pt.Err))
			cellLv[colPState] = styles.Bad
		}
		if len(state) == 0 {
			state = append(state, "ok")
		}
		cells[colPState] = strings.Join(state, " · ")
		rows = append(rows, table.Row{ID: fmt.Sprint(pt.Partition), Cells: cells, Nums: nums, CellLevels: cellLv})
	}
	return rows
}

// configsPage lists one topic's configs.
type configsPage struct {
	tablePage
	name string
}

func newConfigs(env PageEnv) Page {
	p := &configsPage{name: strings.Join(env.Args, " ")}
	p.self = p
	p.env, p.title = env, "configs"
	p.tbl = table.New([]table.Column{
		{Title: "CONFIG", Width: 30},
		{Title: "VALUE", Width: 20, Flex: 1},
	}, env.Styles)
	p.tbl.SetSort(0, false)
	p.tbl.SetEmpty("no configs reported")
	p.rows = func(s *Snapshot) []table.Row {
		t, ok := findTopic(s, p.name)
		if !ok {
			return nil
		}
		keys := make([]string, 0, len(t.Configs))
		for k := range t.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		rows := make([]table.Row, 0, len(keys))
		for _, k := range keys {
			rows = append(rows, table.Row{ID: k, Cells: []string{sanitize.Text(k), sanitize.Text(t.Configs[k])}})
		}
		return rows
	}
	return p
}
