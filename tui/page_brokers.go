package tui

import (
	"context"
	"fmt"
	"strconv"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

func init() {
	RegisterPageSpec(PageSpec{Name: "brokers", Aliases: []string{"nodes"}, Help: "brokers: leaders and traffic share", Factory: newBrokers})
}

const (
	colBID = iota
	colBHost
	colBRack
	colBRole
	colBLeaders
	colBLeaderShare
	colBRate
	colBShare
	numBCols
)

// brokersPage lists every broker known this session (env.fleet) with its
// leader count and share of produce traffic. With the demo's broker switch,
// "x" takes the selected broker down or brings it back, after a y (shown
// disabled in a read-only context). A broker down stays listed, on every
// visit, as DOWN (sim), so x can bring it back.
type brokersPage struct {
	tablePage
}

// brokerToggledMsg is the result of a broker toggle, with the switch's
// down set after it. The model applies it (Model.applyToggle), not the
// page: the page may be closed by the time it arrives.
type brokerToggledMsg struct {
	id      int32
	down    bool
	err     error
	downNow []int32
}

func newBrokers(env PageEnv) Page {
	p := &brokersPage{}
	p.self = p
	p.env, p.title = env, "brokers"
	p.tbl = table.New([]table.Column{
		colBID:          {Title: "ID", Width: 4, Right: true, Numeric: true},
		colBHost:        {Title: "HOST", Width: 16, Flex: 1},
		colBRack:        {Title: "RACK", Width: 6, Drop: 2},
		colBRole:        {Title: "ROLE", Width: 10},
		colBLeaders:     {Title: "LEADERS", Width: 7, Right: true, Numeric: true},
		colBLeaderShare: {Title: "LEAD %", Width: 6, Right: true, Numeric: true, Drop: 1},
		colBRate:        {Title: "PRODUCE", Width: 8, Right: true, Numeric: true},
		colBShare:       {Title: "TRAFFIC", Width: 7, Right: true, Numeric: true},
	}, env.Styles)
	p.tbl.SetSort(colBID, false)
	p.tbl.SetEmpty("no brokers")
	p.rows = p.brokerRows
	if env.Brokers != nil {
		k := pageKey{
			binding: key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "take broker down / bring back (demo)")),
			run:     p.toggle,
		}
		if env.ReadOnly {
			k.disabled = env.ReadOnlyReason
			if k.disabled == "" {
				k.disabled = "read-only context"
			}
		}
		p.keys = append(p.keys, k)
	}
	return p
}

func (p *brokersPage) Update(msg tea.Msg) (Page, tea.Cmd) {
	_, cmd := p.tablePage.Update(msg)
	return p, cmd
}

// toggle asks, then flips the selected broker through the demo's switch,
// off the UI goroutine.
func (p *brokersPage) toggle(r table.Row, ok bool) tea.Cmd {
	if !ok {
		return nil
	}
	id64, err := strconv.ParseInt(r.ID, 10, 32)
	if err != nil {
		return nil
	}
	id, down, sw := int32(id64), !p.env.fleet.down[int32(id64)], p.env.Brokers
	q := fmt.Sprintf("take broker %d down (simulated)?", id)
	if !down {
		q = fmt.Sprintf("bring broker %d back up?", id)
	}
	return Confirm(q, p.env.Do(func(context.Context, backends.Cluster) tea.Msg {
		err := sw.SetDown(id, down)
		return brokerToggledMsg{id: id, down: down, err: err, downNow: sw.Down()}
	}))
}

func (p *brokersPage) brokerRows(s *Snapshot) []table.Row {
	f := p.env.fleet
	f.observe(s) // the app did too; a page built before the app's first refresh has not
	up := map[int32]bool{}
	for _, b := range s.Cluster.Brokers {
		up[b.ID] = true
	}
	shares := map[int32]int{}
	for i, sh := range s.Brokers {
		shares[sh.Broker] = i
	}
	ids := f.ids()
	rows := make([]table.Row, 0, len(ids))
	for _, id := range ids {
		b := f.known[id]
		cells := make([]string, numBCols)
		nums := make([]float64, numBCols)
		cells[colBID], nums[colBID] = fmt.Sprint(id), num(id)
		cells[colBHost] = sanitize.Text(fmt.Sprintf("%s:%d", b.Host, b.Port))
		cells[colBRack] = sanitize.Text(b.Rack)
		role := "broker"
		if b.ID == s.Cluster.Controller {
			role = "controller"
		}
		lv := styles.Normal
		switch {
		case f.down[id]:
			role, lv = "DOWN (sim)", styles.Bad
		case !up[id]:
			role, lv = "MISSING", styles.Bad
		}
		cells[colBRole] = role
		if i, ok := shares[id]; ok {
			sh := s.Brokers[i]
			cells[colBLeaders], nums[colBLeaders] = fmt.Sprint(sh.Leaders), num(sh.Leaders)
			cells[colBLeaderShare], nums[colBLeaderShare] = fmt.Sprintf("%.0f%%", sh.LeaderShare*100), sh.LeaderShare
			cells[colBRate], nums[colBRate] = fmtRate(sh.ProduceRate, true), sh.ProduceRate
			cells[colBShare], nums[colBShare] = fmt.Sprintf("%.0f%%", sh.ProduceShare*100), sh.ProduceShare
		} else {
			for _, c := range []int{colBLeaders, colBLeaderShare, colBRate, colBShare} {
				cells[c], nums[c] = "-", unknown
			}
		}
		rows = append(rows, table.Row{ID: fmt.Sprint(id), Cells: cells, Nums: nums, Level: lv})
	}
	return rows
}
