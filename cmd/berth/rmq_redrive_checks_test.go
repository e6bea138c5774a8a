package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
)

// rmqPostgres returns the test database, skipping when it is unreachable
// unless BERTH_TEST_REQUIRE_SERVICES is set.
func rmqPostgres(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	dsn := os.Getenv("BERTH_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") != "" {
			t.Fatalf("PostgreSQL unreachable: %v", err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return dsn, conn
}

type rmqTestMsg struct {
	id, order, key string
	ts             time.Time
}

// rmqDLQWith dead-letters msgs (in order) from a work queue into a durable
// DLQ, both deleted after the test; bodies carry orderId and idem fields.
func rmqDLQWith(t *testing.T, msgs []rmqTestMsg) (*amqp.Channel, string, string, string) {
	t.Helper()
	_, ch, work, dlq, sfx := rmqDeadLettered(t, "chk", false, func(sfx string) []amqp.Publishing {
		var out []amqp.Publishing
		for _, m := range msgs {
			body := fmt.Sprintf(`{"orderId":%q`, m.order)
			if m.key != "" {
				body += fmt.Sprintf(`,"idem":%q`, m.key)
			}
			// Event ids are matched across the whole ledger (as for Kafka):
			// make them unique to this run, since the PostgreSQL ledger is
			// shared.
			out = append(out, amqp.Publishing{MessageId: sfx + "-" + m.id, Timestamp: m.ts, Body: []byte(body + "}")})
		}
		return out
	})
	return ch, work, dlq, sfx + "-"
}

type rmqPlanOut struct {
	Hash    string `json:"hash"`
	Blocked bool   `json:"blocked"`
	Records []struct {
		EventID        string `json:"event_id"`
		Included       bool   `json:"included"`
		Reason         string `json:"reason"`
		Detail         string `json:"detail"`
		OrderingKey    string `json:"ordering_key"`
		HazardPosition *int   `json:"hazard_position"`
	} `json:"records"`
	Totals struct {
		Included int            `json:"included"`
		ByReason map[string]int `json:"by_reason"`
	} `json:"totals"`
}

func (p rmqPlanOut) verdicts(prefix string) string {
	var out []string
	for _, r := range p.Records {
		v := "included"
		if !r.Included {
			v = r.Reason
		} else if r.HazardPosition != nil {
			v = fmt.Sprintf("included(hazard@%d)", *r.HazardPosition)
		}
		out = append(out, strings.TrimPrefix(r.EventID, prefix)+":"+v)
	}
	return strings.Join(out, " ")
}

// The RabbitMQ plan runs Kafka's checks where they apply, against the real
// RabbitMQ and PostgreSQL (system of record and ledger): the system of
// record's answer, a missing key, ordering hazards by the policy's business
// key (an older same-key message left behind; a same-key message published
// earlier but dead-lettered later), then at execution the checks again
// (an effect committed meanwhile is skipped) and the DLQ depth verified.
func TestRabbitRedriveChecks(t *testing.T) {
	isolateConfig(t)
	dsn, pg := rmqPostgres(t)
	table := fmt.Sprintf("berth_rmq_payments_%d", time.Now().UnixNano())
	ctx := context.Background()
	if _, err := pg.Exec(ctx, "create table "+table+" (idem text primary key)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Exec(context.Background(), "drop table if exists "+table) })
	if _, err := pg.Exec(ctx, "insert into "+table+" values ('k4')"); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	ch, work, dlq, u := rmqDLQWith(t, []rmqTestMsg{
		{"job-0", "A", "k0", base},
		{"job-1", "A", "k1", base.Add(time.Second)},
		{"job-2", "B", "k2", base.Add(5 * time.Second)},
		{"job-3", "B", "k3", base.Add(2 * time.Second)}, // published before job-2, died after it
		{"job-4", "C", "k4", base.Add(6 * time.Second)}, // committed in the system of record
		{"job-5", "D", "", base.Add(7 * time.Second)},   // no idempotency key to ask with
	})
	cfg := rabbitConfig{Store: dsn, Policies: fmt.Sprintf(`    - match: "berth.test.chk.dlq.*"
      idempotency_key: json:idem
      ordering_key: json:orderId
      system_of_record:
        driver: postgres
        dsn: %s
        query: select 1 from %s where idem = $1
`, dsn, table)}.write(t)
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, "--config", cfg)...) }
	dir := t.TempDir()
	plan := func(name string, extra ...string) rmqPlanOut {
		t.Helper()
		args := append([]string{"redrive", "plan", dlq, "--event-id", u + "job-1," + u + "job-2," + u + "job-3," + u + "job-4," + u + "job-5", "--out", filepath.Join(dir, name), "-o", "json"}, extra...)
		out, errOut, code := run(args...)
		if code != 0 {
			t.Fatalf("plan: exit %d %s", code, errOut)
		}
		var p rmqPlanOut
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return p
	}
	p := plan("strict.json")
	if got, want := p.verdicts(u), "job-1:ordering_hazard job-2:included job-3:ordering_hazard job-4:effect_committed job-5:missing_idempotency_key"; got != want {
		t.Fatalf("verdicts\n got %s\nwant %s", got, want)
	}
	if p.Records[0].HazardPosition == nil || *p.Records[0].HazardPosition != 0 || !strings.Contains(p.Records[0].Detail, "position 0") {
		t.Errorf("job-1 must name job-0 (position 0) left behind: %+v", p.Records[0])
	}
	if p.Totals.ByReason["ordering_hazard"] != 2 || p.Totals.Included != 1 {
		t.Errorf("totals %+v", p.Totals)
	}

	p = plan("allow.json", "--allow-ordering-hazards")
	if got, want := p.verdicts(u), "job-1:included(hazard@0) job-2:included job-3:included(hazard@2) job-4:effect_committed job-5:missing_idempotency_key"; got != want {
		t.Fatalf("with --allow-ordering-hazards\n got %s\nwant %s", got, want)
	}
	// job-2's payment is captured after the plan was made: execution runs
	// the system-of-record check again and leaves it in the DLQ.
	if _, err := pg.Exec(ctx, "insert into "+table+" values ('k2')"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run("redrive", "execute", p.Hash[:12], "--yes", "-o", "json")
	if code != 0 {
		t.Fatalf("execute: exit %d %s %s", code, out, errOut)
	}
	var res struct {
		Sent    int `json:"sent"`
		Skipped []struct {
			EventID string `json:"event_id"`
			Reason  string `json:"reason"`
		} `json:"skipped"`
		Verification struct {
			OK       bool `json:"ok"`
			RabbitMQ struct {
				Before int64 `json:"dlq_depth_before"`
				After  int64 `json:"dlq_depth_after"`
				Acked  int   `json:"acked"`
			} `json:"rabbitmq"`
		} `json:"verification"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Sent != 2 || len(res.Skipped) != 1 || res.Skipped[0].EventID != u+"job-2" || res.Skipped[0].Reason != "effect_committed" {
		t.Fatalf("execute: %s", out)
	}
	if v := res.Verification.RabbitMQ; !res.Verification.OK || v.Before != 6 || v.After != 4 || v.Acked != 2 {
		t.Errorf("verification %+v", v)
	}
	var got []string
	for {
		d, ok, err := ch.Get(work, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, strings.TrimPrefix(d.MessageId, u))
	}
	if fmt.Sprint(got) != "[job-1 job-3]" {
		t.Errorf("work queue got %v, want job-1 then job-3 (DLQ order)", got)
	}

	// The ledger (in PostgreSQL) now has job-1 and job-3: a new plan over
	// the rest excludes nothing as redriven (they left the DLQ), and the
	// status shows the executed plan as done.
	out, _, _ = run("redrive", "status", p.Hash[:12], "-o", "json")
	var st struct {
		Redriven int    `json:"redriven"`
		State    string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Redriven != 2 {
		t.Errorf("status: %v %s", err, out)
	}
}

// A system of record that cannot be asked blocks the plan (exit 1), and
// execution refuses a blocked plan: never read as "not applied".
func TestRabbitRedriveUnreachableSystemOfRecordBlocks(t *testing.T) {
	isolateConfig(t)
	_, _, dlq, _ := rmqDLQWith(t, []rmqTestMsg{{"job-0", "A", "k0", time.Now()}})
	dir := t.TempDir()
	cfg := rabbitConfig{Store: filepath.Join(dir, "ledger.db"), Policies: `    - match: "berth.test.chk.dlq.*"
      idempotency_key: json:idem
      system_of_record:
        driver: postgres
        dsn: postgres://postgres:s3cret-pw@127.0.0.1:1/none?connect_timeout=2
        query: select 1 from t where idem = $1
`}.write(t)
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, "--config", cfg)...) }
	planFile := filepath.Join(dir, "p.json")
	out, errOut, code := run("redrive", "plan", dlq, "--all", "--out", planFile, "-o", "json")
	if code != 1 || !strings.Contains(errOut, "blocked") {
		t.Fatalf("plan: exit %d %s; want 1, blocked", code, errOut)
	}
	if strings.Contains(out+errOut, "s3cret-pw") {
		t.Errorf("the DSN's password leaked: %s %s", out, errOut)
	}
	var p rmqPlanOut
	if err := json.Unmarshal([]byte(out), &p); err != nil || !p.Blocked || p.Records[0].Reason != "check_failed" {
		t.Fatalf("plan: %v %s", err, out)
	}
	if _, errOut, code := run("redrive", "execute", planFile, "--yes"); code == 0 || !strings.Contains(errOut, "blocked") {
		t.Errorf("execute of a blocked plan: exit %d %s", code, errOut)
	}
	out, _, _ = run("redrive", "status", "-o", "json")
	var rows []struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].State != "blocked" {
		t.Errorf("status: %v %s", err, out)
	}
}

// On a RabbitMQ context `berth dlq list` finds the DLQ from its wiring and
// names the queue that dead-letters into it; `berth dlq show` shows each
// message with Kafka's field names where they mean the same.
func TestRabbitDLQListAndShow(t *testing.T) {
	isolateConfig(t)
	_, work, dlq, u := rmqDLQWith(t, []rmqTestMsg{{"job-0", "A", "k0", time.Now()}, {"job-1", "A", "k1", time.Now()}})
	r := []string{"--amqp", testAMQPURL(), "--management", testManagementURL()}
	out, errOut, code := runBerth(t, append([]string{"dlq", "list", "-o", "json"}, r...)...)
	if code != 0 {
		t.Fatalf("list: %d %s", code, errOut)
	}
	var rows []struct {
		DLQ            string   `json:"dlq"`
		OriginalQueues []string `json:"original_queues"`
		Found          string   `json:"found"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, row := range rows {
		if row.DLQ == dlq {
			found = true
			if fmt.Sprint(row.OriginalQueues) != "["+work+"]" || row.Found != "wiring" {
				t.Errorf("row %+v", row)
			}
		}
	}
	if !found {
		t.Fatalf("%s not listed: %s", dlq, out)
	}
	out, errOut, code = runBerth(t, append([]string{"dlq", "show", dlq, "--limit", "1", "-o", "json"}, r...)...)
	if code != 0 {
		t.Fatalf("show: %d %s", code, errOut)
	}
	var msgs []map[string]any
	if err := json.Unmarshal([]byte(out), &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0]["event_id"] != u+"job-0" || msgs[0]["original_queue"] != work || msgs[0]["reason"] != "rejected" || msgs[0]["redriven_or_settled"] != false {
		t.Fatalf("show: %s", out)
	}
	var keys []string
	for k := range msgs[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range []string{"class", "headers", "value", "value_bytes", "prior_redrives", "idempotency_key"} {
		if _, ok := msgs[0][k]; !ok {
			t.Errorf("show lacks %s (has %v)", k, keys)
		}
	}
	// The old home of these commands points to the shared ones.
	if _, errOut, code := runBerth(t, append([]string{"queues", "dlq", "list"}, r...)...); code != 2 || !strings.Contains(errOut, "berth dlq") {
		t.Errorf("berth queues dlq: exit %d %s", code, errOut)
	}
}

// On a Kafka context the RabbitMQ-only flags are refused by name (exit 2),
// before any connection: the shared commands never silently ignore them.
func TestKafkaRefusesRabbitOnlyFlags(t *testing.T) {
	isolateConfig(t)
	out := filepath.Join(t.TempDir(), "p.json")
	for flag, args := range map[string][]string{
		"--queue-type":                  {"dlq", "classes", "x.DLT", "--queue-type", "classic"},
		"--accept-requeue-side-effects": {"dlq", "show", "x.DLT", "--accept-requeue-side-effects"},
		"--event-id":                    {"redrive", "plan", "x.DLT", "--event-id", "e1", "--out", out},
		"--to-queue":                    {"redrive", "plan", "x.DLT", "--class", "c-1", "--to-queue", "--out", out},
	} {
		_, errOut, code := runBerth(t, append(args, "--bootstrap", "127.0.0.1:1")...)
		if code != 2 || !strings.Contains(errOut, flag+": RabbitMQ only") {
			t.Errorf("%v: exit %d %q; want a usage error naming %s as RabbitMQ only", args, code, errOut, flag)
		}
	}
}

// With --watch, execution looks for the plan's messages back in the DLQ
// after the watch: here the work queue's consumer rejects the redriven
// copies (after the run was verified, as the audit log says), and they are
// reported as re-failed with their death reason.
func TestRabbitRedriveWatchReportsRefailures(t *testing.T) {
	isolateConfig(t)
	ch, work, dlq, u := rmqDLQWith(t, []rmqTestMsg{{"job-0", "A", "k0", time.Now()}, {"job-1", "A", "k1", time.Now()}})
	dir := t.TempDir()
	auditFile := filepath.Join(dir, "audit.log")
	r := []string{"--amqp", testAMQPURL(), "--management", testManagementURL(), "--audit-file", auditFile}
	plan := filepath.Join(dir, "p.json")
	if _, errOut, code := runBerth(t, append([]string{"redrive", "plan", dlq, "--all", "--out", plan}, r...)...); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	done := startBerth(t, append([]string{"redrive", "execute", plan, "--yes", "--watch", "3s", "-o", "json"}, r...)...)
	// Once the run has ended (the watch begins), fail the copies again.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(auditFile)
		if strings.Contains(string(b), "redrive.execute.finished") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no redrive.execute.finished entry in the audit log: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for n := 0; n < 2; {
		d, ok, err := ch.Get(work, false)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if err := d.Reject(false); err != nil {
				t.Fatal(err)
			}
			n++
		} else if time.Now().After(deadline) {
			t.Fatalf("the redriven copies never reached %s", work)
		}
	}
	res := <-done
	if res.code != 0 {
		t.Fatalf("execute: exit %d %s %s", res.code, res.out, res.errOut)
	}
	var out struct {
		Verification struct {
			OK       bool   `json:"ok"`
			Watched  string `json:"watched"`
			Refailed int    `json:"refailed"`
			RabbitMQ struct {
				Refailed []struct {
					EventID       string `json:"event_id"`
					Reason        string `json:"reason"`
					OriginalQueue string `json:"original_queue"`
				} `json:"refailed"`
			} `json:"rabbitmq"`
		} `json:"verification"`
	}
	if err := json.Unmarshal([]byte(res.out), &out); err != nil {
		t.Fatalf("%v: %s", err, res.out)
	}
	v := out.Verification
	if !v.OK || v.Watched != "3s" || v.Refailed != 2 || len(v.RabbitMQ.Refailed) != 2 {
		t.Fatalf("verification %+v", v)
	}
	for i, r := range v.RabbitMQ.Refailed {
		if r.EventID != fmt.Sprintf("%sjob-%d", u, i) || r.Reason != "rejected" || r.OriginalQueue != work {
			t.Errorf("refailed[%d] = %+v", i, r)
		}
	}
}
