package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Which DLQs a run may consume is decided in internal/actions from what the
// backend reports about the DLQ at execute: a DLQ recreated between plan and
// execute as a quorum queue with a delivery limit (passing over messages
// would count deliveries and could drop them) is refused with one line
// naming it, and nothing is sent.
func TestRabbitExecuteRefusesADLQRecreatedAsQuorumWithADeliveryLimit(t *testing.T) {
	isolateConfig(t)
	conn, ch, work, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      review: none\n", dlq)).write(t)
	plan := filepath.Join(dir, "plan.json")
	if out, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", plan, "--config", cfg, "-o", "json"); code != 0 || !strings.Contains(out, `"included": 2`) {
		t.Fatalf("plan: exit %d %s %s", code, out, errOut)
	}
	if _, err := ch.QueueDelete(dlq, false, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(5)}); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runBerth(t, "redrive", "execute", plan, "--yes", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, fmt.Sprintf("DLQ %q is a quorum queue with delivery limit 5", dlq)) {
		t.Errorf("execute: exit %d, stderr %q; want the delivery-limit refusal", code, errOut)
	}
	if n := rmqReadyCount(t, conn, work); n != 0 {
		t.Errorf("the work queue holds %d message(s); nothing may be sent", n)
	}
}
