package actions

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// KafkaRedrive is the redrive actions on one Kafka cluster: what `berth
// redrive approve|execute|status|show` and the console's plan pages call,
// so the two cannot disagree about a plan.
type KafkaRedrive struct {
	Planner *Planner // reads, policies, checks
	Store   KafkaPlanStore
	// ReadOnly refuses every write (approve, execute).
	ReadOnly bool
	// Context names the Berth context in the audit log.
	Context string
	// Actor is who acts, as the audit log records it.
	Actor string
	// MaxAge is redrive.plan_max_age.
	MaxAge time.Duration
	// OpenAudit opens the audit log (local file, mirrored off the machine);
	// the returned func releases the mirror.
	OpenAudit func() (*audit.Log, func(), error)
	Now       func() time.Time
}

func (k *KafkaRedrive) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Review is the policy a plan is judged under today, with its signers.
type Review struct {
	// Today is the configured policy for the plan's DLQ; Matched is false
	// when no configured policy matches it any more.
	Today   Policy
	Matched bool
	// Strict is the stricter of the plan's policy and today's.
	Strict redrive.PolicySnapshot
	// Signers is today's allowed_signers (nil: none configured).
	Signers approval.AllowedSigners
	// Err is why the policies do not combine or the signers cannot be read.
	Err error
}

// Required is the number of approvals the plan needs (0: no review).
func (r Review) Required() int {
	if r.Strict.Review != "required" {
		return 0
	}
	return max(r.Strict.Approvals, 1)
}

// ReviewOf resolves the policy a plan is judged under.
func (k *KafkaRedrive) ReviewOf(f redrive.File) Review {
	var r Review
	today, err := k.Planner.PolicyFor(f.Plan.DLQ)
	if err != nil {
		r.Err, r.Strict = err, f.Plan.Policy
		return r
	}
	r.Today, r.Matched = today, today.Matched
	r.Strict = f.Plan.Policy
	if today.Matched {
		if r.Strict, err = redrive.Stricter(f.Plan.Policy, today.Snapshot()); err != nil {
			r.Err = Refuse(ErrPolicyChanged, "plan %s: %v: make the plan again", redrive.ShortHash(f.Hash), err)
			return r
		}
	}
	if today.AllowedSigners != "" {
		r.Signers, r.Err = approval.LoadAllowedSigners(today.AllowedSigners)
	}
	return r
}

// signersToEdit names the file to edit when the review has no signers.
func (k *KafkaRedrive) signersToEdit(f redrive.File, r Review) string {
	return SignersToEdit(f.Plan.DLQ, r.Today.RedrivePolicy, r.Matched, k.Planner.Config.Source)
}

// Decision evaluates the plan's verified signatures under the review.
func (k *KafkaRedrive) Decision(f redrive.File, r Review) approval.Decision {
	if r.Required() == 0 {
		d := approval.Evaluate(subject(f), f.Author(), f.Approvals(), r.Signers, 0, k.now())
		d.Approved = true
		return d
	}
	return approval.Evaluate(subject(f), f.Author(), f.Approvals(), r.Signers, r.Required(), k.now())
}

func subject(f redrive.File) approval.Subject {
	return approval.Subject{PlanHash: f.Hash, Cluster: f.Plan.Cluster}
}

// Identity is the cluster's id, the identity plans are bound to.
func (k *KafkaRedrive) Identity(ctx context.Context) (string, error) {
	info, err := k.Planner.Cluster.Describe(ctx)
	if err != nil {
		return "", err
	}
	return info.ID, nil
}

// Approved is the outcome of an approval.
type Approved struct {
	Principal   string            `json:"signer"`
	Fingerprint string            `json:"fingerprint"`
	Decision    approval.Decision `json:"decision"`
}

