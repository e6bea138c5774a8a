// Package actions is the only code that changes a cluster. Every action an
// operator can take that writes to a broker lives here, once, and both the
// CLI (cmd/berth) and the console (tui) call it: consumer-group offset
// resets, and redrive plan, show, approve, execute and status for Kafka and
// RabbitMQ.
//
// What is decided here, and nowhere else:
//   - read-only: a read-only context refuses every write with ErrReadOnly,
//     before any I/O that could write (storing a plan, a signature, a batch);
//   - the actor: who acts is the OS user plus, when a key is given, its
//     fingerprint; a plan's own "author" field is never shown as a fact —
//     status shows the verified signers;
//   - the audit log: every write, and every refusal of one, is appended to
//     the local hash-chained log first and mirrored off the machine (the
//     backend's AuditMirror); a local log that cannot be written refuses the
//     action (ErrAuditUnwritable);
//   - the trust model of a redrive plan: a plan is a signed selection
//     (redrive.Core). Execute re-reads every record, skips one whose content
//     digest changed, re-derives everything a reviewer saw (event id,
//     idempotency key, target, class) from the record and the plan's policy,
//     refuses a record whose re-derived target differs from the one signed,
//     re-runs every check, and applies the stricter of the plan's policy and
//     today's. A plan runs only on the cluster it was made on, expires from a
//     creation time that may not lie in the future, and its signatures cover
//     role, cluster and plan hash;
//   - on RabbitMQ, the run loop (rabbit_run.go) consumes the DLQ through
//     the backend's transport and asks the run's policy (rabbitAdmission,
//     rabbit_admit.go), which decides: from what the broker says about the
//     DLQ, whether it may be consumed at all (an auto-delete DLQ, a
//     stream, a quorum DLQ with a delivery limit or whose plan did not
//     accept the requeue side effects are refused); from what each consumed
//     message derives to, whether it is sent (a signed target its
//     dead-lettering does not say is skipped as derived_mismatch; the checks
//     and ordering run again as consumed).
//
// Refusals are typed (errors.Is against the Err* values, errors.As against
// *Refusal) so the CLI maps them to exit codes and the console to messages
// without parsing text.
//
// The backends implement the small interfaces in transport.go with I/O
// only; pure rules (checks, classification, canonical plan encoding) stay
// in package redrive.
package actions
