package actions

import (
	"math/rand"
	"testing"

	"github.com/berth-dev/berth/redrive"
)

// TestPickedRecordsComeOutInDLQOrderOnce: records arriving interleaved
// across partitions (as a read of several partitions delivers them), into
// a reserved slice, past its end (--all beside --offsets), or in blocks,
// come out in (partition, offset) order with each coordinate once, and
// every record's own fields travel with it.
func TestPickedRecordsComeOutInDLQOrderOnce(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, tc := range []struct {
		name    string
		reserve int64
		n       int
		dups    int
	}{
		{"blocks", 0, 20000, 0},
		{"reserved", 20000, 20000, 0},
		{"reserved, then more", 15000, 20000, 300},
		{"one record", 1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in []redrive.PlanRecord
			next := map[int32]int64{}
			for i := 0; i < tc.n; i++ {
				p := int32(rng.Intn(6))
				in = append(in, redrive.PlanRecord{Partition: p, Offset: next[p], EventID: eventOf(p, next[p])})
				next[p]++
			}
			for i := 0; i < tc.dups; i++ { // the same record named twice
				in = append(in, in[rng.Intn(len(in))])
			}
			var picked pickedRecords
			picked.reserve(tc.reserve)
			for _, r := range in {
				picked.add(r)
			}
			out := picked.sorted()
			if len(out) != tc.n {
				t.Fatalf("%d records out, want %d", len(out), tc.n)
			}
			for i, r := range out {
				if i > 0 && !out[i-1].Coord().Before(r.Coord()) {
					t.Fatalf("record %d (%v) is not after %v", i, r.Coord(), out[i-1].Coord())
				}
				if r.EventID != eventOf(r.Partition, r.Offset) {
					t.Fatalf("record %v carries event %q: fields were separated from their record", r.Coord(), r.EventID)
				}
			}
		})
	}
}

func eventOf(p int32, o int64) string { return redrive.Coord{Partition: p, Offset: o}.String() }
