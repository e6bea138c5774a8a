package actions

import (
	"context"

	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// The interfaces below are everything the actions need from a backend.
// backends/kafka and backends/rabbitmq implement them with I/O only: no
// policy, no checks, no audit decisions, no read-only test. A method either
// does what it says or returns an error; it never decides to skip.

// DLQRecord is one DLQ record or message as read now (redrive.DLQRecord:
// plain data, so backends need not import this package).
type DLQRecord = redrive.DLQRecord

// Reader reads a DLQ by location.
type Reader interface {
	// Identity is the cluster's identity a plan is bound to: the Kafka
	// cluster id, the RabbitMQ cluster name.
	Identity(ctx context.Context) (string, error)
	// ReadAt returns the records at locs; a record that is gone
	// (retention, compaction, acked) is absent from the map, not an error.
	ReadAt(ctx context.Context, dlq string, locs []string) (map[string]DLQRecord, error)
}

// Outgoing is one record to send with its ledger entry (redrive.Outgoing).
type Outgoing = redrive.Outgoing

// Publisher sends a plan's batches. Kafka: each batch and its ledger entries
// in one transaction under a transactional id derived from the plan hash
// (nothing of a failed batch is visible). RabbitMQ: mandatory publishes on a
// confirm channel, ledger intent before and completion after, the DLQ
// message acked only after its confirm (at-least-once; the window is
// documented).
type Publisher interface {
	// Publish returns the ledger entries with their target coordinates.
	Publish(ctx context.Context, batch []Outgoing) ([]redrive.LedgerEntry, error)
	Close() error
}

// Ledger answers what has been redriven or settled, for the records asked
// about only: a look-up costs what the plan needs, not what the ledger ever
// held.
type Ledger interface {
	Lookup(ctx context.Context, dlq string, locs []string) ([]redrive.LedgerEntry, error)
}

// Listed is one entry of the plan store. A malformed stored record is one
// Listed with Err set: it never hides the other plans.
type Listed struct {
	Key  string // the store's key for it (for the message)
	Plan redrive.SignedPlan
	Err  error
}

// PlanStore keeps plans and their signatures where every operator attached
// to the cluster sees them. There is no size limit from the broker: a store
// that holds plans in messages chunks or compresses them.
type PlanStore interface {
	PutPlan(ctx context.Context, p redrive.SignedPlan) error
	// AddSignature stores one more signature; the plan is untouched.
	AddSignature(ctx context.Context, planHash string, s approval.Signature) error
	// GetPlan returns the plan whose hash starts with prefix (8+ hex
	// digits) with every stored signature; unknown or ambiguous is an error.
	GetPlan(ctx context.Context, prefix string) (redrive.SignedPlan, error)
	ListPlans(ctx context.Context) ([]Listed, error)
}

// AuditMirror copies audit entries off the machine (Kafka: the audit topic;
// RabbitMQ: a stream). A mirror failure is reported, not fatal: the local
// log has the entry.
type AuditMirror = audit.Sink

// Transport is a backend for the redrive actions.
type Transport interface {
	Reader
	Ledger
	PlanStore
	// Publisher opens the publisher for one plan's execution.
	Publisher(ctx context.Context, planHash string) (Publisher, error)
	// Mirror is the audit mirror (nil: none on this backend yet).
	Mirror() AuditMirror
}
