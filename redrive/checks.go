package redrive

import (
	"fmt"
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

// CheckLedger is check 1: a record already redriven, by DLQ coordinates or
// by event id, is excluded.
func CheckLedger(cs []Candidate, ix LedgerIndex) []Verdict {
	out := make([]Verdict, len(cs))
	for i, c := range cs {
		out[i] = include()
		if e, ok := ix.ByCoord[c.Coord]; ok {
			out[i] = exclude(ReasonAlreadyRedriven, "%s by plan %s at %s", e.Action, short(e.Plan), e.At.UTC().Format(time.RFC3339))
		} else if e, ok := ix.ByEventID[c.EventID]; ok && c.EventID != "" {
			out[i] = exclude(ReasonAlreadyRedriven, "event %s redriven from %s %d:%d by plan %s", c.EventID, e.DLQ, e.Partition, e.Offset, short(e.Plan))
		}
	}
	return out
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
	out := make([]Verdict, len(cs))
	for i, c := range cs {
		out[i] = include()
		switch {
		case c.IdempotencyKey == "" && s.RequireKey:
			out[i] = exclude(ReasonMissingKey, "the policy requires an idempotency key; this record has none")
		case !s.Configured:
		case c.IdempotencyKey == "":
			out[i] = exclude(ReasonMissingKey, "no idempotency key to look up in the system of record")
		case s.Err != nil:
			out[i] = exclude(ReasonCheckFailed, "system of record: %v", s.Err)
		default:
			committed, asked := s.Committed[c.IdempotencyKey]
			switch {
			case !asked:
				out[i] = exclude(ReasonCheckFailed, "system of record: key %s was not looked up", c.IdempotencyKey)
			case committed:
				out[i] = exclude(ReasonEffectCommitted, "the system of record has key %s: its effect already committed", c.IdempotencyKey)
			}
		}
	}
	return out
}

// KeysToLookUp returns the distinct idempotency keys of candidates, sorted.
func KeysToLookUp(cs []Candidate) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cs {
		if c.IdempotencyKey != "" && !seen[c.IdempotencyKey] {
			seen[c.IdempotencyKey] = true
			out = append(out, c.IdempotencyKey)
		}
	}
	sort.Strings(out)
	return out
}

// CheckLoop is check 5: a record already redriven max times or more is
// blocked (max <= 0 means DefaultMaxRedrives).
func CheckLoop(cs []Candidate, max int) []Verdict {
	if max <= 0 {
		max = DefaultMaxRedrives
	}
	out := make([]Verdict, len(cs))
	for i, c := range cs {
		out[i] = include()
		if c.PriorRedrives >= max {
			out[i] = exclude(ReasonLoopLimit, "already redriven %d time(s); the limit is %d", c.PriorRedrives, max)
		}
	}
	return out
}

// CheckDuplicates is check 4: among the records still included, the same
// event id more than once is redriven once — the first in DLQ order
// (partition, offset) goes, the others are excluded naming it.
func CheckDuplicates(cs []Candidate, included []bool) []Verdict {
	out := make([]Verdict, len(cs))
	order := make([]int, len(cs))
	for i := range order {
		order[i] = i
		out[i] = include()
	}
	sort.SliceStable(order, func(a, b int) bool { return less(cs[order[a]].Coord, cs[order[b]].Coord) })
	first := map[string]Coord{}
	for _, i := range order {
		c := cs[i]
		if !included[i] || c.EventID == "" {
			continue
		}
		if f, ok := first[c.EventID]; ok {
			out[i] = exclude(ReasonDuplicate, "event %s is also at %s, which is redriven instead", c.EventID, f)
			continue
		}
		first[c.EventID] = c.Coord
	}
	return out
}

func less(a, b Coord) bool { return a.Before(b) }

// ScanRange is one original partition the ordering scan must read, from
// From (the lowest original offset + 1 among the candidates on it).
type ScanRange struct {
	Topic     string
	Partition int32
	From      int64
}

