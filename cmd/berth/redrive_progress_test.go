package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/actions"
)

// progressShape is the one shape of `redrive execute`'s progress lines, on
// Kafka and RabbitMQ alike.
var progressShape = regexp.MustCompile(`^progress [0-9a-f]{12}: \d+/\d+ \(\d+%\) sent \d+ already sent \d+ skipped \d+ failed \d+, \d+/s, eta (\d+h)?(\d+m)?\d+s( \[paused\])?$`)

// progressLines returns the progress lines of a run's stderr, failing the
// test for any not of progressShape.
func progressLines(t *testing.T, stderr string) []string {
	t.Helper()
	var lines []string
	for l := range strings.SplitSeq(stderr, "\n") {
		if !strings.HasPrefix(l, "progress ") {
			continue
		}
		if !progressShape.MatchString(l) {
			t.Errorf("progress line %q is not of the shape both backends share (%s)", l, progressShape)
		}
		lines = append(lines, l)
	}
	return lines
}

// writeProgress prints actions.Progress.Line (its cases are tested
// there), one line of progressShape, on both backends.
func TestWriteProgressPrintsOneLineOfTheShape(t *testing.T) {
	const hash = "b7c8ccb8cb90aaaaaaaaaaaaaaaa"
	for _, p := range []actions.Progress{
		{Plan: hash, Total: 400, Sent: 100, AlreadySent: 10, Skipped: 10, Elapsed: 2 * time.Second, ETA: 5600 * time.Millisecond},
		actions.RabbitProgress(hash, 100, 10, actions.RabbitResult{Sent: 40}, time.Second, true),
	} {
		var b bytes.Buffer
		writeProgress(&b, p)
		if got := progressLines(t, b.String()); len(got) != 1 || got[0]+"\n" != b.String() {
			t.Errorf("wrote %q; want the one line %q", b.String(), p.Line())
		}
	}
}
