package actions

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// Importing a plan file: `berth redrive approve|sign|execute FILE` store the
// file's plan so approvers at other terminals find it by hash, and the
// console stores the plans it makes. Both backends take the same steps, in
// this order, here and nowhere else: the content must hash to the file's
// hash (an edit is ErrPlanEdited), the plan must be this backend's (else
// ErrPlanMalformed), and it must have been made on this cluster (else
// ErrClusterMismatch, nothing stored or sent); only then is it stored, once.
// A read-only context stores nothing: the action that follows refuses, or
// is a dry run.

// clusterRefusal is the one refusal of another cluster's plan file, on both
// backends.
func clusterRefusal(hash, made, here string) error {
	return Refuse(ErrClusterMismatch, "plan %s was made on cluster %q, this is cluster %q: a plan runs only where it was made; nothing stored or sent", redrive.ShortHash(hash), made, here)
}

// OtherBackendRefusal is the one refusal of a plan file (named name) made
// on the other backend, on both backends and by every command that reads
// one; nil when err is not that.
func OtherBackendRefusal(name string, err error) error {
	var ob *redrive.OtherBackend
	if !errors.As(err, &ob) {
		return nil
	}
	return Refuse(ErrOtherBackend, "plan %s is a %s plan and this is a %s context: a plan runs only on the backend it was made on; nothing stored or sent",
		name, redrive.BackendTitle(ob.Plan), redrive.BackendTitle(ob.Want))
}

// vhostRefusal refuses a RabbitMQ plan made in another vhost than the
// connection's: a queue of the DLQ's name there is another queue, so no
// step reads, stores or sends under it (nil when the vhosts match). It
// follows each step's cluster check.
func vhostRefusal(cl interface{ Vhost() string }, p redrive.QueuePlan) error {
	if here := cl.Vhost(); here != p.Vhost {
		return Refuse(ErrClusterMismatch, "plan %s was made in vhost %q, this connection is to vhost %q: attach with the plan's vhost; nothing read, stored or sent", redrive.ShortHash(p.Hash()), p.Vhost, here)
	}
	return nil
}

// approveClusterRefusal is the one refusal of an approval of another
// cluster's plan, on both backends: a shared plan store (RabbitMQ's
// PostgreSQL, a Kafka plan found by hash) can hold plans of several
// clusters, and an approval must be given where the plan runs.
func approveClusterRefusal(hash, made, here string) error {
	return Refuse(ErrClusterMismatch, "plan %s was made on cluster %q, this is cluster %q; nothing stored", redrive.ShortHash(hash), made, here)
}

// ImportFile reads a Kafka plan file (from r, named name in messages), checks
// it and, with store, puts it in the cluster's plan store: signatures
// already stored are kept and the file's added, and the plan is returned
// as stored (with all of them). Without store (a dry run, a verification)
// it is checked the same way and nothing is written.
func (k *KafkaRedrive) ImportFile(ctx context.Context, name string, r io.Reader, store bool) (redrive.File, error) {
	// Decoded a row at a time: a million-record file is never held whole.
	f, err := redrive.DecodeFileFrom(r)
	if errors.Is(err, redrive.ErrHashMismatch) {
		return redrive.File{}, fmt.Errorf("%s: %w", name, ErrPlanEdited)
	}
	if refused := OtherBackendRefusal(name, err); refused != nil {
		return redrive.File{}, refused
	}
	if err != nil {
		return redrive.File{}, fmt.Errorf("%s: %w: %v", name, ErrPlanMalformed, err)
	}
	// DecodeFile checked the hash: not hashed again (a 1,000,000-record
	// plan is not re-encoded to be stored).
	return k.importChecked(ctx, f, store)
}

// Import checks a plan held in memory (the console's, just made) as
// ImportFile checks a file, and stores it.
func (k *KafkaRedrive) Import(ctx context.Context, f redrive.File) (redrive.File, error) {
	if f.Plan.Hash() != f.Hash {
		return redrive.File{}, Refuse(ErrPlanEdited, "plan %s: %v", redrive.ShortHash(f.Hash), ErrPlanEdited)
	}
	return k.importChecked(ctx, f, true)
}

