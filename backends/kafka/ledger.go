package kafka

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

// LedgerPartitions is how many partitions a new ledger topic gets. Every
// ledger record is keyed (DLQ coordinates, or ev/<event id>) and producers
// place keyed records by Kafka's murmur2 hash, so a look-up reads only the
// partitions its keys hash to: a plan of a few records reads a few
// sixteenths of the ledger, not all of it. The count is fixed at creation
// (adding partitions would move keys); a ledger created with one partition
// by an earlier version keeps working, read whole.
const LedgerPartitions = 16

// eventKeyPrefix keys the event-id index records of the ledger.
const eventKeyPrefix = "ev/"

// ledgerHasher places keys exactly as the producers writing the ledger do
// (kgo's default and sticky-key partitioners hash keyed records this way).
var ledgerHasher = kgo.StickyKeyPartitioner(nil).ForTopic(LedgerTopic)

// ledgerPartition is the partition of n that key is written to.
func ledgerPartition(key string, n int) int32 {
	return int32(ledgerHasher.Partition(&kgo.Record{Key: []byte(key)}, n))
}

// Lookup returns the ledger entries (redriven or settled) for the records
// of dlq at locs ("PARTITION:OFFSET"). It reads only the ledger partitions
// those keys hash to and keeps only the matching entries: memory is sized
// to the plan, never to the ledger.
func (s *PlanStore) Lookup(ctx context.Context, dlq string, locs []string) ([]redrive.LedgerEntry, error) {
	keys := make(map[string]bool, len(locs))
	for _, l := range locs {
		p, o, err := parseLoc(l)
		if err != nil {
			return nil, err
		}
		keys[redrive.FormatOrigin(dlq, p, o)] = true
	}
	if len(keys) == 0 {
		return []redrive.LedgerEntry{}, nil
	}
	found, err := s.lookup(ctx, maps.Keys(keys), func(k string) bool { return keys[k] }, nil)
	if err != nil {
		return nil, err
	}
	out := make([]redrive.LedgerEntry, 0, len(found))
	for k, e := range found {
		if !strings.HasPrefix(k, eventKeyPrefix) {
			out = append(out, e)
		}
	}
	sortEntries(out)
	return out, nil
}

// LookupEach is Lookup for a plan of any size without holding its
// entries: it reads the ledger partitions the keys of dlq's records at
// coords hash to and calls fn, in log order, for every ledger record of a
// coordinate has accepts (e nil: a tombstone, the entry deleted), so the
// last call for a coordinate is its entry. Lookup keeps a map of a
// million keys and entries for a plan of a million records (several
// hundred bytes a record); here the caller keeps what it needs.
func (s *PlanStore) LookupEach(ctx context.Context, dlq string, coords iter.Seq[redrive.Coord], has func(redrive.Coord) bool, fn func(redrive.Coord, *redrive.LedgerEntry)) error {
	n, err := s.ledgerPartitionCount(ctx)
	if err != nil || n == 0 {
		if err == nil && s.pin != nil {
			s.pin.empty()
		}
		return err
	}
	parts := map[int32]bool{}
	for c := range coords {
		parts[ledgerPartition(redrive.FormatOrigin(dlq, c.Partition, c.Offset), n)] = true
		if len(parts) == n {
			break // every partition is read: the rest need not be hashed
		}
	}
	if len(parts) == 0 {
		return nil
	}
	var decodeErr error
	names := map[string]string{}
	err = s.scanPartitions(ctx, LedgerTopic, parts, func(r *kgo.Record) {
		c, ok := coordKey(r.Key, dlq)
		if !ok || !has(c) {
			return
		}
		if r.Value == nil {
			fn(c, nil)
			return
		}
		var e redrive.LedgerEntry
		if err := json.Unmarshal(r.Value, &e); err != nil {
			// A ledger entry that cannot be read must not read as "not
			// redriven": the look-up fails.
			decodeErr = errors.Join(decodeErr, fmt.Errorf("ledger: record %s at offset %d: %v", r.Key, r.Offset, err))
			return
		}
		for _, f := range []*string{&e.DLQ, &e.Plan, &e.Target, &e.Action, &e.By} {
			if v, ok := names[*f]; ok {
				*f = v
			} else {
				names[*f] = *f
			}
		}
		fn(c, &e)
	})
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return decodeErr
}

