package main

import (
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// heapBudget is the soft heap limit of the commands that hold a whole
// redrive plan or stream a whole DLQ (`redrive ...`, `dlq ...`). Go's
// collector by default lets the heap grow to twice what is live before it
// collects, so a million-record plan with ~350 MB live would take ~700 MB
// of memory; near this limit the collector works harder instead. It is
// soft: a command whose live heap is larger still runs (more slowly). The
// bundled broker and the console are left alone: the broker holds the
// log in memory, and the limit would only make it collect without end.
// GOMEMLIMIT, when set, overrides it (the runtime has already applied it).
const heapBudget = 448 << 20

// applyHeapBudget sets the budget for cmd when it is a redrive or DLQ
// command, and returns a function restoring the previous limit (commands
// run in-process in tests, one after another).
func applyHeapBudget(cmd *cobra.Command) (restore func()) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return func() {}
	}
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	switch top.Name() {
	case "redrive", "dlq":
		prev := debug.SetMemoryLimit(heapBudget)
		return func() { debug.SetMemoryLimit(prev) }
	}
	return func() {}
}
