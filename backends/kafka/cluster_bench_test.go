package kafka

import (
	"fmt"
	"testing"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// BenchmarkTopics reads every topic (metadata, three offset listings,
// configs) at two sizes. Batching keeps the cost per partition flat or
// falling as the cluster grows: compare the partition/op figures of the two
// sizes in one run rather than absolute times on a shared machine.
func BenchmarkTopics(b *testing.B) {
	for _, size := range []struct{ topics, partitions int32 }{{4, 30}, {40, 60}} {
		total := size.topics * size.partitions
		b.Run(fmt.Sprintf("partitions=%d", total), func(b *testing.B) {
			kc := kafkatest.Start(b, 3)
			for i := int32(0); i < size.topics; i++ {
				kc.CreateTopic(b, fmt.Sprintf("t%03d", i), size.partitions, 3, nil)
			}
			c, err := Dial(b.Context(), Options{Bootstrap: kc.Addrs})
			if err != nil {
				b.Fatal(err)
			}
			cl := NewCluster(c)
			defer cl.Close()
			b.ResetTimer()
			for b.Loop() {
				if _, err := cl.Topics(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/partition")
		})
	}
}
