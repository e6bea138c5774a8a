package redrive

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/berth-dev/berth/redrive/approval"
)

// Plan format v2: a plan is a signed selection. Its hashed core lists, for
// each selected record, where it is (Loc), a digest of its full content, the
// target the reviewer was shown and the verdict the checks gave when the plan
// was made. Everything else a reviewer sees (event id, idempotency key,
// class, origin, prior redrives) is derived from the record and the plan's
// policy, and derived again from the record re-read at execute: nothing in
// the file is trusted beyond what its signatures cover, and nothing the
// signatures cover is trusted beyond what the re-read record confirms.
//
// The exact byte-level definition is in cmd/berth/help/redrive.md ("Plan
// format"); testdata/redrive/planhash.py recomputes it independently.

// PlanFormat names the format; it is the first line of the hashed input.
const PlanFormat = "berth-redrive-plan/v2"

// Backends a plan can be made for.
const (
	BackendKafka    = "kafka"
	BackendRabbitMQ = "rabbitmq"
)

// BackendTitle is a backend as people write it: Kafka, RabbitMQ.
func BackendTitle(backend string) string {
	switch backend {
	case BackendKafka:
		return "Kafka"
	case BackendRabbitMQ:
		return "RabbitMQ"
	}
	return backend
}

// OtherBackend is a plan of one backend read as the other's: Plan is the
// backend it was made for, Want the one reading it.
type OtherBackend struct{ Plan, Want string }

func (e *OtherBackend) Error() string {
	return fmt.Sprintf("a %s plan is not a %s plan", e.Plan, BackendTitle(e.Want))
}

// CreatedAtLayout is how created_at is written: UTC, milliseconds, "Z".
const CreatedAtLayout = "2006-01-02T15:04:05.000Z"

// Core is the hashed content of a v2 plan. Field names are its JSON keys;
// the canonical encoding (Canonical) sorts keys, so declaration order does
// not matter to the hash.
type Core struct {
	Format string `json:"format"`
	// Backend is "kafka" or "rabbitmq".
	Backend string `json:"backend"`
	// Cluster is the cluster's identity: the Kafka cluster id, the
	// RabbitMQ cluster name. A plan runs only where it was made.
	Cluster string `json:"cluster"`
	// Vhost is the RabbitMQ virtual host ("" for Kafka).
	Vhost string `json:"vhost,omitempty"`
	DLQ   string `json:"dlq"`
	// QueueType is the RabbitMQ DLQ's type (classic, quorum, stream) when
	// the plan was made; "" for Kafka.
	QueueType string `json:"queue_type,omitempty"`
	// CreatedAt is CreatedAtLayout; a plan expires from it and a plan
	// claiming to be made in the future is refused.
	CreatedAt string         `json:"created_at"`
	Policy    PolicySnapshot `json:"policy"`
	Selection CoreSelection  `json:"selection"`
	// Rate is records per second (0: unlimited); Batch is records per
	// transaction (Kafka) or confirm window (RabbitMQ).
	Rate  int `json:"rate"`
	Batch int `json:"batch"`
	// AllowHazards: records behind a newer same-key record were included.
	AllowHazards bool `json:"allow_hazards,omitempty"`
	// Options are backend-specific switches that change what execute does
	// (RabbitMQ: "quorum_side_effects", "to_queues"), sorted, no duplicates.
	Options []string `json:"options,omitempty"`
	// Targets is the table of distinct targets rows refer to by index:
	// Kafka topics; RabbitMQ "exchange\x00routing-key" pairs.
	Targets []string `json:"targets"`
	Rows    []Row    `json:"rows"`
}

// CoreSelection says how records were chosen (informative: the rows are the
// selection). Times are CreatedAtLayout.
type CoreSelection struct {
	All            bool     `json:"all,omitempty"`
	Classes        []string `json:"classes,omitempty"`
	Locs           bool     `json:"by_location,omitempty"` // chosen by explicit coordinates
	Key            string   `json:"key,omitempty"`
	Header         string   `json:"header,omitempty"`
	Since          string   `json:"since,omitempty"`
	Until          string   `json:"until,omitempty"`
	EventIDs       []string `json:"event_ids,omitempty"`
	Reasons        []string `json:"reasons,omitempty"`
	OriginalQueues []string `json:"original_queues,omitempty"`
	// Target is the --target every record was sent to ("" each its own).
	Target string `json:"target,omitempty"`
}

