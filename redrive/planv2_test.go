package redrive

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func sampleCore() Core {
	d := Record{Key: []byte("k"), Value: []byte(`{"eventId":"e1"}`)}.Digest().String()
	return Core{
		Format: PlanFormat, Backend: BackendKafka, Cluster: "cl-\u00e9\u2028-1", DLQ: "payments.DLT",
		CreatedAt: FormatCreatedAt(time.Date(2026, 12, 1, 14, 0, 0, 123456789, time.UTC)),
		Policy:    PolicySnapshot{IdempotencyKey: "json:paymentId", Review: "required", Approvals: 1, MaxRedrives: 3},
		// Keys and values a canonicaliser gets wrong: quotes, backslash,
		// control characters, DEL, an invisible joiner, an astral emoji, <>&.
		Selection: CoreSelection{Key: "a\"b\\c\x01\x7f\u200d\U0001F600<>&\b\f\n\r\t"},
		Rate:      100, Batch: 100,
		Targets: []string{"payments", "shipment-jobs"},
		Rows:    []Row{{Loc: "0:1", Digest: d, Target: 0}, {Loc: "0:2", Digest: d, Target: 1, Verdict: ReasonAlreadyRedriven}},
	}
}

// The plan hash is reproducible by an independent script that follows the
// documented definition (Python's json.dumps with sorted keys, ASCII).
func TestPlanHashMatchesIndependentScript(t *testing.T) {
	sp, err := NewSignedPlan(sampleCore())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", "../testdata/redrive/planhash.py", path).CombinedOutput()
	if err != nil {
		t.Fatalf("planhash.py: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != sp.Hash {
		t.Fatalf("python hash %s, berth hash %s", got, sp.Hash)
	}
}

func TestEditingAnyHashedFieldChangesTheHash(t *testing.T) {
	base := sampleCore()
	h0, _ := base.Hash()
	edits := map[string]func(*Core){
		"cluster":          func(c *Core) { c.Cluster = "other" },
		"created_at":       func(c *Core) { c.CreatedAt = FormatCreatedAt(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) },
		"policy review":    func(c *Core) { c.Policy.Review = "none" },
		"row target":       func(c *Core) { c.Rows[1].Target = 0 },
		"row verdict":      func(c *Core) { c.Rows[1].Verdict = "" },
		"target name":      func(c *Core) { c.Targets[1] = "shipment-jobs\u200b" },
		"row digest":       func(c *Core) { c.Rows[0].Digest = Record{Value: []byte("x")}.Digest().String() },
		"selection key":    func(c *Core) { c.Selection.Key += "\u200b" },
		"rate":             func(c *Core) { c.Rate++ },
		"hazards allowed":  func(c *Core) { c.AllowHazards = true },
		"backend options":  func(c *Core) { c.Options = []string{"to_queues"} },
		"row order":        func(c *Core) { c.Rows[0], c.Rows[1] = c.Rows[1], c.Rows[0] },
		"row loc":          func(c *Core) { c.Rows[0].Loc = "0:3" },
		"dlq":              func(c *Core) { c.DLQ = "orders.DLT" },
		"approvals needed": func(c *Core) { c.Policy.Approvals = 0 },
	}
	for name, edit := range edits {
		c := sampleCore()
		c.Targets = append([]string(nil), base.Targets...)
		c.Rows = append([]Row(nil), base.Rows...)
		edit(&c)
		if h, _ := c.Hash(); h == h0 {
			t.Errorf("editing %s kept the hash", name)
		}
	}
}

func TestDecodeRefusesEditedAndMalformedPlans(t *testing.T) {
	sp, _ := NewSignedPlan(sampleCore())
	raw, _ := sp.Encode()
	if _, err := DecodeSignedPlan(raw); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	edited := strings.Replace(string(raw), `"shipment-jobs"`, `"shipment-jobz"`, 1)
	if _, err := DecodeSignedPlan([]byte(edited)); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("edited target: %v", err)
	}
	cases := map[string]string{
		"unknown field":   strings.Replace(string(raw), `"dlq":`, `"extra":1,"dlq":`, 1),
		"v1 format":       strings.Replace(string(raw), PlanFormat, "berth-redrive-plan/v1", 1),
		"bad target":      strings.Replace(string(raw), `,1,"already_redriven"]`, `,7,"ledger"]`, 1),
		"short row":       strings.Replace(string(raw), `,1,"already_redriven"]`, `]`, 1),
		"local time":      strings.Replace(string(raw), `.123Z"`, `.123+01:00"`, 1),
		"duplicated row":  strings.Replace(string(raw), `"0:2"`, `"0:1"`, 1),
		"no such digest":  strings.Replace(string(raw), `["0:1","`, `["0:1","x`, 1),
		"not json at all": "{",
	}
	for name, s := range cases {
		if s == string(raw) {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if _, err := DecodeSignedPlan([]byte(s)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Correctly hashed, but bound to no cluster: refused all the same.
	c := sampleCore()
	c.Cluster = ""
	unbound := SignedPlan{Plan: c}
	unbound.Hash, _ = c.Hash()
	b, _ := unbound.Encode()
	if _, err := DecodeSignedPlan(b); err == nil || !strings.Contains(err.Error(), "cluster") {
		t.Errorf("a plan bound to no cluster: %v", err)
	}
	// Correctly hashed (an author re-hashes their own edit), with a batch
	// no execute can hold (a thousand million crashed it out of memory)
	// or a negative pace: refused as it is read, from a file or a store.
	for _, edit := range []func(*Core){
		func(c *Core) { c.Batch = MaxBatch + 1 },
		func(c *Core) { c.Batch = -1 },
		func(c *Core) { c.Rate = -1 },
	} {
		c := sampleCore()
		edit(&c)
		sp := SignedPlan{Plan: c}
		sp.Hash, _ = c.Hash()
		b, _ := sp.Encode()
		if _, err := DecodeSignedPlan(b); err == nil || !strings.Contains(err.Error(), "batch") && !strings.Contains(err.Error(), "rate") {
			t.Errorf("a plan with batch %d and rate %d: %v, want a refusal naming it", c.Batch, c.Rate, err)
		}
	}
	c = sampleCore()
	c.Batch = MaxBatch
	atMost := SignedPlan{Plan: c}
	atMost.Hash, _ = c.Hash()
	if b, _ := atMost.Encode(); b != nil {
		if _, err := DecodeSignedPlan(b); err != nil {
			t.Errorf("a plan at the maximum batch: %v", err)
		}
	}
}

// A plan row stays small: redrive-scale's target is 100 bytes a record.
func TestRowIsCompact(t *testing.T) {
	r := Row{Loc: "11:12345678", Digest: Record{Value: []byte("v")}.Digest().String(), Target: 0}
	b, _ := r.MarshalJSON()
	if len(b) > 70 {
		t.Fatalf("a row encodes to %d bytes: %s", len(b), b)
	}
}

func TestContentDigestCoversKeyValueHeadersAndProperties(t *testing.T) {
	h := []Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}
	base := ContentDigest([]byte("k"), false, []byte("v"), h, nil)
	variants := map[string]string{
		"null key":         ContentDigest(nil, true, []byte("v"), h, nil),
		"empty key":        ContentDigest([]byte{}, false, []byte("v"), h, nil),
		"key":              ContentDigest([]byte("k\u200b"), false, []byte("v"), h, nil),
		"value":            ContentDigest([]byte("k"), false, []byte("w"), h, nil),
		"header value":     ContentDigest([]byte("k"), false, []byte("v"), []Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("3")}}, nil),
		"header order":     ContentDigest([]byte("k"), false, []byte("v"), []Header{h[1], h[0]}, nil),
		"header boundary":  ContentDigest([]byte("k"), false, []byte("v"), []Header{{Key: "a1", Value: nil}, h[1]}, nil),
		"a property":       ContentDigest([]byte("k"), false, []byte("v"), h, []Header{{Key: "message_id", Value: []byte("m")}}),
		"key/value swap":   ContentDigest([]byte("v"), false, []byte("k"), h, nil),
		"header dropped":   ContentDigest([]byte("k"), false, []byte("v"), h[:1], nil),
		"header as a prop": ContentDigest([]byte("k"), false, []byte("v"), h[:1], h[1:]),
	}
	for name, d := range variants {
		if d == base {
			t.Errorf("changing %s kept the digest", name)
		}
	}
}

// TestPlanHashDoesNotDependOnRecordOrder: a plan's hash is over its records
// in (partition, offset) order, whether they are held in that order (a plan
// read back from its core) or not (a plan as the planner built it).
func TestPlanHashDoesNotDependOnRecordOrder(t *testing.T) {
	p := Plan{Version: PlanVersion, Cluster: "c", DLQ: "d.DLT", Selection: Selection{All: true}, Policy: PolicySnapshot{Review: "none"}}
	for _, c := range []Coord{{1, 5}, {0, 9}, {1, 2}, {0, 3}} {
		p.Records = append(p.Records, PlanRecord{Partition: c.Partition, Offset: c.Offset, Digest: Record{Value: []byte(c.String())}.Digest(), Target: "t", Verdict: include()})
	}
	shuffled := p.Hash()
	if p.Records[0].Partition != 1 || p.Records[0].Offset != 5 {
		t.Fatal("hashing reordered the plan's own records")
	}
	sort.Slice(p.Records, func(i, j int) bool { return less(p.Records[i].Coord(), p.Records[j].Coord()) })
	if sorted := p.Hash(); sorted != shuffled {
		t.Fatalf("hash %s in DLQ order, %s as built", sorted, shuffled)
	}
}
