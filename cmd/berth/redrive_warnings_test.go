package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/redrive"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

// warned is the warnings of a plan, show or approve -o json document.
func warned(t *testing.T, what, out string) []string {
	t.Helper()
	var doc struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Warnings == nil {
		t.Fatalf("%s -o json: no warnings list (%v):\n%s", what, err, out)
	}
	return doc.Warnings
}

// addInvalidPostcodes dead-letters two records of ledger-events that
// failed validation (the demo's invalid postcodes): a permanent class by
// the default rules, beside the fixture's transient timeouts.
func addInvalidPostcodes(t *testing.T, f *redriveFixture) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var bad []*kgo.Record
	for i := 0; i < 2; i++ {
		p, off := make([]byte, 4), make([]byte, 8)
		binary.BigEndian.PutUint64(off, uint64(9000+i))
		bad = append(bad, &kgo.Record{Topic: "ledger-events.DLT", Partition: 0, Key: []byte(fmt.Sprintf("ship-%d", i)), Value: []byte(fmt.Sprintf(`{"eventId":"evt-bad-%d"}`, i)), Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("ledger-events")},
			{Key: "kafka_dlt-original-partition", Value: p},
			{Key: "kafka_dlt-original-offset", Value: off},
			{Key: "kafka_dlt-exception-fqcn", Value: []byte("jakarta.validation.ConstraintViolationException")},
			{Key: "kafka_dlt-exception-message", Value: []byte(fmt.Sprintf("postcode 'ZZ%d 9ZZ' is not valid for country GB", i))},
		}})
	}
	if err := cl.ProduceSync(context.Background(), bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// A plan that includes records of a class the class rules call permanent
// (the demo's invalid postcodes: a validation failure) says so when it is
// made, shown and approved, text and JSON: redriven unchanged they fail
// again. The count comes from the records read, not from the plan file.
func TestRedrivePlanWarnsOfAPermanentClass(t *testing.T) {
	ppl := newPeople(t)
	f := newRedriveFixture(t, 3, reviewPolicy(ppl.signers, ""))
	addInvalidPostcodes(t, f)
	file := filepath.Join(t.TempDir(), "plan.json")
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := runBerth(t, append([]string{"--config", f.config}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d %s %s", args[1], code, errOut, out)
		}
		return out
	}
	check := func(what string, ws []string) {
		t.Helper()
		if len(ws) != 1 || !strings.HasPrefix(ws[0], "2 included record(s) of class c-") || !strings.Contains(ws[0], "ConstraintViolationException: postcode") ||
			!strings.Contains(ws[0], "they will fail again") {
			t.Errorf("%s: warnings %q, want one about the 2 invalid postcodes", what, ws)
		}
	}
	out := run("redrive", "plan", "ledger-events.DLT", "--all", "--key", ppl.bob, "--out", file, "-o", "json")
	check("plan", warned(t, "plan", out))
	var made struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(out), &made); err != nil {
		t.Fatal(err)
	}
	check("show", warned(t, "show", run("redrive", "show", made.Hash[:12], "-o", "json")))
	if text := run("redrive", "show", file); !strings.Contains(text, "\nWARNING: 2 included record(s) of class c-") {
		t.Errorf("show (text) says no warning:\n%s", text)
	}
	check("approve", warned(t, "approve", run("redrive", "approve", made.Hash[:12], "--key", ppl.alice, "--yes", "-o", "json")))

	// A plan of the transient class alone warns of nothing.
	out = run("dlq", "classes", "ledger-events.DLT", "-o", "json")
	var classes []struct {
		Class   string `json:"class"`
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &classes); err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		if c.Verdict == "transient" {
			out = run("redrive", "plan", "ledger-events.DLT", "--class", c.Class, "--key", ppl.bob, "--out", filepath.Join(t.TempDir(), "t.json"), "-o", "json")
			if ws := warned(t, "plan of a transient class", out); len(ws) != 0 {
				t.Errorf("a plan of transient failures warns: %q", ws)
			}
		}
	}
}

