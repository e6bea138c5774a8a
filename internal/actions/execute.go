package actions

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

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

// Progress is reported after every batch.
type Progress struct {
	Plan    string        `json:"plan"`
	Total   int           `json:"total"`
	Sent    int           `json:"sent"`
	Skipped int           `json:"skipped"`
	Failed  int           `json:"failed"`
	Paused  bool          `json:"paused"`
	Elapsed time.Duration `json:"elapsed_ns"`
	ETA     time.Duration `json:"eta_ns"`
}

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
	Plan      string                `json:"plan"`
	DLQ       string                `json:"dlq"`
	Sent      int                   `json:"sent"`
	Skipped   []Skip                `json:"skipped"`
	Failed    []Failure             `json:"failed"`
	Cancelled bool                  `json:"cancelled"`
	Approval  approval.Decision     `json:"approval"`
	Ledger    []redrive.LedgerEntry `json:"-"`
	// DryRun: nothing was sent; WouldSend counts what would be, per target.
	DryRun    bool           `json:"dry_run"`
	WouldSend map[string]int `json:"would_send,omitempty"`
}

// Reason values the executor adds to the checks' reasons.
const (
	ReasonChanged redrive.Reason = "payload_changed" // the DLQ record's content no longer matches the plan's digest
	ReasonGone    redrive.Reason = "record_gone"     // the DLQ record is no longer in the log
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
		return d, Refuse(ErrPlanEdited, "plan content does not match its hash %s (edited after it was made: make and approve a new plan)", short(f.Hash))
	}
	if f.Plan.Cluster != o.Cluster {
		return d, Refuse(ErrClusterMismatch, "plan %s was made on cluster %q, this is cluster %q: a plan runs only where it was made", short(f.Hash), f.Plan.Cluster, o.Cluster)
	}
	if ahead := f.Plan.CreatedAt.Sub(now); ahead > ClockMargin {
		return d, Refuse(ErrPlanFromFuture, "plan %s claims to be made %s in the future (%s): make it again", short(f.Hash), ahead.Round(time.Second), redrive.FormatCreatedAt(f.Plan.CreatedAt))
	}
	if o.MaxAge > 0 && now.Sub(f.Plan.CreatedAt) > o.MaxAge {
		return d, Refuse(ErrPlanExpired, "plan %s expired: made %s ago, plans run within %s", short(f.Hash), now.Sub(f.Plan.CreatedAt).Round(time.Second), o.MaxAge)
	}
	if blocked, why := f.Plan.Blocked(); blocked {
		return d, Refuse(ErrPlanBlocked, "plan %s is blocked (a check could not run): %s", short(f.Hash), why)
	}
	pol, err := o.policy(f)
	if err != nil {
		return d, Refuse(ErrPolicyChanged, "plan %s: %v: make the plan again", short(f.Hash), err)
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
		return d, Refuse(ErrNotApproved, "plan %s is not approved: %s", short(f.Hash), why)
	}
	return d, nil
}

