package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/redrive"
)

// A RabbitMQ plan's JSON (redrive plan, show and status -o json) writes its
// rows one at a time, and a script reading it gets exactly what encoding
// the whole summary at once gives: same bytes, escaping and indentation,
// with no rows, with some, and nested in status's summary.
func TestPlanJSONStreamsRowsAsTheWholeEncoding(t *testing.T) {
	hazard := 1
	recs := []redrive.QueueRecord{
		redrive.QueueRecord{Position: 0, EventID: "e<0>&", Verdict: redrive.Verdict{Included: true}}.WithOrigin(redrive.QueueOrigin{Class: "c", Exchange: "x", RoutingKey: "k"}),
		redrive.QueueRecord{Position: 1, EventID: "é\u2028", HazardPosition: &hazard, Verdict: redrive.Verdict{Reason: redrive.ReasonLoopLimit, Detail: "redriven 3 times"}}.WithOrigin(redrive.QueueOrigin{DeathReason: "rejected"}),
	}
	for _, rs := range [][]redrive.QueueRecord{nil, recs} {
		sum := qPlanSummary{Hash: "h", DLQ: "q", Records: qPlanRows{recs: rs}, Review: &qPlanReview{Keys: []string{"k<1>", "é\u2028", "k3"}}}
		var whole, streamed bytes.Buffer
		if err := output.WriteJSON(&whole, sum); err != nil {
			t.Fatal(err)
		}
		if err := writeQJSON(&streamed, &sum, &sum.Records, sum.Review); err != nil {
			t.Fatal(err)
		}
		if streamed.String() != whole.String() {
			t.Fatalf("%d rows streamed:\n%s\nwhole:\n%s", len(rs), streamed.String(), whole.String())
		}
		status := struct {
			qStatusRow
			Summary qPlanSummary `json:"summary"`
		}{qStatusRow{Vhost: "/"}, sum}
		whole.Reset()
		streamed.Reset()
		if err := output.WriteJSON(&whole, status); err != nil {
			t.Fatal(err)
		}
		if err := writeQJSON(&streamed, &status, &status.Summary.Records, status.Summary.Review); err != nil {
			t.Fatal(err)
		}
		if streamed.String() != whole.String() {
			t.Fatalf("status with %d rows streamed:\n%s\nwhole:\n%s", len(rs), streamed.String(), whole.String())
		}
	}
}

// A RabbitMQ review's lists of event ids in text (changed, gone, not
// visible) each name the first reviewKeysShown and say how many more -o
// json has: a DLQ another consumer holds whole would otherwise print a
// million ids on one line.
func TestPlanTextBoundsEveryIDList(t *testing.T) {
	ids := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return out
	}
	sum := qPlanSummary{Hash: "h", DLQ: "q", Review: &qPlanReview{Complete: true,
		Changed: ids("changed", 25), Gone: ids("gone", 30), NotVisible: ids("held", 1000)}}
	var out bytes.Buffer
	writeQPlan(&out, sum)
	text := out.String()
	for _, l := range []struct {
		prefix, id string
		more       int
	}{{"CHANGED", "changed-", 5}, {"GONE", "gone-", 10}, {"NOT VISIBLE", "held-", 980}} {
		line := ""
		for _, s := range strings.Split(text, "\n") {
			if strings.HasPrefix(s, l.prefix) {
				line = s
			}
		}
		if !strings.HasSuffix(line, fmt.Sprintf(" ... and %d more (all with -o json)", l.more)) || strings.Count(line, l.id) != reviewKeysShown {
			t.Errorf("%s line names %d ids; want %d and %q:\n%s", l.prefix, strings.Count(line, l.id), reviewKeysShown, fmt.Sprintf("and %d more", l.more), line)
		}
	}
}
