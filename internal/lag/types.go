// Package lag is Berth's lag engine: pure computation that turns observed
// offsets, commits and record timestamps into per-partition lag rows,
// per-group roll-ups, statuses, skew and ISR health. It does no I/O, keeps no
// clock (time is always an argument) and imports no client library, so every
// rule here is tested with tables of numbers.
//
// Definitions (per group x topic x partition), after the seeds' Decision 17
// (SLOs are ages, not message counts):
//
//   - c committed offset (NoCommit: none), s log start, e high watermark.
//   - position p = max(c, s); offset lag = max(0, e - p).
//   - EXPIRED when c < s: s - c records were deleted by retention before the
//     group read them (Lost).
//   - age = now - timestamp of the first data record at or after p when lag
//     > 0, else 0. A timestamp in the future reads as 0 and sets ClockSkew.
//   - rates from the first and last sample in the window; ETA = lag /
//     (consume - produce) when positive, else falling behind.
//   - time to data loss = retention - age on delete-policy topics.
package lag

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/backends"
)

// NoCommit is the committed offset of a partition the group never committed.
// Its position is the log start (the group would start there at earliest).
const NoCommit int64 = -1

// Status is a partition's (or group's) health over the sliding window. The
// constants are ordered by severity: a group's status is its worst
// partition's, i.e. the maximum.
type Status uint8

const (
	// OK: caught up (no lag), keeping up (the age is within
	// Config.SteadyAge), or catching up (lag and age both fell since the
	// reference sample).
	OK Status = iota
	// JUDGING: behind (age past the steady age), owned, and Berth has not
	// yet watched the commit for Config.CommitInterval (one sample, or
	// samples too close together): it cannot tell stuck from slow yet, and
	// says so rather than guess a status it would take back.
	JUDGING
	// LAGGING: behind, the commit moved since the reference sample, but lag
	// or age did not fall (it is falling behind or not catching up).
	LAGGING
	// REWIND: the committed offset went backwards in the window and has not
	// yet returned to where it was (an offset reset or a replay).
	REWIND
	// STALLED: a member owns the partition, its age is past the steady age,
	// the committed offset did not move for at least Config.CommitInterval
	// (whatever earlier samples said), and its owner is not simply busy: the
	// owner moves nothing at all, or its other partitions are caught up (a
	// stuck or poisoned partition). A partition left waiting while its owner
	// works through backlog elsewhere is LAGGING (slow, not stuck).
	STALLED
	// STOPPED: lag > 0, commits not moving, and no member owns the partition
	// (the group is empty or the partition is unassigned).
	STOPPED
	// EXPIRED: the committed offset is below the log start: retention deleted
	// records the group had not read (Lost counts them).
	EXPIRED
)

// Statuses lists every status in severity order.
var Statuses = []Status{OK, JUDGING, LAGGING, REWIND, STALLED, STOPPED, EXPIRED}

var statusNames = [...]string{"OK", "JUDGING", "LAGGING", "REWIND", "STALLED", "STOPPED", "EXPIRED"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", s)
}

