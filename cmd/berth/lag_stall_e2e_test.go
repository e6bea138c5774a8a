package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
)

// On the demo's workload (real franz-go consumer groups on the bundled
// broker), fraud-monitor stops on its poison record while it keeps up on
// its other partitions. Its partition must read STALLED in the console's
// snapshot, in `berth lag` and in the first line of `berth lag --watch`
// within two refreshes of the record's age passing the steady age (15 s),
// and never STALLED before. Refreshes are a second apart with a 1 s commit
// interval, so the test takes seconds rather than the defaults' 5 s steps.
func TestDemoStallReadsStalledInEveryView(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo workload for about 20 seconds")
	}
	isolateConfig(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, err := bundled.Start(ctx, bundled.Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, err := demo.Start(ctx, demo.Options{Bootstrap: b.Addrs(), DataDir: dir, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	boot := strings.Join(b.Addrs(), ",")
	cfgPath := writeConfig(t, fmt.Sprintf(`contexts:
  local:
    kind: kafka
    bootstrap: [%s]
current_context: local
lag:
  commit_interval: 1s
groups:
  - match: fraud-monitor
    slo: 10s
`, boot))

	var stuck *demo.Stuck
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for stuck == nil {
		select {
		case <-ctx.Done():
			t.Fatal("fraud-monitor never reached the poison record")
		case <-tick.C:
			stuck = d.Status(ctx).FraudStuck
		}
	}
	steady := stuck.Since.Add(15 * time.Second)

	// The console: its source, refreshed once a second from before the age
	// passes the steady age.
	cfg := config.Default()
	cfg.Contexts = map[string]config.Context{"local": {Kind: "kafka", Bootstrap: b.Addrs()}}
	cfg.CurrentContext = "local"
	cfg.Lag.CommitInterval = time.Second
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := newApp(io.Discard, io.Discard)
	a.cfg, a.ctxName, a.ctx, a.timeout = cfg, "local", cfg.Contexts["local"], 10*time.Second
	src, err := a.dialConsole(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	poisoned := func(s *monitor.Snapshot) lag.PartitionLag {
		g, _ := s.Group(demo.GroupFraud)
		for _, r := range g.Partitions {
			if r.Topic.String() == demo.TopicOrders && r.Partition == stuck.Partition {
				return r
			}
		}
		t.Fatalf("fraud-monitor has no row for %s[%d]", demo.TopicOrders, stuck.Partition)
		return lag.PartitionLag{}
	}
	refresh := time.NewTicker(time.Second)
	defer refresh.Stop()
	after := 0
	for {
		s, err := src.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := poisoned(s)
		if !s.Observed.After(steady) {
			if r.Status == lag.STALLED || r.Status == lag.LAGGING {
				t.Fatalf("console at age %s (within the steady age): %s", r.Age, r.Status)
			}
		} else {
			after++
			if r.Status == lag.STALLED {
				break
			}
			if after == 2 {
				t.Fatalf("console: %s two refreshes after the steady age (age %s, committed %d)", r.Status, r.Age, r.Committed)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-refresh.C:
		}
	}

	status := func(doc []byte) string {
		var v struct {
			Partitions []struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Status    string `json:"status"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal(doc, &v); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		for _, p := range v.Partitions {
			if p.Topic == demo.TopicOrders && p.Partition == stuck.Partition {
				return p.Status
			}
		}
		return "missing"
	}
	// berth lag: two samples a second apart.
	out, errOut, code := runBerth(t, "--config", cfgPath, "-o", "json", "lag", demo.GroupFraud, "--sample", "1s")
	if code != 0 {
		t.Fatalf("berth lag: exit %d: %s", code, errOut)
	}
	if st := status([]byte(out)); st != "STALLED" {
		t.Fatalf("berth lag: %s", st)
	}
	// berth lag --watch: the first line. --fail-on-breach (SLO 10s) ends
	// the watch right after it.
	out, errOut, code = runBerth(t, "--config", cfgPath, "-o", "json", "lag", demo.GroupFraud, "--watch", "--interval", "1s", "--sample", "1s", "--fail-on-breach")
	if code != 3 {
		t.Fatalf("berth lag --watch --fail-on-breach: exit %d: %s", code, errOut)
	}
	first, err := bufio.NewReader(strings.NewReader(out)).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no first line: %v\n%s", err, out)
	}
	if st := status(first); st != "STALLED" {
		t.Fatalf("berth lag --watch, first line: %s", st)
	}
}
