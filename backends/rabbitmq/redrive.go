package rabbitmq

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

// What a redrive run needs of the broker, with I/O only. The run itself
// (chunks, the ledger's intents and confirmations, the order in which a
// chunk settles, the policy's admission, pause and cancel, depth
// verification) is internal/actions' (rabbit_run.go): these open the run's
// own connection, consume the DLQ in segments, publish with confirms and
// collect returns, ack, and read the DLQ's depth. None of them decides what
// is sent.

// ReadOnly reports whether the client refuses every change (redrive).
func (c *Client) ReadOnly() bool { return c.opts.ReadOnly }

// Depth reads a queue's ready count and consumers by passive declare (the
// AMQP view, with or without the management API).
func (c *Client) Depth(ctx context.Context, queue string) (backends.Queue, error) {
	return c.passive(ctx, queue)
}

// Unacked is a queue's unacked count from the management API; false
// without the API or when it does not answer.
func (c *Client) Unacked(ctx context.Context, vhost, queue string) (int64, bool) {
	if c.mgmt == nil {
		return 0, false
	}
	q, err := c.Queue(ctx, vhost, queue)
	if err != nil || q.Unacked == nil {
		return 0, false
	}
	return *q.Unacked, true
}

// DLQFacts is what the broker says about a plan's DLQ: the management
// API's view (type, auto-delete, delivery limit); without the API, only the
// queue type the plan recorded.
func (c *Client) DLQFacts(ctx context.Context, p redrive.QueuePlan) (backends.Queue, error) {
	if c.mgmt == nil {
		return backends.Queue{Name: p.DLQ, Type: p.QueueType}, nil
	}
	return c.Queue(ctx, p.Vhost, p.DLQ)
}

// RedriveConn is a redrive run's own AMQP connection: the channels that
// consume its DLQ (one per segment) and its confirm-mode publishers.
// Closing it returns every message still unacked to the DLQ, in place.
type RedriveConn struct {
	c    *Client
	conn *amqp.Connection
	// done ends the relays of deliveries nobody reads any more.
	done chan struct{}
}

