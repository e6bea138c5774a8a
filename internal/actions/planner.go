package actions

// The Planner makes and re-checks redrive plans for a Kafka cluster: it
// reads DLQs through the Kafka backend, resolves the redrive policy that
// applies to a DLQ (whatever the context, ad-hoc --bootstrap included),
// queries the system of record through redrive/sor, and runs the pure
// checks in redrive. The CLI and the console both use it; it never writes
// anything but the plan store.

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"os"
	"os/user"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/sor"
)

// Planner ties the pieces together for one cluster.
type Planner struct {
	Cluster KafkaCluster
	Store   KafkaPlanStore
	Config  *config.Config
	// ReadLimit bounds records read per DLQ (0: kafka.DefaultReadLimit).
	ReadLimit int
	// ScanLimit bounds the ordering scan per partition (0: kafka.DefaultScanLimit).
	ScanLimit int64
	// Progress receives ordering-scan progress (optional).
	Progress func(kafka.ScanProgress)
	// Now is the clock (tests set it).
	Now func() time.Time
}

// Policy is the redrive policy resolved for one DLQ.
type Policy struct {
	config.RedrivePolicy
	Matched    bool
	Extractors redrive.Extractors
}

// PolicyFor resolves the policy for a DLQ (the first matching glob), with
// defaults: ids from json:eventId, loop limit redrive.DefaultMaxRedrives.
func (p *Planner) PolicyFor(dlq string) (Policy, error) {
	rp, ok := p.Config.RedrivePolicyFor(dlq)
	pol := Policy{RedrivePolicy: rp, Matched: ok}
	ev, err := redrive.ParseField(rp.EventID)
	if err != nil {
		return Policy{}, fmt.Errorf("redrive policy %q: event_id: %v", rp.Match, err)
	}
	idem, err := redrive.ParseField(rp.IdempotencyKey)
	if err != nil {
		return Policy{}, fmt.Errorf("redrive policy %q: idempotency_key: %v", rp.Match, err)
	}
	pol.Extractors = redrive.Extractors{EventID: ev, IdempotencyKey: idem}
	if pol.MaxRedrives <= 0 {
		pol.MaxRedrives = redrive.DefaultMaxRedrives
	}
	if pol.Review == "" {
		pol.Review = "none"
	}
	return pol, nil
}

// Snapshot is the policy as recorded in a plan (no secrets).
func (pol Policy) Snapshot() redrive.PolicySnapshot {
	s := redrive.PolicySnapshot{
		Match: pol.Match, EventID: pol.Extractors.EventID.String(), IdempotencyKey: pol.Extractors.IdempotencyKey.String(),
		RequireIdempotencyKey: pol.RequireIdempotencyKey, Review: pol.Review,
		Approvals: pol.Approvals, MaxRedrives: pol.MaxRedrives,
	}
	s.SystemOfRecord = sorSnapshot(pol.SystemOfRecord)
	return s
}

// sorSnapshot is a system of record as a plan records it on both backends:
// "driver: query", never its DSN (a plan file is handed around and stored
// for every operator to read).
func sorSnapshot(s *config.SystemOfRecord) string {
	if s == nil {
		return ""
	}
	return s.Driver + ": " + s.Query
}

// Rules are the class rules: the config's first, then the defaults.
func (p *Planner) Rules() (redrive.Rules, error) { return classRules(p.Config) }

func (p *Planner) pairs() []redrive.Pair {
	var out []redrive.Pair
	for _, d := range p.Config.Redrive.DLQs {
		out = append(out, redrive.Pair{DLQ: d.DLQ, Original: d.Original})
	}
	return out
}