// Row is one selected record: encoded as the JSON array
// [loc, digest, target, verdict] to keep a 100,000-record plan small.
type Row struct {
	// Loc is where the record is: "PARTITION:OFFSET" on Kafka; on
	// RabbitMQ the message's position and id, "POSITION:MESSAGE_ID".
	Loc string
	// Digest is ContentDigest of the record when the plan was made.
	Digest string
	// Target indexes Core.Targets; -1 when the record has no target
	// (such a row is never included).
	Target int
	// Verdict is "" for included, else the Reason that excluded it.
	Verdict Reason
}

// Included reports whether the row is to be sent.
func (r Row) Included() bool { return r.Verdict == "" }

// MarshalJSON writes the row as [loc, digest, target, verdict].
func (r Row) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{r.Loc, r.Digest, r.Target, string(r.Verdict)})
}

// UnmarshalJSON reads [loc, digest, target, verdict], exactly four items.
func (r *Row) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("row: %v", err)
	}
	if len(raw) != 4 {
		return fmt.Errorf("row: want [loc, digest, target, verdict], got %d items", len(raw))
	}
	var v string
	if err := json.Unmarshal(raw[0], &r.Loc); err != nil {
		return fmt.Errorf("row: loc: %v", err)
	}
	if err := json.Unmarshal(raw[1], &r.Digest); err != nil {
		return fmt.Errorf("row %s: digest: %v", r.Loc, err)
	}
	if err := json.Unmarshal(raw[2], &r.Target); err != nil {
		return fmt.Errorf("row %s: target: %v", r.Loc, err)
	}
	if err := json.Unmarshal(raw[3], &v); err != nil {
		return fmt.Errorf("row %s: verdict: %v", r.Loc, err)
	}
	r.Verdict = Reason(v)
	return nil
}

// MaxBatch is the most records a plan sends as one unit (--batch-size):
// one Kafka transaction, one RabbitMQ confirm window. Kafka: a batch must
// be produced and committed within the redrive producer's 60 s
// transaction timeout; 10,000 is 2 s at the 5,000 records/s a redrive
// aims for, and still 20 s on a cluster ten times slower. RabbitMQ: four
// windows are in flight at once, held unacked on the DLQ and, after a
// crash, sent again (the at-least-once window, 40,000 at this bound), and
// the publisher's return buffer is sized by them. A larger batch gains
// nothing in speed (pipelined confirms reach the broker's pace at 500)
// and a plan asking for a thousand million crashed execute out of memory.
const MaxBatch = 10_000

// CheckBatch says why n cannot be a plan's batch size (nil when it can; 0
// means the backend's default).
func CheckBatch(n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("%d is negative", n)
	case n > MaxBatch:
		return fmt.Errorf("%d is more than %d, the most records sent as one unit (one Kafka transaction, one RabbitMQ confirm window)", n, MaxBatch)
	}
	return nil
}

// Validate checks what decoding cannot: the format, the created_at layout,
// the pacing, target indexes, digests' shape, unique locations.
func (c Core) Validate() error {
	if c.Format != PlanFormat {
		return fmt.Errorf("format %q is not supported (want %s: make the plan again)", c.Format, PlanFormat)
	}
	if c.Backend != BackendKafka && c.Backend != BackendRabbitMQ {
		return fmt.Errorf("backend %q: want kafka or rabbitmq", c.Backend)
	}
	if c.Cluster == "" {
		return errors.New("cluster: empty (a plan is bound to the cluster it was made on)")
	}
	if _, err := ParseCreatedAt(c.CreatedAt); err != nil {
		return err
	}
	if c.Rate < 0 {
		return fmt.Errorf("rate: %d is negative", c.Rate)
	}
	if err := CheckBatch(c.Batch); err != nil {
		return fmt.Errorf("batch: %v", err)
	}
	seen := make(map[string]bool, len(c.Rows))
	for _, r := range c.Rows {
		if seen[r.Loc] {
			return fmt.Errorf("row %s: listed twice", r.Loc)
		}
		seen[r.Loc] = true
		if r.Target < -1 || r.Target >= len(c.Targets) {
			return fmt.Errorf("row %s: target %d is not in targets (0..%d)", r.Loc, r.Target, len(c.Targets)-1)
		}
		if r.Target == -1 && r.Included() {
			return fmt.Errorf("row %s: included with no target", r.Loc)
		}
		if _, ok := ParseDigest(r.Digest); !ok {
			return fmt.Errorf("row %s: digest %q is not base64url SHA-256", r.Loc, r.Digest)
		}
	}
	return nil
}

