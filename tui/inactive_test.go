package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
)

// An abandoned group (no members, a backlog three days old) never sits above
// the live STALLED group: the overview leaves it out and says so, and the
// groups page lists it dimmed, after every live group.
func TestInactiveGroupsSitBelowLiveIncidents(t *testing.T) {
	withAbandoned := func(seq int) *monitor.Snapshot {
		s := fixtureSnapshot(seq)
		g := monitor.Group{}
		g.Group, g.State, g.Status, g.Inactive = "old-reports", "Empty", lag.STOPPED, true
		g.MaxAge, g.MaxAgeKnown, g.TotalLag, g.SLO = 72*time.Hour, true, 90000, 5*time.Minute
		g.Breach = true
		s.Groups = append(s.Groups, g)
		return s
	}
	m, src := newTestModel(t, 120, 40)
	src.snap = withAbandoned
	press(m, "ctrl+r")
	p := m.top().page.(*overviewPage)
	if r, _ := p.tbl.VisibleRow(0); r.ID != "fraud-monitor" {
		t.Fatalf("overview's first group %q, want fraud-monitor", r.ID)
	}
	for i := 0; ; i++ {
		r, ok := p.tbl.VisibleRow(i)
		if !ok {
			break
		}
		if r.ID == "old-reports" {
			t.Fatalf("the overview lists the abandoned group at row %d", i)
		}
	}
	if v := m.View(); !strings.Contains(v, "1 inactive (no members, idle over 1h) in :groups") {
		t.Fatalf("overview does not say an inactive group is hidden:\n%s", v)
	}
	press(m, "c")
	g := m.top().page.(*groupsPage)
	first, _ := g.tbl.VisibleRow(0)
	last, n := first, 0
	for i := 0; ; i++ {
		r, ok := g.tbl.VisibleRow(i)
		if !ok {
			break
		}
		last, n = r, i+1
	}
	if first.ID != "fraud-monitor" || last.ID != "old-reports" || n < 4 {
		t.Fatalf("groups page: first %q, last %q of %d; want fraud-monitor first and old-reports last", first.ID, last.ID, n)
	}
}