func (p *Planner) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// List discovers the DLQs and summarises each: depth, oldest pending age,
// classes and original topics.
func (p *Planner) List(ctx context.Context) ([]redrive.DLQ, error) {
	dlqs, _, err := p.Cluster.DLQs(ctx, p.pairs())
	if err != nil {
		return nil, err
	}
	out := make([]redrive.DLQ, 0, len(dlqs))
	for _, d := range dlqs {
		// Each DLQ streams past, counted (a few dozen bytes a record), and
		// its ledger entries are looked up by the records read (see
		// ledgerFor): what the ledger ever held is never read whole.
		t, err := p.tally(ctx, d.Name, p.ReadLimit)
		if err != nil {
			return nil, err
		}
		out = append(out, t.Summarise(d, t.res.Total, t.res.Complete, t.ledger.Done, p.now()))
	}
	return out, nil
}

// Loaded is one DLQ's records, parsed, with its classes.
type Loaded struct {
	DLQ     string
	Policy  Policy
	Records []redrive.Parsed
	// Pending are the records not yet redriven or settled; Classes group them.
	Pending  []redrive.Parsed
	Classes  []redrive.Class
	Total    int64
	Complete bool
	Ledger   redrive.LedgerIndex
}

// Load reads and classifies a DLQ (at most limit records; 0: ReadLimit).
// The ledger is asked about the records read only (see ledgerFor).
func (p *Planner) Load(ctx context.Context, dlq string, limit int) (Loaded, error) {
	return p.load(ctx, dlq, limit)
}

// ledgerFor returns the ledger entries the checks need for cs: those of
// their coordinates in dlq and those of their event ids in any DLQ, by
// keyed look-ups (KafkaLedger.LookupEach, LookupEvents) that cost what
// the candidates need, not what the ledger ever held. A LedgerIndex built
// from them answers exactly as one built from the whole ledger, for cs.
// The coordinates are matched against the candidates' own (no key string
// or set of them per record): the entries found are all that is kept.
func (p *Planner) ledgerFor(ctx context.Context, dlq string, cs redrive.Candidates) ([]redrive.LedgerEntry, error) {
	if cs.Len() == 0 {
		return nil, nil
	}
	found := map[redrive.Coord]redrive.LedgerEntry{}
	coords := func(yield func(redrive.Coord) bool) {
		for i := range cs.Len() {
			if !yield(cs.At(i).Coord) {
				return
			}
		}
	}
	err := p.Store.LookupEach(ctx, dlq, coords, coordIndex(cs), func(c redrive.Coord, e *redrive.LedgerEntry) {
		if e == nil {
			delete(found, c) // a tombstone: the entry was deleted
		} else {
			found[c] = *e
		}
	})
	if err != nil {
		return nil, err
	}
	withID := 0
	for i := range cs.Len() {
		if cs.At(i).EventID != "" {
			withID++
		}
	}
	ids := make([]string, 0, withID) // none for records read, not planned
	for i := range cs.Len() {
		if id := cs.At(i).EventID; id != "" {
			ids = append(ids, id)
		}
	}
	byEvent, err := p.Store.LookupEvents(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]redrive.LedgerEntry, 0, len(found)+len(byEvent))
	for _, e := range found {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b redrive.LedgerEntry) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return append(out, byEvent...), nil
}

// coordIndex reports whether a coordinate is one of cs's, by binary search:
// over cs itself when it is in DLQ order (a plan's records are), else over
// a sorted copy of the coordinates (16 bytes a record).
func coordIndex(cs redrive.Candidates) func(redrive.Coord) bool {
	n := cs.Len()
	inOrder := true
	for i := 1; i < n && inOrder; i++ {
		inOrder = !cs.At(i).Coord.Before(cs.At(i - 1).Coord)
	}
	if inOrder {
		return func(c redrive.Coord) bool {
			i := sort.Search(n, func(i int) bool { return !cs.At(i).Coord.Before(c) })
			return i < n && cs.At(i).Coord == c
		}
	}
	sorted := make([]redrive.Coord, n)
	for i := range sorted {
		sorted[i] = cs.At(i).Coord
	}
	byCoord := func(a, b redrive.Coord) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	}
	slices.SortFunc(sorted, byCoord)
	return func(c redrive.Coord) bool {
		_, ok := slices.BinarySearchFunc(sorted, c, byCoord)
		return ok
	}
}

