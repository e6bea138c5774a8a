package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
)

// executeOutput is what `berth redrive execute` prints on both backends
// (issue 13: the same rules, and so the same answer, on Kafka and
// RabbitMQ). Every core field means the same on both; what only one
// backend has sits under its own name ("kafka" or "rabbitmq").
type executeOutput struct {
	Backend string `json:"backend"`
	Plan    string `json:"plan"`
	DLQ     string `json:"dlq"`
	// Sent were sent by this run; AlreadySent by an earlier run (the
	// ledger says so) and not sent again.
	Sent        int `json:"sent"`
	AlreadySent int `json:"already_sent"`
	// Excluded are the records the plan itself excluded (never sent).
	Excluded int `json:"excluded"`
	// Skipped are records the plan included that this run did not send,
	// each with its reason; Failed could not be sent (one entry a record).
	Skipped   []outcomeSkip    `json:"skipped"`
	Failed    []outcomeFailure `json:"failed"`
	Cancelled bool             `json:"cancelled"`
	Approvers []string         `json:"approvers"`
	// Problems are why the exit status is 1 (empty: 0).
	Problems     []string             `json:"problems"`
	Verification *outcomeVerification `json:"verification,omitempty"`
	Kafka        *kafkaOutcome        `json:"kafka,omitempty"`
	RabbitMQ     *rabbitOutcome       `json:"rabbitmq,omitempty"`
}

// outcomeSkip and outcomeFailure are counted by actions (RunOutcome), the
// one place a run is counted for this output and for the audit log.
type (
	outcomeSkip    = actions.SkippedRecord
	outcomeFailure = actions.FailedRecord
)

// outcomeVerification is the check after sending. OK is false when it
// found a problem (Problem says which); Refailed counts the plan's records
// that landed in the DLQ again within the watch (Watched: how long).
type outcomeVerification struct {
	OK       bool                        `json:"ok"`
	Problem  string                      `json:"problem,omitempty"`
	Watched  string                      `json:"watched"`
	Refailed int                         `json:"refailed"`
	Kafka    *actions.Verification       `json:"kafka,omitempty"`
	RabbitMQ *actions.RabbitVerification `json:"rabbitmq,omitempty"`
}

// kafkaOutcome: nothing Kafka-only at the top level yet; the read-back
// details are under verification.kafka.
type kafkaOutcome struct{}

// rabbitOutcome is what only RabbitMQ execution reports.
type rabbitOutcome struct {
	// Resent were recorded as intent by an earlier run that stopped before
	// their confirm, and sent again (also counted in sent).
	Resent int `json:"resent"`
	// Returned were returned by the broker as unroutable (also failed).
	Returned int `json:"returned"`
	// PassedOver are unselected messages left in the DLQ.
	PassedOver int `json:"passed_over"`
	// ByAnotherRun were sent by another run of the plan going on at the
	// same time (also counted in already_sent).
	ByAnotherRun int    `json:"by_another_run"`
	Stopped      string `json:"stopped,omitempty"`
}

// harmlessSkip is a skip reason that says the record needs no redrive (its
// effect is already done): it does not make the exit status 1. Any other
// skip (gone, changed, a check that could not run, a loop or an ordering
// hazard) leaves an approved record undelivered for a reason to look at.
func harmlessSkip(r redrive.Reason) bool {
	switch r {
	case redrive.ReasonEffectCommitted, redrive.ReasonDuplicate:
		return true
	}
	return false
}

// skipHint says, after a skip reason's count, what a reason that is not
// final means for the operator.
var skipHint = map[redrive.Reason]string{
	actions.ReasonNotVisible: " (held unacknowledged by other consumers of the DLQ: not sent; run the same command again once they are back)",
}