// Canonical is the byte string a plan's hash covers: JSON with object keys
// sorted, no insignificant whitespace, every character outside printable
// ASCII (0x20-0x7e) escaped as \uXXXX (lowercase hex, UTF-16 surrogate
// pairs above U+FFFF) except \b \f \n \r \t, which use their short escapes,
// and `"` and `\` escaped with a backslash. This is exactly Python's
// json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True).
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := writeCanonical(&b, tree); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		// Only integers occur in a plan: a float would round differently
		// in another language.
		if _, err := strconv.ParseInt(string(x), 10, 64); err != nil {
			return fmt.Errorf("canonical: %s is not an integer", x)
		}
		b.WriteString(string(x))
	case string:
		writeASCIIString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeASCIIString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical: unexpected %T", v)
	}
	return nil
}

func writeASCIIString(b *bytes.Buffer, s string) {
	const hexdigits = "0123456789abcdef"
	u := func(r rune) {
		b.WriteString(`\u`)
		b.WriteByte(hexdigits[r>>12&0xf])
		b.WriteByte(hexdigits[r>>8&0xf])
		b.WriteByte(hexdigits[r>>4&0xf])
		b.WriteByte(hexdigits[r&0xf])
	}
	b.WriteByte('"')
	for _, r := range s { // json.Unmarshal already made s valid UTF-8
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r >= 0x20 && r <= 0x7e:
			b.WriteByte(byte(r))
		case r > 0xffff:
			r -= 0x10000
			u(0xd800 + (r>>10)&0x3ff)
			u(0xdc00 + r&0x3ff)
		case r == utf8.RuneError:
			u(0xfffd)
		default:
			u(r)
		}
	}
	b.WriteByte('"')
}

// Hash is the plan's identity: lowercase hex SHA-256 of
// "berth-redrive-plan/v2\n" followed by Canonical(core).
func (c Core) Hash() (string, error) { return hashCanonical(c.WriteCanonical) }

