package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/kafkatest"
)

// consoleApp is an app attached to context "local" (the given cluster), with
// a second context "down" that nothing listens on.
func consoleApp(t *testing.T, addr string) *app {
	t.Helper()
	isolateConfig(t)
	cfg := config.Default()
	cfg.Contexts = map[string]config.Context{
		"local": {Kind: "kafka", Bootstrap: []string{addr}},
		"down":  {Kind: "kafka", Bootstrap: []string{"127.0.0.1:1"}, ReadOnly: true},
	}
	cfg.CurrentContext = "local"
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := newApp(io.Discard, io.Discard)
	a.cfg, a.ctxName, a.ctx, a.timeout = cfg, "local", cfg.Contexts["local"], 5*time.Second
	return a
}

// The console's source reads the cluster through the Kafka backend and the
// monitor: topics with offsets, groups with per-partition lag.
func TestConsoleSourceRefreshesFromTheCluster(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 6, 3, map[string]string{"min.insync.replicas": "2"})
	kc.ProduceTo(t, "orders", 2, 10, time.Now().Add(-time.Minute), time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var offs kadm.Offsets
	offs.AddOffset("orders", 2, 4, -1)
	if _, err := kc.Admin.CommitOffsets(ctx, "fraud-monitor", offs); err != nil {
		t.Fatal(err)
	}

	a := consoleApp(t, kc.Addrs[0])
	src, err := a.dialConsole(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	snap, err := src.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Cluster.Brokers) != 3 {
		t.Fatalf("brokers = %d", len(snap.Cluster.Brokers))
	}
	var found bool
	for _, tp := range snap.Topics {
		if tp.Name == "orders" {
			found = true
			if len(tp.Partitions) != 6 || tp.Partitions[2].HighWatermark != 10 || tp.MinISR != 2 {
				t.Fatalf("orders: %d partitions, p2 end %d, min ISR %d", len(tp.Partitions), tp.Partitions[2].HighWatermark, tp.MinISR)
			}
		}
	}
	if !found {
		t.Fatal("topic orders missing from the snapshot")
	}
	g, ok := snap.Group("fraud-monitor")
	if !ok {
		t.Fatal("group fraud-monitor missing")
	}
	for _, p := range g.Partitions {
		if p.Partition == 2 && p.Lag != 6 {
			t.Fatalf("partition 2 lag = %d, want 6 (end 10, committed 4)", p.Lag)
		}
	}
	if g.TotalLag < 6 {
		t.Fatalf("total lag = %d", g.TotalLag)
	}
}

// :ctx to a context nobody listens on fails within the timeout, naming the
// address, instead of hanging the console's dial.
func TestConsoleDialUnreachableNamesTheAddress(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	a := consoleApp(t, kc.Addrs[0])
	a.timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	src, err := a.dialConsole(ctx, "down")
	if err == nil {
		src.Close()
		t.Fatal("dial of an unreachable context succeeded")
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("error does not name the address: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("dial took %s with a 2s timeout", d)
	}
	if _, err := a.dialConsole(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `unknown context "nope"`) {
		t.Fatalf("unknown context: %v", err)
	}
}
