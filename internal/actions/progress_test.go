package actions

import (
	"regexp"
	"testing"
	"time"

	"github.com/berth-dev/berth/redrive"
)

// progressShape is the one shape of `redrive execute`'s progress lines, on
// Kafka and RabbitMQ alike.
var progressShape = regexp.MustCompile(`^progress [0-9a-f]{12}: \d+/\d+ \(\d+%\) sent \d+ already sent \d+ skipped \d+ failed \d+, \d+/s, eta (\d+h)?(\d+m)?\d+s( \[paused\])?$`)

// One formatter for both backends: the same fields in the same order, the
// rate in /s and an ETA on both, [paused] when paused. The console shows
// the same counts (Counts).
func TestProgressLine(t *testing.T) {
	const hash = "b7c8ccb8cb90aaaaaaaaaaaaaaaa"
	for _, c := range []struct {
		name string
		p    Progress
		want string
	}{
		{"kafka running", Progress{Plan: hash, Total: 400, Sent: 100, AlreadySent: 10, Skipped: 10, Elapsed: 2 * time.Second, ETA: 5600 * time.Millisecond},
			"progress b7c8ccb8cb90: 120/400 (30%) sent 100 already sent 10 skipped 10 failed 0, 50/s, eta 6s"},
		{"kafka paused", Progress{Plan: hash, Total: 400, Sent: 100, Failed: 3, Elapsed: 4 * time.Second, ETA: 90 * time.Second, Paused: true},
			"progress b7c8ccb8cb90: 103/400 (25%) sent 100 already sent 0 skipped 0 failed 3, 25/s, eta 1m30s [paused]"},
		{"kafka at the start", Progress{Plan: hash, Total: 7},
			"progress b7c8ccb8cb90: 0/7 (0%) sent 0 already sent 0 skipped 0 failed 0, 0/s, eta 0s"},
		{"rounded down: 100% is all settled", Progress{Plan: hash, Total: 1000, Sent: 999, Elapsed: time.Second},
			"progress b7c8ccb8cb90: 999/1000 (99%) sent 999 already sent 0 skipped 0 failed 0, 999/s, eta 0s"},
		{"empty plan", Progress{Plan: hash},
			"progress b7c8ccb8cb90: 0/0 (100%) sent 0 already sent 0 skipped 0 failed 0, 0/s, eta 0s"},
		// RabbitMQ counts as its summary does: sent before is already
		// sent, gone and not visible are skipped; the ETA is from the
		// rate so far and what is left.
		{"rabbitmq running", RabbitProgress(hash, 10, 0, RabbitResult{Sent: 4, AlreadySent: 1,
			Skipped: []RabbitSkip{{EventID: "a"}}}, 2*time.Second, false),
			"progress b7c8ccb8cb90: 6/10 (60%) sent 4 already sent 1 skipped 1 failed 0, 2/s, eta 2s"},
		{"rabbitmq at the end", RabbitProgress(hash, 10, 0, RabbitResult{Sent: 4, AlreadySent: 1, DoneBefore: 2,
			Skipped: []RabbitSkip{{EventID: "a"}}, NotFound: []string{"b"}, Failed: []RabbitFailure{{EventID: "c"}}}, 2*time.Second, false),
			"progress b7c8ccb8cb90: 10/10 (100%) sent 4 already sent 3 skipped 2 failed 1, 2/s, eta 0s"},
		{"rabbitmq paused under a rate limit", RabbitProgress(hash, 100, 10, RabbitResult{Sent: 40}, time.Second, true),
			"progress b7c8ccb8cb90: 40/100 (40%) sent 40 already sent 0 skipped 0 failed 0, 40/s, eta 6s [paused]"},
		// A record the checks (run again at execution) skip before the run
		// is settled from the start: counted in done and in the total.
		{"rabbitmq skipped before the run, at its start", RabbitProgress(hash, 3, 0, RabbitResult{Skipped: []RabbitSkip{{EventID: "a"}}}, 0, false),
			"progress b7c8ccb8cb90: 1/3 (33%) sent 0 already sent 0 skipped 1 failed 0, 0/s, eta 0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.Line(); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
			if !progressShape.MatchString(c.p.Line()) {
				t.Errorf("%q is not of the shape both backends share (%s)", c.p.Line(), progressShape)
			}
		})
	}
}

// A message another plan redrove meanwhile (already_redriven, found by the
// checks run again) is already sent in a RabbitMQ run's progress as in its
// summary: the last progress line and the summary say the same.
func TestRabbitProgressCountsRedrivenMeanwhileAsItsSummary(t *testing.T) {
	res := RabbitResult{Sent: 1, Skipped: []RabbitSkip{}}
	res.skip(RabbitSkip{EventID: "a", Reason: redrive.ReasonAlreadyRedriven})
	res.skip(RabbitSkip{EventID: "b", Reason: redrive.ReasonEffectCommitted})
	p := RabbitProgress("b7c8ccb8cb90", 3, 0, res, time.Second, false)
	out := RabbitOutcome(res)
	if p.Counts() != "3/3 (100%) sent 1 already sent 1 skipped 1 failed 0" || out.AlreadySent != p.AlreadySent || len(out.Skipped) != p.Skipped {
		t.Fatalf("progress %q; summary already sent %d, skipped %d: want them to agree (1 and 1)", p.Counts(), out.AlreadySent, len(out.Skipped))
	}
}
