package lag

import (
	"slices"
	"sort"
	"time"

	"github.com/berth-dev/berth/backends"
)

// Sample is one earlier observation of a group's position in a partition.
// The monitor keeps these; the engine only reads them.
type Sample struct {
	At        time.Time
	Committed int64 // NoCommit when none
	LogStart  int64
	End       int64
	// Age as computed at that sample (AgeKnown false when it was not).
	Age      time.Duration
	AgeKnown bool
}

// Probe is the timestamp read from the log for the current position.
type Probe struct {
	// Known is false when the timestamp could not be read (age unknown).
	Known bool
	// Found is false when no data record lies at or after the position
	// (only transaction markers or aborted records): the tail is not lag.
	Found     bool
	Timestamp time.Time
	Type      backends.TimestampType
	// Approx: from a record batch header rather than the record itself.
	Approx bool
}

// PartitionInput is everything the engine needs for one group x partition.
type PartitionInput struct {
	Topic     Name
	Partition int32
	// Current observation (taken at now).
	Committed int64 // NoCommit when none
	LogStart  int64
	End       int64
	Probe     Probe
	// Event is the event time read at the position (topics with a rule).
	Event EventProbe
	// History holds earlier samples, oldest first; only those within the
	// window are used (or the newest one, if all are older).
	History []Sample
	// CommitSince, when set, is when the caller last saw the commit change
	// (CommitChanged) or, if it never did, first saw it. The monitor keeps
	// it at every refresh, whatever its sample slots kept, so "not moved
	// for CommitInterval" is judged at refresh precision; without it the
	// engine judges from History.
	CommitSince   time.Time
	CommitChanged bool
	// Owner is the member that owns the partition (0: none).
	Owner Name
	// Topic properties.
	Compacted bool
	Deletes   bool
	Retention time.Duration // 0: infinite or unknown
	SLO       time.Duration // 0: no breach judgement
	// Err is the partition's error when its offsets are unknown (End < 0).
	Err Name
}

// Position is where a group would read next: max(committed, logStart), the
// log start when it never committed.
func Position(committed, logStart int64) int64 {
	if committed == NoCommit || committed < logStart {
		return logStart
	}
	return committed
}

// OffsetLag is max(0, end - Position(committed, logStart)).
func OffsetLag(committed, logStart, end int64) int64 {
	if l := end - Position(committed, logStart); l > 0 {
		return l
	}
	return 0
}

// Evaluate computes one partition's lag row at now.
func Evaluate(in PartitionInput, now time.Time, cfg Config) PartitionLag {
	return evaluate(in, now, cfg.WithDefaults())
}

// Evaluator evaluates many partitions with one configuration.
type Evaluator struct{ cfg Config }

// NewEvaluator fills cfg's defaults once.
func NewEvaluator(cfg Config) Evaluator { return Evaluator{cfg.WithDefaults()} }

// Evaluate is lag.Evaluate with the evaluator's configuration.
func (e Evaluator) Evaluate(in PartitionInput, now time.Time) PartitionLag {
	return evaluate(in, now, e.cfg)
}

var offsetsUnknown = Intern("offsets unknown")

