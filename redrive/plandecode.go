package redrive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strings"
)

// DecodePlan reads a Kafka plan's core (the JSON Plan.MarshalJSON writes)
// from r and rebuilds the plan, as PlanFromCore does from a decoded Core,
// without holding the document or its decoded rows: each row becomes its
// record as it is read. A stored plan of a million records is ~65 MB of
// JSON and ~130 MB as []Row; loading it used to hold both (the JSON twice)
// beside the records built from them. Unknown fields are refused, and a
// row is checked as Core.Validate and PlanFromCore check it. When r says
// how long the document is (see sizeOf), the records are allocated once
// (see planRows).
func DecodePlan(r io.Reader) (Plan, error) {
	size := sizeOf(r)
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil {
		return Plan{}, err
	} else if t == nil {
		return PlanFromCore(Core{}) // null: a core with nothing in it
	} else if t != json.Delim('{') {
		return Plan{}, fmt.Errorf("json: cannot unmarshal %s into Go value of type redrive.Core", jsonKind(t))
	}
	head, sink, err := decodeCoreObject(dec, "Core", kafkaRows(size))
	rows, _ := sink.(*planRows)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the document started but did not end
	}
	if err != nil {
		return Plan{}, err
	}
	var c Core
	hd := json.NewDecoder(bytes.NewReader(head))
	hd.DisallowUnknownFields()
	if err := hd.Decode(&c); err != nil {
		return Plan{}, err
	}
	// Checked in PlanFromCore's order: the core's fields, its rows as
	// Core.Validate checks them, the backend, the rows as records.
	if err := c.Validate(); err != nil {
		return Plan{}, err
	}
	if err := rows.validate(c.Targets); err != nil {
		return Plan{}, err
	}
	return rows.plan(c)
}

// DecodeFileFrom reads a plan file from r as DecodeFile reads one from its
// bytes, a row at a time (see DecodePlan): neither the file (~65 bytes a
// record) nor its rows as []Row are held beside the plan's records. It
// accepts and refuses exactly what the whole file decoded as a SignedPlan
// and rebuilt by PlanFromCore did, with the same errors.
func DecodeFileFrom(r io.Reader) (File, error) {
	sp, sink, err := decodeSignedHead(r, kafkaRows(sizeOf(r)))
	if err != nil {
		return File{}, fmt.Errorf("not a Berth plan: %v", err)
	}
	rows := sink.(*planRows)
	// As DecodeSignedPlan, then PlanFromCore.
	c := sp.Plan
	if err := c.Validate(); err != nil {
		return File{}, err
	}
	if err := rows.validate(c.Targets); err != nil {
		return File{}, err
	}
	got, err := hashCanonical(func(w io.Writer) error { return c.writeCanonical(w, rows.n(), rows.writeCanonical) })
	if err != nil {
		return File{}, err
	}
	if sp.Signatures, err = checkHash(sp.Hash, got, sp.Signatures); err != nil {
		return File{}, err
	}
	p, err := rows.plan(c)
	if err != nil {
		return File{}, err
	}
	return File{Hash: sp.Hash, Plan: p, Signatures: sp.Signatures}, nil
}

// sizeOf is the length of the document r holds when r says (a
// bytes.Reader or strings.Reader from its start, an io.LimitedReader its
// limit, a regular file its size, or any reader with Size), else 0.
func sizeOf(r io.Reader) int64 {
	switch x := r.(type) {
	case interface{ Size() int64 }:
		return x.Size()
	case *io.LimitedReader:
		return x.N
	case interface{ Stat() (fs.FileInfo, error) }:
		if st, err := x.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
	}
	return 0
}

// rowSink takes a core's rows as they are decoded (planRows: a Kafka
// plan's; queueRows: a RabbitMQ plan's).
type rowSink interface {
	decode(dec *json.Decoder, field string) error
}

// kafkaRows makes the sinks of a Kafka plan's rows; size is the
// document's length (0: not known).
func kafkaRows(size int64) func(null bool) rowSink {
	return func(null bool) rowSink { return &planRows{null: null, size: size} }
}

