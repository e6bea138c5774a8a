package tui

import (
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

func init() {
	RegisterPageSpec(PageSpec{Name: "members", Help: "one group's members and their assignments", Factory: newMembers, Complete: groupNames})
}

const (
	colMClient = iota
	colMHost
	colMParts
	colMAssign
	colMID
	numMCols
)

// membersPage lists a group's members: client id, host, how many partitions
// each owns and which (topic[0-5,7]), and the member id. Idle members (no
// partitions) are dimmed: they cannot help with lag.
type membersPage struct {
	tablePage
	group string
}

func newMembers(env PageEnv) Page {
	p := &membersPage{group: strings.Join(env.Args, " ")}
	p.self = p
	p.env, p.title = env, "members"
	p.tbl = table.New([]table.Column{
		colMClient: {Title: "CLIENT", Width: 14, Flex: 1},
		colMHost:   {Title: "HOST", Width: 15, Drop: 2},
		colMParts:  {Title: "PARTS", Width: 5, Right: true, Numeric: true},
		colMAssign: {Title: "ASSIGNMENT", Width: 20, Flex: 2},
		colMID:     {Title: "MEMBER ID", Width: 12, Flex: 1, Drop: 1},
	}, env.Styles)
	p.tbl.SetSort(colMParts, true)
	p.tbl.SetEmpty("the group has no members")
	p.rows = p.memberRows
	return p
}

func (p *membersPage) memberRows(s *Snapshot) []table.Row {
	var members []backends.Member
	for _, g := range s.Groups {
		if g.Group == p.group || sanitize.Text(g.Group) == p.group {
			members = g.Members
		}
	}
	rows := make([]table.Row, 0, len(members))
	for _, m := range members {
		cells := make([]string, numMCols)
		nums := make([]float64, numMCols)
		cells[colMClient] = sanitize.Text(m.ClientID)
		cells[colMHost] = sanitize.Text(strings.TrimPrefix(m.Host, "/"))
		cells[colMParts], nums[colMParts] = strconv.Itoa(len(m.Assigned)), num(len(m.Assigned))
		cells[colMAssign] = assignment(m.Assigned)
		cells[colMID] = sanitize.Text(m.ID)
		lv := styles.Normal
		if len(m.Assigned) == 0 {
			lv, cells[colMAssign] = styles.Dim, "idle: no partitions"
		}
		rows = append(rows, table.Row{ID: m.ID, Cells: cells, Nums: nums, Level: lv})
	}
	return rows
}

// assignment writes partitions compactly per topic: "orders[0-5,7]".
func assignment(tps []backends.TopicPartition) string {
	by := map[string][]int32{}
	var topics []string
	for _, tp := range tps {
		if _, ok := by[tp.Topic]; !ok {
			topics = append(topics, tp.Topic)
		}
		by[tp.Topic] = append(by[tp.Topic], tp.Partition)
	}
	sort.Strings(topics)
	var b strings.Builder
	for i, t := range topics {
		if i > 0 {
			b.WriteByte(' ')
		}
		ps := by[t]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		b.WriteString(sanitize.Text(t))
		b.WriteByte('[')
		for j := 0; j < len(ps); {
			k := j
			for k+1 < len(ps) && ps[k+1] == ps[k]+1 {
				k++
			}
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(ps[j])))
			if k > j {
				b.WriteByte('-')
				b.WriteString(strconv.Itoa(int(ps[k])))
			}
			j = k + 1
		}
		b.WriteByte(']')
	}
	return b.String()
}

// membersKey opens the members page from a group page.
func membersKey(group func() string) pageKey {
	return pageKey{
		binding: key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "members")),
		run:     func(table.Row, bool) tea.Cmd { return Open("members", group()) },
	}
}
