package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/redrive"
)

// TestPlanJSONStreamsTheSameDocument: the plan command's JSON, written a
// record at a time, is byte for byte what encoding the whole summary at
// once gives — with records whose details need escaping (<, &, quotes,
// control characters, non-ASCII), hazards with a newer offset, no records
// at all, and idempotency keys that look like the records field.
func TestPlanJSONStreamsTheSameDocument(t *testing.T) {
	newer := int64(42)
	plan := redrive.Plan{DLQ: "payments.DLT", Author: "alice@hc", CreatedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		Policy: redrive.PolicySnapshot{Review: "required", Approvals: 1, MaxRedrives: 3}}
	for i := 0; i < 50; i++ {
		r := redrive.PlanRecord{Partition: int32(i % 3), Offset: int64(i), Digest: redrive.Digest{1}, Target: "payments", EventID: fmt.Sprintf("evt-%d", i),
			IdempotencyKey: fmt.Sprintf("\n  \"records\": [] %d", i), Class: "c-0123456789", Verdict: redrive.Verdict{Included: true}}
		switch i % 5 {
		case 1:
			r.Verdict = redrive.Verdict{Reason: redrive.ReasonEffectCommitted, Detail: `the system of record has key <pay&"1">: déjà vu` + "\x1b[31m"}
		case 2:
			r.Verdict = redrive.Verdict{Included: true, NewerOffset: &newer, Detail: "a newer record"}
		}
		plan.Records = append(plan.Records, r)
	}
	for _, p := range []redrive.Plan{plan, {DLQ: "empty.DLT"}} {
		f := redrive.File{Hash: "abc", Plan: p}
		var whole, streamed bytes.Buffer
		review := reviewOf(actions.Summarise(p, nil, nil))
		all := planSummaryOf(f)
		all.Review = review
		if err := output.WriteJSON(&whole, all); err != nil {
			t.Fatal(err)
		}
		head := planHeadOf(f)
		head.Review = review
		if err := writePlanJSON(&streamed, head, f.Plan.Records); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole.Bytes(), streamed.Bytes()) {
			t.Fatalf("%d records: streamed JSON differs\nwhole:\n%s\nstreamed:\n%s", len(p.Records), whole.String(), streamed.String())
		}
	}
}
