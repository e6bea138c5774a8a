package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends"
)

// TimestampReader reads the timestamp of the first data record at or after
// given offsets, the source of age-based lag. It sends batched Fetch requests
// to each partition's leader (at most PartitionsPerRequest partitions per
// request, at most InFlightPerBroker requests in flight per broker, never a
// request per partition), with a small per-partition byte limit, so a sweep
// over thousands of partitions costs a few requests.
//
// Answers are cached per partition as decoded offset ranges: the timestamp of
// an offset never changes, so a position inside a range already read (by any
// group) is answered without a request.
//
// Fetches use READ_COMMITTED: records of aborted transactions and transaction
// markers are not data, and a position followed only by them has no first
// record (Found false: nothing to consume, so no lag).
type TimestampReader struct {
	cl *kgo.Client

	// PartitionBytes is the first per-partition byte limit (default 4 KiB);
	// partitions that come back empty because their first batch is larger
	// are retried with a larger limit (kfake returns nothing rather than a
	// truncated batch there).
	PartitionBytes int32
	// PartitionsPerRequest caps partitions per Fetch request (default 500).
	PartitionsPerRequest int
	// InFlightPerBroker caps concurrent requests per broker (default 2).
	InFlightPerBroker int
	// MetadataMaxAge is how long leader information is reused (default 30s).
	MetadataMaxAge time.Duration

	fetches atomic.Int64

	mu     sync.Mutex
	cache  map[tpKey]*partCache
	meta   map[string]topicMeta
	metaAt time.Time
	// stale is set when a broker said it no longer leads a partition:
	// the next metadata must come from the cluster, not the client's
	// cache.
	stale bool
	dec   kgo.Decompressor
}

var _ backends.TimestampReader = (*TimestampReader)(nil)

type tpKey struct {
	topic     string
	partition int32
}

type topicMeta struct {
	id      [16]byte
	leaders map[int32]int32
}

// maxRanges bounds the cached ranges kept per partition.
const maxRanges = 4

// partCache holds decoded ranges of one partition, most recently used first.
type partCache struct {
	ranges []span
}

// span is a contiguous range [from, to) of a partition that has been read:
// recs holds every data record in it (offset, unix ms, type). approx marks a
// span known only from a record batch header.
type span struct {
	from, to int64
	recs     []recTS
	approx   bool
}

type recTS struct {
	off int64
	ms  int64
	typ backends.TimestampType
}

// lookup answers "first data record at or after off" from the span, when
// the span covers off.
func (s span) lookup(off int64) (recTS, bool, bool) {
	if off < s.from || off >= s.to {
		return recTS{}, false, false
	}
	i := sort.Search(len(s.recs), func(i int) bool { return s.recs[i].off >= off })
	if i == len(s.recs) {
		// No data between off and the span's end: the answer lies beyond
		// the span (not known here).
		return recTS{}, false, false
	}
	return s.recs[i], true, true
}

// NewTimestampReader returns a reader on c's client.
func NewTimestampReader(c *Client) *TimestampReader {
	return &TimestampReader{cl: c.cl, cache: map[tpKey]*partCache{}, dec: kgo.DefaultDecompressor()}
}

// Fetches is the number of Fetch requests sent so far.
func (r *TimestampReader) Fetches() int64 { return r.fetches.Load() }

func (r *TimestampReader) defaults() (int32, int, int, time.Duration) {
	pb, pr, inf, age := r.PartitionBytes, r.PartitionsPerRequest, r.InFlightPerBroker, r.MetadataMaxAge
	if pb <= 0 {
		pb = 4 << 10
	}
	if pr <= 0 {
		pr = 500
	}
	if inf <= 0 {
		inf = 2
	}
	if age <= 0 {
		age = 30 * time.Second
	}
	return pb, pr, inf, age
}

// pending is one query still being resolved: cur is the offset the next
// fetch starts at (it advances past markers and empty batches), limit the
// per-partition byte limit.
type pending struct {
	key   tpKey
	idx   []int // indexes of the queries on this partition, by offset
	cur   int64
	limit int32
}

