// Package audit is Berth's append-only, hash-chained audit log. Every action
// that changes a cluster (offset resets, redrive plans, approvals and
// executions) appends one entry per step; each entry carries the SHA-256 of
// the entry before it, so `berth audit verify` detects an entry that was
// edited, removed or moved.
//
// The log is a local file of JSON lines. Appends from several goroutines or
// processes are serialised by an exclusive file lock, written with O_APPEND
// in one write and fsynced before Append returns, so an entry that Append
// reported is on disk. An optional Sink (for example a Kafka audit topic)
// mirrors entries after the local write so other operators see them too.
//
// What the chain cannot do on its own: someone with write access can delete
// the newest entries, or rewrite the whole file and recompute every hash.
// Mirroring to a sink the writer cannot rewrite (an audit topic, a remote
// log) is what anchors the head; Verify reports the head hash so it can be
// compared with such a copy.
package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"
)

// Genesis is the Prev of the first entry: the chain starts from a fixed,
// recognisable value rather than an empty string.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Entry is one audited step. Callers fill Actor (optional), Action, Context,
// Target and Details; Append fills Seq, Time, Prev and Hash.
type Entry struct {
	// Seq numbers entries from 1 in the order they were appended.
	Seq int64 `json:"seq"`
	// Time is when the entry was appended (UTC, RFC 3339 with nanoseconds).
	Time string `json:"time"`
	// Actor is who acted: the OS user unless the caller says otherwise.
	Actor string `json:"actor"`
	// Action names the step, dotted, as internal/actions writes it:
	// "offsets.reset", "redrive.approved", "redrive.execute.started",
	// "redrive.batch.sent", "redrive.refused".
	Action string `json:"action"`
	// Context is the Berth context (cluster) the action ran against.
	Context string `json:"context"`
	// Target is what was acted on: a group, a plan id, a queue.
	Target string `json:"target"`
	// Details is the action's own record (before/after offsets, plan digest,
	// outcome). On append it may be any JSON-encodable value; entries read
	// back from the file hold it as json.RawMessage.
	Details any `json:"details,omitempty"`
	// Prev is the Hash of the entry before (Genesis for the first).
	Prev string `json:"prev"`
	// Hash is SHA-256 over Prev and this entry's other fields.
	Hash string `json:"hash"`
}

// When parses Time; the zero time when it does not parse.
func (e Entry) When() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.Time)
	return t
}

// DetailsJSON is Details as JSON bytes (nil when there are none).
func (e Entry) DetailsJSON() json.RawMessage {
	switch d := e.Details.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return nil
		}
		return b
	}
}

// Decode unmarshals Details into v (a pointer).
func (e Entry) Decode(v any) error {
	b := e.DetailsJSON()
	if b == nil {
		return errors.New("audit: entry has no details")
	}
	return json.Unmarshal(b, v)
}

// hashed is the exact, fixed-order encoding the hash covers: every field but
// Hash, with Details already reduced to compact JSON. The same function
// encodes at append and at verify, so a byte changed anywhere in an entry
// (outside insignificant JSON whitespace) changes its hash.
type hashed struct {
	Seq     int64           `json:"seq"`
	Time    string          `json:"time"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"`
	Context string          `json:"context"`
	Target  string          `json:"target"`
	Details json.RawMessage `json:"details,omitempty"`
	Prev    string          `json:"prev"`
}

// line is the on-disk encoding: hashed plus the hash.
type line struct {
	hashed
	Hash string `json:"hash"`
}

