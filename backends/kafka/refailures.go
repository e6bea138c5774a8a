package kafka

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/redrive"
)

// How a re-failure watch ended.
const (
	// WatchCaughtUp: every consumer group reading the copies' topics has
	// committed past every copy, and the DLQ was read to its end after
	// that: a copy that failed again is already there.
	WatchCaughtUp = "consumers_caught_up"
	WatchTimeout  = "timeout"     // the whole window passed
	WatchStopped  = "stopped"     // left early by the operator (a key)
	WatchCanceled = "interrupted" // the context ended (ctrl+c)
)

// Watch is a re-failure watch over a plan's copies.
type Watch struct {
	DLQ  string
	Plan string
	From map[int32]int64 // the DLQ's ends before the copies were sent
	Max  time.Duration   // the longest it watches
	// Copies are the ledger entries of the copies (their target
	// coordinates): once the consumers have processed them, no more
	// re-failures can come, so the watch ends. The last copy on each
	// target partition is enough (the watch waits for the consumers to
	// pass it); Total then says how many copies there are.
	Copies []redrive.LedgerEntry
	Total  int
	// Stop ends the watch early (the operator pressed a key).
	Stop <-chan struct{}
}

// WatchResult is what a watch saw and why it ended.
type WatchResult struct {
	Refailed []Refailure
	Watched  time.Duration
	Ended    string
	// Groups are the consumer groups with committed offsets on the copies'
	// topics (the ones the watch waited for); Behind those of them that had
	// not passed every copy when it ended.
	Groups []string
	Behind []string
}

// copyFrontier is, per target partition, the offset a consumer must have
// committed to have processed every copy (the last copy's offset + 1).
func copyFrontier(copies []redrive.LedgerEntry) map[rangeKey]int64 {
	need := map[rangeKey]int64{}
	for _, e := range copies {
		if e.Target == "" {
			continue
		}
		k := rangeKey{e.Target, e.TargetPartition}
		need[k] = max(need[k], e.TargetOffset+1)
	}
	return need
}

// consumersPast reports which groups with committed offsets on the copies'
// topics exist, and which of them have not yet committed past every copy.
func (k *Cluster) consumersPast(ctx context.Context, need map[rangeKey]int64) (groups, behind []string, err error) {
	listed, err := k.c.admin.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return nil, nil, describeErr("list groups", err)
	}
	names := listed.Groups()
	if len(names) == 0 {
		return nil, nil, nil
	}
	committed, err := k.CommittedOffsets(ctx, names...)
	if err != nil && len(committed) == 0 {
		return nil, nil, err
	}
	topics := map[string]bool{}
	for rk := range need {
		topics[rk.topic] = true
	}
	for name, cs := range committed {
		at := map[rangeKey]int64{}
		reads := false
		for _, c := range cs {
			if topics[c.Topic] {
				reads = true
				at[rangeKey{c.Topic, c.Partition}] = c.Offset
			}
		}
		if !reads {
			continue
		}
		groups = append(groups, name)
		for rk, n := range need {
			if at[rk] < n {
				behind = append(behind, name)
				break
			}
		}
	}
	sort.Strings(groups)
	sort.Strings(behind)
	return groups, behind, nil
}

// WatchRefailuresUntil reads the DLQ from w.From and reports records carrying
// berth-redrive-plan = w.Plan (copies that failed again). It ends when the
// consumer groups reading the copies' topics have all committed past every
// copy and the DLQ has been read to its end after that, when w.Max has
// passed, when w.Stop is closed, or when ctx ends. With no group committing
// on those topics there is nothing to wait for but time: it watches the
// whole window.
func (k *Cluster) WatchRefailuresUntil(ctx context.Context, w Watch) (WatchResult, error) {
	start := time.Now()
	res := WatchResult{Refailed: []Refailure{}, Groups: []string{}, Behind: []string{}}
	assign := map[string]map[int32]kgo.Offset{w.DLQ: {}}
	for p, o := range w.From {
		assign[w.DLQ][p] = kgo.NewOffset().At(o)
	}
	cl, err := k.c.NewKgo(kgo.ConsumePartitions(assign), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	wctx, cancel := context.WithTimeout(ctx, w.Max)
	defer cancel()
	go func() {
		select {
		case <-w.Stop:
			cancel()
		case <-wctx.Done():
		}
	}()
	need := copyFrontier(w.Copies)
	next := map[int32]int64{}
	for p, o := range w.From {
		next[p] = o
	}
	// drainTo is set once the consumers are past every copy: the DLQ's
	// ends then, which the watch reads up to before it ends.
	var drainTo map[int32]int64
	for {
		// A poll returns when records arrive or, on a quiet DLQ, after a
		// tick: the consumers' progress is checked at least that often.
		pctx, pcancel := context.WithTimeout(wctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return // a transaction marker: counts as read, is no record
			}
			if rf, ok := refailureOf(r, w.Plan); ok {
				res.Refailed = append(res.Refailed, rf)
			}
		})
		if wctx.Err() != nil {
			break
		}
		if drainTo == nil && len(need) > 0 {
			groups, behind, err := k.consumersPast(wctx, need)
			if err != nil && wctx.Err() == nil {
				return res, err
			}
			if groups != nil {
				res.Groups, res.Behind = groups, behind
			}
			if len(groups) > 0 && len(behind) == 0 {
				if drainTo, err = k.DLQEnds(wctx, w.DLQ); err != nil && wctx.Err() == nil {
					return res, err
				}
			}
		}
		if drainTo != nil && readTo(next, drainTo) {
			res.Ended = WatchCaughtUp
			break
		}
	}
	res.Watched = time.Since(start)
	if res.Ended == "" {
		switch {
		case ctx.Err() != nil:
			res.Ended = WatchCanceled
		case stopped(w.Stop):
			res.Ended = WatchStopped
		default:
			res.Ended = WatchTimeout
		}
	}
	return res, nil
}

func stopped(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// readTo reports whether every partition has been read up to its end.
func readTo(next, ends map[int32]int64) bool {
	for p, e := range ends {
		if next[p] < e {
			return false
		}
	}
	return true
}

// refailureOf reports whether a DLQ record is a copy of plan that failed
// again.
func refailureOf(r *kgo.Record, plan string) (Refailure, bool) {
	var p, origin, exc string
	for _, h := range r.Headers {
		switch h.Key {
		case redrive.HeaderPlan:
			p = string(h.Value)
		case redrive.HeaderOrigin:
			origin = string(h.Value)
		case "kafka_dlt-exception-fqcn":
			exc = string(h.Value)
		}
	}
	return Refailure{DLQ: redrive.Coord{Partition: r.Partition, Offset: r.Offset}, Origin: origin, Exception: exc}, p == plan
}
