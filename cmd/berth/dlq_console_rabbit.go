package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

// The console's RabbitMQ dead-letter pages (tui/dlq's QueueService): the
// same actions as `berth dlq` and `berth redrive` on a RabbitMQ context
// (internal/actions.RabbitRedrive: MakePlan, RecordPlan, Approve,
// SignAsAuthor, Preflight, Run, Status), so the console and the command
// line cannot disagree about a plan, store plans in the same redrive store
// and audit the same entries. Nothing AMQP-shaped is handed
// to tui/: the pages get plain view models.

// openConsoleQueues is the console's tuidlq.QueueOpener (consoleServices).
func openConsoleQueues(c backends.Cluster, _ *config.Config, _ string) (tuidlq.QueueService, error) {
	r, ok := c.(rabbitCluster)
	if !ok || r.a == nil {
		return nil, errors.New("RabbitMQ dead-letter pages need a RabbitMQ context")
	}
	return &consoleQueues{base: r.a, cl: r.c}, nil
}

// consoleActor is who the audit log names for actions taken in the console.
func consoleActor() string { return audit.CurrentUser() + " (console)" }

type consoleQueues struct {
	base *app
	cl   *rabbitmq.Client
}

var _ tuidlq.QueueService = (*consoleQueues)(nil)

// notes collects what the CLI functions write to stderr (browse notes,
// audit-log warnings) for the page to show.
type notes struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (n *notes) Write(b []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.buf.Write(b)
}

func (n *notes) lines() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(n.buf.String()), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// app is a copy of the context's app for one call: the page's read-only
// state, notes collected.
func (s *consoleQueues) app(readOnly bool) (*app, *notes) {
	a := *s.base
	n := &notes{}
	a.readOnly, a.stderr = readOnly, n
	return &a, n
}

func (s *consoleQueues) DLQs(ctx context.Context) ([]tuidlq.QueueDLQ, error) {
	a, _ := s.app(false)
	rows, err := a.rmqDLQRows(ctx, s.cl)
	if err != nil {
		return nil, err
	}
	out := make([]tuidlq.QueueDLQ, len(rows))
	for i, r := range rows {
		d := tuidlq.QueueDLQ{Name: r.DLQ, Vhost: r.Vhost, Type: r.Type, Found: r.Found, Originals: r.OriginalQueues, Depth: r.Depth, OtherVhost: r.Vhost != s.cl.Vhost()}
		if r.HeadAgeSeconds != nil {
			age := time.Duration(*r.HeadAgeSeconds * float64(time.Second))
			d.HeadAge = &age
		}
		out[i] = d
	}
	return out, nil
}

func (s *consoleQueues) Browse(ctx context.Context, dlq string, accept bool) (tuidlq.QueueBrowse, error) {
	a, _ := s.app(false)
	res, err := a.browse(ctx, s.cl, dlq, rabbitDefaultRead, browseFlags{accept: accept})
	var ref *rabbitmq.RefusedError
	if errors.As(err, &ref) {
		return tuidlq.QueueBrowse{}, &tuidlq.BrowseRefusal{Why: ref.Why, CanAccept: ref.Acceptable && !accept}
	}
	if err != nil {
		return tuidlq.QueueBrowse{}, err
	}
	l, err := a.ledger(ctx)
	if err != nil {
		return tuidlq.QueueBrowse{}, err
	}
	defer l.Close()
	done, err := l.RedrivenAmong(ctx, res.Messages)
	if err != nil {
		return tuidlq.QueueBrowse{}, err
	}
	rules, err := a.rabbitRedrive().Rules()
	if err != nil {
		return tuidlq.QueueBrowse{}, err
	}
	b := tuidlq.QueueBrowse{DLQ: dlq, Vhost: res.Vhost, Type: res.Type, Method: res.Method, Complete: res.Complete, Limit: rabbitDefaultRead,
		SideEffects: res.SideEffects, Classes: rabbitmq.Classes(res.Messages, rules), OldestDeath: rabbitmq.OldestDeath(res.Messages)}
	if res.Unseen != nil {
		b.Unseen = res.Unseen.String()
	}
	for _, m := range res.Messages {
		_, redriven := done[m.EventID]
		b.Messages = append(b.Messages, queueMessage(m, redriven))
	}
	return b, nil
}

