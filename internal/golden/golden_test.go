package golden

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps a failure instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }
func (r *recorder) Fatal(args ...any)                 { r.failed = fmt.Sprint(args...) }

// The sample golden is testdata/golden/internal/golden/sample.golden.
func TestAssertComparesPlainTextAndShowsADiff(t *testing.T) {
	if Updating() {
		t.Skip("the sample golden is written by hand")
	}
	r := &recorder{TB: t}
	Assert(r, "internal/golden", "sample", "\x1b[1mtitle\x1b[0m\nline two")
	if r.failed != "" {
		t.Fatalf("a view equal to its golden once colour is stripped failed: %s", r.failed)
	}
	Assert(r, "internal/golden", "sample", "title\nline 2")
	if !strings.Contains(r.failed, "-line two") || !strings.Contains(r.failed, "+line 2") || !strings.Contains(r.failed, "-update") {
		t.Fatalf("a changed view: failure %q; want a unified diff and the -update hint", r.failed)
	}
	r.failed = ""
	Assert(r, "internal/golden", "no-such-view", "x")
	if !strings.Contains(r.failed, "run with -update to create it") {
		t.Fatalf("a missing golden: failure %q", r.failed)
	}
}