func evaluate(in PartitionInput, now time.Time, cfg Config) PartitionLag {
	r := PartitionLag{
		Topic:     in.Topic,
		Partition: in.Partition,
		Committed: in.Committed,
		LogStart:  in.LogStart,
		End:       in.End,
		Owner:     in.Owner,
		Compacted: in.Compacted,
	}
	if in.End < 0 || in.LogStart < 0 {
		// Offsets unknown (no leader, an error): nothing can be judged, and
		// zero would read as "caught up".
		r.Err = in.Err
		if r.Err == 0 {
			r.Err = offsetsUnknown
		}
		return r
	}
	expired := in.Committed != NoCommit && in.Committed < in.LogStart
	if expired {
		r.Lost = in.LogStart - in.Committed
	}
	r.Lag = OffsetLag(in.Committed, in.LogStart, in.End)

	// Age.
	switch {
	case r.Lag == 0:
		r.AgeKnown = true
	case !in.Probe.Known:
	case !in.Probe.Found:
		// Only markers (or aborted records) past the position: nothing to
		// consume, so neither lag nor age.
		r.Lag, r.AgeKnown = 0, true
	default:
		r.AgeKnown = true
		r.TimestampType, r.AgeApprox = in.Probe.Type, in.Probe.Approx
		r.Age = now.Sub(in.Probe.Timestamp)
		if r.Age < 0 {
			if -r.Age > cfg.SkewTolerance {
				r.ClockSkew = true
			}
			r.Age = 0
		}
	}

	// The window: samples no older than Window, or the newest one.
	win := windowed(in.History, now, cfg.Window)

	// Rates from the window's first sample.
	if len(win) > 0 {
		first := win[0]
		if dt := now.Sub(first.At).Seconds(); dt > 0 {
			r.RatesKnown = true
			if d := in.End - first.End; d > 0 {
				r.ProduceRate = float64(d) / dt
			}
			if in.Committed != NoCommit && first.Committed != NoCommit {
				if d := in.Committed - first.Committed; d > 0 {
					r.ConsumeRate = float64(d) / dt
				}
			}
		}
	}
	switch {
	case r.Lag == 0:
		r.ETAKnown = true
	case r.RatesKnown && r.ConsumeRate > r.ProduceRate:
		r.ETA = time.Duration(float64(r.Lag) / (r.ConsumeRate - r.ProduceRate) * float64(time.Second))
		r.ETAKnown = true
	case r.RatesKnown:
		r.FallingBehind = true
	}

	// Time to data loss.
	if in.Deletes && in.Retention > 0 && r.Lag > 0 && r.AgeKnown {
		r.TimeToLoss = in.Retention - r.Age
		r.TimeToLossKnown = true
		r.RetentionRisk = r.TimeToLoss < cfg.RetentionMargin
	}

	if in.SLO > 0 && r.AgeKnown && r.Age > in.SLO {
		r.Breach = true
	}
	eventAge(&r, in.Event, now)
	mv := recentMovement(in.History, in.Committed, now, cfg.CommitInterval)
	if !in.CommitSince.IsZero() {
		quiet := now.Sub(in.CommitSince)
		mv.moved = in.CommitChanged && quiet < cfg.CommitInterval
		mv.seen = mv.moved || quiet >= cfg.CommitInterval
	}
	mv.waited = waited(in, now)
	r.CommitMoved = mv.moved
	r.Status = status(in, r, win, mv, expired, cfg)
	return r
}

func windowed(h []Sample, now time.Time, window time.Duration) []Sample {
	if len(h) == 0 {
		return nil
	}
	i := sort.Search(len(h), func(i int) bool { return now.Sub(h[i].At) <= window })
	if i == len(h) {
		// Every sample is older than the window (refreshes slower than the
		// window): judge against the newest one.
		return h[len(h)-1:]
	}
	return h[i:]
}

// movement is what the history says about the commit lately.
type movement struct {
	// ref is the reference sample: the newest at least CommitInterval old,
	// else the oldest there is (nil when there is no history).
	ref *Sample
	// moved: the commit differs from now at the reference or after it.
	moved bool
	// seen: the history covers CommitInterval, or shows movement: enough
	// to tell "not moving" from "between two commits".
	seen bool
	// waited is how long the record at the position has existed, by
	// Berth's clock (see waited).
	waited time.Duration
}

// recentMovement looks only as far back as the reference sample, so a stall
// shows at the first refresh that has watched it for CommitInterval, whatever
// the samples before said (a consumer that caught up and then stuck was the
// case hidden for a whole window).
func recentMovement(h []Sample, committed int64, now time.Time, every time.Duration) movement {
	if len(h) == 0 {
		return movement{}
	}
	i := len(h) - 1
	for i > 0 && now.Sub(h[i].At) < every {
		i--
	}
	mv := movement{ref: &h[i], seen: now.Sub(h[i].At) >= every}
	for _, smp := range h[i:] {
		if smp.Committed != committed {
			mv.moved, mv.seen = true, true
		}
	}
	return mv
}

// waited is how long the record at the position has existed by Berth's own
// clock: since the oldest sample whose end was already past the position.
// It bounds the age from below, so a producer clock running ahead (whose
// timestamps read as a young or future age) cannot hide a stall.
func waited(in PartitionInput, now time.Time) time.Duration {
	pos := Position(in.Committed, in.LogStart)
	for _, smp := range in.History {
		if smp.End > pos {
			return now.Sub(smp.At)
		}
	}
	return 0
}