// queueMessage is a message as the pages show it (raw: they sanitise).
func queueMessage(m rabbitmq.Message, redriven bool) tuidlq.QueueMessage {
	v := tuidlq.QueueMessage{Position: m.Position, MessageID: m.MessageID, CorrelationID: m.CorrelationID, ContentType: m.ContentType,
		EventID: m.EventID, EventIDSource: m.EventIDSource, IdempotencyKey: m.IdempotencyKey, OrderingKey: m.OrderingKey, Class: m.Class,
		OriginalQueue: m.Death.OriginalQueue(), Reason: m.Death.Reason(), Error: m.ErrorHeader, PublisherTimestamp: m.Timestamp,
		FirstDeathQueue: m.Death.FirstDeathQueue, FirstDeathReason: m.Death.FirstDeathReason, FirstDeathExchange: m.Death.FirstDeathExchange,
		DeliveryCount: m.Death.DeliveryCount, Malformed: m.Death.Malformed, Redelivered: m.Redelivered, PriorRedrives: m.PriorRedrives,
		Redriven: redriven, Body: m.Body}
	v.Exchange, v.RoutingKey, _ = m.Death.Target()
	for _, d := range m.Death.Deaths {
		v.Deaths = append(v.Deaths, tuidlq.QueueDeath{Reason: d.Reason, Queue: d.Queue, Exchange: d.Exchange, RoutingKeys: d.RoutingKeys, Count: d.Count, Time: d.Time})
	}
	for _, k := range sortedKeys(m.Headers) {
		if strings.HasPrefix(k, "x-death") {
			continue // shown parsed
		}
		v.Headers = append(v.Headers, tuidlq.QueueHeader{Key: k, Value: []byte(m.Headers[k])})
	}
	return v
}

func (s *consoleQueues) Plan(ctx context.Context, req tuidlq.QueuePlanRequest) (tuidlq.QueuePlan, error) {
	a, n := s.app(req.ReadOnly)
	// Planning browses and asks the system of record: as long as `berth
	// redrive plan` allows it (ten operation timeouts), not one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*a.timeout)
	defer cancel()
	l, err := a.ledger(ctx)
	if err != nil {
		return tuidlq.QueuePlan{}, err
	}
	defer l.Close()
	sel := redrive.QueueSelection{Classes: req.Classes, EventIDs: req.EventIDs}
	rr := a.rabbitRedrive()
	p, res, warnings, err := rr.PlanReviewed(ctx, s.cl, l, actions.RabbitPlanInput{DLQ: req.DLQ, Sel: sel, Read: rabbitDefaultRead, Accept: req.Accept,
		AllowHazards: req.AllowHazards, Rate: actions.DefaultRate, Window: 500, Author: audit.CurrentUser()})
	var ref *rabbitmq.RefusedError
	if errors.As(err, &ref) {
		return tuidlq.QueuePlan{}, errors.New(ref.Why)
	}
	if err != nil {
		return tuidlq.QueuePlan{}, err
	}
	sum, err := a.rmqRecordPlan(ctx, rr, l, p, nil, actions.ConsolePlanFile, "")
	if err != nil {
		return tuidlq.QueuePlan{}, err
	}
	sum.Review = rabbitReviewOf(actions.SummariseRabbit(p, nil, nil), p.Cluster)
	sum.Warnings = warnings
	out := queuePlanView(p, sum)
	out.Notes = append([]string{fmt.Sprintf("read %d message(s) by %s", res.Read, res.Method)}, n.lines()...)
	for _, e := range res.SideEffects {
		out.Notes = append(out.Notes, "side effect: "+e)
	}
	return out, nil
}

