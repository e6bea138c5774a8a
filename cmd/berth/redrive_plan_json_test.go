package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
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
	for _, p := range []redrive.Plan{awkwardPlan(50), {DLQ: "empty.DLT"}} {
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

// awkwardPlan is a plan of n records whose details need escaping (<, &,
// quotes, control characters, non-ASCII), with hazards that have a newer
// offset and idempotency keys that look like the JSON's records field.
func awkwardPlan(n int) redrive.Plan {
	newer := int64(42)
	plan := redrive.Plan{DLQ: "payments.DLT", Author: "alice@hc", CreatedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		Policy: redrive.PolicySnapshot{Review: "required", Approvals: 1, MaxRedrives: 3}}
	for i := 0; i < n; i++ {
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
	return plan
}

// The text of a plan (show, plan, approve's review), written a record at
// a time, lists every record once, in plan order, in aligned columns with
// nothing a terminal would interpret; the review's keys stay bounded, with
// a line saying how many more -o json has.
func TestPlanTextListsEveryRecordAligned(t *testing.T) {
	p := awkwardPlan(50)
	f := redrive.File{Hash: "abc", Plan: p}
	s := planHeadOf(f)
	s.Review = reviewOf(actions.Summarise(p, nil, nil))
	var out bytes.Buffer
	writePlanText(&out, s, p.Records)
	text := out.String()
	if strings.Contains(text, "\x1b") {
		t.Fatalf("an escape sequence reached the text:\n%s", text)
	}
	lines := strings.Split(text, "\n")
	head := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "PARTITION") {
			head = i
			break
		}
	}
	if head < 0 || len(lines) < head+1+len(p.Records) {
		t.Fatalf("no table of %d records:\n%s", len(p.Records), text)
	}
	event := strings.Index(lines[head], "EVENT")
	for i, r := range p.Records {
		row := lines[head+1+i]
		if !strings.HasPrefix(row[event:], r.EventID+" ") || !strings.HasSuffix(strings.Fields(row[:event])[1], strconv.FormatInt(r.Offset, 10)) {
			t.Fatalf("row %d is not record %s at offset %d in the EVENT column:\n%s", i, r.EventID, r.Offset, text)
		}
	}
	if next := lines[head+1+len(p.Records)]; !strings.HasPrefix(next, "selected 50, included 40, excluded 10") {
		t.Fatalf("after the %d rows: %q", len(p.Records), next)
	}
	if !strings.Contains(text, " ... and 20 more (all with -o json)") {
		t.Fatalf("the review's keys are not bounded with a count of the rest:\n%s", text)
	}
}