// Approve stores an approval signature over a stored plan after checking
// everything that would make it not count, storing nothing otherwise:
// read-only, another cluster's plan, no allowed_signers, a signature that
// does not verify as an approval of this plan on this cluster, the
// author's key or principal. It audits redrive.approved.
func (k *KafkaRedrive) Approve(ctx context.Context, f redrive.File, sig approval.Signature) (Approved, error) {
	if k.ReadOnly {
		return Approved{}, k.refused(ctx, f, Refuse(ErrReadOnly, "the context is read-only: an approval is written to the plan store; nothing stored"))
	}
	id, err := k.Identity(ctx)
	if err != nil {
		return Approved{}, err
	}
	if id != f.Plan.Cluster {
		return Approved{}, k.refused(ctx, f, approveClusterRefusal(f.Hash, f.Plan.Cluster, id))
	}
	if err := futureApproval(f.Hash, f.Plan.CreatedAt, k.now()); err != nil {
		return Approved{}, k.refused(ctx, f, err)
	}
	r := k.ReviewOf(f)
	if r.Err != nil {
		return Approved{}, r.Err
	}
	if r.Signers == nil {
		return Approved{}, k.refused(ctx, f, noSigners(k.signersToEdit(f, r), "nothing stored"))
	}
	if sig.PlanHash != f.Hash || sig.Role != approval.RoleApproval {
		return Approved{}, Refuse(ErrSignature, "not an approval of plan %s; nothing stored", redrive.ShortHash(f.Hash))
	}
	now := k.now()
	v, err := approval.Verify(subject(f), sig, r.Signers, now)
	if err != nil {
		return Approved{}, Refuse(ErrSignature, "%v; nothing stored", err)
	}
	if err := twoPersonRule(subject(f), f.Author(), v.Fingerprint, v.Principal, r.Signers, now); err != nil {
		return Approved{}, err
	}
	// Recorded first: an approval the audit log cannot hold is not stored.
	with := f
	with.Signatures = append(append([]approval.Signature(nil), f.Signatures...), sig)
	dec := k.Decision(with, r)
	if err := k.audit(ctx, "redrive.approved", f, map[string]any{"signer": v.Principal, "fingerprint": v.Fingerprint, "approved": dec.Approved}); err != nil {
		return Approved{}, err
	}
	if err := k.Store.AddSignature(ctx, f.Hash, sig); err != nil {
		_ = k.audit(ctx, "redrive.approve.failed", f, map[string]any{"signer": v.Principal, "error": err.Error()})
		return Approved{}, err
	}
	return Approved{Principal: v.Principal, Fingerprint: v.Fingerprint, Decision: dec}, nil
}

// ExecControl steers an execution from its caller.
type ExecControl struct {
	Control  <-chan Control
	Progress func(Progress)
	// DryRun stops before sending (see Options.DryRun).
	DryRun bool
	// PerRecord returns each record's outcome (Options.PerRecord).
	PerRecord bool
}

// Execute runs a plan under the stricter policy, re-deriving everything
// from the records; the transactional producer (which writes: it fences an
// earlier run of the plan) is opened only after every precondition holds.
func (k *KafkaRedrive) Execute(ctx context.Context, f redrive.File, x ExecControl) (Result, error) {
	res := Result{Plan: f.Hash, DLQ: f.Plan.DLQ, Skipped: []Skip{}, Failed: []Failure{}}
	o := Options{ReadOnly: k.ReadOnly, Context: k.Context, Actor: k.Actor, Now: k.Now, MaxAge: k.MaxAge,
		Control: x.Control, Progress: x.Progress, DryRun: x.DryRun, PerRecord: x.PerRecord}
	if !x.DryRun {
		log, closeLog, err := k.OpenAudit()
		if err != nil {
			return res, Refuse(ErrAuditUnwritable, "audit log: %v: nothing sent", err)
		}
		defer closeLog()
		o.Audit = log
	}
	var err error
	if k.ReadOnly && !x.DryRun {
		return res, o.refused(ctx, f, Refuse(ErrReadOnly, "the context is read-only: nothing sent"))
	}
	if o.Cluster, err = k.Identity(ctx); err != nil {
		return res, err
	}
	r := k.ReviewOf(f)
	if r.Err != nil {
		return res, o.refused(ctx, f, r.Err)
	}
	o.Policy, o.HasPolicy, o.Signers, o.SignersToEdit = r.Today.Snapshot(), r.Matched, r.Signers, k.signersToEdit(f, r)
	o.StopOnFailure = r.Today.StopOnFailure || r.Strict.RequireIdempotencyKey
	// The checks run a chunk at a time as the records are sent; each
	// chunk's ledger look-up reads the ledger as it was when the run
	// began (KafkaPlanStore.Pinned).
	pinned := *k.Planner
	pinned.Store = k.Planner.Store.Pinned()
	o.Recheck = pinned.Check
	tr := &lazyTransport{open: func(ctx context.Context) (Publisher, error) {
		return k.Planner.Cluster.OpenPublisher(ctx, f.Hash)
	}, read: k.Planner.Cluster}
	defer tr.Close()
	o.Reader, o.Publisher = tr, tr
	return Execute(ctx, f, o)
}

