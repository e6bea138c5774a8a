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
// keeps it; an unread one is tried again), one read per distinct position
// across groups, and extracts its event time. The record read is the one
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
				rules[sp.v.t.Name] = sp.v.ev
			}
		}
	}
	keys := make([]evKey, 0, len(need))
	for k := range need {
		keys = append(keys, k)
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
				for _, ref := range need[key] {
					ref.gt.evSt[ref.i], ref.gt.evMs[ref.i] = uint8(state)+1, ms
				}
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
	rec := rng.Records[0]
	hs := make([]redrive.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		hs[i] = redrive.Header{Key: h.Key, Value: h.Value}
	}
	v, ok := f.Extract(hs, rec.Value)
	if !ok {
		return lag.EventMissing, 0, nil
	}
	t, ok := lag.ParseEventTime(v)
	if !ok {
		return lag.EventUnparsable, 0, nil
	}
	return lag.EventFound, t.UnixMilli(), nil
}
