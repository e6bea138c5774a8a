package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkRedriveExecute runs `redrive execute --yes` of the scale rig's
// payments plan (see BenchmarkRedrivePlan) through the CLI's own entry
// point, in-process, so a heap profile or allocation count covers execute
// alone: the plan is made and approved by the binary beforehand, and each
// iteration seeds a fresh broker (a plan's records are redriven once). It
// reports records sent a second and the bytes execute allocates:
//
//	go test -run '^$' -bench '^BenchmarkRedriveExecute$' -benchtime 1x -timeout 30m ./cmd/berth/
//
// BERTH_SCALE_RECORDS sets the size (default 100,000; 10,000 with -short).
func BenchmarkRedriveExecute(b *testing.B) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	if v, _ := strconv.Atoi(os.Getenv("BERTH_SCALE_RECORDS")); v > 0 {
		n = v
	}
	const timeout = "10m"
	var elapsed time.Duration
	sent := 0
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r := newScaleRig(b, n)
		planFile := filepath.Join(r.dir, "plan.json")
		plan := r.run(b, "--timeout", timeout, "redrive", "plan", scaleDLQ, "--all", "--read", strconv.Itoa(n), "--rate", "1000000", "--batch-size", "1000",
			"--key", r.author, "--out", planFile, "-o", "json")
		var made struct {
			Hash string `json:"hash"`
		}
		if err := json.Unmarshal([]byte(plan.stdout), &made); plan.code != 0 || err != nil {
			b.Fatalf("redrive plan: exit %d %v: %s", plan.code, err, plan.stderr)
		}
		ref := made.Hash[:16]
		if s := r.run(b, "--timeout", timeout, "redrive", "approve", ref, "--key", r.approver, "-o", "json"); s.code != 0 {
			b.Fatalf("redrive approve: exit %d: %s", s.code, s.stderr)
		}
		var out, errOut bytes.Buffer
		start := time.Now()
		b.StartTimer()
		code := run([]string{"--config", r.config, "--timeout", timeout, "redrive", "execute", ref, "--yes", "--watch", "0", "-o", "json"}, &out, &errOut)
		b.StopTimer()
		elapsed += time.Since(start)
		var done struct {
			Sent int `json:"sent"`
		}
		if err := json.Unmarshal(out.Bytes(), &done); code != 0 || err != nil || done.Sent != n-r.captured {
			b.Fatalf("redrive execute: exit %d %v: sent %d: %.2000s", code, err, done.Sent, errOut.String())
		}
		sent += done.Sent
	}
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "sent/s")
}