// decodeSignedHead reads a plan file: its hash, signatures and core
// without rows as a SignedPlan, its rows into a sink newRows makes.
func decodeSignedHead(r io.Reader, newRows func(null bool) rowSink) (SignedPlan, rowSink, error) {
	var sp SignedPlan
	head, rows, err := decodeSignedRaw(r, newRows)
	if err != nil || head == nil {
		return sp, rows, err
	}
	hd := json.NewDecoder(head)
	hd.DisallowUnknownFields()
	if err := hd.Decode(&sp); err != nil {
		return sp, nil, err
	}
	return sp, rows, nil
}

// decodeSignedRaw is decodeSignedHead before the head (the file without
// its rows) is decoded: nil for a null document.
func decodeSignedRaw(r io.Reader, newRows func(null bool) rowSink) (*bytes.Buffer, rowSink, error) {
	rows := newRows(true)
	dec := json.NewDecoder(r)
	t, err := dec.Token()
	switch {
	case err != nil:
		return nil, nil, err
	case t == nil:
		return nil, rows, nil // null: nothing in it
	case t != json.Delim('{'):
		return nil, nil, fmt.Errorf("json: cannot unmarshal %s into Go value of type redrive.SignedPlan", jsonKind(t))
	}
	// head is the file without its rows, decoded as a SignedPlan at the
	// end so every other field is read exactly as before.
	head := bytes.NewBufferString("{")
	err = decodeObject(dec, head, func(key string) (json.RawMessage, bool, error) {
		// encoding/json matches keys without regard to case.
		if !strings.EqualFold(key, "plan") {
			return nil, false, nil
		}
		t, err := dec.Token()
		if err != nil {
			return nil, true, err
		}
		switch t {
		case json.Delim('{'):
			h, rs, err := decodeCoreObject(dec, "Core.plan", newRows)
			rows = rs
			return h, true, err
		case json.Delim('['):
			// Not a core: refused below as encoding/json refuses it.
			for dec.More() {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return nil, true, err
				}
			}
			_, err := dec.Token()
			return json.RawMessage("[]"), true, err
		default:
			rows = newRows(true)
			v, err := json.Marshal(t)
			return v, true, err
		}
	})
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the document started but did not end
	}
	if err != nil {
		return nil, nil, err
	}
	return head, rows, nil
}

