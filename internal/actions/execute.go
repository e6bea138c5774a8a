package actions

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// Redrive execution: the preconditions (read-only, cluster, age, review
// under the stricter policy, approvals), then every record re-read and
// everything a reviewer saw derived again from it, the checks re-run over
// what was derived, and the records sent in batches that keep same-key
// order, rate limited, pausable and cancellable, every step audited. The
// transport (Kafka transactions, RabbitMQ confirms) sits behind Reader and
// Publisher, so the same rules apply to every backend.

// ClockMargin is how far ahead of this machine's clock a plan's created_at
// may be (clocks differ a little); further ahead, the plan is refused: it
// would otherwise never expire.
const ClockMargin = 2 * time.Minute

// Control steers a running execution.
type Control int

const (
	Pause Control = iota + 1
	Resume
	Cancel // finish the batch in flight, then stop
)

// Options configure one execution.
type Options struct {
	ReadOnly bool
	Context  string // Berth context name, for the audit log
	Actor    string
	Now      func() time.Time
	// MaxAge is how long after its creation a plan may still run.
	MaxAge time.Duration
	// Cluster is the identity of the cluster connected to; the plan must
	// have been made on it.
	Cluster string
	// Policy is the redrive policy that applies to the plan's DLQ today;
	// the execution runs under the stricter of it and the plan's
	// (redrive.Stricter). HasPolicy is false when no configured policy
	// matches the DLQ any more: the plan's own policy then applies.
	Policy    redrive.PolicySnapshot
	HasPolicy bool
	// Signers is the policy's allowed_signers (required when review is);
	// SignersToEdit names the file to edit when there are none.
	Signers       approval.AllowedSigners
	SignersToEdit string
	// Recheck runs the redrive checks over candidates derived from the
	// records as they are now, under the given (stricter) policy; one
	// verdict per candidate, in order.
	Recheck func(ctx context.Context, p redrive.Plan, cs []redrive.Candidate, pol redrive.PolicySnapshot) ([]redrive.Verdict, error)
	// StopOnFailure stops at the first failed batch (payment policies).
	StopOnFailure bool
	// DryRun does everything up to sending (preconditions, re-read,
	// re-derivation, checks) and reports what would be sent; it writes
	// nothing (no audit entry) and is allowed in a read-only context.
	DryRun    bool
	Reader    RecordReader
	Publisher Publisher
	Audit     *audit.Log
	Progress  func(Progress)
	Control   <-chan Control
	// Sleep waits for the rate limiter (tests may replace it).
	Sleep func(ctx context.Context, d time.Duration) error
	// PerRecord is for a caller that shows each record's outcome (the
	// console): every sent record's ledger entry is kept in Result.Ledger
	// and every record an earlier run sent is listed in Result.Skipped
	// (memory grows with the plan). Without it (the CLI) those are counted
	// in Result.AlreadySent.
	PerRecord bool
	// Chunk is how many records are re-read, re-derived and re-checked at
	// once (0: DefaultChunk).
	Chunk int
}

// Skip is a record not sent, with the reason.
type Skip struct {
	Partition int32          `json:"partition"`
	Offset    int64          `json:"offset"`
	EventID   string         `json:"event_id,omitempty"`
	Reason    redrive.Reason `json:"reason"`
	Detail    string         `json:"detail,omitempty"`
}

// Failure is a batch that could not be sent.
type Failure struct {
	Records []redrive.Coord `json:"records"`
	Error   string          `json:"error"`
}

// Result is the outcome of an execution.
type Result struct {
	Plan    string `json:"plan"`
	DLQ     string `json:"dlq"`
	Sent    int    `json:"sent"`
	Skipped []Skip `json:"skipped"`
	// AlreadySent counts the included records an earlier run sent (the
	// ledger has each one), not sent again and, unless Options.PerRecord,
	// not listed in Skipped: resuming a million-record run would otherwise
	// hold an entry (about 130 bytes) for every record already sent.
	AlreadySent int               `json:"already_sent"`
	Failed      []Failure         `json:"failed"`
	Cancelled   bool              `json:"cancelled"`
	Approval    approval.Decision `json:"approval"`
	// Ledger is what this run sent, one entry a record with where its copy
	// is, when Options.PerRecord asked for it (the console shows it per
	// record); the CLI does not hold it (it reads the ledger to verify).
	Ledger []redrive.LedgerEntry `json:"-"`
	// SentValues is the SHA-256 of the value of every record this run
	// sent, by DLQ coordinates: the read-back compares the copies with
	// them without reading those DLQ records again (KafkaRedrive.VerifySent).
	SentValues *SentValues `json:"-"`
	// DryRun: nothing was sent; WouldSend counts what would be, per target.
	DryRun    bool           `json:"dry_run"`
	WouldSend map[string]int `json:"would_send,omitempty"`
	// listedSent counts the records of Skipped an earlier run sent
	// (PerRecord lists them): progress counts them as already sent, as
	// without PerRecord.
	listedSent int
}

