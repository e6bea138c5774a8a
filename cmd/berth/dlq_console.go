package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/redrive/execute"
	"github.com/berth-dev/berth/redrive/planner"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

// consoleRedrive is the console's DLQ Service with the plan actions
// (tui/dlq.PlanActions): the same status, approval, execution and
// verification as `berth redrive status/approve/execute`, reusing their
// code, so the console and the CLI cannot disagree about a plan.
type consoleRedrive struct {
	planner.Console
	k   *kafka.Cluster
	cfg *config.Config
}

// session gives the CLI's policy resolution (policyFor: a plan whose policy
// was deleted keeps the review it was made under).
func (s consoleRedrive) session() *redriveSession { return &redriveSession{planner: s.P} }

var _ tuidlq.PlanActions = consoleRedrive{}

func newConsoleRedrive(k *kafka.Cluster, cfg *config.Config) consoleRedrive {
	return consoleRedrive{Console: planner.Console{P: planner.New(k, cfg)}, k: k, cfg: cfg}
}

// cli is an app with only the config, enough for the CLI's status and
// verification helpers (which read a.cfg and write notes to a.stderr).
func (s consoleRedrive) cli() *app { return &app{cfg: s.cfg, stdout: io.Discard, stderr: io.Discard} }

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
	done, err := s.redriven(ctx)
	if err != nil {
		return tuidlq.PlanStatus{}, err
	}
	return s.statusOf(f, done[f.Hash], readOnly), nil
}

// redriven counts the ledger's redriven entries per plan.
func (s consoleRedrive) redriven(ctx context.Context) (map[string]int, error) {
	ledger, err := s.P.Store.Ledger(ctx)
	if err != nil {
		return nil, err
	}
	done := map[string]int{}
	for _, e := range ledger {
		if e.Action == redrive.LedgerRedriven {
			done[e.Plan]++
		}
	}
	return done, nil
}

