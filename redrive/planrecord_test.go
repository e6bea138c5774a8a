package redrive

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/redrive/approval"
)

// A digest's text is exactly what plan files have always held (unpadded
// base64url of the SHA-256), and only that text reads back as it: a
// digest's 2 spare bits set, padding, or the wrong length is no digest.
func TestDigestTextIsTheSHA256InBase64URL(t *testing.T) {
	for _, v := range []string{"", "v", "e1", strings.Repeat("x", 1000)} {
		rec := Record{Key: []byte("k"), Value: []byte(v)}
		d := rec.Digest()
		text := ContentDigest(rec.Key, false, rec.Value, nil, nil)
		if d.String() != text || len(text) != 43 {
			t.Fatalf("digest text %q, ContentDigest %q", d.String(), text)
		}
		back, ok := ParseDigest(text)
		if !ok || back != d {
			t.Fatalf("%q reads back as %v %v", text, back, ok)
		}
		if b, _ := json.Marshal(d); string(b) != `"`+text+`"` {
			t.Fatalf("JSON %s", b)
		}
		var u Digest
		if err := json.Unmarshal([]byte(`"`+text+`"`), &u); err != nil || u != d {
			t.Fatalf("from JSON: %v %v", u, err)
		}
	}
	d := Digest(sha256.Sum256([]byte("x")))
	text := d.String()
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", text[42])
	spare := string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^1])
	for name, s := range map[string]string{
		"spare bits set": text[:42] + spare,
		"padded":         text + "=",
		"short":          text[:42],
		"standard alphabet": strings.NewReplacer("-", "+", "_", "/").Replace(
			Digest(sha256.Sum256([]byte("needs-both-alphabets??>>"))).String()),
		"empty": "",
	} {
		if name == "standard alphabet" && !strings.ContainsAny(s, "+/") {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if _, ok := ParseDigest(s); ok {
			t.Errorf("%s: %q read as a digest", name, s)
		}
	}
}

// hostilePlan is a plan as the planner makes it: out of order, with
// excluded records, a record with no target, targets needing escapes.
func hostilePlan() Plan {
	p := Plan{Version: PlanVersion, Cluster: "cl-\u00e9-1", DLQ: "payments.DLT", Selection: Selection{Key: "a<b>&\u2028"},
		Policy: PolicySnapshot{IdempotencyKey: "json:paymentId", Review: "required", Approvals: 1, MaxRedrives: 3}, Rate: 100, BatchSize: 10,
		CreatedAt: time.Date(2026, 12, 1, 14, 0, 0, 123456789, time.UTC)}
	for i, c := range []Coord{{1, 5}, {0, 9}, {1, 2}, {0, 3}, {2, 1 << 40}} {
		r := PlanRecord{Partition: c.Partition, Offset: c.Offset, Digest: Record{Value: []byte(c.String())}.Digest(), Target: []string{"payments", "ship<&>", "payments", "", "\U0001F4A5"}[i], Verdict: include()}
		switch i {
		case 1:
			r.Verdict = Verdict{Reason: ReasonAlreadyRedriven, Detail: "ledger"}
		case 3:
			r.Verdict = Verdict{Reason: ReasonCheckFailed, Detail: "no target"}
		}
		p.Records = append(p.Records, r)
	}
	return p
}

// A plan file is written a row at a time, and the bytes are those the
// whole core encoded at once gave: the file format does not change.
func TestPlanFileWrittenRowByRowIsTheWholeCoreEncoded(t *testing.T) {
	for name, p := range map[string]Plan{"sample": hostilePlan(), "empty": {Cluster: "c", Records: []PlanRecord{}}, "nil records": {Cluster: "c"}} {
		f := NewFile(p)
		for _, sigs := range [][]approval.Signature{nil, {}, {{Role: approval.RoleAuthor, PlanHash: f.Hash, Fingerprint: "SHA256:x<y>"}}} {
			f.Signatures = sigs
			want, err := SignedPlan{Hash: f.Hash, Plan: p.Core(), Signatures: sigs}.Encode()
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: row by row\n%s\nwhole core\n%s", name, got, want)
			}
			var j bytes.Buffer
			if err := p.WriteJSON(&j); err != nil {
				t.Fatal(err)
			}
			if m, _ := json.Marshal(p.Core()); !bytes.Equal(j.Bytes(), m) {
				t.Fatalf("%s: WriteJSON\n%s\njson.Marshal\n%s", name, j.Bytes(), m)
			}
		}
	}
}

