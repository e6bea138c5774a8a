package actions

import (
	"context"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/redrive"
)

// What the redrive executors need from a backend, with I/O only: no policy,
// no checks, no audit decisions, no read-only test. A method either does
// what it says or returns an error; it never decides to skip. The run loops
// (chunks, ledger entries, settle order, pause and cancel, verification)
// are this package's: Kafka's in execute.go, RabbitMQ's in rabbit_run.go.
//
// backends/kafka.RedriveTransport implements RecordReader and Publisher
// (one transaction per batch with its ledger entries). The Kafka plan store
// and ledger are kafka.PlanStore (PutSigned/GetSigned/ListSigned, keyed
// Lookup and LookupEvents).
//
// backends/rabbitmq.Client implements RabbitTransport: the DLQ's facts and
// depth, and a run's own connection (rabbitmq.RedriveConn) that consumes
// the DLQ in segments (channels with a prefetch, deliveries acked one by
// one), publishes with confirms and mandatory returns, and returns what it
// holds to the DLQ when closed. backends/rabbitmq.Ledger (PostgreSQL or
// sqlite) implements RabbitLedger. RabbitMQ reads and publishes in one
// pass (consume, publish with confirms, ack), so its transport hands over
// deliveries rather than reading by coordinates. The data types are in
// package redrive, or the backend's own, so backends need not import this
// one.

// RecordReader reads Kafka DLQ records by coordinates; a record that is
// gone (retention, compaction) is absent from the map, not an error.
type RecordReader interface {
	Read(ctx context.Context, dlq string, coords []redrive.Coord) (map[redrive.Coord]redrive.Record, error)
}

// DLQRecord is one DLQ record or message with everything its content
// digest covers (redrive.DLQRecord).
type DLQRecord = redrive.DLQRecord

// Outgoing is one record to send with its ledger entry (redrive.Outgoing).
type Outgoing = redrive.Outgoing

// Publisher sends a plan's batches. Kafka: each batch and its ledger entries
// in one transaction under a transactional id derived from the plan hash
// (nothing of a failed batch is visible).
type Publisher interface {
	// Publish returns the ledger entries with their target coordinates.
	Publish(ctx context.Context, batch []Outgoing) ([]redrive.LedgerEntry, error)
	Close() error
}

// AuditMirror copies audit entries off the machine (Kafka: the audit topic;
// RabbitMQ: the berth.audit stream). A mirror failure is reported, not
// fatal: the local log has the entry.
type AuditMirror = audit.Sink

// RabbitTransport is what a RabbitMQ run (rabbit_run.go) needs of the
// broker; *rabbitmq.Client implements it.
type RabbitTransport interface {
	Vhost() string
	ClusterName() string
	// AMQPAddr is host:port of the AMQP endpoint, for errors.
	AMQPAddr() string
	// ReadOnly reports whether the client refuses every change.
	ReadOnly() bool
	// DLQFacts is the management API's view of a plan's DLQ (type,
	// auto-delete, delivery limit), or without the API only the plan's
	// queue type.
	DLQFacts(ctx context.Context, p redrive.QueuePlan) (backends.Queue, error)
	// Depth is a queue's ready count by passive declare.
	Depth(ctx context.Context, queue string) (backends.Queue, error)
	// Unacked is a queue's unacked count from the management API (false
	// without it).
	Unacked(ctx context.Context, vhost, queue string) (int64, bool)
	// OpenRedrive dials the run's own connection (refused when read-only).
	OpenRedrive(ctx context.Context) (*rabbitmq.RedriveConn, error)
}

// RabbitLedger is the RabbitMQ redrive ledger as a run uses it: the plan's
// states before, intents and outcomes per chunk (*rabbitmq.Ledger).
type RabbitLedger interface {
	PlanStates(ctx context.Context, plan string) (map[string]string, error)
	Record(ctx context.Context, entries []rabbitmq.LedgerEntry) error
}
