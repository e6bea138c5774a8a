package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// BenchmarkLagBinary measures `berth lag --sample 0` end to end, as a user
// runs it (the built binary, all groups, output to /dev/null), against the
// floor timed in the same run: kadm's Lag over all groups (ListGroups, then
// Lag: DescribeGroups, OffsetFetch, ListOffsets start and end), in process.
// Every group lags on every partition, so every age is read from the log.
// It reports each output format's time over the floor and the binary's
// peak RSS (the largest over the iterations).
//
//	go test ./cmd/berth -run '^$' -bench LagBinary -benchtime 5x
func BenchmarkLagBinary(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d/groups=50", n), func(b *testing.B) {
			kc := kafkatest.Start(b, 3)
			kc.SeedLagging(b, n, 50)
			bin := buildBerth(b)
			home := b.TempDir()
			env := append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_DATA_HOME="+filepath.Join(home, "data"))
			devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer devnull.Close()
			// The binary's own peak RSS comes from GNU time, which forks it
			// from a small process: os/exec starts children with vfork, so
			// their rusage would count this process's memory (the broker
			// and its 10,000 partitions) as theirs.
			gnuTime, _ := exec.LookPath("time")
			rssFile := filepath.Join(home, "rss")
			formats := []string{"json", "jsonl", "table"}
			var floor time.Duration
			took := make([]time.Duration, len(formats))
			rss := make([]int64, len(formats))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				kadmLagAll(b, kc)
				floor += time.Since(start)
				for f, format := range formats {
					args := []string{bin, "--bootstrap", strings.Join(kc.Addrs, ","), "--timeout", "5m", "-o", format, "lag", "--sample", "0"}
					if gnuTime != "" {
						args = append([]string{gnuTime, "-f", "%M", "-o", rssFile}, args...)
					}
					cmd := exec.Command(args[0], args[1:]...)
					cmd.Env, cmd.Stdout = env, devnull
					var stderr strings.Builder
					cmd.Stderr = &stderr
					start := time.Now()
					if err := cmd.Run(); err != nil {
						b.Fatalf("berth lag -o %s: %v: %s", format, err, stderr.String())
					}
					took[f] += time.Since(start)
					if gnuTime != "" {
						rss[f] = max(rss[f], readKiB(b, rssFile))
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(floor.Seconds()/float64(b.N), "floor-s/op")
			for f, format := range formats {
				b.ReportMetric(float64(took[f])/float64(floor), format+"/floor")
				if gnuTime != "" {
					b.ReportMetric(float64(rss[f])/1024, format+"-peak-RSS-MiB")
				}
			}
		})
	}
}

func readKiB(b *testing.B, path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		b.Fatalf("time wrote nothing to %s", path)
	}
	kib, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		b.Fatalf("time's peak RSS: %v", err)
	}
	return kib
}

func kadmLagAll(b *testing.B, kc *kafkatest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	listed, err := kc.Admin.ListGroups(ctx)
	if err != nil {
		b.Fatal(err)
	}
	lags, err := kc.Admin.Lag(ctx, listed.Groups()...)
	if err != nil {
		b.Fatal(err)
	}
	total := int64(0)
	for _, l := range lags {
		if err := l.Error(); err != nil {
			b.Fatal(err)
		}
		total += l.Lag.Total()
	}
	if total == 0 {
		b.Fatal("the floor saw no lag")
	}
}