// A plan file read back and written again is the same bytes, and its
// records are the plan's in DLQ order.
func TestPlanFileReadAndWrittenAgainIsByteIdentical(t *testing.T) {
	f := NewFile(hostilePlan())
	f.Signatures = []approval.Signature{{Role: approval.RoleAuthor, PlanHash: f.Hash, Fingerprint: "SHA256:k"}}
	raw, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	again, err := back.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Fatalf("written again:\n%s\nwas:\n%s", again, raw)
	}
	if back.Hash != f.Hash || back.Plan.Hash() != f.Hash {
		t.Fatalf("hash %s / %s, want %s", back.Hash, back.Plan.Hash(), f.Hash)
	}
	want := []Coord{{0, 3}, {0, 9}, {1, 2}, {1, 5}, {2, 1 << 40}}
	for i, r := range back.Plan.Records {
		if r.Coord() != want[i] || r.Digest != (Record{Value: []byte(want[i].String())}.Digest()) {
			t.Fatalf("record %d: %v %s", i, r.Coord(), r.Digest)
		}
	}
	if r := back.Plan.Records[1]; r.Included || r.Reason != ReasonAlreadyRedriven || r.Target != "ship<&>" || r.Detail != "" {
		t.Fatalf("excluded record read back as %+v", r)
	}
}

// decodeWhole is how a plan file was read before DecodeFileFrom: the whole
// file decoded as a SignedPlan, then rebuilt by PlanFromCore.
func decodeWhole(raw []byte) (File, error) {
	sp, err := DecodeSignedPlan(raw)
	if err != nil {
		return File{}, err
	}
	p, err := PlanFromCore(sp.Plan)
	if err != nil {
		return File{}, err
	}
	return File{Hash: sp.Hash, Plan: p, Signatures: sp.Signatures}, nil
}

// A plan file read a row at a time is refused exactly when, and with the
// error with which, the whole file decoded at once was: edited content,
// malformed rows, JSON that is not a plan.
func TestPlanFileReadRowByRowRefusesWhatTheWholeFileDecodeRefused(t *testing.T) {
	c := sampleCore()
	d := c.Rows[0].Digest
	c.Rows = append(c.Rows, Row{Loc: "1:0", Digest: d, Target: -1, Verdict: ReasonCheckFailed}, Row{Loc: "1:7", Digest: d, Target: 1})
	c.Selection.Locs = true
	sp, err := NewSignedPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	sp.Signatures = []approval.Signature{{Role: approval.RoleAuthor, PlanHash: sp.Hash, Fingerprint: "SHA256:k"}}
	raw, err := sp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// rehash makes an edit a correctly hashed plan, so the checks after
	// the hash's are reached.
	rehash := func(s string) string {
		var x SignedPlan
		if err := json.Unmarshal([]byte(s), &x); err != nil {
			t.Fatalf("rehash %.80s: %v", s, err)
		}
		h, err := x.Plan.Hash()
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(s, sp.Hash, h)
	}
	s := string(raw)
	rows := strings.Index(s, `"rows":`)
	edits := map[string]string{
		"as made":                 s,
		"edited target":           strings.Replace(s, `"shipment-jobs"`, `"shipment-jobz"`, 1),
		"edited, rehashed":        rehash(strings.Replace(s, `"shipment-jobs"`, `"shipment-jobz"`, 1)),
		"unknown field":           strings.Replace(s, `"dlq":`, `"extra":1,"dlq":`, 1),
		"unknown top field":       strings.Replace(s, `"signatures":`, `"extra":1,"signatures":`, 1),
		"v1 format":               strings.Replace(s, PlanFormat, "berth-redrive-plan/v1", 1),
		"bad target":              strings.Replace(s, `,1,"already_redriven"]`, `,7,"ledger"]`, 1),
		"huge target":             strings.Replace(s, `,1,"already_redriven"]`, `,99999999999,"ledger"]`, 1),
		"negative target":         strings.Replace(s, `,1,"already_redriven"]`, `,-2,"ledger"]`, 1),
		"included, no target":     strings.Replace(s, `-1,"check_failed"]`, `-1,""]`, 1),
		"unknown verdict":         strings.Replace(s, `"already_redriven"]`, `"fine"]`, 1),
		"unknown verdict, hashed": rehash(strings.Replace(s, `"already_redriven"]`, `"fine"]`, 1)),
		"short row":               strings.Replace(s, `,1,"already_redriven"]`, `]`, 1),
		"target a string":         strings.Replace(s, `,1,"already_redriven"]`, `,"1","already_redriven"]`, 1),
		"local time":              strings.Replace(s, `.123Z"`, `.123+01:00"`, 1),
		"rate a string":           strings.Replace(s, `"rate":100`, `"rate":"100"`, 1),
		"duplicated row":          strings.Replace(s, `"1:7"`, `"0:1"`, 1),
		"duplicated row, hashed":  rehash(strings.Replace(s, `"1:7"`, `"0:1"`, 1)),
		"not a location":          strings.Replace(s, `"1:7"`, `"1:07"`, 1),
		"not a location, hashed":  rehash(strings.Replace(s, `"1:7"`, `"1:07"`, 1)),
		"out of order, hashed":    rehash(strings.Replace(strings.Replace(s, `"1:7"`, `"9:9"`, 1), `"0:1"`, `"1:7"`, 1)),
		"no such digest":          strings.Replace(s, `["0:1","`, `["0:1","x`, 1),
		"digest spare bits":       strings.Replace(s, d+`"`, d[:42]+string(d[42]^1)+`"`, 1),
		"kafka only, hashed":      rehash(strings.Replace(s, `"backend":"kafka"`, `"backend":"rabbitmq"`, 1)),
		"other plan's signature":  strings.Replace(s, `"plan_hash":"`+sp.Hash, `"plan_hash":"`+strings.Repeat("0", 64), 1),
		"rows not an array":       s[:rows] + `"rows":{}}}`,
		"rows null":               s[:rows] + `"rows":null},"signatures":[]}`,
		"rows null, hashed":       rehash(s[:rows] + `"rows":null},"signatures":[]}`),
		"rows a string":           s[:rows] + `"rows":"x"}}`,
		"plan an array":           `{"hash":"x","plan":[1,{"a":2}],"signatures":[]}`,
		"plan a string":           `{"hash":"x","plan":"p","signatures":[]}`,
		"plan null":               `{"hash":"x","plan":null,"signatures":[]}`,
		"upper-case keys":         strings.Replace(strings.Replace(s, `"plan":`, `"PLAN":`, 1), `"rows":`, `"Rows":`, 1),
		"cut short":               s[:len(s)/2],
		"cut in the head":         s[:40],
		"null":                    "null",
		"an array":                "[1]",
		"a number":                "7",
		"empty":                   "",
		"not json at all":         "{",
		"trailing garbage":        s + "}{",
		"syntax error in a row":   strings.Replace(s, `["0:1",`, `["0:1",,`, 1),
	}
	for name, e := range edits {
		if e == s && name != "as made" {
			t.Fatalf("%s: the edit did not apply", name)
		}
		want, werr := decodeWhole([]byte(e))
		got, gerr := DecodeFile([]byte(e))
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Errorf("%s: row by row %v, whole file %v", name, gerr, werr)
			continue
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: row by row %+v, whole file %+v", name, got, want)
		}
	}
}

