package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

// consoleRedrive is the console's DLQ Service with the plan actions
// (tui/dlq.PlanActions): the same status, approval, execution and
// verification as `berth redrive status/approve/execute`, reusing their
// code, so the console and the CLI cannot disagree about a plan.
type consoleRedrive struct {
	actions.PlannerConsole
	k   *kafka.Cluster
	cfg *config.Config
}

var _ tuidlq.PlanActions = consoleRedrive{}

func newConsoleRedrive(k *kafka.Cluster, cfg *config.Config) consoleRedrive {
	return consoleRedrive{PlannerConsole: actions.PlannerConsole{P: actions.NewPlanner(k, cfg)}, k: k, cfg: cfg}
}

// Status lists the stored plans as `berth redrive status` does.
func (s consoleRedrive) Status(ctx context.Context, readOnly bool) ([]tuidlq.PlanStatus, error) {
	files, err := s.P.Store.Plans(ctx)
	if err != nil {
		return nil, err
	}
	done, err := s.redriven(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]tuidlq.PlanStatus, len(files))
	for i, f := range files {
		out[i] = s.statusOf(f, done[f.Hash], readOnly)
	}
	return out, nil
}

// PlanStatus is Status for one plan.
func (s consoleRedrive) PlanStatus(ctx context.Context, hash string, readOnly bool) (tuidlq.PlanStatus, error) {
	f, err := s.P.Store.Plan(ctx, hash)
	if err != nil {
		return tuidlq.PlanStatus{}, err
	}
	// The page shows each record's event id and class: derived from the
	// record now, as `berth redrive show` derives them (a stored plan
	// holds only locations, digests, targets and verdicts).
	review, err := s.actions("", readOnly, "").DeriveReview(ctx, &f)
	if err != nil {
		return tuidlq.PlanStatus{}, err
	}
	done, err := s.redriven(ctx)
	if err != nil {
		return tuidlq.PlanStatus{}, err
	}
	st := s.statusOf(f, done[f.Hash], readOnly)
	st.Warnings = review.Warnings
	return st, nil
}

// redriven counts the ledger's redriven entries per plan.
func (s consoleRedrive) redriven(ctx context.Context) (map[string]int, error) {
	return s.P.Store.RedrivenByPlan(ctx)
}

func (s consoleRedrive) statusOf(f redrive.File, redriven int, readOnly bool) tuidlq.PlanStatus {
	// The same judgement as `berth redrive status`, from the same action.
	k := s.actions("", readOnly, "")
	row := k.Status(f, redriven)
	st := tuidlq.PlanStatus{File: f, Redriven: redriven, Approvals: row.Approvals, Required: row.Required,
		Approved: row.Approved, Reason: row.Reason, State: row.State}
	// The review the executor applies: the stricter of the plan's policy
	// and today's.
	r := k.ReviewOf(f)
	st.Policy = policyLine(r)
	st.Signatures = signatureInfos(subjectOf(f), f.Author(), f.Signatures, r.Signers, r.Err)
	_, perr := actions.Preflight(f, actions.Options{ReadOnly: readOnly, MaxAge: s.cfg.Redrive.PlanMaxAge,
		Cluster: f.Plan.Cluster, Policy: r.Today.Snapshot(), HasPolicy: r.Matched, Signers: r.Signers,
		SignersToEdit: actions.SignersToEdit(f.Plan.DLQ, r.Today.RedrivePolicy, r.Matched, s.cfg.Source)})
	var ref *actions.Refusal
	t := f.Plan.Totals()
	switch {
	case r.Err != nil:
		st.Refusal = r.Err.Error()
	case errors.As(perr, &ref):
		st.Refusal = ref.Why()
	case perr != nil:
		st.Refusal = perr.Error()
	case t.Included == 0:
		st.Refusal = "the plan includes no records"
	case row.State == "done":
		st.Refusal = "nothing left to send: the ledger has every included record"
	}
	return st
}

// signatureInfos says, for each signature over a plan (Kafka or RabbitMQ),
// the principal allowed_signers gives it today or why it does not count.
func signatureInfos(subj approval.Subject, author *approval.Signature, sigs []approval.Signature, signers approval.AllowedSigners, serr error) []tuidlq.SignatureInfo {
	var out []tuidlq.SignatureInfo
	for _, sig := range sigs {
		info := tuidlq.SignatureInfo{Role: sig.Role, Fingerprint: sig.Fingerprint, SignedAt: sig.SignedAt}
		switch {
		case serr != nil:
			info.Problem = serr.Error()
		case signers == nil:
			info.Problem = "no allowed_signers configured"
		default:
			if v, err := approval.Verify(subj, sig, signers, time.Now()); err != nil {
				info.Problem = err.Error()
			} else {
				info.Principal, info.Fingerprint = v.Principal, v.Fingerprint
			}
		}
		if sig.Role == approval.RoleApproval && author != nil && sig.Fingerprint == author.Fingerprint {
			info.Problem = "the plan's author cannot approve it"
		}
		out = append(out, info)
	}
	return out
}

