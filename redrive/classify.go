package redrive

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Record is a DLQ record as the backend read it.
type Record struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
	Key       []byte    `json:"key"`
	Value     []byte    `json:"value"`
	Headers   []Header  `json:"headers"`
	// KeyNull distinguishes a null key from an empty one.
	KeyNull bool `json:"key_null,omitempty"`
}

// Coord is a DLQ record's coordinates.
type Coord struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

func (c Coord) String() string {
	return strconv.FormatInt(int64(c.Partition), 10) + ":" + strconv.FormatInt(c.Offset, 10)
}

// Before reports whether c comes before o in DLQ order (partition, then
// offset).
func (c Coord) Before(o Coord) bool {
	if c.Partition != o.Partition {
		return c.Partition < o.Partition
	}
	return c.Offset < o.Offset
}

// Coord returns the record's coordinates.
func (r Record) Coord() Coord { return Coord{r.Partition, r.Offset} }

// Clone returns a copy that shares no memory with r (a null key stays
// null), for keeping a record a reader lends only for one call.
func (r Record) Clone() Record {
	c := r
	c.Key, c.Value = cloneBytes(r.Key), cloneBytes(r.Value)
	if r.Headers != nil {
		c.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = Header{Key: h.Key, Value: cloneBytes(h.Value)}
		}
	}
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// Parsed is a DLQ record with its diagnostics, ids and class.
type Parsed struct {
	Record
	Diag Diagnostics `json:"diagnostics"`
	// EventID and IdempotencyKey are empty when the record does not carry them.
	EventID        string `json:"event_id"`
	IdempotencyKey string `json:"idempotency_key"`
	// Class is the failure class id (see ClassOf).
	Class string `json:"class"`
}

// Extractors says where the event id and idempotency key live for a DLQ.
type Extractors struct {
	EventID        Field
	IdempotencyKey Field
}

// DefaultExtractors reads both from the JSON field eventId.
func DefaultExtractors() Extractors {
	f, _ := ParseField(DefaultEventID)
	return Extractors{EventID: f, IdempotencyKey: f}
}

// ParseRecord parses one record's headers, ids and class.
func ParseRecord(r Record, x Extractors) Parsed {
	p := Parsed{Record: r, Diag: Parse(r.Headers)}
	p.EventID, p.IdempotencyKey = x.extract(r.Headers, r.Value)
	p.Class = ClassOf(p.OriginalTopic(), p.Diag.ExceptionName(), Normalise(p.Diag.Message)).ID
	return p
}

// OriginalTopic is the topic the record last failed on ("" when unknown).
func (p Parsed) OriginalTopic() string {
	if h := p.Diag.LastHop(); h != nil {
		return h.Topic
	}
	return ""
}

// ExceptionName is the most specific exception class the headers give: the
// root cause when Spring recorded it (the outer class is usually
// ListenerExecutionFailedException), else the exception, else the key
// deserialisation exception.
func (d Diagnostics) ExceptionName() string {
	switch {
	case d.Cause != "":
		return d.Cause
	case d.Exception != "":
		return d.Exception
	default:
		return d.KeyException
	}
}

// reToken finds, in one pass, the parts of a message that vary between
// occurrences of the same failure: UUIDs, hex ids, ids like ord-1234, and
// numbers. Alternatives are tried in that order at each position.
var reToken = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b` +
	`|\b(?:0x)?[0-9a-f]{8,}\b` +
	`|\b[a-z]+[-_][a-z0-9]*[0-9][a-z0-9_-]*\b` +
	`|[0-9]+(?:\.[0-9]+)?`)

// Normalise turns an exception message into a pattern shared by every
// occurrence of the same failure: UUIDs become <uuid>, hex ids (8+ chars
// mixing digits and letters) <hex>, ids like ord-1234 or pay_9f3 <id>, and
// remaining numbers <n>. Whitespace is collapsed and the result capped at
// 200 characters.
func Normalise(msg string) string {
	s := reToken.ReplaceAllStringFunc(msg, func(m string) string {
		switch {
		case len(m) == 36 && m[8] == '-' && m[13] == '-':
			return "<uuid>"
		case m[0] >= '0' && m[0] <= '9' && !strings.ContainsFunc(m, notDigitOrDot):
			return "<n>"
		case strings.ContainsAny(m, "-_"):
			return "<id>"
		}
		// A hex run: an id only when it mixes digits and letters ("deadbeef"
		// and "accepted" stay words; all digits is a number).
		h := strings.ToLower(strings.TrimPrefix(strings.ToLower(m), "0x"))
		digits := strings.ContainsAny(h, "0123456789")
		letters := strings.ContainsAny(h, "abcdef")
		switch {
		case digits && letters:
			return "<hex>"
		case digits:
			return "<n>"
		}
		return m
	})
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

func notDigitOrDot(r rune) bool { return (r < '0' || r > '9') && r != '.' }

// ClassKey identifies a failure class.
type ClassKey struct {
	OriginalTopic string `json:"original_topic"`
	Exception     string `json:"exception"`
	Pattern       string `json:"pattern"`
}

// ClassOf returns the class for a key, with its stable id: "c-" and the
// first 10 hex digits of SHA-256 over the three parts. The id is what
// --class takes; it is the same on every terminal and every run.
func ClassOf(originalTopic, exception, pattern string) Class {
	h := sha256.Sum256([]byte(originalTopic + "\x00" + exception + "\x00" + pattern))
	return Class{ID: "c-" + hex.EncodeToString(h[:])[:10], ClassKey: ClassKey{originalTopic, exception, pattern}}
}

// Class is a failure class: records from one original topic failing with
// one exception class and one normalised message.
type Class struct {
	ID string `json:"class"`
	ClassKey
	Count     int       `json:"count"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// Transient is true when the rules judge the failure transient (worth
	// retrying as is); Verdict says transient, permanent or unknown, and Rule
	// which rule decided.
	Transient bool   `json:"transient"`
	Verdict   string `json:"verdict"`
	Rule      string `json:"rule,omitempty"`
}