// ledgerOf indexes the ledger entries of the records at coords in dlq.
func (p *Planner) ledgerOf(ctx context.Context, dlq string, coords []redrive.Coord) (redrive.LedgerIndex, error) {
	entries, err := p.ledgerFor(ctx, dlq, coordCandidates(coords))
	if err != nil {
		return redrive.LedgerIndex{}, err
	}
	return redrive.NewLedgerIndex(dlq, entries), nil
}

// coordCandidates are records known by their coordinates only, read as
// candidates without a ~200-byte Candidate per record (a DLQ summary reads
// up to a million).
type coordCandidates []redrive.Coord

func (cs coordCandidates) Len() int                   { return len(cs) }
func (cs coordCandidates) At(i int) redrive.Candidate { return redrive.Candidate{Coord: cs[i]} }

// readSetup is what classifying a DLQ's records needs: its policy, the
// class rules, and the read bound (limit, else ReadLimit).
func (p *Planner) readSetup(dlq string, limit int) (Policy, redrive.Rules, int, error) {
	pol, err := p.PolicyFor(dlq)
	if err != nil {
		return Policy{}, nil, 0, err
	}
	rules, err := p.Rules()
	if err != nil {
		return Policy{}, nil, 0, err
	}
	if limit <= 0 {
		limit = p.ReadLimit
	}
	return pol, rules, limit, nil
}

// load reads and classifies a DLQ, asking the ledger about the records read.
func (p *Planner) load(ctx context.Context, dlq string, limit int) (Loaded, error) {
	pol, rules, limit, err := p.readSetup(dlq, limit)
	if err != nil {
		return Loaded{}, err
	}
	res, err := p.Cluster.ReadDLQ(ctx, dlq, kafka.ReadOptions{Limit: limit})
	if err != nil {
		return Loaded{}, err
	}
	coords := make([]redrive.Coord, len(res.Records))
	for i, r := range res.Records {
		coords[i] = r.Coord()
	}
	ledger, err := p.ledgerOf(ctx, dlq, coords)
	if err != nil {
		return Loaded{}, err
	}
	l := Loaded{DLQ: dlq, Policy: pol, Total: res.Total, Complete: res.Complete, Ledger: ledger}
	for _, r := range res.Records {
		pr := redrive.ParseRecord(r, pol.Extractors)
		l.Records = append(l.Records, pr)
		if !l.Ledger.Done(pr.Coord()) {
			l.Pending = append(l.Pending, pr)
		}
	}
	l.Classes = redrive.Classify(l.Pending, rules)
	return l, nil
}

// ClassesRead is a DLQ's failure classes, without its records.
type ClassesRead struct {
	Classes []redrive.Class
	// Read is how many records were read; Total how many the DLQ holds.
	Read     int
	Total    int64
	Complete bool
}

// Classes reads a DLQ (at most limit records; 0: ReadLimit) and returns
// the classes of its records not yet redriven or settled, exactly as Load
// does, but streaming: it keeps a few dozen bytes a record, not the
// records (a DLQ of a million 1.3 KB records would not fit otherwise).
func (p *Planner) Classes(ctx context.Context, dlq string, limit int) (ClassesRead, error) {
	t, err := p.tally(ctx, dlq, limit)
	if err != nil {
		return ClassesRead{}, err
	}
	classes, err := t.Classes(t.rules, t.ledger.Done, func(at []redrive.Coord) (map[redrive.Coord]redrive.Parsed, error) {
		recs, _, err := p.Cluster.ReadDLQAt(ctx, dlq, at)
		if err != nil {
			return nil, err
		}
		out := make(map[redrive.Coord]redrive.Parsed, len(recs))
		for _, r := range recs {
			out[r.Coord()] = redrive.ParseRecord(r, t.pol.Extractors)
		}
		return out, nil
	})
	if err != nil {
		return ClassesRead{}, err
	}
	return ClassesRead{Classes: classes, Read: t.Read(), Total: t.res.Total, Complete: t.res.Complete}, nil
}

