package bundled

import (
	"context"
	"testing"

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
