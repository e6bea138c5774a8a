package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A DLQ end to end through the command line: classes, a plan, a dry run, a
// read-only refusal, the redrive, and the ledger's status.
func TestQueuesDLQRedriveCommands(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 4)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	r := []string{"--amqp", testAMQPURL(), "--management", testManagementURL()}
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, r...)...) }

	out, errOut, code := run("queues", "dlq", "classes", dlq, "-o", "json")
	if code != 0 {
		t.Fatalf("classes: %d %s", code, errOut)
	}
	var cls struct {
		Read    int `json:"read"`
		Classes []struct {
			Count         int    `json:"count"`
			OriginalQueue string `json:"original_queue"`
			Reason        string `json:"reason"`
		} `json:"classes"`
	}
	must(json.Unmarshal([]byte(out), &cls))
	if cls.Read != 4 || len(cls.Classes) != 1 || cls.Classes[0].Count != 4 || cls.Classes[0].OriginalQueue != work || cls.Classes[0].Reason != "rejected" {
		t.Fatalf("classes %s", out)
	}

	plan := filepath.Join(t.TempDir(), "plan.json")
	if _, errOut, code := run("queues", "redrive", "plan", dlq, "--out", plan); code != 2 || !strings.Contains(errOut, "selection") {
		t.Errorf("a plan without a selection: exit %d %s", code, errOut)
	}
	if _, errOut, code := run("queues", "redrive", "plan", dlq, "--event-id", "job-1,job-2", "--out", plan); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	out, _, code = run("queues", "redrive", "execute", plan, "-o", "json")
	if code != 0 || !strings.Contains(out, `"dry_run": true`) {
		t.Fatalf("execute without --yes must be a dry run: %d %s", code, out)
	}
	if _, errOut, code := run("queues", "redrive", "execute", plan, "--yes", "--read-only"); code == 0 || !strings.Contains(errOut, "read-only") {
		t.Fatalf("read-only: %d %s", code, errOut)
	}
	out, errOut, code = run("queues", "redrive", "execute", plan, "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("execute: %d %s", code, errOut)
	}
	var res struct {
		Sent   int   `json:"sent"`
		Failed []any `json:"failed"`
	}
	must(json.Unmarshal([]byte(out), &res))
	if res.Sent != 2 || len(res.Failed) != 0 {
		t.Fatalf("execute result %s", out)
	}
	var got []string
	for {
		d, ok, err := ch.Get(work, true)
		must(err)
		if !ok {
			break
		}
		got = append(got, d.MessageId)
	}
	if fmt.Sprint(got) != "[job-1 job-2]" {
		t.Errorf("work queue got %v", got)
	}
	out, _, _ = run("queues", "redrive", "status", plan, "-o", "json")
	if !strings.Contains(out, `"confirmed": 2`) {
		t.Errorf("status %s", out)
	}
	// Editing the plan voids it.
	b, _ := qdlqReadFile(plan)
	must(qdlqWriteFile(plan, strings.Replace(b, `"job-1"`, `"job-9"`, 1)))
	if _, errOut, code := run("queues", "redrive", "execute", plan, "--yes"); code == 0 || !strings.Contains(errOut, "hash") {
		t.Errorf("edited plan: %d %s", code, errOut)
	}
}

func qdlqReadFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func qdlqWriteFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }

// rmqDLQ makes a work queue dead-lettering into a DLQ holding n rejected
// messages job-0..job-n-1; everything is deleted after the test.
func rmqDLQ(t *testing.T, n int) (*amqp.Connection, *amqp.Channel, string, string) {
	t.Helper()
	rabbitQueue(t) // skips (or fails under BERTH_TEST_REQUIRE_SERVICES) without RabbitMQ
	conn, err := amqp.Dial(testAMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, _ := conn.Channel()
	sfx := fmt.Sprint(time.Now().UnixNano())
	work, dlq, dlx := "berth.test.cmd.work."+sfx, "berth.test.cmd.dlq."+sfx, "berth.test.cmd.dlx."+sfx
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare(dlx, "direct", false, true, false, false, nil))
	_, err = ch.QueueDeclare(work, false, true, false, false, amqp.Table{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dead"})
	must(err)
	_, err = ch.QueueDeclare(dlq, false, true, false, false, nil)
	must(err)
	must(ch.QueueBind(dlq, "dead", dlx, false, nil))
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			c.QueueDelete(work, false, false, false)
			c.QueueDelete(dlq, false, false, false)
			c.ExchangeDelete(dlx, false, false)
		}
	})
	for i := 0; i < n; i++ {
		must(ch.Publish("", work, false, false, amqp.Publishing{MessageId: fmt.Sprintf("job-%d", i), Body: []byte(`{}`)}))
	}
	for i := 0; i < n; {
		d, ok, err := ch.Get(work, false)
		must(err)
		if ok {
			must(d.Reject(false))
			i++
		}
	}
	return conn, ch, work, dlq
}

func rmqSSHKey(t *testing.T, dir, name string) (keyFile, pub string) {
	t.Helper()
	keyFile = filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	b, err := os.ReadFile(keyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return keyFile, strings.TrimSpace(string(b))
}

// A policy that requires review: the author cannot approve their own plan,
// a key outside allowed_signers does not count, another signer does.
func TestQueuesRedriveApprovals(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	alice, alicePub := rmqSSHKey(t, dir, "alice")
	bob, bobPub := rmqSSHKey(t, dir, "bob")
	mallory, _ := rmqSSHKey(t, dir, "mallory")
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, []byte("alice@hc "+alicePub+"\nbob@hc "+bobPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`current_context: rmq
contexts:
  rmq:
    kind: rabbitmq
    amqp_url: %s
    management_url: %s
redrive:
  store_dsn: %s
  policies:
    - match: "berth.test.cmd.dlq.*"
      review: required
      approvals: 1
      allowed_signers: %s
`, testAMQPURL(), testManagementURL(), filepath.Join(dir, "ledger.db"), signers))
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, "--config", cfg)...) }
	plan := filepath.Join(dir, "plan.json")
	if _, errOut, code := run("queues", "redrive", "plan", dlq, "--all", "--key", alice, "--out", plan); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	refused := func(why string) {
		t.Helper()
		_, errOut, code := run("queues", "redrive", "execute", plan, "--yes")
		if code == 0 || !strings.Contains(errOut, "not approved") || !strings.Contains(errOut, why) {
			t.Fatalf("execute: exit %d %q; want refused: %s", code, errOut, why)
		}
	}
	refused("approvals")
	for _, k := range []string{alice, mallory} {
		if _, errOut, code := run("queues", "redrive", "approve", plan, "--key", k); code != 0 {
			t.Fatalf("approve: %d %s", code, errOut)
		}
	}
	refused("author cannot approve")
	refused("not in allowed_signers")
	if _, errOut, code := run("queues", "redrive", "approve", plan, "--key", bob); code != 0 {
		t.Fatalf("approve: %d %s", code, errOut)
	}
	if out, errOut, code := run("queues", "redrive", "execute", plan, "--yes"); code != 0 || !strings.Contains(out, "sent 2") {
		t.Fatalf("approved execute: %d %s %s", code, out, errOut)
	}
	if n, _ := ch.QueueDeclarePassive(work, false, true, false, false, amqp.Table{"x-dead-letter-exchange": "x"}); n.Messages != 2 {
		t.Errorf("work queue holds %d, want 2", n.Messages)
	}
}
