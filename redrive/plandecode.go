package redrive

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// DecodePlan reads a Kafka plan's core (the JSON Plan.MarshalJSON writes)
// from r and rebuilds the plan, as PlanFromCore does from a decoded Core,
// without holding the document or its decoded rows: each row is kept in a
// compact form as it is read. A stored plan of a million records is ~65 MB
// of JSON and ~130 MB of rows; loading it used to hold both (the JSON
// twice) beside the ~300 MB of records built from them. Unknown fields are refused, and a
// row is checked as Core.Validate and PlanFromCore check it.
func DecodePlan(r io.Reader) (Plan, error) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil {
		return Plan{}, err
	} else if t == nil {
		return PlanFromCore(Core{}) // null: a core with nothing in it
	} else if t != json.Delim('{') {
		return Plan{}, fmt.Errorf("json: cannot unmarshal %s into Go value of type redrive.Core", jsonKind(t))
	}
	p, err := decodePlan(dec)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the document started but did not end
	}
	return p, err
}

func decodePlan(dec *json.Decoder) (Plan, error) {
	// head is the core without its rows, decoded as a Core at the end so
	// every other field is read exactly as before.
	head := bytes.NewBufferString("{")
	var rows planRows
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return Plan{}, err
		}
		key, _ := t.(string)
		// encoding/json matches keys without regard to case; so does this.
		if strings.EqualFold(key, "rows") {
			if err := rows.decode(dec); err != nil {
				return Plan{}, err
			}
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return Plan{}, err
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
		return Plan{}, err
	}
	head.WriteByte('}')
	var c Core
	hd := json.NewDecoder(head)
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
	locs := c.Selection.Locs
	c.Selection.Locs = false // the rows, not the header, give the offsets
	p, err := PlanFromCore(c)
	if err != nil {
		return Plan{}, err
	}
	if p.Records, err = rows.records(c.Targets); err != nil {
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

// planRows gathers a plan's rows while they are decoded, in a compact
// form (56 bytes a row): the number of rows is known only at the end, and
// growing the ~300-byte records by appending would allocate several times
// their size.
type planRows struct {
	rows []planRow
	// badLocs are the rows whose location does not parse, by index (an
	// edited plan; refused once the core's own fields are checked).
	badLocs map[int]string
}

type planRow struct {
	partition int32
	offset    int64
	// target indexes Core.Targets, resolved once the whole core is read
	// (a file may list its targets after its rows).
	target  int
	digest  string
	verdict Reason
}

func (r planRow) coord() Coord { return Coord{r.partition, r.offset} }

// decode reads the rows array (or null) from dec; a later "rows" key
// replaces an earlier one, as encoding/json would.
func (pr *planRows) decode(dec *json.Decoder) error {
	*pr = planRows{}
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if t != json.Delim('[') {
		return fmt.Errorf("json: cannot unmarshal %s into Go struct field Core.rows of type []redrive.Row", jsonKind(t))
	}
	for dec.More() {
		var row Row
		if err := dec.Decode(&row); err != nil {
			return err
		}
		co, ok := parseLoc(row.Loc)
		if !ok {
			if pr.badLocs == nil {
				pr.badLocs = map[int]string{}
			}
			pr.badLocs[len(pr.rows)] = row.Loc
		}
		pr.rows = append(pr.rows, planRow{partition: co.Partition, offset: co.Offset, target: row.Target, digest: row.Digest, verdict: row.Verdict})
	}
	_, err = dec.Token()
	return err
}

func (pr *planRows) loc(i int) string {
	if l, ok := pr.badLocs[i]; ok {
		return l
	}
	return pr.rows[i].coord().String()
}

// validate checks the rows as Core.Validate does, in the same order.
func (pr *planRows) validate(targets []string) error {
	rows := pr.rows
	// Plans are written sorted: then no record can repeat, and no set of
	// a million coordinates is needed to say so.
	sorted := len(pr.badLocs) == 0
	for i := 1; i < len(rows) && sorted; i++ {
		sorted = less(rows[i-1].coord(), rows[i].coord())
	}
	var seen map[string]bool
	if !sorted {
		seen = make(map[string]bool, len(rows))
	}
	for i, r := range rows {
		loc := pr.loc(i)
		if seen != nil {
			if seen[loc] {
				return fmt.Errorf("row %s: listed twice", loc)
			}
			seen[loc] = true
		}
		if r.target < -1 || r.target >= len(targets) {
			return fmt.Errorf("row %s: target %d is not in targets (0..%d)", loc, r.target, len(targets)-1)
		}
		if r.target == -1 && r.verdict == "" {
			return fmt.Errorf("row %s: included with no target", loc)
		}
		if b, err := base64.RawURLEncoding.DecodeString(r.digest); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("row %s: digest %q is not base64url SHA-256", loc, r.digest)
		}
	}
	return nil
}

// records checks the rows as PlanFromCore does and returns them as plan
// records.
func (pr *planRows) records(targets []string) ([]PlanRecord, error) {
	recs := make([]PlanRecord, len(pr.rows))
	for i, r := range pr.rows {
		if l, bad := pr.badLocs[i]; bad {
			return nil, fmt.Errorf("row %q: want PARTITION:OFFSET", l)
		}
		if r.verdict != "" && !knownReason(r.verdict) {
			return nil, fmt.Errorf("row %s: verdict %q is not a reason", pr.loc(i), r.verdict)
		}
		recs[i] = PlanRecord{Partition: r.partition, Offset: r.offset, Digest: r.digest, Verdict: Verdict{Included: r.verdict == "", Reason: r.verdict}}
		if r.target >= 0 {
			recs[i].Target = targets[r.target]
		}
	}
	pr.rows = nil
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
