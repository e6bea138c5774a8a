package actions

import (
	"context"
	"iter"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// What the redrive executors need from a backend, with I/O only: no policy,
// no checks, no audit decisions, no read-only test. A method either does
// what it says or returns an error; it never decides to skip. The run loops
// (chunks, ledger entries, settle order, pause and cancel, verification)
// are this package's: Kafka's in execute.go, RabbitMQ's in rabbit_run.go.
//
// backends/kafka.RedriveTransport implements RecordReader and Publisher
// (one transaction per batch with its ledger entries). The Kafka planner
// and runs see the cluster as KafkaCluster and the plan store and ledger
// as KafkaPlanStore; NewPlanner and KafkaStore fit a *kafka.Cluster and a
// *kafka.PlanStore to them (kafka_backend.go, the one place here that
// names those types).
//
// backends/rabbitmq.Client implements RabbitTransport: the DLQ's facts and
// depth, and a run's own connection (rabbitmq.RedriveConn) that consumes
// the DLQ in segments (channels with a prefetch, deliveries acked one by
// one), publishes with confirms and mandatory returns, and returns what it
// holds to the DLQ when closed; and RabbitClient, what making, reviewing
// and approving a plan need (browse, ready count). backends/rabbitmq.Ledger
// (PostgreSQL or sqlite) implements RabbitLedger and RabbitStore (plans,
// signatures, ledger look-ups by event id). RabbitMQ reads and publishes in one
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

// KafkaCluster is what the Kafka planner and a Kafka run need of the
// cluster: its identity, its DLQs and their records (by a read limit, by
// offsets or by coordinates), the ordering scan, and, for a run, the DLQ's
// ends, the read-back of what was sent and a transactional publisher.
type KafkaCluster interface {
	Describe(ctx context.Context) (backends.ClusterInfo, error)
	DLQs(ctx context.Context, pairs []redrive.Pair) ([]redrive.DLQ, map[string]backends.Topic, error)
	ReadDLQ(ctx context.Context, dlq string, opt kafka.ReadOptions) (kafka.ReadResult, error)
	// ReadDLQEach hands each record read to fn rather than holding them.
	ReadDLQEach(ctx context.Context, dlq string, opt kafka.ReadOptions, fn func(redrive.Record)) (kafka.ReadResult, error)
	// ReadDLQAt reads the records at coords; missing are those gone.
	ReadDLQAt(ctx context.Context, dlq string, coords []redrive.Coord) (recs []redrive.Record, missing []redrive.Coord, err error)
	// ReadDLQByCoord reads the records at coords; a gone record is absent.
	ReadDLQByCoord(ctx context.Context, dlq string, coords []redrive.Coord) (map[redrive.Coord]redrive.Record, error)
	ScanOrdering(ctx context.Context, s *redrive.OrderingScan, limit int64, progress func(kafka.ScanProgress)) error
	DLQEnds(ctx context.Context, dlq string) (map[int32]int64, error)
	// VerifyRedriven reads back the copies the ledger entries name and
	// compares each with want (the SHA-256 of its DLQ record's value).
	VerifyRedriven(ctx context.Context, entries []redrive.LedgerEntry, want map[redrive.Coord]string) ([]kafka.Mismatch, error)
	// OpenPublisher opens a run's transactional producer, its
	// transactional id derived from the plan hash.
	OpenPublisher(ctx context.Context, planHash string) (Publisher, error)
}

// KafkaLedger is the redrive ledger's keyed look-ups the checks make: the
// entries for some DLQ records (each handed to fn; has says which of the
// entry's coordinates are wanted) and the entries for some event ids.
type KafkaLedger interface {
	LookupEach(ctx context.Context, dlq string, coords iter.Seq[redrive.Coord], has func(redrive.Coord) bool, fn func(redrive.Coord, *redrive.LedgerEntry)) error
	LookupEvents(ctx context.Context, ids []string) ([]redrive.LedgerEntry, error)
}

// KafkaPlanStore is the Kafka plan store and its ledger as the actions use
// them.
type KafkaPlanStore interface {
	KafkaLedger
	Plans(ctx context.Context) ([]redrive.File, error)
	// Plan is the stored plan whose hash starts with prefix.
	Plan(ctx context.Context, prefix string) (redrive.File, error)
	PutPlan(ctx context.Context, f redrive.File) error
	AddSignature(ctx context.Context, hash string, sig approval.Signature) error
	// RedrivenByPlan counts the ledger's redriven records by plan hash.
	RedrivenByPlan(ctx context.Context) (map[string]int, error)
	// Pinned is the same store whose ledger look-ups read the ledger as
	// it is at the first of them, never what is added after (a run's
	// re-checks must not grow with what the run itself sends).
	Pinned() KafkaPlanStore
}

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
	// Unseen counts what the queue's `others` other consumers hold
	// unacknowledged (nil: nothing), as a browse counts it.
	Unseen(ctx context.Context, queue string, others int, waiting func(string)) *rabbitmq.Unseen
	// OpenRedrive dials the run's own connection (refused when read-only).
	OpenRedrive(ctx context.Context) (*rabbitmq.RedriveConn, error)
}

