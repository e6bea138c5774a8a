// Package backends holds the plain data every backend produces and the small
// interfaces the console talks to. Nothing here does I/O; a Kafka cluster
// (backends/kafka, backends/bundled) and a RabbitMQ server (backends/rabbitmq)
// fill the same shapes where the meaning is the same (brokers, consumers with
// an age) and their own where it is not (partitions and ISR; queue wiring).
// No client-library type crosses this boundary, so tui/ and the engine packages
// never import franz-go or amqp091-go.
package backends

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Kind names the sort of system a context attaches to.
type Kind string

const (
	KindBundled  Kind = "bundled"
	KindKafka    Kind = "kafka"
	KindRabbitMQ Kind = "rabbitmq"
)

// ClusterInfo describes the cluster as a whole.
type ClusterInfo struct {
	ID         string   `json:"cluster_id"`
	Controller int32    `json:"controller"`
	Brokers    []Broker `json:"brokers"`
}

// Broker is one broker (Kafka) or node (RabbitMQ).
type Broker struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Partition is one partition's metadata and offsets as observed.
type Partition struct {
	Topic         string  `json:"topic"`
	Partition     int32   `json:"partition"`
	Leader        int32   `json:"leader"` // -1 when there is no leader (offline)
	LeaderEpoch   int32   `json:"leader_epoch"`
	Replicas      []int32 `json:"replicas"`
	ISR           []int32 `json:"isr"`
	Offline       []int32 `json:"offline_replicas"`
	LogStart      int64   `json:"log_start"`
	HighWatermark int64   `json:"high_watermark"`
	LastStable    int64   `json:"last_stable"`
	// Err is the Kafka error for this partition's metadata or offsets, kept
	// with its code name (e.g. "LEADER_NOT_AVAILABLE"), empty when healthy.
	Err string `json:"error,omitempty"`
}

// Topic is a topic with its partitions and the configs the console reads.
type Topic struct {
	Name              string            `json:"name"`
	Internal          bool              `json:"internal"`
	ReplicationFactor int               `json:"replication_factor"`
	Partitions        []Partition       `json:"partitions"`
	Configs           map[string]string `json:"configs"`
	// Err is the Kafka error the topic's metadata came with (its code name),
	// empty when it loaded; a listed topic that failed keeps its name here.
	Err string `json:"error,omitempty"`
}

// Config keys the console reads from a topic.
const (
	ConfigMinISR        = "min.insync.replicas"
	ConfigRetentionMs   = "retention.ms"
	ConfigCleanupPolicy = "cleanup.policy"
	ConfigTimestampType = "message.timestamp.type"
)

// Member is one consumer-group member and what it is assigned.
type Member struct {
	ID         string           `json:"member_id"`
	InstanceID string           `json:"instance_id,omitempty"`
	ClientID   string           `json:"client_id"`
	Host       string           `json:"host"`
	Assigned   []TopicPartition `json:"assignment"`
}

// Group is a consumer group as described by its coordinator.
type Group struct {
	Name         string   `json:"group"`
	State        string   `json:"state"`
	Protocol     string   `json:"protocol"`
	ProtocolType string   `json:"protocol_type"`
	Coordinator  int32    `json:"coordinator"`
	Members      []Member `json:"members"`
	// Type is the group protocol generation: "classic" (JoinGroup/SyncGroup)
	// or "consumer" (KIP-848); empty when the broker does not say.
	Type string `json:"type,omitempty"`
	// Err is the Kafka error met describing this group (its code name
	// first), empty when it was described; Groups keeps going past it.
	Err string `json:"error,omitempty"`
}

// Committed is a group's committed offset for one partition.
type Committed struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// TimestampType says whose clock a record timestamp came from. It is a small
// number rather than a string so that lag rows, held by the 100,000s, carry
// no pointers; it reads and writes as its name ("CreateTime", ...; "" when
// not set).
type TimestampType uint8

const (
	NoTimestampType TimestampType = iota // not known / not applicable
	CreateTime                           // the producer's clock
	LogAppendTime                        // the broker's clock
	UnknownTimeTyp                       // the record did not say
)

var timestampTypeNames = [...]string{"", "CreateTime", "LogAppendTime", "unknown"}

func (t TimestampType) String() string {
	if int(t) < len(timestampTypeNames) {
		return timestampTypeNames[t]
	}
	return "unknown"
}

