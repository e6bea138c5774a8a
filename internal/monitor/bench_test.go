package monitor

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/kafkatest"
)

// benchCluster is a 3-broker kfake with `partitions` partitions (topics of
// 100 partitions), 10 records per partition, and `groups` groups whose
// commits leave every partition lagging (group g commits offset g%10), so a
// full refresh reads an age for every group x partition.
type benchCluster struct {
	kc      *kafkatest.Cluster
	topics  []string
	groups  []string
	fetches atomic.Int64
}

func setupBench(b *testing.B, partitions, groups int) *benchCluster {
	b.Helper()
	kc := kafkatest.Start(b, 3)
	bc := &benchCluster{kc: kc}
	bc.topics, bc.groups = kc.SeedLagging(b, partitions, groups)
	kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		bc.fetches.Add(1)
		return nil, nil, false
	})
	return bc
}

func (bc *benchCluster) dial(b *testing.B) (*kafka.Cluster, *kafka.TimestampReader, *kadm.Client) {
	c, err := kafka.Dial(context.Background(), kafka.Options{Bootstrap: bc.kc.Addrs, Timeout: 60 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	b.Cleanup(cl.Close)
	return cl, kafka.NewTimestampReader(c), c.Admin()
}

// offsetsOnly is the baseline: what offset-lag tools do (kadm ListEndOffsets
// plus the groups' committed offsets), no ages, no metadata beyond kadm's.
func offsetsOnly(b *testing.B, adm *kadm.Client, bc *benchCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, bc.topics...)
	if err != nil {
		b.Fatal(err)
	}
	resps := adm.FetchManyOffsets(ctx, bc.groups...)
	var total int64
	for _, r := range resps {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		r.Fetched.Each(func(o kadm.OffsetResponse) {
			if e, ok := ends.Lookup(o.Topic, o.Partition); ok {
				total += e.Offset - o.At
			}
		})
	}
	if total == 0 {
		b.Fatal("no lag computed")
	}
}

// offsetsPerGroup is the same baseline as the issue words it and simple
// tools do it: ListEndOffsets, then FetchOffsets group by group.
func offsetsPerGroup(b *testing.B, adm *kadm.Client, bc *benchCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, bc.topics...)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, g := range bc.groups {
		offs, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			b.Fatal(err)
		}
		offs.Each(func(o kadm.OffsetResponse) {
			if e, ok := ends.Lookup(o.Topic, o.Partition); ok {
				total += e.Offset - o.At
			}
		})
	}
	if total == 0 {
		b.Fatal("no lag computed")
	}
}

