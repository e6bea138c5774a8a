package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/internal/kafkatest"
)

// A payments plan made under the demo's policies (review: required, on the
// bundled broker with the demo's system of record) is executed under that
// same policy: without an approval it is refused and nothing is sent. And a
// plan whose DLQ no configured policy matches any more falls back to the
// review its plan recorded, never to "no review".
func TestRedriveExecuteKeepsTheReviewThePlanWasMadeUnder(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "payments", 1, 1, nil)
	kc.CreateTopic(t, "payments.DLT", 1, 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 2; i++ {
		v := []byte(fmt.Sprintf(`{"eventId":"evt-%d","idempotencyKey":"capture:%d"}`, i, i))
		o := &kgo.Record{Topic: "payments", Key: []byte(fmt.Sprintf("order:%d", i)), Value: v}
		if err := cl.ProduceSync(context.Background(), o).FirstErr(); err != nil {
			t.Fatal(err)
		}
		p, off := make([]byte, 4), make([]byte, 8)
		binary.BigEndian.PutUint32(p, uint32(o.Partition))
		binary.BigEndian.PutUint64(off, uint64(o.Offset))
		d := &kgo.Record{Topic: "payments.DLT", Key: o.Key, Value: v, Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("payments")},
			{Key: "kafka_dlt-original-partition", Value: p},
			{Key: "kafka_dlt-original-offset", Value: off},
			{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")},
			{Key: "kafka_dlt-exception-message", Value: []byte("PSP request timed out")},
		}}
		if err := cl.ProduceSync(context.Background(), d).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The demo's data dir: its (empty) system of record and allowed_signers.
	dir := t.TempDir()
	db, err := sql.Open("sqlite", demo.PaymentsDB(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`create table payments(idempotency_key TEXT PRIMARY KEY, order_id TEXT, amount_cents INTEGER, status TEXT, captured_at TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	alice, _ := sshKey(t, dir, "alice")
	_, bobPub := sshKey(t, dir, "bob")
	if err := os.WriteFile(demo.AllowedSigners(dir), []byte("bob@hc "+bobPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auditFile := filepath.Join(dir, "audit.log")
	bundledCfg := writeConfig(t, fmt.Sprintf("current_context: demo\ncontexts:\n  demo:\n    kind: bundled\n    bootstrap: [%s]\n    data_dir: %s\naudit:\n  file: %s\n", kc.Addrs[0], dir, auditFile))
	kafkaCfg := writeConfig(t, fmt.Sprintf("current_context: k\ncontexts:\n  k:\n    kind: kafka\n    bootstrap: [%s]\naudit:\n  file: %s\n", kc.Addrs[0], auditFile))

	out, errOut, code := runBerth(t, "--config", bundledCfg, "dlq", "classes", "payments.DLT", "-o", "json")
	var classes []struct {
		Class string `json:"class"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &classes) != nil || len(classes) != 1 {
		t.Fatalf("dlq classes: exit %d %s %s", code, errOut, out)
	}
	out, errOut, code = runBerth(t, "--config", bundledCfg, "redrive", "plan", "payments.DLT", "--class", classes[0].Class,
		"--out", filepath.Join(dir, "plan.json"), "--key", alice, "-o", "json")
	var plan struct {
		Hash   string `json:"hash"`
		Totals struct {
			Included int `json:"included"`
		} `json:"totals"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil || plan.Totals.Included != 2 {
		t.Fatalf("redrive plan: exit %d %s %s", code, errOut, out)
	}

	out, errOut, code = runBerth(t, "--config", bundledCfg, "redrive", "status", "-o", "json")
	if code != 0 || !strings.Contains(out, `"required": 1`) {
		t.Fatalf("status should show the demo policy's 1 required approval: exit %d %s %s", code, errOut, out)
	}
	for _, cfg := range []string{kafkaCfg, bundledCfg} {
		out, errOut, code = runBerth(t, "--config", cfg, "redrive", "execute", plan.Hash[:12], "--yes", "--no-verify", "-o", "json")
		if code != 1 || !strings.Contains(errOut, "refused") || !strings.Contains(errOut, "review") && !strings.Contains(errOut, "approv") {
			t.Fatalf("unapproved payments plan executed: exit %d stderr %q out %s", code, errOut, out)
		}
	}
	// Nothing reached the target: payments still holds only the 2 originals.
	out, errOut, code = runBerth(t, "--bootstrap", kc.Addrs[0], "-o", "json", "describe", "topic", "payments")
	if code != 0 || !strings.Contains(out, `"high_watermark": 2`) {
		t.Fatalf("records were sent: %s %s", errOut, out)
	}
}

// A bad --key or --out stops `redrive plan` before any work, with one
// usage error naming the flag once, on either backend.
func TestRedrivePlanBadKeyOrOutIsAUsageError(t *testing.T) {
	isolateConfig(t)
	dir := t.TempDir()
	for _, backend := range [][]string{{"--bootstrap", "127.0.0.1:1"}, {"--amqp", "amqp://guest:guest@127.0.0.1:1/"}} {
		missing := filepath.Join(dir, "missing-key")
		args := append(append([]string{}, backend...), "redrive", "plan", "some.dlq", "--class", "c", "--key", missing, "--out", filepath.Join(dir, "p.json"))
		_, stderr, code := runBerth(t, args...)
		if code != 2 || strings.Count(stderr, "--key:") != 1 || !strings.Contains(stderr, "cannot read "+missing) {
			t.Errorf("%s: exit %d, %q", backend[0], code, stderr)
		}
		args = append(append([]string{}, backend...), "redrive", "plan", "some.dlq", "--class", "c", "--out", filepath.Join(dir, "no", "p.json"))
		if _, stderr, code = runBerth(t, args...); code != 2 || !strings.Contains(stderr, "--out: directory") {
			t.Errorf("%s: exit %d, %q", backend[0], code, stderr)
		}
	}
}
