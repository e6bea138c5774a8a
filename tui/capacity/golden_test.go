package capacity

import (
	"testing"

	engine "github.com/berth-dev/berth/capacity"
	"github.com/berth-dev/berth/internal/golden"
)

// TestGoldenViews pins what the worksheet page looks like at fixed sizes:
// the default load, an invalid field, and a prefilled form.
func TestGoldenViews(t *testing.T) {
	prefilled := func() Model {
		fake := &fakeMeasure{m: ordersLoad}
		m := New(nil, fake.fn)
		m.SetTopic("orders")
		m, _ = m.Update(m.StartMeasure()())
		return m
	}
	for _, tc := range []struct {
		name string
		m    Model
		w, h int
	}{
		{"default-80x24", New(nil, nil), 80, 24},
		{"default-120x40", New(nil, nil), 120, 40},
		{"invalid-event-size-100x30", focusField(New(nil, nil), engine.EventSize, "1 parsec"), 100, 30},
		{"prefilled-160x45", prefilled(), 160, 45},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden.Assert(t, "tui/capacity", tc.name, sized(tc.m, tc.w, tc.h).View())
		})
	}
}