// tallied is a DLQ read as a redrive.ClassTally, with what was used to read
// it and the ledger's answer for its records.
type tallied struct {
	*redrive.ClassTally
	pol    Policy
	rules  redrive.Rules
	res    kafka.ReadResult
	ledger redrive.LedgerIndex
}

// tally streams a DLQ (at most limit records; 0: ReadLimit) into a
// ClassTally and looks its records up in the ledger.
func (p *Planner) tally(ctx context.Context, dlq string, limit int) (tallied, error) {
	pol, rules, limit, err := p.readSetup(dlq, limit)
	if err != nil {
		return tallied{}, err
	}
	t := tallied{ClassTally: &redrive.ClassTally{}, pol: pol, rules: rules}
	t.res, err = p.Cluster.ReadDLQEach(ctx, dlq, kafka.ReadOptions{Limit: limit}, func(r redrive.Record) {
		t.Add(redrive.ParseRecord(r, pol.Extractors))
	})
	if err != nil {
		return tallied{}, err
	}
	if t.ledger, err = p.ledgerOf(ctx, dlq, t.Coords()); err != nil {
		return tallied{}, err
	}
	return t, nil
}

// Shown is what `dlq show` prints: the first records of a DLQ that a
// selection asks to see, and what the whole read says about its classes.
type Shown struct {
	// Records are the first limit records read of the classes asked (every
	// class when none), in DLQ order, with their ledger entries in Ledger.
	Records []redrive.Parsed
	Ledger  redrive.LedgerIndex
	// Known holds the class of every record read.
	Known    map[string]bool
	Total    int64
	Complete bool
}

// Show reads a DLQ (at most read records; 0: ReadLimit) and keeps the first
// limit records (by partition and offset) of the classes asked, as Load
// then a filter would, but holding only those: a `dlq show --limit 20` over
// a million-record DLQ holds 20 records, not a million.
func (p *Planner) Show(ctx context.Context, dlq string, read int, classes []string, limit int) (Shown, error) {
	pol, _, read, err := p.readSetup(dlq, read)
	if err != nil {
		return Shown{}, err
	}
	want := map[string]bool{}
	for _, c := range classes {
		want[c] = true
	}
	sh := Shown{Known: map[string]bool{}}
	first := firstRecords{limit: limit}
	res, err := p.Cluster.ReadDLQEach(ctx, dlq, kafka.ReadOptions{Limit: read}, func(r redrive.Record) {
		pr := redrive.ParseRecord(r, pol.Extractors)
		sh.Known[pr.Class] = true
		if len(want) > 0 && !want[pr.Class] {
			return
		}
		first.offer(pr.Coord(), func() redrive.Parsed {
			pr.Record = r.Clone() // the read lends r only for this call
			return pr
		})
	})
	if err != nil {
		return Shown{}, err
	}
	sh.Total, sh.Complete = res.Total, res.Complete
	sh.Records = first.sorted()
	coords := make([]redrive.Coord, len(sh.Records))
	for i, r := range sh.Records {
		coords[i] = r.Coord()
	}
	if sh.Ledger, err = p.ledgerOf(ctx, dlq, coords); err != nil {
		return Shown{}, err
	}
	return sh, nil
}

// firstRecords keeps the limit records of lowest coordinates offered, in
// whatever order they come.
type firstRecords struct {
	h     lowestCoords
	limit int
}

// offer considers the record at c; keep makes the copy to hold, called only
// when it is held.
func (f *firstRecords) offer(c redrive.Coord, keep func() redrive.Parsed) {
	if f.limit <= 0 {
		return
	}
	if len(f.h) == f.limit {
		if !c.Before(f.h[0].Coord()) {
			return
		}
		heap.Pop(&f.h)
	}
	heap.Push(&f.h, keep())
}

// sorted returns the records held, in DLQ order.
func (f *firstRecords) sorted() []redrive.Parsed {
	out := []redrive.Parsed(f.h)
	sort.Slice(out, func(i, j int) bool { return out[i].Coord().Before(out[j].Coord()) })
	return out
}

