package redrive

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/redrive/approval"
)

func cand(p int32, off int64, event, idem, key string, origOff int64) Candidate {
	return Candidate{
		Coord: Coord{p, off}, EventID: event, IdempotencyKey: idem, Key: []byte(key),
		Origin: Origin{Topic: "payments", Partition: 0, Offset: origOff, HasPartition: true, HasOffset: true},
	}
}

func reasons(vs []Verdict) []Reason {
	out := make([]Reason, len(vs))
	for i, v := range vs {
		out[i] = v.Reason
	}
	return out
}

func TestLedgerExcludesByCoordinatesAndByEventID(t *testing.T) {
	ix := NewLedgerIndex("payments.DLT", []LedgerEntry{
		{DLQ: "payments.DLT", Partition: 0, Offset: 1, EventID: "e1", Action: LedgerRedriven, Plan: "p1"},
		{DLQ: "other.DLT", Partition: 0, Offset: 2, EventID: "e9", Action: LedgerRedriven, Plan: "p2"},
		{DLQ: "other.DLT", Partition: 0, Offset: 3, Action: LedgerRedriven}, // other DLQ's coordinates do not count
		{DLQ: "payments.DLT", Partition: 0, Offset: 4, EventID: "e4", Action: LedgerSettled},
	})
	cs := []Candidate{cand(0, 1, "x", "", "k", 1), cand(0, 2, "e9", "", "k", 2), cand(0, 3, "e3", "", "k", 3), cand(0, 4, "e4", "", "k", 4)}
	got := reasons(CheckLedger(cs, ix))
	want := []Reason{ReasonAlreadyRedriven, ReasonAlreadyRedriven, "", ReasonAlreadyRedriven}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if !ix.Done(Coord{0, 4}) || ix.Done(Coord{0, 3}) {
		t.Fatal("Done disagrees with the ledger")
	}
}

func TestSystemOfRecordVerdicts(t *testing.T) {
	cs := []Candidate{cand(0, 1, "e1", "k1", "a", 1), cand(0, 2, "e2", "k2", "b", 2), cand(0, 3, "e3", "", "c", 3)}
	got := reasons(CheckSystemOfRecord(cs, SOR{Configured: true, RequireKey: true, Committed: map[string]bool{"k1": true, "k2": false}}))
	if want := []Reason{ReasonEffectCommitted, "", ReasonMissingKey}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// An unreachable system of record blocks every record that needed it.
	vs := CheckSystemOfRecord(cs, SOR{Configured: true, Err: errors.New("dial tcp 127.0.0.1:1: connection refused")})
	if want := []Reason{ReasonCheckFailed, ReasonCheckFailed, ReasonMissingKey}; !reflect.DeepEqual(reasons(vs), want) {
		t.Fatalf("unreachable: got %v, want %v", reasons(vs), want)
	}
	// A key that was never answered is not "not applied" either.
	if v := CheckSystemOfRecord(cs[1:2], SOR{Configured: true, Committed: map[string]bool{}}); v[0].Reason != ReasonCheckFailed {
		t.Fatalf("unanswered key: %+v", v[0])
	}
	// No system of record, key not required: nothing to check.
	if v := CheckSystemOfRecord(cs, SOR{}); v[2].Reason != "" {
		t.Fatalf("no policy: %+v", v[2])
	}
}

func TestLoopGuard(t *testing.T) {
	cs := []Candidate{{PriorRedrives: 0}, {PriorRedrives: 2}, {PriorRedrives: 3}}
	if got := reasons(CheckLoop(cs, 0)); !reflect.DeepEqual(got, []Reason{"", "", ReasonLoopLimit}) {
		t.Fatalf("default limit: %v", got)
	}
	if got := reasons(CheckLoop(cs, 2)); !reflect.DeepEqual(got, []Reason{"", ReasonLoopLimit, ReasonLoopLimit}) {
		t.Fatalf("limit 2: %v", got)
	}
}