func computeHash(h hashed) (string, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func compactJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	if buf.String() == "null" {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// Sink mirrors appended entries somewhere else (a Kafka audit topic, a
// remote collector). It is called after the local append is durable.
type Sink interface {
	Mirror(ctx context.Context, e Entry) error
}

// SinkError reports that an entry was written locally but a sink failed to
// mirror it. The entry is in the local log; callers usually warn and go on.
type SinkError struct {
	Entry Entry
	Err   error
}

func (e *SinkError) Error() string {
	return fmt.Sprintf("audit entry %d written locally, but mirroring failed: %v", e.Entry.Seq, e.Err)
}
func (e *SinkError) Unwrap() error { return e.Err }

// Log is an audit log file. The zero value is not usable; call Open.
type Log struct {
	path  string
	now   func() time.Time
	sinks []Sink
}

// Option configures a Log.
type Option func(*Log)

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(l *Log) { l.now = now } }

// WithSink adds a sink that mirrors every appended entry.
func WithSink(s Sink) Option { return func(l *Log) { l.sinks = append(l.sinks, s) } }

// Open returns the log at path, creating its directory (0700) when missing.
// The file itself is created by the first Append.
func Open(path string, opts ...Option) (*Log, error) {
	if path == "" {
		return nil, errors.New("audit: no audit file configured (audit.file)")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit file %s: %w", path, err)
	}
	l := &Log{path: path, now: time.Now}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Path is the file the log is kept in.
func (l *Log) Path() string { return l.path }

// CurrentUser names who is running Berth: $USER, else the OS account name,
// else "unknown". It is what an entry records when Actor is empty.
func CurrentUser() string {
	if u := strings.TrimSpace(os.Getenv("USER")); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// Append writes e as the next entry and returns it as stored (with Seq,
// Time, Prev and Hash). The write is serialised against every other
// appender of the same file (other goroutines and processes) by an
// exclusive lock, and fsynced before Append returns. When the file's last
// entry is damaged (a torn write, an edit) Append refuses: chaining onto a
// broken entry would hide the damage (SetAsideTorn is the explicit way
// past a torn write). A failing sink yields a *SinkError
// after the local write succeeded.
func (l *Log) Append(ctx context.Context, e Entry) (Entry, error) {
	if e.Action == "" {
		return Entry{}, errors.New("audit: entry has no action")
	}
	if e.Actor == "" {
		e.Actor = CurrentUser()
	}
	var details json.RawMessage
	if e.Details != nil {
		raw, err := json.Marshal(e.Details)
		if err != nil {
			return Entry{}, fmt.Errorf("audit: details of %s: %w", e.Action, err)
		}
		if details, err = compactJSON(raw); err != nil {
			return Entry{}, fmt.Errorf("audit: details of %s: %w", e.Action, err)
		}
	}

	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return Entry{}, fmt.Errorf("audit file %s: %w", l.path, err)
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return Entry{}, fmt.Errorf("audit file %s: lock: %w", l.path, err)
	}
	defer unlockFile(f)

	prev, seq, err := lastEntry(f)
	if errors.Is(err, errTorn) {
		// Only an explicit, audited repair may move past a torn line: a
		// cut line looks the same as tampering, so Berth does not guess.
		return Entry{}, fmt.Errorf("audit file %s: %w (run `berth audit repair` to set it aside, recorded in the log)", l.path, err)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("audit file %s: %w (run `berth audit verify`)", l.path, err)
	}
	h := hashed{
		Seq:     seq + 1,
		Time:    l.now().UTC().Format(time.RFC3339Nano),
		Actor:   e.Actor,
		Action:  e.Action,
		Context: e.Context,
		Target:  e.Target,
		Details: details,
		Prev:    prev,
	}
	b, stored, err := seal(h)
	if err != nil {
		return Entry{}, err
	}
	// One write of the whole line: with O_APPEND and the lock held, no other
	// appender can interleave with it.
	if _, err := f.Write(b); err != nil {
		return Entry{}, fmt.Errorf("audit file %s: write: %w", l.path, err)
	}
	if err := f.Sync(); err != nil {
		return Entry{}, fmt.Errorf("audit file %s: fsync: %w", l.path, err)
	}
	return l.mirror(ctx, stored)
}

// seal hashes h and returns its line as the file holds it (newline
// included) and the entry as stored.
func seal(h hashed) ([]byte, Entry, error) {
	sum, err := computeHash(h)
	if err != nil {
		return nil, Entry{}, err
	}
	b, err := json.Marshal(line{hashed: h, Hash: sum})
	if err != nil {
		return nil, Entry{}, err
	}
	return append(b, '\n'), toEntry(line{hashed: h, Hash: sum}), nil
}

// mirror hands a durably written entry to every sink; the first failure
// is a *SinkError carrying the entry.
func (l *Log) mirror(ctx context.Context, stored Entry) (Entry, error) {
	for _, s := range l.sinks {
		if err := s.Mirror(ctx, stored); err != nil {
			return stored, &SinkError{Entry: stored, Err: err}
		}
	}
	return stored, nil
}

func toEntry(ln line) Entry {
	e := Entry{Seq: ln.Seq, Time: ln.Time, Actor: ln.Actor, Action: ln.Action, Context: ln.Context,
		Target: ln.Target, Prev: ln.Prev, Hash: ln.Hash}
	if ln.Details != nil {
		e.Details = ln.Details
	}
	return e
}

// errTorn is a log whose last line has no newline: a write cut short.
var errTorn = errors.New("the last entry is incomplete (no newline at end of file: a write cut short, killed mid-write?)")

// lastEntry reads the final line of f and returns its hash and sequence
// number (Genesis and 0 for an empty file). It checks that line's own hash
// so a damaged tail is caught before anything is chained onto it.
func lastEntry(f *os.File) (string, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	return lastEntryBefore(f, st.Size())
}

// lastEntryBefore is lastEntry of the file's first size bytes.
func lastEntryBefore(f *os.File, size int64) (string, int64, error) {
	if size == 0 {
		return Genesis, 0, nil
	}
	// Read backwards in chunks until the start of the last line.
	const chunk = 4096
	var tail []byte
	pos := size
	for {
		n := int64(chunk)
		if pos < n {
			n = pos
		}
		pos -= n
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, pos); err != nil && err != io.EOF {
			return "", 0, err
		}
		tail = append(buf, tail...)
		if tail[len(tail)-1] != '\n' {
			return "", 0, errTorn
		}
		if i := bytes.LastIndexByte(tail[:len(tail)-1], '\n'); i >= 0 {
			tail = tail[i+1:]
			break
		}
		if pos == 0 {
			break
		}
	}
	ln, err := parseLine(bytes.TrimRight(tail, "\n"))
	if err != nil {
		return "", 0, fmt.Errorf("the last entry is damaged: %w", err)
	}
	return ln.Hash, ln.Seq, nil
}

// parseLine decodes one line and checks its hash against its content.
func parseLine(b []byte) (line, error) {
	var ln line
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ln); err != nil {
		return line{}, fmt.Errorf("not a valid entry: %v", err)
	}
	d, err := compactJSON(ln.Details)
	if err != nil {
		return line{}, fmt.Errorf("details: %v", err)
	}
	ln.Details = d
	sum, err := computeHash(ln.hashed)
	if err != nil {
		return line{}, err
	}
	if sum != ln.Hash {
		return ln, fmt.Errorf("hash mismatch: content hashes to %s…, entry says %s…", sum[:12], short(ln.Hash))
	}
	return ln, nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// List returns every entry in order. A line that cannot be read as an entry
// is an error naming its line number; List does not check the chain (Verify
// does), so a tampered log still lists.
func (l *Log) List() ([]Entry, error) {
	lines, err := l.readLines()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(lines))
	for i, b := range lines {
		var ln line
		if err := json.Unmarshal(b, &ln); err != nil {
			return out, fmt.Errorf("audit file %s: line %d: not a valid entry: %v", l.path, i+1, err)
		}
		out = append(out, toEntry(ln))
	}
	return out, nil
}

