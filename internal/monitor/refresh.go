package monitor

import (
	"context"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
)

// slots is how many samples of each partition the monitor keeps for the
// sliding window: the newest plus earlier ones spaced at least
// window/(slots-2) apart, so the window is always covered without storing a
// sample per refresh (memory is per group x partition x slot).
const slots = 8

// probeChunk bounds the queries passed to the timestamp reader at once, so a
// cold refresh over 500,000 positions never holds them all in memory.
const probeChunk = 50000

// maxEvalWorkers bounds the goroutines evaluating groups in parallel (fewer
// when there are fewer CPUs or groups).
const maxEvalWorkers = 4

// probeWorkers is how many probe chunks are with the timestamp reader at
// once (each bounded by its own per-broker limits).
const probeWorkers = 2

// state is the history the monitor keeps between refreshes.
type state struct {
	seq    int
	times  []time.Time // slot times, oldest first
	topics map[string]*topicState
	groups map[string]*groupState
}

func newState() *state {
	return &state{topics: map[string]*topicState{}, groups: map[string]*groupState{}}
}

// topicState holds a topic's per-slot offsets, aligned with state.times.
type topicState struct {
	n      int
	starts [][]int64
	ends   [][]int64
	epochs []int32
}

type groupState struct {
	topics  map[string]*gtState
	history []Point
}

// gtState is one group's history on one topic: per slot, per partition.
type gtState struct {
	n         int
	committed [][]int64
	ages      [][]int32 // seconds; -1 unknown
	// cur is this refresh's committed offset per partition (NoCommit when
	// none), kept here rather than in per-refresh rows so a refresh over
	// 500,000 group x partitions allocates no working rows.
	cur []int64
	// The last timestamp read for each partition, reused while the
	// position (and, for "no data" answers, the end) has not moved.
	probePos []int64
	probeEnd []int64
	probeMs  []int64
	probeFl  []uint8
	// since is when the commit last changed, or was first seen (unix ms;
	// 0 before the first refresh), changed whether it did change: kept at
	// every refresh, so the engine judges a stall at refresh precision
	// whatever the sample slots kept.
	since   []int64
	changed []bool
	// The event time read at each partition's position (topics with an
	// event-time rule; nil otherwise), reused while the position holds.
	// evSt is 0 until read, else lag.EventState+1.
	evPos []int64
	evMs  []int64
	evSt  []uint8
}

const (
	pfKnown uint8 = 1 << iota
	pfFound
	pfApprox
	pfLogAppend
	pfUnknownType
)

func newGT(n, nslots int) *gtState {
	g := &gtState{n: n, cur: filled64(n, lag.NoCommit), probePos: make([]int64, n), probeEnd: make([]int64, n), probeMs: make([]int64, n), probeFl: make([]uint8, n),
		since: make([]int64, n), changed: make([]bool, n)}
	for i := range g.probePos {
		g.probePos[i] = -2
	}
	for i := 0; i < nslots; i++ {
		g.committed = append(g.committed, filled64(n, lag.NoCommit))
		g.ages = append(g.ages, filled32(n, -1))
	}
	return g
}

