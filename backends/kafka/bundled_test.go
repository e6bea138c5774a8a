package kafka_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/backends/kafka"
)

// The backend against the bundled broker's simulated broker loss: what
// `berth broker --down-broker` and the demo's toggle show through it.
func TestClusterAgainstBundledBrokerDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bundled.Start(ctx, bundled.Options{Listen: "127.0.0.1:0", Brokers: 3, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	look := func() (backends.ClusterInfo, backends.Topic) {
		t.Helper()
		c, err := kafka.Dial(ctx, kafka.Options{Bootstrap: b.Addrs(), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cl := kafka.NewCluster(c)
		defer cl.Close()
		info, err := cl.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := cl.Topics(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		return info, ts[0]
	}

	info, orders := look()
	if len(info.Brokers) != 3 || orders.MinISR() != 2 || len(orders.Partitions) != 24 {
		t.Fatalf("seeded cluster: %d brokers, orders min ISR %d, %d partitions", len(info.Brokers), orders.MinISR(), len(orders.Partitions))
	}

	if err := b.SetDown(1, true); err != nil {
		t.Fatal(err)
	}
	info, orders = look()
	if len(info.Brokers) != 2 || info.Controller == 1 {
		t.Errorf("with broker 1 down: brokers %+v controller %d", info.Brokers, info.Controller)
	}
	for _, p := range orders.Partitions {
		if !p.UnderReplicated() || p.UnderMinISR(orders.MinISR()) || slices.Contains(p.ISR, 1) ||
			!slices.Equal(p.Offline, []int32{1}) || p.Leader == 1 || p.LeaderOffline() || p.Err != "" {
			t.Errorf("orders[%d] with broker 1 down = %+v; want ISR of 2 without 1, offline [1], a live leader, offsets read", p.Partition, p)
		}
	}

	if err := b.SetDown(2, true); err != nil {
		t.Fatal(err)
	}
	_, orders = look()
	for _, p := range orders.Partitions {
		if !p.UnderMinISR(orders.MinISR()) || !slices.Equal(p.ISR, []int32{0}) || p.Leader != 0 {
			t.Errorf("orders[%d] with brokers 1 and 2 down = %+v; want ISR [0] under min ISR, led by 0", p.Partition, p)
		}
	}
}

// Just after a broker is lost, the timestamp reader's cached leaders can
// still name it while the client no longer knows it ("unknown broker"):
// the reader routes again on fresh metadata instead of reporting an error
// (the console showed "fetch from broker 1: unknown broker" for a broker the
// demo took down).
func TestTimestampsRouteAroundALostBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bundled.Start(ctx, bundled.Options{Listen: "127.0.0.1:0", Brokers: 3, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := kafka.Dial(ctx, kafka.Options{Bootstrap: b.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	defer cl.Close()
	r := kafka.NewTimestampReader(c)
	var qs []backends.OffsetQuery
	for p := int32(0); p < 24; p++ {
		qs = append(qs, backends.OffsetQuery{TopicPartition: backends.TopicPartition{Topic: "orders", Partition: p}})
	}
	if _, err := r.FirstTimestamps(ctx, qs); err != nil {
		t.Fatalf("before the loss: %v", err)
	}
	if err := b.SetDown(1, true); err != nil {
		t.Fatal(err)
	}
	// The client learns the new broker list, as the console's refresh does.
	if _, err := cl.Topics(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		qs[0].Offset++ // past the cache: every read fetches
		if _, err := r.FirstTimestamps(ctx, qs); err != nil {
			t.Fatalf("read %d after broker 1 went down: %v", i, err)
		}
	}
}