// The Kafka transport is the executor's reader and publisher.
var (
	_ RecordReader = (*kafka.RedriveTransport)(nil)
	_ Publisher    = (*kafka.RedriveTransport)(nil)
)

// lazyTransport reads through the cluster and opens the transactional
// producer when the run starts sending (Start), after the plan's
// preconditions held and its records were re-read, and before the first
// ledger look-up.
type lazyTransport struct {
	open func(context.Context) (Publisher, error)
	read KafkaCluster
	tr   Publisher
}

func (l *lazyTransport) Read(ctx context.Context, dlq string, coords []redrive.Coord) (map[redrive.Coord]redrive.Record, error) {
	return l.read.ReadDLQByCoord(ctx, dlq, coords)
}

// Start opens the transactional producer, which fences every earlier run
// of the plan (starter).
func (l *lazyTransport) Start(ctx context.Context) error {
	if l.tr != nil {
		return nil
	}
	tr, err := l.open(ctx)
	if err != nil {
		return err
	}
	l.tr = tr
	return nil
}

func (l *lazyTransport) Publish(ctx context.Context, batch []redrive.Outgoing) ([]redrive.LedgerEntry, error) {
	if err := l.Start(ctx); err != nil {
		return nil, err
	}
	return l.tr.Publish(ctx, batch)
}

func (l *lazyTransport) Close() error {
	if l.tr != nil {
		return l.tr.Close()
	}
	return nil
}

// Derive re-reads a stored plan's records and fills what a reviewer sees
// (event id, idempotency key, class, origin) from them, with the plan's
// extractors. Records whose content changed or that are gone are returned.
// The records are read a chunk at a time and dropped once derived: memory
// follows the plan's derived fields, not the records' content.
func (k *KafkaRedrive) Derive(ctx context.Context, f *redrive.File) (changed, gone []redrive.Coord, err error) {
	return k.derive(ctx, f, nil)
}

// derive is Derive showing j (when not nil) the first record of each class
// among the records found unchanged.
func (k *KafkaRedrive) derive(ctx context.Context, f *redrive.File, j *classJudge) (changed, gone []redrive.Coord, err error) {
	x, err := redrive.ExtractorsOf(f.Plan.Policy)
	if err != nil {
		return nil, nil, err
	}
	// Derived strings repeated on most records (class, origin topic) are
	// held once.
	names := map[string]string{}
	intern := func(s *string) {
		if v, ok := names[*s]; ok {
			*s = v
		} else {
			names[*s] = *s
		}
	}
	for from := 0; from < len(f.Plan.Records); from += DefaultChunk {
		// part shares the plan's records: Derive fills them in place.
		part := redrive.Plan{Records: f.Plan.Records[from:min(from+DefaultChunk, len(f.Plan.Records))]}
		coords := make([]redrive.Coord, len(part.Records))
		for i, r := range part.Records {
			coords[i] = r.Coord()
		}
		byCoord, err := k.Planner.Cluster.ReadDLQByCoord(ctx, f.Plan.DLQ, coords)
		if err != nil {
			return nil, nil, err
		}
		c, g := part.Derive(byCoord, x)
		changed, gone = append(changed, c...), append(gone, g...)
		for i := range part.Records {
			r := &part.Records[i]
			if rec, ok := byCoord[r.Coord()]; ok && j.new(r.Class) && rec.Digest() == r.Digest {
				j.kafka(redrive.ParseRecord(rec, x))
			}
			intern(&r.Class)
			intern(&r.Origin.Topic)
		}
	}
	return changed, gone, nil
}