// RabbitLedger is the RabbitMQ redrive ledger as a run uses it: the plan's
// states before, intents and outcomes per chunk (*rabbitmq.Ledger).
type RabbitLedger interface {
	PlanStates(ctx context.Context, plan string) (map[string]string, error)
	Record(ctx context.Context, entries []rabbitmq.LedgerEntry) error
}

// RabbitClient is what RabbitMQ plans, reviews and approvals need of the
// broker: its identity, browsing a DLQ (every message read returned to
// it, in order) and a queue's depth, ready and consumer counts;
// *rabbitmq.Client implements it.
type RabbitClient interface {
	Vhost() string
	ClusterName() string
	Browse(ctx context.Context, queue string, o rabbitmq.BrowseOptions) (rabbitmq.BrowseResult, error)
	// BrowseEach hands each message read to each rather than holding them.
	BrowseEach(ctx context.Context, queue string, o rabbitmq.BrowseOptions, each func(rabbitmq.Message) error) (rabbitmq.BrowseResult, error)
	// ReadyAndConsumers is a queue's ready count and consumer count.
	ReadyAndConsumers(ctx context.Context, queue string) (ready int64, consumers int, err error)
	// Depth is a queue's ready count by passive declare.
	Depth(ctx context.Context, queue string) (backends.Queue, error)
}

// RabbitStore is the RabbitMQ redrive store as plans, reviews and
// approvals use it: plans and their signatures, the ledger's counts of a
// plan's events by state and its entries for some event ids;
// *rabbitmq.Ledger implements it.
type RabbitStore interface {
	// PlanStateCounts counts a plan's events per state.
	PlanStateCounts(ctx context.Context, plan string) (map[string]int, error)
	PutPlan(ctx context.Context, p redrive.QueuePlan) error
	AddSignature(ctx context.Context, s approval.Signature) error
	// Signatures are a stored plan's author signature (nil: none) and its
	// approvals.
	Signatures(ctx context.Context, plan string) (*approval.Signature, []approval.Signature, error)
	// RedrivenAmongIDs says, for those of ids the ledger has redriven,
	// by what plan and when.
	RedrivenAmongIDs(ctx context.Context, ids []string) (map[string]string, error)
	// ConfirmedAmong are the confirmed entries of ids, not exceptPlan's.
	ConfirmedAmong(ctx context.Context, ids []string, exceptPlan string) (map[string]rabbitmq.LedgerEntry, error)
}

// *rabbitmq.Client and *rabbitmq.Ledger are what the CLI and the console
// hand the RabbitMQ actions.
var (
	_ RabbitTransport = (*rabbitmq.Client)(nil)
	_ RabbitClient    = (*rabbitmq.Client)(nil)
	_ RabbitLedger    = (*rabbitmq.Ledger)(nil)
	_ RabbitStore     = (*rabbitmq.Ledger)(nil)
)