// Verdicts a class can have.
const (
	VerdictTransient = "transient"
	VerdictPermanent = "permanent"
	VerdictUnknown   = "unknown"
)

// Rule matches failures by a regular expression over "exception: message".
type Rule struct {
	Pattern *regexp.Regexp
	Verdict string
}

// Rules decide transient versus permanent; the first match wins.
type Rules []Rule

// DefaultRules treat validation, deserialisation and 4xx as permanent;
// timeouts, connection errors and 5xx transient. Permanent rules come first:
// a deserialisation failure reported through a timeout wrapper is still poison.
var DefaultRules = MustRules(
	[]string{
		`(?i)deseriali[sz]|serializationexception|messageconversion|json(parse|mapping|processing)exception|malformed|unexpected (token|character)|cannot parse`,
		`(?i)validation|constraintviolation|invalid|illegalargument|schema`,
		`(?i)\b(http|status|code|response)\b\D{0,12}4\d\d\b|\b4\d\d (bad request|unauthori[sz]ed|forbidden|not found|conflict|unprocessable)`,
	},
	[]string{
		`(?i)time[ds]? ?out|deadline exceeded`,
		`(?i)connect(ion)?(exception| refused| reset| closed| timed)|socketexception|unknownhost|no route to host|broken pipe|\beof\b`,
		`(?i)\b(http|status|code|response)\b\D{0,12}5\d\d\b|\b5\d\d (internal server error|bad gateway|service unavailable|gateway timeout)|unavailable|temporar`,
	},
)

// MustRules compiles rule patterns, panicking on a bad one (for defaults).
func MustRules(permanent, transient []string) Rules {
	r, err := CompileRules(permanent, transient)
	if err != nil {
		panic(err)
	}
	return r
}

// CompileRules compiles permanent then transient patterns; the error names
// the bad pattern.
func CompileRules(permanent, transient []string) (Rules, error) {
	var out Rules
	add := func(list []string, verdict string) error {
		for _, p := range list {
			re, err := regexp.Compile(p)
			if err != nil {
				return fmt.Errorf("%s rule %q: %v", verdict, p, err)
			}
			out = append(out, Rule{Pattern: re, Verdict: verdict})
		}
		return nil
	}
	if err := add(permanent, VerdictPermanent); err != nil {
		return nil, err
	}
	if err := add(transient, VerdictTransient); err != nil {
		return nil, err
	}
	return out, nil
}

// Judge returns the verdict for an exception and message, and the rule.
func (rs Rules) Judge(exception, message string) (string, string) {
	s := exception + ": " + message
	for _, r := range rs {
		if r.Pattern.MatchString(s) {
			return r.Verdict, r.Pattern.String()
		}
	}
	return VerdictUnknown, ""
}

// Classify groups records into classes, sorted by count (largest first),
// then by id. Records in no known convention fall into a class with an empty
// topic and exception, still counted. Each class is judged on its first
// record.
func Classify(recs []Parsed, rules Rules) []Class {
	b := classBuilder{}
	for _, p := range recs {
		b.add(p.Class, p.Timestamp, func() Class { return judged(p, rules) })
	}
	return b.classes()
}

// JudgeParsed is p's class with the rules' verdict on p's failure, as Classify
// judges a class on its first record.
func (rs Rules) JudgeParsed(p Parsed) Class { return judged(p, rs) }