func TestDuplicatesKeepTheFirstIncludedInDLQOrder(t *testing.T) {
	cs := []Candidate{cand(1, 5, "e1", "", "k", 9), cand(0, 7, "e1", "", "k", 8), cand(0, 3, "e1", "", "k", 7), cand(0, 4, "e2", "", "k", 6), cand(0, 9, "", "", "k", 5), cand(0, 10, "", "", "k", 5)}
	// 0:3 is already excluded by another check, so 0:7 is the one that goes.
	got := CheckDuplicates(cs, []bool{true, true, false, true, true, true})
	if want := []Reason{ReasonDuplicate, "", "", "", "", ""}; !reflect.DeepEqual(reasons(got), want) {
		t.Fatalf("got %v, want %v", reasons(got), want)
	}
	if !strings.Contains(got[0].Detail, "0:7") {
		t.Fatalf("detail %q does not name the twin", got[0].Detail)
	}
}

func TestOrderingScanFindsNewerSameKeyRecords(t *testing.T) {
	cs := []Candidate{
		cand(0, 1, "e1", "", "order-1", 10), // order-1 has a newer event at 12
		cand(0, 2, "e2", "", "order-2", 11), // order-2's newer event at 13 is itself redriven (candidate 3)
		cand(0, 3, "e3", "", "order-2", 13),
		cand(0, 4, "e4", "", "order-4", 14),
		{Coord: Coord{0, 5}, Key: []byte("k"), Origin: Origin{Topic: "payments"}}, // no located origin
		{Coord: Coord{0, 6}, KeyNull: true, Origin: Origin{Topic: "payments", Partition: 0, Offset: 5, HasPartition: true, HasOffset: true}},
	}
	s := NewOrderingScan(cs, []bool{true, true, true, true, true, true})
	rs := s.Ranges()
	if len(rs) != 1 || rs[0].Topic != "payments" || rs[0].From != 6 {
		t.Fatalf("ranges %+v", rs)
	}
	for off := int64(6); off <= 15; off++ {
		key := "other"
		switch off {
		case 10, 12:
			key = "order-1"
		case 11, 13:
			key = "order-2"
		}
		s.Observe("payments", 0, off, []byte(key))
	}
	s.Finish("payments", 0, true, 16, nil)
	vs := s.Verdicts(false)
	if want := []Reason{ReasonOrderingHazard, "", "", "", ReasonCheckFailed, ""}; !reflect.DeepEqual(reasons(vs), want) {
		t.Fatalf("got %v, want %v", reasons(vs), want)
	}
	if vs[0].NewerOffset == nil || *vs[0].NewerOffset != 12 || !strings.Contains(vs[0].Detail, "@12") {
		t.Fatalf("hazard %+v", vs[0])
	}
	// Allowed: included, but the newer offset is still reported.
	vs = s.Verdicts(true)
	if !vs[0].Included || vs[0].NewerOffset == nil || !vs[4].Included {
		t.Fatalf("allowed hazards: %+v", vs)
	}
}

func TestOrderingScanThatStopsEarlyBlocks(t *testing.T) {
	cs := []Candidate{cand(0, 1, "e1", "", "k", 10)}
	s := NewOrderingScan(cs, []bool{true})
	s.Observe("payments", 0, 11, []byte("x"))
	s.Finish("payments", 0, false, 12, nil)
	if v := s.Verdicts(false)[0]; v.Reason != ReasonCheckFailed || !strings.Contains(v.Detail, "bound") {
		t.Fatalf("bounded scan: %+v", v)
	}
	s = NewOrderingScan(cs, []bool{true})
	s.Finish("payments", 0, false, 11, errors.New("NOT_LEADER_FOR_PARTITION"))
	if v := s.Verdicts(false)[0]; v.Reason != ReasonCheckFailed || !strings.Contains(v.Detail, "NOT_LEADER") {
		t.Fatalf("failed scan: %+v", v)
	}
}