// decodeObject reads the members of the object whose '{' dec just read,
// through its '}', appending each to head ("{" so far) and closing it.
// value reads a member's value itself when it says so (taken): its JSON
// goes in head in place of the value read.
func decodeObject(dec *json.Decoder, head *bytes.Buffer, value func(key string) (v json.RawMessage, taken bool, err error)) error {
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		v, taken, err := value(key)
		if err != nil {
			return err
		}
		if !taken {
			if err := dec.Decode(&v); err != nil {
				return err
			}
		}
		if head.Len() > 1 {
			head.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		head.Write(k)
		head.WriteByte(':')
		head.Write(v)
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	head.WriteByte('}')
	return nil
}

// decodeCoreObject reads a core whose '{' dec just read: its JSON without
// the rows, and the rows (into a sink newRows makes). field is how
// encoding/json's errors name the core ("Core", "Core.plan").
func decodeCoreObject(dec *json.Decoder, field string, newRows func(null bool) rowSink) (json.RawMessage, rowSink, error) {
	head := bytes.NewBufferString("{")
	rows := newRows(true)
	err := decodeObject(dec, head, func(key string) (json.RawMessage, bool, error) {
		// encoding/json matches keys without regard to case; so does this.
		if !strings.EqualFold(key, "rows") {
			return nil, false, nil
		}
		// A later "rows" replaces an earlier one, as with encoding/json.
		rows = newRows(false)
		if err := rows.decode(dec, field); err != nil {
			return nil, true, err
		}
		// Held aside: the head says nothing about the rows.
		return json.RawMessage("null"), true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return head.Bytes(), rows, nil
}

// planRows gathers a plan's rows as the records they become while they
// are decoded. The number of rows is known only at the end: the records
// are allocated once, for the number of rows the document's size leaves
// room for at the rate its first rows took, so a million of them (~216 MB)
// are neither regrown by appending (old and new arrays at once) nor held
// beside the rows in another form.
type planRows struct {
	recs []PlanRecord
	// targets are the rows' indexes into Core.Targets, checked and
	// resolved once the whole core is read (a file may list its targets
	// after its rows).
	targets []int32
	// odd holds, by index, the rows a record cannot hold as read (a
	// location or digest that does not parse, a target past int32, a
	// verdict that is not a reason): only an edited plan has any, and it
	// is refused.
	odd map[int]Row
	// null: the rows were null or absent (a core without rows).
	null bool
	// size is the document's length in bytes (0: not known).
	size int64
}

// sizeSample is how many rows are read before the records are allocated
// for the rest.
const sizeSample = 1024

// n is the number of rows, -1 when they are null.
func (pr *planRows) n() int {
	if pr.null {
		return -1
	}
	return len(pr.recs)
}

// decode reads the rows array (or null) from dec; field names the core
// in errors, as encoding/json names it.
func (pr *planRows) decode(dec *json.Decoder, field string) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		pr.null = true
		return nil
	}
	if t != json.Delim('[') {
		return fmt.Errorf("json: cannot unmarshal %s into Go struct field %s.rows of type []redrive.Row", jsonKind(t), field)
	}
	start := dec.InputOffset()
	for dec.More() {
		if len(pr.recs) == sizeSample && pr.size > 0 {
			pr.reserve(dec.InputOffset()-start, pr.size-dec.InputOffset())
		}
		var row Row
		if err := dec.Decode(&row); err != nil {
			return err
		}
		co, okLoc := parseLoc(row.Loc)
		d, okDigest := ParseDigest(row.Digest)
		v, okVerdict := reasonOf(row.Verdict)
		okTarget := row.Target >= math.MinInt32 && row.Target <= math.MaxInt32
		if !okLoc || !okDigest || !okVerdict || !okTarget {
			if pr.odd == nil {
				pr.odd = map[int]Row{}
			}
			pr.odd[len(pr.recs)] = row
		}
		pr.recs = append(pr.recs, PlanRecord{Partition: co.Partition, Offset: co.Offset, Digest: d, Verdict: Verdict{Included: v == "", Reason: v}})
		pr.targets = append(pr.targets, int32(row.Target))
	}
	_, err = dec.Token()
	return err
}

// reserve makes room for the rows still to come in rest bytes, the rows
// so far having taken read bytes. Rows grow longer through a plan (higher
// partitions and offsets), so the first rows' rate overestimates the
// rows to come, a little: a million-record plan reserves ~5% too many.
// Should rows to come be shorter after all, appending grows the records.
func (pr *planRows) reserve(read, rest int64) {
	if read <= 0 || rest <= 0 {
		return
	}
	per := float64(read) / float64(len(pr.recs))
	n := len(pr.recs) + int(float64(rest)/per*1.01) + 16
	recs := make([]PlanRecord, len(pr.recs), n)
	copy(recs, pr.recs)
	targets := make([]int32, len(pr.targets), n)
	copy(targets, pr.targets)
	pr.recs, pr.targets = recs, targets
}

// reasonOf is the Reason constant v names ("" included), false when v is
// not a reason: a record keeps the constant, not the decoded copy.
func reasonOf(v Reason) (Reason, bool) {
	if v == "" {
		return "", true
	}
	for _, x := range Reasons {
		if x == v {
			return x, true
		}
	}
	return "", false
}

// row is row i as read.
func (pr *planRows) row(i int) Row {
	if r, ok := pr.odd[i]; ok {
		return r
	}
	r := pr.recs[i]
	v := Reason("")
	if !r.Included {
		v = r.Reason
	}
	return Row{Loc: r.Coord().String(), Digest: r.Digest.String(), Target: int(pr.targets[i]), Verdict: v}
}

// writeCanonical writes row i as Core.WriteCanonical does.
func (pr *planRows) writeCanonical(b *bytes.Buffer, i int) {
	if _, ok := pr.odd[i]; ok {
		pr.row(i).writeCanonical(b)
		return
	}
	r := pr.recs[i]
	kafkaRow{coord: r.Coord(), digest: r.Digest, target: int(pr.targets[i]), verdict: r.Reason}.write(b, writeASCIIString)
}

// validate checks the rows as Core.Validate does, in the same order.
func (pr *planRows) validate(targets []string) error {
	recs := pr.recs
	// Plans are written sorted: then no record can repeat, and no set of
	// a million locations is needed to say so. (A location that parses is
	// in its one canonical form: same coordinates, same location.)
	sorted := true
	for i := range pr.odd {
		if _, ok := parseLoc(pr.odd[i].Loc); !ok {
			sorted = false
		}
	}
	for i := 1; i < len(recs) && sorted; i++ {
		sorted = less(recs[i-1].Coord(), recs[i].Coord())
	}
	var seen map[string]bool
	if !sorted {
		seen = make(map[string]bool, len(recs))
	}
	for i := range recs {
		if _, odd := pr.odd[i]; !odd && seen == nil {
			// The common case, checked without making the row's strings.
			t := pr.targets[i]
			if t < -1 || int(t) >= len(targets) || (t == -1 && recs[i].Included) {
				return pr.validateRow(i, targets, nil)
			}
			continue
		}
		if err := pr.validateRow(i, targets, seen); err != nil {
			return err
		}
	}
	return nil
}

// validateRow checks row i as Core.Validate does.
func (pr *planRows) validateRow(i int, targets []string, seen map[string]bool) error {
	r := pr.row(i)
	if seen != nil {
		if seen[r.Loc] {
			return fmt.Errorf("row %s: listed twice", r.Loc)
		}
		seen[r.Loc] = true
	}
	if r.Target < -1 || r.Target >= len(targets) {
		return fmt.Errorf("row %s: target %d is not in targets (0..%d)", r.Loc, r.Target, len(targets)-1)
	}
	if r.Target == -1 && r.Included() {
		return fmt.Errorf("row %s: included with no target", r.Loc)
	}
	if _, ok := ParseDigest(r.Digest); !ok {
		return fmt.Errorf("row %s: digest %q is not base64url SHA-256", r.Loc, r.Digest)
	}
	return nil
}

// plan rebuilds the plan from its validated core c (without rows) and the
// rows, as PlanFromCore does from the whole core.
func (pr *planRows) plan(c Core) (Plan, error) {
	locs := c.Selection.Locs
	c.Selection.Locs = false // the rows, not the header, give the offsets
	c.Rows = nil
	p, err := PlanFromCore(c)
	if err != nil {
		return Plan{}, err
	}
	if p.Records, err = pr.records(c.Targets); err != nil {
		return Plan{}, err
	}
	if locs && len(p.Records) > 0 {
		p.Selection.Offsets = make([]Coord, len(p.Records))
		for i, r := range p.Records {
			p.Selection.Offsets[i] = r.Coord()
		}
	}
	return p, nil
}

// records checks the rows as PlanFromCore does and returns them as plan
// records (validated: every target index is in targets).
func (pr *planRows) records(targets []string) ([]PlanRecord, error) {
	for i := range pr.recs {
		if o, odd := pr.odd[i]; odd {
			if _, ok := parseLoc(o.Loc); !ok {
				return nil, fmt.Errorf("row %q: want PARTITION:OFFSET", o.Loc)
			}
			if _, ok := reasonOf(o.Verdict); !ok {
				return nil, fmt.Errorf("row %s: verdict %q is not a reason", o.Loc, o.Verdict)
			}
			return nil, errors.New("redrive: a row validated but does not fit a record") // cannot happen: validate refused it
		}
		if t := pr.targets[i]; t >= 0 {
			pr.recs[i].Target = targets[t]
		}
	}
	recs := pr.recs
	if recs == nil {
		recs = []PlanRecord{}
	}
	*pr = planRows{}
	return recs, nil
}

// jsonKind names what a JSON token opens or is, as encoding/json's type
// errors do.
func jsonKind(t json.Token) string {
	switch t.(type) {
	case json.Delim:
		if t == json.Delim('[') {
			return "array"
		}
		return "object"
	case bool:
		return "bool"
	case string:
		return "string"
	default:
		return "number"
	}
}
