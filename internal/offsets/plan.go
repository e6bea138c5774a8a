package offsets

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/backends"
)

// PlanVersion is the saved-plan format version.
const PlanVersion = 1

// Bounds is a partition's log start and log end (high watermark) offsets.
type Bounds struct {
	LogStart int64 `json:"log_start"`
	LogEnd   int64 `json:"log_end"`
}

// Snapshot is everything the planner needs, read by the action from the
// cluster. The planner does no I/O: same snapshot, same plan.
type Snapshot struct {
	Group   string
	State   string
	Members []backends.Member
	// Committed holds the group's committed offsets (partitions without a
	// commit are absent).
	Committed map[TP]int64
	// Bounds holds log start and end for every partition in scope.
	Bounds map[TP]Bounds
	// ForTime holds, for --to-datetime and --by-duration, the first offset
	// whose timestamp is at or after Spec.Time (ListOffsets by timestamp);
	// absent or at the log end when no such record exists.
	ForTime map[TP]int64
	// Source holds --from-group's committed offsets.
	Source map[TP]int64
	// Effects is whether the group is configured as effect-producing.
	Effects bool
}

// Clamp names which end of the log a target was clamped to.
type Clamp string

const (
	NotClamped      Clamp = ""
	ClampedLogStart Clamp = "log-start"
	ClampedLogEnd   Clamp = "log-end"
)

// Row is one partition of a plan.
type Row struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Current is the committed offset at plan time; nil when the group has
	// no commit for the partition.
	Current *int64 `json:"current"`
	// Requested is what the mode asked for, before clamping.
	Requested int64 `json:"requested"`
	// Target is the offset that will be committed.
	Target int64 `json:"target"`
	// Delta is Target - Current (nil without a current offset).
	Delta *int64 `json:"delta"`
	// ReplayRecords counts offsets the group will read again (target
	// before current), SkipRecords offsets it will never read (target after
	// current). Both count offsets that still exist in the log; compacted
	// gaps and transaction markers make the real record count lower.
	ReplayRecords int64 `json:"replay_records"`
	SkipRecords   int64 `json:"skip_records"`
	// Clamped is true when Requested lay outside [log start, log end] and
	// Target was moved to ClampedTo.
	Clamped   bool  `json:"clamped"`
	ClampedTo Clamp `json:"clamped_to,omitempty"`
	LogStart  int64 `json:"log_start"`
	LogEnd    int64 `json:"log_end"`
	// SpanFrom and SpanTo are the timestamps of the first and last record
	// replayed or skipped, read from the log (nil when unknown).
	SpanFrom *time.Time `json:"span_from,omitempty"`
	SpanTo   *time.Time `json:"span_to,omitempty"`
	// Note explains a fallback (e.g. no record after --to-datetime).
	Note string `json:"note,omitempty"`
}

// TP is the row's partition.
func (r Row) TP() TP { return TP{Topic: r.Topic, Partition: r.Partition} }

// Label is "topic[partition]".
func (r Row) Label() string { return fmt.Sprintf("%s[%d]", r.Topic, r.Partition) }

// span returns the offsets [from, to) replayed or skipped, clipped to what
// still exists in the log; ok is false when nothing is.
func (r Row) span() (from, to int64, ok bool) {
	if r.Current == nil {
		return 0, 0, false
	}
	from, to = r.Target, *r.Current
	if from > to {
		from, to = to, from
	}
	from = max(from, r.LogStart)
	to = min(to, r.LogEnd)
	return from, to, to > from
}