// lowestCoords is a max-heap by coordinates: its top is the record to drop
// when a lower one arrives.
type lowestCoords []redrive.Parsed

func (h lowestCoords) Len() int           { return len(h) }
func (h lowestCoords) Less(i, j int) bool { return h[j].Coord().Before(h[i].Coord()) }
func (h lowestCoords) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lowestCoords) Push(x any)        { *h = append(*h, x.(redrive.Parsed)) }
func (h *lowestCoords) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// PlanRequest is what an operator asks a plan to contain.
type PlanRequest struct {
	DLQ string
	// All selects every record read (said explicitly: --all).
	All     bool
	Classes []string
	Offsets []redrive.Coord
	// Filters narrow the selection (or select on their own).
	Key    string
	Header string // NAME=VALUE
	Since  *time.Time
	Until  *time.Time

	Target       string
	Rate         int
	BatchSize    int
	AllowHazards bool
	Author       string
	// Progress, when set, receives the ordering scan's progress for this
	// plan (records read of records to read); it is not part of the plan.
	Progress func(read, total int64)
}

// Defaults for a plan's pacing.
const (
	DefaultRate      = 100
	DefaultBatchSize = 100
)

// ErrNoSelector refuses a plan that selects nothing explicitly; it also
// matches ErrBadRequest.
var ErrNoSelector = BadRequest("a plan needs an explicit selection: --all, --class, --offsets, --record-key, --header, --since or --until (never everything implicitly)")

// Plan selects records, runs the checks and returns the plan (unsigned, not
// stored). A plan whose checks could not all run is returned with those
// records marked check_failed; Plan.Blocked says so.
func (p *Planner) Plan(ctx context.Context, req PlanRequest) (redrive.File, error) {
	return p.plan(ctx, req, func(redrive.Parsed) {})
}