func refreshOnce(b *testing.B, m *Monitor) Snapshot {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := m.Refresh(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if len(s.Warnings) > 0 {
		b.Fatalf("warnings: %v", s.Warnings)
	}
	return s
}

// peakHeap samples the heap (live and not yet collected objects) every
// few milliseconds until stop is called, and returns the highest value.
func peakHeap() (stop func() float64) {
	done := make(chan struct{})
	res := make(chan float64)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		peak := 0.0
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := float64(sample[0].Value.Uint64()) / (1 << 20); v > peak {
				peak = v
			}
			select {
			case <-done:
				res <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() float64 { close(done); return <-res }
}

// settle collects garbage between the measured operations, so that none
// pays for another's garbage (the baseline allocates 100s of MB at 10,000
// partitions); each still pays for the collections its own allocations
// cause.
func settle() { runtime.GC() }

// processCPU is the CPU time this process has used (user + system, every
// thread: the client, the in-process broker, the garbage collector). On a
// shared machine it is steadier than wall time: another process's load
// stretches wall time but not this process's CPU.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func liveHeapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// BenchmarkRefresh compares, in the same run, an offsets-only lag read
// (kadm ListEndOffsets + FetchManyOffsets, one batched OffsetFetch per
// coordinator: offsets-ms; and ListEndOffsets + FetchOffsets group by group:
// offsets-pergroup-ms) with a full monitor refresh (topics, ISR, configs,
// groups, commits, ages):
//
//   - ratio-cold: a full refresh on a fresh monitor (every age read from the
//     log) / offsets-only;
//   - ratio-warm: a refresh after one with no new commits (ages cached, no
//     Fetch) / offsets-only;
//   - cpu-ratio-cold, cpu-ratio-warm: the same ratios in process CPU time
//     (client, in-process broker and garbage collector together), which
//     other load on the machine does not stretch;
//   - cold-read-ms, cold-ages-ms, cold-compute-ms: the cold refresh's
//     phases (reading the cluster, reading timestamps, the rest);
//   - noages-ms: the same monitor refresh with ages switched off (what
//     topics, ISR, configs, groups and commits cost without the log reads);
//   - fetches-warm: Fetch requests the brokers saw during warm refreshes (0);
//   - heap-MiB: live heap after a refresh with the snapshot held, minus the
//     heap before the monitor existed (the broker and its data are in the
//     same process and excluded); peak-heap-MiB: the highest heap (live
//     plus not yet collected) seen during a warm refresh, same baseline.
func BenchmarkRefresh(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d/groups=50", n), func(b *testing.B) {
			bc := setupBench(b, n, 50)
			cl, _, adm := bc.dial(b)
			offsetsOnly(b, adm, bc) // warm connections
			before := liveHeapMiB()
			var offT, seqT, coldT, warmT, noAgesT, readT, computeT, coldReadT, coldAgesT, coldComputeT time.Duration
			var offCPU, coldCPU, warmCPU time.Duration
			var warmFetches int64
			var heap, peak float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A fresh reader, nothing cached, on the monitor's own
				// client (connections up, as the baseline's are): what
				// `berth lag` and the console build.
				reader := kafka.NewTimestampReader(cl.Client())
				m := New(cl, reader, Config{Groups: bc.groups})
				settle()
				ts := time.Now()
				offsetsPerGroup(b, adm, bc)
				seqT += time.Since(ts)
				settle()
				t0, c0 := time.Now(), processCPU()
				offsetsOnly(b, adm, bc)
				offT += time.Since(t0)
				offCPU += processCPU() - c0
				settle()
				t1, c1 := time.Now(), processCPU()
				s := refreshOnce(b, m)
				coldT += time.Since(t1)
				coldCPU += processCPU() - c1
				coldReadT += s.Phases.Read
				coldAgesT += s.Phases.Ages
				coldComputeT += s.Phases.Compute
				f0 := bc.fetches.Load()
				var stopPeak func() float64
				if i == 0 {
					stopPeak = peakHeap()
				}
				settle()
				t2, c2 := time.Now(), processCPU()
				s = refreshOnce(b, m)
				warmT += time.Since(t2)
				warmCPU += processCPU() - c2
				if i == 0 {
					peak = stopPeak() - before
				}
				readT += s.Phases.Read
				computeT += s.Phases.Compute
				warmFetches += bc.fetches.Load() - f0
				if i == 0 {
					b.StopTimer()
					if got := len(s.Groups); got != 50 {
						b.Fatalf("%d groups", got)
					}
					for _, g := range s.Groups {
						if len(g.Partitions) != n || g.AgesUnknown != 0 || !g.MaxAgeKnown {
							b.Fatalf("group %s: %d rows, %d ages unknown", g.Group, len(g.Partitions), g.AgesUnknown)
						}
					}
					heap = liveHeapMiB() - before
					runtime.KeepAlive(s)
					runtime.KeepAlive(m)
					b.StartTimer()
				}
			}
			// The same refresh without ages, after the monitors above are
			// gone (so they do not count in heap-MiB).
			noAges := New(cl, nil, Config{Groups: bc.groups, SkipAges: true})
			refreshOnce(b, noAges)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				refreshOnce(b, noAges)
				noAgesT += time.Since(t0)
			}
			b.ReportMetric(float64(offT.Milliseconds())/float64(b.N), "offsets-ms")
			b.ReportMetric(float64(coldT.Milliseconds())/float64(b.N), "cold-ms")
			b.ReportMetric(float64(warmT.Milliseconds())/float64(b.N), "warm-ms")
			b.ReportMetric(float64(noAgesT.Milliseconds())/float64(b.N), "noages-ms")
			b.ReportMetric(float64(readT.Milliseconds())/float64(b.N), "warm-read-ms")
			b.ReportMetric(float64(computeT.Milliseconds())/float64(b.N), "warm-compute-ms")
			b.ReportMetric(float64(coldReadT.Milliseconds())/float64(b.N), "cold-read-ms")
			b.ReportMetric(float64(coldAgesT.Milliseconds())/float64(b.N), "cold-ages-ms")
			b.ReportMetric(float64(coldComputeT.Milliseconds())/float64(b.N), "cold-compute-ms")
			b.ReportMetric(float64(seqT.Milliseconds())/float64(b.N), "offsets-pergroup-ms")
			b.ReportMetric(float64(coldT)/float64(seqT), "ratio-cold-pergroup")
			b.ReportMetric(float64(warmT)/float64(seqT), "ratio-warm-pergroup")
			b.ReportMetric(float64(coldT)/float64(offT), "ratio-cold")
			b.ReportMetric(float64(warmT)/float64(offT), "ratio-warm")
			b.ReportMetric(float64(coldCPU)/float64(offCPU), "cpu-ratio-cold")
			b.ReportMetric(float64(warmCPU)/float64(offCPU), "cpu-ratio-warm")
			b.ReportMetric(float64(warmFetches)/float64(b.N), "fetches-warm")
			b.ReportMetric(heap, "heap-MiB")
			b.ReportMetric(peak, "peak-heap-MiB")
		})
	}
}