// FirstTimestamps answers each query it can resolve; queries it could not
// resolve (leader unavailable, not authorised, too many retries) are left
// out of the result, and the error says why. Results are in query order.
func (r *TimestampReader) FirstTimestamps(ctx context.Context, queries []backends.OffsetQuery) ([]backends.RecordTime, error) {
	answers := make([]backends.RecordTime, len(queries))
	done := make([]bool, len(queries))

	// Cache first; the rest is grouped per partition so one fetch from the
	// lowest position answers every position it covers.
	byTP := map[tpKey][]int{}
	r.mu.Lock()
	for i, q := range queries {
		if rt, ok := r.cachedLocked(q); ok {
			answers[i], done[i] = rt, true
			continue
		}
		k := tpKey{q.Topic, q.Partition}
		byTP[k] = append(byTP[k], i)
	}
	r.mu.Unlock()

	var errs []error
	if len(byTP) > 0 {
		errs = r.resolve(ctx, queries, byTP, answers, done)
	}
	// Drop the unanswered in place: answers is ours, and growing a second
	// slice of 100,000s of answers was a noticeable part of a cold refresh.
	out := answers[:0]
	for i := range answers {
		if done[i] {
			out = append(out, answers[i])
		}
	}
	return out, errors.Join(errs...)
}

func (r *TimestampReader) cachedLocked(q backends.OffsetQuery) (backends.RecordTime, bool) {
	pc := r.cache[tpKey{q.Topic, q.Partition}]
	if pc == nil {
		return backends.RecordTime{}, false
	}
	for i, s := range pc.ranges {
		if rec, found, ok := s.lookup(q.Offset); ok {
			if i > 0 { // most recently used first
				pc.ranges[0], pc.ranges[i] = pc.ranges[i], pc.ranges[0]
			}
			return recordTime(q, rec, found, s.approx), true
		}
	}
	return backends.RecordTime{}, false
}

func recordTime(q backends.OffsetQuery, rec recTS, found, approx bool) backends.RecordTime {
	rt := backends.RecordTime{OffsetQuery: q, Found: found, At: -1}
	if found {
		rt.At, rt.Timestamp, rt.Type = rec.off, time.UnixMilli(rec.ms).UTC(), rec.typ
		rt.Approximate = approx
	}
	return rt
}

func (r *TimestampReader) remember(k tpKey, s span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pc := r.cache[k]
	if pc == nil {
		pc = &partCache{}
		r.cache[k] = pc
	}
	pc.ranges = append([]span{s}, pc.ranges...)
	if len(pc.ranges) > maxRanges {
		pc.ranges = pc.ranges[:maxRanges]
	}
}

const maxRounds = 12

// maxResponseBytes bounds one Fetch response.
const maxResponseBytes = 8 << 20

func (r *TimestampReader) resolve(ctx context.Context, queries []backends.OffsetQuery, byTP map[tpKey][]int, answers []backends.RecordTime, done []bool) []error {
	pb, _, _, _ := r.defaults()
	work := make([]*pending, 0, len(byTP))
	for k, idx := range byTP {
		sort.Slice(idx, func(a, b int) bool { return queries[idx[a]].Offset < queries[idx[b]].Offset })
		work = append(work, &pending{key: k, idx: idx, cur: queries[idx[0]].Offset, limit: pb})
	}
	sort.Slice(work, func(i, j int) bool {
		if work[i].key.topic != work[j].key.topic {
			return work[i].key.topic < work[j].key.topic
		}
		return work[i].key.partition < work[j].key.partition
	})
	var errs []error
	for round := 0; len(work) > 0; round++ {
		if ctx.Err() != nil {
			return append(errs, fmt.Errorf("reading timestamps: %w", ctx.Err()))
		}
		if round == maxRounds {
			return append(errs, fmt.Errorf("reading timestamps: %d partitions unresolved after %d rounds", len(work), maxRounds))
		}
		var rerrs []error
		work, rerrs = r.round(ctx, work, queries, answers, done)
		errs = append(errs, rerrs...)
	}
	return errs
}