// MarshalText writes the status name ("OK", "STALLED", ...).
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a status name.
func (s *Status) UnmarshalText(b []byte) error {
	for i, n := range statusNames {
		if n == string(b) {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("unknown status %q", b)
}

// PartitionLag is one group's lag in one partition at one moment. It is a
// value: snapshots hold slices of them and never change them afterwards.
// Group is not repeated here: a PartitionLag always lives in its GroupLag.
// Fields are ordered to keep the struct small, and it holds no pointers
// (strings are interned Names): a snapshot of 10,000 partitions x 50 groups
// holds 500,000 of them, which the garbage collector then never scans.
type PartitionLag struct {
	Topic Name
	// Owner is the member id that owns the partition ("" when none).
	Owner Name
	// Err is set when the partition's offsets could not be read (e.g. it has
	// no leader): lag and age are then unknown, not zero.
	Err Name

	// Committed is the group's committed offset, NoCommit when none.
	Committed int64
	LogStart  int64
	End       int64 // high watermark
	// Lag is max(0, End - max(Committed, LogStart)), except that a tail made
	// only of transaction markers (or aborted records) is not lag: it is 0.
	Lag int64
	// Lost is LogStart - Committed when the partition is EXPIRED, else 0.
	Lost int64
	// Age is now minus the timestamp of the first data record at or after
	// the position; 0 when Lag is 0.
	Age time.Duration
	// ETA is the time to catch up at current rates (0 when no lag).
	ETA time.Duration
	// TimeToLoss is retention - age on delete-policy topics with a finite
	// retention.
	TimeToLoss time.Duration

	// ProduceRate and ConsumeRate are records per second over the window
	// (end offset and committed offset deltas).
	ProduceRate float64
	ConsumeRate float64

	Partition int32
	Status    Status

	// AgeKnown is false when the timestamp could not be read (not fetched
	// yet, not authorised, an error).
	AgeKnown bool
	// AgeApprox is set when the timestamp came from a record batch header
	// (the record itself did not come back whole): the age is the batch's
	// oldest, an upper bound within the producer's linger time.
	AgeApprox bool
	// ClockSkew is set when the record's timestamp lies in the future (the
	// producer's clock is ahead): Age then reads 0.
	ClockSkew bool
	// RatesKnown is false until two samples exist.
	RatesKnown bool
	// ETAKnown: ETA is meaningful. FallingBehind is set instead when there
	// is lag and the consumer is not gaining (consume <= produce).
	ETAKnown      bool
	FallingBehind bool
	// TimeToLossKnown: TimeToLoss is meaningful; RetentionRisk flags it
	// under the configured margin.
	TimeToLossKnown bool
	RetentionRisk   bool
	// Breach is set when Age exceeds the group's SLO.
	Breach bool
	// Compacted marks a compacted topic: offset lag is an upper bound
	// (compaction leaves gaps), the age is still exact.
	Compacted bool
	// CommitMoved is set when the committed offset changed since the
	// reference sample (the newest at least Config.CommitInterval old).
	CommitMoved bool
	// TimestampType says whose clock the age's timestamp came from.
	TimestampType backends.TimestampType

	// EventAge is now minus the event time of the first record at or after
	// the position (topics with an event-time rule; 0 when Lag is 0).
	EventAge time.Duration
	// EventRule: the topic has an event-time rule; EventAgeKnown: EventAge
	// is meaningful; EventState says what the probe found (missing and
	// unparsable fields are counted, never guessed); EventClockError: the
	// event time is ahead of now by more than the rule's margin.
	EventRule       bool
	EventAgeKnown   bool
	EventClockError bool
	EventState      EventState
}

// GroupLag is a consumer group's roll-up: maximum age (never an average),
// sum of lag, worst status, plus its partition rows.
type GroupLag struct {
	Group       string
	State       string // the coordinator's state (Stable, Empty, ...)
	MemberCount int
	// IdleMembers are member ids with no assignment (e.g. more members than
	// partitions): capacity that cannot help.
	IdleMembers []string

	Status Status
	// Counts is the number of partitions in each status.
	Counts [len(statusNames)]int

	// MaxAge is the largest partition age (the group's headline "lag in
	// time"); MaxAgeKnown is false when no lagging partition's age is known.
	MaxAge          time.Duration
	MaxAgeKnown     bool
	MaxAgeTopic     string
	MaxAgePartition int32
	// AgesUnknown counts lagging partitions whose age could not be read.
	AgesUnknown int

	TotalLag    int64
	Lost        int64
	ProduceRate float64
	ConsumeRate float64

	// AgeSkew is max / median partition age among the group's partitions
	// (0 when undefined): one stuck partition stands out when it is large.
	AgeSkew float64

	SLO    time.Duration
	Breach bool

	ClockSkew     bool
	RetentionRisk bool

	// MaxEventAge is the largest event-time age among partitions with an
	// event-time rule (MaxEventAgeKnown false when none is known);
	// EventUnknown counts lagging partitions whose event time is missing,
	// unparsable or unread; EventClockErrors those flagged for clock error.
	// EventSLO is the group's event-time SLO (0: none), EventBreach set
	// when MaxEventAge exceeds it. None of these change Status: event time
	// is a business measure, the ingest age the consumer's health.
	MaxEventAge      time.Duration
	MaxEventAgeKnown bool
	EventUnknown     int
	EventClockErrors int
	EventSLO         time.Duration
	EventBreach      bool

	// Inactive: abandoned rather than in trouble. The group has no members,
	// no commit moved, and its backlog is older than Config.InactiveAfter
	// (nobody has consumed it for that long).
	// Views list inactive groups after the live ones, apart.
	Inactive bool

	// Partitions are the rows, sorted by topic then partition.
	Partitions []PartitionLag
}

// ISRClass classifies a partition's replication health, worst last.
type ISRClass uint8

const (
	// Healthy: every replica is in sync.
	Healthy ISRClass = iota
	// UnderReplicated: ISR smaller than the replica set, still above min ISR.
	UnderReplicated
	// AtMinISR: ISR equals min.insync.replicas: one more loss blocks writes.
	AtMinISR
	// UnderMinISR: ISR below min.insync.replicas: acks=all writes are
	// rejected with NOT_ENOUGH_REPLICAS.
	UnderMinISR
	// Offline: no leader: nothing can be read or written.
	Offline
)

var isrNames = [...]string{"healthy", "under_replicated", "at_min_isr", "under_min_isr", "offline"}

func (c ISRClass) String() string {
	if int(c) < len(isrNames) {
		return isrNames[c]
	}
	return fmt.Sprintf("ISRClass(%d)", c)
}

// MarshalText writes the class name ("under_min_isr", ...).
func (c ISRClass) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// PartitionHealth is one partition's replication health.
type PartitionHealth struct {
	Topic       string   `json:"topic"`
	Partition   int32    `json:"partition"`
	Leader      int32    `json:"leader"`
	LeaderEpoch int32    `json:"leader_epoch"`
	Replicas    int      `json:"replicas"`
	ISR         int      `json:"isr"`
	MinISR      int      `json:"min_isr"`
	Class       ISRClass `json:"class"`
	// WritesBlocked: acks=all produce fails (UnderMinISR or Offline).
	WritesBlocked bool `json:"writes_blocked"`
	// Elections is the number of leader-epoch changes seen since the
	// previous refresh (0 on the first).
	Elections int `json:"elections"`
	// Err is the partition's metadata error code name, if any.
	Err string `json:"error,omitempty"`
}

// PartitionRate is one partition's produce rate, the input to skew.
type PartitionRate struct {
	Topic     string
	Partition int32
	Leader    int32
	Rate      float64 // records per second over the window
	Known     bool
}

// HotPartition is a partition whose produce rate is at least
// Config.HotRatio times its topic's median.
type HotPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Rate      float64 `json:"produce_rate"`
	// Ratio is Rate / median; 0 when the median is 0 (all others idle).
	Ratio float64 `json:"ratio"`
	// Share is the partition's fraction of the topic's produce rate.
	Share float64 `json:"share"`
}

// TopicSkew is the produce-rate skew of one topic over the window.
type TopicSkew struct {
	Topic      string  `json:"topic"`
	Partitions int     `json:"partitions"`
	TotalRate  float64 `json:"produce_rate"`
	MaxRate    float64 `json:"max_rate"`
	MedianRate float64 `json:"median_rate"`
	// Ratio is MaxRate / MedianRate; 0 when undefined. Unbounded is set when
	// the median is 0 but some partition produces (one partition takes it all).
	Ratio     float64        `json:"ratio"`
	Unbounded bool           `json:"unbounded"`
	Hot       []HotPartition `json:"hot"`
}

// BrokerShare is one broker's share of partition leadership and of produce
// traffic (which lands on leaders).
type BrokerShare struct {
	Broker       int32   `json:"broker"`
	Leaders      int     `json:"leaders"`
	LeaderShare  float64 `json:"leader_share"`
	ProduceRate  float64 `json:"produce_rate"`
	ProduceShare float64 `json:"produce_share"`
}

// Config tunes the engine. Zero fields take the defaults in DefaultConfig.
type Config struct {
	// Window is the sliding window statuses and rates are judged over.
	Window time.Duration
	// SteadyAge: a partition whose age is at or below it is OK whatever its
	// commits do (normal commit cadence and batching show as a few seconds).
	SteadyAge time.Duration
	// CommitInterval is the longest a working consumer goes between
	// commits (Kafka's auto.commit.interval.ms default is 5s): a commit
	// that did not move over at least this long, with the age past the
	// steady age, is a stall; over less it is not judged yet.
	CommitInterval time.Duration
	// RetentionMargin flags TimeToLoss below it.
	RetentionMargin time.Duration
	// SkewTolerance: timestamps up to this far in the future read as age 0
	// without a clock-skew flag (clocks a little apart are normal).
	SkewTolerance time.Duration
	// HotRatio: a partition is hot at HotRatio x its topic's median rate.
	HotRatio float64
	// MinHotRate: topics producing less than this (records/s in total) are
	// not judged for hot partitions (noise).
	MinHotRate float64
	// InactiveAfter: a memberless group whose backlog is older than this is
	// inactive (GroupLag.Inactive), not an incident.
	InactiveAfter time.Duration
}

// DefaultConfig returns the defaults: a 2 minute window, 15 s steady age,
// 5 s commit interval, 6 h retention margin, 5 s skew tolerance, hot at 3x
// median above 1 rec/s, inactive after 1 h.
func DefaultConfig() Config {
	return Config{
		Window:          2 * time.Minute,
		SteadyAge:       15 * time.Second,
		CommitInterval:  5 * time.Second,
		RetentionMargin: 6 * time.Hour,
		SkewTolerance:   5 * time.Second,
		HotRatio:        3,
		MinHotRate:      1,
		InactiveAfter:   time.Hour,
	}
}

// WithDefaults fills zero fields from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.Window <= 0 {
		c.Window = d.Window
	}
	if c.SteadyAge <= 0 {
		c.SteadyAge = d.SteadyAge
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = d.CommitInterval
	}
	if c.RetentionMargin <= 0 {
		c.RetentionMargin = d.RetentionMargin
	}
	if c.SkewTolerance <= 0 {
		c.SkewTolerance = d.SkewTolerance
	}
	if c.HotRatio <= 0 {
		c.HotRatio = d.HotRatio
	}
	if c.MinHotRate <= 0 {
		c.MinHotRate = d.MinHotRate
	}
	if c.InactiveAfter <= 0 {
		c.InactiveAfter = d.InactiveAfter
	}
	return c
}