// coordKey is the DLQ coordinates of a ledger key of dlq's records, as
// redrive.FormatOrigin writes them (decimal, no sign, no leading zero: the
// key Lookup would match), ok false for any other key.
func coordKey(key []byte, dlq string) (redrive.Coord, bool) {
	rest, ok := bytes.CutPrefix(key, []byte(dlq))
	if !ok || len(rest) == 0 || rest[0] != '/' {
		return redrive.Coord{}, false
	}
	ps, os, ok := bytes.Cut(rest[1:], []byte("/"))
	if !ok {
		return redrive.Coord{}, false
	}
	p, ok1 := decimal(ps, 1<<31-1)
	o, ok2 := decimal(os, 1<<63-1)
	if !ok1 || !ok2 {
		return redrive.Coord{}, false
	}
	return redrive.Coord{Partition: int32(p), Offset: o}, true
}

// decimal parses a non-negative decimal of at most limit in its canonical
// form (strconv.FormatInt's).
func decimal(b []byte, limit int64) (int64, bool) {
	if len(b) == 0 || len(b) > 19 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > uint64(limit) {
		return 0, false
	}
	return int64(n), true
}

// LookupEvents returns the redriven ledger entries (from any DLQ) whose
// event id is one of ids, reading only the partitions their ev/<id> keys
// hash to. On a one-partition ledger, entries written before the event
// index existed are matched by the event id inside them. The ids are held
// once each, sorted (a binary search says whether a ledger record is one
// asked about), not as sets of ids and of their keys: a plan of a million
// records asks about a million ids.
func (s *PlanStore) LookupEvents(ctx context.Context, ids []string) ([]redrive.LedgerEntry, error) {
	want := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if len(want) == 0 {
		return []redrive.LedgerEntry{}, nil
	}
	asked := func(id string) bool { _, ok := slices.BinarySearch(want, id); return ok }
	keys := func(yield func(string) bool) {
		for _, id := range want {
			if !yield(eventKeyPrefix + id) {
				return
			}
		}
	}
	isKey := func(k string) bool {
		id, ok := strings.CutPrefix(k, eventKeyPrefix)
		return ok && asked(id)
	}
	found, err := s.lookup(ctx, keys, isKey, asked)
	if err != nil {
		return nil, err
	}
	byEvent := map[string]redrive.LedgerEntry{}
	for _, e := range found {
		if e.Action == redrive.LedgerRedriven && asked(e.EventID) {
			byEvent[e.EventID] = e
		}
	}
	out := make([]redrive.LedgerEntry, 0, len(byEvent))
	for _, e := range byEvent {
		out = append(out, e)
	}
	sortEntries(out)
	return out, nil
}

