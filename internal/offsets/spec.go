// Package offsets plans consumer-group offset resets with the semantics of
// Apache Kafka's kafka-consumer-groups tool, and more care: the plan is a
// pure computation (plan.go) over data the action reads, so every mode,
// clamp and warning is testable without a broker. The action itself
// (internal/actions.Resetter) reads through a small backend interface and
// is the one place that enforces read-only contexts, the active-member
// gate, the effects guard, compare-then-commit and the audit log.
package offsets

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berth-dev/berth/backends"
)

// TP names one partition.
type TP = backends.TopicPartition

// Mode is how targets are chosen; exactly one per reset.
type Mode string

const (
	ToEarliest Mode = "to-earliest" // log start offset
	ToLatest   Mode = "to-latest"   // log end offset
	ToCurrent  Mode = "to-current"  // the committed offset (log end when none)
	ToOffset   Mode = "to-offset"   // a given offset, clamped
	ShiftBy    Mode = "shift-by"    // committed ± N, clamped; needs a commit
	ToDatetime Mode = "to-datetime" // first record with timestamp >= T, else log end
	ByDuration Mode = "by-duration" // as to-datetime with T = now - duration
	FromGroup  Mode = "from-group"  // another group's committed offsets
	FromFile   Mode = "from-file"   // topic,partition,offset lines
)

// Modes lists every mode in the order the CLI and TUI offer them.
var Modes = []Mode{ToEarliest, ToLatest, ToCurrent, ToOffset, ShiftBy, ToDatetime, ByDuration, FromGroup, FromFile}

// Spec is a mode with its argument.
type Spec struct {
	Mode Mode `json:"mode"`
	// Offset is --to-offset's N.
	Offset int64 `json:"offset,omitempty"`
	// Shift is --shift-by's ±N.
	Shift int64 `json:"shift,omitempty"`
	// Time is --to-datetime's instant, or for --by-duration the instant the
	// duration was resolved to when the plan was made.
	Time time.Time `json:"time,omitzero"`
	// Duration is --by-duration's argument.
	Duration time.Duration `json:"duration,omitempty"`
	// Group is --from-group's source group.
	Group string `json:"from_group,omitempty"`
	// File is --from-file's parsed rows, and FileName where they came from.
	File     []FileOffset `json:"file,omitempty"`
	FileName string       `json:"file_name,omitempty"`
}

// String renders the spec as the flag that produced it.
func (s Spec) String() string {
	switch s.Mode {
	case ToOffset:
		return fmt.Sprintf("--to-offset %d", s.Offset)
	case ShiftBy:
		return fmt.Sprintf("--shift-by %+d", s.Shift)
	case ToDatetime:
		return "--to-datetime " + s.Time.UTC().Format(time.RFC3339Nano)
	case ByDuration:
		return fmt.Sprintf("--by-duration %s (%s)", s.Duration, s.Time.UTC().Format(time.RFC3339))
	case FromGroup:
		return "--from-group " + s.Group
	case FromFile:
		return "--from-file " + s.FileName
	default:
		return "--" + string(s.Mode)
	}
}

// Validate checks the spec's own argument.
func (s Spec) Validate() error {
	switch s.Mode {
	case ToEarliest, ToLatest, ToCurrent, ShiftBy:
	case ToOffset:
		if s.Offset < 0 {
			return fmt.Errorf("--to-offset: %d is negative", s.Offset)
		}
	case ToDatetime:
		if s.Time.IsZero() {
			return errors.New("--to-datetime: no time given")
		}
	case ByDuration:
		if s.Duration <= 0 {
			return fmt.Errorf("--by-duration: %s must be positive", s.Duration)
		}
	case FromGroup:
		if s.Group == "" {
			return errors.New("--from-group: no group given")
		}
	case FromFile:
		if len(s.File) == 0 {
			return fmt.Errorf("--from-file %s: no offsets in the file", s.FileName)
		}
	case "":
		return errors.New("no reset mode: give one of --" + joinModes(", --"))
	default:
		return fmt.Errorf("unknown reset mode %q", s.Mode)
	}
	return nil
}

func joinModes(sep string) string {
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return strings.Join(names, sep)
}

// ParseDatetime reads --to-datetime the way kafka-consumer-groups does:
// RFC 3339 with optional fractional seconds; when the time has no zone
// (no Z, +hh:mm, +hhmm or +hh) it is UTC, never local time.
func ParseDatetime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	layouts := []string{
		time.RFC3339Nano,
		"2006-01-02T15:04:05.999999999Z0700",
		"2006-01-02T15:04:05.999999999Z07",
		"2006-01-02T15:04Z07:00",
	}
	for _, l := range layouts {
		if t, err := time.Parse(l, s); err == nil {
			return inKafkaRange(s, t.UTC())
		}
	}
	for _, l := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return inKafkaRange(s, t)
		}
	}
	return time.Time{}, fmt.Errorf("--to-datetime: %q is not an RFC 3339 time (e.g. 2026-11-29T08:00:00Z; no zone means UTC)", s)
}

