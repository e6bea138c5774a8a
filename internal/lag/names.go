package lag

import "sync"

// Name is a string (a topic, a member id, an error text) interned in a
// process-wide table, so that PartitionLag holds no pointers.
//
// Why: a snapshot of 10,000 partitions x 50 groups holds 500,000 rows. With
// string fields every row is scanned by every garbage collection and every
// write of a row goes through a write barrier; measured, that was about a
// quarter of a cold refresh's CPU. Rows made only of numbers live in memory
// the collector never scans.
//
// The table only grows. What it holds is bounded by what the attached
// clusters name: topics, the member ids of consumer groups (new ones appear
// when members rejoin, a few dozen bytes each) and partition error texts.
// The zero Name is the empty string.
type Name uint32

// names is the table. Lookups take a read lock; interning happens once per
// topic and member per refresh (the monitor interns before it evaluates), not
// once per row.
var names = struct {
	sync.RWMutex
	ids  map[string]Name
	strs []string
}{ids: map[string]Name{"": 0}, strs: []string{""}}

// Intern returns the Name of s, adding it to the table the first time.
func Intern(s string) Name {
	if s == "" {
		return 0
	}
	names.RLock()
	n, ok := names.ids[s]
	names.RUnlock()
	if ok {
		return n
	}
	names.Lock()
	defer names.Unlock()
	if n, ok := names.ids[s]; ok {
		return n
	}
	n = Name(len(names.strs))
	names.strs = append(names.strs, s)
	names.ids[s] = n
	return n
}

// String returns the interned string ("" for a Name never returned by
// Intern).
func (n Name) String() string {
	if n == 0 {
		return ""
	}
	names.RLock()
	defer names.RUnlock()
	if int(n) < len(names.strs) {
		return names.strs[n]
	}
	return ""
}

// MarshalText writes the string, so JSON carries names, not numbers.
func (n Name) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

// UnmarshalText interns the string read.
func (n *Name) UnmarshalText(b []byte) error {
	*n = Intern(string(b))
	return nil
}

// Less orders Names by their strings (equal Names without a lookup).
func (n Name) Less(o Name) bool {
	if n == o {
		return false
	}
	return n.String() < o.String()
}