// Execute runs the plan. A Refusal means nothing was sent. Cancelling ctx
// stops after the batch in flight (the transport's atomicity makes any point
// safe); running the same plan again resumes from the ledger.
func Execute(ctx context.Context, f redrive.File, o Options) (Result, error) {
	res := Result{Plan: f.Hash, DLQ: f.Plan.DLQ, Skipped: []Skip{}, Failed: []Failure{}}
	dec, err := Preflight(f, o)
	res.Approval = dec
	if err != nil {
		return res, o.refused(ctx, f, err)
	}
	if err := o.audit(ctx, "redrive.execute.started", f, map[string]any{"records": len(f.Plan.Records), "approvers": dec.Approvers}); err != nil {
		return res, err
	}

	if o.Recheck == nil {
		return res, o.refused(ctx, f, Refuse(ErrPlanBlocked, "no checks configured: a plan is never executed without running its checks again"))
	}
	pol, _ := o.policy(f) // Preflight refused a policy that does not combine
	x, err := redrive.ExtractorsOf(pol)
	if err != nil {
		return res, o.refused(ctx, f, Refuse(ErrPolicyChanged, "plan %s: %v", short(f.Hash), err))
	}

	// Re-read every included record: what is sent, and everything the
	// checks see, comes from the record as it is now, never from the plan.
	var want []redrive.Coord
	for _, r := range f.Plan.Records {
		if r.Included {
			want = append(want, r.Coord())
		} else {
			res.Skipped = append(res.Skipped, skipOf(r, r.Verdict))
		}
	}
	recs, err := o.Reader.Read(ctx, f.Plan.DLQ, want)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", f.Plan.DLQ, err)
	}
	var todo []redrive.PlanRecord
	var raw []redrive.Record
	for _, r := range f.Plan.Records {
		if !r.Included {
			continue
		}
		rec, ok := recs[r.Coord()]
		switch {
		case !ok:
			res.Skipped = append(res.Skipped, Skip{r.Partition, r.Offset, "", ReasonGone, "no longer in the DLQ's log"})
			continue
		case rec.Digest() != r.Digest:
			res.Skipped = append(res.Skipped, Skip{r.Partition, r.Offset, "", ReasonChanged, "key, value or headers differ from the plan's digest"})
			continue
		}
		parsed := redrive.ParseRecord(rec, x)
		if t := redrive.DeriveTarget(parsed, f.Plan.Target); t != r.Target {
			// The plan says where a record goes and the reviewer saw it;
			// the record says otherwise. Nothing of such a plan is sent.
			return res, o.refused(ctx, f, Refuse(ErrTargetChanged, "plan %s gives record %s the target %q, but the record names %q: nothing sent; make the plan again", short(f.Hash), r.Coord(), r.Target, orNone(t)))
		}
		r.Fill(parsed)
		todo = append(todo, r)
		raw = append(raw, rec)
	}

	// Checks again, over what the records say now, under the stricter policy.
	cs := make([]redrive.Candidate, len(todo))
	for i, r := range todo {
		cs[i] = r.Candidate()
	}
	verdicts, err := o.Recheck(ctx, f.Plan, cs, pol)
	if err != nil {
		return res, fmt.Errorf("checks: %w", err)
	}
	if len(verdicts) != len(todo) {
		return res, fmt.Errorf("checks: %d verdicts for %d records", len(verdicts), len(todo))
	}
	var send []int
	for i, r := range todo {
		// A check that cannot run blocks the record: never read as "not applied".
		if v := verdicts[i]; !v.Included {
			res.Skipped = append(res.Skipped, skipOf(r, v))
			continue
		}
		send = append(send, i)
	}
	// Same-key order: send in the order the records were first consumed
	// (original topic, partition, offset); records with no known origin
	// follow in DLQ order.
	sort.SliceStable(send, func(a, b int) bool { return originBefore(todo[send[a]], todo[send[b]]) })
	out := make([]Outgoing, 0, len(send))
	for _, i := range send {
		out = append(out, outgoing(f, todo[i], raw[i], o.now()))
	}
	if o.DryRun {
		res.DryRun, res.WouldSend = true, map[string]int{}
		for _, x := range out {
			res.WouldSend[x.Target]++
		}
		return res, nil
	}

	err = o.sendAll(ctx, f, out, &res)
	status := "finished"
	if res.Cancelled {
		status = "cancelled"
	}
	if err != nil {
		status = "failed"
	}
	aerr := o.audit(ctx, "redrive.execute."+status, f, kafkaCounts(f, res).details(err))
	return res, errors.Join(err, aerr)
}

