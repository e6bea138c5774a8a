package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/audit"
)

// AuditStream mirrors every operator's audit log inside the RabbitMQ
// server (as Kafka's __berth_audit topic does), so cutting entries from
// the end of a local log is detectable: `berth audit verify` compares the
// file with what was mirrored. A stream, because reading it removes
// nothing and its order is the order of appends.
const AuditStream = "berth.audit"

// Audit stream headers: the source log of an entry, and the end marker a
// reader appends to know where the stream ended when it began reading.
const (
	auditSourceHeader = "berth-audit-source"
	auditMarkerHeader = "berth-audit-marker"
)

// auditStreamArgs declare the audit stream: kept for a year.
var auditStreamArgs = amqp.Table{"x-queue-type": "stream", "x-max-age": "365D"}

// AuditSink mirrors audit entries to AuditStream, each with its source log
// (host and file), so each log's chain can be checked on its own. It dials
// lazily and keeps one confirm-mode channel; Close releases it.
type AuditSink struct {
	opts   Options
	source string

	mu   sync.Mutex
	conn *amqp.Connection
	ch   *amqp.Channel
}

// NewAuditSink returns a sink for the server reached with opts (only its
// AMQP URL is used); source names the local log.
func NewAuditSink(opts Options, source string) *AuditSink {
	opts.ManagementURL = ""
	return &AuditSink{opts: opts, source: source}
}

// Mirror appends one entry and waits for the broker's confirm.
func (s *AuditSink) Mirror(ctx context.Context, e audit.Entry) error {
	b, err := e.Line()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil || s.ch.IsClosed() {
		if err := s.open(ctx); err != nil {
			return err
		}
	}
	return publishAudit(ctx, s.ch, amqp.Table{auditSourceHeader: s.source}, b)
}

func (s *AuditSink) open(ctx context.Context) error {
	s.closeLocked()
	c, err := Dial(ctx, s.opts)
	if err != nil {
		return err
	}
	conn, err := c.dial(ctx)
	c.Close()
	if err != nil {
		return err
	}
	ch, err := auditChannel(conn)
	if err != nil {
		conn.Close()
		return fmt.Errorf("%s: %w", AuditStream, err)
	}
	s.conn, s.ch = conn, ch
	return nil
}

// auditChannel declares the stream and opens a confirm-mode channel.
func auditChannel(conn *amqp.Connection) (*amqp.Channel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if _, err := ch.QueueDeclare(AuditStream, true, false, false, false, auditStreamArgs); err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, err
	}
	return ch, nil
}

// publishAudit publishes to the stream and waits for its confirm.
func publishAudit(ctx context.Context, ch *amqp.Channel, h amqp.Table, body []byte) error {
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", AuditStream, true, false,
		amqp.Publishing{Headers: h, ContentType: "application/json", DeliveryMode: amqp.Persistent, AppId: "berth", Body: body})
	if err != nil {
		return fmt.Errorf("%s: %w", AuditStream, err)
	}
	ok, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", AuditStream, err)
	case !ok:
		return fmt.Errorf("%s: the broker refused the entry (nack)", AuditStream)
	}
	return nil
}

// Close releases the sink's connection.
func (s *AuditSink) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

func (s *AuditSink) closeLocked() {
	if s.conn != nil {
		_ = s.conn.CloseDeadline(time.Now().Add(closeGrace))
	}
	s.conn, s.ch = nil, nil
}

// MirroredAudit reads the audit stream and returns each source's entries
// in the order they were mirrored; a server with no audit stream has none.
// To know where the stream ends without waiting on a timer, it first
// appends an end marker (ignored by every reader) and reads up to it: the
// entries appended before the read began are all there.
func (c *Client) MirroredAudit(ctx context.Context) (map[string][][]byte, error) {
	out := map[string][][]byte{}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	probe, err := conn.Channel()
	if err != nil {
		return nil, c.amqpErr(err)
	}
	if _, err := probe.QueueDeclarePassive(AuditStream, true, false, false, false, auditStreamArgs); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return out, nil
		}
		return nil, c.amqpErr(err)
	}
	probe.Close()
	ch, err := auditChannel(conn)
	if err != nil {
		return nil, c.amqpErr(err)
	}
	defer ch.Close()
	var id [8]byte
	_, _ = rand.Read(id[:])
	marker := hex.EncodeToString(id[:])
	if err := publishAudit(ctx, ch, amqp.Table{auditMarkerHeader: marker}, nil); err != nil {
		return nil, err
	}
	if err := ch.Qos(1000, 0, false); err != nil {
		return nil, c.amqpErr(err)
	}
	ds, err := ch.Consume(AuditStream, "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		return nil, c.amqpErr(err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: could not read to the end: %w", AuditStream, ctx.Err())
		case d, ok := <-ds:
			if !ok {
				return nil, fmt.Errorf("%s: the broker closed the reader before its end", AuditStream)
			}
			// Stream consumers ack to receive more (within the prefetch).
			_ = d.Ack(false)
			if m, ok := d.Headers[auditMarkerHeader].(string); ok {
				if m == marker {
					return out, nil
				}
				continue
			}
			src, _ := d.Headers[auditSourceHeader].(string)
			out[src] = append(out[src], d.Body)
		}
	}
}
