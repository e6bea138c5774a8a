package redrive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/berth-dev/berth/redrive/approval"
)

// PlanVersion is the plan format; it is part of the hashed content.
const PlanVersion = 1

// hashDomain prefixes the canonical encoding so a plan hash can never be
// confused with the hash of another kind of document.
const hashDomain = "berth-redrive-plan/v1\n"

// Plan is a reviewed, checked selection of DLQ records to redrive. It is
// immutable: any change makes a new plan with a new hash. Signatures are not
// part of it (see File).
type Plan struct {
	Version   int       `json:"version"`
	Cluster   string    `json:"cluster"`
	DLQ       string    `json:"dlq"`
	Selection Selection `json:"selection"`
	// Target is the topic every record goes to; "" means each record's
	// original topic (its last hop).
	Target    string `json:"target,omitempty"`
	Rate      int    `json:"rate"`       // records per second
	BatchSize int    `json:"batch_size"` // records per transaction
	// AllowOrderingHazards includes records that would arrive behind a
	// newer same-key record (they are excluded unless this is set).
	AllowOrderingHazards bool           `json:"allow_ordering_hazards"`
	Policy               PolicySnapshot `json:"policy"`
	Author               string         `json:"author"`
	CreatedAt            time.Time      `json:"created_at"`
	Records              []PlanRecord   `json:"records"`
}

// Selection records how the records were chosen: always explicit.
type Selection struct {
	Classes []string   `json:"classes,omitempty"`
	Offsets []Coord    `json:"offsets,omitempty"`
	Key     string     `json:"key,omitempty"`
	Header  string     `json:"header,omitempty"` // NAME=VALUE
	Since   *time.Time `json:"since,omitempty"`
	Until   *time.Time `json:"until,omitempty"`
}

// Empty reports whether nothing selects records (refused: a plan never
// means "everything" implicitly).
func (s Selection) Empty() bool {
	return len(s.Classes) == 0 && len(s.Offsets) == 0 && s.Key == "" && s.Header == "" && s.Since == nil && s.Until == nil
}

// PolicySnapshot is the redrive policy that applied when the plan was made
// (secrets such as the system of record's DSN are never copied).
type PolicySnapshot struct {
	Match                 string `json:"match,omitempty"`
	IdempotencyKey        string `json:"idempotency_key"`
	RequireIdempotencyKey bool   `json:"require_idempotency_key"`
	SystemOfRecord        string `json:"system_of_record,omitempty"` // driver: query
	Review                string `json:"review"`
	Approvals             int    `json:"approvals"`
	MaxRedrives           int    `json:"max_redrives"`
}

