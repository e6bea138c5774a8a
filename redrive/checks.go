package redrive

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"time"
)

// Reason says why a record is excluded from a redrive.
type Reason string

// The reasons, in the order the checks run: the first one that applies is
// the one reported.
const (
	ReasonAlreadyRedriven = Reason("already_redriven")        // 1. ledger
	ReasonMissingKey      = Reason("missing_idempotency_key") // 2. system of record
	ReasonEffectCommitted = Reason("effect_committed")        // 2.
	ReasonCheckFailed     = Reason("check_failed")            // any check that could not run
	ReasonLoopLimit       = Reason("loop_limit")              // 5. loop guard
	ReasonDuplicate       = Reason("duplicate")               // 4. duplicates
	ReasonOrderingHazard  = Reason("ordering_hazard")         // 3. ordering
)

// Reasons lists every reason, for totals.
var Reasons = []Reason{ReasonAlreadyRedriven, ReasonEffectCommitted, ReasonOrderingHazard, ReasonDuplicate, ReasonLoopLimit, ReasonMissingKey, ReasonCheckFailed}

// DefaultMaxRedrives is the loop guard's limit when a policy sets none.
const DefaultMaxRedrives = 3

// Candidate is what the checks need to know about one selected record.
type Candidate struct {
	Coord
	EventID        string
	IdempotencyKey string
	Key            []byte
	KeyNull        bool
	// Origin is where the record last failed (the redrive target unless the
	// plan names another); Origin.Located() is needed for the ordering scan.
	Origin        Origin
	PriorRedrives int
	// Target is where the record would go ("" when nowhere: blocked).
	Target string
}

// Verdict is one record's check result.
type Verdict struct {
	Included bool   `json:"included"`
	Reason   Reason `json:"reason,omitempty"`
	Detail   string `json:"detail,omitempty"`
	// NewerOffset is the offset of the newer same-key record on the original
	// partition (ordering hazards; also set when the plan allows hazards).
	NewerOffset *int64 `json:"newer_offset,omitempty"`
}

func include() Verdict { return Verdict{Included: true} }

func exclude(r Reason, format string, a ...any) Verdict {
	return Verdict{Reason: r, Detail: fmt.Sprintf(format, a...)}
}

// LedgerEntry records that a DLQ record was redriven (or settled by an
// operator without redriving). The executor writes one per record in the
// same transaction as the redriven copy.
type LedgerEntry struct {
	DLQ             string    `json:"dlq"`
	Partition       int32     `json:"partition"`
	Offset          int64     `json:"offset"`
	EventID         string    `json:"event_id,omitempty"`
	Action          string    `json:"action"` // LedgerRedriven or LedgerSettled
	Plan            string    `json:"plan"`
	Target          string    `json:"target,omitempty"`
	TargetPartition int32     `json:"target_partition"`
	TargetOffset    int64     `json:"target_offset"`
	Attempt         int       `json:"attempt"`
	By              string    `json:"by,omitempty"`
	At              time.Time `json:"at"`
}

// Ledger actions.
const (
	LedgerRedriven = "redriven"
	LedgerSettled  = "settled"
)

// LedgerIndex answers "was this record already redriven?" by DLQ
// coordinates (for one DLQ) and by event id (across the whole ledger: an
// event redriven from another DLQ was redriven all the same).
type LedgerIndex struct {
	ByCoord   map[Coord]LedgerEntry
	ByEventID map[string]LedgerEntry
}

// NewLedgerIndex indexes the ledger entries relevant to dlq.
func NewLedgerIndex(dlq string, entries []LedgerEntry) LedgerIndex {
	ix := LedgerIndex{ByCoord: map[Coord]LedgerEntry{}, ByEventID: map[string]LedgerEntry{}}
	for _, e := range entries {
		if e.DLQ == dlq {
			ix.ByCoord[Coord{e.Partition, e.Offset}] = e
		}
		if e.EventID != "" && e.Action == LedgerRedriven {
			ix.ByEventID[e.EventID] = e
		}
	}
	return ix
}

