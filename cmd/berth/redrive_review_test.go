package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/actions"
)

// TestReviewOfAPlanThatIncludesNothingSaysSo: a blocked or all-excluded
// plan's review names no keys, and says so rather than ending the line on
// an empty list a reviewer could read as cut off.
func TestReviewOfAPlanThatIncludesNothingSaysSo(t *testing.T) {
	var b bytes.Buffer
	writeReviewCounts(&b, "records", []actions.TargetCount{{Target: "payments", Excluded: 3}}, nil)
	if !strings.Contains(b.String(), "idempotency keys of the included records: (none: nothing is included)\n") {
		t.Fatalf("review:\n%s", b.String())
	}
}