// plan is Plan handing every record it selects to seen, as it is read.
func (p *Planner) plan(ctx context.Context, req PlanRequest, seen func(redrive.Parsed)) (redrive.File, error) {
	sel := redrive.Selection{All: req.All, Classes: req.Classes, Offsets: req.Offsets, Key: req.Key, Header: req.Header, Since: req.Since, Until: req.Until}
	if sel.Empty() {
		return redrive.File{}, ErrNoSelector
	}
	hName, hValue, hasHeader := strings.Cut(req.Header, "=")
	if req.Header != "" && (!hasHeader || hName == "") {
		return redrive.File{}, BadRequest("--header: %q is not NAME=VALUE", req.Header)
	}
	if req.Rate < 0 {
		return redrive.File{}, BadRequest("--rate must not be negative")
	}
	if err := redrive.CheckBatch(req.BatchSize); err != nil {
		return redrive.File{}, BadRequest("--batch-size: %v", err)
	}
	pol, err := p.PolicyFor(req.DLQ)
	if err != nil {
		return redrive.File{}, err
	}
	if _, err := p.Rules(); err != nil {
		return redrive.File{}, err // a bad class rule is refused before anything is read
	}
	// Every record read is parsed and classed as it streams past; only the
	// selected ones are kept, as plan records (coordinates, digest, ids,
	// origin, target), never the records themselves.
	wantClass := map[string]bool{}
	for _, c := range req.Classes {
		wantClass[c] = true
	}
	base := func(class string) bool {
		return req.All || wantClass[class] || (len(req.Classes) == 0 && len(req.Offsets) == 0)
	}
	filter := func(r redrive.Parsed) bool {
		switch {
		case req.Key != "" && string(r.Key) != req.Key,
			req.Header != "" && !hasHeaderValue(r.Headers, hName, hValue),
			req.Since != nil && r.Timestamp.Before(*req.Since),
			req.Until != nil && !r.Timestamp.Before(*req.Until):
			return false
		}
		return true
	}
	known := map[string]bool{}
	in := newInterner()
	var picked pickedRecords
	// Records named by --offsets alone are read where they are; the DLQ is
	// streamed only when --all, a class or a filter alone selects among
	// every record.
	if req.All || len(req.Classes) > 0 || len(req.Offsets) == 0 {
		read := 0
		opt := kafka.ReadOptions{Limit: p.ReadLimit}
		if req.All && req.Key == "" && req.Header == "" && req.Since == nil && req.Until == nil {
			opt.Reading = picked.reserve // every record read is selected
		}
		res, err := p.Cluster.ReadDLQEach(ctx, req.DLQ, opt, func(r redrive.Record) {
			read++
			pr := redrive.ParseRecord(r, pol.Extractors)
			known[pr.Class] = true
			if base(pr.Class) && filter(pr) {
				seen(pr)
				picked.add(in.record(redrive.NewPlanRecord(pr, req.Target)))
			}
		})
		if err != nil {
			return redrive.File{}, err
		}
		// --all, classes and filters select among every record: on a DLQ
		// larger than the read bound they would silently miss the unread
		// ones (--all beside --offsets too).
		if !res.Complete {
			return redrive.File{}, fmt.Errorf("%s holds %d records, more than the %d read: select by --offsets, or raise --read", req.DLQ, res.Total, read)
		}
		for _, c := range req.Classes {
			if !known[c] {
				return redrive.File{}, BadRequest("--class %s: no such class in %s (see berth dlq classes %s)", c, req.DLQ, req.DLQ)
			}
		}
	}
	if len(req.Offsets) > 0 {
		recs, missing, err := p.Cluster.ReadDLQAt(ctx, req.DLQ, req.Offsets)
		if err != nil {
			return redrive.File{}, err
		}
		if len(missing) > 0 {
			var ms []string
			for _, m := range missing {
				ms = append(ms, m.String())
			}
			return redrive.File{}, BadRequest("--offsets: no record at %s in %s", strings.Join(ms, ","), req.DLQ)
		}
		for _, r := range recs {
			if pr := redrive.ParseRecord(r, pol.Extractors); filter(pr) {
				seen(pr)
				picked.add(in.record(redrive.NewPlanRecord(pr, req.Target)))
			}
		}
	}
	records := picked.sorted()
	if len(records) == 0 {
		return redrive.File{}, nothingSelected(sel.Flags(), req.DLQ)
	}
	info, err := p.Cluster.Describe(ctx)
	if err != nil {
		return redrive.File{}, err
	}
	plan := redrive.Plan{
		Version: redrive.PlanVersion, Cluster: info.ID, DLQ: req.DLQ, Selection: sel, Target: req.Target,
		Rate: req.Rate, BatchSize: req.BatchSize, AllowOrderingHazards: req.AllowHazards,
		Policy: pol.Snapshot(), Author: req.Author, CreatedAt: p.now().UTC().Truncate(time.Millisecond),
	}
	if plan.Rate == 0 {
		plan.Rate = DefaultRate
	}
	if plan.BatchSize == 0 {
		plan.BatchSize = DefaultBatchSize
	}
	if plan.Author == "" {
		plan.Author = DefaultAuthor()
	}
	plan.Records = records
	checker := p
	if req.Progress != nil {
		c := *p
		c.Progress = func(sp kafka.ScanProgress) { req.Progress(sp.Read, sp.Total) }
		checker = &c
	}
	// The checks read the records and write their verdicts in place: no
	// copy of the records as candidates, no slice of verdicts.
	recs := redrive.PlanRecords(plan.Records)
	if err := checker.checkInto(ctx, plan, recs, recs, plan.Policy); err != nil {
		return redrive.File{}, err
	}
	return redrive.NewFile(plan), nil
}

// Check runs the five checks over candidates derived from a plan's records
// as they are now (when the plan is made, and again before it executes),
// under pol (at execute: the stricter of the plan's and today's). The
// system of record is today's configured one (its DSN is never in a plan).
// A candidate with no target (no original topic and no --target) is blocked.
func (p *Planner) Check(ctx context.Context, plan redrive.Plan, cs []redrive.Candidate, pol redrive.PolicySnapshot) ([]redrive.Verdict, error) {
	vs := make([]redrive.Verdict, len(cs))
	if err := p.checkInto(ctx, plan, redrive.CandidateSlice(cs), redrive.VerdictSlice(vs), pol); err != nil {
		return nil, err
	}
	return vs, nil
}

