package actions

import (
	"context"
	"errors"

	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// SignAsAuthor stores the author's signature over a stored plan made
// without one (`redrive plan` without --key, or a plan made in the
// console): a policy with review needs it. It refuses, storing nothing, a
// read-only context, a signature that is not an author's over this plan, a
// plan already signed by its author and a key that already approved it
// (the two-person rule); the signature is recorded in the audit log first
// (redrive.plan.signed), as RabbitRedrive.SignAsAuthor does.
func (k *KafkaRedrive) SignAsAuthor(ctx context.Context, f redrive.File, sig approval.Signature) error {
	if k.ReadOnly {
		return k.refused(ctx, f, Refuse(ErrReadOnly, "the context is read-only: a signature is written to the plan store; nothing stored"))
	}
	if sig.PlanHash != f.Hash || sig.Role != approval.RoleAuthor {
		return Refuse(ErrSignature, "not an author's signature over plan %s; nothing stored", redrive.ShortHash(f.Hash))
	}
	if a := f.Author(); a != nil {
		return Refuse(ErrSignature, "plan %s is already signed by its author (%s); nothing stored", redrive.ShortHash(f.Hash), a.Fingerprint)
	}
	if err := approverAsAuthor(f.Hash, f.Approvals(), sig); err != nil {
		return err
	}
	if err := k.audit(ctx, "redrive.plan.signed", f, map[string]any{"author": f.Plan.Author, "author_key": sig.Fingerprint}); err != nil {
		return err
	}
	return k.Store.AddSignature(ctx, f.Hash, sig)
}

// RecordPlan records a plan just made, as RabbitRedrive.RecordPlan does:
// its audit entry (redrive.plan) first, then, unless the context is
// read-only, the plan (with its signatures) in the cluster's plan store. A
// plan the audit log cannot record is refused with nothing stored, as
// approve and execute refuse (it was stored, and the failure only warned,
// exit 0). file is where the plan is written ("(console)" for the
// console's).
func (k *KafkaRedrive) RecordPlan(ctx context.Context, f redrive.File, file string) (RecordedPlan, error) {
	var out RecordedPlan
	if a := f.Author(); a != nil {
		out.AuthorKey = a.Fingerprint
	}
	blocked, _ := f.Plan.Blocked()
	if err := k.audit(ctx, "redrive.plan", f, map[string]any{"author": f.Plan.Author, "author_key": out.AuthorKey, "totals": f.Plan.Totals(),
		"blocked": blocked, "store": !k.ReadOnly, "file": file}); err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			r.Detail += "; nothing stored"
		}
		return out, err
	}
	if k.ReadOnly {
		out.StoreNote = "read-only context: the plan was written to the file only"
		return out, nil
	}
	if err := k.Store.PutPlan(ctx, f); err != nil {
		out.StoreNote = "not stored in the cluster: " + err.Error()
		_ = k.audit(ctx, "redrive.plan.not_stored", f, map[string]any{"error": err.Error()})
		return out, nil
	}
	out.Stored = true
	return out, nil
}
