package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/audit"
)

// AuditTopic mirrors every operator's audit log inside the cluster, so each
// operator sees the same history of destructive actions.
const AuditTopic = "__berth_audit"

// AuditSink mirrors audit entries to AuditTopic. Records are keyed by the
// source log (host and file), so each log's chain can be checked on its own.
// It dials lazily and keeps one connection; Close releases it.
type AuditSink struct {
	opts   Options
	source string

	mu sync.Mutex
	c  *Client
	// gone is set once the cluster did not answer a mirror in time.
	gone error
}

// NewAuditSink returns a sink for the cluster reached with opts; source
// names the local log (e.g. host:path).
func NewAuditSink(opts Options, source string) *AuditSink {
	return &AuditSink{opts: opts, source: source}
}

// Mirror produces one entry (acks from all in-sync replicas).
func (s *AuditSink) Mirror(ctx context.Context, e audit.Entry) error {
	b, err := e.Line()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		c, err := Dial(ctx, s.opts)
		if err != nil {
			return err
		}
		if err := ensureAuditTopic(ctx, c); err != nil {
			c.Close()
			return err
		}
		s.c = c
	}
	if s.gone != nil {
		return s.gone
	}
	rec := &kgo.Record{Topic: AuditTopic, Key: []byte(s.source), Value: b}
	d := s.opts.timeout()
	answered, err := awaitAnswer(ctx, d, func(ctx context.Context) error { return s.c.Kgo().ProduceSync(ctx, rec).FirstErr() })
	if !answered {
		// The producer may hold the entry and retry it for ever: no more
		// mirroring through it this command (Close drops it).
		s.gone = fmt.Errorf("%s: no answer within %s (kafka unreachable?)", AuditTopic, d)
		return s.gone
	}
	if err != nil {
		return fmt.Errorf("%s: %s", AuditTopic, codeName(err))
	}
	return nil
}

// Close releases the sink's connection.
func (s *AuditSink) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

// ensureAuditTopic creates the audit topic: one partition (a total order of
// every operator's entries), never compacted, kept for a year.
func ensureAuditTopic(ctx context.Context, c *Client) error {
	md, err := c.admin.BrokerMetadata(ctx)
	if err != nil {
		return describeErr("metadata", err)
	}
	rf := int16(min(3, len(md.Brokers)))
	cfg := map[string]*string{"cleanup.policy": ptr("delete"), "retention.ms": ptr(fmt.Sprint(int64(365 * 24 * time.Hour / time.Millisecond)))}
	if rf > 1 {
		// Like the plan store and ledger: an acknowledged audit entry is on
		// two brokers.
		cfg["min.insync.replicas"] = ptr("2")
	}
	resp, err := c.admin.CreateTopic(ctx, 1, rf, cfg, AuditTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", AuditTopic, err)
	}
	return nil
}

// MirroredAudit reads the audit topic and returns each source's entries in
// the order they were mirrored. A cluster with no audit topic has none.
func (k *Cluster) MirroredAudit(ctx context.Context) (map[string][][]byte, error) {
	out := map[string][][]byte{}
	ts, err := k.Topics(ctx, AuditTopic)
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return out, nil
		}
		return nil, err
	}
	var ranges []readRange
	for _, p := range ts[0].Partitions {
		ranges = append(ranges, readRange{topic: AuditTopic, partition: p.Partition, from: p.LogStart, end: p.HighWatermark})
	}
	stats, err := k.c.readRanges(ctx, ranges, 0, 0, func(r *kgo.Record) {
		out[string(r.Key)] = append(out[string(r.Key)], r.Value)
	}, nil)
	if err != nil {
		return nil, err
	}
	if !stats.complete() {
		return nil, fmt.Errorf("%s: could not read to the end", AuditTopic)
	}
	return out, nil
}