// judge fills Problems: the one exit-status rule for both backends.
func (o *executeOutput) judge() {
	o.Problems = []string{}
	if n := len(o.Failed); n > 0 {
		o.Problems = append(o.Problems, fmt.Sprintf("%d record(s) failed and stay in the DLQ", n))
	}
	bad := map[redrive.Reason]int{}
	var order []redrive.Reason
	for _, s := range o.Skipped {
		if harmlessSkip(s.Reason) {
			continue
		}
		if bad[s.Reason] == 0 {
			order = append(order, s.Reason)
		}
		bad[s.Reason]++
	}
	for _, r := range order {
		o.Problems = append(o.Problems, fmt.Sprintf("%d record(s) skipped: %s%s", bad[r], r, skipHint[r]))
	}
	if o.Cancelled {
		o.Problems = append(o.Problems, "cancelled before every record was sent: run the same command to resume")
	}
	if v := o.Verification; v != nil && !v.OK {
		o.Problems = append(o.Problems, "verification: "+v.Problem)
	}
}

// failedUnsent is, for a run that ended in err having sent nothing and
// failed no record (and not cancelled), its one error line, saying so;
// nil otherwise. Such a run prints no summary: "sent 0, skipped 0" before
// the error read as a run that found nothing to do (a DLQ deleted between
// plan and execute). The same rule on both backends.
func (o *executeOutput) failedUnsent(err error) error {
	if err == nil || o.Sent != 0 || len(o.Failed) != 0 || o.Cancelled {
		return nil
	}
	return fmt.Errorf("%w: nothing sent", err)
}

// stoppedBy adds a run's error to Problems: a run that sent some records
// and then failed exits 1 for it, and problems[] says why.
func (o *executeOutput) stoppedBy(err error) {
	if err != nil {
		o.Problems = append(o.Problems, "stopped by an error: "+sanitize.Text(config.RedactError(oneLine(err.Error()))))
	}
}

// exit is the exit status error for o: nil when every approved record was
// sent (now or before) or needs no redrive, and verification found nothing.
func (o *executeOutput) exit() error {
	if len(o.Problems) == 0 {
		return nil
	}
	return &exitError{code: 1, err: fmt.Errorf("redrive %s: %s", redrive.ShortHash(o.Plan), sanitize.Text(strings.Join(o.Problems, "; ")))}
}

// kafkaExecuteOutput maps a Kafka run onto the common shape.
func kafkaExecuteOutput(pf redrive.File, res actions.Result) executeOutput {
	o := executeOutput{Backend: "kafka", Plan: pf.Hash, DLQ: pf.Plan.DLQ, Cancelled: res.Cancelled, Approvers: res.Approval.Approvers, Kafka: &kafkaOutcome{}}
	o.counted(actions.KafkaOutcome(pf, res))
	return o
}

// counted sets the core counts and lists from the run's outcome.
func (o *executeOutput) counted(c actions.RunOutcome) {
	o.Sent, o.AlreadySent, o.Excluded, o.Skipped, o.Failed = c.Sent, c.AlreadySent, c.Excluded, c.Skipped, c.Failed
	if o.Approvers == nil {
		o.Approvers = []string{}
	}
}

// kafkaVerified sets the verification: a copy that does not match is a
// problem; re-failures are reported, not a problem (the redrive did what
// it should; the consumer failed again).
func (o *executeOutput) kafkaVerified(v *actions.Verification) {
	if v == nil {
		return
	}
	ov := &outcomeVerification{OK: len(v.Mismatches) == 0, Watched: v.Watched, Refailed: len(v.Refailed), Kafka: v}
	if !ov.OK {
		ov.Problem = fmt.Sprintf("%d of %d copies read back differ from the DLQ records", len(v.Mismatches), v.Checked)
	}
	o.Verification = ov
}

// rabbitExecuteOutput maps a RabbitMQ run onto the common shape.
func rabbitExecuteOutput(hash, dlq string, res actions.RabbitResult, cancelled bool, approvers []string) executeOutput {
	o := executeOutput{Backend: "rabbitmq", Plan: hash, DLQ: dlq, Cancelled: cancelled, Approvers: approvers,
		RabbitMQ: &rabbitOutcome{Resent: res.Resent, Returned: res.Returned, PassedOver: res.Passed, ByAnotherRun: res.ByAnotherRun, Stopped: res.Stopped}}
	o.counted(actions.RabbitOutcome(res))
	if v := res.Verification; v != nil {
		o.Verification = &outcomeVerification{OK: v.OK, Problem: v.Problem, Watched: v.Watched, Refailed: len(v.Refailed), RabbitMQ: v}
		if o.Verification.Watched == "" {
			o.Verification.Watched = "0s"
		}
	}
	return o
}