// round sends one wave of Fetch requests (per leader, bounded) and returns
// what still needs another round.
func (r *TimestampReader) round(ctx context.Context, work []*pending, queries []backends.OffsetQuery, answers []backends.RecordTime, done []bool) ([]*pending, []error) {
	_, perReq, inflight, _ := r.defaults()
	meta, err := r.metadata(ctx, work)
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	byBroker := map[int32][]*pending{}
	for _, w := range work {
		tm, ok := meta[w.key.topic]
		leader, lok := tm.leaders[w.key.partition]
		switch {
		case !ok || !lok:
			errs = append(errs, fmt.Errorf("%s[%d]: unknown topic or partition", w.key.topic, w.key.partition))
		case leader < 0:
			errs = append(errs, fmt.Errorf("%s[%d]: no leader", w.key.topic, w.key.partition))
		default:
			byBroker[leader] = append(byBroker[leader], w)
		}
	}
	var (
		mu   sync.Mutex
		next []*pending
		wg   sync.WaitGroup
	)
	collect := func(more []*pending, e []error) {
		mu.Lock()
		next = append(next, more...)
		errs = append(errs, e...)
		mu.Unlock()
	}
	for broker, ws := range byBroker {
		chunks := make(chan []*pending)
		for i := 0; i < inflight; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for chunk := range chunks {
					collect(r.fetch(ctx, broker, chunk, meta, queries, answers, done))
				}
			}()
		}
		go func() {
			defer close(chunks)
			for len(ws) > 0 {
				n := perReq
				if lim := int(maxResponseBytes / ws[0].limit); lim < n {
					n = max(lim, 1)
				}
				n = min(n, len(ws))
				chunks <- ws[:n]
				ws = ws[n:]
			}
		}()
	}
	wg.Wait()
	return next, errs
}

func (r *TimestampReader) fetch(ctx context.Context, broker int32, chunk []*pending, meta map[string]topicMeta, queries []backends.OffsetQuery, answers []backends.RecordTime, done []bool) ([]*pending, []error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = maxResponseBytes
	req.IsolationLevel = 1 // READ_COMMITTED: aborted records are not data
	req.SessionID = 0
	req.SessionEpoch = -1 // no fetch session: nothing is left on the broker
	byKey := make(map[tpKey]*pending, len(chunk))
	topicIdx := map[string]int{}
	for _, w := range chunk {
		byKey[w.key] = w
		i, ok := topicIdx[w.key.topic]
		if !ok {
			i = len(req.Topics)
			topicIdx[w.key.topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic = w.key.topic
			t.TopicID = meta[w.key.topic].id
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = w.key.partition
		p.FetchOffset = w.cur
		p.PartitionMaxBytes = w.limit
		p.CurrentLeaderEpoch = -1
		p.LogStartOffset = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	r.fetches.Add(1)
	kresp, err := r.cl.Broker(int(broker)).Request(ctx, req)
	if err != nil {
		r.staleMetadata()
		if ctx.Err() != nil {
			return nil, []error{fmt.Errorf("fetch from broker %d: %w", broker, ctx.Err())}
		}
		if staleRoute(err) {
			// Routed by leaders cached before a broker loss to a broker
			// the client no longer knows: the next round routes on fresh
			// metadata, so this is no error (maxRounds bounds it).
			return chunk, nil
		}
		return chunk, []error{fmt.Errorf("fetch from broker %d: %w", broker, err)}
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, []error{fmt.Errorf("fetch from broker %d: %w", broker, err)}
	}
	byID := map[[16]byte]string{}
	for name, tm := range meta {
		byID[tm.id] = name
	}
	var next []*pending
	var errs []error
	seen := make(map[tpKey]bool, len(chunk))
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		name := rt.Topic
		if name == "" {
			name = byID[rt.TopicID]
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			k := tpKey{name, rp.Partition}
			w := byKey[k]
			if w == nil || seen[k] {
				continue
			}
			seen[k] = true
			retry, err := r.handle(w, rp, queries, answers, done)
			if err != nil {
				errs = append(errs, err)
			}
			if retry {
				next = append(next, w)
			}
		}
	}
	// Partitions left out of the response (the response byte budget ran
	// out) go again as they are.
	for _, w := range chunk {
		if !seen[w.key] {
			next = append(next, w)
		}
	}
	return next, errs
}

// handle digests one partition of a Fetch response: it answers every query
// position the returned range covers and says whether the partition needs
// another round (from a later offset or with a larger byte limit).
func (r *TimestampReader) handle(w *pending, rp *kmsg.FetchResponseTopicPartition, queries []backends.OffsetQuery, answers []backends.RecordTime, done []bool) (bool, error) {
	switch err := kerr.ErrorForCode(rp.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		if rp.LogStartOffset > w.cur {
			// Retention moved the log start past the position: the first
			// record at or after it is the first one left.
			w.cur = rp.LogStartOffset
			return true, nil
		}
		if rp.HighWatermark >= 0 && w.cur >= rp.HighWatermark {
			r.answerRest(w, queries, answers, done, w.cur)
			return false, nil
		}
		return false, fmt.Errorf("%s[%d] at %d: %w", w.key.topic, w.key.partition, w.cur, err)
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.UnknownTopicOrPartition),
		errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.UnknownLeaderEpoch),
		errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.KafkaStorageError):
		r.staleMetadata()
		return true, nil
	default:
		return false, fmt.Errorf("%s[%d]: %w", w.key.topic, w.key.partition, err)
	}
	bound := rp.LastStableOffset
	if bound < 0 || (rp.HighWatermark >= 0 && bound > rp.HighWatermark) {
		bound = rp.HighWatermark
	}
	recs, err := batchTimestamps(rp, w.cur, r.dec, nil)
	if errors.Is(err, errOldFormat) {
		recs, err = r.oldFormatTimestamps(w, rp)
	}
	if err != nil {
		return false, fmt.Errorf("%s[%d]: %w", w.key.topic, w.key.partition, err)
	}
	lastEnd, partial := walkBatches(rp.RecordBatches)

	var sp span
	switch {
	case lastEnd > w.cur || len(recs) > 0:
		sp = span{from: w.cur, to: max(lastEnd, w.cur), recs: recs}
		if n := len(sp.recs); n > 0 && sp.recs[n-1].off >= sp.to {
			sp.to = sp.recs[n-1].off + 1
		}
	case partial != nil && partial.end > w.cur:
		// A truncated batch (real brokers cut batches at the partition
		// limit): its header still gives the timestamps.
		h := partial
		if h.control() || h.aborted(rp.AbortedTransactions) {
			w.cur = h.end
			return true, nil
		}
		typ := backends.CreateTime
		ms := h.firstTS
		exact := w.cur <= h.base
		if h.logAppend() {
			typ, ms, exact = backends.LogAppendTime, h.maxTS, true
		}
		sp = span{from: w.cur, to: h.end, recs: []recTS{{off: max(h.base, w.cur), ms: ms, typ: typ}}, approx: !exact}
	default:
		if bound >= 0 && w.cur >= bound {
			r.answerRest(w, queries, answers, done, w.cur)
			return false, nil
		}
		// Nothing came back below the end: the first batch is bigger than
		// the limit (kfake answers nothing rather than a truncated batch).
		if w.limit < maxResponseBytes {
			w.limit = min(w.limit*16, maxResponseBytes)
		}
		return true, nil
	}
	if len(sp.recs) > 0 {
		r.remember(w.key, sp)
	}
	reachedEnd := bound >= 0 && sp.to >= bound
	var rest []int
	for _, i := range w.idx {
		if done[i] {
			continue
		}
		q := queries[i]
		// Positions below the span's start were skipped on the way (below
		// the log start, or markers): their answer is the span's.
		if rec, found, ok := sp.lookup(max(q.Offset, sp.from)); ok {
			answers[i], done[i] = recordTime(q, rec, found, sp.approx), true
			continue
		}
		if reachedEnd {
			answers[i], done[i] = recordTime(q, recTS{}, false, false), true
			continue
		}
		rest = append(rest, i)
	}
	if len(rest) == 0 {
		return false, nil
	}
	w.idx = rest
	w.cur = max(sp.to, queries[rest[0]].Offset)
	return true, nil
}