// addSkips records a chunk's skips; one an earlier run sent is only
// counted (AlreadySent) unless each record's outcome is wanted.
func (r *Result) addSkips(skips []Skip, perRecord bool) {
	for _, s := range skips {
		if s.Reason == redrive.ReasonAlreadyRedriven {
			if !perRecord {
				r.AlreadySent++
				continue
			}
			r.listedSent++
		}
		r.Skipped = append(r.Skipped, s)
	}
}

// readErr is a failed read of the plan's DLQ, said as dlqGone when the
// DLQ no longer exists.
func readErr(f redrive.File, err error) error {
	if gone := dlqGone(f.Hash, f.Plan.DLQ, err); gone != err {
		return gone
	}
	return fmt.Errorf("read %s: %w", f.Plan.DLQ, err)
}

// Reason values the executor adds to the checks' reasons.
const (
	ReasonChanged redrive.Reason = "payload_changed" // the DLQ record's content no longer matches the plan's digest
	ReasonGone    redrive.Reason = "record_gone"     // the DLQ record is no longer in the log
	// ReasonNotVisible: a RabbitMQ message not found while other consumers
	// held messages of the DLQ unacknowledged, which a run cannot consume:
	// it may be one of them (the review's "not visible"), so it is not
	// called gone. A Kafka log hides no record from a reader: none is
	// ever not visible there.
	ReasonNotVisible redrive.Reason = "not_visible"
)

// policy is the policy an execution runs under: the stricter of the plan's
// and today's (when a policy still matches the DLQ).
func (o Options) policy(f redrive.File) (redrive.PolicySnapshot, error) {
	if !o.HasPolicy {
		return f.Plan.Policy, nil
	}
	return redrive.Stricter(f.Plan.Policy, o.Policy)
}

// Preflight checks everything that must hold before anything is read or
// sent and returns the approval decision. It does no I/O beyond what o
// holds.
func Preflight(f redrive.File, o Options) (approval.Decision, error) {
	now := o.now()
	var d approval.Decision
	if o.ReadOnly && !o.DryRun {
		return d, Refuse(ErrReadOnly, "the context is read-only: nothing sent")
	}
	if got := f.Plan.Hash(); got != f.Hash {
		return d, Refuse(ErrPlanEdited, "plan content does not match its hash %s (edited after it was made: make and approve a new plan)", redrive.ShortHash(f.Hash))
	}
	if f.Plan.Cluster != o.Cluster {
		return d, Refuse(ErrClusterMismatch, "plan %s was made on cluster %q, this is cluster %q: a plan runs only where it was made", redrive.ShortHash(f.Hash), f.Plan.Cluster, o.Cluster)
	}
	if ahead := f.Plan.CreatedAt.Sub(now); ahead > ClockMargin {
		return d, Refuse(ErrPlanFromFuture, "plan %s claims to be made %s in the future (%s): make it again", redrive.ShortHash(f.Hash), ahead.Round(time.Second), redrive.FormatCreatedAt(f.Plan.CreatedAt))
	}
	if o.MaxAge > 0 && now.Sub(f.Plan.CreatedAt) > o.MaxAge {
		return d, Refuse(ErrPlanExpired, "plan %s expired: made %s ago, plans run within %s", redrive.ShortHash(f.Hash), now.Sub(f.Plan.CreatedAt).Round(time.Second), o.MaxAge)
	}
	if blocked, why := f.Plan.Blocked(); blocked {
		return d, Refuse(ErrPlanBlocked, "plan %s is blocked (a check could not run): %s", redrive.ShortHash(f.Hash), why)
	}
	pol, err := o.policy(f)
	if err != nil {
		return d, Refuse(ErrPolicyChanged, "plan %s: %v: make the plan again", redrive.ShortHash(f.Hash), err)
	}
	if pol.Review != "required" {
		return approval.Decision{Approved: true, Approvers: []string{}}, nil
	}
	if len(o.Signers) == 0 {
		return d, noSigners(o.SignersToEdit, "nothing sent")
	}
	d = approval.Evaluate(approval.Subject{PlanHash: f.Hash, Cluster: f.Plan.Cluster}, f.Author(), f.Approvals(), o.Signers, max(pol.Approvals, 1), now)
	if !d.Approved {
		why := d.Reason
		if len(d.Refused) > 0 {
			why += " (" + joinLimit(d.Refused, 3) + ")"
		}
		return d, Refuse(ErrNotApproved, "plan %s is not approved: %s", redrive.ShortHash(f.Hash), why)
	}
	return d, nil
}

