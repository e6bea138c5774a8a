package monitor

import (
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
)

// Snapshot is everything one refresh observed and computed. It is immutable
// once Refresh returns it: the monitor never touches its slices again, so the
// TUI may keep and render it from any goroutine.
type Snapshot struct {
	// Seq counts refreshes (1 for the first).
	Seq int
	// Observed is when the refresh started (the "now" ages are measured
	// against).
	Observed time.Time
	// Took is how long the refresh took, and Phases where the time went.
	Took   time.Duration
	Phases Phases
	// Window is the time span the statuses and rates were judged over
	// (0 on the first refresh: one sample shows no movement).
	Window time.Duration

	Cluster backends.ClusterInfo
	// Topics are the non-internal topics, sorted by name.
	Topics []Topic
	// Groups are the consumer groups (filtered by Config.Groups when set),
	// sorted by name.
	Groups []Group
	// Brokers is each broker's leadership and produce share, by broker id.
	Brokers []lag.BrokerShare
	Health  Health
	// Queues are RabbitMQ queue rows (RabbitMQ contexts only; filled by the
	// RabbitMQ side, empty for Kafka).
	Queues []QueueLag
	// RabbitMQ is set for RabbitMQ contexts (nil for Kafka): the console's
	// queue pages read it (see rabbitmq.go).
	RabbitMQ *RabbitMQ
	// Warnings are partial failures that did not stop the refresh (a group
	// that could not be described, timestamps that could not be read).
	Warnings []string
}

// Phases splits a refresh's time: reading the cluster (topics, groups,
// commits), reading record timestamps, and computing lag and health.
type Phases struct {
	Read    time.Duration
	Ages    time.Duration
	Compute time.Duration
}

// Topic is one topic with its partitions, replication health and produce skew.
type Topic struct {
	Name              string
	Internal          bool
	ReplicationFactor int
	Configs           map[string]string
	// Partitions are the partitions as observed, sorted by partition.
	Partitions []backends.Partition
	// Health is each partition's ISR health, aligned with Partitions.
	Health []lag.PartitionHealth
	// Rates are each partition's produce rate, aligned with Partitions.
	Rates []lag.PartitionRate
	Skew  lag.TopicSkew
	// Compacted / Deletes: cleanup.policy contains compact / delete.
	Compacted bool
	Deletes   bool
	// Retention is retention.ms (0: infinite or unknown).
	Retention time.Duration
	MinISR    int
	// DeadLetter: a dead-letter or retry topic (Config.DeadLetter); its
	// Skew is not judged (no hot partitions).
	DeadLetter bool
}

// Group is one consumer group: the engine's roll-up and rows, its members,
// and its recent history for charts.
type Group struct {
	lag.GroupLag
	Protocol string
	Members  []backends.Member
	// History is one point per refresh over Config.History, oldest first.
	History []Point
	// Err is set when the group could not be described or its offsets read.
	Err string
}

// Point is one refresh's roll-up of a group, for charts.
type Point struct {
	At          time.Time
	MaxAge      time.Duration
	MaxAgeKnown bool
	TotalLag    int64
	Status      lag.Status
}

// Health is what `berth health` and the TUI's health page list.
type Health struct {
	// ISR lists partitions that are not healthy or had leader elections
	// since the previous refresh, worst first.
	ISR []lag.PartitionHealth
	// Counts per ISR class over all partitions.
	UnderReplicated int
	AtMinISR        int
	UnderMinISR     int
	Offline         int
	Elections       int
	// Hot lists hot partitions across topics (highest ratio first).
	Hot []lag.HotPartition
	// Skewed lists topics with at least one hot partition.
	Skewed []lag.TopicSkew
	// Breaches lists groups whose maximum age exceeds their SLO, live
	// groups first, then inactive ones.
	Breaches []Breach
	// Brokers is leadership and produce share per broker.
	Brokers []lag.BrokerShare
}

// Breach is a group over its SLO.
type Breach struct {
	Group  string        `json:"group"`
	Status lag.Status    `json:"status"`
	MaxAge time.Duration `json:"-"`
	SLO    time.Duration `json:"-"`
	Topic  string        `json:"topic"`
	// Partition is the partition with the maximum age.
	Partition int32 `json:"partition"`
	// Inactive: the group is abandoned (lag.GroupLag.Inactive), listed
	// after the live breaches.
	Inactive bool `json:"inactive"`
}

// QueueLag is one RabbitMQ queue's row, the queue-shaped counterpart of a
// group's lag: same age and status meanings where they apply. AgeSeconds is
// nil when the age is unknown (no publisher timestamp and no drain rate).
// Ready, Unacked and Consumers are nil until RabbitMQ has produced the
// statistic (a new queue has none for up to 5 s): unknown, never 0.
type QueueLag struct {
	Queue      string   `json:"queue"`
	Vhost      string   `json:"vhost"`
	Type       string   `json:"type"` // classic, quorum, stream
	Ready      *int64   `json:"ready"`
	Unacked    *int64   `json:"unacked"`
	Consumers  *int     `json:"consumers"`
	AgeSeconds *float64 `json:"age_seconds"`
	// AgeSource is "publisher_timestamp" (head message's timestamp
	// property) or "estimate" (ready / drain rate); "unknown" for a DLQ
	// that holds messages whose age is not reported (yet); "" otherwise
	// when unknown.
	AgeSource string `json:"age_source"`
	// Status is the queue's status name (e.g. OK, GROWING, STALLED).
	Status     string  `json:"status"`
	SLOSeconds float64 `json:"slo_seconds"`
	Breach     bool    `json:"breach"`
	// Extra carries queue-specific fields (rates, utilisation, wiring).
	Extra map[string]any `json:"extra,omitempty"`
}

// Group looks a group up by name.
func (s *Snapshot) Group(name string) (Group, bool) {
	for _, g := range s.Groups {
		if g.Group == name {
			return g, true
		}
	}
	return Group{}, false
}
