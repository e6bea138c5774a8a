package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

func init() {
	RegisterPageSpec(PageSpec{Name: "groups", Aliases: []string{"consumers", "cg"}, Help: "consumer groups: status, max age, lag", Factory: newGroups})
}

// Columns of the groups table (overview and groups pages).
const (
	colGroupName = iota
	colGroupStatus
	colGroupAge
	colGroupLag
	colGroupState
	colGroupMembers
	colGroupSLO
	colGroupWorst
)

func groupColumns() []table.Column {
	return []table.Column{
		colGroupName:    {Title: "GROUP", Width: 14, Flex: 1},
		colGroupStatus:  {Title: "STATUS", Width: 8, Whole: true},
		colGroupAge:     {Title: "MAX AGE", Width: 8, Right: true, Numeric: true},
		colGroupLag:     {Title: "LAG", Width: 8, Right: true, Numeric: true},
		colGroupState:   {Title: "STATE", Width: 11, Drop: 3},
		colGroupMembers: {Title: "MEMBERS", Width: 7, Right: true, Numeric: true, Drop: 2},
		colGroupSLO:     {Title: "SLO", Width: 6, Right: true, Numeric: true, Drop: 4},
		colGroupWorst:   {Title: "WORST PARTITION", Width: 16, Drop: 1},
	}
}

// groupRows builds one row per group. The row ID is the raw group name
// (what the group page is opened with); the cells are sanitised.
func groupRows(s *Snapshot) []table.Row { return groupRowsOf(s, true) }

// liveGroupRows leaves the inactive (abandoned) groups out: the overview
// says how many there are and the groups page lists them.
func liveGroupRows(s *Snapshot) []table.Row { return groupRowsOf(s, false) }

func groupRowsOf(s *Snapshot, withInactive bool) []table.Row {
	rows := make([]table.Row, 0, len(s.Groups))
	for _, g := range s.Groups {
		if g.Inactive && !withInactive {
			continue
		}
		status := g.Status.String()
		lv := statusLevel(g.Status)
		if g.Breach {
			status += "!"
			lv = styles.Bad
		}
		worst := ""
		if g.MaxAgeKnown && g.MaxAge > 0 {
			worst = fmt.Sprintf("%s-%d", sanitize.Text(g.MaxAgeTopic), g.MaxAgePartition)
		}
		if g.Err != "" {
			status, lv, worst = "ERROR", styles.Bad, sanitize.Text(g.Err)
		}
		cells := make([]string, 8)
		cells[colGroupName] = sanitize.Text(g.Group)
		cells[colGroupStatus] = status
		cells[colGroupAge] = fmtAge(g.MaxAge, g.MaxAgeKnown || g.TotalLag == 0)
		cells[colGroupLag] = fmt.Sprint(g.TotalLag)
		cells[colGroupState] = sanitize.Text(g.State)
		cells[colGroupMembers] = fmt.Sprint(len(g.Members))
		cells[colGroupSLO] = durations.Format(g.SLO)
		cells[colGroupWorst] = worst
		nums := make([]float64, 8)
		nums[colGroupAge] = durKey(g.MaxAge, g.MaxAgeKnown || g.TotalLag == 0)
		if g.Inactive {
			// Abandoned: dimmed, and after every live group in the
			// worst-age-first order however old its backlog.
			lv, nums[colGroupAge] = styles.Dim, -1-nums[colGroupAge]/1e12
		}
		nums[colGroupLag] = num(g.TotalLag)
		nums[colGroupMembers] = num(len(g.Members))
		nums[colGroupSLO] = g.SLO.Seconds()
		rows = append(rows, table.Row{ID: g.Group, Cells: cells, Nums: nums, Level: lv})
	}
	return rows
}

// groupsPage lists every consumer group, worst age first.
type groupsPage struct{ tablePage }

func newGroups(env PageEnv) Page {
	p := &groupsPage{}
	p.self = p
	p.env, p.title = env, "groups"
	p.tbl = table.New(groupColumns(), env.Styles)
	p.tbl.SetSort(colGroupAge, true)
	p.tbl.SetEmpty("no consumer groups")
	p.rows, p.async = groupRows, true
	p.enter = func(r table.Row) tea.Cmd { return Open("group", r.ID) }
	p.keys = actionKeys(env, "group")
	return p
}

// groupNames completes ":group NAME".
func groupNames(s *Snapshot) []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.Groups))
	for _, g := range s.Groups {
		out = append(out, sanitize.Text(g.Group))
	}
	return out
}
