package actions

import (
	"context"

	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/redrive"
)

// What the redrive executor needs from a backend, with I/O only: no policy,
// no checks, no audit decisions, no read-only test. A method either does
// what it says or returns an error; it never decides to skip.
//
// backends/kafka.RedriveTransport implements RecordReader and Publisher
// (one transaction per batch with its ledger entries). The Kafka plan store
// and ledger are kafka.PlanStore (PutSigned/GetSigned/ListSigned, keyed
// Lookup and LookupEvents); RabbitMQ's are rabbitmq.Ledger, driven by
// RabbitRedrive, whose execution reads and publishes in one pass (consume,
// publish with confirms, ack). The data types are in package redrive so
// backends need not import this one.

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
