package lag

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
)

// The incident table plays consumer incidents second by second against a
// simulated log, producer and consumer, refreshing once a second and
// keeping what the monitor keeps (history, when each commit last changed),
// and asserts every partition's status at every step
// with the default configuration (15 s steady age, 5 s commit interval,
// 2 m window). Each span of expected statuses is what an on-call engineer
// should read at that moment.

// simPart is one partition: its records' timestamps (the producer's clock),
// log start, the group's commit and the consumer's position.
type simPart struct {
	stamps    []time.Time // per offset
	logStart  int64
	committed int64
	owner     string
	produce   int  // records per second
	stuck     bool // the consumer cannot get past its position (poison)
	ahead     time.Duration
	born      int // second the partition appears (partitions added)
	hist      []Sample
	// since and changed are what the monitor keeps at every refresh:
	// when the commit last changed (or was first seen).
	since   time.Time
	changed bool
}

func (p *simPart) end() int64 { return int64(len(p.stamps)) }

func (p *simPart) add(at time.Time, n int) {
	for range n {
		p.stamps = append(p.stamps, at.Add(p.ahead))
	}
}

// world is one group over some partitions; consumers of the same owner
// share one capacity per second and work partitions in order.
type world struct {
	parts []*simPart
	rate  int // records a member consumes per second
}

func (w *world) consume() {
	left := map[string]int{}
	for _, p := range w.parts {
		if p.owner == "" || p.stuck {
			continue
		}
		if _, ok := left[p.owner]; !ok {
			left[p.owner] = w.rate
		}
		pos := Position(p.committed, p.logStart)
		n := min(int64(left[p.owner]), p.end()-pos)
		if n <= 0 {
			continue
		}
		left[p.owner] -= int(n)
		p.committed = pos + n // committed once a second, after processing
	}
}

type span struct {
	from, to int
	want     Status
}

type incident struct {
	name  string
	parts int
	rate  int
	setup func(w *world)
	// at runs before the second's production and consumption.
	at func(sec int, w *world)
	// want holds each partition's expected statuses, span by span.
	want [][]span
}

