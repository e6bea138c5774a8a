package redrive

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/redrive/approval"
)

// PlanVersion is the plan format's version (see PlanFormat).
const PlanVersion = 2

// Plan is a reviewed, checked selection of DLQ records to redrive, as held
// in memory. It is immutable: any change makes a new plan with a new hash.
// Only its Core is stored, exchanged and hashed (Plan's JSON is its Core);
// the per-record fields marked "derived" are filled from the records by
// whoever read them (the planner when it makes the plan, Derive when a
// stored plan is shown or executed) and are never trusted from a file.
// Signatures are not part of it (see File).
type Plan struct {
	Version   int
	Cluster   string
	DLQ       string
	Selection Selection
	// Target is the topic every record goes to; "" means each record's
	// original topic (its last hop).
	Target    string
	Rate      int // records per second
	BatchSize int // records per transaction
	// AllowOrderingHazards includes records that would arrive behind a
	// newer same-key record (they are excluded unless this is set).
	AllowOrderingHazards bool
	Policy               PolicySnapshot
	// Author is who ran `redrive plan` (the OS user): informative only,
	// never stored; the author is whoever signed as author.
	Author    string
	CreatedAt time.Time
	Records   []PlanRecord
}

// Selection records how the records were chosen: always explicit.
type Selection struct {
	// All selects every record read; it must be said explicitly (--all).
	All     bool       `json:"all,omitempty"`
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
	return !s.All && len(s.Classes) == 0 && len(s.Offsets) == 0 && s.Key == "" && s.Header == "" && s.Since == nil && s.Until == nil
}

// PolicySnapshot is the redrive policy that applied when the plan was made
// (secrets such as the system of record's DSN are never copied).
type PolicySnapshot struct {
	Match                 string `json:"match,omitempty"`
	EventID               string `json:"event_id,omitempty"`
	IdempotencyKey        string `json:"idempotency_key"`
	RequireIdempotencyKey bool   `json:"require_idempotency_key"`
	SystemOfRecord        string `json:"system_of_record,omitempty"` // driver: query
	Review                string `json:"review"`
	Approvals             int    `json:"approvals"`
	MaxRedrives           int    `json:"max_redrives"`
	// OrderingKey is the RabbitMQ policy's ordering_key (json:FIELD or
	// header:NAME): the business key whose messages keep their order.
	OrderingKey string `json:"ordering_key,omitempty"`
}

// PlanRecord is one selected record with its checks' verdict. Coordinates,
// Digest, Target and the verdict's Included/Reason are in the hashed core;
// the rest is derived from the record (see Plan). A plan holds a million of
// them at incident scale, so the record is kept compact (~216 bytes plus
// its key, event id and idempotency key): the digest is held as its 32
// bytes, the origin as only what the checks read, repeated strings
// (target, class, origin topic) are shared by whoever fills them.
type PlanRecord struct {
	Partition int32 `json:"partition"`
	// PriorRedrives is derived (beside Partition: they share 8 bytes).
	PriorRedrives int32  `json:"prior_redrives"`
	Offset        int64  `json:"offset"`
	Digest        Digest `json:"digest"`
	Target        string `json:"target"`
	// Derived from the record and the plan's policy:
	Key            []byte     `json:"key"` // base64 in JSON; null for a null key
	EventID        string     `json:"event_id"`
	IdempotencyKey string     `json:"idempotency_key"`
	Class          string     `json:"class"`
	Origin         PlanOrigin `json:"origin"`
	Verdict
}

// PlanOrigin is where a plan record last failed, as the checks use it: a
// hop's topic, partition and offset and whether they locate the source
// record (Origin.Located). A hop's timestamp and consumer group are shown
// by `dlq` commands from the record itself, never from a plan.
type PlanOrigin struct {
	Topic     string `json:"topic"`
	Offset    int64  `json:"offset"`
	Partition int32  `json:"partition"`
	Located   bool   `json:"located"`
}

// Coord returns the record's DLQ coordinates.
func (r PlanRecord) Coord() Coord { return Coord{r.Partition, r.Offset} }

// Derived reports whether the derived fields were filled from the record
// (Fill always sets a class; a plan read back from its core has none until
// Derive fills it).
func (r PlanRecord) Derived() bool { return r.Class != "" }

// Candidate rebuilds the checks' input, so the executor can run the checks
// again over the plan as approved.
func (r PlanRecord) Candidate() Candidate {
	o := Origin{Topic: r.Origin.Topic, Partition: r.Origin.Partition, Offset: r.Origin.Offset, HasPartition: r.Origin.Located, HasOffset: r.Origin.Located}
	return Candidate{Coord: r.Coord(), EventID: r.EventID, IdempotencyKey: r.IdempotencyKey, Key: r.Key, KeyNull: r.Key == nil, Origin: o, PriorRedrives: int(r.PriorRedrives), Target: r.Target}
}