func policyLine(r actions.Review) string {
	if r.Required() == 0 {
		return "review none"
	}
	signers := r.Today.AllowedSigners
	if signers == "" {
		signers = "(none configured)"
	}
	return fmt.Sprintf("review required, %d approval(s), allowed_signers %s", r.Required(), signers)
}

// Approve stores an approval as `berth redrive approve` does: it refuses,
// storing nothing, a key that is the author's or that allowed_signers does
// not list; and, unlike the CLI, in a read-only context (the console never
// writes to a cluster it was told not to change).
func (s consoleRedrive) Approve(ctx context.Context, hash string, sig approval.Signature, contextName string, readOnly bool) (tuidlq.Approved, error) {
	pf, err := s.P.Store.Plan(ctx, hash)
	if err != nil {
		return tuidlq.Approved{}, err
	}
	res, err := s.actions(contextName, readOnly, "").Approve(ctx, pf, sig)
	if err != nil {
		return tuidlq.Approved{}, err
	}
	return tuidlq.Approved{Principal: res.Principal, Fingerprint: res.Fingerprint, Decision: res.Decision}, nil
}

// actions is the redrive actions the CLI runs, on the console's cluster.
func (s consoleRedrive) actions(contextName string, readOnly bool, actor string) *actions.KafkaRedrive {
	return &actions.KafkaRedrive{Planner: s.P, Store: s.P.Store, ReadOnly: readOnly, Context: contextName, Actor: actor,
		MaxAge: s.cfg.Redrive.PlanMaxAge, OpenAudit: s.openAudit}
}

// RecordPlan audits a plan made in the console, before it is stored, as
// `berth redrive plan` audits its plans.
func (s consoleRedrive) RecordPlan(ctx context.Context, f redrive.File, contextName string, store bool) error {
	key := ""
	if a := f.Author(); a != nil {
		key = a.Fingerprint
	}
	b, _ := f.Plan.Blocked()
	return s.audit(ctx, contextName, "redrive.plan", f, map[string]any{
		"author": f.Plan.Author, "author_key": key, "totals": f.Plan.Totals(), "blocked": b, "store": store, "file": "(console)",
	})
}

// SignAsAuthor adds the author's signature to a plan that carries none:
// the console makes a plan first and signs it when its maker gives a key,
// which `berth redrive plan --key` does in one step. A plan that already
// has an author's signature keeps it (nobody can take over authorship).
func (s consoleRedrive) SignAsAuthor(ctx context.Context, hash string, sig approval.Signature, contextName string, readOnly bool) error {
	pf, err := s.P.Store.Plan(ctx, hash)
	if err != nil {
		return err
	}
	// The same action as `berth redrive sign`.
	return s.actions(contextName, readOnly, "").SignAsAuthor(ctx, pf, sig)
}

