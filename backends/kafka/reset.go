package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berth-dev/berth/backends"
)

// Resets is the I/O behind consumer-group offset resets (internal/actions
// ResetBackend): the Cluster's reads plus offsets for a timestamp, record
// timestamps at the replayed span's boundaries, group membership that treats
// an unknown group as empty, and the commit itself.
type Resets struct {
	*Cluster
	ts *TimestampReader
}

// NewResets returns the reset backend on c. Closing it closes c.
func NewResets(c *Client) *Resets {
	return &Resets{Cluster: NewCluster(c), ts: NewTimestampReader(c)}
}

// ResetsOn returns the reset backend sharing an existing Cluster's
// connection (the console's). It does not own it: do not Close it.
func ResetsOn(k *Cluster) *Resets {
	return &Resets{Cluster: k, ts: NewTimestampReader(k.c)}
}

// GroupForReset describes the group. A group the cluster does not know
// (never committed, or deleted) has nothing to protect: it is reported as
// "Dead" with no members, and a reset creates its offsets, as
// kafka-consumer-groups does.
func (r *Resets) GroupForReset(ctx context.Context, group string) (backends.Group, error) {
	g, err := r.DescribeGroup(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return backends.Group{Name: group, State: "Dead", Members: []backends.Member{}}, nil
	}
	return g, err
}

// CommittedOffsets is Cluster.CommittedOffsets, except that a group the
// cluster does not know has no committed offsets rather than an error.
func (r *Resets) CommittedOffsets(ctx context.Context, groups ...string) (map[string][]backends.Committed, error) {
	out := make(map[string][]backends.Committed, len(groups))
	for _, g := range groups {
		m, err := r.Cluster.CommittedOffsets(ctx, g)
		switch {
		case errors.Is(err, kerr.GroupIDNotFound):
			out[g] = []backends.Committed{}
		case err != nil:
			return nil, err
		default:
			out[g] = m[g]
		}
	}
	return out, nil
}

// OffsetsForTime answers ListOffsets by timestamp for every partition of the
// topics: the first offset whose record timestamp is at or after at. A
// partition with no such record gets its log end (kadm's fallback, and
// kafka-consumer-groups' rule for --to-datetime).
func (r *Resets) OffsetsForTime(ctx context.Context, at time.Time, topics ...string) (map[backends.TopicPartition]int64, error) {
	listed, err := r.c.admin.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topics...)
	if err != nil {
		return nil, describeErr("offsets for time "+at.UTC().Format(time.RFC3339), err)
	}
	out := map[backends.TopicPartition]int64{}
	var errs []string
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			if o.Partition < 0 {
				errs = append(errs, fmt.Sprintf("topic %s: %s", o.Topic, codeName(o.Err)))
			} else {
				errs = append(errs, fmt.Sprintf("%s[%d]: %s", o.Topic, o.Partition, codeName(o.Err)))
			}
			return
		}
		out[backends.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("offsets for time %s: %s", at.UTC().Format(time.RFC3339), strings.Join(errs, ", "))
	}
	return out, nil
}

// FirstTimestamps reads record timestamps (the TimestampReader the lag
// engine uses, with its cache).
func (r *Resets) FirstTimestamps(ctx context.Context, qs []backends.OffsetQuery) ([]backends.RecordTime, error) {
	return r.ts.FirstTimestamps(ctx, qs)
}

// CommitOffsets commits the offsets for group in one OffsetCommit request
// as a non-member (generation -1): Kafka accepts that only while the group
// is empty, so a consumer that joined after the last check makes the broker
// refuse the commit (UNKNOWN_MEMBER_ID) instead of racing it. Every
// partition error is reported, naming the partition.
func (r *Resets) CommitOffsets(ctx context.Context, group string, offsets []backends.Committed) error {
	os := kadm.Offsets{}
	for _, o := range offsets {
		os.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
	}
	resp, err := r.c.admin.CommitOffsets(ctx, group, os)
	if err != nil {
		return describeErr("commit offsets for group "+group, err)
	}
	var errs []string
	var first error
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			if first == nil {
				first = o.Err
			}
			errs = append(errs, fmt.Sprintf("%s[%d] %s", o.Topic, o.Partition, codeName(o.Err)))
		}
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		msg := strings.Join(errs, ", ")
		if errors.Is(first, kerr.UnknownMemberID) || errors.Is(first, kerr.IllegalGeneration) || errors.Is(first, kerr.RebalanceInProgress) {
			msg += " (a consumer joined the group)"
		}
		return fmt.Errorf("commit offsets for group %s: %s: %w", group, msg, first)
	}
	return nil
}