// The same warning on RabbitMQ, from each message's death reason and the
// policy's error header.
func TestRabbitRedrivePlanWarnsOfAPermanentClass(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 0)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []any{work}, "time": time.Now().Truncate(time.Second)}
	for i := 0; i < 5; i++ {
		why := "upstream timed out"
		if i < 2 {
			why = fmt.Sprintf("ConstraintViolationException: postcode 'ZZ%d 9ZZ' is not valid for country GB", i)
		}
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: fmt.Sprintf("ship-%d", i), Body: []byte(`{}`),
			Headers: amqp.Table{"x-death": []any{death}, "x-error": why}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      error_header: x-error\n", dlq)).write(t)
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := runBerth(t, append(args, "--config", cfg)...)
		if code != 0 {
			t.Fatalf("%s: exit %d %s %s", args[1], code, errOut, out)
		}
		return out
	}
	check := func(what string, ws []string) {
		t.Helper()
		if len(ws) != 1 || !strings.HasPrefix(ws[0], "2 included message(s) of class c-") || !strings.Contains(ws[0], "rejected: ConstraintViolationException: postcode") {
			t.Errorf("%s: warnings %q, want one about the 2 invalid postcodes", what, ws)
		}
	}
	file := filepath.Join(dir, "plan.json")
	out := run("redrive", "plan", dlq, "--all", "--out", file, "-o", "json")
	check("plan", warned(t, "plan", out))
	check("show", warned(t, "show", run("redrive", "show", file, "-o", "json")))
	if text := run("redrive", "show", file); !strings.Contains(text, "\nWARNING: 2 included message(s) of class c-") {
		t.Errorf("show (text) says no warning:\n%s", text)
	}
}

// The console's plan page says it too, derived from the records as the
// page reads them.
func TestConsolePlanPageWarnsOfAPermanentClass(t *testing.T) {
	f := newRedriveFixture(t, 3, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	addInvalidPostcodes(t, f)
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "plan", "ledger-events.DLT", "--all", "--out", filepath.Join(t.TempDir(), "plan.json")); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	env := consoleEnv(t, f, false, 0)
	d := drive(t, env, tuidlq.NewPlansPage(env))
	d.press(keyEnterMsg, never)
	d.until("WARNING: 2 included record(s) of class c-")
}

func TestConsoleRabbitPlanPageWarnsOfAPermanentClass(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 0)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []any{work}, "time": time.Now().Truncate(time.Second)}
	for i := 0; i < 3; i++ {
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: fmt.Sprintf("ship-%d", i), Body: []byte(`{}`),
			Headers: amqp.Table{"x-death": []any{death}, "x-error": "invalid postcode"}}); err != nil {
			t.Fatal(err)
		}
	}
	rc := newRabbitConsole(t, fmt.Sprintf("  policies:\n    - match: %q\n      error_header: x-error\n", dlq), false)
	if _, errOut, code := rc.berth(t, "redrive", "plan", dlq, "--all", "--out", filepath.Join(t.TempDir(), "plan.json")); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	d := drive(t, rc.env, tuidlq.NewQueuePlansPage(rc.env))
	d.until("ready")
	d.press(keyEnterMsg, never)
	d.until("WARNING: 3 included message(s) of class c-")
}

// A RabbitMQ plan's row positions are the file's word: a row claiming a
// position far past the DLQ's end does not make `redrive show` read the
// whole DLQ: it reads what the DLQ holds, says so in one line, and still
// finds the message by its event id and content.
func TestRabbitRedriveShowReadsNoFurtherThanTheDLQ(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 0)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []any{work}, "time": time.Now().Truncate(time.Second)}
	for i := 0; i < 3; i++ {
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: fmt.Sprintf("job-%d", i), Body: []byte(`{}`), Headers: amqp.Table{"x-death": []any{death}}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, "").write(t)
	file := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", file, "--config", cfg); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := redrive.DecodeQueuePlan(raw)
	if err != nil {
		t.Fatal(err)
	}
	p.Records[2].Position = 1_000_000 // re-hashed: a plan its author could make
	forged, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBerth(t, "redrive", "show", file, "-o", "json", "--config", cfg)
	if code != 0 {
		t.Fatalf("show: exit %d %s", code, errOut)
	}
	if want := "reaches position 1000000 of " + dlq + " as it was planned, which holds 3 ready now (redriven or consumed since, or a forged position): reading those 3 only"; strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
		t.Errorf("show's stderr %q, want one line saying %q", errOut, want)
	}
	var doc struct {
		Review struct {
			Complete bool     `json:"complete"`
			Gone     []string `json:"gone"`
			Keys     []string `json:"idempotency_keys"`
		} `json:"review"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !doc.Review.Complete || len(doc.Review.Gone) != 0 || len(doc.Review.Keys) != 3 {
		t.Errorf("review %+v (%v), want all 3 messages found, the DLQ read whole:\n%s", doc.Review, err, out)
	}
}