// DefaultChunk is how many of a plan's records an execution re-reads,
// re-derives and re-checks at once when Options.Chunk is 0. Memory is
// bounded by it (about two chunks of records are held: the one being sent
// and the next, read meanwhile), never by the plan's size.
const DefaultChunk = 25000

// Execute runs the plan. A Refusal means nothing was sent. Cancelling ctx
// stops after the batch in flight (the transport's atomicity makes any point
// safe); running the same plan again resumes from the ledger.
//
// It streams: a first pass re-reads every included record chunk by chunk,
// checks its digest and derives its target (a target that differs from the
// plan's refuses the whole plan before anything is sent) and keeps only
// each record's place in the send order. The records are then read again a
// chunk at a time in that order, derived, re-checked and sent, the next
// chunk read and checked while the current one is sent, and dropped.
func Execute(ctx context.Context, f redrive.File, o Options) (Result, error) {
	res := Result{Plan: f.Hash, DLQ: f.Plan.DLQ, Skipped: []Skip{}, Failed: []Failure{}}
	dec, err := Preflight(f, o)
	res.Approval = dec
	if err != nil {
		return res, o.refused(ctx, f, err)
	}
	if err := o.append(ctx, "redrive.execute.started", f, map[string]any{"records": len(f.Plan.Records), "approvers": dec.Approvers}); err != nil {
		return res, Refuse(ErrAuditUnwritable, "audit log: %v: nothing sent", err)
	}

	if o.Recheck == nil {
		return res, o.refused(ctx, f, Refuse(ErrPlanBlocked, "no checks configured: a plan is never executed without running its checks again"))
	}
	pol, _ := o.policy(f) // Preflight refused a policy that does not combine
	x, err := redrive.ExtractorsOf(pol)
	if err != nil {
		return res, o.refused(ctx, f, Refuse(ErrPolicyChanged, "plan %s: %v", redrive.ShortHash(f.Hash), err))
	}
	for _, r := range f.Plan.Records {
		if !r.Included {
			res.Skipped = append(res.Skipped, skipOf(r, r.Verdict))
		}
	}
	order, err := o.vet(ctx, f, &res)
	if err != nil && !IsRefusal(err) {
		// Failed before sending (its DLQ unreadable, or gone): the run's
		// end is on record as RabbitMQ's is.
		return res, errors.Join(err, o.audit(ctx, "redrive.execute.failed", f, KafkaOutcome(f, res).details(err)))
	}
	if err != nil {
		return res, err
	}
	run := &execRun{o: o, f: f, pol: pol, x: x, res: &res}
	if o.DryRun {
		res.DryRun, res.WouldSend = true, map[string]int{}
		err := run.stream(ctx, chunksOf(order, o.chunk()), func(p prepared) error {
			for _, x := range p.out {
				res.WouldSend[x.Target]++
			}
			return nil
		})
		return res, err
	}

	// The publisher starts (Kafka: the transactional producer, which fences
	// every earlier run of the plan: their open batch is aborted and no
	// later one lands) before the checks' first ledger look-up. Started
	// after it, a batch another run of the plan committed in between would
	// be sent a second time.
	if s, ok := o.Publisher.(starter); ok {
		if err := s.Start(ctx); err != nil {
			return res, errors.Join(err, o.audit(ctx, "redrive.execute.failed", f, KafkaOutcome(f, res).details(err)))
		}
	}
	err = run.sendAll(ctx, chunksOf(order, o.chunk()))
	status := "finished"
	if res.Cancelled {
		status = "cancelled"
	}
	if err != nil {
		status = "failed"
	}
	aerr := o.audit(ctx, "redrive.execute."+status, f, KafkaOutcome(f, res).details(err))
	return res, errors.Join(err, aerr)
}

// starter is a Publisher that has to start before a run's first ledger
// look-up (see Execute).
type starter interface {
	Start(ctx context.Context) error
}

func (o Options) chunk() int {
	if o.Chunk > 0 {
		return o.Chunk
	}
	return DefaultChunk
}

// sendKey is one included record's place in the send order: its index in
// the plan and its origin (topic as an index into the run's topic names,
// -1 when the record does not say where it came from). Only these are kept
// for the whole run, so a plan of any size is ordered without holding its
// records.
type sendKey struct {
	idx       int
	topic     int32
	partition int32
	offset    int64
}

// order is the plan's included records in send order.
type order struct {
	keys   []sendKey
	topics []string
}

