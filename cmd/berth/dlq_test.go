package main

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// dlqCluster starts a bundled broker with payments and payments.DLT: five
// Spring-style dead letters (pay-1 captured in the SQLite system of record,
// one without an idempotency key, one with hostile and binary content) and
// returns the --bootstrap value and a config declaring the payments policy.
func dlqCluster(t *testing.T) (bootstrap, cfgPath, db string) {
	t.Helper()
	isolateConfig(t)
	t.Setenv("BERTH_AUDIT_FILE", filepath.Join(t.TempDir(), "audit.log"))
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "payments", 1, 1, nil)
	kc.CreateTopic(t, "payments.DLT", 1, 1, nil)
	var orig []*kgo.Record
	for i := 0; i < 6; i++ {
		orig = append(orig, &kgo.Record{Topic: "payments", Key: []byte(fmt.Sprintf("order-%d", i)), Value: []byte("x")})
	}
	kc.Produce(t, orig...)
	hdr := func(off int64, cause, msg string) []kgo.RecordHeader {
		p := make([]byte, 4)
		o := make([]byte, 8)
		binary.BigEndian.PutUint64(o, uint64(off))
		return []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("payments")},
			{Key: "kafka_dlt-original-partition", Value: p},
			{Key: "kafka_dlt-original-offset", Value: o},
			{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte(cause)},
			{Key: "kafka_dlt-exception-message", Value: []byte(msg)},
		}
	}
	ts := time.Now().Add(-10 * time.Minute)
	pay := func(i int, key string) []byte {
		return []byte(fmt.Sprintf(`{"eventId":"ev-%d","idempotencyKey":"%s"}`, i, key))
	}
	hostile := hdr(4, "com.x.PspTimeoutException", "PSP timed out after 3000 ms")
	hostile = append(hostile, kgo.RecordHeader{Key: "note\x1b[31m", Value: []byte("\x1b[31mred alert: check the ledger before redriving\x1b[0m")}, kgo.RecordHeader{Key: "bin", Value: []byte{0, 1, 2, 0xff}})
	dlt := []*kgo.Record{
		{Key: []byte("order-0"), Value: pay(0, "pay-0"), Headers: hdr(0, "com.x.PspTimeoutException", "PSP timed out after 3000 ms")},
		{Key: []byte("order-1"), Value: pay(1, "pay-1"), Headers: hdr(1, "com.x.PspTimeoutException", "PSP timed out after 5000 ms")},
		{Key: []byte("order-2"), Value: []byte(`{"eventId":"ev-2"}`), Headers: hdr(2, "com.x.PspTimeoutException", "PSP timed out after 10 ms")},
		{Key: []byte("order-3"), Value: pay(3, "pay-3"), Headers: hdr(3, "jakarta.validation.ConstraintViolationException", "amountCents must be positive, got -5")},
		{Key: []byte("order-4"), Value: []byte{0xde, 0xad, 0xbe, 0xef, 0, 1}, Headers: hostile},
	}
	for _, r := range dlt {
		r.Topic, r.Timestamp = "payments.DLT", ts
	}
	kc.Produce(t, dlt...)

	db = filepath.Join(t.TempDir(), "payments.db")
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	sdb.Exec(`create table payments(idempotency_key TEXT PRIMARY KEY, order_id TEXT, amount_cents INTEGER, status TEXT, captured_at TEXT)`)
	sdb.Exec(`insert into payments values ('pay-1', 'order-1', 100, 'captured', '2026-11-29T08:00:00Z')`)
	sdb.Close()
	cfgPath = writeConfig(t, fmt.Sprintf(`
redrive:
  policies:
    - match: "payments*.DLT"
      idempotency_key: json:idempotencyKey
      require_idempotency_key: true
      system_of_record:
        driver: sqlite
        dsn: %s
        query: select 1 from payments where idempotency_key = ? and status = 'captured'
      review: required
      approvals: 1
      allowed_signers: /nonexistent/allowed_signers
      max_redrives: 3
`, db))
	return strings.Join(kc.Addrs, ","), cfgPath, db
}