// A plan of thousands of records is read into records allocated once, for
// about as many rows as the file holds: the records of a million-record
// plan (~216 MB) are never regrown, nor held beside a copy of the rows.
func TestLargePlanFileIsReadIntoRecordsAllocatedOnce(t *testing.T) {
	p := Plan{Cluster: "c", DLQ: "payments.DLT", Selection: Selection{Offsets: []Coord{{0, 1}}}, Policy: PolicySnapshot{Review: "none"},
		CreatedAt: time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)}
	const parts, per = 12, 2000
	for part := int32(0); part < parts; part++ {
		for off := int64(0); off < per; off++ {
			r := PlanRecord{Partition: part, Offset: off * 37, Digest: Digest(sha256.Sum256([]byte{byte(part), byte(off), byte(off >> 8)})), Target: "payments", Verdict: include()}
			if off%10 == 3 {
				r.Verdict = Verdict{Reason: ReasonEffectCommitted}
			}
			p.Records = append(p.Records, r)
		}
	}
	f := NewFile(p)
	raw, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeWhole(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("read row by row, the plan differs from the whole file decoded")
	}
	if n, c := len(got.Plan.Records), cap(got.Plan.Records); n != parts*per || c < n || c > n+n/10 {
		t.Fatalf("%d records in room for %d: want room for at most 10%% more", n, c)
	}
	if again, _ := got.Encode(); !bytes.Equal(again, raw) {
		t.Fatal("written again, the file differs")
	}
	var core bytes.Buffer
	if err := p.WriteJSON(&core); err != nil {
		t.Fatal(err)
	}
	stored, err := DecodePlan(bytes.NewReader(core.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if n, c := len(stored.Records), cap(stored.Records); stored.Hash() != f.Hash || c > n+n/10 {
		t.Fatalf("stored plan read back: hash %s (want %s), %d records in room for %d", stored.Hash(), f.Hash, n, c)
	}
}
