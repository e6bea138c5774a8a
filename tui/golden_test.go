package tui

import (
	"context"
	"errors"
	"testing"

	"github.com/berth-dev/berth/internal/golden"
)

// requireGolden compares a frame with testdata/golden/tui/NAME.golden
// (internal/golden: colour stripped, rewritten with -update).
func requireGolden(t *testing.T, name, view string) {
	t.Helper()
	golden.Assert(t, "tui", name, view)
}

// TestGoldenViews pins what each page looks like at fixed sizes. The
// fixture's clock is fixed, so the frames are deterministic.
func TestGoldenViews(t *testing.T) {
	cases := []struct {
		name string
		w, h int
		nav  []string
		// setup runs after the first refresh (e.g. to fail the next one).
		setup func(m *Model, src *fakeSource)
		opts  func(*Options)
	}{
		{"overview-80x24", 80, 24, nil, nil, nil},
		{"overview-120x40", 120, 40, nil, nil, nil},
		{"groups-80x24", 80, 24, []string{"c"}, nil, nil},
		{"group-fraud-monitor-80x24", 80, 24, []string{"enter"}, nil, nil},
		{"group-fraud-monitor-120x40", 120, 40, []string{"enter"}, nil, nil},
		{"group-members-80x24", 80, 24, []string{"enter", "m"}, nil, nil},
		{"topics-80x24", 80, 24, []string{"t"}, nil, nil},
		{"topic-orders-80x24", 80, 24, []string{"t", "j", "enter"}, nil, nil},
		{"topic-orders-configs-80x24", 80, 24, []string{"t", "j", "enter", "C"}, nil, nil},
		{"brokers-80x24", 80, 24, []string{"b"}, nil, nil},
		{"help-groups-80x24", 80, 24, []string{"c", "?"}, nil, nil},
		{"palette-80x24", 80, 24, []string{":", "g"}, nil, nil},
		{"filter-groups-80x24", 80, 24, []string{"c", "/", "s", "a"}, nil, nil},
		{"stale-readonly-groups-80x24", 80, 24, []string{"c"}, func(m *Model, src *fakeSource) {
			src.setFail(errors.New("kafka 127.0.0.1:9092: i/o timeout"))
			send(m, refreshTickMsg{gen: m.gen})
		}, func(o *Options) { o.ReadOnly, o.ReadOnlyReason = true, "--read-only" }},
		{"unreachable-80x24", 80, 24, nil, nil, func(o *Options) {
			o.Source = nil
			o.Dial = func(context.Context, string) (Source, error) {
				return nil, errors.New("kafka 127.0.0.1:9092: unreachable: dial tcp 127.0.0.1:9092: connect: connection refused")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mods []func(*Options)
			if c.opts != nil {
				mods = append(mods, c.opts)
			}
			m, src := newTestModel(t, c.w, c.h, mods...)
			for _, k := range c.nav {
				press(m, k)
			}
			if c.setup != nil {
				c.setup(m, src)
			}
			v := m.View()
			assertFits(t, v, c.w, c.h, c.name)
			requireGolden(t, c.name, v)
		})
	}
}
