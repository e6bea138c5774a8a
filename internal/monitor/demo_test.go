package monitor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/lag"
)

// The demo's three orders groups come out as OK (keeps up), LAGGING (falls
// behind, working through partitions in turn) and STALLED on exactly the
// poisoned partition. A short window and steady age keep the test quick.
func TestDemoGroupStatuses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo workload for several seconds")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, err := bundled.Start(ctx, bundled.Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, err := demo.Start(ctx, demo.Options{Bootstrap: b.Addrs(), DataDir: dir, Rate: 400})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c, err := kafka.Dial(ctx, kafka.Options{Bootstrap: b.Addrs(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	defer cl.Close()
	m := New(cl, kafka.NewTimestampReader(c), Config{
		Lag:    lag.Config{Window: 8 * time.Second, SteadyAge: 2 * time.Second},
		Groups: []string{demo.GroupEmail, demo.GroupSales, demo.GroupFraud},
	})
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s, err := m.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		email, _ := s.Group(demo.GroupEmail)
		sales, _ := s.Group(demo.GroupSales)
		fraud, _ := s.Group(demo.GroupFraud)
		last = fmt.Sprintf("window %s: email %s %v, sales %s %v, fraud %s %v", s.Window, email.Status, email.Counts, sales.Status, sales.Counts, fraud.Status, fraud.Counts)
		if s.Window >= 6*time.Second && email.Status == lag.OK && sales.Status == lag.LAGGING &&
			fraud.Status == lag.STALLED && fraud.Counts[lag.STALLED] == 1 && fraud.Counts[lag.OK] == len(fraud.Partitions)-1 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	t.Fatalf("demo statuses not reached: %s", last)
}