func TestRunAppliesChecksInOrder(t *testing.T) {
	cs := []Candidate{
		cand(0, 0, "e0", "k0", "a", 0), // in the ledger
		cand(0, 1, "e1", "k1", "b", 1), // effect committed
		cand(0, 2, "e2", "", "c", 2),   // missing key
		cand(0, 3, "e3", "k3", "d", 3), // loop limit
		cand(0, 4, "e4", "k4", "e", 4), // goes
		cand(0, 5, "e4", "k4", "e", 5), // duplicate of 0:4
		cand(0, 6, "e6", "k6", "f", 6), // ordering hazard (newer f at 7)
	}
	cs[3].PriorRedrives = 3
	var looked []string
	src := Sources{
		Ledger: func(context.Context) ([]LedgerEntry, error) {
			return []LedgerEntry{{DLQ: "payments.DLT", Partition: 0, Offset: 0, Action: LedgerRedriven}}, nil
		},
		Committed: func(_ context.Context, keys []string) (map[string]bool, error) {
			looked = keys
			out := map[string]bool{}
			for _, k := range keys {
				out[k] = k == "k1"
			}
			return out, nil
		},
		Scan: func(_ context.Context, s *OrderingScan) error {
			for _, r := range s.Ranges() {
				for off := r.From; off < 8; off++ {
					key := []byte("zz")
					if off == 7 {
						key = []byte("f")
					}
					s.Observe(r.Topic, r.Partition, off, key)
				}
				s.Finish(r.Topic, r.Partition, true, 8, nil)
			}
			return nil
		},
	}
	vs, err := Run(context.Background(), cs, CheckOptions{DLQ: "payments.DLT", RequireKey: true}, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Reason{ReasonAlreadyRedriven, ReasonEffectCommitted, ReasonMissingKey, ReasonLoopLimit, "", ReasonDuplicate, ReasonOrderingHazard}
	if !reflect.DeepEqual(reasons(vs), want) {
		t.Fatalf("got %v, want %v", reasons(vs), want)
	}
	if !reflect.DeepEqual(looked, []string{"k1", "k3", "k4", "k6"}) {
		t.Fatalf("looked up %v: a record already in the ledger must not be looked up", looked)
	}
	// The ledger failing blocks everything.
	src.Ledger = func(context.Context) ([]LedgerEntry, error) { return nil, errors.New("topic unreadable") }
	vs, _ = Run(context.Background(), cs, CheckOptions{DLQ: "payments.DLT"}, src)
	for i, v := range vs {
		if v.Reason != ReasonCheckFailed {
			t.Fatalf("record %d with an unreadable ledger: %+v", i, v)
		}
	}
}

func samplePlan() Plan {
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	p := Plan{
		Version: PlanVersion, Cluster: "kfake", DLQ: "payments.DLT", Selection: Selection{Classes: []string{"c-1"}},
		Rate: 100, BatchSize: 50, Policy: PolicySnapshot{Review: "required", Approvals: 1, MaxRedrives: 3},
		Author: "alice@host", CreatedAt: t0,
	}
	for i := 0; i < 3; i++ {
		rec := parsedRec(0, int64(i), t0, "payments", "java.net.SocketTimeoutException", "timed out", `{"eventId":"e`+string(rune('0'+i))+`"}`)
		p.Records = append(p.Records, NewPlanRecord(rec, ""))
	}
	return p
}

func TestPlanHashChangesWhenAnythingChanges(t *testing.T) {
	base := samplePlan()
	h := base.Hash()
	if len(h) != 64 || h != samplePlan().Hash() {
		t.Fatalf("hash %q is not a stable SHA-256", h)
	}
	mutations := map[string]func(p *Plan){
		"dlq":         func(p *Plan) { p.DLQ = "payments-dlt" },
		"target":      func(p *Plan) { p.Target = "payments-retry" },
		"rate":        func(p *Plan) { p.Rate = 101 },
		"batch":       func(p *Plan) { p.BatchSize = 49 },
		"hazards":     func(p *Plan) { p.AllowOrderingHazards = true },
		"created":     func(p *Plan) { p.CreatedAt = p.CreatedAt.Add(time.Millisecond) },
		"cluster":     func(p *Plan) { p.Cluster = "other" },
		"selection":   func(p *Plan) { p.Selection.Classes = append(p.Selection.Classes, "c-2") },
		"policy":      func(p *Plan) { p.Policy.Approvals = 2 },
		"narrowed":    func(p *Plan) { p.Records[1].Included, p.Records[1].Reason = false, ReasonDuplicate },
		"dropped":     func(p *Plan) { p.Records = p.Records[:2] },
		"content":     func(p *Plan) { p.Records[2].Digest = Record{Value: []byte("other")}.Digest() },
		"record tgt":  func(p *Plan) { p.Records[0].Target = "elsewhere" },
		"event id in": func(p *Plan) { p.Policy.EventID = "header:id" },
	}
	for name, mutate := range mutations {
		p := samplePlan()
		p.Records = append([]PlanRecord(nil), p.Records...)
		mutate(&p)
		if p.Hash() == h {
			t.Errorf("changing %s kept the hash", name)
		}
	}
	// What is derived from the record is not the plan's to say: editing it
	// leaves the hash (and execute derives it again from the record).
	for name, mutate := range map[string]func(p *Plan){
		"author":      func(p *Plan) { p.Author = "mallory@host" },
		"detail":      func(p *Plan) { p.Records[0].Detail = "x" },
		"key":         func(p *Plan) { p.Records[0].Key = []byte("other") },
		"origin":      func(p *Plan) { p.Records[0].Origin.Offset++ },
		"event":       func(p *Plan) { p.Records[0].EventID = "e9" },
		"idempotency": func(p *Plan) { p.Records[0].IdempotencyKey = "k\u200b" },
	} {
		p := samplePlan()
		mutate(&p)
		if p.Hash() != h {
			t.Errorf("derived field %s is in the hash", name)
		}
	}
	// Record order in memory does not matter: the encoding sorts them.
	p := samplePlan()
	p.Records[0], p.Records[2] = p.Records[2], p.Records[0]
	if p.Hash() != h {
		t.Error("record order changed the hash")
	}
}

func TestPlanFileRoundTripAndSignaturesOutsideTheHash(t *testing.T) {
	f := NewFile(samplePlan())
	f.Signatures = append(f.Signatures, approval.Signature{Role: approval.RoleAuthor, PlanHash: f.Hash, Fingerprint: "SHA256:x", Armored: "sig"})
	raw, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	g, err := DecodeFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if g.Hash != f.Hash || g.Plan.Hash() != f.Hash || g.Author() == nil || len(g.Approvals()) != 0 {
		t.Fatalf("round trip lost something: %+v", g)
	}
	// Adding an approval does not change the plan's identity.
	g.Signatures = append(g.Signatures, approval.Signature{Role: approval.RoleApproval, PlanHash: g.Hash})
	if g.Plan.Hash() != f.Hash {
		t.Fatal("a signature changed the hash")
	}
	// Editing the content is detected.
	edited := strings.Replace(string(raw), `"rate":100`, `"rate":1000`, 1)
	if _, err := DecodeFile([]byte(edited)); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("edited plan: %v", err)
	}
	// A signature over another plan is refused.
	other := strings.Replace(string(raw), `"plan_hash":"`+f.Hash, `"plan_hash":"`+strings.Repeat("a", 64), 1)
	if edited == string(raw) || other == string(raw) {
		t.Fatal("the test's edits did not apply")
	}
	if _, err := DecodeFile([]byte(other)); err == nil || !strings.Contains(err.Error(), "signature is for plan") {
		t.Fatalf("foreign signature: %v", err)
	}
}

func TestPlanTotals(t *testing.T) {
	p := samplePlan()
	p.Records[0].Verdict = Verdict{Reason: ReasonEffectCommitted}
	p.Records[1].Verdict = Verdict{Reason: ReasonCheckFailed, Detail: "system of record: down"}
	tot := p.Totals()
	if tot.Selected != 3 || tot.Included != 1 || tot.Excluded != 2 || tot.ByReason[ReasonEffectCommitted] != 1 || tot.ByReason[ReasonDuplicate] != 0 {
		t.Fatalf("totals %+v", tot)
	}
	if cc := tot.ByClass[p.Records[0].Class]; cc.Selected != 3 || cc.Included != 1 {
		t.Fatalf("by class %+v", tot.ByClass)
	}
	if blocked, why := p.Blocked(); !blocked || !strings.Contains(why, "down") {
		t.Fatalf("blocked %v %q", blocked, why)
	}
	if !(Selection{}).Empty() || (Selection{Key: "k"}).Empty() {
		t.Fatal("Selection.Empty")
	}
}