func dlqJSON(t *testing.T, into any, args ...string) {
	t.Helper()
	out, errOut, code := runBerth(t, args...)
	if code != 0 {
		t.Fatalf("berth %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestDLQListClassesAndShowJSON(t *testing.T) {
	bs, cfg, _ := dlqCluster(t)
	var list []struct {
		DLQ              string     `json:"dlq"`
		Declared         string     `json:"declared_original"`
		Records          int64      `json:"records"`
		Depth            int64      `json:"depth"`
		OldestAt         *time.Time `json:"oldest_at"`
		OldestAgeSeconds float64    `json:"oldest_age_seconds"`
		Classes          int        `json:"classes"`
		Originals        []string   `json:"original_topics"`
		Sampled          bool       `json:"sampled"`
	}
	dlqJSON(t, &list, "--config", cfg, "--bootstrap", bs, "dlq", "list", "-o", "json")
	if len(list) != 1 || list[0].DLQ != "payments.DLT" || list[0].Depth != 5 || list[0].Classes != 2 || list[0].OldestAgeSeconds < 500 || fmt.Sprint(list[0].Originals) != "[payments]" {
		t.Fatalf("list %+v", list)
	}

	var classes []struct {
		Class         string    `json:"class"`
		Count         int       `json:"count"`
		OriginalTopic string    `json:"original_topic"`
		Exception     string    `json:"exception"`
		Pattern       string    `json:"pattern"`
		Transient     bool      `json:"transient"`
		Verdict       string    `json:"verdict"`
		FirstSeen     time.Time `json:"first_seen"`
		LastSeen      time.Time `json:"last_seen"`
	}
	dlqJSON(t, &classes, "--config", cfg, "--bootstrap", bs, "dlq", "classes", "payments.DLT", "-o", "json")
	if len(classes) != 2 || classes[0].Count != 4 || !classes[0].Transient || classes[0].Pattern != "PSP timed out after <n> ms" || classes[0].OriginalTopic != "payments" {
		t.Fatalf("classes %+v", classes)
	}
	var permanent string
	for _, c := range classes {
		if strings.Contains(c.Exception, "ConstraintViolation") {
			if c.Transient || c.Verdict != "permanent" {
				t.Fatalf("validation class %+v", c)
			}
			permanent = c.Class
		}
	}

	out, _, code := runBerth(t, "--config", cfg, "--bootstrap", bs, "dlq", "show", "payments.DLT", "-o", "json")
	if code != 0 {
		t.Fatalf("show exit %d", code)
	}
	if strings.ContainsRune(out, 0x1b) || strings.Contains(out, "\x07") {
		t.Fatal("an escape sequence reached the output")
	}
	var recs []map[string]any
	json.Unmarshal([]byte(out), &recs)
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	for _, k := range []string{"partition", "offset", "timestamp", "key", "event_id", "idempotency_key", "class", "conventions", "first_origin", "last_hop", "exception", "message", "attempts", "prior_redrives", "redriven_or_settled", "headers", "value_binary"} {
		if _, ok := recs[0][k]; !ok {
			t.Errorf("show JSON lacks %s", k)
		}
	}
	last := recs[4]
	if last["value_hex"] != "deadbeef0001" || last["value_binary"] != true {
		t.Fatalf("binary payload: %v %v", last["value_hex"], last["value_binary"])
	}
	hs := fmt.Sprint(last["headers"])
	if !strings.Contains(hs, `note\e[31m`) || !strings.Contains(hs, `\e[31mred alert`) || !strings.Contains(hs, "000102ff") {
		t.Fatalf("headers not sanitised/hexed: %s", hs)
	}

	// Table view: hostile text escaped, binary as a hex dump.
	text, _, code := runBerth(t, "--config", cfg, "--bootstrap", bs, "dlq", "show", "payments.DLT", "--limit", "10")
	if code != 0 || strings.ContainsRune(text, 0x1b) || !strings.Contains(text, "de ad be ef 00 01") || !strings.Contains(text, "origin payments[0]@4") {
		t.Fatalf("show table (exit %d):\n%s", code, text)
	}
	one, _, _ := runBerth(t, "--config", cfg, "--bootstrap", bs, "dlq", "show", "payments.DLT", "--class", permanent, "-o", "json")
	json.Unmarshal([]byte(one), &recs)
	if len(recs) != 1 || recs[0]["offset"] != float64(3) {
		t.Fatalf("--class filter: %v", recs)
	}
	if _, errOut, code := runBerth(t, "--config", cfg, "--bootstrap", bs, "dlq", "show", "payments.DLT", "--class", "c-0000000000"); code != 2 || !strings.Contains(errOut, "c-0000000000") {
		t.Fatalf("unknown class: exit %d %s", code, errOut)
	}
}

type planJSON struct {
	Hash          string                 `json:"hash"`
	File          string                 `json:"file"`
	DLQ           string                 `json:"dlq"`
	Target        string                 `json:"target"`
	Author        string                 `json:"author"`
	AuthorKey     string                 `json:"author_key"`
	Approvals     []string               `json:"approvals"`
	Stored        bool                   `json:"stored"`
	StoreNote     string                 `json:"store_note"`
	Blocked       bool                   `json:"blocked"`
	BlockedReason string                 `json:"blocked_reason"`
	CreatedAt     time.Time              `json:"created_at"`
	Policy        redrive.PolicySnapshot `json:"policy"`
	Warnings      []string               `json:"warnings"`
	Records       []struct {
		Partition   int32  `json:"partition"`
		Offset      int64  `json:"offset"`
		EventID     string `json:"event_id"`
		Included    bool   `json:"included"`
		Reason      string `json:"reason"`
		Detail      string `json:"detail"`
		Class       string `json:"class"`
		Target      string `json:"target"`
		NewerOffset *int64 `json:"newer_offset"`
	} `json:"records"`
	Totals redrive.Totals `json:"totals"`
	Review struct {
		Cluster string `json:"cluster"`
		Targets []struct {
			Target   string `json:"target"`
			Included int    `json:"included"`
			Excluded int    `json:"excluded"`
		} `json:"targets"`
		Keys    []string        `json:"idempotency_keys"`
		Changed []redrive.Coord `json:"changed"`
		Gone    []redrive.Coord `json:"gone"`
	} `json:"review"`
}

func TestRedrivePlanChecksSignsStoresAndShows(t *testing.T) {
	bs, cfg, db := dlqCluster(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "alice")
	if err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).Run(); err != nil {
		t.Skipf("ssh-keygen: %v", err)
	}
	planFile := filepath.Join(dir, "plan.json")
	var p planJSON
	dlqJSON(t, &p, "--config", cfg, "--bootstrap", bs, "redrive", "plan", "payments.DLT", "--offsets", "0:0,0:1,0:2,0:4", "--key", key, "--out", planFile, "-o", "json")
	want := map[int64]string{0: "", 1: "effect_committed", 2: "missing_idempotency_key", 4: "missing_idempotency_key"}
	if len(p.Records) != 4 {
		t.Fatalf("records %+v", p.Records)
	}
	for _, r := range p.Records {
		if r.Reason != want[r.Offset] || r.Included != (want[r.Offset] == "") {
			t.Errorf("record %d: included=%v reason=%q, want %q", r.Offset, r.Included, r.Reason, want[r.Offset])
		}
	}
	if !p.Stored || p.Blocked || p.AuthorKey == "" || p.Totals.Included != 1 || p.Totals.ByReason["effect_committed"] != 1 || p.Policy.Review != "required" {
		t.Fatalf("summary %+v", p)
	}

	// The author's signature verifies with ssh-keygen over the statement
	// naming its role, the plan's cluster and the plan hash.
	raw, _ := os.ReadFile(planFile)
	f, err := redrive.DecodeFile(raw)
	if err != nil || f.Hash != p.Hash {
		t.Fatalf("plan file: %v", err)
	}
	sigFile := filepath.Join(dir, "sig")
	os.WriteFile(sigFile, []byte(f.Author().Armored), 0o600)
	pub, _ := os.ReadFile(key + ".pub")
	signers := filepath.Join(dir, "allowed")
	os.WriteFile(signers, []byte("alice "+string(pub)), 0o600)
	verify := exec.Command("ssh-keygen", "-Y", "verify", "-f", signers, "-I", "alice", "-n", "berth-redrive", "-s", sigFile)
	verify.Stdin = bytes.NewReader(approval.Statement(approval.RoleAuthor, approval.Subject{PlanHash: p.Hash, Cluster: f.Plan.Cluster}))
	if out, err := verify.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y verify: %v %s", err, out)
	}

	// Shown from the file and from the cluster's plan store by hash prefix.
	var fromFile, fromStore planJSON
	dlqJSON(t, &fromFile, "--config", cfg, "--bootstrap", bs, "redrive", "show", planFile, "-o", "json")
	dlqJSON(t, &fromStore, "--config", cfg, "--bootstrap", bs, "redrive", "show", p.Hash[:12], "-o", "json")
	if fromFile.Hash != p.Hash || fromStore.Hash != p.Hash || !fromStore.Stored || fromStore.AuthorKey != p.AuthorKey {
		t.Fatalf("show: file %s store %s", fromFile.Hash, fromStore.Hash)
	}
	// The review is derived from the records: where they go, and the keys.
	if r := fromFile.Review; r.Cluster == "" || len(r.Targets) != 1 || r.Targets[0].Target != "payments" || r.Targets[0].Included != p.Totals.Included || len(r.Keys) != p.Totals.Included {
		t.Fatalf("review %+v for totals %+v", r, p.Totals)
	}
	// An edited plan file is refused.
	edited := bytes.Replace(raw, []byte(`"rate":100`), []byte(`"rate":5000`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatalf("no rate in the plan file: %s", raw)
	}
	os.WriteFile(planFile, edited, 0o600)
	if _, errOut, code := runBerth(t, "--config", cfg, "--bootstrap", bs, "redrive", "show", planFile); code != 1 || !strings.Contains(errOut, "does not match its hash") {
		t.Fatalf("edited plan: exit %d %s", code, errOut)
	}

	// The system of record goes missing: the plan is written but blocked, exit 1.
	os.Rename(db, db+".gone")
	blocked := filepath.Join(dir, "blocked.json")
	out, errOut, code := runBerth(t, "--config", cfg, "--bootstrap", bs, "redrive", "plan", "payments.DLT", "--offsets", "0:0", "--out", blocked, "-o", "json")
	if code != 1 || !strings.Contains(errOut, "blocked") {
		t.Fatalf("unreachable system of record: exit %d %s", code, errOut)
	}
	json.Unmarshal([]byte(out), &p)
	if !p.Blocked || p.Records[0].Reason != "check_failed" || p.Records[0].Included {
		t.Fatalf("blocked plan %+v", p)
	}
}

func TestRedrivePlanRefusesBadInput(t *testing.T) {
	bs, cfg, _ := dlqCluster(t)
	out := filepath.Join(t.TempDir(), "p.json")
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"payments.DLT", "--out", out}, 2, "explicit selection"},
		{[]string{"payments.DLT", "--class", "c-1"}, 2, "--out"},
		{[]string{"payments.DLT", "--offsets", "0:x", "--out", out}, 2, `"0:x"`},
		{[]string{"payments.DLT", "--since", "yesterday", "--out", out}, 2, "--since"},
		{[]string{"payments.DLT", "--offsets", "0:0", "--rate", "0", "--out", out}, 2, "--rate"},
		{[]string{"payments.DLT", "--offsets", "0:0", "--key", "/nonexistent/key", "--out", out}, 2, "--key"},
		{[]string{"payments.DLT", "--class", "c-nope", "--out", out}, 2, "c-nope"},
		{[]string{"payments.DLT", "--offsets", "0:77", "--out", out}, 2, "0:77"},
	}
	for _, c := range cases {
		args := append([]string{"--config", cfg, "--bootstrap", bs, "redrive", "plan"}, c.args...)
		_, errOut, code := runBerth(t, args...)
		if code != c.code || !strings.Contains(errOut, c.msg) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d %q, want exit %d naming %s", c.args, code, errOut, c.code, c.msg)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a refused plan left a file")
	}
}

func TestRedrivePlanInReadOnlyContextIsNotStored(t *testing.T) {
	bs, cfg, _ := dlqCluster(t)
	out := filepath.Join(t.TempDir(), "p.json")
	var p planJSON
	dlqJSON(t, &p, "--config", cfg, "--bootstrap", bs, "--read-only", "redrive", "plan", "payments.DLT", "--offsets", "0:0", "--out", out, "-o", "json")
	if p.Stored || !strings.Contains(p.StoreNote, "read-only") {
		t.Fatalf("read-only plan: %+v", p)
	}
	if _, _, code := runBerth(t, "--config", cfg, "--bootstrap", bs, "redrive", "show", p.Hash[:12]); code != 1 {
		t.Fatalf("a read-only plan reached the store (exit %d)", code)
	}
}
