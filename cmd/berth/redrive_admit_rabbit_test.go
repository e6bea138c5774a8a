package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/redrive"
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

// A plan its author edited to send a message elsewhere than its
// dead-lettering says, and re-hashed so the hash matches, sends the others
// and skips that one as derived_mismatch (internal/actions compares the
// signed target with what the consumed message derives to): exit 1, the
// message stays in the DLQ, nothing reaches the edited target.
func TestRabbitExecuteSkipsATargetTheMessageDoesNotDeriveTo(t *testing.T) {
	isolateConfig(t)
	conn, ch, work, dlq := rmqDLQ(t, 2)
	elsewhere := strings.Replace(dlq, ".dlq.", ".elsewhere.", 1)
	if _, err := ch.QueueDeclare(elsewhere, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			c.QueueDelete(elsewhere, false, false, false)
		}
	})
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      review: none\n", dlq)).write(t)
	file, _, _ := rmqEditedPlan(t, dlq, dir, cfg, func(c *redrive.Core) {
		c.Targets = append(c.Targets, "\x00"+elsewhere)
		c.Rows[1].Target = len(c.Targets) - 1
	})
	out, errOut, code := runBerth(t, "redrive", "execute", file, "--yes", "--config", cfg, "-o", "json")
	var res struct {
		Sent    int `json:"sent"`
		Skipped []struct {
			EventID string `json:"event_id"`
			Reason  string `json:"reason"`
			Detail  string `json:"detail"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s %s", err, out, errOut)
	}
	if code != 1 || res.Sent != 1 || len(res.Skipped) != 1 || res.Skipped[0].EventID != "job-1" || res.Skipped[0].Reason != "derived_mismatch" ||
		!strings.Contains(res.Skipped[0].Detail, fmt.Sprintf("key %q", elsewhere)) {
		t.Errorf("execute: exit %d sent %d skipped %+v; want exit 1, job-0 sent, job-1 derived_mismatch naming %s:\n%s", code, res.Sent, res.Skipped, elsewhere, errOut)
	}
	if n := rmqReadyCount(t, conn, elsewhere); n != 0 {
		t.Errorf("%d message(s) reached the edited target", n)
	}
	if ids, _, _ := drainIDs(t, ch, work); fmt.Sprint(ids) != "[job-0]" {
		t.Errorf("the work queue got %v, want [job-0]", ids)
	}
	if n := rmqReadyCount(t, conn, dlq); n != 1 {
		t.Errorf("the DLQ holds %d, want job-1 back", n)
	}
}

// rmqEditedPlan makes a --all plan of rmqDLQ(t, 2)'s DLQ (under cfg, in
// dir/plan.json), lets edit change it as its author could, and writes it
// back re-hashed so the hash matches; it returns the file, the plan and its
// encoding.
func rmqEditedPlan(t *testing.T, dlq, dir, cfg string, edit func(*redrive.Core)) (string, redrive.SignedPlan, []byte) {
	t.Helper()
	file := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", file, "--config", cfg); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var sp redrive.SignedPlan
	if err := json.Unmarshal(raw, &sp); err != nil || len(sp.Plan.Rows) != 2 || sp.Plan.Rows[1].Loc != "1:job-1" {
		t.Fatalf("plan rows: %v %s", err, raw)
	}
	edit(&sp.Plan)
	if sp.Hash, err = sp.Plan.Hash(); err != nil {
		t.Fatal(err)
	}
	if raw, err = sp.Encode(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, sp, raw
}