// checkInto is Check reading the candidates through cs and writing the
// verdicts through out (redrive.RunInto).
func (p *Planner) checkInto(ctx context.Context, plan redrive.Plan, cs redrive.Candidates, out redrive.Verdicts, pol redrive.PolicySnapshot) error {
	today, err := p.PolicyFor(plan.DLQ)
	if err != nil {
		return err
	}
	src := redrive.Sources{
		Ledger: func(ctx context.Context) ([]redrive.LedgerEntry, error) { return p.ledgerFor(ctx, plan.DLQ, cs) },
		Scan: func(ctx context.Context, s *redrive.OrderingScan) error {
			s.IgnorePlan = plan.Hash()
			return p.Cluster.ScanOrdering(ctx, s, p.ScanLimit, p.Progress)
		},
	}
	if pol.SystemOfRecord != "" && today.SystemOfRecord == nil {
		return fmt.Errorf("the policy names a system of record (%s) that is not configured for %s", pol.SystemOfRecord, plan.DLQ)
	}
	if today.SystemOfRecord != nil {
		s := *today.SystemOfRecord
		src.Committed = func(ctx context.Context, keys []string) (map[string]bool, error) {
			l, err := sor.Open(ctx, s)
			if err != nil {
				return nil, err
			}
			defer l.Close()
			return l.Committed(ctx, keys)
		}
	}
	err = redrive.RunInto(ctx, cs, out, redrive.CheckOptions{
		DLQ: plan.DLQ, RequireKey: pol.RequireIdempotencyKey, MaxRedrives: pol.MaxRedrives, AllowHazards: plan.AllowOrderingHazards,
	}, src)
	if err != nil {
		return err
	}
	noTarget := redrive.Verdict{Reason: redrive.ReasonCheckFailed, Detail: "no target: the record names no original topic; plan with --target"}
	for i := range cs.Len() {
		if cs.At(i).Target == "" && out.Verdict(i).Included {
			out.SetVerdict(i, noTarget)
		}
	}
	return nil
}

// pickedRecords gathers selected plan records. When every record read is
// selected (--all without a filter) the read says beforehand how many it
// will return, and they go straight into one slice of that size (reserve):
// a million plan records (~216 bytes each) are then held once, never
// copied from one array into another (blocks plus their concatenation
// were twice that at once, the plan's peak). Otherwise they gather per DLQ
// partition in blocks, so a selection of unknown size never sits in a
// slice being regrown, and are concatenated once at the end.
type pickedRecords struct {
	all   []redrive.PlanRecord
	parts map[int32][][]redrive.PlanRecord
	n     int
}

const pickedBlock = 4096

// reserve makes room for n records in one slice (see pickedRecords).
func (p *pickedRecords) reserve(n int64) {
	if n > 0 && p.all == nil && p.n == 0 {
		p.all = make([]redrive.PlanRecord, 0, n)
	}
}

func (p *pickedRecords) add(r redrive.PlanRecord) {
	if len(p.all) < cap(p.all) {
		p.all = append(p.all, r)
		return
	}
	if p.parts == nil {
		p.parts = map[int32][][]redrive.PlanRecord{}
	}
	bs := p.parts[r.Partition]
	if len(bs) == 0 || len(bs[len(bs)-1]) == pickedBlock {
		bs = append(bs, make([]redrive.PlanRecord, 0, pickedBlock))
	}
	bs[len(bs)-1] = append(bs[len(bs)-1], r)
	p.parts[r.Partition] = bs
	p.n++
}