// queueReviewOf is a plan's review as the console's plan page shows it.
func queueReviewOf(r *qPlanReview, warnings []string) tuidlq.QueueReview {
	return tuidlq.QueueReview{Targets: r.Targets, Keys: r.Keys, Changed: r.Changed, Gone: r.Gone, NotVisible: r.NotVisible, AlreadySent: r.AlreadySent,
		Unseen: r.Unseen, Derived: true, Warnings: warnings}
}

func queuePlanView(p redrive.QueuePlan, sum qPlanSummary) tuidlq.QueuePlan {
	v := tuidlq.QueuePlan{Hash: sum.Hash, Cluster: p.Cluster, DLQ: p.DLQ, Vhost: p.Vhost, QueueType: p.QueueType, Target: p.Target, Author: p.Author, AuthorKey: sum.AuthorKey,
		CreatedAt: p.CreatedAt, Stored: sum.Stored, StoreNote: sum.StoreNote, Policy: p.Policy, Rate: p.Rate, Window: p.Window, Accept: p.AcceptQuorumSideEffects,
		Totals: p.Totals()}
	v.Blocked, v.BlockedReason = p.Blocked()
	if r := sum.Review; r != nil {
		v.Review = queueReviewOf(r, sum.Warnings)
	}
	for _, r := range p.Records {
		v.Records = append(v.Records, tuidlq.QueuePlanRecord{Position: r.Position, EventID: r.EventID, Class: r.Class(), OriginalQueue: r.OriginalQueue(),
			DeathReason: r.DeathReason(), Exchange: r.Exchange(), RoutingKey: r.RoutingKey(), OrderingKey: r.OrderingKey, Included: r.Included,
			Reason: r.Reason, Detail: r.Detail, HazardPosition: r.HazardPosition})
	}
	return v
}

func (s *consoleQueues) Status(ctx context.Context, readOnly bool) ([]tuidlq.QueuePlanStatus, error) {
	a, _ := s.app(readOnly)
	l, err := a.ledger(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	// A stored plan that cannot be used (a v1 plan, an edited one) is
	// left out here; opening it by its hash says why.
	plans, _, err := l.Plans(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]tuidlq.QueuePlanStatus, len(plans))
	for i, p := range plans {
		out[i] = s.status(ctx, a, l, p, false)
	}
	return out, nil
}

func (s *consoleQueues) PlanStatus(ctx context.Context, hash string, readOnly bool) (tuidlq.QueuePlanStatus, error) {
	a, _ := s.app(readOnly)
	l, err := a.ledger(ctx)
	if err != nil {
		return tuidlq.QueuePlanStatus{}, err
	}
	defer l.Close()
	p, err := l.Plan(ctx, hash)
	if err != nil {
		return tuidlq.QueuePlanStatus{}, err
	}
	// What the page shows of each message is derived from it as it is now
	// (a browse of the DLQ), as `berth redrive show` does.
	review, err := a.rmqDeriveWith(ctx, s.cl, l, &p)
	if err != nil {
		return tuidlq.QueuePlanStatus{}, err
	}
	st := s.status(ctx, a, l, p, true)
	if review != nil {
		st.Plan.Review = queueReviewOf(review, review.Warnings)
	}
	return st, nil
}

