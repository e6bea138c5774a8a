package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/tui"
)

// On the demo's broker (a bundled context whose data dir holds the demo's
// payments system of record) the demo's payments-* effects policy guards
// resets from the CLI too, as its redrive policies guard plans: replaying
// payments-capture needs --confirm-replay-effects.
func TestOffsetsResetOnTheDemoBrokerGuardsPaymentsGroups(t *testing.T) {
	kc, _ := resetCluster(t)
	kc.Commit(t, "payments-capture", map[string]map[int32]int64{"orders": {0: 5, 1: 5}})
	dir := t.TempDir()
	if err := os.WriteFile(demo.PaymentsDB(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf("current_context: demo\ncontexts:\n  demo:\n    kind: bundled\n    bootstrap: [%s]\n    data_dir: %s\n", kc.Addrs[0], dir))
	out, errOut, code := runBerth(t, "--config", cfg, "offsets", "reset", "payments-capture", "--to-earliest", "--all-topics", "--execute")
	if code != 1 || !strings.Contains(errOut, "effect-producing") || !strings.Contains(out, "WARNING: group payments-capture is effect-producing") {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	if c := committedOf(t, kc, "payments-capture"); c[0] != 5 || c[1] != 5 {
		t.Fatalf("offsets moved: %v", c)
	}
	// Other groups are not effect-producing.
	if _, errOut, code := runBerth(t, "--config", cfg, "offsets", "reset", "g", "--to-earliest", "--all-topics", "--execute"); code != 0 {
		t.Fatalf("group g: exit %d %s", code, errOut)
	}
}

// A dry run without warnings prints "warnings": [], like "members": [] —
// a list scripts can iterate, never null.
func TestOffsetsResetJSONWarningsIsAList(t *testing.T) {
	kc, _ := resetCluster(t)
	out, errOut, code := runBerth(t, append(bootstrap(kc), "-o", "json", "offsets", "reset", "g", "--to-offset", "6", "--topic", "orders:0")...)
	if code != 0 || !strings.Contains(out, `"warnings": []`) {
		t.Fatalf("exit %d %s\n%s", code, errOut, out)
	}
}

// The console's reset dialog on the demo's broker guards payments groups as
// the CLI does.
func TestConsoleResetterOnTheDemoBrokerGuardsPaymentsGroups(t *testing.T) {
	kc, _ := resetCluster(t)
	dir := t.TempDir()
	if err := os.WriteFile(demo.PaymentsDB(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kafka.Dial(ctx, kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cluster := kafka.NewCluster(cl)
	defer cluster.Close()
	cfg := config.Default()
	cfg.Contexts = map[string]config.Context{"demo": {Kind: "bundled", Bootstrap: kc.Addrs, DataDir: dir}}
	r, err := openConsoleResetter(cluster, tui.PageEnv{Config: cfg, Context: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Effects("payments-capture") || r.Effects("g") {
		t.Fatalf("effects: payments-capture %v, g %v", r.Effects("payments-capture"), r.Effects("g"))
	}
}