// hashCanonical is the plan hash of the canonical core write writes.
func hashCanonical(write func(io.Writer) error) (string, error) {
	h := sha256.New()
	h.Write([]byte(PlanFormat + "\n"))
	if err := write(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteCanonical writes exactly Canonical(c), streaming the rows: Canonical
// goes through a generic tree (hundreds of bytes a row), which at a million
// rows would alone exceed the 512 MiB a plan of that size must fit in.
func (c Core) WriteCanonical(w io.Writer) error {
	rows := c.Rows
	n := len(rows)
	if rows == nil {
		n = -1
	}
	return c.writeCanonical(w, n, func(b *bytes.Buffer, i int) { rows[i].writeCanonical(b) })
}

// writeCanonical writes the row as a canonical JSON array
// [loc, digest, target, verdict].
func (r Row) writeCanonical(b *bytes.Buffer) {
	b.WriteByte('[')
	writeASCIIString(b, r.Loc)
	b.WriteByte(',')
	writeASCIIString(b, r.Digest)
	b.WriteByte(',')
	b.WriteString(strconv.Itoa(r.Target))
	b.WriteByte(',')
	writeASCIIString(b, string(r.Verdict))
	b.WriteByte(']')
}

// writeCanonical is WriteCanonical of c with n rows (-1: null), each
// written canonically by row, in order, whatever c.Rows holds.
func (c Core) writeCanonical(w io.Writer, n int, row func(b *bytes.Buffer, i int)) error {
	c.Rows = nil
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		return err
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bw := bufio.NewWriterSize(w, 64<<10)
	var b bytes.Buffer
	flush := func() error {
		_, err := bw.Write(b.Bytes())
		b.Reset()
		return err
	}
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeASCIIString(&b, k)
		b.WriteByte(':')
		if k != "rows" {
			if err := writeCanonical(&b, top[k]); err != nil {
				return err
			}
			continue
		}
		if n < 0 {
			b.WriteString("null")
			continue
		}
		b.WriteByte('[')
		for j := 0; j < n; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			row(&b, j)
			if b.Len() >= 32<<10 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	if err := flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// ContentDigest is the digest a plan keeps of one record: base64url (no
// padding) of SHA-256 over "berth-record/v1\n", then for the key either the byte 'N' (null key) or
// 'K' followed by the key's length as 8-byte big-endian and the key; then
// 'V', the value's length and the value; then for each header in order 'H',
// the name's length and name, the value's length and value; then for each
// property (RabbitMQ message properties, name=value, sorted by name) 'P' and
// the same. Any change to key, value, headers (including order) or
// properties changes the digest.
func ContentDigest(key []byte, keyNull bool, value []byte, headers, props []Header) string {
	return contentDigest(key, keyNull, value, headers, props).String()
}

// contentDigest is ContentDigest's SHA-256, before it is written as text.
func contentDigest(key []byte, keyNull bool, value []byte, headers, props []Header) Digest {
	h := sha256.New()
	h.Write([]byte("berth-record/v1\n"))
	var n [8]byte
	field := func(tag byte, parts ...[]byte) {
		h.Write([]byte{tag})
		for _, p := range parts {
			binary.BigEndian.PutUint64(n[:], uint64(len(p)))
			h.Write(n[:])
			h.Write(p)
		}
	}
	if keyNull {
		h.Write([]byte{'N'})
	} else {
		field('K', key)
	}
	field('V', value)
	for _, x := range headers {
		field('H', []byte(x.Key), x.Value)
	}
	ps := append([]Header(nil), props...)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Key < ps[j].Key })
	for _, x := range ps {
		field('P', []byte(x.Key), x.Value)
	}
	var d Digest
	h.Sum(d[:0])
	return d
}

// Digest is the record's ContentDigest (Kafka records have no properties),
// as its 32 bytes: compared as they are, written as text only in a plan.
func (r Record) Digest() Digest { return contentDigest(r.Key, r.KeyNull, r.Value, r.Headers, nil) }

// ParseCreatedAt reads created_at; it must be exactly CreatedAtLayout so the
// hashed string and the time it means cannot differ.
func ParseCreatedAt(s string) (time.Time, error) {
	t, err := time.Parse(CreatedAtLayout, s)
	if err != nil || t.UTC().Format(CreatedAtLayout) != s {
		return time.Time{}, fmt.Errorf("created_at %q: want UTC %s", s, CreatedAtLayout)
	}
	return t, nil
}

// FormatCreatedAt writes t as created_at (UTC, truncated to milliseconds).
func FormatCreatedAt(t time.Time) string { return t.UTC().Format(CreatedAtLayout) }

// ShortHash is the first 12 hex digits, how plans are named to people.
func ShortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// SignedPlan is a v2 plan as stored and exchanged: the hashed core, its
// hash, and the signatures over it (outside the hashed content, so adding an
// approval never changes the plan's identity).
type SignedPlan struct {
	Hash       string               `json:"hash"`
	Plan       Core                 `json:"plan"`
	Signatures []approval.Signature `json:"signatures"`
}

// NewSignedPlan wraps a core with its hash.
func NewSignedPlan(c Core) (SignedPlan, error) {
	h, err := c.Hash()
	if err != nil {
		return SignedPlan{}, err
	}
	return SignedPlan{Hash: h, Plan: c, Signatures: []approval.Signature{}}, nil
}

// DecodeSignedPlan parses a plan file (or stored record): unknown fields are
// refused, the core must validate and hash to the stated hash, and every
// signature must name that hash. It does not verify signatures (that needs
// allowed_signers): see approval.Evaluate.
func DecodeSignedPlan(raw []byte) (SignedPlan, error) {
	var f SignedPlan
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return SignedPlan{}, fmt.Errorf("not a Berth plan: %v", err)
	}
	if err := f.Plan.Validate(); err != nil {
		return SignedPlan{}, err
	}
	got, err := f.Plan.Hash()
	if err != nil {
		return SignedPlan{}, err
	}
	if f.Signatures, err = checkHash(f.Hash, got, f.Signatures); err != nil {
		return SignedPlan{}, err
	}
	return f, nil
}

