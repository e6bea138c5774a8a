package tui

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// updating reports whether -update was given (go test ./tui/ -run Golden
// -update rewrites the golden views). The flag itself is registered by
// x/exp/golden, which teatest imports; registering it twice would panic.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// goldenDir is the repository's testdata/golden/tui.
var goldenDir = filepath.Join("..", "testdata", "golden", "tui")

// requireGolden compares a frame, colour stripped, with its golden file.
func requireGolden(t *testing.T, name, view string) {
	t.Helper()
	got := ansi.Strip(view) + "\n"
	path := filepath.Join(goldenDir, name+".golden")
	if updating() {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
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
		t.Fatalf("%s differs from %s (run with -update if the change is intended)\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// TestGoldenViews pins what each page looks like at fixed sizes. The
// fixture's clock is fixed, so the frames are deterministic.
func TestGoldenViews(t *testing.T) {
	cases := []struct {
		name string
		w, h int
		nav  []string
	}{
		{"overview-80x24", 80, 24, nil},
		{"overview-120x40", 120, 40, nil},
		{"groups-80x24", 80, 24, []string{"c"}},
		{"group-fraud-monitor-80x24", 80, 24, []string{"enter"}},
		{"group-fraud-monitor-120x40", 120, 40, []string{"enter"}},
		{"topics-80x24", 80, 24, []string{"t"}},
		{"topic-orders-80x24", 80, 24, []string{"t", "j", "enter"}},
		{"topic-orders-configs-80x24", 80, 24, []string{"t", "j", "enter", "C"}},
		{"brokers-80x24", 80, 24, []string{"b"}},
		{"help-groups-80x24", 80, 24, []string{"c", "?"}},
		{"palette-80x24", 80, 24, []string{":", "g"}},
		{"filter-groups-80x24", 80, 24, []string{"c", "/", "s", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := newTestModel(t, c.w, c.h)
			for _, k := range c.nav {
				press(m, k)
			}
			v := m.View()
			assertFits(t, v, c.w, c.h, c.name)
			requireGolden(t, c.name, v)
		})
	}
}