// MarshalText writes the name.
func (t TimestampType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a name ("" is NoTimestampType).
func (t *TimestampType) UnmarshalText(b []byte) error {
	for i, n := range timestampTypeNames {
		if n == string(b) {
			*t = TimestampType(i)
			return nil
		}
	}
	return fmt.Errorf("unknown timestamp type %q", b)
}

// OffsetQuery asks for the first data record at or after Offset.
type OffsetQuery struct {
	TopicPartition
	Offset int64
}

// RecordTime answers an OffsetQuery. Found is false when no data record lies
// at or after the offset (an empty tail, or only transaction markers).
type RecordTime struct {
	OffsetQuery
	Found bool `json:"found"`
	// At is the offset of the data record the timestamp belongs to
	// (>= Offset: control records and compacted gaps are skipped).
	At        int64         `json:"at"`
	Timestamp time.Time     `json:"timestamp"`
	Type      TimestampType `json:"timestamp_type"`
	// Approximate is set when the timestamp came from a record batch header
	// (the record did not come back whole): the batch's first timestamp, an
	// upper bound on the age within the producer's linger time.
	Approximate bool `json:"approximate,omitempty"`
}

// Cluster is what the console needs from a Kafka-shaped cluster. Every call
// honours ctx's deadline; errors name the broker, topic or group and keep
// Kafka's error code name.
type Cluster interface {
	// Describe returns the cluster id, controller and brokers.
	Describe(ctx context.Context) (ClusterInfo, error)
	// Topics returns the named topics, or all non-internal topics when none
	// are named, with partitions, offsets and configs filled in.
	Topics(ctx context.Context, names ...string) ([]Topic, error)
	// Groups lists and describes every consumer group.
	Groups(ctx context.Context) ([]Group, error)
	// DescribeGroup describes one group; a group that does not exist is an error.
	DescribeGroup(ctx context.Context, name string) (Group, error)
	// CommittedOffsets returns the committed offsets of each named group.
	CommittedOffsets(ctx context.Context, groups ...string) (map[string][]Committed, error)
	// Close releases connections.
	Close()
}

// TopicCommits is one group's committed offsets on one topic, indexed by
// partition number (Kafka numbers a topic's partitions 0..n-1), so a caller
// walking a topic's partitions finds each commit without a map lookup or a
// sort. At answers -1 for a partition without a commit.
type TopicCommits struct {
	dense  []int64
	sparse map[int32]int64 // partition numbers too far apart to index densely
}

// NewTopicCommits sizes a table for count commits whose partition numbers
// go up to maxPartition.
func NewTopicCommits(count int, maxPartition int32) TopicCommits {
	n := int(maxPartition) + 1
	if n <= 0 || n > 2*count+1024 {
		// A sparse numbering (not something Kafka produces) must not make
		// us allocate a slice per partition number.
		n = min(max(n, 0), 2*count+1024)
	}
	t := TopicCommits{dense: make([]int64, n)}
	for i := range t.dense {
		t.dense[i] = -1
	}
	return t
}

// Set records the commit on partition p.
func (t *TopicCommits) Set(p int32, offset int64) {
	if p >= 0 && int(p) < len(t.dense) {
		t.dense[p] = offset
		return
	}
	if t.sparse == nil {
		t.sparse = map[int32]int64{}
	}
	t.sparse[p] = offset
}

// At is the commit on partition p, -1 when none.
func (t TopicCommits) At(p int32) int64 {
	if p >= 0 && int(p) < len(t.dense) {
		return t.dense[p]
	}
	if o, ok := t.sparse[p]; ok {
		return o
	}
	return -1
}

// CommitTableReader is implemented by backends that can hand the lag monitor
// commits already indexed by topic and partition (map: group -> topic ->
// commits), with the same errors as Cluster.CommittedOffsets: refreshing
// 10,000 partitions x 50 groups then builds no per-commit records and sorts
// nothing.
type CommitTableReader interface {
	CommitTables(ctx context.Context, groups ...string) (map[string]map[string]TopicCommits, error)
}

// TimestampReader is implemented by backends that can read record timestamps
// from the log (the source of age-based lag). Implementations batch queries
// per leader broker and cache answers: the timestamp of an offset never changes.
type TimestampReader interface {
	FirstTimestamps(ctx context.Context, queries []OffsetQuery) ([]RecordTime, error)
}

// UnderReplicated reports whether fewer replicas are in sync than assigned.
func (p Partition) UnderReplicated() bool { return len(p.ISR) < len(p.Replicas) }

// UnderMinISR reports whether the in-sync replicas are fewer than minISR
// (the topic's min.insync.replicas): acks=all producers are then refused
// with NOT_ENOUGH_REPLICAS. minISR <= 0 means unknown and never reports.
func (p Partition) UnderMinISR(minISR int) bool { return minISR > 0 && len(p.ISR) < minISR }

// LeaderOffline reports whether the partition has no leader: it can be neither
// written nor read.
func (p Partition) LeaderOffline() bool { return p.Leader < 0 }

// MinISR is the topic's min.insync.replicas, or 0 when unknown.
func (t Topic) MinISR() int {
	n, err := strconv.Atoi(t.Configs[ConfigMinISR])
	if err != nil {
		return 0
	}
	return n
}
