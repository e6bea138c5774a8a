package monitor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/internal/lag"
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

// The bundled broker's degraded mode (a simulated broker loss) reads as the
// ISR classes a real loss would: one of three brokers down leaves orders
// (min ISR 2) at min ISR with leaders moved (elections); two down blocks
// acks=all writes.
func TestBundledDegradedModeISR(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := bundled.Start(ctx, bundled.Options{Listen: "127.0.0.1:0", DataDir: dir, Seed: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := kafka.Dial(ctx, kafka.Options{Bootstrap: b.Addrs(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	defer cl.Close()
	minISR := "2"
	if resp, err := c.Admin().CreateTopic(ctx, 6, 3, map[string]*string{"min.insync.replicas": &minISR}, "orders"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	m := New(cl, kafka.NewTimestampReader(c), Config{})
	count := func(s Snapshot, class lag.ISRClass) (n, elections int) {
		for _, tp := range s.Topics {
			for _, h := range tp.Health {
				if h.Class == class {
					n++
				}
				elections += h.Elections
			}
		}
		return n, elections
	}
	until := func(what string, cond func(Snapshot) bool) Snapshot {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			// A refresh racing a broker going down can fail once (the
			// client's metadata still names the lost leader); the console
			// shows that and retries, and so does this loop.
			s, err := m.Refresh(ctx)
			if err == nil && cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached; last error %v, health %+v", what, err, s.Health)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	s := until("healthy", func(s Snapshot) bool { n, _ := count(s, lag.Healthy); return n == 6 })
	var led1 int
	for _, p := range s.Topics[0].Partitions {
		if p.Leader == 1 {
			led1++
		}
	}
	if err := b.SetDown(1, true); err != nil {
		t.Fatal(err)
	}
	elections := 0
	s = until("one down", func(s Snapshot) bool {
		n, e := count(s, lag.AtMinISR)
		elections += e
		return n == 6
	})
	if elections < led1 || s.Health.AtMinISR != 6 || s.Health.UnderMinISR != 0 {
		t.Fatalf("one broker down: %d elections (broker 1 led %d), health %+v", elections, led1, s.Health)
	}
	if err := b.SetDown(2, true); err != nil {
		t.Fatal(err)
	}
	s = until("two down", func(s Snapshot) bool { n, _ := count(s, lag.UnderMinISR); return n == 6 })
	for _, h := range s.Topics[0].Health {
		if !h.WritesBlocked || h.Leader != 0 {
			t.Fatalf("two brokers down: %+v", h)
		}
	}
}
