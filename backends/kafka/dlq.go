package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

// DLQs lists the dead-letter topics (by naming convention, plus declared
// pairs whose DLQ exists) with their partitions' offsets.
func (k *Cluster) DLQs(ctx context.Context, pairs []redrive.Pair) ([]redrive.DLQ, map[string]backends.Topic, error) {
	topics, err := k.Topics(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(topics))
	byName := map[string]backends.Topic{}
	for i, t := range topics {
		names[i] = t.Name
		byName[t.Name] = t
	}
	dlqs := redrive.Discover(names, pairs)
	out := map[string]backends.Topic{}
	for _, d := range dlqs {
		out[d.Name] = byName[d.Name]
	}
	return dlqs, out, nil
}

// ReadOptions bound a DLQ read.
type ReadOptions struct {
	// Limit caps the records returned (0: DefaultReadLimit).
	Limit int
	// Partitions restricts the read (nil: all).
	Partitions []int32
	// Idle is how long a read may see no record before it stops short
	// (marking the result incomplete); 0 means 3s.
	Idle time.Duration
	// Reading, when set, is told before the first record how many records
	// the read returns at most (the offset spans read, capped by Limit),
	// so a caller keeping every record can size its store once.
	Reading func(max int64)
}

// DefaultReadLimit bounds DLQ reads: a DLQ is read oldest first up to this
// many records.
const DefaultReadLimit = 10000

// ReadResult is what a DLQ read returned.
type ReadResult struct {
	Records []redrive.Record
	// Total is the DLQ's record count (offset span over the partitions read).
	Total int64
	// Complete is true when every partition was read to its end.
	Complete bool
}