// inKafkaRange refuses times Kafka timestamps cannot hold: they are
// milliseconds since 1970 (a negative one means "no timestamp"), so
// 0001-01-01 is a typo, not "the beginning".
func inKafkaRange(s string, t time.Time) (time.Time, error) {
	if t.Before(time.Unix(0, 0)) {
		return time.Time{}, fmt.Errorf("--to-datetime: %q is before 1970-01-01T00:00:00Z, where Kafka timestamps start (use --to-earliest for the log start)", s)
	}
	return t, nil
}

// ParseDuration reads --by-duration: a Go duration (15m, 2h30m) or an ISO
// 8601 duration as kafka-consumer-groups takes it (PT15M, P1DT2H).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return 0, fmt.Errorf("--by-duration: %q must be positive", s)
		}
		return d, nil
	}
	if d, ok := parseISODuration(s); ok && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("--by-duration: %q is not a duration (e.g. 15m, 2h, PT15M, P1D)", s)
}

func parseISODuration(s string) (time.Duration, bool) {
	u := strings.ToUpper(s)
	if !strings.HasPrefix(u, "P") || len(u) < 3 {
		return 0, false
	}
	u = u[1:]
	var d time.Duration
	inTime := false
	num := ""
	for _, r := range u {
		switch {
		case r >= '0' && r <= '9' || r == '.':
			num += string(r)
		case r == 'T':
			if inTime || num != "" {
				return 0, false
			}
			inTime = true
		default:
			if num == "" {
				return 0, false
			}
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, false
			}
			var unit time.Duration
			switch {
			case r == 'D' && !inTime:
				unit = 24 * time.Hour
			case r == 'H' && inTime:
				unit = time.Hour
			case r == 'M' && inTime:
				unit = time.Minute
			case r == 'S' && inTime:
				unit = time.Second
			default:
				return 0, false
			}
			d += time.Duration(f * float64(unit))
			num = ""
		}
	}
	return d, num == ""
}

// FileOffset is one line of a --from-file CSV.
type FileOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Line      int    `json:"line"`
}

// ParseCSV reads topic,partition,offset lines (the kafka-consumer-groups
// export format). Blank lines and lines starting with # are skipped; an
// optional header line "topic,partition,offset" is allowed. Errors name the
// line and the field; a partition listed twice is an error.
func ParseCSV(name string, r io.Reader) ([]FileOffset, error) {
	// A UTF-8 byte order mark (spreadsheets write one) is not part of the
	// first field: without dropping it "\ufefftopic" is no header.
	br := bufio.NewReader(r)
	if b, err := br.Peek(3); err == nil && string(b) == "\ufeff" {
		_, _ = br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	var out []FileOffset
	seen := map[TP]int{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%s: line %d: %v", name, pe.Line, pe.Err)
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(out) == 0 && len(rec) == 3 && strings.EqualFold(strings.TrimSpace(rec[0]), "topic") {
			continue
		}
		if len(rec) != 3 {
			return nil, fmt.Errorf("%s: line %d: expected topic,partition,offset, got %d field(s)", name, line, len(rec))
		}
		topic := strings.TrimSpace(rec[0])
		if topic == "" {
			return nil, fmt.Errorf("%s: line %d: topic is empty", name, line)
		}
		if len(topic) > maxTopicLen {
			return nil, fmt.Errorf("%s: line %d: topic %s is longer than Kafka allows (%d bytes)", name, line, quoteCapped(topic), maxTopicLen)
		}
		p, err := strconv.ParseInt(strings.TrimSpace(rec[1]), 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("%s: line %d: partition %s is not a non-negative integer", name, line, quoteCapped(rec[1]))
		}
		o, err := strconv.ParseInt(strings.TrimSpace(rec[2]), 10, 64)
		if err != nil || o < 0 {
			return nil, fmt.Errorf("%s: line %d: offset %s is not a non-negative integer", name, line, quoteCapped(rec[2]))
		}
		tp := TP{Topic: topic, Partition: int32(p)}
		if first, dup := seen[tp]; dup {
			return nil, fmt.Errorf("%s: line %d: %s[%d] already given on line %d", name, line, topic, p, first)
		}
		seen[tp] = line
		out = append(out, FileOffset{Topic: topic, Partition: int32(p), Offset: o, Line: line})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no offsets (expected topic,partition,offset lines)", name)
	}
	return out, nil
}

// maxTopicLen is Kafka's limit on a topic name.
const maxTopicLen = 249

// maxQuoted caps a value quoted in an error: a CSV cell may be a megabyte.
const maxQuoted = 64

// quoteCapped quotes v for an error, cut at maxQuoted bytes with the cut
// said, never silently.
func quoteCapped(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes, first %d shown)", strconv.Quote(v[:cut]), len(v), cut)
}

