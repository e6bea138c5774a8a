package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/redrive"
	amqp "github.com/rabbitmq/amqp091-go"
	_ "modernc.org/sqlite"
)

// A RabbitMQ plan is plan format v2, hashed exactly as Kafka's: the
// independent script verifies a plan the CLI made and notices an edit. The
// file names each message by position and event id and pins its content;
// the idempotency keys are not in it: `redrive show` derives them (and the
// counts per target) from the messages, and names a message whose content
// changed since.
func TestRabbitRedrivePlanIsV2AndTheReviewIsDerived(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 0)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []any{work}, "time": time.Now().Truncate(time.Second)}
	pub := func(i int, body string) amqp.Publishing {
		return amqp.Publishing{MessageId: fmt.Sprintf("pay-%d", i), Body: []byte(body), Headers: amqp.Table{"x-death": []any{death}}}
	}
	const n = 5
	for i := 0; i < n; i++ {
		if err := ch.Publish("", dlq, false, false, pub(i, fmt.Sprintf(`{"idem":"idem-%d"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      idempotency_key: json:idem\n", dlq)).write(t)
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, "--config", cfg)...) }
	file := filepath.Join(dir, "plan.json")
	out, errOut, code := run("redrive", "plan", dlq, "--all", "--out", file, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, errOut)
	}
	var made struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(out), &made); err != nil || len(made.Hash) != 64 {
		t.Fatalf("plan output: %v %s", err, out)
	}
	script := filepath.Join("..", "..", "testdata", "redrive", "planhash.py")
	if got, err := exec.Command("python3", script, file).CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != made.Hash {
		t.Fatalf("planhash.py on the CLI's RabbitMQ plan: %v: %q, want %s", err, got, made.Hash)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Plan struct {
			Format  string            `json:"format"`
			Backend string            `json:"backend"`
			Targets []string          `json:"targets"`
			Rows    []json.RawMessage `json:"rows"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Plan.Format != "berth-redrive-plan/v2" || doc.Plan.Backend != "rabbitmq" || len(doc.Plan.Rows) != n {
		t.Fatalf("not a v2 RabbitMQ plan of %d rows: %s", n, raw)
	}
	if fmt.Sprint(doc.Plan.Targets) != fmt.Sprintf("[\x00%s]", work) {
		t.Errorf("targets %q, want the default exchange and %s", doc.Plan.Targets, work)
	}
	if row := string(doc.Plan.Rows[0]); !regexp.MustCompile(`^\["0:pay-0","[A-Za-z0-9_-]{43}",0,""\]$`).MatchString(row) {
		t.Errorf("row %s, want [\"POSITION:EVENT_ID\", digest, target, verdict]", row)
	}
	rows := 0
	for _, r := range doc.Plan.Rows {
		rows += len(r) + 1
	}
	if per := rows / n; per > 100 {
		t.Errorf("a row is %d bytes, want at most 100", per)
	}
	if strings.Contains(string(raw), "idem-") {
		t.Errorf("the file holds idempotency keys (they are derived, never trusted from the file): %s", raw)
	}

	// Change pay-1's content in the DLQ (same id, another body): the review
	// names it, and counts and keys come from the messages now.
	for i := 0; i < n; i++ {
		d, ok, err := ch.Get(dlq, true)
		if err != nil || !ok {
			t.Fatalf("get %d: %v %v", i, ok, err)
		}
		body := string(d.Body)
		if d.MessageId == "pay-1" {
			body = `{"idem":"idem-1","amount":2}`
		}
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: d.MessageId, Body: []byte(body), Headers: d.Headers}); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = run("redrive", "show", made.Hash[:12], "-o", "json")
	if code != 0 {
		t.Fatalf("show: exit %d %s %s", code, out, errOut)
	}
	var shown struct {
		Review struct {
			Targets []struct {
				Target   string `json:"target"`
				Included int    `json:"included"`
			} `json:"targets"`
			Keys    []string `json:"idempotency_keys"`
			Changed []string `json:"changed"`
		} `json:"review"`
		Records []struct {
			EventID        string `json:"event_id"`
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r := shown.Review
	if len(r.Targets) != 1 || r.Targets[0].Included != n || !strings.Contains(r.Targets[0].Target, work) {
		t.Errorf("targets %+v, want %d to %s", r.Targets, n, work)
	}
	// The changed message's key cannot be derived: it is named under
	// changed and not listed (it was "", read as a message without a key).
	if fmt.Sprint(r.Keys) != "[idem-0 idem-2 idem-3 idem-4]" {
		t.Errorf("idempotency keys %q: want those of the messages as they are, none for the changed one", r.Keys)
	}
	if fmt.Sprint(r.Changed) != "[pay-1]" {
		t.Errorf("changed %v, want [pay-1]", r.Changed)
	}
	// status PLAN shows the same review, derived, below its row.
	if out, errOut, code := run("redrive", "status", made.Hash[:12]); code != 0 || !strings.Contains(out, "idempotency keys of the included messages: idem-0, idem-2") ||
		!strings.Contains(out, "CHANGED since the plan was made (execute skips them): pay-1") {
		t.Errorf("status PLAN: exit %d, want the derived review:\n%s%s", code, out, errOut)
	}
	// An edit of the file: the script and berth both refuse it.
	edited := strings.Replace(string(raw), `"rate":100`, `"rate":101`, 1)
	if edited == string(raw) {
		t.Fatalf("no rate in %s", raw)
	}
	if err := os.WriteFile(file, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("python3", script, file).Run(); err == nil {
		t.Error("planhash.py accepted an edited plan")
	}
	if _, errOut, code := run("redrive", "show", file); code == 0 || !strings.Contains(errOut, "does not match its hash") {
		t.Errorf("show of an edited plan: exit %d %s", code, errOut)
	}
}

// A plan in the format before v2 is refused, from a file and from the
// store, with one line saying to make the plan again (its signatures
// covered its v1 hash: nothing is carried over); the other stored plans
// still list.
func TestRabbitV1PlanIsRefusedWithOneLine(t *testing.T) {
	isolateConfig(t)
	_, _, _, dlq := rmqDLQ(t, 1)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, "").write(t)
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, "--config", cfg)...) }
	if _, errOut, code := run("redrive", "plan", dlq, "--all", "--out", filepath.Join(dir, "v2.json")); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	v1 := `{"hash":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","plan":{"version":1,"kind":"rabbitmq","server":"127.0.0.1:5672","vhost":"/","dlq":"` + dlq +
		`","queue_type":"classic","selection":{"all":true},"target":"original_exchange","rate":100,"window":500,"accept_quorum_side_effects":false,"policy":{"idempotency_key":"json:eventId","require_idempotency_key":false,"review":"none","approvals":0,"max_redrives":0},"author":"x","created_at":"2026-11-30T10:00:00Z","records":[]}}`
	file := filepath.Join(dir, "v1.json")
	if err := os.WriteFile(file, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	oneLine := func(what, errOut string, code int) {
		t.Helper()
		msg := strings.TrimSpace(errOut)
		if code == 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, "v1") || !strings.Contains(msg, "make the plan again") {
			t.Errorf("%s of a v1 plan: exit %d %q; want one line saying to make the plan again", what, code, errOut)
		}
	}
	for _, cmd := range [][]string{{"redrive", "show", file}, {"redrive", "approve", file, "--yes", "--key", file}, {"redrive", "execute", file, "--yes"}} {
		_, errOut, code := run(cmd...)
		oneLine(strings.Join(cmd[:2], " "), errOut, code)
	}
	// A v1 plan an earlier version stored.
	db, err := sql.Open("sqlite", filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO berth_rabbitmq_plans (hash, vhost, dlq, created_at, body) VALUES (?, '/', ?, '2026-11-30T10:00:00Z', ?)`,
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", dlq, v1); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run("redrive", "status", "0123456789ab")
	oneLine("status PLAN", errOut, code)
	out, errOut, code := run("redrive", "status", "-o", "json")
	var rows []struct {
		DLQ string `json:"dlq"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || !strings.Contains(errOut, "skipped") || !strings.Contains(errOut, "0123456789ab") {
		t.Errorf("status with a v1 plan stored: exit %d %s %s; want the v2 plan listed and the v1 one named as skipped", code, out, errOut)
	}
}

// A plan its author edited to include one event at two rows, and re-hashed
// so the hash matches, is refused from a file and from the store with one
// line naming the event; nothing is sent.
func TestRabbitPlanIncludingAnEventTwiceIsRefused(t *testing.T) {
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      review: none\n", dlq)).write(t)
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, "--config", cfg)...) }
	file, sp, raw := rmqEditedPlan(t, dlq, dir, cfg, func(c *redrive.Core) { c.Rows[1].Loc = "1:job-0" })
	if got, err := exec.Command("python3", filepath.Join("..", "..", "testdata", "redrive", "planhash.py"), file).CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != sp.Hash {
		t.Fatalf("planhash.py: %v %q, want %s (the edit must keep the hash matching)", err, got, sp.Hash)
	}
	refused := func(what, errOut string, code int) {
		t.Helper()
		msg := strings.TrimSpace(errOut)
		if code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "event job-0 is included twice") {
			t.Errorf("%s: exit %d %q; want exit 1 and one line naming job-0", what, code, errOut)
		}
	}
	for _, cmd := range [][]string{{"redrive", "show", file}, {"redrive", "execute", file, "--yes"}} {
		_, errOut, code := run(cmd...)
		refused(strings.Join(cmd[:2], " "), errOut, code)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE berth_rabbitmq_plans SET hash = ?, body = ?`, sp.Hash, string(raw)); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run("redrive", "status", sp.Hash[:12])
	refused("status PLAN (stored)", errOut, code)
	_, errOut, code = run("redrive", "execute", sp.Hash[:12], "--yes")
	refused("execute PLAN (stored)", errOut, code)
	if n := rmqReadyCount(t, conn, dlq); n != 2 {
		t.Errorf("the DLQ holds %d, want both messages", n)
	}
	if n := rmqReadyCount(t, conn, work); n != 0 {
		t.Errorf("the work queue got %d messages, want none", n)
	}
}

// Ordering runs again at execute, from the command line: order-7's older
// message is now past today's loop limit and stays in the DLQ, so its newer
// one would overtake it; it is skipped as ordering_hazard (exit 1), while
// another order's message is sent.
func TestRabbitExecuteRechecksOrdering(t *testing.T) {
	isolateConfig(t)
	conn, ch, work, dlq := rmqDLQ(t, 0)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []any{work}, "time": time.Now().Truncate(time.Second)}
	for i, m := range []struct {
		order   string
		attempt int64
	}{{"order-7", 1}, {"order-7", 0}, {"order-8", 0}} {
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: fmt.Sprintf("ev-%d", i), Body: []byte(fmt.Sprintf(`{"orderId":%q}`, m.order)),
			Headers: amqp.Table{"x-death": []any{death}, "berth-redrive-attempt": m.attempt}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	policy := fmt.Sprintf("    - match: %q\n      review: none\n      ordering_key: json:orderId\n", dlq)
	before := rabbitRedriveConfig(dir, policy).write(t)
	today := rabbitRedriveConfig(dir, policy+"      max_redrives: 1\n").write(t)
	plan := filepath.Join(dir, "plan.json")
	out, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", plan, "--config", before, "-o", "json")
	if code != 0 || !strings.Contains(out, `"included": 3`) {
		t.Fatalf("plan: exit %d %s %s", code, out, errOut)
	}
	out, errOut, code = runBerth(t, "redrive", "execute", plan, "--yes", "--config", today, "-o", "json")
	var res struct {
		Sent    int `json:"sent"`
		Skipped []struct {
			EventID string `json:"event_id"`
			Reason  string `json:"reason"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s %s", err, out, errOut)
	}
	if code != 1 || res.Sent != 1 || fmt.Sprint(res.Skipped) != "[{ev-0 loop_limit} {ev-1 ordering_hazard}]" {
		t.Errorf("execute: exit %d sent %d skipped %v; want exit 1, ev-2 sent, ev-0 loop_limit and ev-1 ordering_hazard:\n%s", code, res.Sent, res.Skipped, errOut)
	}
	if ids, _, _ := drainIDs(t, ch, work); fmt.Sprint(ids) != "[ev-2]" {
		t.Errorf("the work queue got %v, want [ev-2]", ids)
	}
	if n := rmqReadyCount(t, conn, dlq); n != 2 {
		t.Errorf("the DLQ holds %d, want ev-0 and ev-1 back", n)
	}
}

