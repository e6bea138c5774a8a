package actions

import (
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/redrive"
)

// runCounts is what a run did, under the names `berth redrive execute`
// prints on both backends, so a redrive.execute.* end entry reads the same
// whichever backend wrote it (issue 13): Sent by this run; AlreadySent by
// an earlier run (the ledger says so) and not sent again; Excluded by the
// plan itself; Skipped, by reason, included records this run did not send;
// Failed, records that could not be sent and stay in the DLQ.
type runCounts struct {
	sent, alreadySent, excluded, failed int
	skipped                             map[redrive.Reason]int
}

// skip counts one included record not sent this run: the ledger's
// already_redriven is already sent, not a skip.
func (c *runCounts) skip(r redrive.Reason) {
	if r == redrive.ReasonAlreadyRedriven {
		c.alreadySent++
		return
	}
	if c.skipped == nil {
		c.skipped = map[redrive.Reason]int{}
	}
	c.skipped[r]++
}

// details is the end entry's details; the caller adds what only its
// backend has.
func (c runCounts) details(err error) map[string]any {
	n := 0
	reasons := map[string]int{}
	for r, k := range c.skipped {
		n += k
		reasons[string(r)] = k
	}
	return map[string]any{"sent": c.sent, "already_sent": c.alreadySent, "excluded": c.excluded,
		"skipped": n, "skipped_reasons": reasons, "failed": c.failed, "error": errString(err)}
}

// kafkaCounts reads a Kafka run: the plan's excluded records come back
// among res.Skipped and are counted as excluded.
func kafkaCounts(f redrive.File, res Result) runCounts {
	excluded := map[redrive.Coord]bool{}
	for _, r := range f.Plan.Records {
		if !r.Included {
			excluded[r.Coord()] = true
		}
	}
	c := runCounts{sent: res.Sent, failed: failedCount(&res)}
	for _, s := range res.Skipped {
		if excluded[redrive.Coord{Partition: s.Partition, Offset: s.Offset}] {
			c.excluded++
			continue
		}
		c.skip(s.Reason)
	}
	return c
}

// rabbitCounts reads a RabbitMQ run: a message no longer in the DLQ is
// Kafka's record_gone; one sent and acked by an earlier run is already sent.
func rabbitCounts(res rabbitmq.Result) runCounts {
	c := runCounts{sent: res.Sent, alreadySent: res.AlreadySent + res.DoneBefore, excluded: res.Excluded, failed: len(res.Failed)}
	for _, s := range res.Skipped {
		c.skip(s.Reason)
	}
	for range res.NotFound {
		c.skip(ReasonGone)
	}
	return c
}