// NewPlanRecord fills a plan record from a parsed DLQ record.
func NewPlanRecord(p Parsed, target string) PlanRecord {
	r := PlanRecord{Partition: p.Partition, Offset: p.Offset, Digest: p.Record.Digest(), Verdict: include()}
	r.Fill(p)
	r.Target = DeriveTarget(p, target)
	return r
}

// Fill sets the derived fields from the parsed record.
func (r *PlanRecord) Fill(p Parsed) {
	r.EventID, r.IdempotencyKey, r.Class = p.EventID, p.IdempotencyKey, p.Class
	// A count of redrives beyond int32 cannot be written in headers a
	// broker accepts; clamped all the same rather than wrapped.
	r.PriorRedrives = int32(min(p.Diag.PriorRedrives(), math.MaxInt32))
	r.Key = nil
	if !p.KeyNull {
		r.Key = append([]byte{}, p.Key...)
	}
	r.Origin = PlanOrigin{}
	if h := p.Diag.LastHop(); h != nil {
		r.Origin = PlanOrigin{Topic: h.Topic, Offset: h.Offset, Partition: h.Partition, Located: h.Located()}
	}
}

// DeriveTarget is where a record goes: the plan's --target, else the topic
// of its last hop ("" when it names none: such a record is blocked).
func DeriveTarget(p Parsed, planTarget string) string {
	if planTarget != "" {
		return planTarget
	}
	if h := p.Diag.LastHop(); h != nil {
		return h.Topic
	}
	return ""
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

// Hash is the plan's identity: the hash of its Core (see Core.Hash). Any
// change to what the core holds changes it. The rows are written as they
// are made from the records, never held (~70 bytes each).
func (p Plan) Hash() string {
	c, recs, row := p.coreHead()
	h, err := hashCanonical(func(w io.Writer) error {
		return c.writeCanonical(w, len(recs), func(b *bytes.Buffer, i int) { row(recs[i]).write(b, writeASCIIString) })
	})
	if err != nil {
		// Only unencodable values (none exist in Core) can fail.
		panic(fmt.Sprintf("redrive: plan does not encode: %v", err))
	}
	return h
}

// Core is the plan's hashed content: records sorted by (partition, offset),
// targets tabled in order of first use.
func (p Plan) Core() Core {
	c, recs, row := p.coreHead()
	c.Rows = make([]Row, 0, len(recs))
	for _, r := range recs {
		c.Rows = append(c.Rows, row(r).Row())
	}
	return c
}

// WriteJSON writes exactly what json.Marshal(p) returns (its Core, as
// encoding/json writes it), writing each row as it is made from its record:
// the core of a million records is ~65 MB of JSON and ~130 MB as []Row,
// neither of which a plan command can afford to hold beside the records.
func (p Plan) WriteJSON(w io.Writer) error {
	c, recs, row := p.coreHead()
	c.Rows = nil
	head, err := json.Marshal(c)
	if err != nil {
		return err
	}
	// Rows is Core's last field: its JSON ends the object.
	const tail = `"rows":null}`
	if !bytes.HasSuffix(head, []byte(tail)) {
		return fmt.Errorf("redrive: a core's JSON does not end with its rows: %.40q", head[max(0, len(head)-40):])
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(head[:len(head)-len(tail)])
	bw.WriteString(`"rows":[`)
	var b bytes.Buffer
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		row(r).write(&b, writeJSONString)
		if b.Len() >= 32<<10 {
			bw.Write(b.Bytes())
			b.Reset()
		}
	}
	bw.Write(b.Bytes())
	bw.WriteString("]}")
	return bw.Flush()
}

// writeJSONString writes s as encoding/json does (HTML-safe escaping).
func writeJSONString(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			b.Write(q)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// kafkaRow is a Kafka record's row before it is written: what Row holds,
// without the strings.
type kafkaRow struct {
	coord   Coord
	digest  Digest
	target  int
	verdict Reason
}

// Row is the row as a Core holds it.
func (r kafkaRow) Row() Row {
	return Row{Loc: r.coord.String(), Digest: r.digest.String(), Target: r.target, Verdict: r.verdict}
}

// write writes the row as [loc, digest, target, verdict]. A location and
// a digest's text need no escaping in either of a plan's encodings (digits,
// ':', base64url); the verdict is written by str.
func (r kafkaRow) write(b *bytes.Buffer, str func(*bytes.Buffer, string)) {
	var num [24]byte
	b.WriteString(`["`)
	b.Write(strconv.AppendInt(num[:0], int64(r.coord.Partition), 10))
	b.WriteByte(':')
	b.Write(strconv.AppendInt(num[:0], r.coord.Offset, 10))
	b.WriteString(`","`)
	b.Write(r.digest.appendText(num[:0]))
	b.WriteString(`",`)
	b.Write(strconv.AppendInt(num[:0], int64(r.target), 10))
	b.WriteByte(',')
	str(b, string(r.verdict))
	b.WriteByte(']')
}

// coreHead returns the plan's core without its rows, the records in the
// core's order, and how each becomes its row.
func (p Plan) coreHead() (Core, []PlanRecord, func(PlanRecord) kafkaRow) {
	c := Core{
		Format: PlanFormat, Backend: BackendKafka, Cluster: p.Cluster, DLQ: p.DLQ,
		CreatedAt: FormatCreatedAt(p.CreatedAt), Policy: p.Policy, Rate: p.Rate, Batch: p.BatchSize,
		AllowHazards: p.AllowOrderingHazards, Targets: []string{},
		Selection: CoreSelection{All: p.Selection.All, Classes: p.Selection.Classes, Locs: len(p.Selection.Offsets) > 0, Key: p.Selection.Key, Header: p.Selection.Header, Target: p.Target},
	}
	if p.Selection.Since != nil {
		c.Selection.Since = FormatCreatedAt(*p.Selection.Since)
	}
	if p.Selection.Until != nil {
		c.Selection.Until = FormatCreatedAt(*p.Selection.Until)
	}
	// A plan read back from its core is already in order: hashing it then
	// copies nothing (a plan's records are ~220 bytes each in memory).
	recs := p.Records
	byCoord := func(i, j int) bool { return less(recs[i].Coord(), recs[j].Coord()) }
	if !sort.SliceIsSorted(recs, byCoord) {
		recs = append([]PlanRecord(nil), p.Records...)
		sort.SliceStable(recs, byCoord)
	}
	index := map[string]int{}
	for _, r := range recs {
		if _, ok := index[r.Target]; !ok && r.Target != "" {
			index[r.Target] = len(c.Targets)
			c.Targets = append(c.Targets, r.Target)
		}
	}
	row := func(r PlanRecord) kafkaRow {
		t := -1
		if r.Target != "" {
			t = index[r.Target]
		}
		v := Reason("")
		if !r.Included {
			v = r.Reason
		}
		return kafkaRow{coord: r.Coord(), digest: r.Digest, target: t, verdict: v}
	}
	return c, recs, row
}

// PlanFromCore rebuilds a plan from a validated Kafka core; the records'
// derived fields are empty until Derive fills them.
func PlanFromCore(c Core) (Plan, error) {
	if err := c.Validate(); err != nil {
		return Plan{}, err
	}
	if c.Backend != BackendKafka {
		return Plan{}, &OtherBackend{Plan: c.Backend, Want: BackendKafka}
	}
	created, _ := ParseCreatedAt(c.CreatedAt)
	p := Plan{
		Version: PlanVersion, Cluster: c.Cluster, DLQ: c.DLQ, Target: c.Selection.Target, Rate: c.Rate, BatchSize: c.Batch,
		AllowOrderingHazards: c.AllowHazards, Policy: c.Policy, CreatedAt: created,
		Selection: Selection{All: c.Selection.All, Classes: c.Selection.Classes, Key: c.Selection.Key, Header: c.Selection.Header},
	}
	for _, w := range []struct {
		s   string
		dst **time.Time
	}{{c.Selection.Since, &p.Selection.Since}, {c.Selection.Until, &p.Selection.Until}} {
		if w.s == "" {
			continue
		}
		t, err := ParseCreatedAt(w.s)
		if err != nil {
			return Plan{}, fmt.Errorf("selection: %v", err)
		}
		*w.dst = &t
	}
	// Sized once: a plan of a million records holds ~300 MB of them, and
	// growing the slice by appending would allocate several times that.
	p.Records = make([]PlanRecord, 0, len(c.Rows))
	for _, r := range c.Rows {
		co, ok := parseLoc(r.Loc)
		if !ok {
			return Plan{}, fmt.Errorf("row %q: want PARTITION:OFFSET", r.Loc)
		}
		if c.Selection.Locs {
			p.Selection.Offsets = append(p.Selection.Offsets, co)
		}
		d, _ := ParseDigest(r.Digest) // validated
		pr := PlanRecord{Partition: co.Partition, Offset: co.Offset, Digest: d, Verdict: Verdict{Included: r.Included(), Reason: r.Verdict}}
		if r.Target >= 0 {
			pr.Target = c.Targets[r.Target]
		}
		if !r.Included() && !knownReason(r.Verdict) {
			return Plan{}, fmt.Errorf("row %s: verdict %q is not a reason", r.Loc, r.Verdict)
		}
		p.Records = append(p.Records, pr)
	}
	return p, nil
}

// parseLoc reads a row's "PARTITION:OFFSET" in its one canonical form
// (decimal, no sign, no leading zeros), as Coord.String writes it.
func parseLoc(loc string) (Coord, bool) {
	ps, os, ok := strings.Cut(loc, ":")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	c := Coord{Partition: int32(p), Offset: o}
	return c, ok && err1 == nil && err2 == nil && c.String() == loc
}

func knownReason(r Reason) bool {
	for _, x := range Reasons {
		if x == r {
			return true
		}
	}
	return false
}

// MarshalJSON writes the plan as its Core: the only form a plan leaves
// memory in.
func (p Plan) MarshalJSON() ([]byte, error) { return json.Marshal(p.Core()) }

// UnmarshalJSON reads a Core (unknown fields refused) and validates it.
func (p *Plan) UnmarshalJSON(b []byte) error {
	q, err := DecodePlan(bytes.NewReader(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Derive fills each record's derived fields from the records read now
// (keyed by coordinates), parsed with the plan's own extractors. It returns
// the records whose content no longer matches the plan's digest, and those
// gone from the log; their derived fields stay empty.
func (p *Plan) Derive(recs map[Coord]Record, x Extractors) (changed, gone []Coord) {
	for i := range p.Records {
		r := &p.Records[i]
		rec, ok := recs[r.Coord()]
		switch {
		case !ok:
			gone = append(gone, r.Coord())
		case rec.Digest() != r.Digest:
			changed = append(changed, r.Coord())
		default:
			r.Fill(ParseRecord(rec, x))
		}
	}
	return changed, gone
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
	return totalsOf(len(p.Records), func(i int) (string, Verdict) { return p.Records[i].Class, p.Records[i].Verdict })
}

// totalsOf counts n records by verdict and class (every reason present, at
// 0 when none); rec says each one's class and verdict.
func totalsOf(n int, rec func(i int) (string, Verdict)) Totals {
	t := Totals{ByReason: map[Reason]int{}, ByClass: map[string]ClassCount{}}
	for _, r := range Reasons {
		t.ByReason[r] = 0
	}
	for i := 0; i < n; i++ {
		class, v := rec(i)
		t.Selected++
		cc := t.ByClass[class]
		cc.Selected++
		if v.Included {
			t.Included++
			cc.Included++
		} else {
			t.Excluded++
			t.ByReason[v.Reason]++
		}
		t.ByClass[class] = cc
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

// Candidates returns the checks' inputs for every record, in order: a
// copy (about 200 bytes a record); the checks read a plan's records in
// place, and write their verdicts there, through PlanRecords.
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

// ErrHashMismatch means a plan file was edited after it was made. It is
// the one "plan edited" sentinel: rabbitmq.ErrPlanEdited and
// actions.ErrPlanEdited are made with PlanEditedError, so an edited plan
// matches all three with errors.Is whichever backend's loader found it.
var ErrHashMismatch = PlanEditedError("the plan's content does not match its hash (edited after it was made?)")

// PlanEditedError returns a "plan edited" sentinel with its own message
// (each layer keeps the words its users already see) that errors.Is
// treats as the same error as ErrHashMismatch and every other value made
// here.
func PlanEditedError(msg string) error { return planEditedError{msg} }

type planEditedError struct{ msg string }

func (e planEditedError) Error() string { return e.msg }

// Is makes every planEditedError match every other, whatever its message.
func (e planEditedError) Is(target error) bool {
	_, ok := target.(planEditedError)
	return ok
}

// DecodeFile parses a plan file (format v2, see SignedPlan): the core must
// validate and hash to the file's hash, and every signature must name it.
// It reads the file a row at a time (DecodeFileFrom).
func DecodeFile(raw []byte) (File, error) { return DecodeFileFrom(bytes.NewReader(raw)) }

// Encode returns the file as compact JSON (SignedPlan.Encode): what Write
// writes.
func (f File) Encode() ([]byte, error) {
	var b bytes.Buffer
	if err := f.Write(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write writes the file exactly as SignedPlan.Encode writes it (one line
// of JSON and a newline), each row as it is made from its record: a plan
// file of a million records is ~65 MB, its rows as []Row ~130 MB more.
func (f File) Write(w io.Writer) error {
	hash, err := json.Marshal(f.Hash)
	if err != nil {
		return err
	}
	sigs, err := json.Marshal(f.Signatures)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"hash":`)
	bw.Write(hash)
	bw.WriteString(`,"plan":`)
	if err := f.Plan.WriteJSON(bw); err != nil {
		return err
	}
	bw.WriteString(`,"signatures":`)
	bw.Write(sigs)
	bw.WriteString("}\n")
	return bw.Flush()
}
