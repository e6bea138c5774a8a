package main

import (
	"io"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHeapBudgetAppliesToRedriveAndDLQCommandsOnly: redrive and dlq
// commands run under the soft heap limit (a million-record plan fits in
// 512 MiB only with it), the broker and the console do not (the broker
// holds the log in memory), GOMEMLIMIT overrides it, and the limit is
// restored when the command ends.
func TestHeapBudgetAppliesToRedriveAndDLQCommandsOnly(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	root := newRoot(newApp(io.Discard, io.Discard))
	for _, c := range []struct {
		path string
		want bool
	}{
		{"redrive plan", true}, {"redrive execute", true}, {"dlq classes", true},
		{"broker", false}, {"demo", false}, {"lag", false}, {"", false},
	} {
		cmd, _, err := root.Find(strings.Fields(c.path))
		if err != nil {
			t.Fatalf("%q: %v", c.path, err)
		}
		restore := applyHeapBudget(cmd)
		got := debug.SetMemoryLimit(-1) == heapBudget
		restore()
		if got != c.want {
			t.Errorf("%q: heap budget applied = %v, want %v", c.path, got, c.want)
		}
		if now := debug.SetMemoryLimit(-1); now != before {
			t.Errorf("%q: limit after the command %d, want %d restored", c.path, now, before)
		}
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	cmd, _, _ := root.Find([]string{"redrive", "plan"})
	restore := applyHeapBudget(cmd)
	defer restore()
	if debug.SetMemoryLimit(-1) == heapBudget {
		t.Error("GOMEMLIMIT is set but the heap budget replaced it")
	}
}
