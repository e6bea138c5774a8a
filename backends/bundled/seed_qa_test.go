package bundled

import (
	"context"
	"testing"
	"time"
)

// With one broker every topic has one copy: orders keeps its seed policy
// as far as one copy allows (min.insync.replicas 1), instead of reading as
// under min ISR — and refusing acks=all writes on a real broker — while
// the cluster is healthy.
func TestSeedOnOneBrokerCapsMinISR(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Start(ctx, Options{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	_, adm := adminFor(t, b)
	rcs, err := adm.DescribeTopicConfigs(tctx(t), "orders")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && c.MaybeValue() != "1" {
			t.Fatalf("orders min.insync.replicas = %q on a one-broker cluster, want 1", c.MaybeValue())
		}
	}
}
