package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/redrive/sor"
)

// RabbitRedrive is the redrive actions on one RabbitMQ context: what
// `berth redrive plan|approve|execute|status` and the console's queue
// pages call, so the two cannot disagree about a plan, store plans in the
// same redrive store and audit the same entries. The AMQP client and the
// redrive store (ledger, plans, signatures) are opened by the caller and
// passed in: they are I/O; what is allowed is decided here.
type RabbitRedrive struct {
	// Config holds the redrive policies and redrive.plan_max_age.
	Config *config.Config
	// ReadOnly refuses every write (storing a plan, approve, execute).
	ReadOnly bool
	// Context names the Berth context in the audit log.
	Context string
	// OpenAudit opens the audit log named by an --audit-file value ("" for
	// the configured one), mirrored off the machine.
	OpenAudit func(file string) (*audit.Log, error)
	// Warn receives notes and warnings (audit mirror failures, what a
	// browse could not check); nil discards them.
	Warn io.Writer
	Now  func() time.Time
}

func (r *RabbitRedrive) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *RabbitRedrive) warn(format string, a ...any) {
	if r.Warn != nil {
		fmt.Fprintf(r.Warn, format+"\n", a...)
	}
}

// ConsolePlanFile is the audit entry's "file" for a plan made in the
// console (as for Kafka plans made there).
const ConsolePlanFile = "(console)"

// Extractors are where the policy for dlq finds ids and error texts.
func (r *RabbitRedrive) Extractors(dlq string) rabbitmq.Extractors {
	pol, _ := r.Config.RedrivePolicyFor(dlq)
	return rabbitmq.Extractors{IdempotencyKey: pol.IdempotencyKey, ErrorHeader: pol.ErrorHeader, OrderingKey: pol.OrderingKey}
}

// PolicySnapshot is the policy a plan records when it is made.
func PolicySnapshot(p config.RedrivePolicy, matched bool) redrive.PolicySnapshot {
	s := redrive.PolicySnapshot{IdempotencyKey: p.IdempotencyKey, RequireIdempotencyKey: p.RequireIdempotencyKey, Review: p.Review, Approvals: p.Approvals, MaxRedrives: p.MaxRedrives,
		OrderingKey: p.OrderingKey}
	if matched {
		s.Match = p.Match
	}
	if s.IdempotencyKey == "" {
		s.IdempotencyKey = redrive.DefaultEventID
	}
	if s.Review == "" {
		s.Review = "none"
	}
	s.SystemOfRecord = sorSnapshot(p.SystemOfRecord)
	return s
}

// RabbitPlanInput is what a RabbitMQ plan is made from, on the command
// line (`berth redrive plan`) or in the console.
type RabbitPlanInput struct {
	DLQ  string
	Sel  redrive.QueueSelection
	Read int // messages browsed
	// QueueType is the DLQ's type when there is no management API.
	QueueType string
	// Accept accepts a quorum DLQ's requeue side effects.
	Accept       bool
	AllowHazards bool
	Rate, Window int
	ToQueue      bool
	Author       string
	// seen is shown every message selected (PlanReviewed judges classes).
	seen func(rabbitmq.Message)
}

// Browse reads a DLQ without consuming it, with the policy's extractors.
func (r *RabbitRedrive) Browse(ctx context.Context, cl RabbitClient, dlq string, limit int, queueType string, accept bool) (rabbitmq.BrowseResult, error) {
	return cl.Browse(ctx, dlq, r.browseOptions(dlq, limit, queueType, accept))
}

// BrowseEach is Browse handing each message to each as it is read (kept
// nowhere).
func (r *RabbitRedrive) BrowseEach(ctx context.Context, cl RabbitClient, dlq string, limit int, queueType string, accept bool, each func(rabbitmq.Message) error) (rabbitmq.BrowseResult, error) {
	return cl.BrowseEach(ctx, dlq, r.browseOptions(dlq, limit, queueType, accept), each)
}

func (r *RabbitRedrive) browseOptions(dlq string, limit int, queueType string, accept bool) rabbitmq.BrowseOptions {
	return rabbitmq.BrowseOptions{Limit: limit, QueueType: queueType, AcceptQuorumSideEffects: accept, Extractors: r.Extractors(dlq), Waiting: r.waiting}
}

// waiting says that a browse waits for the broker (it puts back what the
// browse read before the command goes on).
func (r *RabbitRedrive) waiting(line string) { r.warn("note: %s", sanitize.Text(line)) }