// Done reports whether a DLQ coordinate is redriven or settled (depth).
func (ix LedgerIndex) Done(c Coord) bool { _, ok := ix.ByCoord[c]; return ok }

// Candidates is the checks' input read one record at a time, so a plan's
// records are checked where they are instead of through a second full copy
// as []Candidate (PlanRecords reads a plan's, CandidateSlice a slice's).
type Candidates interface {
	Len() int
	At(i int) Candidate
}

// Verdicts is where Run writes each candidate's verdict, by index
// (PlanRecords writes into a plan's records, VerdictSlice into a slice).
type Verdicts interface {
	Verdict(i int) Verdict
	SetVerdict(i int, v Verdict)
}

// CandidateSlice reads candidates from a slice.
type CandidateSlice []Candidate

func (s CandidateSlice) Len() int           { return len(s) }
func (s CandidateSlice) At(i int) Candidate { return s[i] }

// VerdictSlice holds verdicts in a slice.
type VerdictSlice []Verdict

func (s VerdictSlice) Verdict(i int) Verdict       { return s[i] }
func (s VerdictSlice) SetVerdict(i int, v Verdict) { s[i] = v }

// PlanRecords reads a plan's records as candidates and writes the verdicts
// into them.
type PlanRecords []PlanRecord

func (rs PlanRecords) Len() int                    { return len(rs) }
func (rs PlanRecords) At(i int) Candidate          { return rs[i].Candidate() }
func (rs PlanRecords) Verdict(i int) Verdict       { return rs[i].Verdict }
func (rs PlanRecords) SetVerdict(i int, v Verdict) { rs[i].Verdict = v }

// excluder receives a check's exclusions: a check calls it only for the
// records it excludes (or, for the ordering check, flags), never for the
// ones it lets through, so a run holds one verdict per record, not one per
// record per check.
type excluder func(i int, v Verdict)

// isActive reports whether record i is still included (active nil: all).
func isActive(active []bool, i int) bool { return active == nil || active[i] }

// verdictsOf runs a check over every candidate of a slice, for the
// slice-in, slice-out form of each check.
func checkAll(cs []Candidate, check func(Candidates, excluder)) []Verdict {
	out := make([]Verdict, len(cs))
	for i := range out {
		out[i] = include()
	}
	check(CandidateSlice(cs), func(i int, v Verdict) { out[i] = v })
	return out
}

// CheckLedger is check 1: a record already redriven, by DLQ coordinates or
// by event id, is excluded.
func CheckLedger(cs []Candidate, ix LedgerIndex) []Verdict {
	return checkAll(cs, func(cs Candidates, ex excluder) { checkLedger(cs, nil, ix, ex) })
}

func checkLedger(cs Candidates, active []bool, ix LedgerIndex, ex excluder) {
	if len(ix.ByCoord) == 0 && len(ix.ByEventID) == 0 {
		return
	}
	for i := range cs.Len() {
		if !isActive(active, i) {
			continue
		}
		c := cs.At(i)
		if e, ok := ix.ByCoord[c.Coord]; ok {
			ex(i, exclude(ReasonAlreadyRedriven, "%s by plan %s at %s", e.Action, ShortHash(e.Plan), e.At.UTC().Format(time.RFC3339)))
		} else if e, ok := ix.ByEventID[c.EventID]; ok && c.EventID != "" {
			ex(i, exclude(ReasonAlreadyRedriven, "event %s redriven from %s %d:%d by plan %s", c.EventID, e.DLQ, e.Partition, e.Offset, ShortHash(e.Plan)))
		}
	}
}

// SOR is the system-of-record input to check 2.
type SOR struct {
	// Configured is true when the policy names a system of record.
	Configured bool
	// RequireKey blocks records without an idempotency key.
	RequireKey bool
	// Committed holds the keys whose effect the system of record reports as
	// already committed; every key looked up is present (false: not found).
	Committed map[string]bool
	// Err is set when the lookup could not be made or failed: every record
	// that needed it is blocked (check_failed), never read as "not applied".
	Err error
}

