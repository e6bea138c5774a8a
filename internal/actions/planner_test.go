package actions

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fixture is a payments topic and its DLT in a bundled broker, laid out so
// each check has a record to find:
//
//	DLT 0: key order-0, pay-0 captured in the system of record -> effect_committed
//	DLT 1: key order-1, pay-1 not captured                     -> included
//	DLT 2: key order-2, no idempotency key                     -> missing_idempotency_key
//	DLT 3: key order-1, same event id as DLT 1                 -> duplicate
//	DLT 4: key order-4, redriven twice before (limit 2)        -> loop_limit
//	DLT 5: key order-5, a newer order-5 event follows it       -> ordering_hazard
//	DLT 6: key order-6, already in the ledger                  -> already_redriven
type fixture struct {
	kc  *kafkatest.Cluster
	cl  *kafka.Cluster
	cfg *config.Config
}

func dltHeaders(origOffset int64, extra ...kgo.RecordHeader) []kgo.RecordHeader {
	p := make([]byte, 4)
	o := make([]byte, 8)
	binary.BigEndian.PutUint64(o, uint64(origOffset))
	return append([]kgo.RecordHeader{
		{Key: "kafka_dlt-original-topic", Value: []byte("payments")},
		{Key: "kafka_dlt-original-partition", Value: p},
		{Key: "kafka_dlt-original-offset", Value: o},
		{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte("java.net.SocketTimeoutException")},
		{Key: "kafka_dlt-exception-message", Value: []byte(fmt.Sprintf("PSP read timed out after %d ms", 3000+origOffset))},
	}, extra...)
}

// storeOf is the *kafka.PlanStore behind a planner NewPlanner made: the
// tests write and read its ledger directly.
func storeOf(p *Planner) *kafka.PlanStore { return p.Store.(kafkaStore).PlanStore }