// vet is the first pass: every included record re-read (a chunk at a time,
// nothing held), a record gone or changed skipped, and a target derived
// from the record that differs from the plan's refuses the plan before
// anything is sent. It returns the records to send, in the order that keeps
// same-key order: as first consumed (original topic, partition, offset),
// then those with no known origin in DLQ order.
func (o Options) vet(ctx context.Context, f redrive.File, res *Result) (order, error) {
	var ord order
	topicIdx := map[string]int32{}
	all := f.Plan.Records
	included := 0
	for _, r := range all {
		if r.Included {
			included++
		}
	}
	// The one array held for the whole run, sized once.
	ord.keys = make([]sendKey, 0, included)
	// Nothing read is kept: read in parts (readPart), holding one part's
	// decompressed batches at a time.
	n := min(o.chunk(), readPart)
	part := make([]int, 0, n)
	for next := 0; next < len(all); {
		part = part[:0]
		for ; next < len(all) && len(part) < n; next++ {
			if all[next].Included {
				part = append(part, next)
			}
		}
		if len(part) == 0 {
			break
		}
		coords := make([]redrive.Coord, len(part))
		for j, i := range part {
			coords[j] = f.Plan.Records[i].Coord()
		}
		recs, err := o.Reader.Read(ctx, f.Plan.DLQ, coords)
		if err != nil {
			return ord, readErr(f, err)
		}
		for _, i := range part {
			r := f.Plan.Records[i]
			rec, ok := recs[r.Coord()]
			if sk, skip := vetSkip(r, rec, ok); skip {
				res.Skipped = append(res.Skipped, sk)
				continue
			}
			// The target needs the headers only; the digest pins them, so
			// the second pass derives the same target from the same bytes.
			p := redrive.Parsed{Record: rec, Diag: redrive.Parse(rec.Headers)}
			if err := o.sameTarget(ctx, f, r, p); err != nil {
				return ord, err
			}
			k := sendKey{idx: i, topic: -1}
			if h := p.Diag.LastHop(); h != nil && h.Located() {
				t, ok := topicIdx[h.Topic]
				if !ok {
					t = int32(len(ord.topics))
					topicIdx[h.Topic] = t
					ord.topics = append(ord.topics, h.Topic)
				}
				k.topic, k.partition, k.offset = t, h.Partition, h.Offset
			}
			ord.keys = append(ord.keys, k)
		}
	}
	recs := f.Plan.Records
	sort.SliceStable(ord.keys, func(a, b int) bool {
		ka, kb := ord.keys[a], ord.keys[b]
		if (ka.topic >= 0) != (kb.topic >= 0) {
			return ka.topic >= 0
		}
		if ka.topic >= 0 {
			if ta, tb := ord.topics[ka.topic], ord.topics[kb.topic]; ta != tb {
				return ta < tb
			}
			if ka.partition != kb.partition {
				return ka.partition < kb.partition
			}
			if ka.offset != kb.offset {
				return ka.offset < kb.offset
			}
		}
		ra, rb := recs[ka.idx], recs[kb.idx]
		if ra.Partition != rb.Partition {
			return ra.Partition < rb.Partition
		}
		return ra.Offset < rb.Offset
	})
	return ord, nil
}

// vetSkip says whether a re-read record is skipped: gone from the log, or
// its content no longer the plan's digest.
func vetSkip(r redrive.PlanRecord, rec redrive.Record, found bool) (Skip, bool) {
	switch {
	case !found:
		return Skip{r.Partition, r.Offset, "", ReasonGone, "no longer in the DLQ's log"}, true
	case rec.Digest() != r.Digest:
		return Skip{r.Partition, r.Offset, "", ReasonChanged, "key, value or headers differ from the plan's digest"}, true
	}
	return Skip{}, false
}

// sameTarget refuses the plan (audited) when the record names another
// target than the plan gives it (targetRefusal).
func (o Options) sameTarget(ctx context.Context, f redrive.File, r redrive.PlanRecord, p redrive.Parsed) error {
	if err := targetRefusal(f, r, p); err != nil {
		return o.refused(ctx, f, err)
	}
	return nil
}

// targetRefusal is the refusal of a plan that gives a record another
// target than the record names: the plan says where a record goes and the
// reviewer saw it; the record says otherwise. Nothing of such a plan is
// sent.
func targetRefusal(f redrive.File, r redrive.PlanRecord, p redrive.Parsed) error {
	if t := redrive.DeriveTarget(p, f.Plan.Target); t != r.Target {
		return Refuse(ErrTargetChanged, "plan %s gives record %s the target %q, but the record names %q: nothing sent; make the plan again", redrive.ShortHash(f.Hash), r.Coord(), r.Target, orNone(t))
	}
	return nil
}