// Summary is what a reviewer is asked to sign: counts per target, and the
// idempotency keys of the records included, derived from the records.
type Summary struct {
	Targets []TargetCount `json:"targets"`
	// Keys are the idempotency keys of the included records, in plan
	// order ("" for a record with none); a record changed or gone since
	// the plan is under Changed or Gone, its key not listed.
	Keys    []string        `json:"idempotency_keys"`
	Changed []redrive.Coord `json:"changed"`
	Gone    []redrive.Coord `json:"gone"`
	// Warnings name the permanent classes the plan includes (warnings.go);
	// empty unless the records were read to make or review it.
	Warnings []string `json:"warnings"`
}

// TargetCount is how many records go to one target.
type TargetCount struct {
	Target   string `json:"target"`
	Included int    `json:"included"`
	Excluded int    `json:"excluded"`
}

// Summarise counts a (derived) plan per target and lists its keys.
func Summarise(p redrive.Plan, changed, gone []redrive.Coord) Summary {
	s := Summary{Targets: []TargetCount{}, Keys: []string{}, Changed: changed, Gone: gone, Warnings: []string{}}
	if s.Changed == nil {
		s.Changed = []redrive.Coord{}
	}
	if s.Gone == nil {
		s.Gone = []redrive.Coord{}
	}
	unread := make(map[redrive.Coord]bool, len(changed)+len(gone))
	for _, c := range append(append([]redrive.Coord(nil), changed...), gone...) {
		unread[c] = true
	}
	s.Targets, s.Keys = summarise(len(p.Records), func(i int) (string, bool, string, bool) {
		r := p.Records[i]
		t := r.Target
		if t == "" {
			t = "(none)"
		}
		return t, r.Included, r.IdempotencyKey, !unread[r.Coord()]
	})
	return s
}

// refused audits a refusal (local log and mirror) and returns it.
func (k *KafkaRedrive) refused(ctx context.Context, f redrive.File, err error) error {
	if aerr := k.audit(ctx, "redrive.refused", f, map[string]any{"reason": err.Error()}); aerr != nil {
		return errors.Join(err, aerr)
	}
	return err
}

// audit appends one entry; a mirror failure is not fatal (the local log
// has the entry), a local one is: the action does not happen.
func (k *KafkaRedrive) audit(ctx context.Context, action string, f redrive.File, details map[string]any) error {
	if k.OpenAudit == nil {
		return Refuse(ErrAuditUnwritable, "no audit log configured")
	}
	log, closeLog, err := k.OpenAudit()
	if err != nil {
		return Refuse(ErrAuditUnwritable, "audit log: %v", err)
	}
	defer closeLog()
	details["plan"] = f.Hash
	details["dlq"] = f.Plan.DLQ
	_, err = log.Append(context.WithoutCancel(ctx), audit.Entry{Actor: k.Actor, Action: action, Context: k.Context, Target: f.Hash, Details: details})
	var se *audit.SinkError
	if err != nil && !errors.As(err, &se) {
		return Refuse(ErrAuditUnwritable, "audit log: %v", err)
	}
	return nil
}