// OpenRedrive dials a redrive's own connection. A read-only client refuses.
func (c *Client) OpenRedrive(ctx context.Context) (*RedriveConn, error) {
	if c.opts.ReadOnly {
		return nil, fmt.Errorf("refused: %w", backends.ErrReadOnly)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &RedriveConn{c: c, conn: conn, done: make(chan struct{})}, nil
}

// Close closes the connection. Interrupted, the broker gets closeGrace to
// answer; the socket closes either way and the broker returns every
// unacked message.
func (rc *RedriveConn) Close(interrupted bool) {
	close(rc.done)
	if interrupted {
		_ = rc.conn.CloseDeadline(time.Now().Add(closeGrace))
		return
	}
	_ = rc.conn.Close()
}

// Bounded runs f, giving up when ctx ends (amqp091 calls take no context,
// and a DLQ's queue process busy requeueing does not answer).
func (rc *RedriveConn) Bounded(ctx context.Context, what string, f func() error) error {
	return rc.c.bounded(ctx, what, f)
}

// Delivery is one message consumed from a DLQ, unacked on its segment's
// channel until Ack (or back in the DLQ, in place, when that channel or
// the connection closes).
type Delivery struct {
	d amqp.Delivery
	c *Client
}

// Message is what the delivery derives to with x (its Position is 0),
// without its headers rendered as text (Headers is nil): a run needs its
// facts and digest only.
func (d Delivery) Message(x Extractors) Message { return deriveMessage(0, d.d, x) }

// Ack removes the message from the DLQ, on the channel it arrived on.
func (d Delivery) Ack() error {
	if err := d.d.Ack(false); err != nil {
		return d.c.amqpErr(err)
	}
	return nil
}

// Segment is one channel consuming the DLQ with its own prefetch: what it
// delivered stays unacked on it until acked or returned.
type Segment struct {
	ch         *amqp.Channel
	tag        string
	deliveries chan Delivery
	// consuming: its consumer is registered on the queue (consume-ok
	// came, no cancel-ok yet); the queue counts it among its consumers.
	consuming bool
}

// Consuming reports whether the segment's consumer is registered on the
// DLQ (it counts among the queue's consumers), so that a run can tell its
// own consumers from others'.
func (s *Segment) Consuming() bool { return s != nil && s.consuming }

// Deliveries are the segment's messages in the DLQ's order; the channel
// closes once the consumer is cancelled (after everything sent before the
// cancel) or the connection closes.
func (s *Segment) Deliveries() <-chan Delivery { return s.deliveries }

// Close closes the segment's channel: what it holds unacked returns to the
// DLQ in place.
func (s *Segment) Close() error { return s.ch.Close() }

// Consume opens segment n (1, 2, ...) on queue with the given prefetch,
// bounded by ctx: the answer to basic.consume comes from the queue's
// process, and one busy requeueing does not answer.
func (rc *RedriveConn) Consume(ctx context.Context, queue string, n, prefetch int) (*Segment, error) {
	var s *Segment
	err := rc.c.bounded(ctx, "consume "+queue, func() (err error) {
		s, err = rc.openSegment(queue, n, prefetch)
		return err
	})
	if err != nil {
		return nil, rc.c.amqpErr(err)
	}
	return s, nil
}

// Rotate cancels segment n's consumer and opens segment n+1 on the same
// queue. The broker sends every delivery of the old consumer before its
// cancel-ok, so the old segment's deliveries end, in order, before the
// new one's begin; what the old one holds stays unacked on its channel.
// The new segment's channel and prefetch are set up before the cancel
// (neither asks the queue anything), so that between the old consumer's
// last delivery and the new one's first there is only the new consumer's
// start: at 100,000 messages a run rotates about fifty times, and each
// round trip to a broker under load is milliseconds the reader waits.
// The new segment is returned with an error too when its channel opened
// (it must be closed with the others).
func (rc *RedriveConn) Rotate(old *Segment, queue string, n, prefetch int) (*Segment, error) {
	s, err := rc.segmentChannel(n+1, prefetch)
	if err != nil {
		return s, rc.c.amqpErr(err)
	}
	if err := old.ch.Cancel(old.tag, false); err != nil {
		return s, rc.c.amqpErr(err)
	}
	old.consuming = false
	if err := rc.startConsumer(s, queue); err != nil {
		return s, rc.c.amqpErr(err)
	}
	return s, nil
}

// openSegment opens segment n's channel and consumer. The channel is
// returned with an error once it opened.
func (rc *RedriveConn) openSegment(queue string, n, prefetch int) (*Segment, error) {
	s, err := rc.segmentChannel(n, prefetch)
	if err != nil {
		return s, err
	}
	return s, rc.startConsumer(s, queue)
}

// segmentChannel opens segment n's channel with its prefetch, consuming
// nothing yet. The channel is returned with an error once it opened.
func (rc *RedriveConn) segmentChannel(n, prefetch int) (*Segment, error) {
	ch, err := rc.conn.Channel()
	if err != nil {
		return nil, err
	}
	s := &Segment{ch: ch, tag: fmt.Sprintf("berth-redrive-%d", n)}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return s, err
	}
	return s, nil
}

// startConsumer starts the segment's consumer on queue.
func (rc *RedriveConn) startConsumer(s *Segment, queue string) error {
	d, err := s.ch.Consume(queue, s.tag, false, false, false, false, nil)
	if err != nil {
		return err
	}
	s.consuming = true
	s.deliveries = make(chan Delivery)
	go rc.relay(d, s.deliveries)
	return nil
}

// relay hands the consumer's deliveries on, in order, until they end or
// the connection is closed.
func (rc *RedriveConn) relay(in <-chan amqp.Delivery, out chan<- Delivery) {
	defer close(out)
	for d := range in {
		select {
		case out <- Delivery{d: d, c: rc.c}:
		case <-rc.done:
			return
		}
	}
}

// Publisher is a confirm-mode channel with its returns (every publish is
// mandatory: an unroutable one comes back before its confirm).
type Publisher struct {
	c       *Client
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
	reason  string // why the broker closed the channel, once known
}

// NewPublisher opens a confirm-mode channel whose returns queue holds
// returns messages (size it for every return of the publishes in flight,
// so none is dropped).
func (rc *RedriveConn) NewPublisher(returns int) (*Publisher, error) {
	ch, err := rc.conn.Channel()
	if err != nil {
		return nil, rc.c.amqpErr(err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, rc.c.amqpErr(err)
	}
	return &Publisher{c: rc.c, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, returns)), closed: ch.NotifyClose(make(chan *amqp.Error, 1))}, nil
}