// chunksOf cuts the send order into chunks of at most n records. An
// original partition's records stay in one chunk when they fit in one, so
// the ordering check sees every record of the plan on that partition at
// once (a newer same-key record the plan also redrives is no hazard); a
// partition with more than n records is cut, and the ordering check of one
// part then sees the plan's records in the other parts as newer records.
//
// The chunks share ord's keys (each is a run of them, capped so that
// nothing appends into the next): the send order is held once.
func chunksOf(ord order, n int) [][]sendKey {
	var out [][]sendKey
	keys := ord.keys
	from := 0 // where the last chunk begins
	for at := 0; at < len(keys); {
		// run: the records of keys[at]'s original partition
		run := 1
		for at+run < len(keys) && keys[at+run].topic == keys[at].topic && keys[at+run].partition == keys[at].partition {
			run++
		}
		last := len(out) - 1
		switch {
		case last >= 0 && len(out[last])+run <= n:
			out[last] = keys[from : at+run : at+run]
		case run <= n:
			from = at
			out = append(out, keys[at:at+run:at+run])
		default:
			for i := at; i < at+run; i += n {
				from = i
				end := min(i+n, at+run)
				out = append(out, keys[i:end:end])
			}
		}
		at += run
	}
	return out
}

// execRun is one execution's state while it streams.
type execRun struct {
	o   Options
	f   redrive.File
	pol redrive.PolicySnapshot
	x   redrive.Extractors
	res *Result
}

// prepared is one chunk re-read, derived and re-checked: what to send, in
// order, and what is skipped.
type prepared struct {
	out   []Outgoing
	skips []Skip
	err   error
}

