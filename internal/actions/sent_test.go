package actions

import (
	"testing"

	"github.com/berth-dev/berth/redrive"
)

// TestEventsSeenNamesTheFirstOfAnEvent: an event id that went out in an
// earlier chunk names the plan record that had it, whichever chunk asks.
func TestEventsSeenNamesTheFirstOfAnEvent(t *testing.T) {
	recs := []redrive.PlanRecord{{Partition: 0, Offset: 1}, {Partition: 0, Offset: 2}, {Partition: 1, Offset: 3}, {Partition: 2, Offset: 4}}
	s := newEventsSeen(recs)
	s.add([]string{"evt-b", "evt-a"}, []int{1, 2})
	s.add([]string{"evt-c"}, []int{0})
	for id, want := range map[string]*redrive.Coord{
		"evt-a": {Partition: 1, Offset: 3}, "evt-b": {Partition: 0, Offset: 2}, "evt-c": {Partition: 0, Offset: 1}, "evt-d": nil, "evt-": nil,
	} {
		got, ok := s.firstOf(id)
		if ok != (want != nil) || (ok && got != *want) {
			t.Errorf("%s: %v %v, want %v", id, got, ok, want)
		}
	}
}

// TestSentValuesLooksUpInAnyOrder: value hashes added in send order (not
// the DLQ's) are found by coordinates; Set replaces one.
func TestSentValuesLooksUpInAnyOrder(t *testing.T) {
	s := newSentValues(4)
	sum := func(b byte) [32]byte { return [32]byte{b} }
	s.add(redrive.Coord{Partition: 1, Offset: 9}, sum(1))
	s.add(redrive.Coord{Partition: 0, Offset: 5}, sum(2))
	s.add(redrive.Coord{Partition: 1, Offset: 2}, sum(3))
	c := s.Clone()
	c.Set(redrive.Coord{Partition: 0, Offset: 5}, sum(9))
	c.Set(redrive.Coord{Partition: 0, Offset: 1}, sum(8))
	for _, tc := range []struct {
		s    *SentValues
		at   redrive.Coord
		want byte // 0: not there
	}{
		{s, redrive.Coord{Partition: 1, Offset: 9}, 1},
		{s, redrive.Coord{Partition: 0, Offset: 5}, 2},
		{s, redrive.Coord{Partition: 1, Offset: 2}, 3},
		{s, redrive.Coord{Partition: 0, Offset: 1}, 0},
		{c, redrive.Coord{Partition: 0, Offset: 5}, 9},
		{c, redrive.Coord{Partition: 0, Offset: 1}, 8},
		{c, redrive.Coord{Partition: 1, Offset: 9}, 1},
		{nil, redrive.Coord{Partition: 1, Offset: 9}, 0},
	} {
		got, ok := tc.s.Get(tc.at)
		if ok != (tc.want != 0) || (ok && got != sum(tc.want)) {
			t.Errorf("%v: %v %v, want %d", tc.at, got[0], ok, tc.want)
		}
	}
	if s.Len() != 3 || c.Len() != 4 {
		t.Errorf("len %d and %d, want 3 and 4", s.Len(), c.Len())
	}
}
