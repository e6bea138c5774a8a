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

// A RabbitMQ dead-letter queue holds failures nobody consumes, which is its
// job: berth lag reads it HOLDING (never STALLED, never over its SLO, even
// an SLO of 1s) and berth health does not list it, while a work queue in
// the same state reads STALLED and is listed.
func TestRabbitDLQIsNeverStalled(t *testing.T) {
	isolateConfig(t)
	// Cleanups run last-registered first: rabbittest.Need's close of
	// the connection runs after the deletes registered below.
	conn := rabbittest.Need(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	id := time.Now().UnixNano()
	work, dlq, dlx := fmt.Sprintf("berth.test.lagdlq.work.%d", id), fmt.Sprintf("berth.test.lagdlq.work.%d.dlq", id), fmt.Sprintf("berth.test.lagdlq.dlx.%d", id)
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(work, false, false, false)
			_, _ = ch.QueueDelete(dlq, false, false, false)
			_ = ch.ExchangeDelete(dlx, false, false)
		}
	})
	if err := ch.ExchangeDeclare(dlx, "fanout", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(dlq, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(dlq, "", dlx, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(work, false, false, false, false, amqp.Table{"x-dead-letter-exchange": dlx}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, q := range []string{work, dlq} {
		for range 3 {
			if err := ch.Publish("", q, false, false, amqp.Publishing{Timestamp: old, Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := rabbitConfig{Rest: "groups:\n  - match: berth.test.lagdlq.*\n    slo: 1s\n"}.write(t)
	rows := func(args ...string) map[string]map[string]any {
		out, errOut, code := runBerth(t, append([]string{"--config", cfg, "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var doc struct {
			Queues []map[string]any `json:"queues"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		m := map[string]map[string]any{}
		for _, q := range doc.Queues {
			if n, _ := q["queue"].(string); strings.HasPrefix(n, "berth.test.lagdlq.") && strings.Contains(n, fmt.Sprint(id)) {
				m[n] = q
			}
		}
		return m
	}
	// The management API publishes counts a few seconds after the fact.
	deadline := time.Now().Add(2 * time.Minute)
	var lagRows map[string]map[string]any
	for {
		lagRows = rows("lag")
		// The head message's timestamp shows up with the statistics, not
		// always in the same round as the counts (under load, many rounds
		// later): wait for both queues' ages, which the checks below judge.
		w, d := lagRows[work], lagRows[dlq]
		if d != nil && d["ready"] == 3.0 && d["age_seconds"] == nil && d["age_source"] != "unknown" {
			t.Errorf("DLQ holding 3 with no age yet reads age_source %q (%v): an unknown age must say so", d["age_source"], d["status"])
		}
		if w != nil && w["ready"] == 3.0 && w["age_source"] == "publisher_timestamp" && d != nil && d["ready"] == 3.0 && d["age_source"] == "publisher_timestamp" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queues never showed 3 ready each with their head timestamps: %v", lagRows)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if w := lagRows[work]; w["status"] != "STALLED" || w["breach"] != true {
		t.Errorf("work queue: %v %v, want STALLED in breach", w["status"], w["breach"])
	}
	// The DLQ's messages are an hour old, far over the 1s SLO, and still
	// no breach: holding failures is what a DLQ is for.
	if d := lagRows[dlq]; d["status"] != "HOLDING" || d["breach"] != false {
		t.Errorf("DLQ: %v breach %v, want HOLDING and no breach", d["status"], d["breach"])
	} else if age, _ := d["age_seconds"].(float64); age < 3600 {
		t.Errorf("DLQ age %v s, want at least the hour its head message has waited", d["age_seconds"])
	}
	health := rows("health")
	if health[work] == nil || health[dlq] != nil {
		t.Errorf("berth health lists %v; want the work queue and not the DLQ", health)
	}
}
