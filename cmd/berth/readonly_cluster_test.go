package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/kafkatest"
)

// read_only guards the cluster, not the context's name: an offset reset
// reaching a read-only context's cluster through --bootstrap, through
// another context or through an address the context does not list (a
// port-forward) is refused, and the group keeps its offsets. A context
// names its cluster by bootstrap address, by cluster_id, or by the id
// Berth saw the last time it connected through it.
func TestReadOnlyIsAPropertyOfTheCluster(t *testing.T) {
	isolateConfig(t)
	t.Setenv("BERTH_AUDIT_FILE", filepath.Join(t.TempDir(), "audit.log"))
	const id = "prod-cluster-7f3a"
	kc := kafkatest.Start(t, 1, kfake.ClusterID(id))
	kc.CreateTopic(t, "orders", 1, 1, nil)
	kc.ProduceTo(t, "orders", 0, 10, time.Now().Add(-time.Hour), time.Second)
	kc.Commit(t, "g", map[string]map[int32]int64{"orders": {0: 5}})
	addr := kc.Addrs[0]
	reset := []string{"offsets", "reset", "g", "--to-earliest", "--all-topics", "--execute"}

	refused := func(t *testing.T, cfg string, args ...string) {
		t.Helper()
		full := append(append([]string{"--config", cfg}, args...), reset...)
		out, errOut, code := runBerth(t, full...)
		if code == 0 || !strings.Contains(errOut, "read-only") || !strings.Contains(errOut, "context prod") {
			t.Fatalf("berth %s: exit %d, want a read-only refusal naming context prod:\n%s%s", strings.Join(full, " "), code, out, errOut)
		}
		if c := committedOf(t, kc, "g"); c[0] != 5 {
			t.Fatalf("the reset went through: committed %v", c)
		}
	}
	t.Run("bootstrap address", func(t *testing.T) {
		cfg := writeConfig(t, fmt.Sprintf("contexts:\n  prod:\n    bootstrap: [%s]\n    read_only: true\n  staging:\n    bootstrap: [%s]\n", addr, addr))
		refused(t, cfg, "--bootstrap", addr)
		refused(t, cfg, "--context", "staging")
		refused(t, cfg, "--bootstrap", strings.Replace(addr, "127.0.0.1", "localhost", 1))
	})
	t.Run("cluster_id", func(t *testing.T) {
		cfg := writeConfig(t, fmt.Sprintf("contexts:\n  prod:\n    bootstrap: [kafka.prod.invalid:9093]\n    cluster_id: %s\n    read_only: true\n", id))
		refused(t, cfg, "--bootstrap", addr)
	})
	t.Run("id learned through the context", func(t *testing.T) {
		cfg := writeConfig(t, fmt.Sprintf("contexts:\n  prod:\n    bootstrap: [%s]\n    read_only: true\n", addr))
		if _, errOut, code := runBerth(t, "--config", cfg, "--context", "prod", "brokers"); code != 0 {
			t.Fatalf("brokers through prod: exit %d %s", code, errOut)
		}
		// The context now reaches the cluster by another name (a tunnel);
		// the id seen before still marks the cluster read-only.
		moved := writeConfig(t, "contexts:\n  prod:\n    bootstrap: [kafka.prod.invalid:9093]\n    read_only: true\n")
		refused(t, moved, "--bootstrap", addr)
	})

	// Control: a cluster no read-only context names is writable.
	other := writeConfig(t, "contexts:\n  prod:\n    bootstrap: [kafka.prod.invalid:9093]\n    cluster_id: someone-else\n    read_only: true\n")
	if _, errOut, code := runBerth(t, append([]string{"--config", other, "--bootstrap", addr}, reset...)...); code != 0 {
		t.Fatalf("reset on an unguarded cluster: exit %d %s", code, errOut)
	}
	if c := committedOf(t, kc, "g"); c[0] != 0 {
		t.Fatalf("the control reset did not run: %v", c)
	}
}

// Read-only writes nothing to the cluster: `redrive plan` writes the plan
// file and the local audit log only; no plan store, no __berth_audit topic
// is created or written.
func TestRedrivePlanInReadOnlyWritesNothingToTheCluster(t *testing.T) {
	f := newRedriveFixture(t, 2, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	planFile := filepath.Join(t.TempDir(), "plan.json")
	_, errOut, code := runBerth(t, "--config", f.config, "--read-only", "redrive", "plan", "ledger-events.DLT", "--offsets", "0:0,1:0", "--out", planFile)
	if code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(planFile); err != nil {
		t.Fatalf("no plan file: %v", err)
	}
	if after := topicNames(t, f.kc); !slices.Equal(after, []string{"ledger-events", "ledger-events.DLT"}) {
		t.Fatalf("read-only plan created topics: %v", after)
	}
	log, err := audit.Open(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := log.List()
	if err != nil || len(entries) != 1 || entries[0].Action != "redrive.plan" {
		t.Fatalf("local audit log: %+v %v", entries, err)
	}
}

func topicNames(t *testing.T, kc *kafkatest.Cluster) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Named explicitly: a metadata request for every topic may leave out
	// Berth's own (internal-looking) topics.
	ts, err := kc.Admin.ListTopicsWithInternal(ctx, "ledger-events", "ledger-events.DLT", kafka.AuditTopic, kafka.PlanTopic, kafka.PlanChunkTopic, kafka.LedgerTopic)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ts.Sorted() {
		if d.Err == nil {
			names = append(names, d.Topic)
		}
	}
	return names
}

// The demo is a workload: with --read-only (or a read-only bundled
// context) it refuses before starting anything.
func TestDemoRefusesReadOnly(t *testing.T) {
	isolateConfig(t)
	_, errOut, code := runBerth(t, "--read-only", "demo", "--headless", "--listen", "127.0.0.1:1")
	if code != 2 || !strings.Contains(errOut, "--read-only: the demo writes") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	cfg := writeConfig(t, "contexts:\n  bundled:\n    kind: bundled\n    read_only: true\n")
	_, errOut, code = runBerth(t, "--config", cfg, "demo", "--headless", "--listen", "127.0.0.1:1")
	if code != 2 || !strings.Contains(errOut, "--read-only: the demo writes") {
		t.Fatalf("read-only bundled context: exit %d, stderr %q", code, errOut)
	}
}
