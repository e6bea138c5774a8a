package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/rabbittest"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

// rmqDeadLetters declares a DLQ (lazy when lazy), deleted after the test,
// holding n dead letters job-0..job-n-1 of a work queue.
func rmqDeadLetters(t *testing.T, n int, lazy bool) (*amqp.Connection, string) {
	t.Helper()
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	dlq := rabbittest.Uniq(t, "dlq")
	var args amqp.Table
	if lazy {
		args = amqp.Table{"x-queue-mode": "lazy"}
	}
	rabbittest.DeclareQueue(t, conn, dlq, args)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": "work", "exchange": "", "routing-keys": []any{"work"}, "time": time.Now().Truncate(time.Second)}
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("job-%d", i), Body: []byte(`{"n":1}`), DeliveryMode: amqp.Persistent, Headers: amqp.Table{"x-death": []any{death}}}
	}
	rabbittest.PublishConfirmed(t, conn, "", dlq, msgs...)
	return conn, dlq
}

type rmqShown struct {
	Review struct {
		Complete   bool     `json:"complete"`
		Gone       []string `json:"gone"`
		NotVisible []string `json:"not_visible"`
		Unseen     string   `json:"unseen"`
		Keys       []string `json:"idempotency_keys"`
	} `json:"review"`
}

func rmqShow(t *testing.T, file, cfg string) (rmqShown, string) {
	t.Helper()
	// The timeout leaves the management API's statistics (every 5 s) the
	// time to count what other consumers hold.
	out, errOut, code := runBerth(t, "redrive", "show", file, "-o", "json", "--timeout", "60s", "--config", cfg)
	if code != 0 {
		t.Fatalf("show: exit %d %s", code, errOut)
	}
	var doc rmqShown
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("show: %v", err)
	}
	return doc, errOut
}

// `redrive show` right after the browse of `redrive plan` (or another
// show) finds every message of a DLQ of a few thousand, classic or lazy:
// each browse returns only once RabbitMQ has put back what it read. A
// review used to find the DLQ short of the messages still being put back
// and call the rest gone (9,999 of a lazy 100,000).
func TestRabbitRedriveShowRightAfterABrowseFindsEveryMessage(t *testing.T) {
	isolateConfig(t)
	const n = 5000
	for _, mode := range []string{"classic", "lazy"} {
		t.Run(mode, func(t *testing.T) {
			_, dlq := rmqDeadLetters(t, n, mode == "lazy")
			dir := t.TempDir()
			cfg := rabbitRedriveConfig(dir, "").write(t)
			file := filepath.Join(dir, "plan.json")
			if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--read", "5001", "--out", file, "--config", cfg); code != 0 {
				t.Fatalf("plan: exit %d %s", code, errOut)
			}
			for round := 1; round <= 2; round++ {
				doc, errOut := rmqShow(t, file, cfg)
				if r := doc.Review; !r.Complete || len(r.Gone) != 0 || len(r.NotVisible) != 0 || len(r.Keys) != n || r.Unseen != "" {
					t.Fatalf("show %d: complete %v, %d gone, %d not visible, %d keys, unseen %q; want all %d found\n%s", round, r.Complete, len(r.Gone), len(r.NotVisible), len(r.Keys), r.Unseen, n, errOut)
				}
			}
		})
	}
}

// Messages another consumer holds unacknowledged cannot be read by a
// review: `redrive show` says how many and why in one line, and calls the
// records it did not find not visible, not gone.
func TestRabbitRedriveShowCallsHeldMessagesNotVisible(t *testing.T) {
	isolateConfig(t)
	conn, dlq := rmqDeadLetters(t, 6, false)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, "").write(t)
	file := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--read", "5001", "--out", file, "--config", cfg); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	holdTwo(t, conn, dlq)
	doc, errOut := rmqShow(t, file, cfg)
	r := doc.Review
	if len(r.Gone) != 0 || fmt.Sprint(r.NotVisible) != "[job-0 job-1]" || len(r.Keys) != 6 {
		t.Fatalf("review: gone %v, not visible %v, %d keys; want job-0 and job-1 not visible, none gone\n%s", r.Gone, r.NotVisible, len(r.Keys), errOut)
	}
	if want := "2 message(s) could not be seen: held unacknowledged by 1 other consumer(s); the 2 record(s) not found are not visible, not gone"; !strings.HasSuffix(r.Unseen, want) {
		t.Fatalf("unseen %q, want it to end %q", r.Unseen, want)
	}
	out, _, code := runBerth(t, "redrive", "show", file, "--timeout", "60s", "--config", cfg)
	if code != 0 || strings.Contains(out, "GONE") || !strings.Contains(out, "NOT VISIBLE") || strings.Count(out, "could not be seen") != 1 {
		t.Fatalf("show (exit %d) says:\n%s\nwant NOT VISIBLE, no GONE, and one line saying what could not be seen", code, out)
	}
}

// The console reads a DLQ as the command line does: a page that browses it
// right after another did reads the same messages, and the messages
// another consumer holds are said in one line, and called not visible, not
// gone, on the plan's page.
func TestConsoleRabbitNamesWhatOtherConsumersHold(t *testing.T) {
	isolateConfig(t)
	conn, dlq := rmqDeadLetters(t, 6, false)
	rc := newRabbitConsole(t, "", false)
	file := filepath.Join(t.TempDir(), "plan.json")
	out, errOut, code := rc.berth(t, "redrive", "plan", dlq, "--all", "--out", file, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	var made struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(out), &made); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		d := drive(t, rc.env, tuidlq.NewQueueClassesPage(rc.env, dlq))
		mustContain(t, d.until("1 class(es)"), "6 message(s) read")
	}
	holdTwo(t, conn, dlq)
	d := drive(t, rc.env, tuidlq.NewQueueClassesPage(rc.env, dlq))
	mustContain(t, d.until("1 class(es)"), "4 message(s) read", "note: 2 message(s) could not be seen: held unacknowledged by 1 other consumer(s)")
	d = drive(t, rc.env, tuidlq.NewQueuePlansPage(rc.env))
	d.until(made.Hash[:12])
	d.press(keyEnterMsg, never)
	v := d.until("not visible")
	mustContain(t, v, "2 message(s) not visible", "job-0, job-1", "note: the review of")
	if strings.Contains(v, "changed or gone") {
		t.Fatalf("the plan's page calls held messages gone:\n%s", v)
	}
}

// holdTwo has another consumer take the DLQ's first two messages and hold
// them unacknowledged until the test ends.
func holdTwo(t *testing.T, conn *amqp.Connection, dlq string) {
	t.Helper()
	other, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if err := other.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := other.Consume(dlq, "other", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-ds
	<-ds
}