// redrive plan reads the DLQ message by message and keeps only what the
// plan needs; a selection that may reach past the messages --read allows
// is still refused whole (nothing written), and event ids all found among
// them are planned.
func TestRabbitPlanRefusesASelectionPastWhatItRead(t *testing.T) {
	isolateConfig(t)
	_, ch, work, dlq := rmqDLQ(t, 0)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []any{work}, "time": time.Now().Truncate(time.Second)}
	for i := 0; i < 5; i++ {
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: fmt.Sprintf("pay-%d", i), Body: []byte(fmt.Sprintf(`{"idem":"idem-%d"}`, i)), Headers: amqp.Table{"x-death": []any{death}}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      idempotency_key: json:idem\n", dlq)).write(t)
	file := filepath.Join(dir, "plan.json")
	for _, sel := range [][]string{{"--all"}, {"--event-id", "pay-4"}} {
		args := append([]string{"redrive", "plan", dlq, "--read", "2", "--out", file, "--config", cfg}, sel...)
		out, errOut, code := runBerth(t, args...)
		if code == 0 || !strings.Contains(errOut, "holds more than the 2 messages read") || !strings.Contains(errOut, "raise --read") {
			t.Fatalf("plan %v past --read 2: exit %d %s %s; want a refusal naming --read", sel, code, out, errOut)
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Fatalf("plan %v refused but %s exists (%v)", sel, file, err)
		}
	}
	out, errOut, code := runBerth(t, "redrive", "plan", dlq, "--read", "2", "--event-id", "pay-1", "--out", file, "--config", cfg, "-o", "json")
	if code != 0 || !strings.Contains(errOut, "read 2 message(s) by basic.consume without ack") {
		t.Fatalf("plan of an event id among the 2 read: exit %d %s %s", code, out, errOut)
	}
	p, err := rabbitmq.ReadPlan(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 1 || p.Records[0].EventID != "pay-1" || p.Records[0].Position != 1 || !p.Records[0].Included {
		t.Fatalf("plan records %+v, want pay-1 at position 1 included", p.Records)
	}
}

// A --reason that is no death reason (a typo of "rejected") is a bad flag
// value: one line naming the flag and the reasons, exit 2, before the DLQ
// is read. Before, the DLQ was browsed (every message marked redelivered)
// and the plan refused, exit 1, as a selection matching nothing.
func TestRabbitPlanRefusesAnUnknownDeathReason(t *testing.T) {
	isolateConfig(t)
	_, ch, _, dlq := rmqDLQ(t, 2)
	cfg := rabbitConfig{Audit: filepath.Join(t.TempDir(), "audit.log")}.write(t)
	file := filepath.Join(t.TempDir(), "plan.json")
	_, errOut, code := runBerth(t, "redrive", "plan", dlq, "--reason", "reject", "--out", file, "--config", cfg)
	if code != 2 || !strings.Contains(errOut, "--reason") || !strings.Contains(errOut, "rejected") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
		t.Errorf("--reason reject: exit %d %q; want exit 2 in one line naming --reason and the reasons", code, errOut)
	}
	m, ok, err := ch.Get(dlq, false)
	if err != nil || !ok {
		t.Fatalf("get from %s: %v %v", dlq, ok, err)
	}
	defer m.Nack(false, true)
	if m.Redelivered {
		t.Errorf("the DLQ was read for a selection refused by its flag")
	}
}