// MakePlan browses the DLQ and makes a checked plan (ledger, system of
// record, loop guard, duplicates, ordering by business key: the pure checks
// of redrive.MakeQueuePlan), written and stored nowhere yet. The browse
// result is returned once the browse has succeeded, even when planning then
// fails (its Method is empty when the browse itself failed).
func (r *RabbitRedrive) MakePlan(ctx context.Context, cl RabbitClient, l RabbitStore, in RabbitPlanInput) (redrive.QueuePlan, rabbitmq.BrowseResult, error) {
	// Refused before the browse marks every message redelivered.
	if err := redrive.CheckBatch(in.Window); err != nil {
		return redrive.QueuePlan{}, rabbitmq.BrowseResult{}, BadRequest("--batch-size: %v", err)
	}
	// The browse hands over one message at a time and only the selected
	// ones' records are kept (their repeated strings shared): a DLQ of a
	// million messages is planned without holding a million bodies,
	// header tables or facts.
	b, err := redrive.NewQueuePlanner(in.Sel)
	if err != nil {
		return redrive.QueuePlan{}, rabbitmq.BrowseResult{}, err
	}
	if q, err := cl.Depth(ctx, in.DLQ); err == nil && q.Ready != nil && *q.Ready > 0 {
		// Room for every record the browse can read (the ready messages) at
		// once; only what is filled is touched. Grown by appending, a
		// million records (160 MB) were copied a dozen times, old and new
		// arrays held at once, and the freed arrays left the heap too
		// fragmented to reuse: 610 MiB of peak RSS for 250 MB live.
		b.Reserve(min(int(*q.Ready), in.Read))
	}
	read := 0
	res, err := cl.BrowseEach(ctx, in.DLQ, r.browseOptions(in.DLQ, in.Read, in.QueueType, in.Accept),
		func(msg rabbitmq.Message) error {
			read++
			if b.Add(msg.Facts()) && in.seen != nil {
				in.seen(msg)
			}
			return nil
		})
	if err != nil {
		return redrive.QueuePlan{}, rabbitmq.BrowseResult{}, err
	}
	selected := b.Selected()
	if err := truncated(res, read, selected, in); err != nil {
		return redrive.QueuePlan{}, res, err
	}
	ci := redrive.QueueCheckInput{AllowHazards: in.AllowHazards}
	if len(selected) == 0 {
		return redrive.QueuePlan{}, res, nothingSelected(in.Sel.Flags(), in.DLQ)
	}
	ids := make([]string, len(selected))
	var keys []string
	for i := range selected {
		ids[i] = selected[i].EventID
		if k := selected[i].IdempotencyKey; k != "" {
			keys = append(keys, k)
		}
	}
	if ci.Redriven, err = l.RedrivenAmongIDs(ctx, ids); err != nil {
		return redrive.QueuePlan{}, res, err
	}
	ids = nil
	pol, matched := r.Config.RedrivePolicyFor(in.DLQ)
	if pol.SystemOfRecord != nil {
		ci.HasSOR = true
		ci.Committed, ci.SORErr = sorLookup(ctx, *pol.SystemOfRecord, keys)
	}
	keys = nil
	snap := PolicySnapshot(pol, matched)
	// The key field exactly as configured: with none, a message's key is its
	// message_id (rabbitmq.ToMessage), not the json:eventId a snapshot would
	// show, and execute derives keys and event ids with this value.
	snap.IdempotencyKey = pol.IdempotencyKey
	p := b.Plan(snap, ci, r.now())
	if !res.Complete && pol.OrderingKey != "" {
		r.warn("note: ordering was checked among the messages read only; later messages are newer and cannot be overtaken")
	}
	if res.Unseen != nil {
		r.warn("note: the plan could not include what it could not read of %s: %s", sanitize.Text(in.DLQ), res.Unseen)
	}
	p.Cluster, p.Vhost, p.DLQ, p.QueueType = cl.ClusterName(), cl.Vhost(), in.DLQ, res.Type
	p.Rate, p.Window, p.AcceptQuorumSideEffects = in.Rate, in.Window, in.Accept
	if in.ToQueue {
		p.ToQueues()
	}
	p.Author = in.Author
	// Final: hashed once here, not each time the hash is asked for.
	p.Seal()
	return p, res, nil
}

// RabbitReview is what a review derives from a RabbitMQ plan's DLQ as it
// is now, by event id.
type RabbitReview struct {
	// Changed were found with other content; Gone were not found.
	Changed, Gone []string
	// NotVisible were not found while other consumers held messages of the
	// DLQ unacknowledged, which a browse cannot see: any of them may be
	// one of those, so none is called gone (it is none of Gone).
	NotVisible []string
	// AlreadySent counts the records not found that this plan sent (the
	// ledger has them confirmed): its run acked them from the DLQ. They
	// are none of Gone and NotVisible.
	AlreadySent int
	// Complete is set when the browse read the whole DLQ (when it did not,
	// a record not found may lie past what was read).
	Complete bool
	// Unseen says in one line what the review could not see and why (""
	// when nothing).
	Unseen string
	// Warnings name each permanent class the plan includes (DeriveReview).
	Warnings []string
}

// Derive re-reads a plan's DLQ (a browse, as `berth dlq show` reads it)
// and fills what a reviewer sees of each record (event id source,
// idempotency key, class, origin, prior redrives, ordering key) from its
// message as it is now, with the plan's policy; the class with today's
// error_header. It returns the event ids whose message changed, those not
// found (gone, or not visible when other consumers held messages), and
// whether the browse read the whole DLQ. A quorum DLQ is read (each
// message moved to the back, its delivery count + 1) only with accept and
// the plan's acceptance, never in a read-only context: otherwise the browse
// refuses (*rabbitmq.RefusedError) and nothing is touched.
func (r *RabbitRedrive) Derive(ctx context.Context, cl RabbitClient, p *redrive.QueuePlan, accept bool) (RabbitReview, error) {
	return r.derive(ctx, cl, nil, p, accept, nil)
}

// derive is Derive showing seen (when not nil) every message browsed;
// with a ledger l, the records not found that the plan sent are counted
// as such (AlreadySent), not as gone or not visible.
func (r *RabbitRedrive) derive(ctx context.Context, cl RabbitClient, l RabbitLedger, p *redrive.QueuePlan, accept bool, seen func(rabbitmq.Message)) (RabbitReview, error) {
	limit := r.reviewLimit(ctx, cl, *p)
	x := r.Extractors(p.DLQ)
	x.IdempotencyKey, x.OrderingKey = p.Policy.IdempotencyKey, p.Policy.OrderingKey
	// Each message is matched as it is read and only what a record keeps
	// of it stays: a review of a DLQ of a million messages holds the plan
	// and an index of its event ids, not the messages.
	d := p.Deriver()
	res, err := cl.BrowseEach(ctx, p.DLQ, rabbitmq.BrowseOptions{Limit: limit, QueueType: p.QueueType, AcceptQuorumSideEffects: accept && p.AcceptQuorumSideEffects && !r.ReadOnly, Extractors: x, Waiting: r.waiting},
		func(m rabbitmq.Message) error {
			if seen != nil {
				seen(m)
			}
			d.Add(m.Facts())
			return nil
		})
	if err != nil {
		return RabbitReview{}, err
	}
	changed, gone := d.Result()
	rv := RabbitReview{Changed: changed, Complete: res.Complete}
	if l != nil && len(gone) > 0 {
		// A message its run sent was acked from the DLQ: not found, and
		// neither gone nor held by anyone.
		states, err := l.PlanStates(ctx, p.Hash())
		if err != nil {
			return RabbitReview{}, err
		}
		kept := gone[:0]
		for _, id := range gone {
			if states[id] == rabbitmq.StateConfirmed {
				rv.AlreadySent++
				continue
			}
			kept = append(kept, id)
		}
		gone = kept
	}
	rv.Gone = gone
	if u := res.Unseen; u != nil {
		rv.Unseen = fmt.Sprintf("the review of %s: %s", sanitize.Text(p.DLQ), u)
		if len(gone) > 0 {
			rv.Unseen += fmt.Sprintf("; the %d record(s) not found are not visible, not gone", len(gone))
		}
		rv.NotVisible, rv.Gone = gone, nil
	}
	return rv, nil
}