func (s consoleRedrive) statusOf(f redrive.File, redriven int, readOnly bool) tuidlq.PlanStatus {
	row := s.cli().planStatus(s.session(), f, redriven)
	st := tuidlq.PlanStatus{File: f, Redriven: row.Redriven, Approvals: row.Approvals, Required: row.Required,
		Approved: row.Approved, Reason: row.Reason, State: row.State}
	pol, err := s.session().policyFor(f)
	if err != nil {
		st.Refusal = err.Error()
		return st
	}
	st.Policy = policyLine(pol)
	signers, serr := signersFor(pol)
	st.Signatures = signatureInfos(subjectOf(f), f.Author(), f.Signatures, signers, serr)
	_, perr := execute.Preflight(f, execute.Options{ReadOnly: readOnly, MaxAge: s.cfg.Redrive.PlanMaxAge,
		Policy: pol.Snapshot(), HasPolicy: true, Signers: signers})
	var ref *execute.Refusal
	t := f.Plan.Totals()
	switch {
	case serr != nil && pol.Review == "required":
		st.Refusal = serr.Error()
	case errors.As(perr, &ref):
		st.Refusal = ref.Reason
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

func policyLine(pol planner.Policy) string {
	if pol.Review != "required" {
		return "review none"
	}
	signers := pol.AllowedSigners
	if signers == "" {
		signers = "(none configured)"
	}
	return fmt.Sprintf("review required, %d approval(s), allowed_signers %s", requiredApprovals(pol), signers)
}

// Approve stores an approval as `berth redrive approve` does: it refuses,
// storing nothing, a key that is the author's or that allowed_signers does
// not list; and, unlike the CLI, in a read-only context (the console never
// writes to a cluster it was told not to change).
func (s consoleRedrive) Approve(ctx context.Context, hash string, sig approval.Signature, contextName string, readOnly bool) (tuidlq.Approved, error) {
	if readOnly {
		return tuidlq.Approved{}, errors.New("refused: the context is read-only; nothing stored")
	}
	pf, err := s.P.Store.Plan(ctx, hash)
	if err != nil {
		return tuidlq.Approved{}, err
	}
	if sig.PlanHash != pf.Hash {
		return tuidlq.Approved{}, fmt.Errorf("refused: the signature is over plan %s, not %s", shortHash(sig.PlanHash), shortHash(pf.Hash))
	}
	pol, err := s.session().policyFor(pf)
	if err != nil {
		return tuidlq.Approved{}, err
	}
	signers, err := signersFor(pol)
	if err != nil {
		return tuidlq.Approved{}, err
	}
	if signers == nil && pol.Review == "required" {
		// Nothing to verify an approval against: storing it would show an
		// approval that execute refuses to count.
		return tuidlq.Approved{}, errors.New("refused: the plan's policy requires review but no allowed_signers are configured; nothing stored")
	}
	now := time.Now()
	if author := pf.Author(); author != nil && author.Fingerprint == sig.Fingerprint {
		return tuidlq.Approved{}, errors.New("refused: the plan's author cannot approve it (two-person rule); nothing stored")
	}
	principal := ""
	if signers != nil {
		v, err := approval.Verify(subjectOf(pf), sig, signers, now)
		if err != nil {
			return tuidlq.Approved{}, fmt.Errorf("refused: %v; nothing stored", err)
		}
		principal = v.Principal
	}
	if err := s.P.Store.AddSignature(ctx, pf.Hash, sig); err != nil {
		return tuidlq.Approved{}, err
	}
	pf.Signatures = append(pf.Signatures, sig)
	dec := approval.Evaluate(subjectOf(pf), pf.Author(), approvalsOnly(pf), signers, requiredApprovals(pol), now)
	if err := s.audit(ctx, contextName, "redrive.approved", pf, map[string]any{"signer": principal, "fingerprint": sig.Fingerprint, "approved": dec.Approved}); err != nil {
		return tuidlq.Approved{}, err
	}
	return tuidlq.Approved{Principal: principal, Fingerprint: sig.Fingerprint, Decision: dec}, nil
}

// RecordPlan audits a plan made in the console as `berth redrive plan`
// audits its plans.
func (s consoleRedrive) RecordPlan(ctx context.Context, f redrive.File, contextName string, stored bool) error {
	key := ""
	if a := f.Author(); a != nil {
		key = a.Fingerprint
	}
	b, _ := f.Plan.Blocked()
	return s.audit(ctx, contextName, "redrive.plan", f, map[string]any{
		"author": f.Plan.Author, "author_key": key, "totals": f.Plan.Totals(), "blocked": b, "stored": stored, "file": "(console)",
	})
}

// SignAsAuthor adds the author's signature to a plan that carries none:
// the console makes a plan first and signs it when its maker gives a key,
// which `berth redrive plan --key` does in one step. A plan that already
// has an author's signature keeps it (nobody can take over authorship).
func (s consoleRedrive) SignAsAuthor(ctx context.Context, hash string, sig approval.Signature, contextName string, readOnly bool) error {
	if readOnly {
		return errors.New("refused: the context is read-only; nothing stored")
	}
	pf, err := s.P.Store.Plan(ctx, hash)
	if err != nil {
		return err
	}
	if sig.PlanHash != pf.Hash || sig.Role != approval.RoleAuthor {
		return fmt.Errorf("refused: not an author's signature over plan %s", shortHash(pf.Hash))
	}
	if a := pf.Author(); a != nil {
		return fmt.Errorf("refused: plan %s is already signed by its author (%s); nothing stored", shortHash(pf.Hash), a.Fingerprint)
	}
	for _, a := range approvalsOnly(pf) {
		if a.Fingerprint == sig.Fingerprint {
			return errors.New("refused: this key already approved the plan; it cannot also be its author")
		}
	}
	if err := s.P.Store.AddSignature(ctx, pf.Hash, sig); err != nil {
		return err
	}
	return s.audit(ctx, contextName, "redrive.plan.signed", pf, map[string]any{"author": pf.Plan.Author, "author_key": sig.Fingerprint})
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
func (s consoleRedrive) Execute(ctx context.Context, hash string, req tuidlq.ExecRequest) (execute.Result, error) {
	if req.ReadOnly {
		// Refused before the cluster is touched, audited in the local log
		// only (the audit topic is in the cluster), as the CLI does.
		ref := &execute.Refusal{Reason: "the context is read-only"}
		res := execute.Result{Plan: hash, Skipped: []execute.Skip{}, Failed: []execute.Failure{}}
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
		return execute.Result{}, err
	}
	defer c.Close()
	setup, cancel := context.WithTimeout(ctx, max(c.Options().Timeout, 10*time.Second))
	defer cancel()
	p := planner.New(k, s.cfg)
	pf, err := store.Plan(setup, hash)
	if err != nil {
		return execute.Result{}, err
	}
	pol, err := (&redriveSession{planner: p}).policyFor(pf)
	if err != nil {
		return execute.Result{}, err
	}
	signers, err := signersFor(pol)
	if err != nil {
		return execute.Result{}, err
	}
	log, closeLog, err := s.openAudit()
	if err != nil {
		return execute.Result{}, err
	}
	defer closeLog()
	tr, err := k.NewRedriveTransport(setup, pf.Hash)
	if err != nil {
		return execute.Result{}, err
	}
	defer tr.Close()
	return execute.Execute(ctx, pf, execute.Options{
		ReadOnly: req.ReadOnly, Context: req.Context, Actor: audit.CurrentUser() + " (console)", MaxAge: s.cfg.Redrive.PlanMaxAge,
		Policy: pol.Snapshot(), HasPolicy: true, Signers: signers,
		StopOnFailure: pol.StopOnFailure || pol.RequireIdempotencyKey,
		Recheck:       p.Check,
		Transport:     tr, Audit: log, Control: req.Control, Progress: req.Progress,
	})
}

// Verify reads back what the plan produced and watches for re-failures,
// as `berth redrive execute` does after sending.
func (s consoleRedrive) Verify(ctx context.Context, hash string, watch time.Duration, contextName string) (tuidlq.Verification, error) {
	c, k, store, err := s.dial(ctx)
	if err != nil {
		return tuidlq.Verification{}, err
	}
	defer c.Close()
	pf, err := store.Plan(ctx, hash)
	if err != nil {
		return tuidlq.Verification{}, err
	}
	start := time.Now()
	v, verr := s.cli().verifyRedrive(ctx, &redriveSession{cl: c, cluster: k, store: store}, pf, watch)
	out := tuidlq.Verification{Watched: watch}
	if ctx.Err() != nil && watch > 0 {
		// Stopped from the console: say how long it really watched.
		out.Stopped, out.Watched = true, min(time.Since(start), watch)
	}
	if v != nil {
		out.Checked = v.Checked
		for _, m := range v.Mismatches {
			out.Mismatches = append(out.Mismatches, fmt.Sprintf("mismatch %s %d:%d -> %s %s: %s", pf.Plan.DLQ, m.DLQ.Partition, m.DLQ.Offset, m.Target, m.Where, m.Reason))
		}
		for _, r := range v.Refailed {
			out.Refailed = append(out.Refailed, fmt.Sprintf("re-failed: %s landed again at %d:%d (%s)", r.Origin, r.DLQ.Partition, r.DLQ.Offset, r.Exception))
		}
		if err := s.audit(context.WithoutCancel(ctx), contextName, "redrive.verified", pf, map[string]any{
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
