package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRedrivePlan makes the scale rig's payments plan (Spring DLQ
// records of about 1 KB, the system of record in the real PostgreSQL asked
// for every record, the ledger, the ordering scan over the original topic,
// the author's signature, the plan file, the plan store and the audit log)
// through the CLI's own entry point, in-process, against a `berth broker`
// process; beside it, in the same run, a plain franz-go consumer reads the
// same DLQ records and keeps nothing. It reports records/s, the ratio of
// the plan's time to the plain read's, and the bytes the plan allocates:
//
//	go test -run '^$' -bench RedrivePlan -benchtime 3x -timeout 30m ./cmd/berth/
//
// BERTH_SCALE_RECORDS sets the size (default 100,000; 10,000 with -short).
func BenchmarkRedrivePlan(b *testing.B) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	if v, _ := strconv.Atoi(os.Getenv("BERTH_SCALE_RECORDS")); v > 0 {
		n = v
	}
	r := newScaleRig(b, n)
	plain := r.plainRead(b)
	planFile := filepath.Join(r.dir, "bench-plan.json")
	// The DLQ holds one failure class: --all selects what --class would.
	args := []string{"--config", r.config, "redrive", "plan", scaleDLQ, "--all", "--read", strconv.Itoa(n),
		"--rate", "1000000", "--batch-size", "1000", "--key", r.author, "--out", planFile, "-o", "json"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 {
			b.Fatalf("redrive plan: exit %d: %s", code, errOut.String())
		}
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(n)/per.Seconds(), "records/s")
	b.ReportMetric(float64(n)/plain.Seconds(), "plain-records/s")
	b.ReportMetric(per.Seconds()/plain.Seconds(), "x-plain-read")
}

// plainRead is the floor for reading the DLQ: one franz-go consumer from
// the start of every partition to n records, keeping nothing.
func (r *scaleRig) plainRead(t testing.TB) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr), kgo.ConsumeTopics(scaleDLQ), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	seen := 0
	for seen < r.n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("plain read of %s: %v after %d records", scaleDLQ, ctx.Err(), seen)
		}
		seen += fs.NumRecords()
	}
	return time.Since(start)
}