// RabbitSummary is what a reviewer of a RabbitMQ plan is asked to sign, as
// Kafka's Summary: counts per target ("exchange -> routing key") and the
// idempotency keys of the included messages, derived from the messages;
// the event ids whose message changed or is gone.
type RabbitSummary struct {
	Targets []TargetCount `json:"targets"`
	Keys    []string      `json:"idempotency_keys"`
	Changed []string      `json:"changed"`
	Gone    []string      `json:"gone"`
}

// RabbitTarget names a record's target for people.
func RabbitTarget(exchange, key string) string {
	if exchange == "" && key == "" {
		return "(none)"
	}
	if exchange == "" {
		return "(default exchange) -> " + key
	}
	return exchange + " -> " + key
}

// SummariseRabbit counts a (derived) plan per target and lists its keys.
func SummariseRabbit(p redrive.QueuePlan, changed, gone []string) RabbitSummary {
	s := RabbitSummary{Changed: append([]string{}, changed...), Gone: append([]string{}, gone...)}
	unread := make(map[string]bool, len(changed)+len(gone))
	for _, id := range append(append([]string(nil), changed...), gone...) {
		unread[id] = true
	}
	s.Targets, s.Keys = summarise(len(p.Records), func(i int) (string, bool, string, bool) {
		r := p.Records[i]
		return RabbitTarget(r.Exchange(), r.RoutingKey()), r.Included, r.IdempotencyKey, !unread[r.EventID]
	})
	return s
}

// ErrSelectionTooLarge means the DLQ holds more messages than were read, and
// the selection could reach past them; a plan is never made from a part
// of what was asked for.
var ErrSelectionTooLarge = errors.New("the selection reaches past the messages read")

