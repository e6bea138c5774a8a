package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
)

// TopicLoad is what MeasureLoad observed on a topic, or on every topic
// together: the capacity worksheet's live prefill. Plain data.
type TopicLoad struct {
	Topics []string
	// Window is how long the produce rate was actually observed (the span
	// between the first and last high-watermark sample); 0 when the rate
	// was not measured.
	Window time.Duration
	// AvgRate is records appended per second over Window; PeakRate the
	// highest rate between two consecutive samples (one interval apart).
	AvgRate, PeakRate float64
	RateSamples       int
	// RecordBytes is the mean size of the sampled records: key + value +
	// header keys and values, without Kafka's per-record and per-batch
	// framing. RecordsSampled is how many were read (0: none to read).
	RecordBytes    float64
	RecordsSampled int
	// Partitions is the partition count (summed over topics);
	// ReplicationFactor the largest replica count of any partition.
	Partitions        int
	ReplicationFactor int
	// RetentionMs is retention.ms (the largest over topics); -1 when any
	// topic keeps data without a time limit, 0 when unknown.
	RetentionMs int64
	// Groups is the number of consumer groups with an offset committed on
	// any of the topics.
	Groups int
}

// LoadOptions tune MeasureLoad.
type LoadOptions struct {
	// Window is how long to watch the high watermarks; 0 skips the rate.
	Window time.Duration
	// Interval between high-watermark samples (default 1s): PeakRate is the
	// highest rate over one interval.
	Interval time.Duration
	// SampleRecords bounds how many recent records are read to measure the
	// record size (default 1000), spread evenly over the partitions.
	SampleRecords int
	// SampleTimeout bounds the size sample's reading (default 5s, and never
	// beyond ctx): a partition whose tail is a transaction marker never
	// yields its last offset, so the read cannot wait for it.
	SampleTimeout time.Duration

	hooks *loadHooks // tests: a driven clock instead of a ticker
}

// loadHooks replace the wall clock in tests, so a rate is asserted from
// offsets and known timestamps rather than from sleeps.
type loadHooks struct {
	now     func() time.Time
	tick    <-chan time.Time
	sampled func(n int) // after the n-th high-watermark sample (0 = the first)
}

// MeasureLoad measures the produce rate, record size, partition count,
// replication factor, retention and consumer groups of topic, or of every
// non-internal topic when topic is "". The rate is measured by sampling the
// sum of high watermarks every Interval for Window; it blocks that long.
func (c *Client) MeasureLoad(ctx context.Context, topic string, o LoadOptions) (TopicLoad, error) {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.SampleRecords <= 0 {
		o.SampleRecords = 1000
	}
	if o.SampleTimeout <= 0 {
		o.SampleTimeout = 5 * time.Second
	}
	var names []string
	if topic != "" {
		names = []string{topic}
	}
	topics, err := NewCluster(c).Topics(ctx, names...)
	if err != nil {
		return TopicLoad{}, err
	}
	if len(topics) == 0 {
		return TopicLoad{}, errors.New("no topics to measure")
	}
	var load TopicLoad
	for _, t := range topics {
		load.Topics = append(load.Topics, t.Name)
		load.Partitions += len(t.Partitions)
		load.ReplicationFactor = max(load.ReplicationFactor, t.ReplicationFactor)
		if v, ok := t.Configs[backends.ConfigRetentionMs]; ok && load.RetentionMs != -1 {
			ms, err := strconv.ParseInt(v, 10, 64)
			switch {
			case err != nil:
			case ms < 0:
				load.RetentionMs = -1
			default:
				load.RetentionMs = max(load.RetentionMs, ms)
			}
		}
	}

	if load.Groups, err = c.groupsReading(ctx, load.Topics); err != nil {
		return TopicLoad{}, err
	}
	if o.Window > 0 {
		if err := c.sampleRate(ctx, load.Topics, o, &load); err != nil {
			return TopicLoad{}, err
		}
	}
	// Sample sizes after the rate window, so the records read are the ones
	// the window saw arrive.
	if err := c.sampleSizes(ctx, load.Topics, o, &load); err != nil {
		return TopicLoad{}, err
	}
	return load, nil
}

// endSum is the sum of the topics' high watermarks. A partition without an
// answer fails the sample: a partial sum would read as a rate drop.
func (c *Client) endSum(ctx context.Context, topics []string) (int64, error) {
	offs, err := c.admin.ListEndOffsets(ctx, topics...)
	if err != nil && allFailed(err) {
		return 0, describeErr("end offsets", err)
	}
	var sum int64
	var bad error
	offs.Each(func(l kadm.ListedOffset) {
		if l.Err != nil && bad == nil {
			bad = fmt.Errorf("end offset of %s[%d]: %s", l.Topic, l.Partition, codeName(l.Err))
		}
		sum += l.Offset
	})
	if bad == nil && err != nil {
		bad = describeErr("end offsets", err)
	}
	return sum, bad
}