// CheckSystemOfRecord is check 2: a record without an idempotency key is
// blocked when the policy requires one (or when a system of record must be
// asked and there is nothing to ask with); a record whose effect already
// committed is excluded; a failed lookup blocks.
func CheckSystemOfRecord(cs []Candidate, s SOR) []Verdict {
	return checkAll(cs, func(cs Candidates, ex excluder) { checkSystemOfRecord(cs, nil, s, ex) })
}

// NoKeyNote ends every missing_idempotency_key detail: a key that clients
// could read two ways counts as none (Field.Extract).
const NoKeyNote = "(absent, or ambiguous: a repeated header or JSON key, or content after the JSON)"

func checkSystemOfRecord(cs Candidates, active []bool, s SOR, ex excluder) {
	if !s.Configured && !s.RequireKey {
		return
	}
	// The verdicts that say the same for every record they apply to are
	// made once and shared.
	required := exclude(ReasonMissingKey, "the policy requires an idempotency key; this record has none "+NoKeyNote)
	noKey := exclude(ReasonMissingKey, "no idempotency key to look up in the system of record "+NoKeyNote)
	var failed Verdict
	if s.Err != nil {
		failed = exclude(ReasonCheckFailed, "system of record: %v", s.Err)
	}
	for i := range cs.Len() {
		if !isActive(active, i) {
			continue
		}
		key := cs.At(i).IdempotencyKey
		switch {
		case key == "" && s.RequireKey:
			ex(i, required)
		case !s.Configured:
		case key == "":
			ex(i, noKey)
		case s.Err != nil:
			ex(i, failed)
		default:
			committed, asked := s.Committed[key]
			switch {
			case !asked:
				ex(i, exclude(ReasonCheckFailed, "system of record: key %s was not looked up", key))
			case committed:
				ex(i, exclude(ReasonEffectCommitted, "the system of record has key %s: its effect already committed", key))
			}
		}
	}
}

// KeysToLookUp returns the distinct idempotency keys of candidates, sorted.
func KeysToLookUp(cs []Candidate) []string {
	return keysToLookUp(CandidateSlice(cs), nil)
}

