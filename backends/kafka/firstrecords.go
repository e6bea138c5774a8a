package kafka

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
)

// firstRecordSpan is how far past a position FirstRecords looks for its
// first data record (transaction markers, compacted gaps); a position
// whose first data record lies further is answered not found.
const firstRecordSpan = 64

// FirstRecords reads the first data record at or after each query's offset
// (within firstRecordSpan offsets of it) through one group-less consumer
// per round: a round reads one range per partition, so positions of several
// groups on one partition that lie close together share a range, and ones
// far apart go to later rounds. The lag monitor's event-time probe uses it
// instead of a consumer (and a metadata read) per position.
func (k *Cluster) FirstRecords(ctx context.Context, queries []backends.RecordAt) ([]backends.FirstRecord, error) {
	out := make([]backends.FirstRecord, len(queries))
	type want struct {
		i   int
		pos int64
	}
	byTP := map[rangeKey][]want{}
	ends := map[rangeKey]int64{}
	for i, q := range queries {
		if q.Offset < 0 || q.Offset >= q.End {
			continue
		}
		key := rangeKey{q.Topic, q.Partition}
		byTP[key] = append(byTP[key], want{i, q.Offset})
		ends[key] = max(ends[key], q.End)
	}
	for key := range byTP {
		sort.Slice(byTP[key], func(a, b int) bool { return byTP[key][a].pos < byTP[key][b].pos })
	}
	for len(byTP) > 0 {
		// This round: per partition, the lowest pending position and every
		// other one within the span of it.
		var ranges []readRange
		round := map[rangeKey][]want{}
		for key, ws := range byTP {
			from := ws[0].pos
			n := 0
			for n < len(ws) && ws[n].pos < from+firstRecordSpan {
				n++
			}
			round[key] = ws[:n]
			if n == len(ws) {
				delete(byTP, key)
			} else {
				byTP[key] = ws[n:]
			}
			end := min(ws[n-1].pos+firstRecordSpan, ends[key])
			ranges = append(ranges, readRange{topic: key.topic, partition: key.partition, from: from, end: end})
		}
		recs := map[rangeKey][]backends.Record{}
		if _, err := k.c.readRanges(ctx, ranges, 0, time.Second, func(r *kgo.Record) {
			key := rangeKey{r.Topic, r.Partition}
			recs[key] = append(recs[key], plainRecord(r))
		}, nil); err != nil {
			return out, err
		}
		for key, ws := range round {
			rs := recs[key] // ascending offsets, data records only
			j := 0
			for _, w := range ws {
				for j < len(rs) && rs[j].Offset < w.pos {
					j++
				}
				if j < len(rs) {
					out[w.i] = backends.FirstRecord{Found: true, Record: rs[j]}
				}
			}
		}
	}
	return out, nil
}