func newFixture(t *testing.T, sor *config.SystemOfRecord) *fixture {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "payments", 1, 1, nil)
	kc.CreateTopic(t, "payments.DLT", 1, 1, nil)
	pay := func(i int, event, key, order string) []byte {
		if key == "" {
			return []byte(fmt.Sprintf(`{"eventId":"%s","orderId":"%s","amountCents":%d}`, event, order, 100*i))
		}
		return []byte(fmt.Sprintf(`{"eventId":"%s","idempotencyKey":"%s","orderId":"%s","amountCents":%d}`, event, key, order, 100*i))
	}
	// The original topic: offsets 0..6 are the events that failed, then a
	// newer event for order-5 at offset 7 and unrelated traffic.
	var orig []*kgo.Record
	for i := 0; i < 7; i++ {
		orig = append(orig, &kgo.Record{Topic: "payments", Key: []byte(fmt.Sprintf("order-%d", i)), Value: []byte("x")})
	}
	orig = append(orig, &kgo.Record{Topic: "payments", Key: []byte("order-5"), Value: []byte("refund")})
	orig = append(orig, &kgo.Record{Topic: "payments", Key: []byte("order-99"), Value: []byte("x")})
	kc.Produce(t, orig...)
	ts := time.Now().Add(-time.Hour)
	dlt := []*kgo.Record{
		{Key: []byte("order-0"), Value: pay(0, "ev-0", "pay-0", "order-0"), Headers: dltHeaders(0)},
		{Key: []byte("order-1"), Value: pay(1, "ev-1", "pay-1", "order-1"), Headers: dltHeaders(1)},
		{Key: []byte("order-2"), Value: pay(2, "ev-2", "", "order-2"), Headers: dltHeaders(2)},
		{Key: []byte("order-1"), Value: pay(1, "ev-1", "pay-1", "order-1"), Headers: dltHeaders(1)},
		{Key: []byte("order-4"), Value: pay(4, "ev-4", "pay-4", "order-4"), Headers: dltHeaders(4, kgo.RecordHeader{Key: redrive.HeaderAttempt, Value: []byte("2")})},
		{Key: []byte("order-5"), Value: pay(5, "ev-5", "pay-5", "order-5"), Headers: dltHeaders(5)},
		{Key: []byte("order-6"), Value: pay(6, "ev-6", "pay-6", "order-6"), Headers: dltHeaders(6)},
	}
	for _, r := range dlt {
		r.Topic, r.Timestamp = "payments.DLT", ts
	}
	kc.Produce(t, dlt...)

	c, err := kafka.Dial(tctx(t), kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	t.Cleanup(cl.Close)
	if err := kafka.NewPlanStore(c).AppendLedger(tctx(t), redrive.LedgerEntry{DLQ: "payments.DLT", Partition: 0, Offset: 6, EventID: "ev-6", Action: redrive.LedgerRedriven, Plan: "earlier", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Redrive.Policies = []config.RedrivePolicy{{
		Match: "payments*.DLT", IdempotencyKey: "json:idempotencyKey", RequireIdempotencyKey: true,
		SystemOfRecord: sor, Review: "required", MaxRedrives: 2,
	}}
	return &fixture{kc: kc, cl: cl, cfg: cfg}
}

func (f *fixture) planner() *Planner {
	p := NewPlanner(f.cl, f.cfg)
	p.Now = func() time.Time { return time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC) }
	return p
}

func classOf(t *testing.T, p *Planner) string {
	l, err := p.Load(tctx(t), "payments.DLT", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Classes) != 1 {
		t.Fatalf("classes %+v, want one (timeouts with normalised millis)", l.Classes)
	}
	if l.Classes[0].Count != 6 || !l.Classes[0].Transient {
		t.Fatalf("class %+v: want 6 pending transient records (one is already redriven)", l.Classes[0])
	}
	return l.Classes[0].ID
}

func wantReasons(t *testing.T, f redrive.File, want []redrive.Reason) {
	t.Helper()
	var got []redrive.Reason
	for _, r := range f.Plan.Records {
		got = append(got, r.Reason)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		for _, r := range f.Plan.Records {
			t.Logf("%d:%d %v %s %s", r.Partition, r.Offset, r.Included, r.Reason, r.Detail)
		}
		t.Fatalf("reasons %v, want %v", got, want)
	}
}

var allChecks = []redrive.Reason{
	redrive.ReasonEffectCommitted, "", redrive.ReasonMissingKey, redrive.ReasonDuplicate,
	redrive.ReasonLoopLimit, redrive.ReasonOrderingHazard, redrive.ReasonAlreadyRedriven,
}

func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("BERTH_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(c, dsn)
	if err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") != "" {
			t.Fatalf("PostgreSQL unreachable: %v", err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	conn.Close(c)
	return dsn
}

func TestEveryCheckAgainstTheBundledBrokerAndPostgres(t *testing.T) {
	dsn := postgresDSN(t)
	table := fmt.Sprintf("payments_planner_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(tctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(tctx(t), "create table "+table+" (idempotency_key text primary key, status text)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "drop table "+table) })
	conn.Exec(tctx(t), "insert into "+table+" values ('pay-0','captured'), ('pay-1','pending')")

	f := newFixture(t, &config.SystemOfRecord{Driver: "postgres", DSN: dsn,
		Query: "select 1 from " + table + " where idempotency_key = $1 and status = 'captured'"})
	p := f.planner()
	var progress []kafka.ScanProgress
	p.Progress = func(sp kafka.ScanProgress) { progress = append(progress, sp) }
	file, err := p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Classes: []string{classOf(t, p)}, Author: "alice@test"})
	if err != nil {
		t.Fatal(err)
	}
	wantReasons(t, file, allChecks)
	if n := file.Plan.Records[5].NewerOffset; n == nil || *n != 7 {
		t.Fatalf("ordering hazard should name the newer offset 7: %+v", file.Plan.Records[5])
	}
	if len(progress) == 0 || progress[len(progress)-1].Read != progress[len(progress)-1].Total {
		t.Fatalf("scan progress %+v", progress)
	}
	if blocked, _ := file.Plan.Blocked(); blocked {
		t.Fatal("a plan whose checks all ran is not blocked")
	}
	tot := file.Plan.Totals()
	if tot.Selected != 7 || tot.Included != 1 || tot.ByReason[redrive.ReasonEffectCommitted] != 1 {
		t.Fatalf("totals %+v", tot)
	}
	if file.Plan.Records[1].Target != "payments" || file.Plan.Policy.SystemOfRecord == "" || strings.Contains(string(mustEncode(t, file)), "postgres://") {
		t.Fatalf("plan target/policy wrong or the DSN leaked")
	}

	// The system of record changes (pay-1 captured meanwhile): checking
	// again before execution excludes it.
	conn.Exec(tctx(t), "update "+table+" set status = 'captured' where idempotency_key = 'pay-1'")
	vs, err := p.Check(tctx(t), file.Plan, file.Plan.Candidates(), file.Plan.Policy)
	if err != nil {
		t.Fatal(err)
	}
	if vs[1].Reason != redrive.ReasonEffectCommitted {
		t.Fatalf("re-check: %+v", vs[1])
	}
}

