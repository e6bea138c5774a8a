package capacity

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/charmbracelet/x/ansi"

	engine "github.com/berth-dev/berth/capacity"
)

var update = flag.Bool("update", false, "rewrite the golden views in testdata")

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
			got := ansi.Strip(sized(tc.m, tc.w, tc.h).View()) + "\n"
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("%s differs (run with -update if intended)\n--- got\n%s--- want\n%s", tc.name, got, want)
			}
		})
	}
}
