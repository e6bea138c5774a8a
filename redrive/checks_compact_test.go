package redrive

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// collide makes every key and event id hash alike for the rest of the test,
// so the checks must tell them apart by their bytes.
func collide(t *testing.T) {
	testHash = func([]byte) uint64 { return 42 }
	t.Cleanup(func() { testHash = nil })
}

// scanCase is a randomized ordering scan: few keys with many candidates
// each on two original partitions, some without a key or a known origin,
// some no longer active, and the records read back, a few out of order.
type scanCase struct {
	cs     []Candidate
	active []bool
	seen   []seenRecord
}

type seenRecord struct {
	partition int32
	offset    int64
	key       []byte
}

func newScanCase(seed uint64, n int) scanCase {
	r := rand.New(rand.NewPCG(seed, 1))
	var sc scanCase
	for i := 0; i < n; i++ {
		c := Candidate{Coord: Coord{0, int64(i)}, Key: []byte(fmt.Sprintf("k%d", r.IntN(4))),
			Origin: Origin{Topic: "payments", Partition: int32(r.IntN(2)), Offset: int64(r.IntN(3 * n)), HasPartition: true, HasOffset: true}}
		switch r.IntN(20) {
		case 0:
			c.Key, c.KeyNull = nil, true
		case 1:
			c.Origin.HasOffset = false
		case 2:
			c.Key = []byte{} // empty, not null: a null-key record matches it
		}
		sc.cs = append(sc.cs, c)
		sc.active = append(sc.active, r.IntN(10) > 0)
	}
	for p := int32(0); p < 2; p++ {
		for off := int64(0); off < int64(4*n); off++ {
			key := []byte(fmt.Sprintf("k%d", r.IntN(6)))
			if r.IntN(30) == 0 {
				key = nil
			}
			sc.seen = append(sc.seen, seenRecord{p, off, key})
		}
	}
	for i := 0; i < len(sc.seen)/20; i++ {
		a, b := r.IntN(len(sc.seen)), r.IntN(len(sc.seen))
		sc.seen[a], sc.seen[b] = sc.seen[b], sc.seen[a]
	}
	return sc
}

// referenceOrdering is check 3 as a plain comparison of every record read
// with every candidate: what OrderingScan must answer.
func referenceOrdering(cs []Candidate, active []bool, seen []seenRecord, allow bool) []Verdict {
	redriven := map[[2]int64]bool{}
	for i, c := range cs {
		if active[i] && c.Origin.Located() {
			redriven[[2]int64{int64(c.Origin.Partition), c.Origin.Offset}] = true
		}
	}
	newer := map[int]int64{}
	for _, s := range seen {
		if redriven[[2]int64{int64(s.partition), s.offset}] {
			continue
		}
		for i, c := range cs {
			if !active[i] || c.KeyNull || !c.Origin.Located() || c.Origin.Partition != s.partition || string(c.Key) != string(s.key) || s.offset <= c.Origin.Offset {
				continue
			}
			if _, ok := newer[i]; !ok {
				newer[i] = s.offset
			}
		}
	}
	out := make([]Verdict, len(cs))
	for i, c := range cs {
		out[i] = include()
		switch {
		case !active[i] || c.KeyNull:
		case !c.Origin.Located():
			if !allow {
				out[i] = exclude(ReasonCheckFailed, "ordering: the record does not say where it came from, so newer records cannot be looked for")
			}
		default:
			if off, ok := newer[i]; ok {
				out[i] = Verdict{Included: allow, NewerOffset: &off,
					Detail: fmt.Sprintf("a newer record with the same key is at %s[%d]@%d; the redriven record would arrive behind it", c.Origin.Topic, c.Origin.Partition, off)}
				if !allow {
					out[i].Reason = ReasonOrderingHazard
				}
			}
		}
	}
	return out
}

// TestOrderingScanWithManyCandidatesPerKey: keys with many candidates each
// (the scan walks only the ones a record makes hazards of), records read
// out of order, null and empty keys, and keys whose hashes collide, all
// answer as comparing every record with every candidate does.
func TestOrderingScanWithManyCandidatesPerKey(t *testing.T) {
	for _, colliding := range []bool{false, true} {
		t.Run(fmt.Sprintf("colliding=%v", colliding), func(t *testing.T) {
			if colliding {
				collide(t)
			}
			for seed := uint64(1); seed <= 20; seed++ {
				sc := newScanCase(seed, 200)
				s := NewOrderingScan(sc.cs, sc.active)
				for _, r := range s.Ranges() {
					if r.Topic != "payments" {
						t.Fatalf("range %+v", r)
					}
				}
				for _, r := range sc.seen {
					s.Observe("payments", r.partition, r.offset, r.key)
				}
				s.Observe("elsewhere", 0, 1, []byte("k1")) // no candidate came from there
				s.Finish("payments", 0, true, int64(len(sc.seen)), nil)
				s.Finish("payments", 1, true, int64(len(sc.seen)), nil)
				for _, allow := range []bool{false, true} {
					got, want := s.Verdicts(allow), referenceOrdering(sc.cs, sc.active, sc.seen, allow)
					if !reflect.DeepEqual(got, want) {
						for i := range got {
							if !reflect.DeepEqual(got[i], want[i]) {
								t.Fatalf("seed %d allow %v: candidate %d %+v: got %+v, want %+v", seed, allow, i, sc.cs[i], got[i], want[i])
							}
						}
					}
				}
			}
		})
	}
}

