package actions

import (
	"cmp"
	"slices"

	"github.com/berth-dev/berth/redrive"
)

// SentValues is the SHA-256 of the value of every record a run sent, by
// DLQ coordinates: the read-back compares the copies with them without
// reading those DLQ records again (KafkaRedrive.VerifySent). It is a slice
// sorted on first look-up, 48 bytes a record where a map took about twice
// that (a million-record run has 512 MiB in all). Not safe for concurrent
// use. The zero value is empty.
type SentValues struct {
	vs     []sentValue
	sorted bool
}

type sentValue struct {
	at  redrive.Coord
	sum [32]byte
}

// newSentValues has room for n values (the records a run may send).
func newSentValues(n int) *SentValues {
	return &SentValues{vs: make([]sentValue, 0, n), sorted: true}
}

// add records the value hash of a record the run sent (once: a run sends a
// record once).
func (s *SentValues) add(c redrive.Coord, sum [32]byte) {
	if n := len(s.vs); n > 0 && s.sorted && compareCoord(s.vs[n-1].at, c) >= 0 {
		s.sorted = false
	}
	s.vs = append(s.vs, sentValue{c, sum})
}

// Set records the value hash of the record at c, replacing any it had.
func (s *SentValues) Set(c redrive.Coord, sum [32]byte) {
	s.sort()
	i, ok := s.search(c)
	if ok {
		s.vs[i].sum = sum
		return
	}
	s.vs = slices.Insert(s.vs, i, sentValue{c, sum})
}

// Get is the value hash of the record at c, if it was sent.
func (s *SentValues) Get(c redrive.Coord) ([32]byte, bool) {
	if s == nil {
		return [32]byte{}, false
	}
	s.sort()
	if i, ok := s.search(c); ok {
		return s.vs[i].sum, true
	}
	return [32]byte{}, false
}

// Len is how many records have a value hash.
func (s *SentValues) Len() int {
	if s == nil {
		return 0
	}
	return len(s.vs)
}

// Clone is a copy that Set does not share.
func (s *SentValues) Clone() *SentValues {
	if s == nil {
		return nil
	}
	return &SentValues{vs: slices.Clone(s.vs), sorted: s.sorted}
}

func (s *SentValues) search(c redrive.Coord) (int, bool) {
	return slices.BinarySearchFunc(s.vs, c, func(v sentValue, c redrive.Coord) int { return compareCoord(v.at, c) })
}

// sort orders the values by coordinates (a run sends in its own order,
// which is the DLQ's only when the DLQ keeps the original partitions).
func (s *SentValues) sort() {
	if !s.sorted {
		slices.SortFunc(s.vs, func(a, b sentValue) int { return compareCoord(a.at, b.at) })
		s.sorted = true
	}
}

func compareCoord(a, b redrive.Coord) int {
	return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
}
