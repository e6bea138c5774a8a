package kafka

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/ssh"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

func testPlan(dlq string, created time.Time) redrive.Plan {
	return redrive.Plan{
		Version: redrive.PlanVersion, Cluster: "test", DLQ: dlq, Selection: redrive.Selection{Classes: []string{"c-1"}},
		Rate: 10, BatchSize: 5, Author: "alice", CreatedAt: created,
		Records: []redrive.PlanRecord{{Partition: 0, Offset: 1, Digest: redrive.Record{Value: []byte("e1")}.Digest(), Target: "payments", Verdict: redrive.Verdict{Included: true}}},
	}
}

func signer(t *testing.T) ssh.Signer {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPlanStoreIsSharedBetweenClientsAndSignaturesDoNotTouchThePlan(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	alice := NewPlanStore(dialCluster(t, kc).Client())
	bob := NewPlanStore(dialCluster(t, kc).Client()) // another operator's terminal

	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	f := redrive.NewFile(testPlan("payments.DLT", t0))
	authorSig, err := approval.Sign(approval.Subject{PlanHash: f.Hash, Cluster: f.Plan.Cluster}, signer(t), approval.RoleAuthor, t0)
	if err != nil {
		t.Fatal(err)
	}
	f.Signatures = append(f.Signatures, authorSig)
	if err := alice.PutPlan(tctx(t), f); err != nil {
		t.Fatal(err)
	}
	older := redrive.NewFile(testPlan("shipments.DLT", t0.Add(-time.Hour)))
	if err := alice.PutPlan(tctx(t), older); err != nil {
		t.Fatal(err)
	}

	// Two approvers sign concurrently: both signatures survive.
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			sig, err := approval.Sign(approval.Subject{PlanHash: f.Hash, Cluster: f.Plan.Cluster}, signer(t), approval.RoleApproval, t0)
			if err == nil {
				err = bob.AddSignature(context.Background(), f.Hash, sig)
			}
			errs <- err
		}()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	plans, err := bob.Plans(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || plans[0].Hash != f.Hash || plans[1].Hash != older.Hash {
		t.Fatalf("plans %d, newest first expected", len(plans))
	}
	got := plans[0]
	if got.Plan.Hash() != f.Hash || got.Author() == nil || len(got.Approvals()) != 2 {
		t.Fatalf("stored plan: author %v, %d approvals", got.Author(), len(got.Approvals()))
	}
	one, err := alice.Plan(tctx(t), f.Hash[:10])
	if err != nil || one.Hash != f.Hash {
		t.Fatalf("lookup by prefix: %v", err)
	}
	if _, err := alice.Plan(tctx(t), "deadbeefdead"); err == nil || !strings.Contains(err.Error(), "not in the plan store") {
		t.Fatalf("unknown plan: %v", err)
	}
	// A signature over another plan is refused before it is written.
	other, _ := approval.Sign(approval.Subject{PlanHash: older.Hash, Cluster: older.Plan.Cluster}, signer(t), approval.RoleApproval, t0)
	if err := bob.AddSignature(tctx(t), f.Hash, other); err == nil {
		t.Fatal("a signature over another plan was stored")
	}
	// A plan whose content was altered is refused.
	bad := f
	bad.Plan.Rate = 1000
	if err := alice.PutPlan(tctx(t), bad); !errors.Is(err, redrive.ErrHashMismatch) {
		t.Fatalf("altered plan: %v", err)
	}
}

// TestBadStoreRecordsAreSkippedAndReported: a plan whose body was rewritten,
// a record that is not JSON and a signature that does not decode are each
// skipped and reported by offset; every other plan is still listed and
// loadable, and loading the bad one names its offset.
func TestBadStoreRecordsAreSkippedAndReported(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	good := redrive.NewFile(testPlan("payments.DLT", time.Now()))
	victim := redrive.NewFile(testPlan("shipments.DLT", time.Now()))
	for _, f := range []redrive.File{good, victim} {
		if err := store.PutPlan(tctx(t), f); err != nil {
			t.Fatal(err)
		}
	}
	// Someone writes a different plan body under the victim's key, a record
	// that is not JSON, and a broken signature.
	other := victim.Plan
	other.Rate = 999
	body, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	tampered := `{"hash":"` + victim.Hash + `","plan":` + string(body) + `}`
	kc.Produce(t, &kgo.Record{Topic: PlanTopic, Key: []byte("plan/" + victim.Hash), Value: []byte(tampered)})
	kc.Produce(t, &kgo.Record{Topic: PlanTopic, Key: []byte("plan/deadbeefdeadbeef"), Value: []byte("\x1b[31mnot json")})
	kc.Produce(t, &kgo.Record{Topic: PlanTopic, Key: []byte("sig/" + good.Hash + "/approval/x"), Value: []byte("{")})

	l, err := store.List(tctx(t))
	if err != nil {
		t.Fatalf("one bad record blocks the store: %v", err)
	}
	if len(l.Plans) != 1 || l.Plans[0].Hash != good.Hash {
		t.Fatalf("listed %d plans, want only the good one", len(l.Plans))
	}
	if len(l.Problems) != 3 {
		t.Fatalf("problems %+v, want 3", l.Problems)
	}
	for _, p := range l.Problems {
		if p.Topic != PlanTopic || p.Offset < 2 || p.Error == "" {
			t.Fatalf("problem not located: %+v", p)
		}
	}
	if f, err := store.Plan(tctx(t), good.Hash[:8]); err != nil || f.Hash != good.Hash {
		t.Fatalf("good plan beside bad records: %v", err)
	}
	_, err = store.Plan(tctx(t), victim.Hash[:12])
	if !errors.Is(err, redrive.ErrHashMismatch) || !strings.Contains(err.Error(), "offset 2") {
		t.Fatalf("tampered plan: %v", err)
	}
}

// TestLargePlanIsChunkedAndFetchedAlone: a plan many times a broker's
// message size is stored (compressed, in chunks) and read back intact; a
// chunk rewritten under its key is refused, naming the chunk, and listing
// reports it without hiding the other plans.
func TestLargePlanIsChunkedAndFetchedAlone(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	big := testPlan("payments.DLT", time.Now())
	big.Records = nil
	// A v2 plan row is about 63 bytes (location, digest, target, verdict):
	// 40,000 rows are over twice a broker's default message size.
	for i := 0; i < 40000; i++ {
		big.Records = append(big.Records, redrive.PlanRecord{Partition: int32(i % 3), Offset: int64(i), Target: "payments",
			Digest: redrive.Record{Value: []byte(strconv.Itoa(i))}.Digest(), Verdict: redrive.Verdict{Included: true}})
	}
	f := redrive.NewFile(big)
	raw, _ := f.Encode()
	if len(raw) < 2<<20 {
		t.Fatalf("test plan is only %d bytes", len(raw))
	}
	if err := store.PutPlan(tctx(t), f); err != nil {
		t.Fatalf("store a %d-byte plan: %v", len(raw), err)
	}
	small := redrive.NewFile(testPlan("shipments.DLT", time.Now()))
	if err := store.PutPlan(tctx(t), small); err != nil {
		t.Fatal(err)
	}
	got, err := store.Plan(tctx(t), f.Hash[:8])
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != f.Hash || len(got.Plan.Records) != len(big.Records) {
		t.Fatalf("read back %d records", len(got.Plan.Records))
	}

	// Rewrite the first chunk under its own key.
	kc.Produce(t, &kgo.Record{Topic: PlanChunkTopic, Key: []byte("chunk/" + f.Hash + "/0"), Value: []byte("forged")})
	// The manifest still points at the original offset, which compaction
	// has not removed here; point it at the forged record instead.
	ix, err := store.index(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	m := *ix.plans[f.Hash].sp.Manifest
	if len(m.Chunks) < 2 {
		t.Fatalf("a %d-byte plan was stored in %d chunk(s)", len(raw), len(m.Chunks))
	}
	m.Chunks = append([]chunkRef(nil), m.Chunks...)
	end, err := kc.Admin.ListEndOffsets(tctx(t), PlanChunkTopic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := end.Lookup(PlanChunkTopic, 0)
	m.Chunks[0].Offset = o.Offset - 1
	v, _ := json.Marshal(storedPlan{Hash: f.Hash, Manifest: &m})
	kc.Produce(t, &kgo.Record{Topic: PlanTopic, Key: []byte("plan/" + f.Hash), Value: v})
	if _, err := store.Plan(tctx(t), f.Hash[:8]); err == nil || !strings.Contains(err.Error(), "chunk 0") {
		t.Fatalf("forged chunk: %v", err)
	}
	l, err := store.List(tctx(t))
	if err != nil || len(l.Plans) != 1 || l.Plans[0].Hash != small.Hash || len(l.Problems) != 1 {
		t.Fatalf("listing beside a forged chunk: %v %d plans %+v", err, len(l.Plans), l.Problems)
	}
}

func TestLedgerRoundTripAndEmptyWhenNeverWritten(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	entries, err := store.Ledger(tctx(t))
	if err != nil || len(entries) != 0 {
		t.Fatalf("fresh cluster ledger: %v %v", entries, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	in := []redrive.LedgerEntry{
		{DLQ: "payments.DLT", Partition: 0, Offset: 4, EventID: "e4", Action: redrive.LedgerRedriven, Plan: "abc", Target: "payments", At: now},
		{DLQ: "payments.DLT", Partition: 1, Offset: 2, Action: redrive.LedgerSettled, Plan: "abc", At: now},
	}
	if err := store.AppendLedger(tctx(t), in...); err != nil {
		t.Fatal(err)
	}
	// Written again (a retried batch): still one entry per record.
	if err := store.AppendLedger(tctx(t), in[0]); err != nil {
		t.Fatal(err)
	}
	entries, err = store.Ledger(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].EventID != "e4" || !entries[0].At.Equal(now) || entries[1].Action != redrive.LedgerSettled {
		t.Fatalf("ledger %+v", entries)
	}
	ix := redrive.NewLedgerIndex("payments.DLT", entries)
	if !ix.Done(redrive.Coord{Partition: 0, Offset: 4}) || !ix.Done(redrive.Coord{Partition: 1, Offset: 2}) {
		t.Fatal("ledger index misses entries")
	}
}

func TestLedgerSkipsAbortedTransactions(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	if err := store.EnsureLedger(tctx(t)); err != nil {
		t.Fatal(err)
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.TransactionalID("berth-test-ledger"), ClassicTransactions())
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	write := func(off int64, commit bool) {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rs, _ := LedgerRecords(redrive.LedgerEntry{DLQ: "d.DLT", Offset: off, EventID: "e" + strconv.FormatInt(off, 10), Action: redrive.LedgerRedriven})
		if err := txn.ProduceSync(tctx(t), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(tctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	write(1, true)
	write(2, false) // aborted: never redriven
	write(3, true)
	entries, err := store.Ledger(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Offset != 1 || entries[1].Offset != 3 {
		t.Fatalf("ledger after an aborted transaction: %+v", entries)
	}
	// The look-ups see what the whole read sees.
	got, err := store.Lookup(tctx(t), "d.DLT", []string{"0:1", "0:2", "0:3"})
	if err != nil || len(got) != 2 || got[0].Offset != 1 || got[1].Offset != 3 {
		t.Fatalf("lookup after an aborted transaction: %+v %v", got, err)
	}
	got, err = store.LookupEvents(tctx(t), []string{"e1", "e2"})
	if err != nil || len(got) != 1 || got[0].EventID != "e1" {
		t.Fatalf("event lookup after an aborted transaction: %+v %v", got, err)
	}
}

// A hash prefix two stored plans share is refused in the words RabbitMQ's
// store uses (backends.AmbiguousPlan); one more digit finds the plan.
func TestAmbiguousPlanPrefixAsksForMoreDigits(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	good := redrive.NewFile(testPlan("payments.DLT", time.Now()))
	if err := store.PutPlan(tctx(t), good); err != nil {
		t.Fatal(err)
	}
	// A record under a key sharing the good plan's first 8 digits only.
	twin := good.Hash[:8] + strings.Repeat("0", 56)
	if twin[8] == good.Hash[8] {
		twin = good.Hash[:8] + strings.Repeat("1", 56)
	}
	kc.Produce(t, &kgo.Record{Topic: PlanTopic, Key: []byte("plan/" + twin), Value: []byte("{}")})
	_, err := store.Plan(tctx(t), good.Hash[:8])
	if want := "plan " + good.Hash[:8] + ": ambiguous, 2 plans match: give more digits"; err == nil || err.Error() != want || !errors.Is(err, backends.ErrAmbiguousPlan) {
		t.Fatalf("shared prefix: %v; want %q", err, want)
	}
	if f, err := store.Plan(tctx(t), good.Hash[:9]); err != nil || f.Hash != good.Hash {
		t.Fatalf("one more digit: %v", err)
	}
}