// keysToLookUp sorts the keys and drops repeats in place rather than
// indexing them in a set: one string header per record, no map.
func keysToLookUp(cs Candidates, active []bool) []string {
	var out []string
	for i := range cs.Len() {
		if k := cs.At(i).IdempotencyKey; k != "" && isActive(active, i) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Clip(slices.Compact(out))
}

// CheckLoop is check 5: a record already redriven max times or more is
// blocked (max <= 0 means DefaultMaxRedrives).
func CheckLoop(cs []Candidate, max int) []Verdict {
	return checkAll(cs, func(cs Candidates, ex excluder) { checkLoop(cs, nil, max, ex) })
}

func checkLoop(cs Candidates, active []bool, max int, ex excluder) {
	if max <= 0 {
		max = DefaultMaxRedrives
	}
	for i := range cs.Len() {
		if !isActive(active, i) {
			continue
		}
		if n := cs.At(i).PriorRedrives; n >= max {
			ex(i, exclude(ReasonLoopLimit, "already redriven %d time(s); the limit is %d", n, max))
		}
	}
}

// CheckDuplicates is check 4: among the records still included, the same
// event id more than once is redriven once — the first in DLQ order
// (partition, offset) goes, the others are excluded naming it.
func CheckDuplicates(cs []Candidate, included []bool) []Verdict {
	return checkAll(cs, func(cs Candidates, ex excluder) { checkDuplicates(cs, included, ex) })
}

// dupEntry is one included record with an event id: the id's hash and the
// record's index.
type dupEntry struct {
	hash uint64
	idx  int32
}

// checkDuplicates sorts 16-byte (hash, index) entries instead of indexing
// event ids in a map and sorting every record by coordinates: records are
// read again (At) only where two hashes are equal, which is where the
// duplicates are, and DLQ order is worked out only among those.
func checkDuplicates(cs Candidates, active []bool, ex excluder) {
	n := 0
	for i := range cs.Len() {
		if isActive(active, i) && cs.At(i).EventID != "" {
			n++
		}
	}
	if n < 2 {
		return
	}
	seed := maphash.MakeSeed()
	es := make([]dupEntry, 0, n)
	for i := range cs.Len() {
		if !isActive(active, i) {
			continue
		}
		if id := cs.At(i).EventID; id != "" {
			es = append(es, dupEntry{hashString(seed, id), int32(i)})
		}
	}
	slices.SortFunc(es, func(a, b dupEntry) int {
		if a.hash != b.hash {
			return cmp.Compare(a.hash, b.hash)
		}
		ca, cb := cs.At(int(a.idx)).Coord, cs.At(int(b.idx)).Coord
		switch {
		case ca.Before(cb):
			return -1
		case cb.Before(ca):
			return 1
		}
		return cmp.Compare(a.idx, b.idx)
	})
	for lo := 0; lo < len(es); {
		hi := lo + 1
		for hi < len(es) && es[hi].hash == es[lo].hash {
			hi++
		}
		if hi-lo > 1 {
			dedupRun(cs, es[lo:hi], ex)
		}
		lo = hi
	}
}

// dedupRun excludes all but the first (in DLQ order) of each event id in
// a run of equal hashes (one id, unless two ids' hashes collide).
func dedupRun(cs Candidates, run []dupEntry, ex excluder) {
	var first map[string]Coord // only when ids collide
	c0 := cs.At(int(run[0].idx))
	for _, e := range run[1:] {
		c := cs.At(int(e.idx))
		if first == nil && c.EventID == c0.EventID {
			ex(int(e.idx), exclude(ReasonDuplicate, "event %s is also at %s, which is redriven instead", c.EventID, c0.Coord))
			continue
		}
		if first == nil {
			first = map[string]Coord{c0.EventID: c0.Coord}
		}
		if f, ok := first[c.EventID]; ok {
			ex(int(e.idx), exclude(ReasonDuplicate, "event %s is also at %s, which is redriven instead", c.EventID, f))
			continue
		}
		first[c.EventID] = c.Coord
	}
}

func less(a, b Coord) bool { return a.Before(b) }

// testHash, when set (by tests only), replaces the hash of keys and event
// ids, so that tests can make different ones collide.
var testHash func([]byte) uint64

func hashBytes(seed maphash.Seed, b []byte) uint64 {
	if testHash != nil {
		return testHash(b)
	}
	return maphash.Bytes(seed, b)
}

func hashString(seed maphash.Seed, s string) uint64 {
	if testHash != nil {
		return testHash([]byte(s))
	}
	return maphash.String(seed, s)
}

// ScanRange is one original partition the ordering scan must read, from
// From (the lowest original offset + 1 among the candidates on it).
type ScanRange struct {
	Topic     string
	Partition int32
	From      int64
}

// OrderingScan is check 3 as a streaming matcher: the backend reads each
// range and calls Observe for every record, then Finish; the matcher keeps
// only what it needs of the candidates (no keys: their hashes), so memory
// does not grow with the partition, and about 40 bytes per candidate.
type OrderingScan struct {
	cands Candidates
	seed  maphash.Seed
	parts map[tpKey]*scanPart
	// last is the partition Observe was last called for: records arrive a
	// partition at a time, so most calls skip the map.
	lastTP   tpKey
	lastPart *scanPart
	// unlocated are the candidates with a key whose origin is unknown.
	unlocated []int32
	// IgnorePlan names a plan whose own redriven copies the backend skips
	// (records carrying HeaderPlan = IgnorePlan): when an interrupted
	// execution resumes, the copies it already sent are no hazard — the plan
	// sends same-key records in their original order itself.
	IgnorePlan string
}

type tpKey struct {
	topic     string
	partition int32
}

// scanPart is one original partition's candidates.
type scanPart struct {
	// redriven holds the origin offsets of every candidate on it, sorted: a
	// newer record that is itself being redriven (after this one, in order)
	// is no hazard.
	redriven []int64
	// keyed holds the candidates with a key, sorted by key hash then origin
	// offset, so the candidates of one key are a run found by binary search.
	keyed []scanEntry
	end   scanEnd
	done  bool // Finish was called
}

// scanEntry is one keyed candidate on an original partition.
type scanEntry struct {
	hash  uint64 // of the key
	off   int64  // origin offset
	newer int64  // the first newer same-key offset observed; -1: none
	idx   int32  // the candidate's index
	// set, in the first entry of a run of equal hashes, counts the run's
	// entries whose newer is set (they are always its first ones: a record
	// newer than one candidate is newer than every older one of its key), so
	// a key with many candidates costs each observed record only the ones
	// it sets. -1: the run holds two keys (their hashes collide), and each
	// entry is compared with the record's key.
	set int32
}

type scanEnd struct {
	complete bool
	err      string
	to       int64
}

// NewOrderingScan prepares the scan for candidates; active says which are
// still included after the other checks (only they need scanning).
func NewOrderingScan(cs []Candidate, active []bool) *OrderingScan {
	return newOrderingScan(CandidateSlice(cs), active)
}

func newOrderingScan(cs Candidates, active []bool) *OrderingScan {
	s := &OrderingScan{cands: cs, seed: maphash.MakeSeed(), parts: map[tpKey]*scanPart{}}
	// Count first, so each partition's arrays are made at their size
	// rather than grown (a grown array holds up to twice what it needs).
	type counts struct{ all, keyed int }
	n := map[tpKey]*counts{}
	for i := range cs.Len() {
		if !isActive(active, i) {
			continue
		}
		c := cs.At(i)
		if !c.Origin.Located() {
			if !c.KeyNull {
				s.unlocated = append(s.unlocated, int32(i))
			}
			continue
		}
		tp := tpKey{c.Origin.Topic, c.Origin.Partition}
		k := n[tp]
		if k == nil {
			k = &counts{}
			n[tp] = k
		}
		k.all++
		if !c.KeyNull {
			k.keyed++
		}
	}
	for tp, k := range n {
		s.parts[tp] = &scanPart{redriven: make([]int64, 0, k.all), keyed: make([]scanEntry, 0, k.keyed)}
	}
	for i := range cs.Len() {
		if !isActive(active, i) {
			continue
		}
		c := cs.At(i)
		if !c.Origin.Located() {
			continue
		}
		p := s.part(c.Origin.Topic, c.Origin.Partition)
		p.redriven = append(p.redriven, c.Origin.Offset)
		if !c.KeyNull {
			p.keyed = append(p.keyed, scanEntry{hash: hashBytes(s.seed, c.Key), off: c.Origin.Offset, newer: -1, idx: int32(i)})
		}
	}
	for _, p := range s.parts {
		slices.Sort(p.redriven)
		slices.SortFunc(p.keyed, func(a, b scanEntry) int {
			if a.hash != b.hash {
				return cmp.Compare(a.hash, b.hash)
			}
			if a.off != b.off {
				return cmp.Compare(a.off, b.off)
			}
			return cmp.Compare(a.idx, b.idx)
		})
		for lo := 0; lo < len(p.keyed); {
			hi := lo + 1
			for hi < len(p.keyed) && p.keyed[hi].hash == p.keyed[lo].hash {
				hi++
			}
			if hi-lo > 1 {
				key := cs.At(int(p.keyed[lo].idx)).Key
				for _, e := range p.keyed[lo+1 : hi] {
					if !bytes.Equal(cs.At(int(e.idx)).Key, key) {
						p.keyed[lo].set = -1
						break
					}
				}
			}
			lo = hi
		}
	}
	return s
}

func (s *OrderingScan) part(topic string, partition int32) *scanPart {
	if s.lastPart != nil && s.lastTP.partition == partition && s.lastTP.topic == topic {
		return s.lastPart
	}
	tp := tpKey{topic, partition}
	p := s.parts[tp]
	if p != nil {
		s.lastTP, s.lastPart = tp, p
	}
	return p
}

// Ranges lists what to read, sorted by topic and partition.
func (s *OrderingScan) Ranges() []ScanRange {
	out := make([]ScanRange, 0, len(s.parts))
	for tp, p := range s.parts {
		out = append(out, ScanRange{Topic: tp.topic, Partition: tp.partition, From: p.redriven[0] + 1})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Observe feeds one record read from an original partition.
func (s *OrderingScan) Observe(topic string, partition int32, offset int64, key []byte) {
	p := s.part(topic, partition)
	if p == nil || len(p.keyed) == 0 {
		return
	}
	if _, redriven := slices.BinarySearch(p.redriven, offset); redriven {
		return
	}
	h := hashBytes(s.seed, key)
	lo, _ := slices.BinarySearchFunc(p.keyed, h, func(e scanEntry, h uint64) int { return cmp.Compare(e.hash, h) })
	if lo == len(p.keyed) || p.keyed[lo].hash != h {
		return
	}
	head := &p.keyed[lo]
	if head.set < 0 {
		for j := lo; j < len(p.keyed) && p.keyed[j].hash == h && p.keyed[j].off < offset; j++ {
			if e := &p.keyed[j]; e.newer < 0 && bytes.Equal(s.cands.At(int(e.idx)).Key, key) {
				e.newer = offset // the first newer one is the one it would arrive behind
			}
		}
		return
	}
	j := lo + int(head.set)
	if j == len(p.keyed) || p.keyed[j].hash != h || p.keyed[j].off >= offset {
		return // every candidate older than this record already has a newer one
	}
	if !bytes.Equal(s.cands.At(int(head.idx)).Key, key) {
		return // another key with the same hash
	}
	for ; j < len(p.keyed) && p.keyed[j].hash == h && p.keyed[j].off < offset; j++ {
		p.keyed[j].newer = offset // the first newer one is the one it would arrive behind
		head.set++
	}
}

// Finish records how a range's scan ended: complete (read to the end),
// stopped at a bound (scannedTo is the next offset not read), or failed.
func (s *OrderingScan) Finish(topic string, partition int32, complete bool, scannedTo int64, err error) {
	p := s.part(topic, partition)
	if p == nil {
		return // no candidate came from there
	}
	p.end, p.done = scanEnd{complete: complete, to: scannedTo}, true
	if err != nil {
		p.end.err = err.Error()
	}
}

// Verdicts is check 3's result: a candidate with a newer same-key record is
// an ordering hazard (excluded unless allow); one whose partition could not
// be fully scanned, or whose origin is unknown, is blocked (check_failed)
// unless allow — an unread tail might hold a newer record.
func (s *OrderingScan) Verdicts(allow bool) []Verdict {
	out := make([]Verdict, s.cands.Len())
	for i := range out {
		out[i] = include()
	}
	s.verdicts(allow, func(i int, v Verdict) { out[i] = v })
	return out
}

// verdicts reports the candidates check 3 excludes or flags (a hazard the
// plan allows is included, with its newer offset).
func (s *OrderingScan) verdicts(allow bool, ex excluder) {
	if !allow {
		v := exclude(ReasonCheckFailed, "ordering: the record does not say where it came from, so newer records cannot be looked for")
		for _, i := range s.unlocated {
			ex(int(i), v)
		}
	}
	for tp, p := range s.parts {
		var blocked Verdict // one verdict for every candidate left blocked here
		switch {
		case allow:
		case !p.done:
			blocked = exclude(ReasonCheckFailed, "ordering: %s[%d] was not scanned", tp.topic, tp.partition)
		case p.end.err != "":
			blocked = exclude(ReasonCheckFailed, "ordering: scanning %s[%d] failed: %s", tp.topic, tp.partition, p.end.err)
		case !p.end.complete:
			blocked = exclude(ReasonCheckFailed, "ordering: the scan of %s[%d] stopped at its bound at offset %d before the end", tp.topic, tp.partition, p.end.to)
		}
		for _, e := range p.keyed {
			if e.newer < 0 {
				if blocked.Reason != "" {
					ex(int(e.idx), blocked)
				}
				continue
			}
			off := e.newer
			v := Verdict{Included: allow, NewerOffset: &off,
				Detail: fmt.Sprintf("a newer record with the same key is at %s[%d]@%d; the redriven record would arrive behind it", tp.topic, tp.partition, off)}
			if !allow {
				v.Reason = ReasonOrderingHazard
			}
			ex(int(e.idx), v)
		}
	}
}
