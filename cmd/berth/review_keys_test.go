package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/actions"
)

// A key taken from a message's header or payload can be tens of
// kilobytes: the text review (show, approve on a terminal, status PLAN,
// plan, on both backends) shows the start of each and how much is cut,
// instead of a 120 KB line for two 60 KB keys.
func TestTextReviewCutsHugeKeys(t *testing.T) {
	huge := strings.Repeat("K", 60_000)
	var out bytes.Buffer
	writeReviewCounts(&out, "messages", []actions.TargetCount{{Target: "q", Included: 3}}, []string{huge, "short-key", huge})
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "idempotency keys") {
			line = l
		}
	}
	if len(line) > 1000 || strings.Count(line, "…(+59880 characters; -o json has it whole)") != 2 || !strings.Contains(line, ", short-key, ") {
		t.Errorf("review keys line (%d bytes): want each huge key cut with what was cut said, the short one whole:\n%.600s", len(line), line)
	}
}