// TopicScope is one --topic value: a topic and, optionally, partitions.
type TopicScope struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions,omitempty"` // nil: every partition
}

// ParseTopicScope reads "T" or "T:0,3,5".
func ParseTopicScope(s string) (TopicScope, error) {
	s = strings.TrimSpace(s)
	name, parts, hasParts := strings.Cut(s, ":")
	if name == "" {
		return TopicScope{}, fmt.Errorf("--topic: %q has no topic name", s)
	}
	ts := TopicScope{Topic: name}
	if !hasParts {
		return ts, nil
	}
	for _, p := range strings.Split(parts, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 {
			return TopicScope{}, fmt.Errorf("--topic %s: partition %q is not a non-negative integer", s, p)
		}
		ts.Partitions = append(ts.Partitions, int32(n))
	}
	return ts, nil
}

// Scope says which partitions a reset touches.
type Scope struct {
	// AllTopics is every partition the group has a committed offset for.
	AllTopics bool         `json:"all_topics,omitempty"`
	Topics    []TopicScope `json:"topics,omitempty"`
}

// Empty reports whether no scope was given.
func (s Scope) Empty() bool { return !s.AllTopics && len(s.Topics) == 0 }

// String renders the scope as flags.
func (s Scope) String() string {
	var parts []string
	if s.AllTopics {
		parts = append(parts, "--all-topics")
	}
	for _, t := range s.Topics {
		v := t.Topic
		if len(t.Partitions) > 0 {
			ps := make([]string, len(t.Partitions))
			for i, p := range t.Partitions {
				ps[i] = strconv.Itoa(int(p))
			}
			v += ":" + strings.Join(ps, ",")
		}
		parts = append(parts, "--topic "+v)
	}
	return strings.Join(parts, " ")
}

// TopicNames lists the topics the scope names explicitly.
func (s Scope) TopicNames() []string {
	var out []string
	for _, t := range s.Topics {
		out = append(out, t.Topic)
	}
	return out
}

// Select resolves the partitions a reset touches, as kafka-consumer-groups
// does: --all-topics is the partitions the group has committed offsets for
// (not its subscription); --topic T is every partition of T; --topic T:0,3
// the listed ones. --from-file needs no scope (its lines are the scope) and
// --from-group defaults to the source group's committed partitions; a scope
// given with either narrows them. topics maps each topic the scope names
// (and, for the file and source modes, each topic they name) to its
// partitions; a topic missing from it does not exist.
func Select(spec Spec, scope Scope, committed, source map[TP]int64, topics map[string][]int32) ([]TP, error) {
	set := map[TP]bool{}
	var base []TP
	switch {
	case spec.Mode == FromFile:
		for _, f := range spec.File {
			base = append(base, TP{Topic: f.Topic, Partition: f.Partition})
		}
	case spec.Mode == FromGroup && scope.Empty():
		for tp := range source {
			base = append(base, tp)
		}
		if len(base) == 0 {
			return nil, fmt.Errorf("--from-group %s: that group has no committed offsets", spec.Group)
		}
	case scope.Empty():
		return nil, errors.New("no scope: give --all-topics or --topic T[:P,P...]")
	}
	for _, tp := range base {
		ps, ok := topics[tp.Topic]
		if !ok {
			return nil, fmt.Errorf("topic %s does not exist", tp.Topic)
		}
		if !contains(ps, tp.Partition) {
			return nil, fmt.Errorf("topic %s has no partition %d (it has %d)", tp.Topic, tp.Partition, len(ps))
		}
	}

	if !scope.Empty() {
		if scope.AllTopics {
			if len(committed) == 0 {
				return nil, errors.New("--all-topics: the group has no committed offsets (name the partitions with --topic)")
			}
			for tp := range committed {
				set[tp] = true
			}
		}
		for _, t := range scope.Topics {
			ps, ok := topics[t.Topic]
			if !ok {
				return nil, fmt.Errorf("--topic %s: topic does not exist", t.Topic)
			}
			if len(t.Partitions) == 0 {
				for _, p := range ps {
					set[TP{Topic: t.Topic, Partition: p}] = true
				}
				continue
			}
			for _, p := range t.Partitions {
				if !contains(ps, p) {
					return nil, fmt.Errorf("--topic %s: partition %d does not exist (the topic has %d)", t.Topic, p, len(ps))
				}
				set[TP{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	var out []TP
	if base != nil {
		// The file or source group chooses; a scope narrows.
		for _, tp := range base {
			if scope.Empty() || set[tp] {
				out = append(out, tp)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s: no partition is inside the scope %s", spec, scope)
		}
	} else {
		for tp := range set {
			out = append(out, tp)
		}
	}
	sortTPs(out)
	return out, nil
}

func contains(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func sortTPs(s []TP) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Topic != s[j].Topic {
			return s[i].Topic < s[j].Topic
		}
		return s[i].Partition < s[j].Partition
	})
}