// status applies the rules in order; the first that matches wins. The
// manual's table (cmd/berth/help/lag.md, "Statuses") is this function.
func status(in PartitionInput, r PartitionLag, win []Sample, mv movement, expired bool, cfg Config) Status {
	if expired {
		return EXPIRED
	}
	// REWIND: a commit in the window (or now) went below its predecessor,
	// and the group has not yet come back to the highest commit before it.
	peak, prev, rewound := int64(NoCommit), int64(NoCommit), int64(NoCommit)
	step := func(c int64) {
		if c == NoCommit {
			return
		}
		if prev != NoCommit && c < prev {
			rewound = peak
		}
		if c > peak {
			peak = c
		}
		prev = c
	}
	for _, s := range win {
		step(s.Committed)
	}
	step(in.Committed)
	if rewound != NoCommit && in.Committed != NoCommit && in.Committed < rewound {
		return REWIND
	}
	if r.Lag == 0 {
		return OK
	}
	if r.AgeKnown && max(r.Age, mv.waited) <= cfg.SteadyAge {
		return OK
	}
	if in.Owner == 0 && !mv.moved {
		return STOPPED // nobody is there to move it, however long we watch
	}
	if !mv.seen {
		return JUDGING
	}
	if !mv.moved {
		return STALLED
	}
	ref := mv.ref
	if r.Lag >= OffsetLag(ref.Committed, ref.LogStart, ref.End) {
		return LAGGING
	}
	if r.AgeKnown && ref.AgeKnown && r.Age >= ref.Age {
		return LAGGING
	}
	return OK
}

// GroupInfo is what the roll-up needs to know about a group.
type GroupInfo struct {
	Name     string
	State    string
	Members  []backends.Member
	SLO      time.Duration
	EventSLO time.Duration
}

// Owners maps each assigned partition to the member that owns it.
func Owners(members []backends.Member) map[backends.TopicPartition]Name {
	m := make(map[backends.TopicPartition]Name)
	for _, mem := range members {
		id := Intern(mem.ID)
		for _, tp := range mem.Assigned {
			m[tp] = id
		}
	}
	return m
}

// IdleMembers lists members with no assigned partition, sorted.
func IdleMembers(members []backends.Member) []string {
	var idle []string
	for _, m := range members {
		if len(m.Assigned) == 0 {
			idle = append(idle, m.ID)
		}
	}
	sort.Strings(idle)
	return idle
}

// RollUp combines a group's partition rows: worst status, maximum age (never
// an average), sum of lag, age skew (max / median, the median floored at one
// second so a single stuck partition among caught-up ones reads as its age in
// seconds) and SLO breach. rows are sorted by topic and partition in place.
func RollUp(info GroupInfo, rows []PartitionLag, cfg Config) GroupLag {
	cfg = cfg.WithDefaults()
	sortRows(rows)
	g := GroupLag{
		Group:       info.Name,
		State:       info.State,
		MemberCount: len(info.Members),
		IdleMembers: IdleMembers(info.Members),
		SLO:         info.SLO,
		EventSLO:    info.EventSLO,
		Partitions:  rows,
	}
	refineStalled(rows, cfg)
	ages := make([]time.Duration, 0, len(rows))
	first := true
	for i := range rows {
		r := &rows[i]
		g.Counts[r.Status]++
		if r.Status > g.Status {
			g.Status = r.Status
		}
		g.TotalLag += r.Lag
		g.Lost += r.Lost
		g.ProduceRate += r.ProduceRate
		g.ConsumeRate += r.ConsumeRate
		g.ClockSkew = g.ClockSkew || r.ClockSkew
		g.RetentionRisk = g.RetentionRisk || r.RetentionRisk
		switch {
		case r.EventAgeKnown:
			if !g.MaxEventAgeKnown || r.EventAge > g.MaxEventAge {
				g.MaxEventAge, g.MaxEventAgeKnown = r.EventAge, true
			}
		case r.EventRule && r.Lag > 0:
			g.EventUnknown++
		}
		if r.EventClockError {
			g.EventClockErrors++
		}
		if !r.AgeKnown {
			g.AgesUnknown++
			continue
		}
		ages = append(ages, r.Age)
		if first || r.Age > g.MaxAge {
			g.MaxAge, g.MaxAgeTopic, g.MaxAgePartition = r.Age, r.Topic.String(), r.Partition
			first = false
		}
		g.MaxAgeKnown = true
	}
	if len(ages) > 1 {
		med := median(ages)
		if med < time.Second {
			med = time.Second
		}
		g.AgeSkew = float64(g.MaxAge) / float64(med)
	}
	g.Breach = info.SLO > 0 && g.MaxAgeKnown && g.MaxAge > info.SLO
	g.EventBreach = info.EventSLO > 0 && g.MaxEventAgeKnown && g.MaxEventAge > info.EventSLO
	g.Inactive = inactive(g, len(info.Members), cfg)
	return g
}