// writeExecuteText is the text form of executeOutput, the same on both
// backends but for the extras' lines.
func writeExecuteText(w io.Writer, o executeOutput) {
	fmt.Fprintf(w, "plan %s  dlq %s\nsent %d  already sent %d  excluded %d  skipped %d  failed %d", redrive.ShortHash(o.Plan), sanitize.Text(o.DLQ), o.Sent, o.AlreadySent, o.Excluded, len(o.Skipped), len(o.Failed))
	if r := o.RabbitMQ; r != nil {
		fmt.Fprintf(w, "  (resent %d, passed over %d)", r.Resent, r.PassedOver)
	}
	if o.Cancelled {
		fmt.Fprint(w, "  (cancelled: run the same command to resume)")
	}
	fmt.Fprintln(w)
	if len(o.Skipped) > 0 {
		g := output.Grid{Header: []string{"SKIPPED", "EVENT", "REASON", "DETAIL"}}
		for _, s := range o.Skipped {
			g.Add(sanitize.Text(s.Record), sanitize.Text(s.EventID), string(s.Reason), sanitize.Text(s.Detail))
		}
		_ = g.WriteTable(w)
	}
	for _, f := range o.Failed {
		fmt.Fprintf(w, "FAILED %s %s: %s\n", sanitize.Text(f.Record), sanitize.Text(f.Target), sanitize.Text(f.Error))
	}
	if r := o.RabbitMQ; r != nil && r.Stopped != "" {
		fmt.Fprintln(w, "stopped: "+sanitize.Text(r.Stopped))
	}
	if v := o.Verification; v != nil {
		state := "ok"
		if !v.OK {
			state = "PROBLEM: " + sanitize.Text(v.Problem)
		}
		switch {
		case v.Kafka != nil:
			fmt.Fprintf(w, "verified: %d copies read back, %d mismatches: %s; %d re-failed within %s (watch: %s)\n", v.Kafka.Checked, len(v.Kafka.Mismatches), state, v.Refailed, v.Watched, v.Kafka.WatchEnded)
			for _, m := range v.Kafka.Mismatches {
				fmt.Fprintf(w, "  mismatch %s -> %s %s: %s\n", m.DLQ, m.Target, m.Where, m.Reason)
			}
			for _, r := range v.Kafka.Refailed {
				fmt.Fprintf(w, "  re-failed: %s landed again at %s (%s)\n", r.Origin, r.DLQ, sanitize.Text(r.Exception))
			}
		case v.RabbitMQ != nil:
			rv := v.RabbitMQ
			fmt.Fprintf(w, "verified: DLQ depth %d -> %d with %d acked, %d returned: %s\n", rv.DepthBefore, rv.DepthAfter, rv.Acked, rv.Returned, state)
			if rv.Watched != "" {
				fmt.Fprintf(w, "%d re-failed within %s\n", len(rv.Refailed), rv.Watched)
			}
			for _, r := range rv.Refailed {
				fmt.Fprintf(w, "  re-failed: %s (#%d) %s in %s %s\n", sanitize.Text(r.EventID), r.Position, sanitize.Text(r.Reason), sanitize.Text(r.OriginalQueue), sanitize.Text(r.Error))
			}
		}
	}
	for _, p := range o.Problems {
		fmt.Fprintln(w, "problem: "+p)
	}
}

// writeProgress writes one progress line of `berth redrive execute`, the
// same on both backends (actions.Progress.Line; the console shows its
// counts too).
func writeProgress(w io.Writer, p actions.Progress) {
	fmt.Fprintln(w, p.Line())
}
