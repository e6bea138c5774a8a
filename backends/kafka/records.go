package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
)

var _ backends.RecordReader = (*Cluster)(nil)

// ReadRecords reads at most limit records of one partition, starting at the
// first record at or after from (an offset below the log start reads from
// the log start). It reads with READ_COMMITTED up to the partition's last
// stable offset and never joins a group or commits.
func (k *Cluster) ReadRecords(ctx context.Context, topic string, partition int32, from int64, limit int) (backends.RecordRange, error) {
	if limit < 1 {
		return backends.RecordRange{}, fmt.Errorf("read %s[%d]: limit must be at least 1", topic, partition)
	}
	ts, err := k.Topics(ctx, topic)
	if err != nil {
		return backends.RecordRange{}, err
	}
	if len(ts) == 0 || ts[0].Err != "" {
		why := "UNKNOWN_TOPIC_OR_PARTITION"
		if len(ts) > 0 {
			why = ts[0].Err
		}
		return backends.RecordRange{}, fmt.Errorf("read %s: %s", topic, why)
	}
	var part *backends.Partition
	for i := range ts[0].Partitions {
		if ts[0].Partitions[i].Partition == partition {
			part = &ts[0].Partitions[i]
		}
	}
	if part == nil {
		return backends.RecordRange{}, fmt.Errorf("read %s[%d]: no such partition (the topic has %d)", topic, partition, len(ts[0].Partitions))
	}
	if part.Err != "" {
		return backends.RecordRange{}, fmt.Errorf("read %s[%d]: %s", topic, partition, part.Err)
	}
	end := part.LastStable
	if end < 0 {
		end = part.HighWatermark
	}
	out := backends.RecordRange{LogStart: part.LogStart, End: end}
	start := max(from, part.LogStart)
	if start >= end {
		return out, nil
	}
	r := readRange{topic: topic, partition: partition, from: start, end: end}
	_, err = k.c.readRanges(ctx, []readRange{r}, int64(limit), 0, func(rec *kgo.Record) {
		out.Records = append(out.Records, plainRecord(rec))
	}, nil)
	if err != nil {
		return backends.RecordRange{}, err
	}
	return out, nil
}

// plainRecord copies a franz-go record into the backend-neutral shape.
func plainRecord(r *kgo.Record) backends.Record {
	out := backends.Record{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(),
		TimestampType: backends.CreateTime,
		Key:           r.Key, KeyNull: r.Key == nil, Value: r.Value,
	}
	if r.Attrs.TimestampType() == 1 {
		out.TimestampType = backends.LogAppendTime
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, backends.Header{Key: h.Key, Value: h.Value})
	}
	return out
}