// sorted returns the records in (partition, offset) order, one per record
// (a record both in a selected class and named by --offsets is one record),
// releasing each block as it is copied.
func (p *pickedRecords) sorted() []redrive.PlanRecord {
	out := p.all
	if p.n > 0 {
		parts := make([]int32, 0, len(p.parts))
		for part := range p.parts {
			parts = append(parts, part)
		}
		slices.Sort(parts)
		out = make([]redrive.PlanRecord, 0, len(p.all)+p.n)
		out = append(out, p.all...)
		p.all = nil
		for _, part := range parts {
			for i, b := range p.parts[part] {
				out = append(out, b...)
				p.parts[part][i] = nil
			}
		}
	}
	p.all, p.parts, p.n = nil, nil, 0
	sortByCoord(out)
	uniq := out[:0]
	for i, r := range out {
		if i > 0 && r.Coord() == out[i-1].Coord() {
			continue
		}
		uniq = append(uniq, r)
	}
	return uniq
}

// sortByCoord sorts records by (partition, offset), stably, in place: it
// sorts their indexes, then moves each record once along the permutation's
// cycles (records are ~216 bytes: a sort swapping them would move each
// one log n times; partitions read at once arrive interleaved).
func sortByCoord(rs []redrive.PlanRecord) {
	byCoord := func(a, b redrive.PlanRecord) int {
		switch ca, cb := a.Coord(), b.Coord(); {
		case ca.Before(cb):
			return -1
		case cb.Before(ca):
			return 1
		}
		return 0
	}
	if slices.IsSortedFunc(rs, byCoord) {
		return
	}
	idx := make([]int32, len(rs))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := byCoord(rs[a], rs[b]); c != 0 {
			return c
		}
		return int(a - b) // stable: equal coordinates keep their order
	})
	// Position i takes the record at idx[i]; -1 marks a position filled.
	for i := range idx {
		if idx[i] < 0 {
			continue
		}
		tmp, j := rs[i], i
		for {
			k := int(idx[j])
			idx[j] = -1
			if k == i {
				rs[j] = tmp
				break
			}
			rs[j], j = rs[k], k
		}
	}
}

// interner shares the strings a million plan records repeat (targets,
// classes, origin topics) instead of holding one copy per record.
type interner map[string]string

func newInterner() interner { return interner{} }

func (in interner) str(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	in[s] = s
	return s
}

func (in interner) record(r redrive.PlanRecord) redrive.PlanRecord {
	r.Target, r.Class = in.str(r.Target), in.str(r.Class)
	r.Origin.Topic = in.str(r.Origin.Topic)
	return r
}

func hasHeaderValue(hs []redrive.Header, name, value string) bool {
	for _, h := range hs {
		if h.Key == name && string(h.Value) == value {
			return true
		}
	}
	return false
}

// DefaultAuthor is user@host, the author recorded when none is given.
func DefaultAuthor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if name == "" {
		name = "unknown"
	}
	return name + "@" + host
}

// PlannerConsole adapts a Planner to the console's DLQ pages (tui/dlq.Service):
// the same reads, checks and plan store, with plain redrive types only.
type PlannerConsole struct{ P *Planner }

// List summarises the DLQs.
func (c PlannerConsole) List(ctx context.Context) ([]redrive.DLQ, error) { return c.P.List(ctx) }

// Load reads and classifies a DLQ up to the read limit.
func (c PlannerConsole) Load(ctx context.Context, dlq string) (Loaded, error) {
	return c.P.Load(ctx, dlq, 0)
}

// Plan makes a checked plan.
func (c PlannerConsole) Plan(ctx context.Context, req PlanRequest) (redrive.File, error) {
	return c.P.Plan(ctx, req)
}

// Store puts a plan in the cluster's plan store, through the same import
// as a plan file given to `berth redrive approve|execute` (its hash, this
// cluster).
func (c PlannerConsole) Store(ctx context.Context, f redrive.File) error {
	_, err := (&KafkaRedrive{Planner: c.P, Store: c.P.Store}).Import(ctx, f)
	return err
}

// Plans lists the stored plans.
func (c PlannerConsole) Plans(ctx context.Context) ([]redrive.File, error) {
	return c.P.Store.Plans(ctx)
}