func TestIncidentTable(t *testing.T) {
	// old fills a backlog of n records, one a second, ending ago before t0.
	old := func(p *simPart, n int, ago time.Duration) {
		for i := range n {
			p.stamps = append(p.stamps, t0.Add(-ago-time.Duration(n-i)*time.Second))
		}
	}
	incidents := []incident{{
		name: "stall right after catching up", parts: 1, rate: 100,
		setup: func(w *world) { w.parts[0].produce = 10 },
		at: func(sec int, w *world) {
			if sec == 30 {
				w.parts[0].stuck = true // a poison record arrives
			}
		},
		// The record at the stuck position was produced at 30 s: its age
		// passes the steady age at 46 s, and that refresh says STALLED.
		want: [][]span{{{0, 45, OK}, {46, 150, STALLED}}},
	}, {
		name: "stall with no new data", parts: 1, rate: 100,
		setup: func(w *world) {
			old(w.parts[0], 100, time.Minute)
			w.parts[0].committed, w.parts[0].stuck = 50, true
		},
		// Behind from the first sample: judging until the commit has been
		// watched for the commit interval.
		want: [][]span{{{0, 4, JUDGING}, {5, 60, STALLED}}},
	}, {
		name: "slow consumer", parts: 1, rate: 8,
		setup: func(w *world) { w.parts[0].produce = 10 },
		// 10 in, 8 out: the age grows 0.2 s a second and passes 15 s at 80 s.
		want: [][]span{{{0, 79, OK}, {80, 120, LAGGING}}},
	}, {
		name: "consumer working through backlog partition by partition", parts: 2, rate: 100,
		setup: func(w *world) {
			for _, p := range w.parts {
				old(p, 950, 0)
				p.committed = 0
			}
		},
		// p0 drains first (catching up: OK once it is seen to move); p1
		// waits its turn: LAGGING, not STALLED, because its owner is busy
		// on p0's backlog; it starts at 9 s and catches up.
		want: [][]span{
			{{0, 0, JUDGING}, {1, 40, OK}},
			{{0, 4, JUDGING}, {5, 8, LAGGING}, {9, 40, OK}},
		},
	}, {
		name: "rebalance shorter than the steady age", parts: 1, rate: 100,
		setup: func(w *world) { w.parts[0].produce = 10 },
		at: func(sec int, w *world) {
			switch sec {
			case 30:
				w.parts[0].owner = "" // revoked
			case 38:
				w.parts[0].owner = "m2" // assigned again
			}
		},
		want: [][]span{{{0, 60, OK}}},
	}, {
		name: "consumer restart", parts: 1, rate: 100,
		setup: func(w *world) { w.parts[0].produce = 10 },
		at: func(sec int, w *world) {
			switch sec {
			case 30:
				w.parts[0].owner = "" // the group goes Empty
			case 70:
				w.parts[0].owner = "m2"
			}
		},
		// Nobody consumes from 30 s: STOPPED once the age passes the
		// steady age, OK as soon as the restarted member catches up.
		want: [][]span{{{0, 45, OK}, {46, 69, STOPPED}, {70, 90, OK}}},
	}, {
		name: "rewind (offset reset to the start)", parts: 1, rate: 100,
		setup: func(w *world) { w.parts[0].produce = 10 },
		at: func(sec int, w *world) {
			if sec == 30 {
				w.parts[0].committed = 0
			}
		},
		// 300 records to replay at 100/s: back at 300 after 32 s.
		want: [][]span{{{0, 29, OK}, {30, 31, REWIND}, {32, 60, OK}}},
	}, {
		name: "expiry past retention", parts: 1, rate: 100,
		setup: func(w *world) {
			old(w.parts[0], 200, 0)
			w.parts[0].committed, w.parts[0].stuck, w.parts[0].produce = 50, true, 1
		},
		at: func(sec int, w *world) {
			if sec == 20 {
				w.parts[0].logStart = 100 // retention deletes the first segment
			}
		},
		want: [][]span{{{0, 4, JUDGING}, {5, 19, STALLED}, {20, 40, EXPIRED}}},
	}, {
		name: "group goes Empty after the producer stopped", parts: 1, rate: 100,
		setup: func(w *world) { w.parts[0].produce = 10 },
		at: func(sec int, w *world) {
			switch sec {
			case 20:
				w.parts[0].produce = 0
			case 30:
				w.parts[0].owner = ""
			}
		},
		// Nothing left to read: never an alarm.
		want: [][]span{{{0, 90, OK}}},
	}, {
		name: "group goes Empty while traffic continues", parts: 1, rate: 100,
		setup: func(w *world) { w.parts[0].produce = 10 },
		at: func(sec int, w *world) {
			if sec == 30 {
				w.parts[0].owner = ""
			}
		},
		want: [][]span{{{0, 45, OK}, {46, 150, STOPPED}}},
	}, {
		name: "partition added", parts: 2, rate: 100,
		setup: func(w *world) {
			w.parts[0].produce = 10
			w.parts[1].born, w.parts[1].owner, w.parts[1].committed = 30, "", NoCommit
		},
		at: func(sec int, w *world) {
			switch sec {
			case 30:
				w.parts[1].produce = 10
			case 45:
				w.parts[1].owner = "m1" // the consumer's metadata refresh finds it
			}
		},
		// No commit and no owner for 15 s: the backlog stays within the
		// steady age, so no alarm, and the member reads it from the start.
		want: [][]span{{{0, 60, OK}}, {{30, 60, OK}}},
	}, {
		name: "burst then idle", parts: 1, rate: 50,
		setup: func(w *world) { w.parts[0].produce = 1 },
		at: func(sec int, w *world) {
			switch sec {
			case 10:
				w.parts[0].add(t0.Add(10*time.Second), 2000)
			case 60:
				w.parts[0].produce = 0
			}
		},
		// Every burst record carries 10 s: the oldest unprocessed one ages
		// while 50/s drain 2,000, LAGGING from its 16th second to the end
		// of the drain at 50 s.
		want: [][]span{{{0, 25, OK}, {26, 49, LAGGING}, {50, 90, OK}}},
	}, {
		name: "producer clock a minute ahead, then a stall", parts: 1, rate: 100,
		setup: func(w *world) { w.parts[0].produce, w.parts[0].ahead = 10, time.Minute },
		at: func(sec int, w *world) {
			if sec == 30 {
				w.parts[0].stuck = true
			}
		},
		// The timestamps read a minute young (age 0 and clock_skew while
		// they are in the future), but the record has waited since 30 s by
		// Berth's clock: STALLED at 46 s as with honest clocks, not a
		// minute late.
		want: [][]span{{{0, 45, OK}, {46, 100, STALLED}}},
	}, {
		name: "caught-up partition stuck beside a busy one of the same owner", parts: 2, rate: 100,
		setup: func(w *world) {
			w.parts[0].produce, w.parts[1].produce = 10, 10
		},
		at: func(sec int, w *world) {
			if sec == 30 {
				w.parts[1].stuck = true
			}
		},
		// The owner keeps p0 caught up: p1 is poisoned, not waiting.
		want: [][]span{{{0, 100, OK}}, {{0, 45, OK}, {46, 100, STALLED}}},
	}}
	cfg := NewEvaluator(Config{})
	for _, inc := range incidents {
		t.Run(inc.name, func(t *testing.T) {
			w := &world{rate: inc.rate}
			for range inc.parts {
				w.parts = append(w.parts, &simPart{owner: "m1"})
			}
			if inc.setup != nil {
				inc.setup(w)
			}
			last := 0
			for _, spans := range inc.want {
				last = max(last, spans[len(spans)-1].to)
			}
			for sec := 0; sec <= last; sec++ {
				now := t0.Add(time.Duration(sec) * time.Second)
				if inc.at != nil {
					inc.at(sec, w)
				}
				for _, p := range w.parts {
					if sec >= p.born {
						p.add(now, p.produce)
					}
				}
				w.consume()
				var rows []PartitionLag
				var idx []int
				for i, p := range w.parts {
					if sec < p.born {
						continue
					}
					switch {
					case p.since.IsZero():
						p.since = now
					case p.hist[len(p.hist)-1].Committed != p.committed:
						p.since, p.changed = now, true
					}
					in := PartitionInput{Topic: Intern("orders"), Partition: int32(i), Committed: p.committed,
						LogStart: p.logStart, End: p.end(), History: p.hist, Owner: Intern(p.owner),
						CommitSince: p.since, CommitChanged: p.changed}
					if pos := Position(p.committed, p.logStart); pos < p.end() {
						in.Probe = Probe{Known: true, Found: true, Timestamp: p.stamps[pos], Type: backends.CreateTime}
					}
					rows = append(rows, cfg.Evaluate(in, now))
					idx = append(idx, i)
				}
				g := RollUp(GroupInfo{Name: "g"}, rows, Config{})
				for ri, r := range g.Partitions {
					p := w.parts[idx[ri]]
					want, ok := expected(inc.want[idx[ri]], sec)
					if !ok {
						t.Fatalf("at %ds partition %d: no expected status", sec, idx[ri])
					}
					if r.Status != want {
						t.Fatalf("at %ds partition %d: %s, want %s (lag %d, age %s, committed %d, end %d)",
							sec, idx[ri], r.Status, want, r.Lag, r.Age, r.Committed, r.End)
					}
					p.hist = append(p.hist, Sample{At: now, Committed: p.committed, LogStart: p.logStart, End: p.end(), Age: r.Age, AgeKnown: r.AgeKnown})
				}
			}
		})
	}
}

// expected is the status a partition's spans give at sec (false when no
// span covers it).
func expected(spans []span, sec int) (Status, bool) {
	for _, s := range spans {
		if sec >= s.from && sec <= s.to {
			return s.want, true
		}
	}
	return 0, false
}
