package main

import (
	"encoding/json"
	"fmt"
	"os"
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

	out, errOut, code := run("dlq", "classes", dlq, "-o", "json")
	if code != 0 {
		t.Fatalf("classes: %d %s", code, errOut)
	}
	var cls []struct {
		Count         int    `json:"count"`
		OriginalQueue string `json:"original_queue"`
		Reason        string `json:"reason"`
	}
	must(json.Unmarshal([]byte(out), &cls))
	if len(cls) != 1 || cls[0].Count != 4 || cls[0].OriginalQueue != work || cls[0].Reason != "rejected" {
		t.Fatalf("classes %s", out)
	}
	// Kafka-only selectors are refused by name on a RabbitMQ context.
	if _, errOut, code := run("redrive", "plan", dlq, "--offsets", "0:1", "--out", filepath.Join(t.TempDir(), "p.json")); code != 2 || !strings.Contains(errOut, "--offsets") {
		t.Errorf("--offsets on RabbitMQ: exit %d %s", code, errOut)
	}

	plan := filepath.Join(t.TempDir(), "plan.json")
	if _, errOut, code := run("redrive", "plan", dlq, "--out", plan); code != 2 || !strings.Contains(errOut, "selection") {
		t.Errorf("a plan without a selection: exit %d %s", code, errOut)
	}
	if _, errOut, code := run("redrive", "plan", dlq, "--event-id", "job-1,job-2", "--out", plan); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	out, _, code = run("redrive", "execute", plan, "-o", "json")
	if code != 0 || !strings.Contains(out, `"dry_run": true`) {
		t.Fatalf("execute without --yes must be a dry run: %d %s", code, out)
	}
	if _, errOut, code := run("redrive", "execute", plan, "--yes", "--read-only"); code == 0 || !strings.Contains(errOut, "read-only") {
		t.Fatalf("read-only: %d %s", code, errOut)
	}
	out, errOut, code = run("redrive", "execute", plan, "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("execute: %d %s", code, errOut)
	}
	var res struct {
		Sent         int   `json:"sent"`
		Failed       []any `json:"failed"`
		Verification struct {
			OK       bool `json:"ok"`
			RabbitMQ struct {
				Before   int64 `json:"dlq_depth_before"`
				After    int64 `json:"dlq_depth_after"`
				Acked    int   `json:"acked"`
				Returned int   `json:"returned"`
			} `json:"rabbitmq"`
		} `json:"verification"`
	}
	must(json.Unmarshal([]byte(out), &res))
	if res.Sent != 2 || len(res.Failed) != 0 {
		t.Fatalf("execute result %s", out)
	}
	if v := res.Verification.RabbitMQ; !res.Verification.OK || v.Before != 4 || v.After != 2 || v.Acked != 2 || v.Returned != 0 {
		t.Errorf("verification: %+v", v)
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
	out, _, _ = run("redrive", "status", plan, "-o", "json")
	var st struct {
		Redriven int    `json:"redriven"`
		State    string `json:"state"`
	}
	must(json.Unmarshal([]byte(out), &st))
	if st.Redriven != 2 || st.State != "done" {
		t.Errorf("status %s", out)
	}
	// Editing the plan voids it.
	b, _ := qdlqReadFile(plan)
	must(qdlqWriteFile(plan, strings.Replace(b, `"job-1"`, `"job-9"`, 1)))
	if _, errOut, code := run("redrive", "execute", plan, "--yes"); code == 0 || !strings.Contains(errOut, "hash") {
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
	conn, ch, work, dlq, _ := rmqDeadLettered(t, "cmd", true, func(string) []amqp.Publishing {
		msgs := make([]amqp.Publishing, n)
		for i := range msgs {
			msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("job-%d", i), Body: []byte(`{}`)}
		}
		return msgs
	})
	return conn, ch, work, dlq
}

// rmqDeadLettered declares a work queue (auto-delete when autoDeleteWork)
// that dead-letters into a DLQ, berth.test.KIND.{work,dlq,dlx}.UNIQUE,
// publishes msgs(UNIQUE) to the work queue and rejects every one into the
// DLQ; all is deleted after the test. It skips (fails under
// BERTH_TEST_REQUIRE_SERVICES) without RabbitMQ.
func rmqDeadLettered(t *testing.T, kind string, autoDeleteWork bool, msgs func(sfx string) []amqp.Publishing) (conn *amqp.Connection, ch *amqp.Channel, work, dlq, sfx string) {
	t.Helper()
	rabbitQueue(t)
	conn, err := amqp.Dial(testAMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, _ = conn.Channel()
	sfx = fmt.Sprint(time.Now().UnixNano())
	prefix := "berth.test." + kind + "."
	work, dlq, dlx := prefix+"work."+sfx, prefix+"dlq."+sfx, prefix+"dlx."+sfx
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare(dlx, "direct", false, true, false, false, nil))
	_, err = ch.QueueDeclare(work, false, autoDeleteWork, false, false, amqp.Table{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dead"})
	must(err)
	// Not auto-delete: execution refuses an auto-delete DLQ (its consumer
	// leaving would delete it with the messages not redriven).
	_, err = ch.QueueDeclare(dlq, false, false, false, false, nil)
	must(err)
	must(ch.QueueBind(dlq, "dead", dlx, false, nil))
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			c.QueueDelete(work, false, false, false)
			c.QueueDelete(dlq, false, false, false)
			c.ExchangeDelete(dlx, false, false)
		}
	})
	ms := msgs(sfx)
	for _, m := range ms {
		must(ch.Publish("", work, false, false, m))
	}
	for i := 0; i < len(ms); {
		d, ok, err := ch.Get(work, false)
		must(err)
		if ok {
			must(d.Reject(false))
			i++
		}
	}
	return conn, ch, work, dlq, sfx
}

