package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
)

// The group page shows event-time freshness beside the ingest age: a column
// per partition (blank on topics without a rule, the reason when the field
// was missing) and the group's maximum against its event-time SLO.
func TestGroupPageShowsEventAge(t *testing.T) {
	m, src := newTestModel(t, 140, 40)
	src.snap = func(seq int) *monitor.Snapshot {
		s := fixtureSnapshot(seq)
		for gi := range s.Groups {
			g := &s.Groups[gi]
			if g.Group != "fraud-monitor" {
				continue
			}
			for i := range g.Partitions {
				p := &g.Partitions[i]
				p.EventRule, p.EventAgeKnown, p.EventAge = true, true, 10*time.Minute
				if p.Partition == 3 {
					p.EventAgeKnown, p.EventState = false, lag.EventMissing
				}
			}
			g.MaxEventAge, g.MaxEventAgeKnown, g.EventSLO, g.EventBreach, g.EventUnknown = 10*time.Minute, true, 5*time.Minute, true, 1
		}
		return s
	}
	press(m, "ctrl+r", "enter")
	v := m.View()
	for _, want := range []string{"EVENT AGE", "10m00s", "? missing", "event age 10m00s (SLO 5m00s BREACHED), 1 without event time"} {
		if !strings.Contains(v, want) {
			t.Errorf("group page lacks %q:\n%s", want, v)
		}
	}
}
