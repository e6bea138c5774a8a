package bundled

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkMetadata compares a full Metadata request on a healthy cluster
// (kfake answers directly) with the degraded path (passed through kfake's
// handler by the internal client, then edited). Compare the two sub-benchmarks
// of one run: the ratio is the cost of the simulation.
func BenchmarkMetadata(b *testing.B) {
	for _, tc := range []struct {
		name string
		down []int32
	}{{"healthy", nil}, {"one-down", []int32{1}}} {
		b.Run(tc.name, func(b *testing.B) {
			br, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", DataDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			for _, id := range tc.down {
				if err := br.SetDown(id, true); err != nil {
					b.Fatal(err)
				}
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			seed := cl.SeedBrokers()[0]
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := seed.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProduceAcrossPartitions produces one record to each of 2,000
// partitions per iteration through a bundled broker: with kfake's own
// files (baseline), through budgetFS with room for every file, and through
// budgetFS with 256 descriptors (every batch closes and reopens files).
// Compare the sub-benchmarks of one run.
func BenchmarkProduceAcrossPartitions(b *testing.B) {
	const partitions = 2000
	for _, tc := range []struct {
		name   string
		budget int
	}{{"kfake-files", -1}, {"budget-all-open", 8192}, {"budget-256", 256}} {
		b.Run(tc.name, func(b *testing.B) {
			br, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", Brokers: 1, DataDir: b.TempDir(), Seed: SeedNone, fileBudget: tc.budget})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, "wide"); err != nil {
				b.Fatal(err)
			}
			recs := make([]*kgo.Record, partitions)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for p := range recs {
					recs[p] = &kgo.Record{Topic: "wide", Partition: int32(p), Value: []byte("v")}
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
