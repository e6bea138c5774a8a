package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkRedriveAtScale is the incident-scale redrive as the user runs
// it, from the binary (see scaleRig: a `berth broker` process, payment
// records, the real PostgreSQL as system of record, review required):
// `redrive plan` signed by its author, `approve` by a second person, then
// the timed step, `redrive execute --yes` (transactions of the plan's batch
// size, audit per batch, read-back), and beside it, in the same run, a plain
// produce of the same records. It reports per step the wall time and peak
// RSS of the process, execute's records a second and its time against the
// plain produce (exec/produce), the plan file's bytes a record, and the
// peak RSS of `redrive show` and `status` of the plan.
//
//	BERTH_SCALE_RECORDS=100000 go test -run '^$' -bench '^BenchmarkRedriveAtScale$' -benchtime 1x -timeout 60m ./cmd/berth/
//
// BERTH_SCALE_RECORDS defaults to 100,000. Each iteration seeds a fresh
// broker (a plan's records are redriven once).
func BenchmarkRedriveAtScale(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("BERTH_SCALE_RECORDS")); err == nil && v > 0 {
		n = v
	}
	// Each command may take minutes at a million records: a cluster
	// operation's --timeout (10s by default) is raised, as a user would.
	const timeout = "10m"
	var plan, approve, show, showText, status, exec step
	var sent int
	var planBytes int64
	var ratio, baseRate float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r := newScaleRig(b, n)
		planFile := filepath.Join(r.dir, "plan.json")
		plan = r.run(b, "--timeout", timeout, "redrive", "plan", scaleDLQ, "--all", "--read", strconv.Itoa(n), "--rate", "1000000", "--batch-size", "1000",
			"--key", r.author, "--out", planFile, "-o", "json")
		var made struct {
			Hash   string                 `json:"hash"`
			Totals struct{ Included int } `json:"totals"`
		}
		if err := json.Unmarshal([]byte(plan.stdout), &made); plan.code != 0 || err != nil || made.Totals.Included != n-r.captured {
			b.Fatalf("redrive plan: exit %d %v: %s %.500s", plan.code, err, plan.stderr, plan.stdout)
		}
		st, err := os.Stat(planFile)
		if err != nil {
			b.Fatal(err)
		}
		planBytes = st.Size()
		ref := made.Hash[:16]
		if approve = r.run(b, "--timeout", timeout, "redrive", "approve", ref, "--key", r.approver, "-o", "json"); approve.code != 0 {
			b.Fatalf("redrive approve: exit %d: %s", approve.code, approve.stderr)
		}
		if show = r.run(b, "--timeout", timeout, "redrive", "show", ref, "-o", "json"); show.code != 0 {
			b.Fatalf("redrive show: exit %d: %s", show.code, show.stderr)
		}
		// The text a reviewer reads lists every record: a table row each.
		showText = r.run(b, "--timeout", timeout, "redrive", "show", ref)
		if lines := strings.Count(showText.stdout, "\n"); showText.code != 0 || lines < n || !strings.Contains(showText.stdout, fmt.Sprintf("\nselected %d, included %d,", n, made.Totals.Included)) {
			b.Fatalf("redrive show (text): exit %d, %d lines: %s %.300s", showText.code, lines, showText.stderr, showText.stdout)
		}
		showText.stdout = ""
		b.StartTimer()
		exec = r.run(b, "--timeout", timeout, "redrive", "execute", ref, "--yes", "--watch", "0", "-o", "json")
		b.StopTimer()
		// Said before the outcome is judged: a failed run's cost is a figure too.
		b.Logf("execute: exit %d in %.2fs, peak RSS %.0f MiB", exec.code, exec.wall.Seconds(), exec.mib())
		var done struct {
			Sent         int `json:"sent"`
			Verification struct {
				Kafka struct {
					Checked    int   `json:"checked"`
					Mismatches []any `json:"mismatches"`
				} `json:"kafka"`
			} `json:"verification"`
		}
		if err := json.Unmarshal([]byte(exec.stdout), &done); exec.code != 0 || err != nil {
			b.Fatalf("redrive execute: exit %d %v: %s%s", exec.code, err, exec.stderr, skipDetails(exec.stdout))
		}
		if v := done.Verification.Kafka; done.Sent != made.Totals.Included || v.Checked != done.Sent || len(v.Mismatches) != 0 {
			b.Fatalf("execute: %+v", done)
		}
		if got := r.landed(b, made.Hash); got != done.Sent {
			b.Fatalf("%d copies in %s, %d sent", got, scaleTopic, done.Sent)
		}
		if status = r.run(b, "--timeout", timeout, "redrive", "status", ref, "-o", "json"); status.code != 0 {
			b.Fatalf("redrive status: exit %d: %s", status.code, status.stderr)
		}
		sent = done.Sent
		base := r.baseline(b)
		baseRate = float64(n) / base.Seconds()
		ratio = exec.wall.Seconds() / base.Seconds()
		b.Logf("%d records: execute %.2fs %.0f MiB, plan %.2fs %.0f MiB, approve %.0f MiB, show %.0f MiB, show as text %.2fs %.0f MiB, status %.0f MiB, plain produce %.2fs",
			n, exec.wall.Seconds(), exec.mib(), plan.wall.Seconds(), plan.mib(), approve.mib(), show.mib(), showText.wall.Seconds(), showText.mib(), status.mib(), base.Seconds())
	}
	b.ReportMetric(float64(sent)/exec.wall.Seconds(), "exec-rec/s")
	b.ReportMetric(exec.wall.Seconds(), "exec-s")
	b.ReportMetric(exec.mib(), "exec-MiB")
	b.ReportMetric(ratio, "exec/produce")
	b.ReportMetric(baseRate, "produce-rec/s")
	b.ReportMetric(plan.wall.Seconds(), "plan-s")
	b.ReportMetric(plan.mib(), "plan-MiB")
	b.ReportMetric(float64(planBytes)/float64(n), "plan-B/rec")
	b.ReportMetric(approve.mib(), "approve-MiB")
	b.ReportMetric(show.mib(), "show-MiB")
	b.ReportMetric(showText.mib(), "show-text-MiB")
	b.ReportMetric(status.mib(), "status-MiB")
}

// skipDetails lists the distinct reasons and details of the records an
// execute output skipped (a failed run at scale says why, not only how
// many).
func skipDetails(stdout string) string {
	var out struct {
		Skipped []struct{ Reason, Detail string } `json:"skipped"`
	}
	if json.Unmarshal([]byte(stdout), &out) != nil || len(out.Skipped) == 0 {
		return ""
	}
	n := map[string]int{}
	var order []string
	for _, s := range out.Skipped {
		k := s.Reason + ": " + s.Detail
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	msg := "\nskipped:"
	for i, k := range order {
		if i == 10 {
			msg += fmt.Sprintf("\n  and %d more details", len(order)-i)
			break
		}
		msg += fmt.Sprintf("\n  %d %s", n[k], k)
	}
	return msg
}