// ReadDLQ reads a DLQ's records oldest first (per partition, from its log
// start to its last stable offset), at most opt.Limit of them, and returns
// them sorted by partition and offset.
func (k *Cluster) ReadDLQ(ctx context.Context, dlq string, opt ReadOptions) (ReadResult, error) {
	var recs []redrive.Record
	res, err := k.ReadDLQEach(ctx, dlq, opt, func(r redrive.Record) {
		recs = append(recs, r.Clone())
	})
	if err != nil {
		return ReadResult{}, err
	}
	sort.Slice(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
	res.Records = recs
	return res, nil
}

// ReadDLQEach reads what ReadDLQ reads but hands each record to fn as it
// arrives instead of holding them all, so a caller keeps only what it needs
// of each: at incident scale the records themselves (about 2 KB each with
// Spring's headers) are what does not fit. Within a partition records come
// in offset order; partitions interleave. The record's Key, Value and
// header values belong to the read and are valid only during the call
// (redrive.Record.Clone keeps one). The result has Total and Complete; its
// Records are nil.
func (k *Cluster) ReadDLQEach(ctx context.Context, dlq string, opt ReadOptions, fn func(redrive.Record)) (ReadResult, error) {
	ts, err := k.Topics(ctx, dlq)
	if err != nil {
		return ReadResult{}, err
	}
	limit := opt.Limit
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	want := map[int32]bool{}
	for _, p := range opt.Partitions {
		want[p] = true
	}
	var ranges []readRange
	var res ReadResult
	for _, p := range ts[0].Partitions {
		if len(want) > 0 && !want[p.Partition] {
			continue
		}
		if p.Err != "" {
			return ReadResult{}, fmt.Errorf("dlq %s[%d]: %s", dlq, p.Partition, p.Err)
		}
		end := p.LastStable
		if end < 0 {
			end = p.HighWatermark
		}
		res.Total += end - p.LogStart
		ranges = append(ranges, readRange{topic: dlq, partition: p.Partition, from: p.LogStart, end: end})
	}
	if opt.Reading != nil {
		opt.Reading(min(res.Total, int64(limit)))
	}
	var headers []redrive.Header // reused: fn must not keep the record
	stats, err := k.c.readRanges(ctx, ranges, int64(limit), opt.Idle, func(r *kgo.Record) {
		rec := redrive.Record{
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(),
			Key: r.Key, Value: r.Value, KeyNull: r.Key == nil,
		}
		headers = headers[:0]
		for _, h := range r.Headers {
			headers = append(headers, redrive.Header{Key: h.Key, Value: h.Value})
		}
		if len(headers) > 0 {
			rec.Headers = headers
		}
		fn(rec)
	}, nil)
	if err != nil {
		return ReadResult{}, err
	}
	res.Complete = stats.complete()
	return res, nil
}

// readAtIdle is how long ReadDLQAt waits for a record before it gives up:
// every offset it reads is below the high watermark, so a record (or a
// marker) is there and a quiet read means a slow broker, not the end.
const readAtIdle = 20 * time.Second

// ReadDLQAt reads the records at the given coordinates; coordinates with no
// record (out of range, compacted, aborted, a transaction marker) are
// returned in missing. A partition whose offsets could not be listed, or a
// read that stops short of a coordinate, is an error: neither shows that
// there is no record.
func (k *Cluster) ReadDLQAt(ctx context.Context, dlq string, coords []redrive.Coord) ([]redrive.Record, []redrive.Coord, error) {
	ts, err := k.Topics(ctx, dlq)
	if err != nil {
		return nil, nil, err
	}
	bounds := map[int32]backends.Partition{}
	for _, p := range ts[0].Partitions {
		bounds[p.Partition] = p
	}
	for _, c := range coords {
		// Offsets not listed (HighWatermark -1) are not "no record".
		if b, ok := bounds[c.Partition]; ok && b.Err != "" {
			if strings.Contains(b.Err, kerr.UnknownTopicOrPartition.Message) {
				// Deleted since the metadata was read (a deletion reaches
				// the partitions first): the same cause as a topic the
				// metadata no longer lists.
				return nil, nil, backends.Failure(fmt.Sprintf("dlq %s[%d]: %s", dlq, c.Partition, b.Err), backends.ErrNotFound)
			}
			return nil, nil, fmt.Errorf("dlq %s[%d]: %s", dlq, c.Partition, b.Err)
		}
	}
	wantAt := map[redrive.Coord]bool{}
	lo, hi := map[int32]int64{}, map[int32]int64{}
	var missing []redrive.Coord
	for _, c := range coords {
		b, ok := bounds[c.Partition]
		if !ok || c.Offset < b.LogStart || c.Offset >= b.HighWatermark {
			missing = append(missing, c)
			continue
		}
		wantAt[c] = true
		if v, ok := lo[c.Partition]; !ok || c.Offset < v {
			lo[c.Partition] = c.Offset
		}
		if c.Offset+1 > hi[c.Partition] {
			hi[c.Partition] = c.Offset + 1
		}
	}
	var ranges []readRange
	for p, from := range lo {
		ranges = append(ranges, readRange{topic: dlq, partition: p, from: from, end: hi[p]})
	}
	var out []redrive.Record
	got := map[redrive.Coord]bool{}
	stats, err := k.c.readRanges(ctx, ranges, 0, readAtIdle, func(r *kgo.Record) {
		c := redrive.Coord{Partition: r.Partition, Offset: r.Offset}
		if wantAt[c] && !got[c] {
			got[c] = true
			out = append(out, toRecord(r))
		}
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	for c := range wantAt {
		if got[c] {
			continue
		}
		// Only a read that went past c shows there is no record at c; one
		// that stopped short (a slow broker) says nothing about it.
		if next := stats.next[rangeKey{dlq, c.Partition}]; next <= c.Offset {
			return nil, nil, fmt.Errorf("read %s[%d]: no answer for %s before offset %d (read up to %d); try again", dlq, c.Partition, readAtIdle, c.Offset, next)
		}
		missing = append(missing, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	sort.Slice(missing, func(i, j int) bool {
		if missing[i].Partition != missing[j].Partition {
			return missing[i].Partition < missing[j].Partition
		}
		return missing[i].Offset < missing[j].Offset
	})
	return out, missing, nil
}

// DefaultScanLimit bounds the ordering scan per original partition.
const DefaultScanLimit = 1_000_000

// ScanProgress reports the ordering scan's progress: records read so far out
// of the records to read.
type ScanProgress struct {
	Read, Total int64
}

// ScanOrdering runs the ordering check's scan: for each original partition
// the scan asks for, it reads from the lowest original offset to the last
// stable offset — at most limit records per partition (0: DefaultScanLimit)
// — feeding every record's key to the matcher, and reports progress.
func (k *Cluster) ScanOrdering(ctx context.Context, s *redrive.OrderingScan, limit int64, progress func(ScanProgress)) error {
	if limit <= 0 {
		limit = DefaultScanLimit
	}
	rs := s.Ranges()
	topicSet := map[string]bool{}
	for _, r := range rs {
		topicSet[r.Topic] = true
	}
	var names []string
	for t := range topicSet {
		names = append(names, t)
	}
	sort.Strings(names)
	ends := map[string]map[int32]backends.Partition{}
	for _, name := range names {
		ts, err := k.Topics(ctx, name)
		if err != nil {
			// The original topic is gone or unreadable: every range on it fails.
			for _, r := range rs {
				if r.Topic == name {
					s.Finish(r.Topic, r.Partition, false, r.From, err)
				}
			}
			continue
		}
		ends[name] = map[int32]backends.Partition{}
		for _, p := range ts[0].Partitions {
			ends[name][p.Partition] = p
		}
	}
	var ranges []readRange
	var total int64
	for _, r := range rs {
		ps, ok := ends[r.Topic]
		if !ok {
			continue
		}
		p, ok := ps[r.Partition]
		switch {
		case !ok:
			s.Finish(r.Topic, r.Partition, false, r.From, fmt.Errorf("partition %d does not exist", r.Partition))
			continue
		case p.Err != "":
			s.Finish(r.Topic, r.Partition, false, r.From, errors.New(p.Err))
			continue
		}
		from := max(r.From, p.LogStart)
		end := p.LastStable
		if end < 0 {
			end = p.HighWatermark
		}
		bounded := end
		if end-from > limit {
			bounded = from + limit
		}
		if from >= end {
			s.Finish(r.Topic, r.Partition, true, from, nil)
			continue
		}
		total += bounded - from
		ranges = append(ranges, readRange{topic: r.Topic, partition: r.Partition, from: from, end: bounded, realEnd: end})
	}
	var read int64
	tick := func() {
		if progress != nil {
			progress(ScanProgress{Read: read, Total: total})
		}
	}
	tick()
	stats, err := k.c.readRanges(ctx, ranges, 0, 0, func(r *kgo.Record) {
		if s.IgnorePlan != "" && carriesPlan(r, s.IgnorePlan) {
			return
		}
		s.Observe(r.Topic, r.Partition, r.Offset, r.Key)
	}, func(n int64) {
		read = n
		tick()
	})
	for _, r := range ranges {
		next := stats.next[rangeKey{r.topic, r.partition}]
		switch {
		case err != nil:
			s.Finish(r.topic, r.partition, false, next, err)
		default:
			// Complete only when the bound was the partition's real end.
			s.Finish(r.topic, r.partition, next >= r.realEnd, next, nil)
		}
	}
	read = total
	tick()
	return nil
}

func toRecord(r *kgo.Record) redrive.Record {
	out := redrive.Record{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(),
		Key: r.Key, Value: r.Value, KeyNull: r.Key == nil,
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, redrive.Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// readFetchMaxBytes bounds one fetch response of a DLQ or ordering read
// (the broker still returns at least one whole batch). 1 MiB read a
// 100,000-record DLQ as fast as 4 MiB did, with 50-60 MiB less peak RSS.
const readFetchMaxBytes = 1 << 20

// readRange is [from, end) of one partition; realEnd is the partition's end
// when end is a bound short of it (0: end is the real end).
type readRange struct {
	topic     string
	partition int32
	from, end int64
	realEnd   int64
}

type rangeKey struct {
	topic     string
	partition int32
}

type readStats struct {
	next    map[rangeKey]int64
	ranges  []readRange
	limited bool
}

func (s readStats) complete() bool {
	if s.limited {
		return false
	}
	for _, r := range s.ranges {
		if s.next[rangeKey{r.topic, r.partition}] < r.end {
			return false
		}
	}
	return true
}

// readRanges consumes each range with a dedicated, group-less consumer
// (READ_COMMITTED, control records kept so a partition whose tail is a
// transaction marker is known to be read to its end). fn sees every data
// record in range; limit > 0 stops after that many. A read that sees no
// record for idle stops short rather than hang; readStats says how far each
// range got. Errors name the topic and partition.
func (c *Client) readRanges(ctx context.Context, ranges []readRange, limit int64, idle time.Duration, fn func(*kgo.Record), progress func(int64)) (readStats, error) {
	stats := readStats{next: map[rangeKey]int64{}, ranges: ranges}
	if idle <= 0 {
		idle = 3 * time.Second
	}
	assign := map[string]map[int32]kgo.Offset{}
	pending := 0
	for i, r := range ranges {
		if ranges[i].realEnd == 0 {
			ranges[i].realEnd = r.end
		}
		stats.next[rangeKey{r.topic, r.partition}] = r.from
		if r.from >= r.end {
			continue
		}
		if assign[r.topic] == nil {
			assign[r.topic] = map[int32]kgo.Offset{}
		}
		assign[r.topic][r.partition] = kgo.NewOffset().At(r.from)
		pending++
	}
	if pending == 0 {
		return stats, nil
	}
	ends := map[rangeKey]int64{}
	for _, r := range ranges {
		ends[rangeKey{r.topic, r.partition}] = r.end
	}
	cl, err := c.NewKgo(
		kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(250*time.Millisecond),
		// The client fetches the next response while the caller works
		// through the last: with the default 50 MiB a response (several
		// times that once decompressed) is what a plan's memory peaks on,
		// not what it keeps.
		kgo.FetchMaxBytes(readFetchMaxBytes),
	)
	if err != nil {
		return stats, err
	}
	defer cl.Close()
	var n int64
	skipped := false // a record in range was left out by the limit
	done := map[rangeKey]bool{}
	// Idle is measured from the last record in range, not per poll: on a
	// live topic a finished partition keeps returning new records past its
	// end, and a poll holding only those must not read as "nothing more".
	lastInRange := time.Now()
	for pending > 0 {
		pctx, cancel := context.WithTimeout(ctx, idle)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			if ferr == nil {
				ferr = fmt.Errorf("read %s[%d]: %s", t, p, codeName(err))
				var ke *kerr.Error
				if !errors.As(err, &ke) {
					ferr = fmt.Errorf("read %s[%d]: %w", t, p, err)
				}
			}
		})
		if ferr != nil {
			return stats, ferr
		}
		got := 0
		fs.EachRecord(func(r *kgo.Record) {
			k := rangeKey{r.Topic, r.Partition}
			if done[k] {
				return
			}
			if r.Offset >= ends[k] {
				// Offsets only grow: a record past the end means every
				// offset in range was read or is a gap (compacted away,
				// aborted), so the range is read to its end.
				stats.next[k] = ends[k]
				done[k] = true
				pending--
				cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.partition}})
				return
			}
			got++
			stats.next[k] = r.Offset + 1
			if !r.Attrs.IsControl() {
				if limit <= 0 || n < limit {
					fn(r)
					n++
				} else {
					skipped = true
				}
			}
			if r.Offset+1 >= ends[k] {
				done[k] = true
				pending--
				cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.partition}})
			}
		})
		if got > 0 {
			lastInRange = time.Now()
		}
		if progress != nil && got > 0 {
			var sum int64
			for _, r := range ranges {
				sum += stats.next[rangeKey{r.topic, r.partition}] - r.from
			}
			progress(sum)
		}
		if limit > 0 && n >= limit {
			stats.limited = skipped || pending > 0
			return stats, nil
		}
		if got == 0 && time.Since(lastInRange) >= idle {
			return stats, nil // idle: stop short; callers see the gap in stats
		}
	}
	return stats, nil
}

// carriesPlan reports whether r is a copy redriven by the given plan.
func carriesPlan(r *kgo.Record, plan string) bool {
	for _, h := range r.Headers {
		if h.Key == redrive.HeaderPlan && string(h.Value) == plan {
			return true
		}
	}
	return false
}