func mustEncode(t *testing.T, f redrive.File) []byte {
	b, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEveryCheckAgainstTheBundledBrokerAndSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payments.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`create table payments(idempotency_key TEXT PRIMARY KEY, order_id TEXT, amount_cents INTEGER, status TEXT, captured_at TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Exec(`insert into payments values ('pay-0','order-0',0,'captured','2026-11-29T08:00:00Z')`)
	db.Close()
	f := newFixture(t, &config.SystemOfRecord{Driver: "sqlite", DSN: path,
		Query: "select 1 from payments where idempotency_key = ? and status = 'captured'"})
	p := f.planner()
	file, err := p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Classes: []string{classOf(t, p)}})
	if err != nil {
		t.Fatal(err)
	}
	wantReasons(t, file, allChecks)

	// Allowing ordering hazards includes the record but still names the newer offset.
	file, err = p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Offsets: []redrive.Coord{{Partition: 0, Offset: 5}}, AllowHazards: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := file.Plan.Records[0]; !r.Included || r.NewerOffset == nil {
		t.Fatalf("allowed hazard: %+v", r)
	}
}

func TestUnreachableSystemOfRecordBlocksThePlan(t *testing.T) {
	f := newFixture(t, &config.SystemOfRecord{Driver: "postgres", DSN: "postgres://postgres:hunter2@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
		Query: "select 1 from payments where idempotency_key = $1"})
	p := f.planner()
	file, err := p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Classes: []string{classOf(t, p)}})
	if err != nil {
		t.Fatal(err)
	}
	blocked, why := file.Plan.Blocked()
	if !blocked || !strings.Contains(why, "unreachable") || strings.Contains(why, "hunter2") {
		t.Fatalf("blocked=%v why=%q", blocked, why)
	}
	for _, r := range file.Plan.Records {
		if r.Included {
			t.Fatalf("record %d included although its effect could not be checked", r.Offset)
		}
		if r.IdempotencyKey != "" && r.Reason != redrive.ReasonCheckFailed && r.Reason != redrive.ReasonAlreadyRedriven {
			t.Fatalf("record %d: %s, want check_failed", r.Offset, r.Reason)
		}
	}
	// A missing SQLite file blocks the same way (and is not created).
	missing := filepath.Join(t.TempDir(), "payments.db")
	f.cfg.Redrive.Policies[0].SystemOfRecord = &config.SystemOfRecord{Driver: "sqlite", DSN: missing, Query: "select 1 where ? = ''"}
	file, err = p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Offsets: []redrive.Coord{{Partition: 0, Offset: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := file.Plan.Records[0]; r.Reason != redrive.ReasonCheckFailed {
		t.Fatalf("missing sqlite file: %+v", r)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("the missing system of record was created")
	}
}

func TestPlanSelectionIsExplicit(t *testing.T) {
	f := newFixture(t, nil)
	p := f.planner()
	if _, err := p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT"}); !errors.Is(err, ErrNoSelector) || !errors.Is(err, ErrBadRequest) {
		t.Fatalf("no selector: %v", err)
	}
	if _, err := p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Classes: []string{"c-nope"}}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "c-nope") {
		t.Fatalf("unknown class: %v", err)
	}
	if _, err := p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Offsets: []redrive.Coord{{Partition: 0, Offset: 99}}}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "0:99") {
		t.Fatalf("missing offset: %v", err)
	}
	// A key filter alone selects.
	file, err := p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Key: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Plan.Records) != 2 || file.Plan.Records[0].Offset != 1 || file.Plan.Records[1].Reason != redrive.ReasonDuplicate {
		t.Fatalf("key selection: %+v", file.Plan.Records)
	}
	// Without a system of record, a required key is still required.
	if file.Plan.Policy.RequireIdempotencyKey != true {
		t.Fatal("policy snapshot lost require_idempotency_key")
	}
}

func TestListSummarisesDepthAgeAndClasses(t *testing.T) {
	f := newFixture(t, nil)
	f.kc.CreateTopic(t, "shipment-jobs-dlq", 1, 1, nil)
	p := f.planner()
	p.Now = time.Now
	list, err := p.List(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "payments.DLT" {
		t.Fatalf("list %+v", list)
	}
	d := list[0]
	if d.Records != 7 || d.Depth != 6 || d.Classes != 1 || fmt.Sprint(d.Originals) != "[payments]" || d.OldestAge < 59*time.Minute || d.Sampled {
		t.Fatalf("summary %+v", d)
	}
	if e := list[1]; e.Depth != 0 || e.OldestAt != nil {
		t.Fatalf("empty dlq %+v", e)
	}
}

// ledgerReads counts the ledger records a client's consumers fetch.
type ledgerReads struct{ n atomic.Int64 }

func (l *ledgerReads) OnFetchRecordBuffered(r *kgo.Record) {
	if r.Topic == kafka.LedgerTopic {
		l.n.Add(1)
	}
}

// TestListReadsTheLedgerForTheRecordsItRead: after a long history of
// redrives from another DLQ, listing a DLQ of seven records reads only the
// ledger partitions those seven records' keys fall in, not the whole
// ledger, and still finds the one already redriven.
func TestListReadsTheLedgerForTheRecordsItRead(t *testing.T) {
	f := newFixture(t, nil)
	var history []redrive.LedgerEntry
	for i := 0; i < 4000; i++ {
		history = append(history, redrive.LedgerEntry{DLQ: "orders.DLT", Partition: int32(i % 3), Offset: int64(i), EventID: fmt.Sprintf("old-%d", i), Action: redrive.LedgerRedriven, Plan: "old", At: time.Now()})
	}
	if err := kafka.NewPlanStore(f.cl.Client()).AppendLedger(tctx(t), history...); err != nil {
		t.Fatal(err)
	}
	reads := &ledgerReads{}
	c, err := kafka.Dial(tctx(t), kafka.Options{Bootstrap: f.kc.Addrs, Timeout: 5 * time.Second, Extra: []kgo.Opt{kgo.WithHooks(reads)}})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	t.Cleanup(cl.Close)
	p := NewPlanner(cl, f.cfg)
	list, err := p.List(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Records != 7 || list[0].Depth != 6 {
		t.Fatalf("list %+v: want payments.DLT with 7 records, 6 pending", list)
	}
	// The ledger holds 8,002 records (each redrive also writes an event-id
	// index record) over 16 partitions; a whole read fetches every one.
	if got := reads.n.Load(); got == 0 || got > 4000 {
		t.Fatalf("List read %d ledger records of 8,002: want only those of the partitions the 7 records' keys hash to", got)
	}
}

func TestSelectionOverMoreThanTheReadBoundIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	p := f.planner()
	p.ReadLimit = 3
	offset6 := []redrive.Coord{{Partition: 0, Offset: 6}}
	for _, req := range []PlanRequest{{DLQ: "payments.DLT", Key: "order-1"}, {DLQ: "payments.DLT", Classes: []string{"c-x"}},
		{DLQ: "payments.DLT", All: true, Offsets: offset6}, {DLQ: "payments.DLT", Classes: []string{"c-x"}, Offsets: offset6}} {
		if _, err := p.Plan(tctx(t), req); err == nil || !strings.Contains(err.Error(), "more than the 3 read") {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	// Coordinates are read directly, whatever the bound.
	file, err := p.Plan(tctx(t), PlanRequest{DLQ: "payments.DLT", Offsets: offset6})
	if err != nil || len(file.Plan.Records) != 1 {
		t.Fatalf("offsets beyond the bound: %v", err)
	}
}

// TestOffsetsAloneReadOnlyTheirRecords: a plan of two coordinates near the
// end of a DLQ of 200 records reads from the first of them on (the client
// takes what follows in the same fetch), not the DLQ up to --read.
func TestOffsetsAloneReadOnlyTheirRecords(t *testing.T) {
	f := newFixture(t, nil)
	f.kc.CreateTopic(t, "refunds.DLT", 1, 1, nil)
	for i := 0; i < 200; i++ { // one batch each: a read takes what it asks for
		f.kc.Produce(t, &kgo.Record{Topic: "refunds.DLT", Key: []byte(fmt.Sprintf("order-%d", i)), Value: []byte(fmt.Sprintf(`{"eventId":"rf-%d","idempotencyKey":"rk-%d"}`, i, i)), Headers: dltHeaders(int64(i))})
	}
	reads := &dlqReads{topic: "refunds.DLT"}
	c, err := kafka.Dial(tctx(t), kafka.Options{Bootstrap: f.kc.Addrs, Timeout: 5 * time.Second, Extra: []kgo.Opt{kgo.WithHooks(reads)}})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	t.Cleanup(cl.Close)
	cfg := *f.cfg
	cfg.Redrive.Policies = append([]config.RedrivePolicy{{Match: "refunds.DLT", IdempotencyKey: "json:idempotencyKey", Review: "none"}}, cfg.Redrive.Policies...)
	p := NewPlanner(cl, &cfg)
	file, err := p.Plan(tctx(t), PlanRequest{DLQ: "refunds.DLT", Offsets: []redrive.Coord{{Partition: 0, Offset: 195}, {Partition: 0, Offset: 190}}, Target: "refunds"})
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Plan.Records) != 2 || file.Plan.Records[0].Offset != 190 || file.Plan.Records[1].Offset != 195 {
		t.Fatalf("records %+v, want 0:190 and 0:195", file.Plan.Records)
	}
	if got := reads.n.Load(); got > 10 {
		t.Fatalf("the plan read %d DLQ records: want the 10 from 0:190 on, not the whole DLQ (200)", got)
	}
}

// dlqReads counts the records of one topic a client's consumers fetch.
type dlqReads struct {
	topic string
	n     atomic.Int64
}

func (d *dlqReads) OnFetchRecordBuffered(r *kgo.Record) {
	if r.Topic == d.topic {
		d.n.Add(1)
	}
}

// TestPickedRecordsComeOutInDLQOrderOncePerRecord: records streamed from
// interleaved partitions (more than a block of them), plus --offsets reads
// that repeat some and arrive out of order, come out sorted by partition
// and offset, each record once.
func TestPickedRecordsComeOutInDLQOrderOncePerRecord(t *testing.T) {
	var p pickedRecords
	const per = pickedBlock + 10
	for i := 0; i < per; i++ {
		for _, part := range []int32{2, 0, 1} {
			p.add(redrive.PlanRecord{Partition: part, Offset: int64(i)})
		}
	}
	p.add(redrive.PlanRecord{Partition: 0, Offset: 7})                // also named by --offsets
	p.add(redrive.PlanRecord{Partition: 3, Offset: 9})                // only named by --offsets
	p.add(redrive.PlanRecord{Partition: 3, Offset: 1})                // out of order
	p.add(redrive.PlanRecord{Partition: 1, Offset: int64(per) + 100}) // past the stream
	got := p.sorted()
	if len(got) != 3*per+3 {
		t.Fatalf("%d records, want %d", len(got), 3*per+3)
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if a.Partition > b.Partition || (a.Partition == b.Partition && a.Offset >= b.Offset) {
			t.Fatalf("records %d and %d out of order or repeated: %v %v", i-1, i, a.Coord(), b.Coord())
		}
	}
	if last := got[len(got)-1]; last.Coord() != (redrive.Coord{Partition: 3, Offset: 9}) {
		t.Fatalf("last record %v, want 3:9", last.Coord())
	}
}

// TestClassesStreamedAreTheClassesLoaded: the streaming classification
// `dlq classes` uses gives exactly the classes Load gives (counts, first and
// last seen, verdicts), also when a class's first record was already
// redriven, so its verdict must be judged on a later record, and when the
// read stops at a bound.
func TestClassesStreamedAreTheClassesLoaded(t *testing.T) {
	f := newFixture(t, nil)
	// A second class whose first record was redriven: its verdict comes
	// from the next one (the first says 400, permanent; the next 503, transient).
	var recs []*kgo.Record
	for i, msg := range []string{"PSP answered HTTP 400", "PSP answered HTTP 503", "PSP answered HTTP 504"} {
		recs = append(recs, &kgo.Record{Topic: "payments.DLT", Key: []byte(fmt.Sprintf("order-%d", 10+i)), Value: []byte(`{"eventId":"ev-x"}`),
			Headers: dltHeaders(int64(10+i), kgo.RecordHeader{Key: "kafka_dlt-exception-fqcn", Value: []byte("com.harborcart.PspException")},
				kgo.RecordHeader{Key: "kafka_dlt-exception-message", Value: []byte(msg)})})
	}
	f.kc.Produce(t, recs...)
	p := f.planner()
	if err := storeOf(p).AppendLedger(tctx(t), redrive.LedgerEntry{DLQ: "payments.DLT", Partition: 0, Offset: 7, Action: redrive.LedgerSettled, Plan: "by-hand", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, 8, 9} {
		l, err := p.Load(tctx(t), "payments.DLT", limit)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Classes(tctx(t), "payments.DLT", limit)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", got.Classes) != fmt.Sprintf("%+v", l.Classes) || got.Read != len(l.Records) || got.Total != l.Total || got.Complete != l.Complete {
			t.Fatalf("limit %d: streamed %+v (read %d of %d, complete %v)\nloaded   %+v (read %d of %d, complete %v)",
				limit, got.Classes, got.Read, got.Total, got.Complete, l.Classes, len(l.Records), l.Total, l.Complete)
		}
		if limit == 0 && (len(got.Classes) != 2 || got.Classes[1].Verdict != redrive.VerdictTransient) {
			t.Fatalf("classes %+v: want the PSP class judged on its first pending record (503: transient)", got.Classes)
		}
		// dlq list streams the same way: its summary is Summarise's over
		// the records loaded.
		p.ReadLimit = limit
		list, err := p.List(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		want := redrive.Summarise(redrive.DLQ{Name: "payments.DLT"}, l.Total, l.Records, int64(len(l.Records)), l.Ledger, l.Complete, p.now())
		if len(list) != 1 || fmt.Sprintf("%+v", list[0]) != fmt.Sprintf("%+v", want) {
			t.Fatalf("limit %d: list %+v, want %+v", limit, list, want)
		}
	}
}

// TestShowKeepsTheFirstRecordsItShows: `dlq show` streams the DLQ and keeps
// only the records it prints: the first --limit of the classes asked, in
// DLQ order, with their ledger state — what filtering Load's records gives
// — whatever order the partitions' records arrive in.
func TestShowKeepsTheFirstRecordsItShows(t *testing.T) {
	f := newFixture(t, nil)
	f.kc.CreateTopic(t, "orders.DLT", 3, 1, nil)
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		msg := "PSP answered HTTP 503"
		if i%4 == 0 {
			msg = "order failed validation"
		}
		recs = append(recs, &kgo.Record{Topic: "orders.DLT", Partition: int32(i % 3), Key: []byte(fmt.Sprintf("order-%d", i)), Value: []byte(fmt.Sprintf(`{"eventId":"ev-%d"}`, i)),
			Headers: dltHeaders(int64(i), kgo.RecordHeader{Key: "kafka_dlt-exception-message", Value: []byte(msg)})})
	}
	f.kc.Produce(t, recs...)
	p := f.planner()
	if err := storeOf(p).AppendLedger(tctx(t), redrive.LedgerEntry{DLQ: "orders.DLT", Partition: 1, Offset: 2, Action: redrive.LedgerSettled, Plan: "by-hand", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l, err := p.Load(tctx(t), "orders.DLT", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Classes) != 2 {
		t.Fatalf("classes %+v, want 2", l.Classes)
	}
	for _, classes := range [][]string{nil, {l.Classes[1].ID}} {
		for _, limit := range []int{1, 5, 14, 100} {
			var want []string
			for _, r := range l.Records {
				if len(want) < limit && (classes == nil || r.Class == classes[0]) {
					want = append(want, fmt.Sprintf("%s %s done=%v", r.Coord(), r.EventID, l.Ledger.Done(r.Coord())))
				}
			}
			sh, err := p.Show(tctx(t), "orders.DLT", 0, classes, limit)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range sh.Records {
				got = append(got, fmt.Sprintf("%s %s done=%v", r.Coord(), r.EventID, sh.Ledger.Done(r.Coord())))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || len(sh.Known) != 2 || sh.Total != 30 || !sh.Complete {
				t.Fatalf("classes %v limit %d: shown %v, want %v (known %v, total %d)", classes, limit, got, want, sh.Known, sh.Total)
			}
		}
	}
}

// TestFirstRecordsAreTheLowestWhateverTheOrder: partitions interleave as a
// DLQ streams past; what dlq show keeps is the lowest coordinates, not the
// first to arrive.
func TestFirstRecordsAreTheLowestWhateverTheOrder(t *testing.T) {
	var coords []redrive.Coord
	for part := int32(0); part < 3; part++ {
		for off := int64(0); off < 40; off++ {
			coords = append(coords, redrive.Coord{Partition: part, Offset: off})
		}
	}
	// In reverse: partition 2's last record first, 0:0 last.
	for i, j := 0, len(coords)-1; i < j; i, j = i+1, j-1 {
		coords[i], coords[j] = coords[j], coords[i]
	}
	f := firstRecords{limit: 45}
	for _, c := range coords {
		f.offer(c, func() redrive.Parsed {
			return redrive.Parsed{Record: redrive.Record{Partition: c.Partition, Offset: c.Offset}}
		})
	}
	got := f.sorted()
	if len(got) != 45 || got[0].Coord() != (redrive.Coord{Partition: 0, Offset: 0}) || got[39].Coord() != (redrive.Coord{Partition: 0, Offset: 39}) || got[44].Coord() != (redrive.Coord{Partition: 1, Offset: 4}) {
		t.Fatalf("kept %d records, first %v, 40th %v, last %v: want 0:0..0:39 then 1:0..1:4", len(got), got[0].Coord(), got[39].Coord(), got[len(got)-1].Coord())
	}
}