func (l *Log) readLines() ([][]byte, error) {
	data, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit file %s: %w", l.path, err)
	}
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data) // torn tail: Verify reports it
			break
		}
		lines = append(lines, data[:i])
		data = data[i+1:]
	}
	return lines, nil
}

// Problem is the first place the chain breaks.
type Problem struct {
	// Line is the 1-based line number in the file.
	Line int `json:"line"`
	// Seq is the entry's sequence number as written (0 when unreadable).
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
}

func (p Problem) String() string {
	if p.Seq > 0 {
		return fmt.Sprintf("line %d (entry %d): %s", p.Line, p.Seq, p.Reason)
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Reason)
}

// Report is the outcome of Verify.
type Report struct {
	File    string `json:"file"`
	Entries int    `json:"entries"`
	// Head is the last good entry's hash: compare it with a mirrored copy to
	// detect removal of the newest entries, which the chain alone cannot.
	Head string   `json:"head"`
	OK   bool     `json:"ok"`
	Bad  *Problem `json:"first_bad,omitempty"`
}

// Verify walks the chain from the first entry and reports the first entry
// whose content does not match its hash (an edit), whose Prev is not the
// hash of the line before (a removal or reordering), or whose Seq breaks the
// sequence. A missing file is an empty, valid log.
func (l *Log) Verify() (Report, error) {
	lines, err := l.readLines()
	if err != nil {
		return Report{}, err
	}
	rep := Report{File: l.path, Head: Genesis, OK: true}
	prev, seq := Genesis, int64(0)
	for i, b := range lines {
		bad := func(s int64, format string, a ...any) (Report, error) {
			rep.OK = false
			rep.Bad = &Problem{Line: i + 1, Seq: s, Reason: fmt.Sprintf(format, a...)}
			return rep, nil
		}
		if i == len(lines)-1 && !endsWithNewline(l.path) {
			return bad(0, "incomplete entry (no newline at end of file: a write cut short, killed mid-write?): `berth audit repair` sets it aside, recorded in the log")
		}
		ln, err := parseLine(b)
		if err != nil {
			return bad(ln.Seq, "%v", err)
		}
		if ln.Prev != prev {
			if i == 0 {
				return bad(ln.Seq, "first entry does not start the chain (an earlier entry was removed?)")
			}
			return bad(ln.Seq, "does not follow the entry before it (prev %s…, expected %s…): an entry was removed or reordered", short(ln.Prev), short(prev))
		}
		if ln.Seq != seq+1 {
			return bad(ln.Seq, "sequence number %d, expected %d", ln.Seq, seq+1)
		}
		prev, seq = ln.Hash, ln.Seq
		rep.Entries++
		rep.Head = prev
	}
	return rep, nil
}

func endsWithNewline(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return true
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, st.Size()-1); err != nil {
		return false
	}
	return b[0] == '\n'
}
