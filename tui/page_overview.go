package tui

import (
	"fmt"
	tea "github.com/charmbracelet/bubbletea"
	"sort"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/components/table"
)

func init() {
	RegisterPageSpec(PageSpec{Name: "overview", Aliases: []string{"home"}, Help: "cluster, ISR problems, worst groups, hot topics, DLQs", Factory: newOverview})
}

// overviewPage is the landing page: the cluster at a glance above the
// groups sorted by age (the worst first). enter opens a group.
type overviewPage struct {
	tablePage
	// queues is the overview's RabbitMQ form, set by the first RabbitMQ
	// snapshot (page_queues.go); the page then defers to it.
	queues *queueOverview
}

func newOverview(env PageEnv) Page {
	p := &overviewPage{}
	p.self = p
	p.env, p.title = env, "overview"
	p.tbl = table.New(groupColumns(), env.Styles)
	p.tbl.SetSort(colGroupAge, true)
	p.tbl.SetEmpty("no consumer groups")
	p.rows, p.async = liveGroupRows, true
	p.header = p.summary
	p.headerLines = func(h int) int { return min(8, max(0, h-6)) }
	p.enter = func(r table.Row) tea.Cmd { return Open("group", r.ID) }
	p.keys = actionKeys(env, "group")
	return p
}

func (p *overviewPage) Update(msg tea.Msg) (Page, tea.Cmd) {
	if cmd, ok := p.updateQueues(msg); ok {
		return p, cmd
	}
	_, cmd := p.tablePage.Update(msg)
	return p, cmd
}

// summary is the cluster at a glance, above the groups table.
func (p *overviewPage) summary(s *Snapshot, w int) []string {
	st := p.env.Styles
	label := func(l string) string { return st.Label.Render(fmt.Sprintf("%-9s", l)) }
	var out []string

	up, known, sim := p.env.fleet.counts(s)
	brokers := fmt.Sprintf("%d/%d brokers up", up, known)
	if sim > 0 {
		brokers += fmt.Sprintf(" (%d down, simulated)", sim)
	}
	if up < known {
		brokers = st.Levels[3].Render(brokers)
	}
	// Brokers first: at 80 columns the long cluster id would cut the count.
	out = append(out, label("cluster")+brokers+" · controller "+fmt.Sprint(s.Cluster.Controller)+" · "+sanitize.Text(s.Cluster.ID))

	h := s.Health
	if h.UnderReplicated+h.AtMinISR+h.UnderMinISR+h.Offline == 0 {
		out = append(out, label("ISR")+st.Levels[1].Render("all partitions in sync"))
	} else {
		var parts []string
		if h.Offline > 0 {
			parts = append(parts, st.Levels[3].Render(fmt.Sprintf("%d offline", h.Offline)))
		}
		if h.UnderMinISR > 0 {
			parts = append(parts, st.Levels[3].Render(fmt.Sprintf("%d under min ISR: acks=all writes blocked", h.UnderMinISR)))
		}
		if h.AtMinISR > 0 {
			parts = append(parts, st.Levels[2].Render(fmt.Sprintf("%d at min ISR", h.AtMinISR)))
		}
		if h.UnderReplicated > 0 {
			parts = append(parts, st.Levels[2].Render(fmt.Sprintf("%d under-replicated", h.UnderReplicated)))
		}
		out = append(out, label("ISR")+strings.Join(parts, " · "))
		// The worst two partitions by name, so the first keystroke is not
		// needed to know which topic is affected.
		for i, ph := range h.ISR {
			if i == 2 || ph.Class == lag.Healthy {
				break
			}
			line := fmt.Sprintf("%s-%d isr %d/%d min %d: %s", sanitize.Text(ph.Topic), ph.Partition, ph.ISR, ph.Replicas, ph.MinISR, isrText(ph))
			out = append(out, label("")+st.Levels[isrLevel(ph.Class)].Render(line))
		}
	}

	if len(h.Hot) == 0 {
		out = append(out, label("hot")+st.Muted.Render("no hot partitions"))
	} else {
		var parts []string
		for i, hp := range h.Hot {
			if i == 3 {
				break
			}
			ratio := fmt.Sprintf("%.1fx median", hp.Ratio)
			if hp.Ratio == 0 {
				ratio = "all traffic"
			}
			parts = append(parts, fmt.Sprintf("%s-%d %s (%.0f%%)", sanitize.Text(hp.Topic), hp.Partition, ratio, hp.Share*100))
		}
		out = append(out, label("hot")+st.Levels[2].Render(strings.Join(parts, " · ")))
	}

	dlqs := dlqDepths(s)
	if len(dlqs) == 0 {
		out = append(out, label("DLQs")+st.Muted.Render("none found"))
	} else {
		var parts []string
		for _, d := range dlqs {
			txt := fmt.Sprintf("%s %d", sanitize.Text(d.name), d.depth)
			if d.depth > 0 {
				txt = st.Levels[2].Render(txt)
			}
			parts = append(parts, txt)
		}
		out = append(out, label("DLQs")+strings.Join(parts, " · "))
	}
	if len(s.Warnings) > 0 {
		out = append(out, label("warnings")+st.Levels[2].Render(sanitize.Text(s.Warnings[0])))
	}
	inactive := 0
	for _, g := range s.Groups {
		if g.Inactive {
			inactive++
		}
	}
	title := st.Title.Render("Groups, worst age first")
	if inactive > 0 {
		// On the title line: the header has a fixed budget of lines.
		title += st.Muted.Render(fmt.Sprintf(" · %d inactive (no members, idle over 1h) in :groups", inactive))
	}
	out = append(out, "", title)
	for i := range out {
		if ansi.StringWidth(out[i]) > w {
			out[i] = ansi.Truncate(out[i], w, "…")
		}
	}
	return out
}

// dlqDepth is one dead-letter topic and how many records it holds.
type dlqDepth struct {
	name  string
	depth int64
}

// dlqSuffixes are the naming conventions recognised as dead-letter topics.
var dlqSuffixes = []string{".DLT", "-dlt", ".dlq", "-dlq", ".DLQ"}

// isDLQ reports whether a topic name follows a DLQ naming convention.
func isDLQ(name string) bool {
	for _, s := range dlqSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// dlqDepths lists DLQ topics by depth (end - start summed over partitions),
// deepest first.
func dlqDepths(s *Snapshot) []dlqDepth {
	var out []dlqDepth
	for _, t := range s.Topics {
		if !isDLQ(t.Name) {
			continue
		}
		var d int64
		for _, p := range t.Partitions {
			d += max(0, p.HighWatermark-p.LogStart)
		}
		out = append(out, dlqDepth{name: t.Name, depth: d})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].depth > out[j].depth })
	return out
}
