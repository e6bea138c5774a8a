package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/rabbittest"
)

// The test broker and its management API (BERTH_TEST_AMQP_URL,
// BERTH_TEST_MANAGEMENT_URL).
func testAMQPURL() string       { return rabbittest.AMQPURL() }
func testManagementURL() string { return rabbittest.ManagementURL() }

// rabbitQueue declares a classic queue holding msgs, deleted after the test;
// skips (fails under BERTH_TEST_REQUIRE_SERVICES) without RabbitMQ.
func rabbitQueue(t testing.TB, msgs ...amqp.Publishing) string {
	t.Helper()
	// Cleanups run last-registered first: rabbittest.Need's close of
	// the connection runs after the deletes registered below.
	conn := rabbittest.Need(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("berth.test.cmd.%s.%d", strings.ToLower(t.Name()), time.Now().UnixNano())
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-dead-letter-exchange": "dlx.cmd"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
		}
	})
	_ = ch.Confirm(false)
	for _, m := range msgs {
		dc, err := ch.PublishWithDeferredConfirm("", name, false, false, m)
		if err != nil {
			t.Fatal(err)
		}
		dc.Wait()
	}
	return name
}

func TestQueuesJSONShowsPublisherTimestampAge(t *testing.T) {
	isolateConfig(t)
	ts := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	name := rabbitQueue(t, amqp.Publishing{Timestamp: ts, Body: []byte("x")})
	var row map[string]any
	deadline := time.Now().Add(2 * time.Minute)
	for row == nil || row["age_source"] != "publisher_timestamp" {
		if time.Now().After(deadline) {
			t.Fatalf("queue %s never showed a publisher-timestamp age: %v", name, row)
		}
		time.Sleep(200 * time.Millisecond)
		out, errOut, code := runBerth(t, "queues", "-o", "json", "--amqp", testAMQPURL(), "--management", testManagementURL())
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var res struct {
			Mode   string           `json:"mode"`
			Queues []map[string]any `json:"queues"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.Mode != "management" {
			t.Fatalf("mode %q", res.Mode)
		}
		row = nil
		for _, q := range res.Queues {
			if q["queue"] == name {
				row = q
			}
		}
	}
	age := row["age_seconds"].(float64)
	if age < 600 || age > 660 {
		t.Errorf("age_seconds %v; want about 600 (published with a timestamp 10 minutes ago)", age)
	}
	if row["status"] != "STALLED" || row["breach"] != true {
		t.Errorf("status %v breach %v; want STALLED (no consumers) and a breach of the default 5m SLO", row["status"], row["breach"])
	}
	if w := row["wiring"].(map[string]any); w["dead_letter_exchange"] != "dlx.cmd" {
		t.Errorf("wiring %v; want the dead-letter exchange dlx.cmd", w)
	}

	out, errOut, code := runBerth(t, "describe", "queue", name, "--amqp", testAMQPURL(), "--management", testManagementURL())
	if code != 0 || !strings.Contains(out, "publisher_timestamp") || !strings.Contains(out, "dlx.cmd (argument)") {
		t.Errorf("describe queue: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code = runBerth(t, "describe", "queue", "berth.no.such.queue", "--amqp", testAMQPURL(), "--management", testManagementURL())
	if code != 1 || !strings.Contains(errOut, `queue "berth.no.such.queue" not found`) {
		t.Errorf("missing queue: exit %d, %s", code, errOut)
	}
}

func TestQueuesReducedModeFromConfig(t *testing.T) {
	isolateConfig(t)
	name := rabbitQueue(t, amqp.Publishing{Body: []byte("a")}, amqp.Publishing{Body: []byte("b")}, amqp.Publishing{Body: []byte("c")})
	t.Setenv("BERTH_TEST_RMQ_PW", "guest")
	cfg := rabbitConfig{Management: "http://127.0.0.1:1", Context: fmt.Sprintf("    username: guest\n    password_env: BERTH_TEST_RMQ_PW\n    queues: [%s]\n", name)}.write(t)
	out, errOut, code := runBerth(t, "queues", "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Mode    string           `json:"mode"`
		Missing []string         `json:"missing"`
		Queues  []map[string]any `json:"queues"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Mode != "reduced" || len(res.Missing) == 0 || !strings.Contains(res.Missing[0], "127.0.0.1:1") {
		t.Fatalf("mode %q missing %v: want reduced mode naming the management address", res.Mode, res.Missing)
	}
	if len(res.Queues) != 1 || res.Queues[0]["ready"] != 3.0 || res.Queues[0]["unacked"] != nil || res.Queues[0]["age_seconds"] != nil {
		t.Fatalf("queues %v: want %s with ready 3, unacked and age unknown (null)", res.Queues, name)
	}
	// The table says what is missing on stderr.
	_, errOut, code = runBerth(t, "queues", "--config", cfg)
	if code != 0 || !strings.Contains(errOut, "reduced mode") {
		t.Errorf("table: exit %d stderr %q", code, errOut)
	}
}

func TestQueuesNeedsRabbitMQContext(t *testing.T) {
	isolateConfig(t)
	_, errOut, code := runBerth(t, "queues", "--bootstrap", "127.0.0.1:1")
	if code == 0 || !strings.Contains(errOut, "needs RabbitMQ") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}
