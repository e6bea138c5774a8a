package redrive

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func orderedMsg(pos int, id, key string, ts time.Time) QueueMessage {
	return QueueMessage{Position: pos, EventID: id, OrderingKey: key, Timestamp: &ts, OriginalQueue: "q", DeathReason: "rejected", Exchange: "x", RoutingKey: "k", Routed: true}
}

func verdictsOf(p QueuePlan) string {
	var out []string
	for _, r := range p.Records {
		v := "in"
		if !r.Included {
			v = string(r.Reason)
		} else if r.HazardPosition != nil {
			v = fmt.Sprintf("in!%d", *r.HazardPosition)
		}
		out = append(out, r.EventID+":"+v)
	}
	return strings.Join(out, " ")
}

// Ordering by business key: a message overtaking an older same-key message
// left in the DLQ, or published before a same-key message ahead of it, is a
// hazard; excluding one leaves it behind, so its key's later messages
// follow; a key whose older message was already redriven is no hazard.
func TestCheckQueueOrdering(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	msgs := []QueueMessage{
		orderedMsg(0, "a0", "A", t0),                    // not selected: stays behind
		orderedMsg(1, "a1", "A", t0.Add(time.Second)),   // overtakes a0
		orderedMsg(2, "a2", "A", t0.Add(2*time.Second)), // a1 stays behind too
		orderedMsg(3, "b0", "B", t0.Add(5*time.Second)),
		orderedMsg(4, "b1", "B", t0.Add(3*time.Second)), // published before b0
		orderedMsg(5, "c0", "C", t0),                    // already redriven: delivered
		orderedMsg(6, "c1", "C", t0.Add(time.Second)),
		orderedMsg(7, "n0", "", t0), // no key: not checked
	}
	sel := QueueSelection{EventIDs: []string{"a1", "a2", "b0", "b1", "c0", "c1", "n0"}}
	in := QueueCheckInput{Redriven: map[string]string{"c0": "earlier plan"}}
	p, err := MakeQueuePlan(msgs, sel, PolicySnapshot{}, in, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := verdictsOf(p), "a1:ordering_hazard a2:ordering_hazard b0:in b1:ordering_hazard c0:already_redriven c1:in n0:in"; got != want {
		t.Errorf("strict\n got %s\nwant %s", got, want)
	}
	in.AllowHazards = true
	p, _ = MakeQueuePlan(msgs, sel, PolicySnapshot{}, in, t0)
	if got, want := verdictsOf(p), "a1:in!0 a2:in!0 b0:in b1:in!3 c0:already_redriven c1:in n0:in"; got != want {
		t.Errorf("allowed\n got %s\nwant %s", got, want)
	}
	if !p.AllowHazards {
		t.Error("the plan does not record that hazards were allowed")
	}
}

// The system-of-record check never reads silence as "not applied": a
// record with no key to ask with is excluded, and a key the system of
// record did not answer for blocks the plan.
func TestPlanSystemOfRecordNeedsAnAnswer(t *testing.T) {
	a := orderedMsg(0, "a", "", time.Unix(0, 0))
	a.IdempotencyKey = "ka"
	b := orderedMsg(1, "b", "", time.Unix(0, 0))
	p, err := MakeQueuePlan([]QueueMessage{a, b}, QueueSelection{All: true}, PolicySnapshot{}, QueueCheckInput{HasSOR: true, Committed: map[string]bool{}}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := verdictsOf(p); got != "a:check_failed b:missing_idempotency_key" {
		t.Errorf("got %s", got)
	}
	if blocked, _ := p.Blocked(); !blocked {
		t.Error("a plan with check_failed must be blocked")
	}
}

func TestPlanChecksAndHash(t *testing.T) {
	msg := func(id string, prior int, key string) QueueMessage {
		return QueueMessage{EventID: id, IdempotencyKey: key, PriorRedrives: prior, OriginalQueue: "q", DeathReason: "rejected", Exchange: "x", RoutingKey: "k", Routed: true}
	}
	noTarget := QueueMessage{EventID: "lost"}
	msgs := []QueueMessage{msg("a", 0, "ka"), msg("b", 0, "kb"), msg("a", 0, "ka"), msg("c", 3, "kc"), msg("d", 0, ""), msg("e", 0, "ke"), noTarget}
	for i := range msgs {
		msgs[i].Position = i
	}
	pol := PolicySnapshot{RequireIdempotencyKey: true, IdempotencyKey: "json:k", MaxRedrives: 3}
	p, err := MakeQueuePlan(msgs, QueueSelection{All: true}, pol, QueueCheckInput{Redriven: map[string]string{"b": "by plan p"}, HasSOR: true, Committed: map[string]bool{"ka": false, "kc": false, "ke": true}}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Records {
		v := "included"
		if !r.Included {
			v = string(r.Reason)
		}
		got = append(got, r.EventID+":"+v)
	}
	want := "[a:included b:already_redriven a:duplicate c:loop_limit d:missing_idempotency_key e:effect_committed lost:check_failed]"
	if fmt.Sprint(got) != want {
		t.Errorf("verdicts\n got %v\nwant %s", got, want)
	}
	h := p.Hash()
	o := p.Records[0].Origin()
	o.RoutingKey = "other"
	p.Records[0].SetOrigin(o, nil)
	if p.Hash() == h {
		t.Error("changing a record did not change the hash")
	}
	// An unreachable system of record blocks, never reads as not applied.
	p, _ = MakeQueuePlan(msgs[:1], QueueSelection{All: true}, pol, QueueCheckInput{HasSOR: true, SORErr: errors.New("connection refused")}, time.Unix(0, 0))
	if p.Records[0].Included || p.Records[0].Reason != ReasonCheckFailed {
		t.Errorf("SOR error: %+v", p.Records[0])
	}
}

func TestPlanToQueues(t *testing.T) {
	m := QueueMessage{EventID: "a", OriginalQueue: "work", DeathReason: "rejected", Exchange: "fanout.x", RoutingKey: "k", Routed: true}
	p, err := MakeQueuePlan([]QueueMessage{m}, QueueSelection{All: true}, PolicySnapshot{}, QueueCheckInput{}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	h := p.Hash()
	if r := p.Records[0]; r.Exchange() != "fanout.x" || r.RoutingKey() != "k" || p.Target != QueueTargetExchange {
		t.Fatalf("default target %+v", r)
	}
	p.ToQueues()
	if r := p.Records[0]; r.Exchange() != "" || r.RoutingKey() != "work" || p.Target != QueueTargetQueue || p.Hash() == h {
		t.Fatalf("to queue: %+v target %s", r, p.Target)
	}
}

// At execute, ordering is judged in the order the run reads the DLQ: a
// message passed over (or excluded by a check run again) stays behind, and
// a later same-key message is a hazard unless hazards are allowed; one
// excluded as a hazard stays behind in turn; settled events (not noted) and
// other keys are not held up.
func TestQueueOrderingAdmit(t *testing.T) {
	msg := func(pos int, id, key string) QueueMessage {
		return QueueMessage{Position: pos, EventID: id, OrderingKey: key}
	}
	o := NewQueueOrdering()
	o.StaysBehind("A", 0) // a0 passed over: changed since the plan
	got := o.Admit([]QueueMessage{msg(3, "b1", "B"), msg(1, "a1", "A"), msg(2, "b0", "B"), msg(4, "a2", "A"), msg(5, "n", "")},
		map[string]Verdict{"b0": exclude(ReasonLoopLimit, "limit"), "n": {Included: true}}, false)
	var out []string
	for _, id := range []string{"a1", "a2", "b0", "b1", "n"} {
		if v, ok := got[id]; ok {
			out = append(out, id+":"+string(v.Reason))
		}
	}
	if fmt.Sprint(out) != "[a1:ordering_hazard a2:ordering_hazard b0:loop_limit b1:ordering_hazard]" {
		t.Errorf("strict: %v", out)
	}
	if d := got["a1"].Detail; !strings.Contains(d, "ordering key A") || !strings.Contains(d, "read 1 message(s) before") {
		t.Errorf("detail %q", d)
	}
	o = NewQueueOrdering()
	o.StaysBehind("A", 0)
	got = o.Admit([]QueueMessage{msg(1, "a1", "A")}, nil, true)
	if len(got) != 0 {
		t.Errorf("hazards allowed: %v", got)
	}
	o = NewQueueOrdering()
	if got = o.Admit([]QueueMessage{msg(1, "a1", "A"), msg(2, "a2", "A")}, map[string]Verdict{"a1": exclude(ReasonEffectCommitted, "done")}, false); len(got) != 1 {
		t.Errorf("an effect already committed holds nothing up: %v", got)
	}
}

// A plan may list a second message of one event id only as a duplicate; a
// plan re-hashed after an edit that includes both is refused as it is
// decoded (file or store), naming the event.
func TestQueuePlanIncludingAnEventTwiceIsRefused(t *testing.T) {
	m := func(pos int, id string) QueueMessage {
		return QueueMessage{Position: pos, EventID: id, Digest: Digest{}, OriginalQueue: "q", DeathReason: "rejected", Exchange: "x", RoutingKey: "k", Routed: true}
	}
	p, err := MakeQueuePlan([]QueueMessage{m(0, "ev-0"), m(1, "ev-1"), m(2, "ev-0")}, QueueSelection{All: true}, PolicySnapshot{}, QueueCheckInput{}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster = "c"
	raw, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeQueuePlan(raw); err != nil {
		t.Fatalf("a plan with a duplicate excluded is refused: %v", err)
	}
	for _, edit := range []struct {
		name string
		row  int
		loc  string
	}{{"the duplicate included", 2, "2:ev-0"}, {"another row renamed", 1, "1:ev-0"}} {
		c := p.Core()
		c.Rows[edit.row].Loc, c.Rows[edit.row].Verdict = edit.loc, ""
		sp, err := NewSignedPlan(c)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := sp.Encode()
		if err != nil {
			t.Fatal(err)
		}
		_, err = DecodeQueuePlan(raw)
		if err == nil || !strings.Contains(err.Error(), "event ev-0 is included twice (also at position 0)") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line naming ev-0", edit.name, err)
		}
	}
}

// A review matches the messages read now to the plan's records by event id
// and digest as they stream past: a record is filled by the first message
// with its content, reported changed when only other content carries its
// id (two records may share an id), and gone when its id was not read.
func TestQueueDeriveMatchesByIDAndDigest(t *testing.T) {
	p := QueuePlan{Records: []QueueRecord{
		{Position: 0, EventID: "a", Digest: Digest{1}},
		{Position: 1, EventID: "b", Digest: Digest{2}},
		{Position: 2, EventID: "b", Digest: Digest{3}},
		{Position: 3, EventID: "c", Digest: Digest{4}},
		{Position: 4, EventID: "e", Digest: Digest{5}},
	}}
	d := p.Deriver()
	for _, m := range []QueueMessage{
		{EventID: "a", Digest: Digest{1}, Class: "first"},
		{EventID: "b", Digest: Digest{3}, Class: "b3"},
		{EventID: "a", Digest: Digest{1}, Class: "second"},
		{EventID: "c", Digest: Digest{9}, Class: "edited"},
	} {
		d.Add(m)
	}
	changed, gone := d.Result()
	if fmt.Sprint(changed) != "[b c]" || fmt.Sprint(gone) != "[e]" {
		t.Fatalf("changed %v gone %v; want [b c] and [e]", changed, gone)
	}
	var filled []string
	for _, r := range p.Records {
		filled = append(filled, fmt.Sprintf("%s:%v:%s", r.EventID, r.Derived, r.Class()))
	}
	if got := strings.Join(filled, " "); got != "a:true:first b:false: b:true:b3 c:false: e:false:" {
		t.Fatalf("records derived %s", got)
	}
}