// PlanRecord is one selected record with its checks' verdict.
type PlanRecord struct {
	Partition      int32  `json:"partition"`
	Offset         int64  `json:"offset"`
	Key            []byte `json:"key"` // base64 in JSON; null for a null key
	EventID        string `json:"event_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Class          string `json:"class"`
	Origin         Origin `json:"origin"`
	// OriginHasPartition/Offset keep Origin's decode flags in the hash.
	OriginLocated bool   `json:"origin_located"`
	Target        string `json:"target"`
	ValueSHA256   string `json:"value_sha256"`
	PriorRedrives int    `json:"prior_redrives"`
	Verdict
}

// Coord returns the record's DLQ coordinates.
func (r PlanRecord) Coord() Coord { return Coord{r.Partition, r.Offset} }

// Candidate rebuilds the checks' input, so the executor can run the checks
// again over the plan as approved.
func (r PlanRecord) Candidate() Candidate {
	o := r.Origin
	o.HasPartition, o.HasOffset = r.OriginLocated, r.OriginLocated
	return Candidate{Coord: r.Coord(), EventID: r.EventID, IdempotencyKey: r.IdempotencyKey, Key: r.Key, KeyNull: r.Key == nil, Origin: o, PriorRedrives: r.PriorRedrives}
}

// NewPlanRecord fills a plan record from a parsed DLQ record.
func NewPlanRecord(p Parsed, target string) PlanRecord {
	sum := sha256.Sum256(p.Value)
	r := PlanRecord{
		Partition: p.Partition, Offset: p.Offset, EventID: p.EventID, IdempotencyKey: p.IdempotencyKey,
		Class: p.Class, ValueSHA256: hex.EncodeToString(sum[:]), PriorRedrives: p.Diag.PriorRedrives(),
		Verdict: include(),
	}
	if !p.KeyNull {
		r.Key = append([]byte{}, p.Key...)
	}
	if h := p.Diag.LastHop(); h != nil {
		r.Origin, r.OriginLocated = *h, h.Located()
	}
	r.Target = target
	if r.Target == "" {
		r.Target = r.Origin.Topic
	}
	return r
}

// Canonical is the plan's canonical encoding: Go's encoding/json of the
// struct (fields in declaration order, no maps, times in UTC RFC 3339 with
// nanoseconds, []byte as base64), records sorted by (partition, offset).
func (p Plan) Canonical() ([]byte, error) {
	q := p
	q.CreatedAt = q.CreatedAt.UTC()
	q.Records = append([]PlanRecord(nil), p.Records...)
	sort.SliceStable(q.Records, func(i, j int) bool { return less(q.Records[i].Coord(), q.Records[j].Coord()) })
	for i := range q.Records {
		r := &q.Records[i]
		r.Origin.Timestamp = r.Origin.Timestamp.UTC()
	}
	if q.Selection.Since != nil {
		t := q.Selection.Since.UTC()
		q.Selection.Since = &t
	}
	if q.Selection.Until != nil {
		t := q.Selection.Until.UTC()
		q.Selection.Until = &t
	}
	return CanonicalJSON(q)
}

// CanonicalJSON is the encoding plans are hashed in: Go's encoding/json
// (struct fields in declaration order, no maps), no HTML escaping, no
// trailing newline. Every backend's plan uses it.
func CanonicalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// DomainHash is hex SHA-256 over a domain prefix followed by b, so a plan
// hash can never be confused with the hash of another kind of document.
func DomainHash(domain string, b []byte) string {
	h := sha256.New()
	h.Write([]byte(domain))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// Hash is the plan's identity: hex SHA-256 over "berth-redrive-plan/v1\n"
// followed by the canonical encoding. Any change to the plan changes it.
func (p Plan) Hash() string {
	c, err := p.Canonical()
	if err != nil {
		// Only unencodable values (none exist in Plan) can fail.
		panic(fmt.Sprintf("redrive: plan does not encode: %v", err))
	}
	return DomainHash(hashDomain, c)
}

// Totals counts a plan's records.
type Totals struct {
	Selected int            `json:"selected"`
	Included int            `json:"included"`
	Excluded int            `json:"excluded"`
	ByReason map[Reason]int `json:"by_reason"`
	// ByClass counts records per class: total and included.
	ByClass map[string]ClassCount `json:"by_class"`
}

// ClassCount is one class's share of a plan.
type ClassCount struct {
	Selected int `json:"selected"`
	Included int `json:"included"`
}

// Totals counts records by verdict and class.
func (p Plan) Totals() Totals {
	t := Totals{ByReason: map[Reason]int{}, ByClass: map[string]ClassCount{}}
	for _, r := range Reasons {
		t.ByReason[r] = 0
	}
	for _, r := range p.Records {
		t.Selected++
		cc := t.ByClass[r.Class]
		cc.Selected++
		if r.Included {
			t.Included++
			cc.Included++
		} else {
			t.Excluded++
			t.ByReason[r.Reason]++
		}
		t.ByClass[r.Class] = cc
	}
	return t
}

// Blocked reports whether a check could not run for some record: such a plan
// must be made again once the cause is fixed, and is never executed.
func (p Plan) Blocked() (bool, string) {
	for _, r := range p.Records {
		if r.Reason == ReasonCheckFailed {
			return true, fmt.Sprintf("record %d:%d: %s", r.Partition, r.Offset, r.Detail)
		}
	}
	return false, ""
}

// ApplyVerdicts stores check results in the records (same order as cs).
func (p *Plan) ApplyVerdicts(vs []Verdict) {
	for i := range p.Records {
		p.Records[i].Verdict = vs[i]
	}
}

// Candidates returns the checks' inputs for every record, in order.
func (p Plan) Candidates() []Candidate {
	out := make([]Candidate, len(p.Records))
	for i, r := range p.Records {
		out[i] = r.Candidate()
	}
	return out
}

// File is a plan as stored and exchanged: the plan, its hash, and the
// signatures over that hash, kept outside the hashed content so adding an
// approval never changes the plan's identity.
type File struct {
	Hash       string               `json:"hash"`
	Plan       Plan                 `json:"plan"`
	Signatures []approval.Signature `json:"signatures"`
}

// NewFile wraps a plan with its hash.
func NewFile(p Plan) File {
	return File{Hash: p.Hash(), Plan: p, Signatures: []approval.Signature{}}
}

// Author returns the author's signature, if any.
func (f File) Author() *approval.Signature {
	for i := range f.Signatures {
		if f.Signatures[i].Role == approval.RoleAuthor {
			return &f.Signatures[i]
		}
	}
	return nil
}

// Approvals returns the approval signatures.
func (f File) Approvals() []approval.Signature {
	var out []approval.Signature
	for _, s := range f.Signatures {
		if s.Role == approval.RoleApproval {
			out = append(out, s)
		}
	}
	return out
}

// ErrHashMismatch means a plan file was edited after it was made.
var ErrHashMismatch = errors.New("the plan's content does not match its hash (edited after it was made?)")

// DecodeFile parses a plan file and checks its hash against its content, and
// that every signature names this hash.
func DecodeFile(raw []byte) (File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("not a Berth plan file: %v", err)
	}
	if f.Plan.Version != PlanVersion {
		return File{}, fmt.Errorf("plan version %d is not supported (want %d)", f.Plan.Version, PlanVersion)
	}
	if got := f.Plan.Hash(); got != f.Hash {
		return File{}, fmt.Errorf("%w: hash %s, content hashes to %s", ErrHashMismatch, short(f.Hash), short(got))
	}
	for _, s := range f.Signatures {
		if s.PlanHash != f.Hash {
			return File{}, fmt.Errorf("a %s signature is for plan %s, not %s", s.Role, short(s.PlanHash), short(f.Hash))
		}
	}
	if f.Signatures == nil {
		f.Signatures = []approval.Signature{}
	}
	return f, nil
}

// Encode writes the file as indented JSON.
func (f File) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