// Plan is a computed reset: exactly the offsets --execute will commit, and
// what the group looked like when they were computed. It is the unit the
// dry run shows, a saved plan file holds, and Execute compares against.
type Plan struct {
	Version   int       `json:"version"`
	Context   string    `json:"context"`
	ClusterID string    `json:"cluster_id"`
	Group     string    `json:"group"`
	Spec      Spec      `json:"spec"`
	Scope     Scope     `json:"scope"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	// GroupState and Members are as seen at plan time.
	GroupState string            `json:"group_state"`
	Members    []backends.Member `json:"members"`
	Effects    bool              `json:"effects"`
	Partitions []Row             `json:"partitions"`
	Warnings   []string          `json:"warnings"`
	// Digest is SHA-256 over the plan's canonical JSON with Digest empty;
	// a saved plan whose digest does not match was edited and is refused.
	Digest string `json:"digest"`
}

// Compute plans a reset of the partitions tps. It follows
// kafka-consumer-groups: --shift-by needs a committed offset; --to-current
// without one is the log end; --to-datetime with no record at or after the
// time is the log end; --to-offset, --shift-by, --from-file and
// --from-group are clamped to [log start, log end] and the clamp is kept on
// the row. It also warns about what the operator should know before
// executing (active members, effect-producing groups, retention).
func Compute(spec Spec, tps []TP, s Snapshot) (Plan, error) {
	if err := spec.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Version: PlanVersion, Group: s.Group, Spec: spec, GroupState: s.State,
		Members: s.Members, Effects: s.Effects, Partitions: []Row{}, Warnings: []string{}}
	if p.Members == nil {
		p.Members = []backends.Member{}
	}
	file := map[TP]int64{}
	for _, f := range spec.File {
		file[TP{Topic: f.Topic, Partition: f.Partition}] = f.Offset
	}
	var fallback, noSource, lost []string
	for _, tp := range tps {
		b, ok := s.Bounds[tp]
		if !ok {
			return Plan{}, fmt.Errorf("%s[%d]: log offsets unknown", tp.Topic, tp.Partition)
		}
		row := Row{Topic: tp.Topic, Partition: tp.Partition, LogStart: b.LogStart, LogEnd: b.LogEnd}
		if c, ok := s.Committed[tp]; ok {
			c := c
			row.Current = &c
		}
		clamp := true
		switch spec.Mode {
		case ToEarliest:
			row.Requested, clamp = b.LogStart, false
		case ToLatest:
			row.Requested, clamp = b.LogEnd, false
		case ToCurrent:
			if row.Current != nil {
				row.Requested = *row.Current
			} else {
				row.Requested = b.LogEnd
				row.Note = "no committed offset: log end"
			}
			clamp = false
		case ToOffset:
			row.Requested = spec.Offset
		case ShiftBy:
			if row.Current == nil {
				return Plan{}, fmt.Errorf("--shift-by: cannot shift %s[%d]: the group has no committed offset for it", tp.Topic, tp.Partition)
			}
			row.Requested = addSaturating(*row.Current, spec.Shift)
		case ToDatetime, ByDuration:
			o, ok := s.ForTime[tp]
			if !ok || o < 0 || o >= b.LogEnd {
				row.Requested = b.LogEnd
				row.Note = "no record at or after " + spec.Time.UTC().Format(time.RFC3339) + ": log end"
				fallback = append(fallback, row.Label())
			} else {
				row.Requested = o
			}
			clamp = false
		case FromGroup:
			o, ok := s.Source[tp]
			if !ok {
				noSource = append(noSource, row.Label())
				continue
			}
			row.Requested = o
		case FromFile:
			row.Requested = file[tp]
		}
		row.Target = row.Requested
		if clamp {
			switch {
			case row.Requested > b.LogEnd:
				row.Target, row.Clamped, row.ClampedTo = b.LogEnd, true, ClampedLogEnd
			case row.Requested < b.LogStart:
				row.Target, row.Clamped, row.ClampedTo = b.LogStart, true, ClampedLogStart
			}
		}
		if row.Current != nil {
			d := row.Target - *row.Current
			row.Delta = &d
			if from, to, ok := row.span(); ok {
				if d < 0 {
					row.ReplayRecords = to - from
				} else {
					row.SkipRecords = to - from
				}
			}
			if *row.Current < b.LogStart {
				lost = append(lost, fmt.Sprintf("%s (committed %d, log start %d)", row.Label(), *row.Current, b.LogStart))
			}
		}
		p.Partitions = append(p.Partitions, row)
	}
	if len(p.Partitions) == 0 {
		return Plan{}, fmt.Errorf("%s: nothing to reset (no partition in scope has a source offset)", spec)
	}
	p.Warnings = warnings(p, fallback, noSource, lost)
	return p, nil
}

func warnings(p Plan, fallback, noSource, lost []string) []string {
	var w []string
	if len(p.Members) > 0 {
		w = append(w, fmt.Sprintf("group %s has %d active member(s) (%s): --execute is refused until they stop", p.Group, len(p.Members), MemberNames(p.Members)))
	}
	replay, unknown := p.ReplayTotal(), p.UnknownStart()
	if p.Effects && (replay > 0 || len(unknown) > 0) {
		msg := fmt.Sprintf("group %s is effect-producing: replaying %d record(s) repeats their side effects (payments, emails) unless its consumer is idempotent; --execute needs --confirm-replay-effects", p.Group, replay)
		if len(unknown) > 0 {
			msg += fmt.Sprintf(" (%s had no committed offset, so what they replay is unknown)", listSome(unknown))
		}
		w = append(w, msg)
	}
	if len(fallback) > 0 {
		w = append(w, fmt.Sprintf("no record at or after %s in %s: falling back to the log end", p.Spec.Time.UTC().Format(time.RFC3339), listSome(fallback)))
	}
	var clamped []string
	for _, r := range p.Partitions {
		if r.Clamped {
			clamped = append(clamped, fmt.Sprintf("%s asked %d, set to %d (%s)", r.Label(), r.Requested, r.Target, r.ClampedTo))
		}
	}
	if len(clamped) > 0 {
		w = append(w, "clamped to the log: "+listSome(clamped))
	}
	if len(noSource) > 0 {
		w = append(w, fmt.Sprintf("%s has no committed offset for %s: left unchanged", p.Spec.Group, listSome(noSource)))
	}
	if len(lost) > 0 {
		w = append(w, "committed offset below the log start (records already deleted by retention): "+listSome(lost))
	}
	var atStart []string
	for _, r := range p.Partitions {
		if r.Target == r.LogStart && r.LogStart > 0 && r.LogEnd > r.LogStart && r.ReplayRecords > 0 {
			atStart = append(atStart, r.Label())
		}
	}
	if len(atStart) > 0 {
		w = append(w, "target is the oldest retained record in "+listSome(atStart)+": if retention deletes it before the group restarts, consumers fall back to auto.offset.reset")
	}
	return w
}

// warnListMax is how many partitions a warning names before "and N more":
// the table shows every row; a warning is read in one glance.
const warnListMax = 8

func listSome(items []string) string {
	if len(items) <= warnListMax {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:warnListMax], ", "), len(items)-warnListMax)
}

// MemberNames names a group's members for a message: client id, member id, host.
func MemberNames(ms []backends.Member) string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		n := m.ID
		if m.ClientID != "" {
			n = m.ClientID + " " + m.ID
		}
		if m.Host != "" {
			n += "@" + m.Host
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// ReplayTotal is the records replayed over every partition.
func (p Plan) ReplayTotal() int64 {
	var n int64
	for _, r := range p.Partitions {
		n += r.ReplayRecords
	}
	return n
}

// SkipTotal is the records skipped over every partition.
func (p Plan) SkipTotal() int64 {
	var n int64
	for _, r := range p.Partitions {
		n += r.SkipRecords
	}
	return n
}

// UnknownStart lists partitions without a committed offset whose target is
// before the log end: where the consumer would otherwise start depends on
// its auto.offset.reset, so they may replay.
func (p Plan) UnknownStart() []string {
	var out []string
	for _, r := range p.Partitions {
		if r.Current == nil && r.Target < r.LogEnd {
			out = append(out, r.Label())
		}
	}
	return out
}

// NeedsEffectsConfirmation reports whether executing the plan replays
// records of an effect-producing group.
func (p Plan) NeedsEffectsConfirmation() bool {
	return p.Effects && (p.ReplayTotal() > 0 || len(p.UnknownStart()) > 0)
}

// SpanQueries lists the log positions whose record timestamps bound each
// row's replayed or skipped span: the first offset and the last one.
func (p Plan) SpanQueries() []backends.OffsetQuery {
	var qs []backends.OffsetQuery
	for _, r := range p.Partitions {
		from, to, ok := r.span()
		if !ok {
			continue
		}
		qs = append(qs, backends.OffsetQuery{TopicPartition: r.TP(), Offset: from})
		if to-1 > from {
			qs = append(qs, backends.OffsetQuery{TopicPartition: r.TP(), Offset: to - 1})
		}
	}
	return qs
}

// WithSpans fills each row's time span from record timestamps read at the
// positions SpanQueries asked for. A timestamp belonging to a record beyond
// the span (the asked offset was a gap) is not used.
func (p Plan) WithSpans(times []backends.RecordTime) Plan {
	type key struct {
		tp TP
		o  int64
	}
	at := map[key]backends.RecordTime{}
	for _, t := range times {
		if t.Found {
			at[key{t.TopicPartition, t.Offset}] = t
		}
	}
	rows := make([]Row, len(p.Partitions))
	copy(rows, p.Partitions)
	for i, r := range rows {
		from, to, ok := r.span()
		if !ok {
			continue
		}
		if t, ok := at[key{r.TP(), from}]; ok && t.At < to {
			ts := t.Timestamp.UTC()
			rows[i].SpanFrom = &ts
		}
		last := to - 1
		if t, ok := at[key{r.TP(), last}]; ok && t.At < to {
			ts := t.Timestamp.UTC()
			rows[i].SpanTo = &ts
		} else if last == from && rows[i].SpanFrom != nil {
			ts := *rows[i].SpanFrom
			rows[i].SpanTo = &ts
		}
	}
	p.Partitions = rows
	return p
}

// Targets is the offsets the plan commits.
func (p Plan) Targets() map[TP]int64 {
	out := make(map[TP]int64, len(p.Partitions))
	for _, r := range p.Partitions {
		out[r.TP()] = r.Target
	}
	return out
}

// ComputeDigest is SHA-256 over the plan's JSON with Digest empty.
func (p Plan) ComputeDigest() string {
	p.Digest = ""
	b, err := json.Marshal(p)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Seal sets the digest.
func (p Plan) Seal() Plan {
	p.Digest = p.ComputeDigest()
	return p
}

// ParsePlan reads a saved plan and checks its version and digest: a plan
// edited after it was written (a target changed by hand) is refused.
func ParsePlan(name string, b []byte) (Plan, error) {
	var p Plan
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("plan %s: not a reset plan: %v", name, err)
	}
	if p.Version != PlanVersion {
		return Plan{}, fmt.Errorf("plan %s: version %d, this berth reads version %d", name, p.Version, PlanVersion)
	}
	if p.Digest == "" || p.ComputeDigest() != p.Digest {
		return Plan{}, fmt.Errorf("plan %s: digest does not match its content (edited after the dry run?): run the dry run again", name)
	}
	if len(p.Partitions) == 0 {
		return Plan{}, fmt.Errorf("plan %s: no partitions", name)
	}
	return p, nil
}

// SpanLayout is how the dry run prints record timestamps.
const SpanLayout = "2006-01-02 15:04:05Z"

// CurrentText is the CURRENT cell: the committed offset or "-".
func (r Row) CurrentText() string {
	if r.Current == nil {
		return "-"
	}
	return fmt.Sprint(*r.Current)
}

// ChangeText is the CHANGE cell: the signed delta or "-".
func (r Row) ChangeText() string {
	if r.Delta == nil {
		return "-"
	}
	return fmt.Sprintf("%+d", *r.Delta)
}

// ClampText is the CLAMPED cell: which end and what was asked, or "".
func (r Row) ClampText() string {
	if !r.Clamped {
		return ""
	}
	return fmt.Sprintf("%s (asked %d)", r.ClampedTo, r.Requested)
}

// Impact is the IMPACT cell, the same in the CLI and the console: what the
// group will do differently, with the time span the records cover.
func (r Row) Impact() string {
	span := ""
	if r.SpanFrom != nil && r.SpanTo != nil {
		span = fmt.Sprintf(" (%s → %s)", r.SpanFrom.UTC().Format(SpanLayout), r.SpanTo.UTC().Format(SpanLayout))
	} else if r.SpanFrom != nil {
		span = fmt.Sprintf(" (from %s)", r.SpanFrom.UTC().Format(SpanLayout))
	}
	switch {
	case r.ReplayRecords > 0:
		return fmt.Sprintf("replay %d record(s)%s", r.ReplayRecords, span)
	case r.SkipRecords > 0:
		return fmt.Sprintf("skip %d record(s) never processed%s", r.SkipRecords, span)
	case r.Current == nil:
		if r.Note != "" {
			return "no committed offset; " + r.Note
		}
		return "no committed offset: starts at the new offset"
	case r.Note != "":
		return "no change; " + r.Note
	default:
		return "no change"
	}
}

// addSaturating is a + b held at the int64 bounds: a shift past the end of
// the range must stay a shift forward (then clamped to the log end), never
// wrap around into a rewind.
func addSaturating(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
