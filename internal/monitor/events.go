package monitor

import (
	"context"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/redrive"
)

// EventRule reads the event time of matching topics' records from a field
// (redrive's json:PATH or header:NAME extraction), for event-time freshness
// beside the ingest age.
type EventRule struct {
	Match  string // topic glob
	Field  redrive.Field
	Margin time.Duration // clock margin
}

// eventWorkers bounds the record reads in flight for event times.
const eventWorkers = 4

func (m *Monitor) eventRule(topic string) *EventRule {
	for i := range m.cfg.EventTime {
		if ok, _ := path.Match(m.cfg.EventTime[i].Match, topic); ok {
			return &m.cfg.EventTime[i]
		}
	}
	return nil
}

// eventProbe is the event time read at partition i when it was read at pos.
func (g *gtState) eventProbe(i int, pos int64, margin time.Duration) lag.EventProbe {
	p := lag.EventProbe{Rule: true, Margin: margin, State: lag.EventUnread}
	if g.evSt == nil || g.evPos[i] != pos || g.evSt[i] == 0 {
		return p
	}
	p.State = lag.EventState(g.evSt[i] - 1)
	if p.State == lag.EventFound {
		p.Time = time.UnixMilli(g.evMs[i])
	}
	return p
}

type evKey struct {
	topic string
	part  int32
	pos   int64
}

type evRef struct {
	gt *gtState
	i  int
}

// probeEvents reads the record at each lagging position of an event-time
// topic whose answer is not already known (a position that did not move
// keeps it; an unread one is tried again), once per distinct position
// across groups — all in one read where the backend can — and extracts its
// event time. The record read is the one
// the age is measured on: the first data record at or after the position.
func (m *Monitor) probeEvents(ctx context.Context, work []*gwork, warnings *[]string) {
	if len(m.cfg.EventTime) == 0 {
		return
	}
	rr, ok := m.cluster.(backends.RecordReader)
	if !ok {
		return
	}
	need := map[evKey][]evRef{}
	ends := map[evKey]int64{}
	rules := map[string]*EventRule{}
	for _, w := range work {
		for _, sp := range w.spans {
			if sp.v.ev == nil {
				continue
			}
			gt := sp.gt
			if gt.evSt == nil {
				gt.evPos, gt.evMs, gt.evSt = filled64(gt.n, -2), make([]int64, gt.n), make([]uint8, gt.n)
			}
			for i := range gt.n {
				_, pos, end := sp.at(i)
				if end <= pos || end < 0 {
					continue
				}
				if gt.evPos[i] == pos && gt.evSt[i] != 0 && lag.EventState(gt.evSt[i]-1) != lag.EventUnread {
					continue
				}
				gt.evPos[i], gt.evSt[i] = pos, 0
				k := evKey{sp.v.t.Name, sp.v.t.Partitions[i].Partition, pos}
				need[k] = append(need[k], evRef{gt, i})
				ends[k] = end
				rules[sp.v.t.Name] = sp.v.ev
			}
		}
	}
	keys := make([]evKey, 0, len(need))
	for k := range need {
		keys = append(keys, k)
	}
	store := func(key evKey, state lag.EventState, ms int64) {
		for _, ref := range need[key] {
			ref.gt.evSt[ref.i], ref.gt.evMs[ref.i] = uint8(state)+1, ms
		}
	}
	// All at once where the backend can (one consumer for every position);
	// what it did not find near its position is read one by one below.
	if fr, ok := m.cluster.(backends.FirstRecordReader); ok && len(keys) > 0 {
		qs := make([]backends.RecordAt, len(keys))
		for i, k := range keys {
			qs[i] = backends.RecordAt{OffsetQuery: backends.OffsetQuery{TopicPartition: backends.TopicPartition{Topic: k.topic, Partition: k.part}, Offset: k.pos}, End: ends[k]}
		}
		answers, err := fr.FirstRecords(ctx, qs)
		if err != nil {
			*warnings = append(*warnings, "event times: "+oneLine(err))
		}
		rest := keys[:0:0]
		for i, k := range keys {
			if i < len(answers) && answers[i].Found {
				state, ms := eventTimeOf(answers[i].Record, rules[k.topic].Field)
				store(k, state, ms)
				continue
			}
			rest = append(rest, k)
		}
		keys = rest
	}
	var (
		next   atomic.Int64
		failed atomic.Int64
		first  atomic.Value
		wg     sync.WaitGroup
	)
	for range min(eventWorkers, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < len(keys) && ctx.Err() == nil; k = int(next.Add(1) - 1) {
				key := keys[k]
				state, ms, err := readEventTime(ctx, rr, key, rules[key.topic].Field)
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
				// Each key's refs are its own: no two workers write the
				// same partition's slots.
				store(key, state, ms)
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		*warnings = append(*warnings, fmt.Sprintf("event times: %d record(s) could not be read: %s", n, oneLine(fmt.Errorf("%v", first.Load()))))
	}
}

func readEventTime(ctx context.Context, rr backends.RecordReader, k evKey, f redrive.Field) (lag.EventState, int64, error) {
	rng, err := rr.ReadRecords(ctx, k.topic, k.part, k.pos, 1)
	if err != nil {
		return lag.EventUnread, 0, fmt.Errorf("%s[%d] at %d: %w", k.topic, k.part, k.pos, err)
	}
	if len(rng.Records) == 0 {
		return lag.EventNone, 0, nil
	}
	state, ms := eventTimeOf(rng.Records[0], f)
	return state, ms, nil
}

// eventTimeOf extracts and parses the event time of rec.
func eventTimeOf(rec backends.Record, f redrive.Field) (lag.EventState, int64) {
	hs := make([]redrive.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		hs[i] = redrive.Header{Key: h.Key, Value: h.Value}
	}
	v, ok := f.Extract(hs, rec.Value)
	if !ok {
		return lag.EventMissing, 0
	}
	t, ok := lag.ParseEventTime(v)
	if !ok {
		return lag.EventUnparsable, 0
	}
	return lag.EventFound, t.UnixMilli()
}
