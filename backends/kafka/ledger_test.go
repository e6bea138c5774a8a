package kafka

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

// TestLedgerLookupFindsExactlyWhatIsAsked: over a ledger of 3,000 entries
// in two DLQs, a look-up by coordinates returns exactly the entries of the
// records asked about (redriven or settled, latest value), and a look-up by
// event id finds an event redriven from another DLQ; nothing else comes
// back.
func TestLedgerLookupFindsExactlyWhatIsAsked(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	if n, err := store.Lookup(tctx(t), "pay.DLT", []string{"0:1"}); err != nil || len(n) != 0 {
		t.Fatalf("lookup before any ledger: %v %v", n, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var entries []redrive.LedgerEntry
	for i := 0; i < 3000; i++ {
		dlq := "pay.DLT"
		if i%3 == 0 {
			dlq = "pay-retry.DLT"
		}
		e := redrive.LedgerEntry{DLQ: dlq, Partition: int32(i % 2), Offset: int64(i), EventID: "evt-" + strconv.Itoa(i), Action: redrive.LedgerRedriven, Plan: "p1", Target: "pay", At: now}
		if i%10 == 7 {
			e.Action, e.EventID = redrive.LedgerSettled, ""
		}
		entries = append(entries, e)
	}
	if err := store.AppendLedger(tctx(t), entries...); err != nil {
		t.Fatal(err)
	}
	n, err := store.ledgerPartitionCount(tctx(t))
	if err != nil || n != LedgerPartitions {
		t.Fatalf("a new ledger has %d partitions (%v)", n, err)
	}
	// 1:1 pay.DLT redriven, 1:7 settled, 0:3 is in the other DLQ, 0:4000 was never redriven.
	got, err := store.Lookup(tctx(t), "pay.DLT", []string{"1:1", "1:7", "0:3", "0:4000"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Offset != 1 || got[0].EventID != "evt-1" || got[1].Offset != 7 || got[1].Action != redrive.LedgerSettled {
		t.Fatalf("lookup: %+v", got)
	}
	// evt-3 was redriven from the other DLQ; evt-7 was settled (not an
	// event redrive); evt-9999 never existed.
	got, err = store.LookupEvents(tctx(t), []string{"evt-3", "evt-7", "evt-9999", ""})
	if err != nil || len(got) != 1 || got[0].DLQ != "pay-retry.DLT" || got[0].Offset != 3 {
		t.Fatalf("event lookup: %+v %v", got, err)
	}
	// The whole read still lists each entry once (the event index is not
	// a second entry).
	all, err := store.Ledger(tctx(t))
	if err != nil || len(all) != 3000 {
		t.Fatalf("whole ledger: %d entries (%v)", len(all), err)
	}
	// A later value for a key wins (settled by hand after a redrive).
	settled := entries[1]
	settled.Action = redrive.LedgerSettled
	if err := store.AppendLedger(tctx(t), settled); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Lookup(tctx(t), "pay.DLT", []string{"1:1"}); err != nil || len(got) != 1 || got[0].Action != redrive.LedgerSettled {
		t.Fatalf("latest value: %+v %v", got, err)
	}
	if _, err := store.Lookup(tctx(t), "pay.DLT", []string{"1"}); err == nil {
		t.Fatal("a malformed location was accepted")
	}
}

// TestLedgerLookupOnAOnePartitionLedger: a ledger created by an earlier
// version (one partition, no event index) answers both look-ups, and an
// entry that does not decode fails the look-up instead of reading as "not
// redriven".
func TestLedgerLookupOnAOnePartitionLedger(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, LedgerTopic, 1, 1, map[string]string{"cleanup.policy": "compact"})
	store := NewPlanStore(dialCluster(t, kc).Client())
	e := redrive.LedgerEntry{DLQ: "pay.DLT", Partition: 0, Offset: 5, EventID: "evt-5", Action: redrive.LedgerRedriven, Plan: "p0"}
	v, _ := json.Marshal(e)
	kc.Produce(t, &kgo.Record{Topic: LedgerTopic, Key: []byte(LedgerKey(e)), Value: v})
	if got, err := store.LookupEvents(tctx(t), []string{"evt-5"}); err != nil || len(got) != 1 || got[0].Offset != 5 {
		t.Fatalf("legacy event lookup: %+v %v", got, err)
	}
	if got, err := store.Lookup(tctx(t), "pay.DLT", []string{"0:5"}); err != nil || len(got) != 1 {
		t.Fatalf("legacy lookup: %+v %v", got, err)
	}
	kc.Produce(t, &kgo.Record{Topic: LedgerTopic, Key: []byte("pay.DLT/0/6"), Value: []byte("{broken")})
	if _, err := store.Lookup(tctx(t), "pay.DLT", []string{"0:6"}); err == nil {
		t.Fatal("an undecodable entry read as not redriven")
	}
}

// BenchmarkLedgerLookup: what a plan's ledger check costs over a ledger of
// 100,000 entries: the whole read (what every check did before) against the
// keyed look-ups by coordinates and by event id for a 2-record and a
// 100-record plan, in the same run. Report the ratios.
func BenchmarkLedgerLookup(b *testing.B) {
	kc := kafkatest.Start(b, 1)
	store := NewPlanStore(dialCluster(b, kc).Client())
	const size = 100000
	now := time.Now().UTC()
	batch := make([]redrive.LedgerEntry, 0, 5000)
	for i := 0; i < size; i++ {
		batch = append(batch, redrive.LedgerEntry{DLQ: "pay.DLT", Partition: int32(i % 6), Offset: int64(i), EventID: "evt-" + strconv.Itoa(i),
			Action: redrive.LedgerRedriven, Plan: "p1", Target: "pay", TargetPartition: int32(i % 6), TargetOffset: int64(i), At: now})
		if len(batch) == cap(batch) {
			if err := store.AppendLedger(tctx(b), batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	locs := make([]string, 100)
	ids := make([]string, 100)
	for i := range locs {
		j := i * (size / 100)
		locs[i] = strconv.Itoa(j%6) + ":" + strconv.Itoa(j)
		ids[i] = "evt-" + strconv.Itoa(j)
	}
	b.Run("whole-ledger", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			all, err := store.Ledger(tctx(b))
			if err != nil || len(all) != size {
				b.Fatal(len(all), err)
			}
		}
	})
	for _, k := range []int{2, 100} {
		b.Run("lookup-"+strconv.Itoa(k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				got, err := store.Lookup(tctx(b), "pay.DLT", locs[:k])
				if err != nil || len(got) != k {
					b.Fatal(len(got), err)
				}
				ev, err := store.LookupEvents(tctx(b), ids[:k])
				if err != nil || len(ev) != k {
					b.Fatal(len(ev), err)
				}
			}
		})
	}
}

// TestPinnedLookupsSeeTheLedgerAsItWasAtTheFirst: an execution's chunked
// checks read the ledger as it was when the run began (what earlier runs
// did), not the entries the run adds as it sends, so each chunk's look-up
// does not grow; an unpinned store sees everything. A ledger that did not
// exist at the first pinned look-up stays empty to it.
func TestPinnedLookupsSeeTheLedgerAsItWasAtTheFirst(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	entry := func(off int64) redrive.LedgerEntry {
		return redrive.LedgerEntry{DLQ: "pay.DLT", Offset: off, EventID: "evt-" + strconv.FormatInt(off, 10), Action: redrive.LedgerRedriven, Plan: "p1", Target: "pay", At: time.Now().UTC()}
	}
	locs := []string{"0:1", "0:2", "0:3"}
	ids := []string{"evt-1", "evt-2", "evt-3"}
	count := func(s *PlanStore) (int, int) {
		byLoc, err := s.Lookup(tctx(t), "pay.DLT", locs)
		if err != nil {
			t.Fatal(err)
		}
		byEvent, err := s.LookupEvents(tctx(t), ids)
		if err != nil {
			t.Fatal(err)
		}
		return len(byLoc), len(byEvent)
	}
	before := store.Pinned()
	if l, e := count(before); l != 0 || e != 0 {
		t.Fatalf("no ledger yet: %d %d", l, e)
	}
	if err := store.AppendLedger(tctx(t), entry(1)); err != nil {
		t.Fatal(err)
	}
	if l, e := count(before); l != 0 || e != 0 {
		t.Fatalf("pinned before the ledger existed, it sees %d and %d entries", l, e)
	}
	pinned := store.Pinned()
	if l, e := count(pinned); l != 1 || e != 1 {
		t.Fatalf("pinned at one entry: %d %d", l, e)
	}
	if err := store.AppendLedger(tctx(t), entry(2), entry(3)); err != nil {
		t.Fatal(err)
	}
	if l, e := count(pinned); l != 1 || e != 1 {
		t.Fatalf("pinned at one entry, it sees %d and %d after two more", l, e)
	}
	if l, e := count(store); l != 3 || e != 3 {
		t.Fatalf("unpinned: %d %d", l, e)
	}
}

// TestRedrivenByPlanCountsWhatTheLedgerSays: status counts each plan's
// redriven records from the latest entry of each record (a record settled
// later is no longer counted), without the event-id index counting twice.
func TestRedrivenByPlanCountsWhatTheLedgerSays(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	if got, err := store.RedrivenByPlan(tctx(t)); err != nil || len(got) != 0 {
		t.Fatalf("no ledger: %v %v", got, err)
	}
	e := func(plan string, off int64, action string) redrive.LedgerEntry {
		return redrive.LedgerEntry{DLQ: "pay.DLT", Offset: off, EventID: "evt-" + strconv.FormatInt(off, 10), Action: action, Plan: plan, Target: "pay", At: time.Now().UTC()}
	}
	if err := store.AppendLedger(tctx(t), e("p1", 1, redrive.LedgerRedriven), e("p1", 2, redrive.LedgerRedriven), e("p1", 3, redrive.LedgerRedriven),
		e("p2", 4, redrive.LedgerRedriven), e("p2", 5, redrive.LedgerSettled)); err != nil {
		t.Fatal(err)
	}
	if err := store.AppendLedger(tctx(t), e("p1", 3, redrive.LedgerSettled)); err != nil {
		t.Fatal(err)
	}
	got, err := store.RedrivenByPlan(tctx(t))
	if err != nil || len(got) != 2 || got["p1"] != 2 || got["p2"] != 1 {
		t.Fatalf("redriven by plan: %v %v", got, err)
	}
	entries, err := store.Ledger(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, x := range entries {
		if x.Action == redrive.LedgerRedriven {
			want[x.Plan]++
		}
	}
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("counted %v, the whole ledger says %v", got, want)
	}
}
