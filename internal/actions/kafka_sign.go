package actions

import (
	"context"

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
