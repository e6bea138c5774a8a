package actions

import (
	"fmt"

	"github.com/berth-dev/berth/redrive"
)

// RunOutcome is what one execution did, counted in one place for both
// backends under the names `berth redrive execute` prints and the
// redrive.execute.* end entry records (issue 13: the same answer on Kafka
// and RabbitMQ). Sent by this run; AlreadySent by an earlier run (the
// ledger says so) and not sent again; Excluded by the plan itself;
// Skipped, included records this run did not send, each with its reason;
// Failed, records that could not be sent and stay in the DLQ.
type RunOutcome struct {
	Sent        int
	AlreadySent int
	Excluded    int
	Skipped     []SkippedRecord
	Failed      []FailedRecord
}

// SkippedRecord is one included record not sent. Record is where it is:
// Kafka partition:offset, RabbitMQ its event id (a queue has no stable
// position).
type SkippedRecord struct {
	Record  string         `json:"record"`
	EventID string         `json:"event_id,omitempty"`
	Reason  redrive.Reason `json:"reason"`
	Detail  string         `json:"detail,omitempty"`
}

// FailedRecord is one record that could not be sent; it stays in the DLQ.
type FailedRecord struct {
	Record  string `json:"record"`
	EventID string `json:"event_id,omitempty"`
	// Target is where it was going, when the backend knows per record
	// (RabbitMQ: exchange and routing key).
	Target string `json:"target,omitempty"`
	Error  string `json:"error"`
}

func newOutcome(sent, alreadySent, excluded int) RunOutcome {
	return RunOutcome{Sent: sent, AlreadySent: alreadySent, Excluded: excluded, Skipped: []SkippedRecord{}, Failed: []FailedRecord{}}
}

// skip counts one included record not sent this run: the ledger's
// already_redriven is already sent, not a skip.
func (o *RunOutcome) skip(s SkippedRecord) {
	if s.Reason == redrive.ReasonAlreadyRedriven {
		o.AlreadySent++
		return
	}
	o.Skipped = append(o.Skipped, s)
}

// KafkaOutcome counts a Kafka run: the plan's excluded records come back
// among res.Skipped and are counted as excluded; the records an earlier
// run sent are counted (res.AlreadySent), or listed (Options.PerRecord).
func KafkaOutcome(f redrive.File, res Result) RunOutcome {
	excluded := map[redrive.Coord]bool{}
	for _, r := range f.Plan.Records {
		if !r.Included {
			excluded[r.Coord()] = true
		}
	}
	o := newOutcome(res.Sent, res.AlreadySent, 0)
	for _, s := range res.Skipped {
		c := redrive.Coord{Partition: s.Partition, Offset: s.Offset}
		if excluded[c] {
			o.Excluded++
			continue
		}
		o.skip(SkippedRecord{Record: c.String(), EventID: s.EventID, Reason: s.Reason, Detail: s.Detail})
	}
	for _, fl := range res.Failed {
		for _, c := range fl.Records {
			o.Failed = append(o.Failed, FailedRecord{Record: c.String(), Error: fl.Error})
		}
	}
	return o
}

// RabbitOutcome counts a RabbitMQ run: a message no longer in the DLQ is
// Kafka's record_gone; one sent and acked by an earlier run is already
// sent.
func RabbitOutcome(res RabbitResult) RunOutcome {
	o := newOutcome(res.Sent, res.AlreadySent+res.DoneBefore, res.Excluded)
	for _, s := range res.Skipped {
		o.skip(SkippedRecord{Record: s.EventID, EventID: s.EventID, Reason: s.Reason, Detail: s.Detail})
	}
	for _, id := range res.NotFound {
		o.skip(SkippedRecord{Record: id, EventID: id, Reason: ReasonGone, Detail: "no longer in the DLQ (consumed or purged elsewhere)"})
	}
	for _, f := range res.Failed {
		o.Failed = append(o.Failed, FailedRecord{Record: f.EventID, EventID: f.EventID, Target: fmt.Sprintf("exchange %q routing key %q", f.Exchange, f.RoutingKey), Error: f.Error})
	}
	return o
}

// details is the end entry's details; the caller adds what only its
// backend has.
func (o RunOutcome) details(err error) map[string]any {
	reasons := map[string]int{}
	for _, s := range o.Skipped {
		reasons[string(s.Reason)]++
	}
	return map[string]any{"sent": o.Sent, "already_sent": o.AlreadySent, "excluded": o.Excluded,
		"skipped": len(o.Skipped), "skipped_reasons": reasons, "failed": len(o.Failed), "error": errString(err)}
}