// checkHash refuses a plan whose content hashes to got instead of the hash
// it claims (edited after it was made), or a signature over another hash;
// it returns the signatures, never nil (an unsigned plan has none).
func checkHash(claimed, got string, sigs []approval.Signature) ([]approval.Signature, error) {
	if got != claimed {
		return nil, fmt.Errorf("%w: hash %s, content hashes to %s", ErrHashMismatch, ShortHash(claimed), ShortHash(got))
	}
	for _, s := range sigs {
		if s.PlanHash != claimed {
			return nil, fmt.Errorf("a %s signature is for plan %s, not %s", s.Role, ShortHash(s.PlanHash), ShortHash(claimed))
		}
	}
	if sigs == nil {
		sigs = []approval.Signature{}
	}
	return sigs, nil
}

// Encode writes the plan as compact JSON (one line, a newline at the end):
// at 100,000 records indentation alone would add megabytes.
func (f SignedPlan) Encode() ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// DLQRecord is one DLQ record (Kafka) or message (RabbitMQ) as read now,
// with everything its content digest covers.
type DLQRecord struct {
	// Loc is where it is, in the plan's row syntax (Row.Loc).
	Loc string
	// Record holds key, value (the body) and headers in the order the
	// broker returned them. RabbitMQ: KeyNull is true and Key empty.
	Record Record
	// Props are RabbitMQ's message properties as name=value text
	// (message_id, correlation_id, content_type, type, app_id, timestamp,
	// ...); nil on Kafka.
	Props []Header
}

// Outgoing is one record to send, with the ledger entry that must be
// written with it (atomically on Kafka, after its confirm on RabbitMQ).
type Outgoing struct {
	// Target is a Kafka topic, or RabbitMQ "exchange\x00routing-key".
	Target string
	Record Record // key, value, headers to send
	Props  []Header
	Ledger LedgerEntry
}

// Stricter is the policy an execution runs under: review if either the
// plan's or today's policy requires it, the larger number of approvals, an
// idempotency key required if either requires one, the smaller loop limit,
// and today's system of record. What the reviewer saw was derived with the
// plan's extractors: if today's extract ids differently, or the plan was
// checked against a system of record today's policy no longer names, the
// two do not combine and it is an error.
func Stricter(plan, today PolicySnapshot) (PolicySnapshot, error) {
	s := plan
	if orDefault(plan.IdempotencyKey) != orDefault(today.IdempotencyKey) || orDefault(plan.EventID) != orDefault(today.EventID) {
		return s, fmt.Errorf("the policy now reads event id %s and idempotency key %s, the plan was made reading %s and %s",
			orDefault(today.EventID), orDefault(today.IdempotencyKey), orDefault(plan.EventID), orDefault(plan.IdempotencyKey))
	}
	if plan.SystemOfRecord != "" && today.SystemOfRecord == "" {
		return s, errors.New("the plan was checked against a system of record that today's policy no longer names")
	}
	s.Match = today.Match
	s.SystemOfRecord = today.SystemOfRecord
	if today.Review == "required" {
		s.Review = "required"
	}
	s.Approvals = max(plan.Approvals, today.Approvals)
	if s.Review == "required" && s.Approvals < 1 {
		s.Approvals = 1
	}
	s.RequireIdempotencyKey = plan.RequireIdempotencyKey || today.RequireIdempotencyKey
	switch {
	case plan.MaxRedrives <= 0:
		s.MaxRedrives = today.MaxRedrives
	case today.MaxRedrives > 0:
		s.MaxRedrives = min(plan.MaxRedrives, today.MaxRedrives)
	}
	return s, nil
}

func orDefault(spec string) string {
	if spec == "" {
		return DefaultEventID
	}
	return spec
}

// ExtractorsOf parses the policy's event id and idempotency key fields (an
// empty one reads DefaultEventID).
func ExtractorsOf(p PolicySnapshot) (Extractors, error) {
	ev, err := ParseField(orDefault(p.EventID))
	if err != nil {
		return Extractors{}, fmt.Errorf("event_id: %v", err)
	}
	idem, err := ParseField(orDefault(p.IdempotencyKey))
	if err != nil {
		return Extractors{}, fmt.Errorf("idempotency_key: %v", err)
	}
	return Extractors{EventID: ev, IdempotencyKey: idem}, nil
}