func (c *Client) sampleRate(ctx context.Context, topics []string, o LoadOptions, load *TopicLoad) error {
	now, tick, sampled := time.Now, (<-chan time.Time)(nil), func(int) {}
	if o.hooks != nil {
		now, tick = o.hooks.now, o.hooks.tick
		if o.hooks.sampled != nil {
			sampled = o.hooks.sampled
		}
	} else {
		t := time.NewTicker(o.Interval)
		defer t.Stop()
		tick = t.C
	}
	t0 := now()
	s0, err := c.endSum(ctx, topics)
	if err != nil {
		return err
	}
	sampled(0)
	prevT, prevS := t0, s0
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return fmt.Errorf("measuring the produce rate: %w", ctx.Err())
		case <-tick:
		}
		t := now()
		s, err := c.endSum(ctx, topics)
		if err != nil {
			return err
		}
		if dt := t.Sub(prevT).Seconds(); dt > 0 {
			load.PeakRate = math.Max(load.PeakRate, math.Max(0, float64(s-prevS))/dt)
		}
		prevT, prevS = t, s
		load.RateSamples = n + 1
		sampled(n)
		if t.Sub(t0) >= o.Window {
			break
		}
	}
	load.Window = prevT.Sub(t0)
	if secs := load.Window.Seconds(); secs > 0 {
		load.AvgRate = math.Max(0, float64(prevS-s0)) / secs
	}
	return nil
}

type sizeSpan struct {
	topic     string
	partition int32
	from, end int64
	seenLast  bool
}

// sampleSizes reads up to SampleRecords of the most recent records, spread
// over the partitions that hold data, and averages their sizes.
func (c *Client) sampleSizes(ctx context.Context, topics []string, o LoadOptions, load *TopicLoad) error {
	starts, err := c.admin.ListStartOffsets(ctx, topics...)
	if err != nil && allFailed(err) {
		return describeErr("log start offsets", err)
	}
	ends, err := c.admin.ListEndOffsets(ctx, topics...)
	if err != nil && allFailed(err) {
		return describeErr("end offsets", err)
	}
	var spans []*sizeSpan
	ends.Each(func(e kadm.ListedOffset) {
		s, ok := starts.Lookup(e.Topic, e.Partition)
		if e.Err != nil || !ok || s.Err != nil || e.Offset <= s.Offset {
			return
		}
		spans = append(spans, &sizeSpan{topic: e.Topic, partition: e.Partition, from: s.Offset, end: e.Offset})
	})
	if len(spans) == 0 {
		return nil
	}
	// The fullest partitions first, so a sample smaller than the partition
	// count reads where the traffic is.
	sort.Slice(spans, func(i, j int) bool {
		if a, b := spans[i].end-spans[i].from, spans[j].end-spans[j].from; a != b {
			return a > b
		}
		if spans[i].topic != spans[j].topic {
			return spans[i].topic < spans[j].topic
		}
		return spans[i].partition < spans[j].partition
	})
	if len(spans) > o.SampleRecords {
		spans = spans[:o.SampleRecords]
	}
	// SampleRecords split over the spans, the remainder to the fullest, so
	// the sample never exceeds the bound (--sample is "up to").
	base, extra := o.SampleRecords/len(spans), o.SampleRecords%len(spans)
	assign := map[string]map[int32]kgo.Offset{}
	want := 0
	for i, s := range spans {
		per := int64(base)
		if i < extra {
			per++
		}
		s.from = max(s.from, s.end-per)
		want += int(s.end - s.from)
		if assign[s.topic] == nil {
			assign[s.topic] = map[int32]kgo.Offset{}
		}
		assign[s.topic][s.partition] = kgo.NewOffset().At(s.from)
	}
	cl, err := c.NewKgo(kgo.ConsumePartitions(assign), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, o.SampleTimeout)
	defer cancel()

	var total float64
	n, done := 0, 0
	for done < len(spans) && n < want {
		fs := cl.PollFetches(sctx)
		if sctx.Err() != nil {
			break // a bounded sample: what was read is the sample
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("reading %s[%d] for the size sample: %s", t, p, codeName(err))
			}
		})
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, s := range spans {
				if s.topic != r.Topic || s.partition != r.Partition {
					continue
				}
				if r.Offset >= s.end {
					return // appended after the sample was planned
				}
				total += float64(recordBytes(r))
				n++
				if r.Offset >= s.end-1 && !s.seenLast {
					s.seenLast = true
					done++
				}
			}
		})
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sampling record sizes: %w", ctx.Err())
	}
	load.RecordsSampled = n
	if n > 0 {
		load.RecordBytes = total / float64(n)
	}
	return nil
}

// recordBytes is a record's payload size: key, value and headers.
func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// groupsReading counts the consumer groups with an offset committed on any
// of the topics.
func (c *Client) groupsReading(ctx context.Context, topics []string) (int, error) {
	listed, err := c.admin.ListGroups(ctx)
	if err != nil && allFailed(err) {
		return 0, describeErr("list groups", err)
	}
	names := listed.Groups()
	if len(names) == 0 {
		return 0, nil
	}
	resp := c.admin.FetchManyOffsets(ctx, names...)
	if resp.AllFailed() {
		return 0, describeErr("committed offsets", resp.Error())
	}
	want := map[string]bool{}
	for _, t := range topics {
		want[t] = true
	}
	count := 0
	for _, r := range resp {
		if r.Err != nil {
			continue
		}
		found := false
		for t, ps := range r.Fetched {
			if !want[t] {
				continue
			}
			for _, p := range ps {
				if p.Err == nil && p.At >= 0 {
					found = true
				}
			}
		}
		if found {
			count++
		}
	}
	return count, nil
}