// inactive: no members, no commit moving, and a backlog older than
// InactiveAfter (nobody has read it for that long). A group that emptied a
// minute ago with fresh records waiting is a live incident (STOPPED), not
// abandoned; one with nothing to read is OK either way.
func inactive(g GroupLag, members int, cfg Config) bool {
	if members > 0 {
		return false
	}
	for i := range g.Partitions {
		if g.Partitions[i].CommitMoved {
			return false
		}
	}
	return g.TotalLag > 0 && g.MaxAgeKnown && g.MaxAge >= cfg.InactiveAfter
}

// refineStalled tells stuck from busy. A partition whose commit did not move
// stays STALLED only when its owner is stuck too (no other partition of its
// moved) or idle elsewhere (no other partition of its is behind); when the
// owner commits on other partitions that are themselves behind, it is working
// through backlog in some order and this partition is waiting its turn:
// LAGGING. A consumer that processes partitions one after another would
// otherwise read as STALLED on every partition it has not reached yet.
func refineStalled(rows []PartitionLag, cfg Config) {
	type ownerState struct{ moved, behind int }
	owners := map[Name]*ownerState{}
	for i := range rows {
		r := &rows[i]
		if r.Owner == 0 {
			continue
		}
		o := owners[r.Owner]
		if o == nil {
			o = &ownerState{}
			owners[r.Owner] = o
		}
		if r.CommitMoved {
			o.moved++
		}
		if behind(r, cfg) {
			o.behind++
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.Status != STALLED || r.Owner == 0 {
			continue
		}
		o := owners[r.Owner]
		moved, others := o.moved, o.behind
		if r.CommitMoved {
			moved--
		}
		if behind(r, cfg) {
			others--
		}
		if moved > 0 && others > 0 {
			r.Status = LAGGING
		}
	}
}

func behind(r *PartitionLag, cfg Config) bool {
	return r.Lag > 0 && (!r.AgeKnown || r.Age > cfg.SteadyAge)
}

// median returns the median of d, reordering d (RollUp passes its own
// scratch slice). Selection, not a sort: 50 groups x 10,000 ages per refresh.
func median(d []time.Duration) time.Duration {
	n := len(d)
	hi := nth(d, n/2)
	if n%2 == 1 {
		return hi
	}
	// After nth, d[:n/2] holds the smaller half: its maximum is the lower
	// middle.
	return (slices.Max(d[:n/2]) + hi) / 2
}

// nth reorders d so that d[k] is the value a sort would put there, with no
// larger value before it and no smaller one after (Hoare's selection, with
// the middle element as pivot: ages often arrive nearly sorted).
func nth(d []time.Duration, k int) time.Duration {
	lo, hi := 0, len(d)-1
	for lo < hi {
		pivot := d[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for d[i] < pivot {
				i++
			}
			for d[j] > pivot {
				j--
			}
			if i <= j {
				d[i], d[j] = d[j], d[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return d[k]
		}
	}
	return d[k]
}

// sortRows sorts rows by topic name then partition. The monitor already
// produces them in that order, so the common case is one pass that finds
// them sorted (string comparisons only where the topic changes).
func sortRows(rows []PartitionLag) {
	less := func(a, b *PartitionLag) bool {
		if a.Topic != b.Topic {
			return a.Topic.Less(b.Topic)
		}
		return a.Partition < b.Partition
	}
	sorted := true
	for i := 1; i < len(rows) && sorted; i++ {
		sorted = !less(&rows[i], &rows[i-1])
	}
	if !sorted {
		sort.Slice(rows, func(i, j int) bool { return less(&rows[i], &rows[j]) })
	}
}