// status is `berth redrive status`'s row for a plan, with its signatures
// and, when full, the ledger's state per event and why executing it now
// would be refused (the preflight, not audited: nothing is attempted).
func (s *consoleQueues) status(ctx context.Context, a *app, l *rabbitmq.Ledger, p redrive.QueuePlan, full bool) tuidlq.QueuePlanStatus {
	rr := a.rabbitRedrive()
	row := statusRowOf(rr.Status(ctx, l, p))
	sum := a.rmqPlanSummary(ctx, l, p)
	st := tuidlq.QueuePlanStatus{Plan: queuePlanView(p, sum), Redriven: row.Redriven, Intent: row.Intent, Failed: row.Failed,
		Approvals: row.Approvals, Required: row.Required, Approved: row.Approved, Reason: row.Reason, State: row.State}
	st.Plan.Stored = true
	n, signers, required, serr := rr.Review(p)
	switch {
	case serr != nil:
		st.Policy = "allowed_signers: " + serr.Error()
	case !required:
		st.Policy = "review none"
	default:
		pol, _ := a.cfg.RedrivePolicyFor(p.DLQ)
		file := pol.AllowedSigners
		if file == "" {
			file = "(none configured)"
		}
		st.Policy = fmt.Sprintf("review required, %d approval(s), allowed_signers %s", n, file)
	}
	if !full {
		return st
	}
	if author, approvals, err := l.Signatures(ctx, p.Hash()); err == nil {
		all := approvals
		if author != nil {
			all = append([]approval.Signature{*author}, approvals...)
		}
		st.Signatures = signatureInfos(p.Subject(), author, all, signers, serr)
	}
	if states, err := l.PlanStates(ctx, p.Hash()); err == nil {
		st.States = states
	}
	_, skip, perr := rr.Preflight(ctx, l, p, consoleActor(), "", false)
	switch {
	case perr != nil:
		st.Refusal = strings.TrimPrefix(perr.Error(), "refused: ")
	case p.Totals().Included == 0:
		st.Refusal = "the plan includes no messages"
	case row.State == "done":
		st.Refusal = "nothing left to send: the ledger has every included message confirmed"
	case p.Totals().Included-len(skip) <= 0 && row.Redriven == 0:
		st.Refusal = "every included message is skipped now (the checks run again exclude them)"
	}
	return st
}

func (s *consoleQueues) Approve(ctx context.Context, hash string, sig approval.Signature, readOnly bool) (tuidlq.Approved, error) {
	if readOnly {
		// As `berth redrive approve` refuses before touching the store.
		return tuidlq.Approved{}, fmt.Errorf("%w: an approval is written to the plan store; nothing stored", errReadOnly)
	}
	a, _ := s.app(readOnly)
	l, err := a.ledger(ctx)
	if err != nil {
		return tuidlq.Approved{}, err
	}
	defer l.Close()
	p, err := l.Plan(ctx, hash)
	if err != nil {
		return tuidlq.Approved{}, err
	}
	principal, dec, _, err := a.rabbitRedrive().Approve(ctx, s.cl, l, p, sig, "")
	if err != nil {
		return tuidlq.Approved{}, err
	}
	return tuidlq.Approved{Principal: principal, Fingerprint: sig.Fingerprint, Decision: dec}, nil
}

