package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestRedriveAtScaleFromTheBinary runs a whole payments redrive from the
// command line, as an SRE would during an incident, and reports what each
// step cost: `dlq classes`, `redrive plan` (signed by its author, with the
// system of record asked for every record), `redrive approve` by a second
// person, `redrive execute` (transactions of the plan's batch size, audit
// per batch, read-back), each with its wall time and peak RSS, and the plan
// file's size per record; beside it, a plain produce of the same records in
// the same run. It asserts what a user relies on (every included payment
// lands exactly once, the captured ones never) and never a duration.
//
//	BERTH_SCALE_RECORDS=100000 go test -run TestRedriveAtScaleFromTheBinary -v -timeout 30m ./cmd/berth/
//
// BERTH_SCALE_STEPS=plan stops after `redrive plan` (its figures and what
// it must hold are still checked), so the plan can be measured alone at
// sizes whose execute would take too long. Unset, it does not run (it is a
// measurement, minutes long at scale).
func TestRedriveAtScaleFromTheBinary(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BERTH_SCALE_RECORDS"))
	if n <= 0 {
		t.Skip("a measurement: set BERTH_SCALE_RECORDS (e.g. 100000) to run it")
	}
	r := newScaleRig(t, n)
	planOnly := os.Getenv("BERTH_SCALE_STEPS") == "plan"
	// The DLQ holds one class: alone, the plan selects it with --all and
	// `dlq classes` (which holds every record it reads) is not run.
	selection := []string{"--all"}
	if !planOnly {
		selection = []string{"--class", r.class(t)}
	}
	planFile := filepath.Join(r.dir, "plan.json")
	read := strconv.Itoa(n)
	plan := r.run(t, append(append([]string{"redrive", "plan", scaleDLQ}, selection...), "--read", read, "--rate", "1000000", "--batch-size", "1000",
		"--key", r.author, "--out", planFile, "-o", "json")...)
	if plan.code != 0 {
		t.Fatalf("redrive plan: exit %d: %s", plan.code, plan.stderr)
	}
	var made struct {
		Hash   string `json:"hash"`
		Stored bool   `json:"stored"`
		Note   string `json:"store_note"`
		Totals struct {
			Selected, Included int
			ByReason           map[string]int `json:"by_reason"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(plan.stdout), &made); err != nil {
		t.Fatal(err)
	}
	if !made.Stored || made.Totals.Selected != n || made.Totals.Included != n-r.captured || made.Totals.ByReason["effect_committed"] != r.captured {
		t.Fatalf("plan: stored %v (%s), totals %+v", made.Stored, made.Note, made.Totals)
	}
	st, err := os.Stat(planFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("records %d (included %d, captured %d)", n, made.Totals.Included, r.captured)
	t.Logf("redrive plan:    %8.2fs  peak RSS %6.0f MiB  plan file %d bytes (%.1f bytes/record)", plan.wall.Seconds(), plan.mib(), st.Size(), float64(st.Size())/float64(n))
	if planOnly {
		return
	}
	approve := r.run(t, "redrive", "approve", made.Hash[:16], "--key", r.approver, "-o", "json")
	if approve.code != 0 {
		t.Fatalf("redrive approve: exit %d: %s", approve.code, approve.stderr)
	}
	exec := r.run(t, "redrive", "execute", made.Hash[:16], "--yes", "--watch", "0", "-o", "json")
	if exec.code != 0 {
		t.Fatalf("redrive execute: exit %d: %s", exec.code, exec.stderr)
	}
	var done struct {
		Sent     int `json:"sent"`
		Verified struct {
			Kafka struct {
				Checked    int   `json:"checked"`
				Mismatches []any `json:"mismatches"`
			} `json:"kafka"`
		} `json:"verification"`
	}
	if err := json.Unmarshal([]byte(exec.stdout), &done); err != nil {
		t.Fatal(err)
	}
	if done.Sent != made.Totals.Included || done.Verified.Kafka.Checked != done.Sent || len(done.Verified.Kafka.Mismatches) != 0 {
		t.Fatalf("execute: %+v", done)
	}
	if got := r.landed(t, made.Hash); got != done.Sent {
		t.Fatalf("%d copies in %s, %d sent", got, scaleTopic, done.Sent)
	}
	base := r.baseline(t)
	t.Logf("redrive approve: %8.2fs  peak RSS %6.0f MiB", approve.wall.Seconds(), approve.mib())
	t.Logf("redrive execute: %8.2fs  peak RSS %6.0f MiB  %.0f records/s (sent / wall time of the command, read-back included)",
		exec.wall.Seconds(), exec.mib(), float64(done.Sent)/exec.wall.Seconds())
	t.Logf("baseline plain produce of the same %d records: %.2fs, %.0f records/s; execute/baseline time ratio %.1fx",
		n, base.Seconds(), float64(n)/base.Seconds(), exec.wall.Seconds()/base.Seconds())
}