// lookup reads the ledger partitions keys (at least one) hash to and
// returns the latest entry of each key has accepts (tombstones delete). On a
// one-partition ledger, coordinate records whose event id events accepts
// are kept too (under their own key): entries written before the ev/ index
// existed.
func (s *PlanStore) lookup(ctx context.Context, keys iter.Seq[string], has func(key string) bool, events func(id string) bool) (map[string]redrive.LedgerEntry, error) {
	out := map[string]redrive.LedgerEntry{}
	n, err := s.ledgerPartitionCount(ctx)
	if err != nil {
		return out, err
	}
	if n == 0 {
		if s.pin != nil {
			s.pin.empty()
		}
		return out, nil
	}
	parts := map[int32]bool{}
	for k := range keys {
		parts[ledgerPartition(k, n)] = true
		if len(parts) == n {
			break // every partition is read: the rest need not be hashed
		}
	}
	var decodeErr error
	names := map[string]string{}
	err = s.scanPartitions(ctx, LedgerTopic, parts, func(r *kgo.Record) {
		k := string(r.Key)
		wanted := has(k)
		if !wanted && n == 1 && events != nil && !strings.HasPrefix(k, eventKeyPrefix) && r.Value != nil {
			var ev struct {
				EventID string `json:"event_id"`
			}
			if json.Unmarshal(r.Value, &ev) == nil && events(ev.EventID) {
				wanted = true
			}
		}
		if !wanted {
			return
		}
		if r.Value == nil {
			delete(out, k)
			return
		}
		var e redrive.LedgerEntry
		if err := json.Unmarshal(r.Value, &e); err != nil {
			// A ledger entry that cannot be read must not read as "not
			// redriven": the look-up fails.
			decodeErr = errors.Join(decodeErr, fmt.Errorf("ledger: record %s at offset %d: %v", k, r.Offset, err))
			return
		}
		// A plan's entries repeat its hash, DLQ, target and action: held
		// once, a million entries take a few hundred MB less.
		for _, f := range []*string{&e.DLQ, &e.Plan, &e.Target, &e.Action, &e.By} {
			if v, ok := names[*f]; ok {
				*f = v
			} else {
				names[*f] = *f
			}
		}
		out[k] = e
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	return out, nil
}

// Pinned returns the store with its ledger look-ups (Lookup, LookupEvents)
// bounded to the ledger as it is at the first of them. An execution
// re-checks its records a chunk at a time while it sends; pinned, every
// chunk's look-up reads what the ledger held when the run began (what
// earlier runs and other plans did, as a look-up of the whole plan before
// sending would), never the entries the run itself keeps adding, so the
// look-ups do not grow as it sends. (Those entries are for records of
// earlier chunks, and the executor tracks the event ids it sends.)
func (s *PlanStore) Pinned() *PlanStore {
	c := *s
	c.pin = &ledgerPin{}
	return &c
}

// ledgerPin is the ledger's end offsets at the first pinned look-up.
type ledgerPin struct {
	mu   sync.Mutex
	ends map[int32]int64
}

// bound is the end a pinned read of partition p stops at: every
// partition's end is taken at the first read (parts: the partitions as
// listed now, end: p's end now).
func (l *ledgerPin) bound(parts []backends.Partition, p int32, end int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ends == nil {
		l.ends = map[int32]int64{}
		for _, q := range parts {
			e := q.LastStable
			if e < 0 {
				e = q.HighWatermark
			}
			l.ends[q.Partition] = e
		}
	}
	if pinned := l.ends[p]; pinned < end {
		return pinned // 0 for a partition that did not exist then
	}
	return end
}

// empty pins a ledger that does not exist yet: nothing was redriven when
// the run began.
func (l *ledgerPin) empty() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ends == nil {
		l.ends = map[int32]int64{}
	}
}

// ledgerPartitionCount is the ledger topic's partition count (0 when it
// does not exist yet: nothing was ever redriven).
func (s *PlanStore) ledgerPartitionCount(ctx context.Context) (int, error) {
	fresh, err := s.c.NewKgo()
	if err != nil {
		return 0, err
	}
	defer fresh.Close()
	ts, err := NewCluster(&Client{opts: s.c.opts, cl: fresh, admin: kadm.NewClient(fresh)}).Topics(ctx, LedgerTopic)
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, nil
		}
		return 0, err
	}
	return len(ts[0].Partitions), nil
}

func parseLoc(l string) (int32, int64, error) {
	ps, os, ok := strings.Cut(l, ":")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
		return 0, 0, fmt.Errorf("location %q: want PARTITION:OFFSET", l)
	}
	return int32(p), o, nil
}

// sortEntries orders entries by DLQ, partition and offset.
func sortEntries(es []redrive.LedgerEntry) {
	slices.SortFunc(es, func(a, b redrive.LedgerEntry) int {
		return cmp.Or(cmp.Compare(a.DLQ, b.DLQ), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
}
