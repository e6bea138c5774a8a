package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/internal/kafkatest"
)

// The demo writes; it must refuse any cluster that is not a Berth bundled
// broker, and write nothing there.
func TestDemoRefusesForeignCluster(t *testing.T) {
	isolateConfig(t)
	foreign := kafkatest.Start(t, 1) // plain kfake: cluster id "kfake"
	_, stderr, code := runBerth(t, "demo", "--headless", "--listen", foreign.Addrs[0], "--data-dir", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "not a Berth bundled broker") || !strings.Contains(stderr, foreign.Addrs[0]) {
		t.Fatalf("exit %d, stderr %q; want a refusal naming the address", code, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tds, err := foreign.Admin.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tds) != 0 {
		t.Fatalf("demo created topics on a foreign cluster: %v", tds.Names())
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	isolateConfig(t)
	_, stderr, code := runBerth(t, "demo", "--headless", "--rate", "0")
	if code != 2 || !strings.Contains(stderr, "--rate") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = runBerth(t, "demo", "--headless", "--bootstrap", "kafka.example:9092")
	if code != 2 || !strings.Contains(stderr, "--bootstrap") {
		t.Fatalf("demo --bootstrap: exit %d, stderr %q", code, stderr)
	}
}

// The demo attaches to a bundled broker already running (recognised by its
// cluster id), runs the workload against it and stops cleanly on SIGTERM.
func TestDemoAttachesToBundledBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	b := startBundled(t, dir)
	p := startBerthProc(t, 0, "demo", "--headless", "--listen", b.Addrs()[0], "--data-dir", dir)
	p.waitOutput(t, "attached to bundled broker "+b.ClusterID(), 2*time.Minute)
	p.waitOutput(t, "orders/s", 2*time.Minute)

	// The one line another terminal needs: a config file with the demo's
	// context and policies, which a second berth uses as is.
	attach := "export BERTH_CONFIG=" + filepath.Join(dir, "berth-demo.yaml")
	if !strings.Contains(p.output(), attach) {
		t.Fatalf("the demo did not print %q:\n%s", attach, p.output())
	}
	isolateConfig(t)
	t.Setenv("BERTH_CONFIG", filepath.Join(dir, "berth-demo.yaml"))
	out, stderr, code := runBerth(t, "config", "view", "-o", "json")
	if code != 0 || !strings.Contains(out, `"active_context": "bundled"`) || !strings.Contains(out, b.Addrs()[0]) ||
		!strings.Contains(out, `"match": "payments.DLT"`) || !strings.Contains(out, filepath.Join(dir, "allowed_signers")) {
		t.Fatalf("second terminal's config view (exit %d, %s):\n%s", code, stderr, out)
	}
	if out, stderr, code := runBerth(t, "lag", "-o", "json"); code != 0 || !strings.Contains(out, "fraud-monitor") {
		t.Fatalf("second terminal's lag (exit %d, %s):\n%s", code, stderr, out)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		ends, err := adm.ListEndOffsets(ctx, "orders")
		var total int64
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		}
		if total > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the demo wrote nothing to the bundled broker it attached to:\n%s", p.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.waitOutput(t, "orders ", 2*time.Minute) // a status line
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM exit %d; output:\n%s", code, p.output())
	}
}

// An explicit --data-dir that is not the data dir of the bundled broker
// answering on --listen is refused: the demo would keep its system of
// record and approvers' keys apart from the broker it writes to.
func TestDemoRefusesDataDirOfAnotherBroker(t *testing.T) {
	b := startBundled(t, t.TempDir())
	isolateConfig(t)
	other := t.TempDir()
	_, stderr, code := runBerth(t, "demo", "--headless", "--listen", b.Addrs()[0], "--data-dir", other)
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.Contains(stderr, "--data-dir: "+other+" holds no broker data") || !strings.Contains(stderr, b.ClusterID()) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(other, "berth-demo.yaml")); err == nil {
		t.Fatal("a refused demo wrote its config")
	}
}

// With nothing on --listen the demo starts its own broker; --down-broker
// puts it in the degraded state other clients observe.
func TestDemoOwnBrokerDegraded(t *testing.T) {
	p := startBerthProc(t, 3, "demo", "--headless", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--down-broker", "1")
	p.waitOutput(t, "orders/s", 2*time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range tds["orders"].Partitions {
		if len(part.ISR) != 2 || slices.Contains(part.ISR, 1) || !slices.Equal(part.OfflineReplicas, []int32{1}) {
			t.Fatalf("orders/%d ISR %v offline %v with broker 1 down", part.Partition, part.ISR, part.OfflineReplicas)
		}
	}
	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("SIGINT exit %d; output:\n%s", code, p.output())
	}
}

// startBundled runs a bundled broker on random ports keeping its data in
// dir, closed when the test ends.
func startBundled(t *testing.T, dir string) *bundled.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := bundled.Start(ctx, bundled.Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