// Redriven is what marks a redriven copy: its event id (message_id), the
// plan's hash, the DLQ it came from and its redrives before this one.
type Redriven struct {
	EventID, Plan, Origin string
	PriorRedrives         int
}

// Confirm is a publish's pending confirm.
type Confirm struct{ dc *amqp.DeferredConfirmation }

// Wait waits for the broker's confirm: true for an ack, false for a nack.
func (c Confirm) Wait(ctx context.Context) (bool, error) { return c.dc.WaitContext(ctx) }

// Publish publishes d's message to exchange and key, mandatory, marked as
// m says (redriveMessage).
func (p *Publisher) Publish(ctx context.Context, d Delivery, exchange, key string, m Redriven) (Confirm, error) {
	msg := redriveMessage(d.d, m.EventID, m.PriorRedrives, m.Plan, m.Origin)
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	return Confirm{dc: dc}, err
}

// Closed reports whether the channel is closed (a publish to a missing
// exchange closes it).
func (p *Publisher) Closed() bool { return p.ch.IsClosed() }

// CloseReason is the broker's reason for closing the channel ("" if open).
func (p *Publisher) CloseReason() string {
	if p.reason != "" {
		return p.reason
	}
	select {
	case e, ok := <-p.closed:
		if ok && e != nil {
			p.reason = fmt.Sprintf("%d %s", e.Code, e.Reason)
		} else if p.ch.IsClosed() {
			p.reason = "closed"
		}
	default:
	}
	return p.reason
}

// TakeReturns moves the returns received so far into returned (message id
// to the broker's reply), without waiting: a return arrives before its
// publish's confirm, so once a publish is confirmed its return, if any, is
// in.
func (p *Publisher) TakeReturns(returned map[string]string) {
	for {
		select {
		case ret, open := <-p.returns:
			if !open {
				return // the channel closed: its returns are all in
			}
			returned[ret.MessageId] = fmt.Sprintf("returned %d %s", ret.ReplyCode, ret.ReplyText)
		default:
			return
		}
	}
}

// redriveMessage is the message published for a DLQ delivery: the original
// properties and headers (x-death kept, so a new death continues the
// history; x-delivery-count dropped; no expiration, or it may expire again),
// the event id as message_id, and Berth's redrive headers.
func redriveMessage(d amqp.Delivery, eventID string, prior int, hash, origin string) amqp.Publishing {
	h := amqp.Table{}
	for k, v := range d.Headers {
		h[k] = v
	}
	for _, k := range DiagnosticHeaders {
		delete(h, k)
	}
	h[HeaderPlan] = hash
	h[HeaderOrigin] = origin
	h[HeaderAttempt] = int64(prior + 1)
	return amqp.Publishing{
		Headers: h, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationId: d.CorrelationId,
		ReplyTo: d.ReplyTo, MessageId: eventID, Timestamp: d.Timestamp, Type: d.Type,
		AppId: d.AppId, Body: d.Body,
	}
}

// Refailure is a redriven message that failed again: it is back in the DLQ
// carrying the plan's berth-redrive-plan header.
type Refailure struct {
	EventID       string `json:"event_id"`
	Position      int    `json:"position"`
	OriginalQueue string `json:"original_queue"`
	Reason        string `json:"reason"`
	Error         string `json:"error,omitempty"`
}

// Refailures browses the DLQ (as `dlq show` does: nothing lost, dead-
// lettered or reordered) for messages that carry this plan's hash: the
// redriven copies that failed again. complete is false when the DLQ holds
// more than limit messages (later ones were not looked at).
func (c *Client) Refailures(ctx context.Context, p redrive.QueuePlan, limit int, x Extractors) (out []Refailure, complete bool, err error) {
	hash := p.Hash()
	out = []Refailure{}
	// Only the re-failures are kept of what is read: the DLQ may still
	// hold most of a large plan's messages (those it excluded).
	res, err := c.BrowseEach(ctx, p.DLQ, BrowseOptions{Limit: limit, QueueType: p.QueueType, AcceptQuorumSideEffects: p.AcceptQuorumSideEffects, Extractors: x},
		func(m Message) error {
			if m.Headers[HeaderPlan] == hash {
				out = append(out, Refailure{EventID: m.EventID, Position: m.Position, OriginalQueue: m.Death.OriginalQueue(), Reason: m.Death.Reason(), Error: m.ErrorHeader})
			}
			return nil
		})
	if err != nil {
		return nil, false, err
	}
	return out, res.Complete, nil
}