// truncated refuses a plan whose selection might include messages the
// browse did not reach: anything but event ids that were all found.
func truncated(res rabbitmq.BrowseResult, read int, selected []redrive.QueueRecord, in RabbitPlanInput) error {
	if res.Complete {
		return nil
	}
	s := in.Sel
	if !s.All && len(s.Classes) == 0 && len(s.Reasons) == 0 && len(s.OriginalQueues) == 0 {
		// Selected by event id alone: the messages selected are those
		// read with the ids asked for.
		found := map[string]bool{}
		for _, r := range selected {
			found[r.EventID] = true
		}
		missing := 0
		for _, id := range s.EventIDs {
			if !found[id] {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
	}
	return Refuse(ErrSelectionTooLarge, "%s holds more than the %d messages read and the selection may reach past them: raise --read (nothing planned)", in.DLQ, read)
}

// RecordedPlan is what RecordPlan did with a plan just made.
type RecordedPlan struct {
	AuthorKey string
	Stored    bool
	// StoreNote says why the plan was not stored ("" when it was).
	StoreNote string
}

// RecordPlan records a plan just made: its audit entry (redrive.plan)
// first, then, unless the context is read-only, the plan and its author's
// signature (when given) in the redrive store. A plan the audit log cannot
// record is refused with nothing stored, as approve and execute refuse (it
// was stored and the failure only warned, exit 0). file is where the plan
// is written (ConsolePlanFile for the console).
func (r *RabbitRedrive) RecordPlan(ctx context.Context, l RabbitStore, p redrive.QueuePlan, sig *approval.Signature, file, auditFile string) (RecordedPlan, error) {
	var out RecordedPlan
	if sig != nil {
		out.AuthorKey = sig.Fingerprint
	}
	blocked, _ := p.Blocked()
	if err := r.Audit(ctx, auditFile, "redrive.plan", p.Hash(), map[string]any{"dlq": p.DLQ, "vhost": p.Vhost, "author": p.Author, "author_key": out.AuthorKey,
		"totals": p.Totals(), "blocked": blocked, "store": !r.ReadOnly, "file": file}); err != nil {
		return out, Refuse(ErrAuditUnwritable, "%v; nothing stored", err)
	}
	if r.ReadOnly {
		// Nothing is written to the store, the author's signature
		// included: it is in the plan file.
		out.StoreNote = "read-only context: the plan was written to the file only"
		if file == ConsolePlanFile {
			out.StoreNote = "read-only context: the plan was not stored"
		}
		return out, nil
	}
	err := l.PutPlan(ctx, p)
	if err == nil && sig != nil {
		err = l.AddSignature(ctx, *sig)
	}
	if err != nil {
		out.StoreNote = "not stored: " + err.Error()
		r.AuditOrWarn(ctx, auditFile, "redrive.plan.not_stored", p.Hash(), map[string]any{"dlq": p.DLQ, "error": err.Error()})
		return out, nil
	}
	out.Stored = true
	return out, nil
}

// sorLookup asks the system of record about keys; an error is kept, never
// read as "not applied".
func sorLookup(ctx context.Context, s config.SystemOfRecord, keys []string) (map[string]bool, error) {
	look, err := sor.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	defer look.Close()
	return look.Committed(ctx, keys)
}

// Review is the review a plan needs today, the stricter of the plan's
// policy and the configured one: required approvals and the allowed
// signers (nil when none are configured).
func (r *RabbitRedrive) Review(p redrive.QueuePlan) (n int, signers approval.AllowedSigners, required bool, err error) {
	pol, _ := r.Config.RedrivePolicyFor(p.DLQ)
	required = p.Policy.Review == "required" || pol.Review == "required"
	if !required {
		return 0, nil, false, nil
	}
	n = max(p.Policy.Approvals, pol.Approvals, 1)
	if pol.AllowedSigners == "" {
		return n, nil, true, nil
	}
	s, err := approval.LoadAllowedSigners(pol.AllowedSigners)
	return n, s, true, err
}

// signersToEdit names the file to edit when a review has no signers.
func (r *RabbitRedrive) signersToEdit(p redrive.QueuePlan) string {
	pol, ok := r.Config.RedrivePolicyFor(p.DLQ)
	return SignersToEdit(p.DLQ, pol, ok, r.Config.Source)
}

// Decision applies the two-person rule to a plan whose policy requires
// review.
func (r *RabbitRedrive) Decision(ctx context.Context, l RabbitStore, p redrive.QueuePlan) (approval.Decision, bool, error) {
	n, signers, required, err := r.Review(p)
	if err != nil || !required {
		return approval.Decision{Approved: !required, Approvers: []string{}}, required, err
	}
	if signers == nil {
		return approval.Decision{Required: n, Approvers: []string{}, Reason: "no approval can be verified: " + r.signersToEdit(p)}, true, nil
	}
	author, approvals, err := l.Signatures(ctx, p.Hash())
	if err != nil {
		return approval.Decision{}, true, err
	}
	return approval.Evaluate(p.Subject(), author, approvals, signers, n, r.now()), true, nil
}

// Approve stores an approval over a plan: it refuses, storing nothing (and
// saying so), a
// read-only context, a plan made on another cluster than cl's (audited
// redrive.refused, as on Kafka), a plan whose review has no allowed_signers
// to verify against, the author's key or principal and a key
// allowed_signers does not list; then it audits redrive.approved. It
// returns the verified principal, the decision now and the approvals
// required.
func (r *RabbitRedrive) Approve(ctx context.Context, cl RabbitClient, l RabbitStore, p redrive.QueuePlan, sig approval.Signature, auditFile string) (string, approval.Decision, int, error) {
	hash := p.Hash()
	if r.ReadOnly {
		return "", approval.Decision{}, 0, Refuse(ErrReadOnly, "the context is read-only: an approval is written to the plan store; nothing stored")
	}
	placeErr := vhostRefusal(cl, p)
	if here := cl.ClusterName(); here != p.Cluster {
		placeErr = approveClusterRefusal(hash, p.Cluster, here)
	}
	if err := placeErr; err != nil {
		if aerr := r.Audit(ctx, auditFile, "redrive.refused", hash, map[string]any{"dlq": p.DLQ, "reason": err.Error()}); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return "", approval.Decision{}, 0, err
	}
	if err := futureApproval(hash, p.CreatedAt, r.now()); err != nil {
		r.AuditOrWarn(ctx, auditFile, "redrive.refused", hash, map[string]any{"dlq": p.DLQ, "reason": err.Error()})
		return "", approval.Decision{}, 0, err
	}
	if sig.PlanHash != hash {
		return "", approval.Decision{}, 0, Refuse(ErrSignature, "the signature is over plan %s, not %s; nothing stored", redrive.ShortHash(sig.PlanHash), redrive.ShortHash(hash))
	}
	author, approvals, err := l.Signatures(ctx, hash)
	if err != nil {
		return "", approval.Decision{}, 0, err
	}
	// The author's own key is refused before anything else is asked (on
	// Kafka it is known once the signature verifies): the same refusal.
	if err := twoPersonRule(p.Subject(), author, sig.Fingerprint, "", nil, r.now()); err != nil {
		return "", approval.Decision{}, 0, err
	}
	n, signers, required, err := r.Review(p)
	if err != nil {
		return "", approval.Decision{}, 0, err
	}
	if required && signers == nil {
		// Nothing to verify an approval against: storing it would show an
		// approval that execute refuses to count (as for Kafka plans).
		return "", approval.Decision{}, 0, noSigners(r.signersToEdit(p), "nothing stored")
	}
	principal := ""
	if signers != nil {
		v, err := approval.Verify(p.Subject(), sig, signers, r.now())
		if err != nil {
			return "", approval.Decision{}, 0, Refuse(ErrSignature, "%v; nothing stored", err)
		}
		principal = v.Principal
		if err := twoPersonRule(p.Subject(), author, v.Fingerprint, principal, signers, r.now()); err != nil {
			return "", approval.Decision{}, 0, err
		}
	}
	dec := approval.Decision{Approved: !required, Approvers: []string{}}
	if required {
		dec = approval.Evaluate(p.Subject(), author, append(approvals, sig), signers, n, r.now())
	}
	// Recorded first, as on Kafka: an approval the audit log cannot hold is
	// not stored (it was stored, then the audit failed).
	if err := r.Audit(ctx, auditFile, "redrive.approved", hash, map[string]any{"dlq": p.DLQ, "signer": principal, "fingerprint": sig.Fingerprint, "approved": dec.Approved}); err != nil {
		return "", approval.Decision{}, 0, Refuse(ErrAuditUnwritable, "%v; nothing stored", err)
	}
	if err := l.AddSignature(ctx, sig); err != nil {
		r.AuditOrWarn(ctx, auditFile, "redrive.approve.failed", hash, map[string]any{"dlq": p.DLQ, "signer": principal, "error": err.Error()})
		return "", approval.Decision{}, 0, err
	}
	return principal, dec, n, nil
}

// SignAsAuthor adds the author's signature to a stored plan that has none
// (the console's plans; `berth redrive plan --key` signs in one step). An
// approver cannot become the author.
func (r *RabbitRedrive) SignAsAuthor(ctx context.Context, l RabbitStore, p redrive.QueuePlan, sig approval.Signature) error {
	if r.ReadOnly {
		return Refuse(ErrReadOnly, "the context is read-only; nothing stored")
	}
	h := p.Hash()
	if sig.PlanHash != h || sig.Role != approval.RoleAuthor {
		return Refuse(ErrSignature, "not an author's signature over plan %s", redrive.ShortHash(h))
	}
	author, approvals, err := l.Signatures(ctx, h)
	if err != nil {
		return err
	}
	if author != nil {
		return Refuse(ErrSignature, "plan %s is already signed by its author (%s); nothing stored", redrive.ShortHash(h), author.Fingerprint)
	}
	if err := approverAsAuthor(h, approvals, sig); err != nil {
		return err
	}
	// Recorded first, as on Kafka: a signature the audit log cannot hold
	// is not stored (it was stored, and the failure only warned).
	if err := r.Audit(ctx, "", "redrive.plan.signed", h, map[string]any{"dlq": p.DLQ, "author": p.Author, "author_key": sig.Fingerprint}); err != nil {
		return Refuse(ErrAuditUnwritable, "%v; nothing stored", err)
	}
	return l.AddSignature(ctx, sig)
}

// Preflight decides whether a plan may run now, for `berth redrive
// execute` and the console alike: read-only context, age, blocked checks,
// today's approvals, and the checks again (recheck: the ledger always;
// what messages derive to only for a plan derived by DryRun, since a run
// checks each message as it consumes it); what they now exclude is
// returned as skip. Every refusal is audited (redrive.refused) and returned
// as a *Refusal.
//
// With audited false nothing is written: the console asks it for the reason
// an action is disabled, which is not an attempt to run.
func (r *RabbitRedrive) Preflight(ctx context.Context, l RabbitStore, p redrive.QueuePlan, actor, auditFile string, audited bool) (approval.Decision, map[string]redrive.Verdict, error) {
	hash := p.Hash()
	refuseErr := func(err error) error {
		if audited {
			r.AuditOrWarn(ctx, auditFile, "redrive.refused", hash, map[string]any{"dlq": p.DLQ, "reason": err.Error(), "actor": actor})
		}
		return err
	}
	refuse := func(reason error, format string, a ...any) error {
		return refuseErr(Refuse(reason, format, a...))
	}
	if r.ReadOnly {
		return approval.Decision{}, nil, refuse(ErrReadOnly, "the context is read-only")
	}
	if ahead := p.CreatedAt.Sub(r.now()); ahead > ClockMargin {
		// A plan dated ahead of this clock would never expire.
		return approval.Decision{}, nil, refuse(ErrPlanFromFuture, "plan %s claims to be made %s from now (more than %s ahead of this clock): make a new one", redrive.ShortHash(hash), ahead.Round(time.Second), ClockMargin)
	}
	if maxAge := r.Config.Redrive.PlanMaxAge; maxAge > 0 {
		if age := r.now().Sub(p.CreatedAt); age > maxAge {
			return approval.Decision{}, nil, refuse(ErrPlanExpired, "plan %s is %s old (redrive.plan_max_age %s): make a new one", redrive.ShortHash(hash), age.Round(time.Minute), maxAge)
		}
	}
	if blocked, why := p.Blocked(); blocked {
		return approval.Decision{}, nil, refuse(ErrPlanBlocked, "plan %s is blocked (a check could not run): %s; make the plan again", redrive.ShortHash(hash), why)
	}
	// The same words as Kafka's for a review no approval can pass (no
	// allowed signer, or their file unreadable).
	if _, signers, required, err := r.Review(p); err != nil {
		return approval.Decision{}, nil, refuseErr(fmt.Errorf("%w: nothing sent", err))
	} else if required && len(signers) == 0 {
		return approval.Decision{Approvers: []string{}}, nil, refuseErr(noSigners(r.signersToEdit(p), "nothing sent"))
	}
	dec, required, err := r.Decision(ctx, l, p)
	if err != nil {
		return dec, nil, err
	}
	if required && !dec.Approved {
		why := dec.Reason
		if len(dec.Refused) > 0 {
			why += " (" + strings.Join(dec.Refused, "; ") + ")"
		}
		return dec, nil, refuse(ErrNotApproved, "plan %s is not approved: %s", redrive.ShortHash(hash), why)
	}
	// The checks run again with today's data: the ledger (an event another
	// plan redrove meanwhile) and the system of record (an effect committed
	// meanwhile). An unreachable system of record refuses the run.
	skip, err := r.recheck(ctx, l, p)
	if err != nil {
		return dec, nil, refuse(ErrPlanBlocked, "%v", err)
	}
	return dec, skip, nil
}

// DryRun is the preflight of a run that sends nothing yet: the plan's
// messages are read again (Derive) so that every check runs over what they
// derive to now, and a message whose content changed is skipped as execute
// would skip it. The plan's records are left derived.
func (r *RabbitRedrive) DryRun(ctx context.Context, cl RabbitClient, l RabbitStore, p *redrive.QueuePlan, actor, auditFile string, audited bool) (approval.Decision, map[string]redrive.Verdict, error) {
	if mismatch := clusterMismatch(cl, *p); mismatch != "" {
		return approval.Decision{}, nil, Refuse(ErrClusterMismatch, "plan %s %s", redrive.ShortHash(p.Hash()), mismatch)
	}
	// Executing the plan consumes the DLQ with the side effects it
	// accepted: its dry run may browse with them.
	rv, err := r.Derive(ctx, cl, p, true)
	if err != nil {
		return approval.Decision{}, nil, err
	}
	changed := rv.Changed
	dec, skip, err := r.Preflight(ctx, l, *p, actor, auditFile, audited)
	if err != nil {
		return dec, skip, err
	}
	// A message not found is not skipped here: an earlier run may have sent
	// it (the ledger says so at execute), or it is briefly unacked.
	for _, id := range changed {
		skip[id] = redrive.Verdict{Reason: ReasonChanged, Detail: "the DLQ holds a message with this id whose body, properties or headers differ from the plan's"}
	}
	return dec, skip, nil
}

// Run sends a plan that passed Preflight, for the command line and the
// console: it refuses a plan made against another server, audits the
// start (nothing is sent unless the start is on record), executes (o.Skip
// and StopOnFailure come from the preflight and today's policy), audits
// each chunk and the end. The caller audits the verification
// (AuditVerified) once any re-failure watch is over. cancelled reports,
// after the run, whether the operator stopped it.
func (r *RabbitRedrive) Run(ctx context.Context, cl RabbitTransport, l RabbitLedger, p redrive.QueuePlan, dec approval.Decision, skip map[string]redrive.Verdict,
	actor, auditFile string, o RabbitExecOptions, cancelled func() bool) (RabbitResult, error) {
	hash := p.Hash()
	if mismatch := clusterMismatch(cl, p); mismatch != "" {
		err := Refuse(ErrClusterMismatch, "plan %s %s", redrive.ShortHash(hash), mismatch)
		r.AuditOrWarn(ctx, auditFile, "redrive.refused", hash, map[string]any{"dlq": p.DLQ, "reason": err.Error(), "actor": actor})
		return RabbitResult{Plan: hash}, err
	}
	pol, _ := r.Config.RedrivePolicyFor(p.DLQ)
	o.StopOnFailure = pol.StopOnFailure || pol.RequireIdempotencyKey
	o.Skip = skip
	// The checks that need what a message derives to run as it is
	// consumed, over each chunk (no second read of the DLQ).
	adm := r.admission(p, skip)
	defer adm.close()
	record := func(ctx context.Context, action string, details map[string]any) error {
		details["dlq"], details["actor"] = p.DLQ, actor
		return r.Audit(ctx, auditFile, action, hash, details)
	}
	if err := record(ctx, "redrive.execute.started", map[string]any{"records": len(p.Records), "totals": p.Totals(), "approvers": dec.Approvers}); err != nil {
		return RabbitResult{Plan: hash}, Refuse(ErrAuditUnwritable, "%v: nothing sent", err)
	}
	// Every chunk is on record before its DLQ copies are acked, under the
	// names Kafka's batches use.
	o.Settled = func(ctx context.Context, confirmed []rabbitmq.LedgerEntry, failed []RabbitFailure) error {
		if len(failed) > 0 {
			if err := record(ctx, "redrive.batch.failed", map[string]any{"records": len(failed), "error": failed[0].Error}); err != nil {
				return err
			}
		}
		if len(confirmed) == 0 {
			return nil
		}
		return record(ctx, "redrive.batch.sent", map[string]any{"records": len(confirmed), "first": confirmed[0].EventID, "last": confirmed[len(confirmed)-1].EventID})
	}
	res, err := executeRabbit(ctx, cl, p, l, adm, o)
	err = dlqGone(hash, p.DLQ, err)
	stopped := cancelled()
	status := "finished"
	switch {
	case stopped || res.Stopped == RabbitCancelled:
		// An interrupt ends Execute with the context's error: still a stop
		// the operator asked for, not a failure.
		status = "cancelled"
	case err != nil:
		status = "failed"
	}
	// The end is on record even when interrupted (see afterStop).
	endCtx, endCancel := afterStop(ctx)
	defer endCancel()
	// The counts under Kafka's names; what only RabbitMQ has under the
	// names the CLI's "rabbitmq" extras use.
	end := RabbitOutcome(res).details(err)
	end["resent"], end["returned"] = res.Resent, res.Returned
	if res.Stopped != "" {
		end["stopped"] = res.Stopped
	}
	if err := record(endCtx, "redrive.execute."+status, end); err != nil {
		r.warn("warning: %v", err)
	}
	return res, err
}

// AuditVerified records what the run's verification found (the DLQ depth
// check and, when the DLQ was watched, the re-failures) as redrive.verified,
// the entry Kafka's read-back writes.
func (r *RabbitRedrive) AuditVerified(ctx context.Context, auditFile string, p redrive.QueuePlan, v *RabbitVerification, watchErr error) {
	if v == nil {
		return
	}
	vctx, vcancel := afterStop(ctx)
	defer vcancel()
	r.AuditOrWarn(vctx, auditFile, "redrive.verified", p.Hash(), map[string]any{"dlq": p.DLQ, "ok": v.OK, "depth_before": v.DepthBefore,
		"depth_after": v.DepthAfter, "acked": v.Acked, "returned": v.Returned, "problem": v.Problem, "watched": v.Watched, "refailed": len(v.Refailed),
		"watch_error": rabbitErrText(watchErr)})
}

// clusterMismatch says why p was made elsewhere ("" when it was made on
// cl's cluster): by cluster name, reached through any address.
func clusterMismatch(cl interface {
	ClusterName() string
	Vhost() string
}, p redrive.QueuePlan) string {
	if name := cl.ClusterName(); name != p.Cluster {
		return fmt.Sprintf("was made on cluster %q, this context is cluster %q", p.Cluster, name)
	}
	if here := cl.Vhost(); here != p.Vhost {
		return fmt.Sprintf("was made in vhost %q, this connection is to vhost %q", p.Vhost, here)
	}
	return ""
}

// recheck runs the checks again before a run: the ledger for every
// included record (its event id is in the plan), and, for records derived
// from the messages read now (a dry run: Derive), the checks on what they
// derive to. A run does the latter over each chunk as consumed
// (recheckMessages). What they now exclude is skipped.
func (r *RabbitRedrive) recheck(ctx context.Context, l RabbitStore, p redrive.QueuePlan) (map[string]redrive.Verdict, error) {
	skip := map[string]redrive.Verdict{}
	var ids []string
	var derived []redrive.QueueMessage
	for _, rec := range p.Records {
		if !rec.Included {
			continue
		}
		ids = append(ids, rec.EventID)
		if rec.Derived {
			derived = append(derived, redrive.QueueMessage{EventID: rec.EventID, IdempotencyKey: rec.IdempotencyKey, PriorRedrives: rec.PriorRedrives})
		}
	}
	byOthers, err := l.ConfirmedAmong(ctx, ids, p.Hash())
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if e, ok := byOthers[id]; ok {
			skip[id] = redrive.Verdict{Reason: redrive.ReasonAlreadyRedriven, Detail: fmt.Sprintf("redriven meanwhile from %s by plan %s", e.DLQ, redrive.ShortHash(e.Plan))}
		}
	}
	more, err := r.recheckMessages(ctx, p, derived, sorLookup)
	if err != nil {
		return nil, err
	}
	for id, v := range more {
		if _, done := skip[id]; !done {
			skip[id] = v
		}
	}
	return skip, nil
}

// recheckMessages runs the checks on what messages derive to, under the
// stricter of the plan's policy and today's: the loop guard, the
// idempotency key requirement and the system of record (an error there is
// returned: never read as "not applied"), which
// committed asks the system of record.
func (r *RabbitRedrive) recheckMessages(ctx context.Context, p redrive.QueuePlan, msgs []redrive.QueueMessage,
	committed func(context.Context, config.SystemOfRecord, []string) (map[string]bool, error)) (map[string]redrive.Verdict, error) {
	skip := map[string]redrive.Verdict{}
	pol, matched := r.Config.RedrivePolicyFor(p.DLQ)
	maxRedrives := p.Policy.MaxRedrives
	if maxRedrives <= 0 {
		maxRedrives = redrive.DefaultMaxRedrives
	}
	if matched && pol.MaxRedrives > 0 {
		maxRedrives = min(maxRedrives, pol.MaxRedrives)
	}
	requireKey := p.Policy.RequireIdempotencyKey || (matched && pol.RequireIdempotencyKey)
	var keys []string
	for _, m := range msgs {
		switch {
		case m.PriorRedrives >= maxRedrives:
			skip[m.EventID] = redrive.Verdict{Reason: redrive.ReasonLoopLimit, Detail: fmt.Sprintf("redriven %d times before (limit %d under today's policy)", m.PriorRedrives, maxRedrives)}
		case requireKey && m.IdempotencyKey == "":
			skip[m.EventID] = redrive.Verdict{Reason: redrive.ReasonMissingKey, Detail: "today's policy requires an idempotency key and the message has none " + redrive.NoKeyNote}
		case m.IdempotencyKey != "":
			keys = append(keys, m.IdempotencyKey)
		}
	}
	if pol.SystemOfRecord == nil || len(keys) == 0 {
		return skip, nil
	}
	has, err := committed(ctx, *pol.SystemOfRecord, keys)
	if err != nil {
		return nil, fmt.Errorf("system of record: %v (never read as not applied)", err)
	}
	for _, m := range msgs {
		if _, done := skip[m.EventID]; !done && m.IdempotencyKey != "" && has[m.IdempotencyKey] {
			skip[m.EventID] = redrive.Verdict{Reason: redrive.ReasonEffectCommitted, Detail: fmt.Sprintf("the system of record has %s now (committed after the plan was made)", m.IdempotencyKey)}
		}
	}
	return skip, nil
}

// rabbitAdmission is a run's policy (rabbitPolicy, rabbit_run.go): whether the DLQ may be
// consumed at all (Runnable, rabbit_admit.go); as it is consumed in order,
// the signed target against the message's (targets), the checks on what
// each message derives to (recheckMessages, over one system-of-record
// connection for the whole run) and ordering, judged on the messages the
// run passes over and skips (redrive.QueueOrdering).
type rabbitAdmission struct {
	r        *RabbitRedrive
	p        redrive.QueuePlan
	included map[string]*redrive.QueueRecord // the plan's included rows, by event id
	order    *redrive.QueueOrdering
	// settled are event ids whose message, left in the DLQ, was delivered
	// or settled already: no older event of its key waits behind it.
	settled map[string]bool
	look    sor.Lookup
}

func (r *RabbitRedrive) admission(p redrive.QueuePlan, skip map[string]redrive.Verdict) *rabbitAdmission {
	a := &rabbitAdmission{r: r, p: p, order: redrive.NewQueueOrdering(), settled: map[string]bool{}}
	for _, rec := range p.Records {
		if !rec.Included && !redrive.StaysBehind(rec.Reason) {
			a.settled[rec.EventID] = true
		}
	}
	for id, v := range skip {
		if !v.Included && !redrive.StaysBehind(v.Reason) {
			a.settled[id] = true
		}
	}
	return a
}

// PassedOver notes a message left in the DLQ ahead of what follows.
func (a *rabbitAdmission) PassedOver(m redrive.QueueMessage) {
	if !a.settled[m.EventID] {
		a.order.StaysBehind(m.OrderingKey, m.Position)
	}
}

// Admit skips a chunk's messages the plan sends elsewhere than they derive
// to, runs the checks again over the others as consumed, then ordering.
func (a *rabbitAdmission) Admit(ctx context.Context, msgs []redrive.QueueMessage) (map[string]redrive.Verdict, error) {
	match, verdicts := a.targets(msgs)
	checked, err := a.r.recheckMessages(ctx, a.p, match, a.committed)
	if err != nil {
		return nil, err
	}
	for id, v := range checked {
		verdicts[id] = v
	}
	return a.order.Admit(msgs, verdicts, a.p.AllowHazards), nil
}

func (a *rabbitAdmission) committed(ctx context.Context, s config.SystemOfRecord, keys []string) (map[string]bool, error) {
	if a.look == nil {
		l, err := sor.Open(ctx, s)
		if err != nil {
			return nil, err
		}
		a.look = l
	}
	return a.look.Committed(ctx, keys)
}

func (a *rabbitAdmission) close() {
	if a.look != nil {
		a.look.Close()
	}
}

// RabbitSkips lists the included records skip excludes, in plan order.
func RabbitSkips(p redrive.QueuePlan, skip map[string]redrive.Verdict) []RabbitSkip {
	out := []RabbitSkip{}
	for _, rec := range p.Records {
		if v, ok := skip[rec.EventID]; ok && rec.Included {
			out = append(out, RabbitSkip{EventID: rec.EventID, Position: rec.Position, Reason: v.Reason, Detail: v.Detail})
		}
	}
	return out
}

// RabbitWouldSend is what a dry run would send per target (Kafka's
// would_send): the included messages not skipped now.
func RabbitWouldSend(p redrive.QueuePlan, skip map[string]redrive.Verdict) map[string]int {
	out := map[string]int{}
	for _, rec := range p.Records {
		if _, skipped := skip[rec.EventID]; rec.Included && !skipped {
			out[RabbitTarget(rec.Exchange(), rec.RoutingKey())]++
		}
	}
	return out
}

// RabbitStatus is a plan's state as `berth redrive status` shows it.
type RabbitStatus struct {
	Plan  string
	Vhost string
	DLQ   string
	// Author is the verified signer of the author's signature (as today's
	// allowed_signers name it), "(unsigned)" or "(unverified)": never what
	// the plan says about itself. Approvers are the verified approvers.
	Author    string
	Approvers []string
	Created   time.Time
	Included  int
	Excluded  int
	Redriven  int
	Intent    int
	Failed    int
	Approvals int
	Required  int
	Approved  bool
	Reason    string
	State     string
}

// Status is a plan's state from the ledger, its approvals and its age.
func (r *RabbitRedrive) Status(ctx context.Context, l RabbitStore, p redrive.QueuePlan) RabbitStatus {
	hash := p.Hash()
	t := p.Totals()
	row := RabbitStatus{Plan: hash, Vhost: p.Vhost, DLQ: p.DLQ, Author: r.VerifiedAuthor(ctx, l, p), Created: p.CreatedAt, Included: t.Included, Excluded: t.Excluded}
	states, err := l.PlanStateCounts(ctx, hash)
	if err != nil {
		row.State, row.Reason = "error", err.Error()
		return row
	}
	row.Redriven, row.Intent, row.Failed = states[rabbitmq.StateConfirmed], states[rabbitmq.StateIntent], states[rabbitmq.StateFailed]
	dec, required, err := r.Decision(ctx, l, p)
	if err != nil {
		row.State, row.Reason = "error", err.Error()
		return row
	}
	row.Approved, row.Reason, row.Approvers = dec.Approved, dec.Reason, dec.Approvers
	if required {
		row.Required, row.Approvals = dec.Required, len(dec.Approvers)
	}
	blocked, why := p.Blocked()
	row.State = planProgress{Included: t.Included, Redriven: row.Redriven, Started: row.Redriven > 0 || row.Intent > 0 || row.Failed > 0,
		Blocked: blocked, Approved: row.Approved, Created: p.CreatedAt}.state(r.now(), r.Config.Redrive.PlanMaxAge)
	if row.State == "blocked" {
		row.Reason = why
	}
	return row
}

// VerifiedAuthor is who signed p as its author, as today's allowed_signers
// name them: "(unsigned)" without an author signature, "(unverified)" when
// it cannot be verified.
func (r *RabbitRedrive) VerifiedAuthor(ctx context.Context, l RabbitStore, p redrive.QueuePlan) string {
	author, _, err := l.Signatures(ctx, p.Hash())
	switch {
	case err != nil:
		return "(unverified)"
	case author == nil:
		return "(unsigned)"
	}
	pol, _ := r.Config.RedrivePolicyFor(p.DLQ)
	if pol.AllowedSigners == "" {
		return "(unverified)"
	}
	signers, err := approval.LoadAllowedSigners(pol.AllowedSigners)
	if err != nil {
		return "(unverified)"
	}
	v, err := approval.Verify(p.Subject(), *author, signers, r.now())
	if err != nil {
		return "(unverified)"
	}
	return v.Principal
}

// Audit appends to the audit log; a failure to audit is reported (Warn),
// not hidden. The error is returned when the local log could not take the
// entry (a mirror failure only warns: the file has it), so that an action
// that must be audited first can refuse, as on Kafka.
func (r *RabbitRedrive) Audit(ctx context.Context, file, action, target string, details map[string]any) error {
	log, err := r.OpenAudit(file)
	if err == nil {
		_, err = log.Append(ctx, audit.Entry{Action: action, Context: r.Context, Target: target, Details: details})
	}
	if err == nil {
		return nil
	}
	var se *audit.SinkError
	if errors.As(err, &se) {
		r.warn("warning: audit log: %v", err)
		return nil
	}
	// Returned, not also warned: a caller that refuses says it once.
	return fmt.Errorf("audit log: %w", err)
}

// AuditOrWarn appends an entry whose failure must not stop what follows
// (a refusal's, a plan's, the end of a run): it is said as a warning.
func (r *RabbitRedrive) AuditOrWarn(ctx context.Context, file, action, target string, details map[string]any) {
	if err := r.Audit(ctx, file, action, target, details); err != nil {
		r.warn("warning: %v", err)
	}
}

// auditGrace bounds an audit entry written after an interrupt.
const auditGrace = 2 * time.Second

// afterStop is the context for an entry that must be written however the
// run ended: ctx's values without its cancel, and once ctx was cancelled
// (an interrupt) at most auditGrace, so a broker that no longer answers
// cannot hold the exit up (the local log is written before the mirror).
func afterStop(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), auditGrace)
	}
	return context.WithCancel(context.WithoutCancel(ctx))
}

func rabbitErrText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