// A policy that requires review: the author cannot approve their own plan,
// a key outside allowed_signers does not count, another signer does.
func TestQueuesRedriveApprovals(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	mallory, _ := sshKey(t, dir, "mallory")
	cfg := rabbitConfig{Store: filepath.Join(dir, "ledger.db"), Policies: reviewedPolicy("berth.test.cmd.dlq.*", signers)}.write(t)
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, "--config", cfg)...) }
	plan := filepath.Join(dir, "plan.json")
	if _, errOut, code := run("redrive", "plan", dlq, "--all", "--key", alice, "--out", plan); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	refused := func(why string) {
		t.Helper()
		_, errOut, code := run("redrive", "execute", plan, "--yes")
		if code == 0 || !strings.Contains(errOut, "not approved") || !strings.Contains(errOut, why) {
			t.Fatalf("execute: exit %d %q; want refused: %s", code, errOut, why)
		}
	}
	refused("approvals")
	// The author's key and a key outside allowed_signers are refused at
	// approval, storing nothing (as for Kafka plans).
	for k, why := range map[string]string{alice: "author cannot approve", mallory: "allowed_signers"} {
		if _, errOut, code := run("redrive", "approve", plan, "--key", k); code == 0 || !strings.Contains(errOut, why) {
			t.Fatalf("approve with %s: exit %d %q; want refused: %s", filepath.Base(k), code, errOut, why)
		}
	}
	refused("approvals")
	// Approvers at another terminal name the plan by its hash prefix.
	out, _, _ := run("redrive", "show", plan, "-o", "json")
	var shown struct {
		Hash      string `json:"hash"`
		AuthorKey string `json:"author_key"`
		Stored    bool   `json:"stored"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil || !shown.Stored || shown.AuthorKey == "" {
		t.Fatalf("show: %v %s", err, out)
	}
	if _, errOut, code := run("redrive", "approve", shown.Hash[:12], "--key", bob); code != 0 {
		t.Fatalf("approve: %d %s", code, errOut)
	}
	if out, errOut, code := run("redrive", "execute", shown.Hash[:12], "--yes"); code != 0 || !strings.Contains(out, "sent 2") {
		t.Fatalf("approved execute: %d %s %s", code, out, errOut)
	}
	if n, _ := ch.QueueDeclarePassive(work, false, true, false, false, amqp.Table{"x-dead-letter-exchange": "x"}); n.Messages != 2 {
		t.Errorf("work queue holds %d, want 2", n.Messages)
	}
}

// dlq classes and dlq show read the DLQ as a stream (show keeps only the
// --limit messages it prints): the counts, the first messages of a class
// in queue order, and the refusal of a class that matched none (naming how
// many were read) are what a full read gave.
func TestRabbitDLQClassesAndShowReadAsAStream(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 0)
	for i, reason := range []string{"rejected", "expired", "rejected", "expired", "rejected"} {
		death := amqp.Table{"count": int64(1), "reason": reason, "queue": work, "exchange": "", "routing-keys": []any{work}, "time": time.Now().Truncate(time.Second)}
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: fmt.Sprintf("ev-%d", i), Body: []byte("{}"), Headers: amqp.Table{"x-death": []any{death}}}); err != nil {
			t.Fatal(err)
		}
	}
	r := []string{"--amqp", testAMQPURL(), "--management", testManagementURL()}
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, r...)...) }
	out, errOut, code := run("dlq", "classes", dlq, "-o", "json")
	var cls []struct {
		Class  string `json:"class"`
		Count  int    `json:"count"`
		Reason string `json:"reason"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &cls) != nil || len(cls) != 2 || cls[0].Count != 3 || cls[0].Reason != "rejected" || cls[1].Count != 2 || cls[1].Reason != "expired" {
		t.Fatalf("classes: exit %d %s %s; want rejected 3, expired 2", code, out, errOut)
	}
	out, errOut, code = run("dlq", "show", dlq, "--class", cls[1].Class, "--limit", "1", "-o", "json")
	var shown []struct {
		EventID  string `json:"event_id"`
		Position int    `json:"position"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown) != 1 || shown[0].EventID != "ev-1" || shown[0].Position != 1 {
		t.Fatalf("show --class expired --limit 1: exit %d %s %s; want ev-1 at position 1 only", code, out, errOut)
	}
	if _, errOut, code := run("dlq", "show", dlq, "--class", "nosuchclass"); code != 2 || !strings.Contains(errOut, "no such class among the 5 messages read") {
		t.Fatalf("show --class nosuchclass: exit %d %s", code, errOut)
	}
}