// dial opens a connection of the execution's own, so an execution started
// from the console outlives the console's connection (a context switch
// closes that one).
func (s consoleRedrive) dial(ctx context.Context) (*kafka.Client, *kafka.Cluster, *kafka.PlanStore, error) {
	opts := s.k.Client().Options()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := kafka.Dial(dctx, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, kafka.NewCluster(c), kafka.NewPlanStore(c), nil
}

// Execute runs a stored plan as `berth redrive execute` does: today's
// policy and allowed_signers, the checks again, one Kafka transaction per
// batch with its ledger entries, every step audited.
func (s consoleRedrive) Execute(ctx context.Context, hash string, req tuidlq.ExecRequest) (actions.Result, error) {
	if req.ReadOnly {
		// Refused before the cluster is touched, audited in the local log
		// only (the audit topic is in the cluster), as the CLI does.
		ref := actions.Refuse(actions.ErrReadOnly, "the context is read-only: nothing sent")
		res := actions.Result{Plan: hash, Skipped: []actions.Skip{}, Failed: []actions.Failure{}}
		if log, err := audit.Open(auditPathFor("", s.cfg)); err == nil {
			_, err = log.Append(ctx, audit.Entry{Action: "redrive.refused", Context: req.Context, Target: hash, Details: map[string]any{"plan": hash, "reason": ref.Error()}})
			if err != nil {
				return res, fmt.Errorf("%w (and the audit log: %v)", ref, err)
			}
		}
		return res, ref
	}
	c, k, store, err := s.dial(ctx)
	if err != nil {
		return actions.Result{}, err
	}
	defer c.Close()
	setup, cancel := context.WithTimeout(ctx, max(c.Options().Timeout, 10*time.Second))
	defer cancel()
	pf, err := store.Plan(setup, hash)
	if err != nil {
		return actions.Result{}, err
	}
	// The execution's own connection, so it outlives the console's.
	own := consoleRedrive{PlannerConsole: actions.PlannerConsole{P: actions.NewPlanner(k, s.cfg)}, k: k, cfg: s.cfg}
	return own.actions(req.Context, req.ReadOnly, audit.CurrentUser()+" (console)").Execute(ctx, pf, actions.ExecControl{Control: req.Control, Progress: req.Progress, PerRecord: true})
}

// Verify reads back what the plan produced and watches for re-failures,
// as `berth redrive execute` does after sending.
func (s consoleRedrive) Verify(ctx context.Context, hash string, watch time.Duration, contextName string) (tuidlq.Verification, error) {
	// ctx ends when c or esc stop the watch: that stops the watch only.
	// The read-back goes to its end (a key pressed during it ends the watch
	// before it begins), so what was sent is always checked.
	rctx := context.WithoutCancel(ctx)
	c, k, store, err := s.dial(rctx)
	if err != nil {
		return tuidlq.Verification{}, err
	}
	defer c.Close()
	pf, err := store.Plan(rctx, hash)
	if err != nil {
		return tuidlq.Verification{}, err
	}
	// The same verification as `berth redrive execute`.
	own := consoleRedrive{PlannerConsole: actions.PlannerConsole{P: actions.NewPlanner(k, s.cfg)}, k: k, cfg: s.cfg}
	v, verr := own.actions(contextName, false, "").Verify(rctx, pf, watch, func(w kafka.Watch) (kafka.WatchResult, error) {
		w.Stop = ctx.Done()
		return k.WatchRefailuresUntil(rctx, w)
	})
	out := tuidlq.Verification{Watched: watch}
	if v != nil && v.WatchEnded == kafka.WatchStopped {
		// Stopped from the console: say how long it really watched.
		out.Stopped = true
		out.Watched, _ = time.ParseDuration(v.Watched)
	}
	if v != nil {
		out.Checked = v.Checked
		for _, m := range v.Mismatches {
			out.Mismatches = append(out.Mismatches, fmt.Sprintf("mismatch %s %d:%d -> %s %s: %s", pf.Plan.DLQ, m.DLQ.Partition, m.DLQ.Offset, m.Target, m.Where, m.Reason))
		}
		for _, r := range v.Refailed {
			out.Refailed = append(out.Refailed, fmt.Sprintf("re-failed: %s landed again at %d:%d (%s)", r.Origin, r.DLQ.Partition, r.DLQ.Offset, r.Exception))
		}
		if err := s.audit(rctx, contextName, "redrive.verified", pf, map[string]any{
			"checked": v.Checked, "mismatches": len(v.Mismatches), "refailed": len(v.Refailed),
		}); err != nil && verr == nil {
			verr = err
		}
	}
	return out, verr
}

// openAudit opens the audit log the CLI writes (audit.file or
// $BERTH_AUDIT_FILE), mirrored to the cluster's audit topic.
func (s consoleRedrive) openAudit() (*audit.Log, func(), error) {
	path := auditPathFor("", s.cfg)
	sink := kafka.NewAuditSink(s.k.Client().Options(), auditSource(path))
	log, err := audit.Open(path, audit.WithSink(sink))
	if err != nil {
		sink.Close()
		return nil, nil, err
	}
	return log, sink.Close, nil
}

// audit appends one entry; a mirror failure is not fatal (the local log
// has the entry), a local one is.
func (s consoleRedrive) audit(ctx context.Context, contextName, action string, pf redrive.File, details map[string]any) error {
	log, closeLog, err := s.openAudit()
	if err != nil {
		return err
	}
	defer closeLog()
	details["plan"] = pf.Hash
	details["dlq"] = pf.Plan.DLQ
	_, err = log.Append(ctx, audit.Entry{Action: action, Context: contextName, Target: pf.Hash, Details: details})
	var se *audit.SinkError
	if errors.As(err, &se) {
		return nil
	}
	return err
}
