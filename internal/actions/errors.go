package actions

import (
	"errors"
	"fmt"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
)

// Refusal reasons. Every refusal wraps exactly one of these, so callers can
// test with errors.Is; the message says what to do about it.
var (
	// ErrReadOnly: the context (or cluster) is read-only. It is the same
	// value as backends.ErrReadOnly, so a backend's own last-line refusal
	// and this layer's match one errors.Is test.
	ErrReadOnly = backends.ErrReadOnly
	// ErrTwoPersonRule: a signer tried to approve a plan they authored, or
	// a signer's second approval was offered as another person's.
	ErrTwoPersonRule = errors.New("two-person rule")
	// ErrNoAllowedSigners: review is required but no allowed_signers file
	// is configured, so no approval could ever be verified.
	ErrNoAllowedSigners = errors.New("review is required but no allowed_signers are configured")
	// ErrSignature: a signature does not verify (unknown key, wrong plan,
	// wrong role or cluster, outside its validity).
	ErrSignature = errors.New("signature does not verify")
	// ErrAuditUnwritable: the local audit log cannot be written; a write
	// that cannot be recorded does not happen.
	ErrAuditUnwritable = errors.New("the audit log cannot be written")
	// ErrPlanEdited: the plan's content does not hash to its hash. It
	// matches redrive.ErrHashMismatch and rabbitmq.ErrPlanEdited with
	// errors.Is, so one test catches an edited plan from either backend.
	ErrPlanEdited = redrive.PlanEditedError("the plan's content does not match its hash (edited after it was made)")
	// ErrPlanMalformed: the plan file or stored record is not a v2 plan.
	ErrPlanMalformed = errors.New("not a valid plan")
	// ErrOtherBackend: the plan was made on the other backend (a Kafka plan
	// given to a RabbitMQ context, or the reverse).
	ErrOtherBackend = errors.New("the plan was made on the other backend")
	// ErrPlanExpired: the plan is older than redrive.plan_max_age.
	ErrPlanExpired = errors.New("the plan expired")
	// ErrPlanFromFuture: the plan's created_at is ahead of this clock by
	// more than ClockMargin (it would otherwise never expire).
	ErrPlanFromFuture = errors.New("the plan claims to be made in the future")
	// ErrClusterMismatch: the plan was made on another cluster.
	ErrClusterMismatch = errors.New("the plan was made on another cluster")
	// ErrNotApproved: review is required and the verified approvals do not
	// satisfy the stricter policy.
	ErrNotApproved = errors.New("the plan is not approved")
	// ErrPlanBlocked: a check could not run when the plan was made.
	ErrPlanBlocked = errors.New("the plan is blocked")
	// ErrPolicyChanged: today's policy extracts ids differently from the
	// plan's, so what the reviewer saw cannot be re-derived the same way.
	ErrPolicyChanged = errors.New("the redrive policy changed since the plan was made")
	// ErrTargetChanged: a record's re-derived target differs from the one
	// the reviewer signed.
	ErrTargetChanged = errors.New("a record's target differs from the one reviewed")
	// ErrNotConfirmed: a terminal user did not confirm (or typed the wrong
	// plan hash prefix).
	ErrNotConfirmed = errors.New("not confirmed")
	// ErrNothingSelected: the plan's selection matches no record of the
	// DLQ; a plan of nothing is neither written nor stored (it would show
	// as "ready" and execute to no effect).
	ErrNothingSelected = errors.New("the selection matches no record")
	// ErrUnsupported: the backend cannot do this; the message says why in
	// one line.
	ErrUnsupported = errors.New("not supported on this backend")
)

// Refusal is an action refused before anything was written. Reason is one
// of the Err* values above; Detail says what to do.
type Refusal struct {
	Reason error
	Detail string
}

func (r *Refusal) Error() string { return "refused: " + r.Why() }

// Why is the refusal without the "refused: " prefix.
func (r *Refusal) Why() string {
	if r.Detail == "" {
		return r.Reason.Error()
	}
	return r.Detail
}

// Unwrap lets errors.Is(err, ErrReadOnly) and friends work.
func (r *Refusal) Unwrap() error { return r.Reason }

// Refuse builds a Refusal for reason with a formatted detail.
func Refuse(reason error, format string, a ...any) error {
	return &Refusal{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// IsRefusal reports whether err is a refusal (nothing was written).
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// dlqGone is the one wording, on both backends, of a run whose DLQ (topic
// or queue) no longer exists: deleted between plan and execute. Any other
// error is returned as it is. The command line adds what was sent.
func dlqGone(hash, dlq string, err error) error {
	if err == nil || !errors.Is(err, backends.ErrNotFound) {
		return err
	}
	return backends.Failure(fmt.Sprintf("plan %s: its DLQ %q no longer exists (deleted since the plan was made?)", redrive.ShortHash(hash), dlq), backends.ErrNotFound)
}

// takenOver is the one wording of a run that another run of the same plan
// took over (two terminals): it stops at once, what it sent stays sent,
// and its batch in flight was not sent.
func takenOver(hash string) error {
	return backends.Failure(fmt.Sprintf("plan %s: another run of this plan started and took over (a second terminal?): this run stopped; its batch in flight was not sent, the other run sends what is left (follow it with 'berth redrive status %s')", redrive.ShortHash(hash), redrive.ShortHash(hash)), backends.ErrTakenOver)
}

// ErrBadRequest means a plan or reset request has a flag value that cannot
// work (not NAME=VALUE, an unknown class, no record at an offset). The CLI exits 2 on
// it, as for any usage error. The message is the request error's own, which
// names the flag.
var ErrBadRequest = errors.New("bad request")

// badRequest is an error that prints its message and matches ErrBadRequest.
type badRequest struct{ msg string }

func (e *badRequest) Error() string        { return e.msg }
func (e *badRequest) Is(target error) bool { return target == ErrBadRequest }

// BadRequest builds an error matching ErrBadRequest with a formatted message.
func BadRequest(format string, a ...any) error {
	return &badRequest{msg: fmt.Sprintf(format, a...)}
}

// SignersToEdit says which file to edit so that an approval of a plan
// from dlq can be verified, for a refusal when review is required and no
// allowed signer is known: the allowed_signers file the policy names
// (it lists no key), or else the config file (source; "" when none was
// read), whose policy for dlq must name one.
func SignersToEdit(dlq string, pol config.RedrivePolicy, matched bool, source string) string {
	if pol.AllowedSigners != "" {
		return fmt.Sprintf("the allowed_signers file %s lists no key: add each approver's public key there, one line each (principal key-type key)", pol.AllowedSigners)
	}
	where := "the config file"
	if source != "" {
		where = source
	}
	if !matched {
		return fmt.Sprintf("no redrive policy in %s matches %s: add one with review and allowed_signers: FILE", where, dlq)
	}
	return fmt.Sprintf("the redrive policy %q in %s names no allowed_signers file: add allowed_signers: FILE to it", pol.Match, where)
}

// noSigners is the refusal when review is required and no allowed signer
// is known; edit is SignersToEdit's answer, tail what was not done.
func noSigners(edit, tail string) error {
	return Refuse(ErrNoAllowedSigners, "review is required but no approval can be verified: %s; %s", edit, tail)
}

// nothingSelected is the refusal of a plan whose selection (flags, as the
// user gave them) matches no record of dlq: the same line on both backends.
func nothingSelected(flags, dlq string) error {
	return Refuse(ErrNothingSelected, "the selection %s matches no record in %s: no plan made", flags, dlq)
}
