package monitor

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/berth-dev/berth/backends"
)

type posQuery struct {
	pos int64
	q   int32
}

// probeRef links a group x partition to the query that answers it.
// It holds no pointers (the gtState is an index into a table): there is one
// per lagging group x partition, 100,000s on a cold refresh, and the
// collector need not scan them.
type probeRef struct {
	gt   int32 // index into the probe's gtState table
	p    int32
	next int32
}

// probe reads the timestamps the rows need: positions with lag whose
// answer is not already known (a position that did not move keeps its
// answer; a "no data" answer is kept only while the end did not move
// either). Queries are deduplicated across groups and sent in chunks.
func (m *Monitor) probe(ctx context.Context, work []*gwork, warnings *[]string) {
	// First the distinct positions per partition ("slots"), each with the
	// chain of group x partitions waiting for its answer.
	nrows := 0
	for _, w := range work {
		nrows += w.n
	}
	var heads []int32 // per slot: the first ref, -1 when none
	refs := make([]probeRef, 0, nrows)
	var gts []*gtState
	var touched []*topicView
	for _, w := range work {
		for _, sp := range w.spans {
			gt, v := sp.gt, sp.v
			gti := int32(len(gts))
			gts = append(gts, gt)
			for i := range gt.n {
				_, pos, end := sp.at(i)
				if end <= pos || end < 0 {
					continue
				}
				fl := gt.probeFl[i]
				if gt.probePos[i] == pos && fl&pfKnown != 0 && (fl&pfFound != 0 || gt.probeEnd[i] == end) {
					continue
				}
				gt.probeFl[i] = 0 // unknown until answered
				gt.probePos[i], gt.probeEnd[i] = pos, end
				if v.probes == nil {
					v.probes = make([][]posQuery, len(v.t.Partitions))
					touched = append(touched, v)
				}
				slot := int32(-1)
				for _, pq := range v.probes[i] {
					if pq.pos == pos {
						slot = pq.q
						break
					}
				}
				if slot < 0 {
					slot = int32(len(heads))
					heads = append(heads, -1)
					v.probes[i] = append(v.probes[i], posQuery{pos: pos, q: slot})
				}
				refs = append(refs, probeRef{gt: gti, p: int32(i), next: heads[slot]})
				heads[slot] = int32(len(refs) - 1)
			}
		}
	}
	// Then the queries, partition by partition: a partition's positions
	// go in the same chunk, so the reader answers them from one fetch
	// rather than re-answering later chunks from its cache.
	sort.Slice(touched, func(i, j int) bool { return touched[i].t.Name < touched[j].t.Name })
	queries := make([]backends.OffsetQuery, 0, len(heads))
	qslot := make([]int32, 0, len(heads)) // query index -> slot
	for _, v := range touched {
		for p, pqs := range v.probes {
			part := &v.t.Partitions[p]
			for _, pq := range pqs {
				queries = append(queries, backends.OffsetQuery{TopicPartition: backends.TopicPartition{Topic: part.Topic, Partition: part.Partition}, Offset: pq.pos})
				qslot = append(qslot, pq.q)
			}
		}
	}
	// Chunks go to the reader probeWorkers at a time: one chunk's fetches
	// overlap the next one's, and the answers of different chunks land on
	// different group x partitions (each ref belongs to one query).
	nchunks := (len(queries) + probeChunk - 1) / probeChunk
	chunkErrs := make([]error, nchunks)
	var next atomic.Int64
	var pwg sync.WaitGroup
	for range min(probeWorkers, nchunks) {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for c := int(next.Add(1) - 1); c < nchunks && ctx.Err() == nil; c = int(next.Add(1) - 1) {
				start := c * probeChunk
				chunk := queries[start:min(start+probeChunk, len(queries))]
				rts, err := m.ts.FirstTimestamps(ctx, chunk)
				chunkErrs[c] = err
				m.applyAnswers(chunk, rts, qslot[start:], heads, refs, gts)
			}
		}()
	}
	pwg.Wait()
	var probeErrs []error
	for _, err := range chunkErrs {
		if err != nil {
			probeErrs = append(probeErrs, err)
		}
	}
	if len(probeErrs) > 0 {
		*warnings = append(*warnings, "timestamps: "+oneLine(errors.Join(probeErrs...)))
	}
}

// applyAnswers records the reader's answers to chunk (in query order,
// unresolved ones left out) on every group x partition waiting for them.
func (m *Monitor) applyAnswers(chunk []backends.OffsetQuery, rts []backends.RecordTime, qslot, heads []int32, refs []probeRef, gts []*gtState) {
	i := 0
	for _, rt := range rts {
		for i < len(chunk) && chunk[i] != rt.OffsetQuery {
			i++
		}
		if i == len(chunk) {
			break
		}
		fl := pfKnown
		if rt.Found {
			fl |= pfFound
		}
		if rt.Approximate {
			fl |= pfApprox
		}
		switch rt.Type {
		case backends.LogAppendTime:
			fl |= pfLogAppend
		case backends.CreateTime:
		default:
			fl |= pfUnknownType
		}
		ms := rt.Timestamp.UnixMilli()
		for ri := heads[qslot[i]]; ri >= 0; ri = refs[ri].next {
			gt := gts[refs[ri].gt]
			gt.probeFl[refs[ri].p] = fl
			gt.probeMs[refs[ri].p] = ms
		}
		i++
	}
}