func (o Options) sendAll(ctx context.Context, f redrive.File, out []Outgoing, res *Result) error {
	batch := f.Plan.BatchSize
	if batch <= 0 {
		batch = 100
	}
	var interval time.Duration
	if f.Plan.Rate > 0 {
		interval = time.Second * time.Duration(batch) / time.Duration(f.Plan.Rate)
	}
	start := o.now()
	total := len(out) + len(res.Skipped)
	paused := false
	report := func() {
		if o.Progress == nil {
			return
		}
		p := Progress{Plan: f.Hash, Total: total, Sent: res.Sent, Skipped: len(res.Skipped), Failed: failedCount(res), Paused: paused, Elapsed: o.now().Sub(start)}
		left := len(out) - res.Sent - failedCount(res)
		if res.Sent > 0 {
			p.ETA = time.Duration(float64(p.Elapsed) / float64(res.Sent) * float64(left))
		}
		// The first batches go out at once; the rate limit paces the rest,
		// so the ETA is never shorter than the rate allows.
		if f.Plan.Rate > 0 {
			if paced := time.Duration(float64(left) / float64(f.Plan.Rate) * float64(time.Second)); paced > p.ETA {
				p.ETA = paced
			}
		}
		o.Progress(p)
	}
	report()
	next := o.now()
	for i := 0; i < len(out); {
		// Controls are read between batches: a batch is never split.
		if o.waitTurn(ctx, &paused, report) {
			res.Cancelled = true
			return nil
		}
		if ctx.Err() != nil {
			res.Cancelled = true
			return nil
		}
		if wait := next.Sub(o.now()); wait > 0 {
			if err := o.sleep(ctx, wait); err != nil {
				res.Cancelled = true
				return nil
			}
		}
		end := i + batch
		if end > len(out) {
			end = len(out)
		}
		b := out[i:end]
		// The batch in flight finishes even if ctx is cancelled meanwhile.
		entries, err := o.Publisher.Publish(context.WithoutCancel(ctx), b)
		if err != nil {
			fl := Failure{Error: err.Error()}
			for _, x := range b {
				fl.Records = append(fl.Records, redrive.Coord{Partition: x.Ledger.Partition, Offset: x.Ledger.Offset})
			}
			res.Failed = append(res.Failed, fl)
			if aerr := o.audit(ctx, "redrive.batch.failed", f, map[string]any{"records": fl.Records, "error": fl.Error}); aerr != nil {
				return aerr
			}
			if o.StopOnFailure {
				report()
				return fmt.Errorf("stopped at the first failure (policy): %v", err)
			}
		} else {
			res.Sent += len(entries)
			res.Ledger = append(res.Ledger, entries...)
			if aerr := o.audit(ctx, "redrive.batch.sent", f, map[string]any{"records": len(entries), "first": coordOf(entries[0]), "last": coordOf(entries[len(entries)-1])}); aerr != nil {
				return aerr
			}
		}
		report()
		i = end
		next = next.Add(interval)
	}
	return nil
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
func outgoing(f redrive.File, r redrive.PlanRecord, rec redrive.Record, now time.Time) Outgoing {
	var hs []redrive.Header
	for _, h := range rec.Headers {
		if redrive.IsDiagnostic(h.Key) || h.Key == redrive.HeaderPlan || h.Key == redrive.HeaderOrigin || h.Key == redrive.HeaderAttempt {
			continue
		}
		hs = append(hs, h)
	}
	attempt := r.PriorRedrives + 1
	hs = append(hs,
		redrive.Header{Key: redrive.HeaderPlan, Value: []byte(f.Hash)},
		redrive.Header{Key: redrive.HeaderOrigin, Value: []byte(redrive.FormatOrigin(f.Plan.DLQ, r.Partition, r.Offset))},
		redrive.Header{Key: redrive.HeaderAttempt, Value: []byte(strconv.Itoa(attempt))},
	)
	target := r.Target // equal to the re-derived target (checked)
	return Outgoing{
		Target: target, Record: redrive.Record{Topic: target, Key: rec.Key, KeyNull: rec.KeyNull, Value: rec.Value, Headers: hs},
		Ledger: redrive.LedgerEntry{
			DLQ: f.Plan.DLQ, Partition: r.Partition, Offset: r.Offset, EventID: r.EventID,
			Action: redrive.LedgerRedriven, Plan: f.Hash, Target: target, Attempt: attempt, At: now.UTC(),
		},
	}
}

func originBefore(a, b redrive.PlanRecord) bool {
	if a.OriginLocated != b.OriginLocated {
		return a.OriginLocated
	}
	if a.OriginLocated {
		if a.Origin.Topic != b.Origin.Topic {
			return a.Origin.Topic < b.Origin.Topic
		}
		if a.Origin.Partition != b.Origin.Partition {
			return a.Origin.Partition < b.Origin.Partition
		}
		if a.Origin.Offset != b.Origin.Offset {
			return a.Origin.Offset < b.Origin.Offset
		}
	}
	if a.Partition != b.Partition {
		return a.Partition < b.Partition
	}
	return a.Offset < b.Offset
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
	if o.Audit == nil || o.DryRun {
		return nil
	}
	details["plan"] = f.Hash
	details["dlq"] = f.Plan.DLQ
	_, err := o.Audit.Append(context.WithoutCancel(ctx), audit.Entry{Actor: o.Actor, Action: action, Context: o.Context, Target: f.Hash, Details: details})
	var se *audit.SinkError
	if err != nil && !errors.As(err, &se) {
		return &Refusal{Reason: ErrAuditUnwritable, Detail: fmt.Sprintf("audit log: %v: a write that cannot be recorded does not go on", err)}
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

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
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