// Status is a stored plan's state as `redrive status` and the console's
// plans page show it: the verified author and approvers (never the plan's
// word for them), approvals counted today, progress from the ledger.
type Status struct {
	// Author is the verified signer of the author's signature,
	// "(unsigned)" or "(unverified)".
	Author    string
	Approvers []string
	Approvals int // that count today
	Required  int
	Approved  bool
	Reason    string // why not approved, blocked or in error
	// State is done, partial (N left), blocked, expired, dated in the
	// future, pending approval, ready, or error.
	State string
}

// Status judges a plan as execute would, without reading the cluster:
// redriven is how many of its records the ledger says are redriven.
func (k *KafkaRedrive) Status(f redrive.File, redriven int) Status {
	t := f.Plan.Totals()
	r := k.ReviewOf(f)
	d := k.Decision(f, r)
	st := Status{Author: verifiedAuthor(f, d), Approvers: d.Approvers, Approvals: len(d.Approvers), Required: r.Required(),
		Approved: d.Approved, Reason: d.Reason}
	if r.Err != nil {
		st.State, st.Reason, st.Approved = "error", r.Err.Error(), false
		return st
	}
	blocked, blockedWhy := f.Plan.Blocked()
	st.State = planProgress{Included: t.Included, Redriven: redriven, Started: redriven > 0, Blocked: blocked, Approved: st.Approved,
		Created: f.Plan.CreatedAt}.state(k.now(), k.MaxAge)
	if st.State == "blocked" {
		st.Reason = blockedWhy
	}
	return st
}

// VerifiedAuthor names the plan's author as its verified signature does
// under today's allowed_signers: "(unsigned)" or "(unverified)" when there
// is none to name, never what the plan says of itself.
func (k *KafkaRedrive) VerifiedAuthor(f redrive.File) string {
	return verifiedAuthor(f, k.Decision(f, k.ReviewOf(f)))
}

// verifiedAuthor names the plan's author as its verified signature does.
func verifiedAuthor(f redrive.File, d approval.Decision) string {
	switch {
	case d.Author != "":
		return d.Author
	case f.Author() == nil:
		return "(unsigned)"
	}
	return "(unverified)"
}

// Verification is what execute checks after sending: every copy read back
// (read_committed) and compared with the DLQ record it came from, then the
// DLQ watched for copies that fail again.
type Verification struct {
	Checked    int              `json:"checked"`
	Mismatches []kafka.Mismatch `json:"mismatches"`
	// Watched is how long the DLQ was watched for re-failures, WatchFor
	// the most it would have been, WatchEnded why it ended (WatchSkipped,
	// or the kafka.Watch* reasons), WatchGroups the consumer groups it
	// waited for.
	Watched     string            `json:"watched"`
	WatchFor    string            `json:"watch_for"`
	WatchEnded  string            `json:"watch_ended"`
	WatchGroups []string          `json:"watch_groups"`
	Refailed    []kafka.Refailure `json:"refailed"`
}

// WatchSkipped is Verification.WatchEnded when no watch ran (a zero watch,
// or nothing was sent).
const WatchSkipped = "skipped"

// Verify reads back every copy this plan produced and compares payload
// hashes with the DLQ records as they are now (their digests still the
// plan's), then, for watch, watches the DLQ for records that fail again
// through run (the caller's: it shows the watch and may end it early;
// what was sent stays sent).
func (k *KafkaRedrive) Verify(ctx context.Context, f redrive.File, watch time.Duration, run func(kafka.Watch) (kafka.WatchResult, error)) (*Verification, error) {
	return k.VerifySent(ctx, f, nil, watch, run)
}

