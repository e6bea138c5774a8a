package main

import (
	"encoding/json"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// `berth lag -o json` on a RabbitMQ context shows statistics RabbitMQ has
// not produced as null, never 0: here in reduced mode (no management API)
// a passive declare gives ready and consumers, but no unacked count.
func TestLagQueueRowsShowUnknownStatsAsNull(t *testing.T) {
	isolateConfig(t)
	name := rabbitQueue(t, amqp.Publishing{Body: []byte("a")}, amqp.Publishing{Body: []byte("b")})
	cfg := rabbitConfig{Management: "http://127.0.0.1:1", Context: fmt.Sprintf("    queues: [%s]\n", name)}.write(t)
	out, errOut, code := runBerth(t, "lag", "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Queues []map[string]any `json:"queues"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(doc.Queues) != 1 {
		t.Fatalf("want one queue row, got %s", out)
	}
	r := doc.Queues[0]
	unacked, present := r["unacked"]
	if !present || unacked != nil {
		t.Errorf("unacked = %v (present %v); want null: RabbitMQ gave no unacked count", unacked, present)
	}
	if r["ready"] != 2.0 || r["consumers"] != 0.0 {
		t.Errorf("ready %v consumers %v; want the passive declare's 2 and 0", r["ready"], r["consumers"])
	}
}