// judged is p's class with the rules' verdict on p's failure.
func judged(p Parsed, rules Rules) Class {
	cl := ClassOf(p.OriginalTopic(), p.Diag.ExceptionName(), Normalise(p.Diag.Message))
	cl.Verdict, cl.Rule = rules.Judge(cl.Exception+" "+p.Diag.Exception, p.Diag.Message)
	cl.Transient = cl.Verdict == VerdictTransient
	return cl
}

// classBuilder counts records into classes, in the order they are given.
type classBuilder struct{ byID map[string]*Class }

// add counts a record of class id seen at ts; first makes the class when
// this is its first record.
func (b *classBuilder) add(id string, ts time.Time, first func() Class) {
	if b.byID == nil {
		b.byID = map[string]*Class{}
	}
	c, ok := b.byID[id]
	if !ok {
		cl := first()
		c = &cl
		b.byID[id] = c
	}
	c.Count++
	if c.FirstSeen.IsZero() || ts.Before(c.FirstSeen) {
		c.FirstSeen = ts
	}
	if ts.After(c.LastSeen) {
		c.LastSeen = ts
	}
}

// classes returns the classes by count (largest first), then id.
func (b *classBuilder) classes() []Class {
	out := make([]Class, 0, len(b.byID))
	for _, c := range b.byID {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// ClassTally classifies a DLQ as its records stream past, in any order,
// without holding them: per record it keeps its coordinates, class and
// timestamp; per class the parsed record of its lowest coordinates. Classes
// then gives exactly what Classify gives for the records not done, in DLQ
// order.
type ClassTally struct {
	ids     map[string]int32
	classes []tallyClass
	rows    []tallyRow
}

type tallyClass struct {
	first Parsed // the class's record of lowest coordinates read (no payload)
}

type tallyRow struct {
	coord Coord
	class int32
	ts    time.Time
}

// Add counts one parsed record; it keeps nothing p's Record lends.
func (t *ClassTally) Add(p Parsed) {
	if t.ids == nil {
		t.ids = map[string]int32{}
	}
	i, ok := t.ids[p.Class]
	if !ok || less(p.Coord(), t.classes[i].first.Coord()) {
		// Judging needs the diagnostics only: the payload and headers
		// belong to the read.
		keep := Parsed{Record: Record{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset, Timestamp: p.Timestamp}, Diag: p.Diag, Class: p.Class}
		if !ok {
			i = int32(len(t.classes))
			t.ids[p.Class] = i
			t.classes = append(t.classes, tallyClass{})
		}
		t.classes[i].first = keep
	}
	t.rows = append(t.rows, tallyRow{coord: p.Coord(), class: i, ts: p.Timestamp})
}

// Read is how many records were counted.
func (t *ClassTally) Read() int { return len(t.rows) }

// Coords lists the coordinates counted (for the ledger look-up).
func (t *ClassTally) Coords() []Coord {
	out := make([]Coord, len(t.rows))
	for i, r := range t.rows {
		out[i] = r.coord
	}
	return out
}

// Classes classifies the records not done, as Classify would over them in
// DLQ order. A class is judged on its first record not done; when that is
// not the record kept (the kept one is done), reread returns the parsed
// records at the coordinates asked for.
func (t *ClassTally) Classes(rules Rules, done func(Coord) bool, reread func([]Coord) (map[Coord]Parsed, error)) ([]Class, error) {
	sort.Slice(t.rows, func(i, j int) bool { return less(t.rows[i].coord, t.rows[j].coord) })
	firstPending := make([]*Coord, len(t.classes))
	var again []Coord
	for _, r := range t.rows {
		if firstPending[r.class] != nil || done(r.coord) {
			continue
		}
		c := r.coord
		firstPending[r.class] = &c
		if c != t.classes[r.class].first.Coord() {
			again = append(again, c)
		}
	}
	var rereadRecs map[Coord]Parsed
	if len(again) > 0 {
		var err error
		if rereadRecs, err = reread(again); err != nil {
			return nil, err
		}
	}
	b := classBuilder{}
	for _, r := range t.rows {
		if done(r.coord) {
			continue
		}
		var err error
		b.add(t.classes[r.class].first.Class, r.ts, func() Class {
			p := t.classes[r.class].first
			if c := *firstPending[r.class]; c != p.Coord() {
				q, ok := rereadRecs[c]
				if !ok {
					err = fmt.Errorf("record %s is no longer in the DLQ", c)
				}
				p = q
			}
			return judged(p, rules)
		})
		if err != nil {
			return nil, err
		}
	}
	return b.classes(), nil
}