func filled64(n int, v int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func filled32(n int, v int32) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// gwork is one group's part of a refresh: its rows are every partition of
// each span's topic, in span order (topics sorted by name, partitions in
// metadata order), which is the order of its snapshot rows.
type gwork struct {
	g      backends.Group
	gs     *groupState
	spans  []rowSpan
	n      int // rows
	owners map[backends.TopicPartition]lag.Name
	err    string
}

// rowSpan is one topic of a group: row i is partition v.t.Partitions[i],
// committed at gt.cur[i].
type rowSpan struct {
	gt *gtState
	v  *topicView
}

// at returns row i's committed offset, position and end.
func (s rowSpan) at(i int) (committed, pos, end int64) {
	p := &s.v.t.Partitions[i]
	c := s.gt.cur[i]
	return c, lag.Position(c, p.LogStart), p.HighWatermark
}

type topicView struct {
	t    backends.Topic
	name lag.Name // t.Name, interned once per refresh (rows hold Names)
	// probes holds, per partition, the positions queried this refresh
	// (few per partition: groups cluster near the head), for dedupe.
	probes    [][]posQuery
	st        *topicState
	ev        *EventRule // the topic's event-time rule, nil when none
	compacted bool
	deletes   bool
	retention time.Duration
	index     map[int32]int
}

func (m *Monitor) refresh(ctx context.Context) (Snapshot, error) {
	st := m.st
	now := m.cfg.Now()
	began := time.Now()
	var warnings []string

	rd, err := m.read(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	if rd.cerr != nil {
		if ctx.Err() != nil {
			return Snapshot{}, rd.cerr
		}
		warnings = append(warnings, oneLine(rd.cerr))
	}

	var phases Phases
	phases.Read = time.Since(began)

	views := m.topicViews(rd.topics)
	work := m.groupWork(rd.groups, rd.commits, rd.cerr, views)

	// Timestamps: only positions with lag whose answer is not already known.
	if m.ts != nil && !m.cfg.SkipAges {
		t := time.Now()
		m.probe(ctx, work, &warnings)
		m.probeEvents(ctx, work, &warnings)
		phases.Ages = time.Since(t)
	}

	snapGroups := m.evaluate(work, now)
	snapTopics, window, health := m.topicHealth(rd.info, rd.topics, views, snapGroups, now)

	// Store this refresh as the newest slot.
	m.store(now, rd.topics, views, work, snapGroups)

	st.seq++
	took := time.Since(began)
	phases.Compute = took - phases.Read - phases.Ages
	return Snapshot{
		Seq: st.seq, Observed: now, Took: took, Phases: phases, Window: window,
		Cluster: rd.info, Topics: snapTopics, Groups: snapGroups, Brokers: health.Brokers, Health: health,
		Warnings: warnings,
	}, nil
}

// clusterRead is what one refresh reads from the cluster before computing.
type clusterRead struct {
	info    backends.ClusterInfo
	topics  []backends.Topic
	groups  []backends.Group // sorted by name, filtered to Config.Groups
	commits map[string]map[string]backends.TopicCommits
	// cerr is the commits' error: a warning, not fatal, unless cancelled.
	cerr error
}

// read reads topics, groups and commits; an error here stops the refresh.
func (m *Monitor) read(ctx context.Context) (clusterRead, error) {
	// Topics (with ISR, offsets and configs) and groups (with commits) are
	// independent: read them side by side, so a refresh costs the slower
	// of the two rather than the sum. When the groups are named, their
	// commits are read alongside the group list too.
	var (
		wg              sync.WaitGroup
		info            backends.ClusterInfo
		topics          []backends.Topic
		groups          []backends.Group
		commits         map[string]map[string]backends.TopicCommits
		infoErr, topErr error
		grpErr, cerr    error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if info, infoErr = m.cluster.Describe(ctx); infoErr == nil {
			topics, topErr = m.cluster.Topics(ctx)
		}
	}()
	go func() {
		defer wg.Done()
		named := len(m.cfg.Groups) > 0
		var cwg sync.WaitGroup
		if named {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				commits, cerr = m.commitTables(ctx, m.cfg.Groups...)
			}()
		}
		groups, grpErr = m.cluster.Groups(ctx)
		cwg.Wait()
		if grpErr != nil || named {
			return
		}
		names := make([]string, len(groups))
		for i, g := range groups {
			names[i] = g.Name
		}
		commits, cerr = m.commitTables(ctx, names...)
	}()
	wg.Wait()
	for _, err := range []error{infoErr, topErr, grpErr} {
		if err != nil {
			return clusterRead{}, err
		}
	}
	if len(m.cfg.Groups) > 0 {
		want := map[string]bool{}
		for _, g := range m.cfg.Groups {
			want[g] = true
		}
		kept := groups[:0]
		for _, g := range groups {
			if want[g.Name] {
				kept = append(kept, g)
			}
		}
		groups = kept
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	return clusterRead{info: info, topics: topics, groups: groups, commits: commits, cerr: cerr}, nil
}

// topicViews builds this refresh's view of each topic and aligns the topic
// state with the slots (dropping state of topics that are gone).
func (m *Monitor) topicViews(topics []backends.Topic) map[string]*topicView {
	st := m.st
	views := make(map[string]*topicView, len(topics))
	for _, t := range topics {
		ts := st.topics[t.Name]
		if ts == nil || ts.n != len(t.Partitions) {
			ts = &topicState{n: len(t.Partitions), epochs: filled32(len(t.Partitions), -1)}
			for range st.times {
				ts.starts = append(ts.starts, filled64(ts.n, -1))
				ts.ends = append(ts.ends, filled64(ts.n, -1))
			}
			st.topics[t.Name] = ts
		}
		v := &topicView{t: t, name: lag.Intern(t.Name), st: ts, index: make(map[int32]int, len(t.Partitions)), ev: m.eventRule(t.Name)}
		for i, p := range t.Partitions {
			v.index[p.Partition] = i
		}
		policy := t.Configs[backends.ConfigCleanupPolicy]
		v.compacted = strings.Contains(policy, "compact")
		v.deletes = policy == "" || strings.Contains(policy, "delete")
		v.retention = retentionOf(t.Configs[backends.ConfigRetentionMs])
		views[t.Name] = v
	}
	for name := range st.topics {
		if views[name] == nil {
			delete(st.topics, name)
		}
	}

	return views
}

// groupWork lists each group's rows: which topics it covers (commits and
// assignments), all of each topic's partitions.
func (m *Monitor) groupWork(groups []backends.Group, commits map[string]map[string]backends.TopicCommits, cerr error, views map[string]*topicView) []*gwork {
	st := m.st
	work := make([]*gwork, 0, len(groups))
	seenGroups := map[string]bool{}
	for _, g := range groups {
		seenGroups[g.Name] = true
		gs := st.groups[g.Name]
		if gs == nil {
			gs = &groupState{topics: map[string]*gtState{}}
			st.groups[g.Name] = gs
		}
		w := &gwork{g: g, gs: gs, owners: lag.Owners(g.Members), err: g.Err}
		cs, ok := commits[g.Name]
		if !ok && cerr != nil {
			w.err = strings.TrimSpace(w.err + " committed offsets unavailable")
		}
		// The topics the group covers: those it committed on and those
		// assigned to its members.
		covered := make(map[string]bool, len(cs))
		for t := range cs {
			covered[t] = true
		}
		for tp := range w.owners {
			covered[tp.Topic] = true
		}
		tnames := make([]string, 0, len(covered))
		for t := range covered {
			if views[t] != nil {
				tnames = append(tnames, t)
			}
		}
		sort.Strings(tnames)
		w.spans = make([]rowSpan, 0, len(tnames))
		for _, tn := range tnames {
			v := views[tn]
			gt := gs.topics[tn]
			if gt == nil || gt.n != len(v.t.Partitions) {
				gt = newGT(len(v.t.Partitions), len(st.times))
				gs.topics[tn] = gt
			}
			tc := cs[tn]
			for i, p := range v.t.Partitions {
				gt.cur[i] = tc.At(p.Partition) // -1 (lag.NoCommit) when none
			}
			w.spans = append(w.spans, rowSpan{gt: gt, v: v})
			w.n += len(v.t.Partitions)
		}
		for tn := range gs.topics {
			if !covered[tn] || views[tn] == nil {
				delete(gs.topics, tn)
			}
		}
		work = append(work, w)
	}
	for name := range st.groups {
		if !seenGroups[name] {
			delete(st.groups, name)
		}
	}
	return work
}

// evaluate runs the engine over every group. Groups are independent, so
// they are spread over a few workers (at most one per CPU, never one per
// group). Most of the cost is writing 10,000s of fresh rows per group, which
// parallelises well. Each group's rows are a new slice: a published
// snapshot is never written to again.
func (m *Monitor) evaluate(work []*gwork, now time.Time) []Group {
	st := m.st
	lcfg := m.cfg.Lag
	ev := lag.NewEvaluator(lcfg)
	slos := make([]time.Duration, len(work))
	for i, w := range work {
		slos[i] = m.cfg.SLO(w.g.Name) // the caller's function: called from here only
	}
	eventSLOs := make([]time.Duration, len(work))
	if m.cfg.EventSLO != nil {
		for i, w := range work {
			eventSLOs[i] = m.cfg.EventSLO(w.g.Name)
		}
	}
	snapGroups := make([]Group, len(work))
	evalGroup := func(gi int, hist []lag.Sample) []lag.Sample {
		w, slo := work[gi], slos[gi]
		rows := make([]lag.PartitionLag, 0, w.n)
		for _, sp := range w.spans {
			gt, v := sp.gt, sp.v
			for i := range v.t.Partitions {
				part := &v.t.Partitions[i]
				committed, pos, _ := sp.at(i)
				hist = hist[:0]
				for s, at := range st.times {
					hist = append(hist, lag.Sample{
						At: at, Committed: gt.committed[s][i],
						LogStart: v.st.starts[s][i], End: v.st.ends[s][i],
						Age: time.Duration(gt.ages[s][i]) * time.Second, AgeKnown: gt.ages[s][i] >= 0,
					})
				}
				// The newest slot holds the last refresh's commit.
				switch last := len(gt.committed) - 1; {
				case gt.since[i] == 0:
					gt.since[i] = now.UnixMilli()
				case last >= 0 && gt.committed[last][i] != committed:
					gt.since[i], gt.changed[i] = now.UnixMilli(), true
				}
				in := lag.PartitionInput{
					Topic: v.name, Partition: part.Partition,
					Committed: committed, LogStart: part.LogStart, End: part.HighWatermark,
					History:   hist,
					Compacted: v.compacted, Deletes: v.deletes, Retention: v.retention, SLO: slo,
					CommitSince: time.UnixMilli(gt.since[i]), CommitChanged: gt.changed[i],
				}
				if part.Err != "" {
					in.Err = lag.Intern(part.Err)
				}
				if len(w.owners) > 0 {
					in.Owner = w.owners[backends.TopicPartition{Topic: part.Topic, Partition: part.Partition}]
				}
				if fl := gt.probeFl[i]; fl&pfKnown != 0 && gt.probePos[i] == pos {
					in.Probe = lag.Probe{Known: true, Found: fl&pfFound != 0, Approx: fl&pfApprox != 0, Type: backends.CreateTime}
					if fl&pfLogAppend != 0 {
						in.Probe.Type = backends.LogAppendTime
					} else if fl&pfUnknownType != 0 {
						in.Probe.Type = backends.UnknownTimeTyp
					}
					if in.Probe.Found {
						in.Probe.Timestamp = time.UnixMilli(gt.probeMs[i])
					}
				}
				if v.ev != nil {
					in.Event = gt.eventProbe(i, pos, v.ev.Margin)
				}
				rows = append(rows, ev.Evaluate(in, now))
			}
		}
		gl := lag.RollUp(lag.GroupInfo{Name: w.g.Name, State: w.g.State, Members: w.g.Members, SLO: slo, EventSLO: eventSLOs[gi]}, rows, lcfg)
		w.gs.history = appendHistory(w.gs.history, Point{At: now, MaxAge: gl.MaxAge, MaxAgeKnown: gl.MaxAgeKnown, TotalLag: gl.TotalLag, Status: gl.Status}, m.cfg.History)
		snapGroups[gi] = Group{
			GroupLag: gl, Protocol: w.g.Protocol, Members: w.g.Members,
			History: append([]Point(nil), w.gs.history...), Err: w.err,
		}
		return hist
	}
	workers := min(runtime.GOMAXPROCS(0), maxEvalWorkers, len(work))
	var next atomic.Int64
	var ewg sync.WaitGroup
	for range workers {
		ewg.Add(1)
		go func() {
			defer ewg.Done()
			var hist []lag.Sample // one history buffer per worker
			for gi := int(next.Add(1) - 1); gi < len(work); gi = int(next.Add(1) - 1) {
				hist = evalGroup(gi, hist)
			}
		}()
	}
	ewg.Wait()

	return snapGroups
}

// topicHealth computes each topic's rates, skew and ISR health, the
// brokers' shares and the groups' SLO breaches.
func (m *Monitor) topicHealth(info backends.ClusterInfo, topics []backends.Topic, views map[string]*topicView, snapGroups []Group, now time.Time) ([]Topic, time.Duration, Health) {
	st := m.st
	lcfg := m.cfg.Lag
	window := time.Duration(0)
	snapTopics := make([]Topic, 0, len(topics))
	var allRates []lag.PartitionRate
	health := Health{}
	for _, t := range topics {
		v := views[t.Name]
		ts := v.st
		first := firstInWindow(st.times, now, lcfg.Window)
		if first >= 0 && now.Sub(st.times[first]) > window {
			window = now.Sub(st.times[first])
		}
		out := Topic{
			Name: t.Name, Internal: t.Internal, ReplicationFactor: t.ReplicationFactor, Configs: t.Configs,
			Partitions: t.Partitions, Compacted: v.compacted, Deletes: v.deletes, Retention: v.retention,
			MinISR: lag.MinISR(t.Configs),
			Health: make([]lag.PartitionHealth, len(t.Partitions)), Rates: make([]lag.PartitionRate, len(t.Partitions)),
		}
		for i, p := range t.Partitions {
			rate := lag.PartitionRate{Topic: t.Name, Partition: p.Partition, Leader: p.Leader}
			if first >= 0 {
				if prev := ts.ends[first][i]; prev >= 0 && p.HighWatermark >= 0 {
					if dt := now.Sub(st.times[first]).Seconds(); dt > 0 {
						rate.Known = true
						if d := p.HighWatermark - prev; d > 0 {
							rate.Rate = float64(d) / dt
						}
					}
				}
			}
			out.Rates[i] = rate
			h := lag.ClassifyISR(p, out.MinISR, ts.epochs[i])
			out.Health[i] = h
			switch h.Class {
			case lag.UnderReplicated:
				health.UnderReplicated++
			case lag.AtMinISR:
				health.AtMinISR++
			case lag.UnderMinISR:
				health.UnderMinISR++
			case lag.Offline:
				health.Offline++
			}
			health.Elections += h.Elections
			if h.Class != lag.Healthy || h.Elections > 0 || h.Err != "" {
				health.ISR = append(health.ISR, h)
			}
		}
		if out.DeadLetter = m.cfg.DeadLetter(t.Name); out.DeadLetter {
			// Failures arrive where they arrive: no hot-partition judgement.
			out.Skew = lag.TopicSkew{Topic: t.Name, Partitions: len(t.Partitions)}
		} else {
			out.Skew = lag.TopicSkewOf(t.Name, out.Rates, lcfg)
		}
		if len(out.Skew.Hot) > 0 {
			health.Hot = append(health.Hot, out.Skew.Hot...)
			health.Skewed = append(health.Skewed, out.Skew)
		}
		allRates = append(allRates, out.Rates...)
		snapTopics = append(snapTopics, out)
	}
	sort.SliceStable(health.ISR, func(i, j int) bool { return health.ISR[i].Class > health.ISR[j].Class })
	sort.SliceStable(health.Hot, func(i, j int) bool { return health.Hot[i].Rate > health.Hot[j].Rate })
	brokerIDs := make([]int32, len(info.Brokers))
	for i, b := range info.Brokers {
		brokerIDs[i] = b.ID
	}
	brokers := lag.BrokerShares(brokerIDs, allRates)
	health.Brokers = brokers
	for _, g := range snapGroups {
		if g.Breach {
			health.Breaches = append(health.Breaches, Breach{Group: g.Group, Status: g.Status, MaxAge: g.MaxAge, SLO: g.SLO, Topic: g.MaxAgeTopic, Partition: g.MaxAgePartition, Inactive: g.Inactive})
		}
	}
	sort.SliceStable(health.Breaches, func(i, j int) bool { return !health.Breaches[i].Inactive && health.Breaches[j].Inactive })

	return snapTopics, window, health
}

// store appends (or, when the previous two slots are closer than the
// spacing, overwrites) the newest slot with this refresh's values.
func (m *Monitor) store(now time.Time, topics []backends.Topic, views map[string]*topicView, work []*gwork, groups []Group) {
	st := m.st
	gap := m.cfg.Lag.Window / (slots - 2)
	n := len(st.times)
	overwrite := n >= 2 && st.times[n-1].Sub(st.times[n-2]) < gap
	drop := !overwrite && n == slots
	switch {
	case overwrite:
		st.times[n-1] = now
	case drop:
		copy(st.times, st.times[1:])
		st.times[n-1] = now
	default:
		st.times = append(st.times, now)
	}
	shift64 := func(s [][]int64, fill int64, size int) [][]int64 {
		switch {
		case overwrite:
			return s
		case drop:
			old := s[0]
			copy(s, s[1:])
			s[len(s)-1] = old
			return s
		default:
			return append(s, filled64(size, fill))
		}
	}
	shift32 := func(s [][]int32, size int) [][]int32 {
		switch {
		case overwrite:
			return s
		case drop:
			old := s[0]
			copy(s, s[1:])
			s[len(s)-1] = old
			return s
		default:
			return append(s, filled32(size, -1))
		}
	}
	for _, t := range topics {
		ts := views[t.Name].st
		ts.starts = shift64(ts.starts, -1, ts.n)
		ts.ends = shift64(ts.ends, -1, ts.n)
		last := len(ts.starts) - 1
		for i, p := range t.Partitions {
			ts.starts[last][i] = p.LogStart
			ts.ends[last][i] = p.HighWatermark
			ts.epochs[i] = p.LeaderEpoch
		}
	}
	// Every group-topic state shifts once, whether or not it was seen.
	for _, gs := range st.groups {
		for _, gt := range gs.topics {
			gt.committed = shift64(gt.committed, lag.NoCommit, gt.n)
			gt.ages = shift32(gt.ages, gt.n)
			last := len(gt.committed) - 1
			for i := range gt.committed[last] {
				gt.committed[last][i] = lag.NoCommit
				gt.ages[last][i] = -1
			}
		}
	}
	for gi, w := range work {
		// Partitions are sorted by topic then partition in the roll-up,
		// the same order the spans hold them in.
		pls := groups[gi].Partitions
		ri := 0
		for _, sp := range w.spans {
			gt := sp.gt
			last := len(gt.committed) - 1
			for i := range gt.n {
				gt.committed[last][i] = gt.cur[i]
				if pl := &pls[ri]; pl.AgeKnown {
					gt.ages[last][i] = int32(pl.Age / time.Second)
				}
				ri++
			}
		}
	}
}

// commitTables reads the groups' commits indexed by topic and partition:
// from the backend directly when it can (no per-commit records, no sort),
// else from CommittedOffsets.
func (m *Monitor) commitTables(ctx context.Context, groups ...string) (map[string]map[string]backends.TopicCommits, error) {
	if r, ok := m.cluster.(backends.CommitTableReader); ok {
		return r.CommitTables(ctx, groups...)
	}
	commits, err := m.cluster.CommittedOffsets(ctx, groups...)
	out := make(map[string]map[string]backends.TopicCommits, len(commits))
	for g, cs := range commits {
		type span struct {
			n    int
			maxP int32
		}
		spans := map[string]span{}
		for _, c := range cs {
			sp := spans[c.Topic]
			spans[c.Topic] = span{sp.n + 1, max(sp.maxP, c.Partition)}
		}
		tables := make(map[string]backends.TopicCommits, len(spans))
		for t, sp := range spans {
			tables[t] = backends.NewTopicCommits(sp.n, sp.maxP)
		}
		for _, c := range cs {
			tc := tables[c.Topic]
			tc.Set(c.Partition, c.Offset)
			tables[c.Topic] = tc
		}
		out[g] = tables
	}
	return out, err
}

func firstInWindow(times []time.Time, now time.Time, window time.Duration) int {
	if len(times) == 0 {
		return -1
	}
	for i, t := range times {
		if now.Sub(t) <= window {
			return i
		}
	}
	return len(times) - 1
}

func appendHistory(h []Point, p Point, keep time.Duration) []Point {
	h = append(h, p)
	i := 0
	for i < len(h)-1 && p.At.Sub(h[i].At) > keep {
		i++
	}
	if i > 0 {
		h = append(h[:0:0], h[i:]...)
	}
	return h
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// retentionOf reads a topic's retention.ms: 0 when records are kept forever
// (-1), when the value is unreadable, or when it is too long for a
// time.Duration (past 292 years, which a cluster can hold: a multiplication
// would wrap it negative and every partition would read as expiring).
func retentionOf(ms string) time.Duration {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 || n > int64(math.MaxInt64/time.Millisecond) {
		return 0
	}
	return time.Duration(n) * time.Millisecond
}