// stream prepares the chunks in order, the next one while fn handles the
// current one, and stops at the first error (fn's, or a chunk's). A chunk
// that could not be prepared because ctx ended is not an error.
func (e *execRun) stream(ctx context.Context, chunks [][]sendKey, fn func(prepared) error) error {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	// Unbuffered: at most the chunk being sent and the next one are held.
	ready := make(chan prepared)
	go func() {
		defer close(ready)
		// Event ids already going out, across chunks: a duplicate event is
		// redriven once (the first in send order goes).
		seen := newEventsSeen(e.f.Plan.Records)
		for _, c := range chunks {
			p := e.prepare(pctx, c, seen)
			select {
			case ready <- p:
			case <-pctx.Done():
				return
			}
			if p.err != nil {
				return
			}
		}
	}()
	for p := range ready {
		if p.err != nil {
			if ctx.Err() != nil {
				e.res.Cancelled = !e.o.DryRun
				return nil
			}
			if IsRefusal(p.err) {
				// audited here: only this goroutine writes the audit log
				return e.o.refused(ctx, e.f, p.err)
			}
			return p.err
		}
		e.res.addSkips(p.skips, e.o.PerRecord)
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// readPart is how many of a chunk's records prepare reads at once, in DLQ
// order: each part's records are copied out (outgoing) as they are read and
// the part dropped, so the decompressed batches of one part are held (about
// 1.2 KB a record), never those of a whole chunk.
const readPart = 5000

// readOne is one record of a chunk as read: its plan record derived from
// it and the copy to send, or why it is skipped.
type readOne struct {
	r    redrive.PlanRecord
	out  Outgoing
	skip *Skip // gone or changed since the first pass
}

// prepare re-reads one chunk's records, derives everything from them, runs
// the checks again over what was derived (under the stricter policy) and
// builds what is to be sent, in send order.
func (e *execRun) prepare(ctx context.Context, keys []sendKey, seen *eventsSeen) prepared {
	f, o := e.f, e.o
	now := o.now()
	read, err := e.readChunk(ctx, keys, now)
	if err != nil {
		return prepared{err: err}
	}
	var p prepared
	todo := make([]int, 0, len(keys)) // positions in keys of the records read unchanged
	for i := range read {
		if read[i].skip != nil {
			p.skips = append(p.skips, *read[i].skip)
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return p
	}
	cs := make([]redrive.Candidate, len(todo))
	for j, i := range todo {
		cs[j] = read[i].r.Candidate()
	}
	verdicts, err := o.Recheck(ctx, f.Plan, cs, e.pol)
	if err != nil {
		return prepared{err: fmt.Errorf("checks: %w", err)}
	}
	if len(verdicts) != len(todo) {
		return prepared{err: fmt.Errorf("checks: %d verdicts for %d records", len(verdicts), len(todo))}
	}
	p.out = make([]Outgoing, 0, len(todo))
	// this chunk's event ids, going out (first in send order)
	chunkFirst := map[string]redrive.Coord{}
	var newIDs []string
	var newIdx []int
	for j, i := range todo {
		r, v := read[i].r, verdicts[j]
		if v.Included && r.EventID != "" {
			first, dup := seen.firstOf(r.EventID)
			if !dup {
				first, dup = chunkFirst[r.EventID]
			}
			if dup {
				v = redrive.Verdict{Reason: redrive.ReasonDuplicate, Detail: fmt.Sprintf("event %s is also at %s, which is redriven instead", r.EventID, first)}
			} else {
				chunkFirst[r.EventID] = r.Coord()
				newIDs, newIdx = append(newIDs, r.EventID), append(newIdx, keys[i].idx)
			}
		}
		// A check that cannot run blocks the record: never read as "not applied".
		if !v.Included {
			p.skips = append(p.skips, skipOf(r, v))
			continue
		}
		p.out = append(p.out, read[i].out)
	}
	seen.add(newIDs, newIdx)
	return p
}

// readChunk reads a chunk's records in parts of readPart, in DLQ order (a
// part is then a few contiguous ranges of the log), and returns them in
// send order: each derived from the record read and copied out to be sent,
// or skipped as gone or changed since the first pass.
func (e *execRun) readChunk(ctx context.Context, keys []sendKey, now time.Time) ([]readOne, error) {
	f := e.f
	byDLQ := make([]int, len(keys)) // positions in keys, in DLQ order
	for i := range byDLQ {
		byDLQ[i] = i
	}
	sort.Slice(byDLQ, func(a, b int) bool {
		return f.Plan.Records[keys[byDLQ[a]].idx].Coord().Before(f.Plan.Records[keys[byDLQ[b]].idx].Coord())
	})
	read := make([]readOne, len(keys))
	coords := make([]redrive.Coord, 0, min(readPart, len(keys)))
	for from := 0; from < len(byDLQ); from += readPart {
		part := byDLQ[from:min(from+readPart, len(byDLQ))]
		coords = coords[:0]
		for _, i := range part {
			coords = append(coords, f.Plan.Records[keys[i].idx].Coord())
		}
		recs, err := e.o.Reader.Read(ctx, f.Plan.DLQ, coords)
		if err != nil {
			return nil, readErr(f, err)
		}
		for _, i := range part {
			r := f.Plan.Records[keys[i].idx]
			rec, ok := recs[r.Coord()]
			if sk, skip := vetSkip(r, rec, ok); skip {
				read[i].skip = &sk
				continue
			}
			parsed := parseForExecute(rec, e.x)
			if err := targetRefusal(f, r, parsed); err != nil {
				return nil, err // cannot happen: same bytes as the first pass
			}
			r.Fill(parsed)
			read[i] = readOne{r: r, out: outgoing(f, r, rec, now)}
		}
	}
	return read, nil
}

// eventsSeen is the event ids of the records going out, across a run. A
// map of the ids as derived held a string and a coordinate a record (about
// 70 bytes with the map's own); here a chunk's new ids are copied into one
// string the map's keys share, and each maps to the plan record that first
// had it (about 45 bytes a record).
type eventsSeen struct {
	recs  []redrive.PlanRecord
	first map[string]int32 // event id -> the index of the plan record that first had it
}

func newEventsSeen(recs []redrive.PlanRecord) *eventsSeen {
	return &eventsSeen{recs: recs, first: map[string]int32{}}
}

// firstOf says where the record that first had event id is, if one did.
func (s *eventsSeen) firstOf(id string) (redrive.Coord, bool) {
	if j, ok := s.first[id]; ok {
		return s.recs[j].Coord(), true
	}
	return redrive.Coord{}, false
}

// add records that the plan records at idx, with the event ids ids (none
// seen before, none twice), go out.
func (s *eventsSeen) add(ids []string, idx []int) {
	n := 0
	for _, id := range ids {
		n += len(id)
	}
	var b strings.Builder
	b.Grow(n)
	for _, id := range ids {
		b.WriteString(id)
	}
	all, at := b.String(), 0
	for i, id := range ids {
		s.first[all[at:at+len(id)]] = int32(idx[i])
		at += len(id)
	}
}

// parseForExecute is redrive.ParseRecord without the failure class, which
// nothing at execute needs (classifying is the costliest part of parsing).
func parseForExecute(rec redrive.Record, x redrive.Extractors) redrive.Parsed {
	p := redrive.Parsed{Record: rec, Diag: redrive.Parse(rec.Headers)}
	p.EventID, _ = x.EventID.Extract(rec.Headers, rec.Value)
	p.IdempotencyKey, _ = x.IdempotencyKey.Extract(rec.Headers, rec.Value)
	return p
}

// sendAll streams the chunks into batches of the plan's size (a batch may
// take records of two chunks), rate limited, pausable and cancellable
// between batches, each batch audited.
func (e *execRun) sendAll(ctx context.Context, chunks [][]sendKey) error {
	o, f, res := e.o, e.f, e.res
	batch := f.Plan.BatchSize
	if batch <= 0 {
		batch = 100
	}
	var interval time.Duration
	if f.Plan.Rate > 0 {
		interval = time.Second * time.Duration(batch) / time.Duration(f.Plan.Rate)
	}
	start := o.now()
	// Progress counts the plan's included records, as a RabbitMQ run's
	// does: those the plan excluded are listed in Skipped from the start
	// but are not the run's to settle (0/90,000, not 10,000/100,000
	// "skipped 10,000" before anything was sent).
	total := f.Plan.Totals().Included
	excluded := len(f.Plan.Records) - total
	paused := false
	report := func() {
		if o.Progress == nil {
			return
		}
		p := Progress{Plan: f.Hash, Total: total, Sent: res.Sent, AlreadySent: res.AlreadySent + res.listedSent, Skipped: len(res.Skipped) - res.listedSent - excluded,
			Failed: failedCount(res), Paused: paused, Elapsed: o.now().Sub(start)}
		p.ETA = ETA(p.Elapsed, p.Sent, total-p.Done(), f.Plan.Rate)
		o.Progress(p)
	}
	report()
	// Room for a hash of every record that may be sent, at once: grown by
	// appending, the old and new arrays would be held together.
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	res.SentValues = newSentValues(n)
	next := o.now()
	var pending []Outgoing
	stopped := errors.New("stopped")
	// send sends pending in batches; all says whether a last short batch
	// goes too (no more records will come).
	send := func(all bool) error {
		for len(pending) >= batch || (all && len(pending) > 0) {
			// Controls are read between batches: a batch is never split.
			if o.waitTurn(ctx, &paused, report) || ctx.Err() != nil {
				res.Cancelled = true
				return stopped
			}
			// The limiter never lends: time spent preparing a chunk or
			// paused is not made up afterwards by a burst above the rate.
			if now := o.now(); next.Before(now) {
				next = now
			} else if err := o.sleep(ctx, next.Sub(now)); err != nil {
				res.Cancelled = true
				return stopped
			}
			b := pending[:min(batch, len(pending))]
			pending = pending[len(b):]
			if err := e.publish(ctx, b); err != nil {
				report()
				return err
			}
			report()
			next = next.Add(interval)
		}
		return nil
	}
	err := e.stream(ctx, chunks, func(p prepared) error {
		report()
		pending = append(pending, p.out...)
		return send(false)
	})
	if err == nil && !res.Cancelled {
		err = send(true)
	}
	if errors.Is(err, stopped) {
		return nil
	}
	return err
}

// publish sends one batch and audits it; a failed batch is recorded (and
// stops the run under a stop-on-failure policy).
func (e *execRun) publish(ctx context.Context, b []Outgoing) error {
	o, f, res := e.o, e.f, e.res
	// The batch in flight finishes even if ctx is cancelled meanwhile.
	entries, err := o.Publisher.Publish(context.WithoutCancel(ctx), b)
	if errors.Is(err, backends.ErrTakenOver) {
		// Not a failed batch: nothing of it was sent, and the run that
		// took over sends it.
		return takenOver(f.Hash)
	}
	if err != nil {
		fl := Failure{Error: err.Error()}
		for _, x := range b {
			fl.Records = append(fl.Records, redrive.Coord{Partition: x.Ledger.Partition, Offset: x.Ledger.Offset})
		}
		res.Failed = append(res.Failed, fl)
		if aerr := o.audit(ctx, "redrive.batch.failed", f, map[string]any{"records": fl.Records, "error": fl.Error}); aerr != nil {
			return aerr
		}
		if errors.Is(err, backends.ErrUnreachable) {
			// The cluster stopped answering: every batch after would wait
			// its timeout and fail the same way.
			return err
		}
		if o.StopOnFailure {
			return fmt.Errorf("stopped at the first failure (policy): %v", err)
		}
		return nil
	}
	res.Sent += len(entries)
	if res.SentValues == nil {
		res.SentValues = &SentValues{}
	}
	for _, x := range b {
		res.SentValues.add(redrive.Coord{Partition: x.Ledger.Partition, Offset: x.Ledger.Offset}, sha256.Sum256(x.Record.Value))
	}
	if o.PerRecord {
		res.Ledger = append(res.Ledger, entries...)
	}
	return o.audit(ctx, "redrive.batch.sent", f, map[string]any{"records": len(entries), "first": coordOf(entries[0]), "last": coordOf(entries[len(entries)-1])})
}

// waitTurn applies pending controls and blocks while paused; it reports
// whether the execution is cancelled (by Cancel or ctx).
func (o Options) waitTurn(ctx context.Context, paused *bool, report func()) bool {
	apply := func(c Control) bool {
		switch c {
		case Pause:
			*paused = true
		case Resume:
			*paused = false
		case Cancel:
			return true
		}
		report()
		return false
	}
	for {
		select {
		case c := <-o.Control:
			if apply(c) {
				return true
			}
			continue
		default:
		}
		if !*paused {
			return ctx.Err() != nil
		}
		select {
		case c := <-o.Control:
			if apply(c) {
				return true
			}
		case <-ctx.Done():
			return true
		}
	}
}

// outgoing builds the record to send: key, value and the original headers
// except DLQ diagnostics and earlier Berth headers, plus Berth's own.
//
// The bytes sent are copied out of the record as read: its key, value and
// header values point into the decompressed batch it came in, which also
// holds the DLQ's diagnostics (stack traces) and records nobody asked
// for, and a chunk waiting to be sent kept every batch of it alive (about
// 1.4 KB a record where the copy is 0.4).
func outgoing(f redrive.File, r redrive.PlanRecord, rec redrive.Record, now time.Time) Outgoing {
	var hs []redrive.Header
	size := len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		if redrive.IsDiagnostic(h.Key) || h.Key == redrive.HeaderPlan || h.Key == redrive.HeaderOrigin || h.Key == redrive.HeaderAttempt {
			continue
		}
		hs = append(hs, h)
		size += len(h.Value)
	}
	buf := make([]byte, 0, size)
	own := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(buf)
		buf = append(buf, b...)
		return buf[at:len(buf):len(buf)]
	}
	for i := range hs {
		hs[i].Value = own(hs[i].Value)
	}
	attempt := int(r.PriorRedrives) + 1
	hs = append(hs,
		redrive.Header{Key: redrive.HeaderPlan, Value: []byte(f.Hash)},
		redrive.Header{Key: redrive.HeaderOrigin, Value: []byte(redrive.FormatOrigin(f.Plan.DLQ, r.Partition, r.Offset))},
		redrive.Header{Key: redrive.HeaderAttempt, Value: []byte(strconv.Itoa(attempt))},
	)
	target := r.Target // equal to the re-derived target (checked)
	return Outgoing{
		Target: target, Record: redrive.Record{Topic: target, Key: own(rec.Key), KeyNull: rec.KeyNull, Value: own(rec.Value), Headers: hs},
		Ledger: redrive.LedgerEntry{
			DLQ: f.Plan.DLQ, Partition: r.Partition, Offset: r.Offset, EventID: r.EventID,
			Action: redrive.LedgerRedriven, Plan: f.Hash, Target: target, Attempt: attempt, At: now.UTC(),
		},
	}
}

// refused audits a refusal and returns it; a refusal that cannot be
// audited is still a refusal, and says the log failed too.
func (o Options) refused(ctx context.Context, f redrive.File, err error) error {
	if aerr := o.audit(ctx, "redrive.refused", f, map[string]any{"reason": err.Error()}); aerr != nil {
		return errors.Join(err, aerr)
	}
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(no original topic)"
	}
	return s
}