func (k *KafkaRedrive) importChecked(ctx context.Context, f redrive.File, store bool) (redrive.File, error) {
	id, err := k.Identity(ctx)
	if err != nil {
		return redrive.File{}, err
	}
	if id != f.Plan.Cluster {
		return redrive.File{}, clusterRefusal(f.Hash, f.Plan.Cluster, id)
	}
	if !store || k.ReadOnly {
		return f, nil
	}
	if err := k.Store.PutPlan(ctx, f); err != nil {
		return redrive.File{}, err
	}
	return k.Store.Plan(ctx, f.Hash)
}

// ImportFile reads a RabbitMQ plan file (from r, named name in messages) as
// KafkaRedrive.ImportFile does: the hash (rabbitmq.ErrPlanEdited, in the
// words RabbitMQ users see: "plan FILE: content does not match its hash"),
// the backend, then the cluster cl is attached to; with store (and not
// read-only) it is put in the redrive store l with the author's signature
// the file carries (`redrive plan --key` writes it there, as on Kafka), so
// a plan file handed to an approver using another redrive store keeps its
// author. That signature must be genuine (by its key, over this plan's
// author statement on this cluster), else nothing is stored; it is counted
// only as allowed_signers says, like one given by `redrive sign`. A store
// that already holds an author's signature keeps it (authorship is given
// once), and a key that approved the plan cannot become its author. The
// file's approvals are not imported: approvals are given with `approve`.
func (r *RabbitRedrive) ImportFile(ctx context.Context, cl RabbitClient, l RabbitStore, name string, file io.Reader, store bool) (redrive.QueuePlan, error) {
	p, sigs, err := decodeQueuePlanFile(name, file)
	if err != nil {
		return p, err
	}
	if here := cl.ClusterName(); here != p.Cluster {
		return redrive.QueuePlan{}, clusterRefusal(p.Hash(), p.Cluster, here)
	}
	if err := vhostRefusal(cl, p); err != nil {
		return redrive.QueuePlan{}, err
	}
	if !store || r.ReadOnly {
		return p, nil
	}
	author, err := r.fileAuthor(ctx, l, p, sigs)
	if err != nil {
		return redrive.QueuePlan{}, err
	}
	if err := l.PutPlan(ctx, p); err != nil {
		return redrive.QueuePlan{}, err
	}
	if author != nil {
		if err := l.AddSignature(ctx, *author); err != nil {
			return redrive.QueuePlan{}, err
		}
	}
	return p, nil
}

// fileAuthor is the author's signature of a plan file to store beside the
// plan (nil: none, or the store already has one), checked as ImportFile
// says.
func (r *RabbitRedrive) fileAuthor(ctx context.Context, l RabbitStore, p redrive.QueuePlan, sigs []approval.Signature) (*approval.Signature, error) {
	var author *approval.Signature
	for i := range sigs {
		if sigs[i].Role == approval.RoleAuthor {
			author = &sigs[i]
			break
		}
	}
	if author == nil {
		return nil, nil
	}
	h := p.Hash()
	if err := approval.Genuine(p.Subject(), *author); err != nil {
		return nil, Refuse(ErrSignature, "plan %s: the author's signature in the file is not genuine (%v); nothing stored", redrive.ShortHash(h), err)
	}
	stored, approvals, err := l.Signatures(ctx, h)
	if err != nil {
		return nil, err
	}
	if stored != nil {
		return nil, nil
	}
	if err := approverAsAuthor(h, approvals, *author); err != nil {
		return nil, err
	}
	return author, nil
}

// DecodeQueuePlanFile checks a RabbitMQ plan file's hash and backend without
// asking any server: what `redrive show` and `status` read of a file, which
// they never store. The file is read a row at a time.
func DecodeQueuePlanFile(name string, file io.Reader) (redrive.QueuePlan, error) {
	p, _, err := decodeQueuePlanFile(name, file)
	return p, err
}

// decodeQueuePlanFile is DecodeQueuePlanFile with the file's signatures.
func decodeQueuePlanFile(name string, file io.Reader) (redrive.QueuePlan, []approval.Signature, error) {
	p, sigs, err := redrive.DecodeQueuePlanSignedFrom(file)
	if refused := OtherBackendRefusal(name, err); refused != nil {
		return redrive.QueuePlan{}, nil, refused
	}
	if err != nil {
		return redrive.QueuePlan{}, nil, fmt.Errorf("plan %s: %w", name, err)
	}
	return p, sigs, nil
}
