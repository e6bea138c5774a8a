package actions

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/berth-dev/berth/redrive"
)

// TestLedgerForAnswersAsTheKeyedLookups: the checks' ledger look-up,
// matching the ledger against the candidates' own coordinates (in DLQ order
// or not), finds what looking up every coordinate's key does: the latest
// entry of each of the DLQ's records asked about, none of another DLQ's or
// of a record not asked about, and the event ids' entries from any DLQ.
func TestLedgerForAnswersAsTheKeyedLookups(t *testing.T) {
	f := newFixture(t, nil)
	p := f.planner()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var entries []redrive.LedgerEntry
	for i := 0; i < 40; i++ {
		e := redrive.LedgerEntry{DLQ: "orders.DLT", Partition: int32(i % 3), Offset: int64(i / 3), EventID: fmt.Sprintf("ev-%d", i), Action: redrive.LedgerRedriven, Plan: "p1", At: at}
		switch i % 5 {
		case 1:
			e.DLQ = "refunds.DLT" // another DLQ: found by event id only
		case 2:
			e.Action, e.EventID = redrive.LedgerSettled, ""
		}
		entries = append(entries, e)
	}
	// A later entry for the same record is the one that counts.
	entries = append(entries, redrive.LedgerEntry{DLQ: "orders.DLT", Partition: 0, Offset: 0, EventID: "ev-0", Action: redrive.LedgerRedriven, Plan: "p2", At: at.Add(time.Hour)})
	if err := storeOf(p).AppendLedger(tctx(t), entries...); err != nil {
		t.Fatal(err)
	}
	// Candidates: every other record of the first 40, and some never redriven.
	var cs []redrive.Candidate
	for i := 0; i < 60; i += 2 {
		cs = append(cs, redrive.Candidate{Coord: redrive.Coord{Partition: int32(i % 3), Offset: int64(i / 3)}, EventID: fmt.Sprintf("ev-%d", i+1)})
	}
	index := func(es []redrive.LedgerEntry) redrive.LedgerIndex { return redrive.NewLedgerIndex("orders.DLT", es) }
	var locs, ids []string
	for _, c := range cs {
		locs = append(locs, c.Coord.String())
		ids = append(ids, c.EventID)
	}
	byCoord, err := storeOf(p).Lookup(tctx(t), "orders.DLT", locs)
	if err != nil {
		t.Fatal(err)
	}
	byEvent, err := p.Store.LookupEvents(tctx(t), ids)
	if err != nil {
		t.Fatal(err)
	}
	want := index(append(byCoord, byEvent...))
	if len(want.ByCoord) == 0 || len(want.ByEventID) == 0 || want.ByCoord[redrive.Coord{Partition: 0, Offset: 0}].Plan != "p2" {
		t.Fatalf("the test's ledger finds too little: %+v", want)
	}
	for _, sorted := range []bool{true, false} {
		in := append([]redrive.Candidate(nil), cs...)
		if sorted {
			sort.Slice(in, func(i, j int) bool { return in[i].Coord.Before(in[j].Coord) })
		} else {
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		}
		got, err := p.ledgerFor(tctx(t), "orders.DLT", redrive.CandidateSlice(in))
		if err != nil {
			t.Fatal(err)
		}
		if g := index(got); !reflect.DeepEqual(g, want) {
			t.Fatalf("in DLQ order %v: got %+v, want %+v", sorted, g, want)
		}
	}
}