func skipOf(r redrive.PlanRecord, v redrive.Verdict) Skip {
	return Skip{Partition: r.Partition, Offset: r.Offset, EventID: r.EventID, Reason: v.Reason, Detail: v.Detail}
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) sleep(ctx context.Context, d time.Duration) error {
	if o.Sleep != nil {
		return o.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// audit appends an entry. A mirror (audit topic) failure is not fatal: the
// local log has the entry. A local failure is: a destructive action that
// cannot be recorded does not go on.
func (o Options) audit(ctx context.Context, action string, f redrive.File, details map[string]any) error {
	if err := o.append(ctx, action, f, details); err != nil {
		return &Refusal{Reason: ErrAuditUnwritable, Detail: fmt.Sprintf("audit log: %v: a write that cannot be recorded does not go on", err)}
	}
	return nil
}

// append is audit's entry written, its local failure returned as it is.
func (o Options) append(ctx context.Context, action string, f redrive.File, details map[string]any) error {
	if o.Audit == nil || o.DryRun {
		return nil
	}
	details["plan"] = f.Hash
	details["dlq"] = f.Plan.DLQ
	_, err := o.Audit.Append(context.WithoutCancel(ctx), audit.Entry{Actor: o.Actor, Action: action, Context: o.Context, Target: f.Hash, Details: details})
	var se *audit.SinkError
	if err != nil && !errors.As(err, &se) {
		return err
	}
	return nil
}

func failedCount(r *Result) int {
	n := 0
	for _, f := range r.Failed {
		n += len(f.Records)
	}
	return n
}

func coordOf(e redrive.LedgerEntry) string {
	return fmt.Sprintf("%s/%d/%d", e.Target, e.TargetPartition, e.TargetOffset)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func joinLimit(s []string, n int) string {
	out := ""
	for i, x := range s {
		if i == n {
			out += fmt.Sprintf("; and %d more", len(s)-n)
			break
		}
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}