// oldFormatTimestamps decodes pre-v2 message sets (written by brokers or
// producers older than Kafka 0.11) with kgo, which knows their layouts.
func (r *TimestampReader) oldFormatTimestamps(w *pending, rp *kmsg.FetchResponseTopicPartition) ([]recTS, error) {
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset:         w.cur,
		IsolationLevel: kgo.ReadCommitted(),
		Topic:          w.key.topic,
		Partition:      rp.Partition,
	}, rp, r.dec, nil)
	if fp.Err != nil {
		return nil, fp.Err
	}
	var recs []recTS
	for _, rec := range fp.Records {
		if rec.Offset >= w.cur {
			recs = append(recs, recTS{off: rec.Offset, ms: rec.Timestamp.UnixMilli(), typ: tsType(rec.Attrs.TimestampType())})
		}
	}
	return recs, nil
}

// answerRest answers every remaining position of w as "no data record".
func (r *TimestampReader) answerRest(w *pending, queries []backends.OffsetQuery, answers []backends.RecordTime, done []bool, _ int64) {
	for _, i := range w.idx {
		if !done[i] {
			answers[i], done[i] = recordTime(queries[i], recTS{}, false, false), true
		}
	}
}

func tsType(t int8) backends.TimestampType {
	switch t {
	case 0:
		return backends.CreateTime
	case 1:
		return backends.LogAppendTime
	}
	return backends.UnknownTimeTyp
}