// OrderingScan is check 3 as a streaming matcher: the backend reads each
// range and calls Observe for every record, then Finish; the matcher keeps
// only the candidates' keys, so memory does not grow with the partition.
type OrderingScan struct {
	cands  []Candidate
	active []bool
	// byTP maps an original partition to the candidates on it; byKey
	// indexes them by record key, so each observed record costs one map
	// lookup, not a pass over every candidate.
	byTP  map[tpKey][]int
	byKey map[tpKey]map[string][]int
	// origins of the candidates that will be redriven: a newer record that
	// is itself being redriven (after this one, in order) is no hazard.
	redriven map[originKey]bool
	newer    map[int]int64
	result   map[tpKey]scanEnd
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

type originKey struct {
	tpKey
	offset int64
}

type scanEnd struct {
	complete bool
	err      string
	to       int64
}

// NewOrderingScan prepares the scan for candidates; active says which are
// still included after the other checks (only they need scanning).
func NewOrderingScan(cs []Candidate, active []bool) *OrderingScan {
	s := &OrderingScan{cands: cs, active: active, byTP: map[tpKey][]int{}, byKey: map[tpKey]map[string][]int{}, redriven: map[originKey]bool{}, newer: map[int]int64{}, result: map[tpKey]scanEnd{}}
	for i, c := range cs {
		if !active[i] || !c.Origin.Located() {
			continue
		}
		tp := tpKey{c.Origin.Topic, c.Origin.Partition}
		s.byTP[tp] = append(s.byTP[tp], i)
		s.redriven[originKey{tp, c.Origin.Offset}] = true
		if !c.KeyNull {
			if s.byKey[tp] == nil {
				s.byKey[tp] = map[string][]int{}
			}
			s.byKey[tp][string(c.Key)] = append(s.byKey[tp][string(c.Key)], i)
		}
	}
	return s
}

// Ranges lists what to read, sorted by topic and partition.
func (s *OrderingScan) Ranges() []ScanRange {
	out := make([]ScanRange, 0, len(s.byTP))
	for tp, idx := range s.byTP {
		from := int64(-1)
		for _, i := range idx {
			if o := s.cands[i].Origin.Offset + 1; from < 0 || o < from {
				from = o
			}
		}
		out = append(out, ScanRange{Topic: tp.topic, Partition: tp.partition, From: from})
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
	tp := tpKey{topic, partition}
	if s.redriven[originKey{tp, offset}] {
		return
	}
	for _, i := range s.byKey[tp][string(key)] {
		c := s.cands[i]
		if offset <= c.Origin.Offset {
			continue
		}
		if _, seen := s.newer[i]; !seen {
			s.newer[i] = offset // the first newer one is the one it would arrive behind
		}
	}
}

// Finish records how a range's scan ended: complete (read to the end),
// stopped at a bound (scannedTo is the next offset not read), or failed.
func (s *OrderingScan) Finish(topic string, partition int32, complete bool, scannedTo int64, err error) {
	e := scanEnd{complete: complete, to: scannedTo}
	if err != nil {
		e.err = err.Error()
	}
	s.result[tpKey{topic, partition}] = e
}

// Verdicts is check 3's result: a candidate with a newer same-key record is
// an ordering hazard (excluded unless allow); one whose partition could not
// be fully scanned, or whose origin is unknown, is blocked (check_failed)
// unless allow — an unread tail might hold a newer record.
func (s *OrderingScan) Verdicts(allow bool) []Verdict {
	out := make([]Verdict, len(s.cands))
	for i, c := range s.cands {
		out[i] = include()
		if !s.active[i] {
			continue
		}
		if c.KeyNull {
			continue // no key, no per-key order to break
		}
		if !c.Origin.Located() {
			if !allow {
				out[i] = exclude(ReasonCheckFailed, "ordering: the record does not say where it came from, so newer records cannot be looked for")
			}
			continue
		}
		if off, ok := s.newer[i]; ok {
			o := off
			out[i].NewerOffset = &o
			if !allow {
				out[i].Included = false
				out[i].Reason = ReasonOrderingHazard
			}
			out[i].Detail = fmt.Sprintf("a newer record with the same key is at %s[%d]@%d; the redriven record would arrive behind it", c.Origin.Topic, c.Origin.Partition, off)
			continue
		}
		end, ok := s.result[tpKey{c.Origin.Topic, c.Origin.Partition}]
		switch {
		case !ok:
			if !allow {
				out[i] = exclude(ReasonCheckFailed, "ordering: %s[%d] was not scanned", c.Origin.Topic, c.Origin.Partition)
			}
		case end.err != "":
			if !allow {
				out[i] = exclude(ReasonCheckFailed, "ordering: scanning %s[%d] failed: %s", c.Origin.Topic, c.Origin.Partition, end.err)
			}
		case !end.complete:
			if !allow {
				out[i] = exclude(ReasonCheckFailed, "ordering: the scan of %s[%d] stopped at its bound at offset %d before the end", c.Origin.Topic, c.Origin.Partition, end.to)
			}
		}
	}
	return out
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