// VerifySent is Verify right after an execution: sent (Result.SentValues)
// holds the value hashes of the records that run sent, read from the DLQ
// and checked against the plan's digest as they were sent, so only the
// copies of earlier runs need their DLQ records read again.
//
// Memory follows a chunk of copies, not the plan: the ledger is read once
// and only where each included record's copy is (16 bytes a record) is
// kept from it; the copies are then read back a chunk at a time.
func (k *KafkaRedrive) VerifySent(ctx context.Context, f redrive.File, sent *SentValues, watch time.Duration, run func(kafka.Watch) (kafka.WatchResult, error)) (*Verification, error) {
	v := &Verification{Mismatches: []kafka.Mismatch{}, Refailed: []kafka.Refailure{}, Watched: "0s", WatchFor: watch.String(), WatchEnded: WatchSkipped, WatchGroups: []string{}}
	cl := k.Planner.Cluster
	ends, err := cl.DLQEnds(ctx, f.Plan.DLQ)
	// A DLQ deleted during the run: the copies are read back all the same,
	// there is nothing to watch, and the run ends naming the DLQ.
	gone := dlqGone(f.Hash, f.Plan.DLQ, err)
	if err != nil && gone == err {
		return v, err
	}
	if gone != nil {
		watch = 0
	}
	// The ledger entries of this plan's records only (a keyed look-up),
	// not the whole ledger.
	cs, err := k.planCopies(ctx, f)
	if err != nil {
		return v, err
	}
	v.Checked = cs.n
	if v.Mismatches, err = k.verifyCopies(ctx, f, cs, sent); err != nil {
		return v, err
	}
	// Nothing sent by this plan: nothing can fail again.
	if watch > 0 && cs.n > 0 && run != nil {
		wr, err := run(kafka.Watch{DLQ: f.Plan.DLQ, Plan: f.Hash, From: ends, Max: watch, Copies: cs.last(f), Total: cs.n})
		v.Refailed, v.Watched, v.WatchEnded, v.WatchGroups = wr.Refailed, wr.Watched.Round(time.Millisecond).String(), wr.Ended, wr.Groups
		if err != nil && ctx.Err() == nil {
			return v, err
		}
	}
	return v, gone
}

// planCopies is where the copies of a plan's included records are, as the
// ledger says now: for each included record, in DLQ order, its copy when
// its latest ledger entry is this plan's redriven one.
type planCopies struct {
	// idx are the plan's included records (indexes into its Records) in
	// DLQ order; at[i] is where the copy of idx[i] is.
	idx     []int32
	at      []copyAt
	targets []string
	n       int // copies
}

// copyAt is one copy's place; target is an index into planCopies.targets
// plus one (0: no copy of this plan).
type copyAt struct {
	offset    int64
	partition int32
	target    int32
}

// planCopies reads the ledger entries of f's included records once
// (KafkaLedger.LookupEach) and keeps where this plan's copies are.
func (k *KafkaRedrive) planCopies(ctx context.Context, f redrive.File) (*planCopies, error) {
	recs := f.Plan.Records
	cs := &planCopies{}
	for i, r := range recs {
		if r.Included {
			cs.idx = append(cs.idx, int32(i))
		}
	}
	slices.SortFunc(cs.idx, func(a, b int32) int { return compareCoord(recs[a].Coord(), recs[b].Coord()) })
	cs.at = make([]copyAt, len(cs.idx))
	find := func(c redrive.Coord) (int, bool) {
		return slices.BinarySearchFunc(cs.idx, c, func(i int32, c redrive.Coord) int { return compareCoord(recs[i].Coord(), c) })
	}
	coords := func(yield func(redrive.Coord) bool) {
		for _, i := range cs.idx {
			if !yield(recs[i].Coord()) {
				return
			}
		}
	}
	targets := map[string]int32{}
	err := k.Store.LookupEach(ctx, f.Plan.DLQ, coords, func(c redrive.Coord) bool { _, ok := find(c); return ok }, func(c redrive.Coord, e *redrive.LedgerEntry) {
		i, _ := find(c)
		// The latest entry is the record's: a later one of another plan,
		// a settlement or a tombstone replaces this plan's.
		if e == nil || e.Plan != f.Hash || e.Action != redrive.LedgerRedriven {
			cs.at[i] = copyAt{}
			return
		}
		t, ok := targets[e.Target]
		if !ok {
			cs.targets = append(cs.targets, e.Target)
			t = int32(len(cs.targets))
			targets[e.Target] = t
		}
		cs.at[i] = copyAt{offset: e.TargetOffset, partition: e.TargetPartition, target: t}
	})
	if err != nil {
		return nil, err
	}
	for _, a := range cs.at {
		if a.target > 0 {
			cs.n++
		}
	}
	return cs, nil
}