// TestOrderingScanRangesStartAfterTheOldestCandidate: one range per
// original partition with a candidate still included, from the oldest.
func TestOrderingScanRangesStartAfterTheOldestCandidate(t *testing.T) {
	cs := []Candidate{cand(0, 1, "e1", "", "a", 40), cand(0, 2, "e2", "", "a", 30), cand(0, 3, "e3", "", "b", 20), cand(0, 4, "e4", "", "b", 50)}
	cs[3].Origin.Topic = "refunds"
	cs[1].KeyNull, cs[1].Key = true, nil
	got := NewOrderingScan(cs, []bool{true, true, false, true}).Ranges()
	want := []ScanRange{{"payments", 0, 31}, {"refunds", 0, 51}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestDuplicatesWhenEventIDsHashAlike: event ids that collide are still
// told apart; each id keeps its first record in DLQ order.
func TestDuplicatesWhenEventIDsHashAlike(t *testing.T) {
	collide(t)
	cs := []Candidate{cand(1, 5, "e1", "", "k", 9), cand(0, 7, "e2", "", "k", 8), cand(0, 3, "e1", "", "k", 7), cand(0, 4, "e2", "", "k", 6), cand(0, 9, "e3", "", "k", 5), cand(0, 1, "e2", "", "k", 5)}
	got := CheckDuplicates(cs, []bool{true, true, true, true, true, false})
	if want := []Reason{ReasonDuplicate, ReasonDuplicate, "", "", "", ""}; !reflect.DeepEqual(reasons(got), want) {
		t.Fatalf("got %v, want %v", reasons(got), want)
	}
	if got[0].Detail != "event e1 is also at 0:3, which is redriven instead" || got[1].Detail != "event e2 is also at 0:4, which is redriven instead" {
		t.Fatalf("details %q, %q", got[0].Detail, got[1].Detail)
	}
}

// TestRunIntoAPlanWritesItsRecords: checking a plan in place gives its
// records the verdicts Run gives the same candidates as a slice.
func TestRunIntoAPlanWritesItsRecords(t *testing.T) {
	p := samplePlan()
	p.Records = append(p.Records, p.Records[2]) // a duplicate event
	p.Records[3].Offset = 9
	p.Records[0].Verdict = Verdict{Reason: ReasonLoopLimit} // made again: a stale verdict does not stay
	src := Sources{Ledger: func(context.Context) ([]LedgerEntry, error) {
		return []LedgerEntry{{DLQ: p.DLQ, Partition: 0, Offset: 1, Action: LedgerRedriven}}, nil
	}}
	want, err := Run(context.Background(), p.Candidates(), CheckOptions{DLQ: p.DLQ, AllowHazards: true}, src)
	if err != nil {
		t.Fatal(err)
	}
	recs := PlanRecords(p.Records)
	if err := RunInto(context.Background(), recs, recs, CheckOptions{DLQ: p.DLQ, AllowHazards: true}, src); err != nil {
		t.Fatal(err)
	}
	got := make([]Verdict, len(p.Records))
	for i, r := range p.Records {
		got[i] = r.Verdict
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(reasons(got), []Reason{"", ReasonAlreadyRedriven, "", ReasonDuplicate}) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestKeysToLookUpAreDistinctAndSorted: each idempotency key once, sorted,
// none empty.
func TestKeysToLookUpAreDistinctAndSorted(t *testing.T) {
	cs := []Candidate{cand(0, 1, "", "k2", "", 0), cand(0, 2, "", "", "", 0), cand(0, 3, "", "k1", "", 0), cand(0, 4, "", "k2", "", 0)}
	if got := KeysToLookUp(cs); !reflect.DeepEqual(got, []string{"k1", "k2"}) || !sort.StringsAreSorted(got) {
		t.Fatalf("got %v", got)
	}
	if got := KeysToLookUp(nil); len(got) != 0 {
		t.Fatalf("no candidates: %v", got)
	}
}

// BenchmarkOrderingScanOneKey is the ordering scan where every candidate
// and every record read has the same key (5,000 candidates, 50,000
// records): each record costs only the candidates it makes hazards of, not
// a pass over every candidate of its key.
func BenchmarkOrderingScanOneKey(b *testing.B) {
	const nCands, nRecs = 5000, 50000
	cs := make([]Candidate, nCands)
	active := make([]bool, nCands)
	for i := range cs {
		cs[i] = Candidate{Coord: Coord{0, int64(i)}, Key: []byte("order-1"),
			Origin: Origin{Topic: "payments", Partition: 0, Offset: int64(i * 10), HasPartition: true, HasOffset: true}}
		active[i] = true
	}
	key := []byte("order-1")
	for n := 0; n < b.N; n++ {
		s := NewOrderingScan(cs, active)
		for off := int64(0); off < nRecs; off++ {
			s.Observe("payments", 0, off, key)
		}
		s.Finish("payments", 0, true, nRecs, nil)
		s.Verdicts(false)
	}
	b.ReportMetric(float64(nRecs*b.N)/b.Elapsed().Seconds(), "records/s")
}
