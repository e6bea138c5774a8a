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
	rabbitQueue(t) // skips without RabbitMQ
	conn, err := amqp.Dial(testAMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	defer ch.Close()
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
	for i := 0; i < 4; i++ {
		must(ch.Publish("", work, false, false, amqp.Publishing{MessageId: fmt.Sprintf("job-%d", i), Body: []byte(`{}`)}))
	}
	for i := 0; i < 4; {
		d, ok, err := ch.Get(work, false)
		must(err)
		if ok {
			must(d.Reject(false))
			i++
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