// entry is the ledger entry of the copy of included record i (DLQ order),
// as far as the read-back and the watch need it.
func (cs *planCopies) entry(f redrive.File, i int) redrive.LedgerEntry {
	r, a := f.Plan.Records[cs.idx[i]], cs.at[i]
	return redrive.LedgerEntry{DLQ: f.Plan.DLQ, Partition: r.Partition, Offset: r.Offset, Action: redrive.LedgerRedriven, Plan: f.Hash,
		Target: cs.targets[a.target-1], TargetPartition: a.partition, TargetOffset: a.offset}
}

// last is the last copy on each target partition: what the re-failure
// watch waits for the consumers to pass.
func (cs *planCopies) last(f redrive.File) []redrive.LedgerEntry {
	type tp struct{ target, partition int32 }
	at := map[tp]int{}
	for i, a := range cs.at {
		if a.target == 0 {
			continue
		}
		k := tp{a.target, a.partition}
		if j, ok := at[k]; !ok || cs.at[j].offset < a.offset {
			at[k] = i
		}
	}
	out := make([]redrive.LedgerEntry, 0, len(at))
	for _, i := range at {
		out = append(out, cs.entry(f, i))
	}
	slices.SortFunc(out, func(a, b redrive.LedgerEntry) int {
		return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(a.TargetPartition, b.TargetPartition))
	})
	return out
}

// verifyCopies reads back the copies a chunk at a time, in DLQ order
// (each chunk's DLQ records sit together, so the DLQ is read once; when
// the DLQ keeps the original partitions, as Spring's does, the chunk's
// copies were sent together too), comparing each copy's payload with the
// DLQ record it came from as that record is now (its digest still the
// plan's). Only one chunk of records is held at once.
func (k *KafkaRedrive) verifyCopies(ctx context.Context, f redrive.File, cs *planCopies, sent *SentValues) ([]kafka.Mismatch, error) {
	cl := k.Planner.Cluster
	out := []kafka.Mismatch{}
	next := 0 // the next included record (DLQ order) to look at
	for next < len(cs.at) {
		var part []redrive.LedgerEntry
		want := map[redrive.Coord]string{}
		digest := map[redrive.Coord]int32{} // the records to read again: their plan records
		var read []redrive.Coord
		for ; next < len(cs.at) && len(part) < DefaultChunk; next++ {
			if cs.at[next].target == 0 {
				continue
			}
			e := cs.entry(f, next)
			part = append(part, e)
			c := redrive.Coord{Partition: e.Partition, Offset: e.Offset}
			if sum, ok := sent.Get(c); ok {
				want[c] = hex.EncodeToString(sum[:])
			} else {
				read = append(read, c)
				digest[c] = cs.idx[next]
			}
		}
		if len(part) == 0 {
			break
		}
		var recs map[redrive.Coord]redrive.Record
		if len(read) > 0 {
			var err error
			if recs, err = cl.ReadDLQByCoord(ctx, f.Plan.DLQ, read); err != nil {
				return nil, err
			}
		}
		for c, rec := range recs {
			if i, ok := digest[c]; ok && rec.Digest() == f.Plan.Records[i].Digest {
				sum := sha256.Sum256(rec.Value)
				want[c] = hex.EncodeToString(sum[:])
			}
		}
		ms, err := cl.VerifyRedriven(ctx, part, want)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Where < out[j].Where })
	return out, nil
}