// batchHeader is the fixed 61-byte head of a v2 record batch.
type batchHeader struct {
	base, end      int64 // end = base + lastOffsetDelta + 1
	attrs          int16
	firstTS, maxTS int64
	producerID     int64
}

func (h *batchHeader) control() bool   { return h.attrs&0x20 != 0 }
func (h *batchHeader) txn() bool       { return h.attrs&0x10 != 0 }
func (h *batchHeader) logAppend() bool { return h.attrs&0x08 != 0 }

// aborted reports whether a transactional batch belongs to a transaction the
// response lists as aborted.
func (h *batchHeader) aborted(ab []kmsg.FetchResponseTopicPartitionAbortedTransaction) bool {
	if !h.txn() {
		return false
	}
	for _, a := range ab {
		if a.ProducerID == h.producerID && a.FirstOffset <= h.base {
			return true
		}
	}
	return false
}

// readBatchHeader reads the header of the v2 batch at the start of b (at
// least 61 bytes).
func readBatchHeader(b []byte) batchHeader {
	be := binary.BigEndian
	h := batchHeader{
		base:       int64(be.Uint64(b)),
		attrs:      int16(be.Uint16(b[21:])),
		firstTS:    int64(be.Uint64(b[27:])),
		maxTS:      int64(be.Uint64(b[35:])),
		producerID: int64(be.Uint64(b[43:])),
	}
	h.end = h.base + int64(int32(be.Uint32(b[23:]))) + 1
	return h
}

// walkBatches returns the end offset of the last complete v2 batch in b (-1
// when none) and the header of a trailing truncated batch, if any.
func walkBatches(b []byte) (int64, *batchHeader) {
	be := binary.BigEndian
	lastEnd := int64(-1)
	for len(b) >= 61 {
		size := 12 + int(int32(be.Uint32(b[8:])))
		if b[16] != 2 { // not a v2 batch: old message sets carry no header
			return lastEnd, nil
		}
		h := readBatchHeader(b)
		if size > len(b) {
			return lastEnd, &h
		}
		lastEnd = h.end
		b = b[size:]
	}
	return lastEnd, nil
}

// metadata returns topic ids and leaders for the topics in work, asking the
// cluster only when some topic is unknown or the cache is older than
// MetadataMaxAge.
func (r *TimestampReader) metadata(ctx context.Context, work []*pending) (map[string]topicMeta, error) {
	_, _, _, maxAge := r.defaults()
	r.mu.Lock()
	fresh := r.meta != nil && time.Since(r.metaAt) < maxAge
	var need []string
	seen := map[string]bool{}
	for _, w := range work {
		if seen[w.key.topic] {
			continue
		}
		seen[w.key.topic] = true
		if _, ok := r.meta[w.key.topic]; !ok || !fresh {
			need = append(need, w.key.topic)
		}
	}
	meta, stale := r.meta, r.stale
	r.mu.Unlock()
	if len(need) == 0 {
		return meta, nil
	}
	if fresh {
		// Only the unknown topics; keep the rest.
	} else {
		need = need[:0]
		for t := range seen {
			need = append(need, t)
		}
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range need {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, mt)
	}
	var resp *kmsg.MetadataResponse
	if stale {
		kresp, err := r.cl.Request(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("reading timestamps: metadata: %w", err)
		}
		resp = kresp.(*kmsg.MetadataResponse)
	} else {
		// The client's cached metadata (a few seconds old at most): the
		// monitor's topic listing has just fetched the same topics, so a
		// cold refresh does not ask the cluster twice.
		var err error
		if resp, err = r.cl.RequestCachedMetadata(ctx, req, 0); err != nil {
			return nil, fmt.Errorf("reading timestamps: metadata: %w", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stale = false
	nm := make(map[string]topicMeta, len(r.meta)+len(resp.Topics))
	if fresh {
		for k, v := range r.meta {
			nm[k] = v
		}
	} else {
		r.metaAt = time.Now()
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		tm := topicMeta{id: t.TopicID, leaders: make(map[int32]int32, len(t.Partitions))}
		for _, p := range t.Partitions {
			tm.leaders[p.Partition] = p.Leader
		}
		nm[*t.Topic] = tm
	}
	r.meta = nm
	return nm, nil
}

func (r *TimestampReader) staleMetadata() {
	r.mu.Lock()
	r.metaAt, r.stale = time.Time{}, true
	r.mu.Unlock()
}
