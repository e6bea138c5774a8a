package actions

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/redrive"
)

// Progress is a run's progress, one shape for both backends and for every
// front end: `berth redrive execute` prints it as Line, the console shows
// Counts beside its bar. Kafka's executor reports it after every batch;
// a RabbitMQ run's is RabbitProgress of the run's result so far.
type Progress struct {
	Plan string `json:"plan"`
	// Total is the records the run is to settle; Sent, AlreadySent,
	// Skipped and Failed are those settled so far.
	Total int `json:"total"`
	Sent  int `json:"sent"`
	// AlreadySent counts the records an earlier run of the plan sent, with
	// or without Options.PerRecord (which lists them among the result's
	// Skipped): the console and the CLI count a run the same.
	AlreadySent int           `json:"already_sent"`
	Skipped     int           `json:"skipped"`
	Failed      int           `json:"failed"`
	Paused      bool          `json:"paused"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	ETA         time.Duration `json:"eta_ns"`
}

// ETA is how long a run that sent sent records in elapsed takes for the
// left still to settle, at the pace so far (0 before anything was sent);
// under a rate limit (records per second, 0: none) never shorter than the
// limit allows, since the first batch goes out at once and the limit
// paces the rest. Both backends' progress uses it.
func ETA(elapsed time.Duration, sent, left, rate int) time.Duration {
	if left <= 0 {
		return 0
	}
	var eta time.Duration
	if sent > 0 {
		eta = time.Duration(float64(elapsed) / float64(sent) * float64(left))
	}
	if rate > 0 {
		eta = max(eta, time.Duration(float64(left)/float64(rate)*float64(time.Second)))
	}
	return eta
}

// RabbitProgress is a RabbitMQ run's progress, counted as its summary
// counts (RabbitOutcome): total is the plan's included records; sent
// before, or meanwhile by another plan (already_redriven), is already
// sent; skipped by the checks run again at execution, changed, not
// visible and gone are skipped. So done is
// r.Settled(), and a run that read its whole plan ends at total. rate is
// the plan's limit (messages per second, 0: none).
func RabbitProgress(hash string, total, rate int, r RabbitResult, elapsed time.Duration, paused bool) Progress {
	p := Progress{Plan: hash, Total: total, Sent: r.Sent, AlreadySent: r.AlreadySent + r.DoneBefore + r.redriven,
		Skipped: len(r.Skipped) - r.redriven + len(r.NotFound), Failed: len(r.Failed), Elapsed: elapsed, Paused: paused}
	p.ETA = ETA(elapsed, p.Sent, total-r.Settled(), rate)
	return p
}

// Done is how many of Total the run has settled.
func (p Progress) Done() int { return p.Sent + p.AlreadySent + p.Skipped + p.Failed }

// Percent is Done of Total, rounded down (100% is the whole plan
// settled); 100 for an empty plan.
func (p Progress) Percent() int {
	if p.Total <= 0 {
		return 100
	}
	return 100 * p.Done() / p.Total
}

// Rate is what the run sends at: records sent per second of Elapsed.
func (p Progress) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Sent) / p.Elapsed.Seconds()
}

// Counts are the progress line's counts, which the console shows too:
//
//	done/total (pct%) sent N already sent N skipped N failed N
func (p Progress) Counts() string {
	return fmt.Sprintf("%d/%d (%d%%) sent %d already sent %d skipped %d failed %d", p.Done(), p.Total, p.Percent(), p.Sent, p.AlreadySent, p.Skipped, p.Failed)
}

// Line is `berth redrive execute`'s progress line, the same on both
// backends, with no terminal escapes and no newline:
//
//	progress H: done/total (pct%) sent N already sent N skipped N failed N, R/s, eta X [paused]
func (p Progress) Line() string {
	state := ""
	if p.Paused {
		state = " [paused]"
	}
	return fmt.Sprintf("progress %s: %s, %.0f/s, eta %s%s", redrive.ShortHash(p.Plan), p.Counts(), p.Rate(), p.ETA.Round(time.Second), state)
}