// A RabbitMQ plan records its system of record as Kafka's does and as the
// plan format says, "driver: query", never where the database is: the plan
// file is handed around and stored for every operator to read. It held
// the DSN (a path, or a URL with its password masked) before.
func TestRabbitPlanRecordsTheSystemOfRecordWithoutItsDSN(t *testing.T) {
	isolateConfig(t)
	_, _, _, dlq := rmqDLQ(t, 1)
	dir := t.TempDir()
	db := filepath.Join(dir, "secret-location.db")
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`create table payments(idempotency_key text)`); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	const query = "select 1 from payments where idempotency_key = ?"
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      system_of_record: {driver: sqlite, dsn: %s, query: %q}\n", dlq, db, query)).write(t)
	file := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", file, "--config", cfg); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Plan struct {
			Policy struct {
				SystemOfRecord string `json:"system_of_record"`
			} `json:"policy"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Plan.Policy.SystemOfRecord; got != "sqlite: "+query || strings.Contains(string(raw), "secret-location") {
		t.Errorf("the plan's system_of_record is %q, want %q and no DSN in the file", got, "sqlite: "+query)
	}
}

// A RabbitMQ plan file carries its author's signature, as a Kafka plan
// file does: an approver whose redrive store is another one imports it
// with the plan, so the plan keeps its author there and the two-person
// rule holds (the file's signature was dropped: the plan read as unsigned
// and could not be approved). A signature that is not genuine for this
// plan refuses the import, storing nothing.
func TestRabbitPlanFileKeepsItsAuthorAcrossStores(t *testing.T) {
	isolateConfig(t)
	_, _, _, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	policy := reviewedPolicy(dlq, signers)
	mine := rabbitRedriveConfig(dir, policy).write(t)
	theirs := rabbitConfig{Audit: filepath.Join(dir, "their-audit.log"), Store: filepath.Join(dir, "their-store.db"), Policies: policy}.write(t)
	file := filepath.Join(dir, "plan.json")
	out, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--key", alice, "--out", file, "-o", "json", "--config", mine)
	var made struct {
		Hash      string `json:"hash"`
		AuthorKey string `json:"author_key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &made) != nil {
		t.Fatalf("plan: exit %d %s%s", code, out, errOut)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Signatures []struct {
			Role        string `json:"role"`
			Fingerprint string `json:"fingerprint"`
		} `json:"signatures"`
	}
	if json.Unmarshal(raw, &doc) != nil || len(doc.Signatures) != 1 || doc.Signatures[0].Role != "author" || doc.Signatures[0].Fingerprint != made.AuthorKey {
		t.Fatalf("plan --key wrote no author's signature in the file: %s", raw)
	}
	// The author cannot approve it in the other store either.
	if _, errOut, code := runBerth(t, "redrive", "approve", file, "--key", alice, "--config", theirs); code != 1 || !strings.Contains(errOut, "author cannot approve") {
		t.Errorf("the author approving the file in another store: exit %d %q; want the two-person rule", code, errOut)
	}
	out, errOut, code = runBerth(t, "redrive", "approve", file, "--key", bob, "-o", "json", "--config", theirs)
	if code != 0 || !strings.Contains(out, `"approved": true`) {
		t.Errorf("bob approving the file in another store: exit %d, want it approved (its author imported):\n%s%s", code, out, errOut)
	}
	out, errOut, code = runBerth(t, "redrive", "status", made.Hash[:12], "-o", "json", "--config", theirs)
	var st struct {
		Author string `json:"author"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Author != "alice@hc" {
		t.Errorf("status in the other store: exit %d, author %q, want alice@hc:\n%s%s", code, st.Author, out, errOut)
	}
	// A signature moved from another plan (same key, other hash in its
	// statement) is refused, and the plan is not stored.
	other := filepath.Join(dir, "other.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--rate", "7", "--key", alice, "--out", other, "--config", mine); code != 0 {
		t.Fatalf("second plan: %s", errOut)
	}
	var a, b map[string]any
	rawOther, _ := os.ReadFile(other)
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal(rawOther, &b) != nil {
		t.Fatal("plan files are not JSON")
	}
	sig := b["signatures"].([]any)[0].(map[string]any)
	sig["plan_hash"] = a["hash"]
	b["hash"], b["plan"], b["signatures"] = a["hash"], a["plan"], []any{sig}
	forged, _ := json.Marshal(b)
	third := rabbitConfig{Audit: filepath.Join(dir, "third-audit.log"), Store: filepath.Join(dir, "third-store.db"), Policies: policy}.write(t)
	if err := os.WriteFile(other, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runBerth(t, "redrive", "approve", other, "--key", bob, "--config", third); code != 1 || !strings.Contains(errOut, "not genuine") || !strings.Contains(errOut, "nothing stored") {
		t.Errorf("a file with another plan's author signature: exit %d %q; want a refusal, nothing stored", code, errOut)
	}
	if out, _, _ := runBerth(t, "redrive", "status", "-o", "json", "--config", third); strings.Contains(out, made.Hash) {
		t.Errorf("the refused file's plan was stored:\n%s", out)
	}
}

// A PLAN file is read whole on RabbitMQ: what cannot be a plan is refused
// before it is held (`redrive show /dev/zero` ran the process out of
// memory and crashed it with a stack trace), and so is a --signature file
// larger than any signature, on both backends.
func TestPlanAndSignatureFilesAreBoundedBeforeTheyAreRead(t *testing.T) {
	isolateConfig(t)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, "").write(t)
	binary := filepath.Join(dir, "binary.json")
	if err := os.WriteFile(binary, []byte{0, 0, 0}, 0o600); err != nil {
		t.Fatal(err)
	}
	// Sparse: no disk, and no memory unless it is read.
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 300<<20); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{binary: "it begins with '\\x00', not '{'", huge: "larger than 256 MiB"} {
		if _, errOut, code := runBerth(t, "redrive", "show", file, "--config", cfg); code != 1 || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("redrive show %s: exit %d %q; want one line saying %q", filepath.Base(file), code, errOut, want)
		}
	}
	sig := filepath.Join(dir, "huge.sig")
	if err := os.WriteFile(sig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sig, 1<<20); err != nil {
		t.Fatal(err)
	}
	_, _, _, dlq := rmqDLQ(t, 1)
	plan := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", plan, "--config", cfg); code != 0 {
		t.Fatalf("plan: %s", errOut)
	}
	f := newRedriveFixture(t, 1, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	kplan, _ := f.planFile(t)
	for _, args := range [][]string{{"redrive", "approve", plan, "--signature", sig, "--config", cfg}, {"--config", f.config, "redrive", "approve", kplan, "--signature", sig}} {
		if _, errOut, code := runBerth(t, args...); code == 0 || !strings.Contains(errOut, "larger than 64 KiB") {
			t.Errorf("%v: exit %d %q; want a refusal of a file larger than a signature", args, code, errOut)
		}
	}
}