// SignAsAuthor adds the author's signature to a plan made in the console,
// which `berth redrive plan --key` does in one step. A plan that already
// has one keeps it, and an approver cannot become the author.
func (s *consoleQueues) SignAsAuthor(ctx context.Context, hash string, sig approval.Signature, readOnly bool) error {
	if readOnly {
		return fmt.Errorf("%w; nothing stored", errReadOnly)
	}
	a, _ := s.app(readOnly)
	l, err := a.ledger(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	p, err := l.Plan(ctx, hash)
	if err != nil {
		return err
	}
	return a.rabbitRedrive().SignAsAuthor(ctx, l, p, sig)
}

func refusal(err error) error {
	var ref *actions.Refusal
	if errors.As(err, &ref) {
		return &tuidlq.ExecRefusal{Reason: strings.TrimPrefix(ref.Error(), "refused: ")}
	}
	return err
}

func (s *consoleQueues) DryRun(ctx context.Context, hash string, readOnly bool) (tuidlq.QueueDryRun, error) {
	a, _ := s.app(readOnly)
	l, err := a.ledger(ctx)
	if err != nil {
		return tuidlq.QueueDryRun{}, err
	}
	defer l.Close()
	p, err := l.Plan(ctx, hash)
	if err != nil {
		return tuidlq.QueueDryRun{}, err
	}
	dec, skip, err := a.rabbitRedrive().DryRun(ctx, s.cl, l, &p, consoleActor(), "", true)
	if err != nil {
		return tuidlq.QueueDryRun{}, refusal(err)
	}
	t := p.Totals()
	return tuidlq.QueueDryRun{WouldSend: t.Included - len(skip), Totals: t, Skipped: queueSkips(actions.RabbitSkips(p, skip)), Approvers: dec.Approvers}, nil
}

func queueSkips(in []actions.RabbitSkip) []tuidlq.QueueSkip {
	out := make([]tuidlq.QueueSkip, len(in))
	for i, s := range in {
		out[i] = tuidlq.QueueSkip{EventID: s.EventID, Position: s.Position, Reason: s.Reason, Detail: s.Detail}
	}
	return out
}

// Execute is `berth redrive execute PLAN --yes`: the preflight again
// (audited), then the run on a connection of its own (so it outlives a
// context switch), with the console's pause and cancel between chunks.
func (s *consoleQueues) Execute(ctx context.Context, hash string, req tuidlq.QueueExecRequest) (tuidlq.QueueResult, error) {
	a, n := s.app(req.ReadOnly)
	setup, cancel := a.opCtx(ctx)
	defer cancel()
	l, err := a.ledger(setup)
	if err != nil {
		return tuidlq.QueueResult{}, err
	}
	defer l.Close()
	p, err := l.Plan(setup, hash)
	if err != nil {
		return tuidlq.QueueResult{}, err
	}
	actor := consoleActor()
	rr := a.rabbitRedrive()
	dec, skip, err := rr.Preflight(setup, l, p, actor, "", true)
	if err != nil {
		return tuidlq.QueueResult{}, refusal(err)
	}
	cl, err := a.rabbitClient(setup)
	if err != nil {
		return tuidlq.QueueResult{}, err
	}
	defer cl.Close()
	// The page counts the run as `redrive execute` does (actions.RabbitProgress):
	// out of every included message, those skipped before the run among the done.
	included := p.Totals().Included
	cancelled := func() bool {
		select {
		case <-req.Cancel:
			return true
		default:
			return false
		}
	}
	res, err := rr.Run(ctx, cl, l, p, dec, skip, actor, "", actions.RabbitExecOptions{
		Verify: true, Pause: req.Pause, Cancel: req.Cancel,
		Progress: func(r actions.RabbitResult) {
			if req.Progress != nil {
				req.Progress(tuidlq.QueueProgress{Included: included, Rate: p.Rate, Result: r})
			}
		},
	}, cancelled)
	rr.AuditVerified(ctx, "", p, res.Verification, nil)
	// Already sent counts what an earlier run sent and acked too, as the
	// CLI's already_sent does.
	out := tuidlq.QueueResult{Sent: res.Sent, Resent: res.Resent, AlreadySent: res.AlreadySent + res.DoneBefore, Excluded: res.Excluded, Returned: res.Returned,
		Passed: res.Passed, Skipped: queueSkips(res.Skipped), NotFound: res.NotFound, Stopped: res.Stopped,
		Cancelled: res.Stopped == actions.RabbitCancelled || cancelled(), Approvers: dec.Approvers, Warnings: n.lines()}
	for _, f := range res.Failed {
		out.Failed = append(out.Failed, tuidlq.QueueFailure{EventID: f.EventID, Exchange: f.Exchange, RoutingKey: f.RoutingKey, Error: f.Error})
	}
	if v := res.Verification; v != nil {
		out.Verification = &tuidlq.QueueVerification{Before: v.DepthBefore, After: v.DepthAfter, Acked: v.Acked, Returned: v.Returned, OK: v.OK, Problem: v.Problem}
	}
	return out, refusal(err)
}
