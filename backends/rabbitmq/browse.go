package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
)

// DLQ is a queue that receives dead letters.
type DLQ struct {
	Name  string `json:"dlq"`
	Vhost string `json:"vhost"`
	Type  string `json:"type"`
	// Sources are the queues whose dead letters land here.
	Sources []string `json:"sources"`
	// Found is "wiring" (a queue's dead-letter exchange is bound to it) or
	// "config" (redrive.dlqs).
	Found string          `json:"found"`
	Queue *backends.Queue `json:"-"`
}

// DLQs finds dead-letter queues: for every queue with a dead-letter
// exchange, the queues bound to that exchange with a binding that matches
// its dead-letter routing key (exactly, by wildcard, or an empty key); for
// the default exchange, the queue named by the routing key. Configured pairs
// are added (the only source in reduced mode).
func (c *Client) DLQs(ctx context.Context, configured []config.DLQPair) ([]DLQ, error) {
	inv, err := c.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*DLQ{}
	queues := map[string]backends.Queue{}
	for _, q := range inv.Queues {
		queues[q.Vhost+"\x00"+q.Name] = q
	}
	add := func(vhost, name, source, found string) {
		k := vhost + "\x00" + name
		d, ok := byKey[k]
		if !ok {
			d = &DLQ{Name: name, Vhost: vhost, Found: found}
			if q, ok := queues[k]; ok {
				q := q
				d.Type, d.Queue = q.Type, &q
			}
			byKey[k] = d
		}
		for _, s := range d.Sources {
			if s == source {
				return
			}
		}
		if source != "" {
			d.Sources = append(d.Sources, source)
		}
	}
	if c.mgmt != nil {
		bindings := map[string][]mBinding{}
		for _, q := range inv.Queues {
			w := q.Wiring
			if w.DeadLetterExchange == nil {
				continue
			}
			dlx := *w.DeadLetterExchange
			if dlx == "" {
				if w.DeadLetterRoutingKey != nil {
					add(q.Vhost, *w.DeadLetterRoutingKey, q.Name, "wiring")
				}
				continue
			}
			bk := q.Vhost + "\x00" + dlx
			bs, ok := bindings[bk]
			if !ok {
				if bs, err = c.mgmt.exchangeBindings(ctx, q.Vhost, dlx); err != nil {
					return nil, err
				}
				bindings[bk] = bs
			}
			for _, b := range bs {
				if b.DestinationType != "queue" || b.Destination == q.Name {
					continue
				}
				if w.DeadLetterRoutingKey == nil || b.RoutingKey == *w.DeadLetterRoutingKey ||
					b.RoutingKey == "" || strings.ContainsAny(b.RoutingKey, "*#") {
					add(q.Vhost, b.Destination, q.Name, "wiring")
				}
			}
		}
	}
	for _, p := range configured {
		add(c.Vhost(), p.DLQ, p.Original, "config")
	}
	out := make([]DLQ, 0, len(byKey))
	for _, d := range byKey {
		sort.Strings(d.Sources)
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Vhost != out[j].Vhost {
			return out[i].Vhost < out[j].Vhost
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// BrowseOptions tune Browse.
type BrowseOptions struct {
	// Limit is the most messages read (default 100).
	Limit int
	Extractors
	// QueueType must be given in reduced mode (no management API to ask).
	QueueType string
	// AcceptQuorumSideEffects allows browsing a quorum queue with no
	// delivery limit, knowing each message's delivery count grows by one.
	AcceptQuorumSideEffects bool
}

// BrowseResult is what a browse read, and how.
type BrowseResult struct {
	Queue string `json:"queue"`
	Vhost string `json:"vhost"`
	Type  string `json:"type"`
	// Method names how the messages were read and returned.
	Method string `json:"method"`
	// Complete is set when every message in the queue was read.
	Complete bool `json:"complete"`
	// Messages are what Browse read (BrowseEach hands them to its
	// callback instead and leaves this empty).
	Messages []Message `json:"messages"`
	// Read is how many messages were read (by Browse or BrowseEach).
	Read int `json:"-"`
	// SideEffects lists what the browse changed (redelivered flags,
	// delivery counts), empty when nothing.
	SideEffects []string `json:"side_effects,omitempty"`
}

// RefusedError explains why a browse would not be safe. Acceptable is set
// when browsing again with AcceptQuorumSideEffects would read the queue
// (the caller may ask the operator).
type RefusedError struct {
	Why        string
	Acceptable bool
	// Cause is what errors.Is matches (backends.ErrReadOnly when the
	// refusal is read-only's), or nil.
	Cause error
}

func (e *RefusedError) Error() string { return e.Why }
func (e *RefusedError) Unwrap() error { return e.Cause }

// Browse reads messages of a queue without losing, dead-lettering or
// reordering any:
//   - classic: consumed without ack up to the limit, a segment of
//     browseSegment messages a channel, then the channels closed: RabbitMQ
//     puts classic messages back at their original positions (order kept;
//     the only trace is the redelivered flag);
//   - stream: a consumer from offset "first" (reading a stream removes
//     nothing; get and nack are never sent: they close the connection);
//   - quorum: every requeue moves the message to the back and counts a
//     delivery, so browsing is refused unless the caller accepts that, the
//     queue has no delivery limit (a message at its limit would be dropped
//     or dead-lettered) and the whole queue fits in the limit (then every
//     message is returned in order and the order survives).
func (c *Client) Browse(ctx context.Context, queue string, o BrowseOptions) (BrowseResult, error) {
	var msgs []Message
	res, err := c.BrowseEach(ctx, queue, o, func(m Message) error {
		msgs = append(msgs, m)
		return nil
	})
	if err == nil {
		res.Messages = msgs
	}
	return res, err
}

// BrowseEach is Browse handing each message, in queue order, to each as it
// is read instead of returning them all: a caller that keeps only what it
// needs of a message (a plan keeps its facts) lets its body and headers go
// as soon as each returns, so reading 100,000 messages does not hold
// 100,000 bodies. An error from each stops the browse (the messages go back
// as on any error). When BrowseEach fails, each may already have seen
// messages: the caller discards them (a quorum browse that finds the queue
// grew refuses only after reading it).
func (c *Client) BrowseEach(ctx context.Context, queue string, o BrowseOptions, each func(Message) error) (BrowseResult, error) {
	if o.Limit <= 0 {
		o.Limit = 100
	}
	res := BrowseResult{Queue: queue, Vhost: c.Vhost(), Type: o.QueueType}
	var q backends.Queue
	if c.mgmt != nil {
		var err error
		if q, err = c.Queue(ctx, c.Vhost(), queue); err != nil {
			return res, err
		}
		res.Type = q.Type
	} else if res.Type == "" {
		return res, &RefusedError{Why: fmt.Sprintf("queue %q: its type is unknown without the management API; browsing a quorum queue has side effects, so say the type (classic, quorum or stream)", queue)}
	}
	// Every delivery becomes a Message (positions from 0, in order) and
	// goes to each; nothing of it is kept here.
	pos := 0
	deliver := func(d amqp.Delivery) error {
		m := ToMessage(pos, d, o.Extractors)
		pos++
		return each(m)
	}
	switch res.Type {
	case backends.QueueClassic:
		return c.browseClassic(ctx, res, o, deliver)
	case backends.QueueStream:
		return c.browseStream(ctx, res, o, deliver)
	case backends.QueueQuorum:
		if c.opts.ReadOnly {
			// Reading a quorum queue raises delivery counts: a write.
			return res, &RefusedError{Why: fmt.Sprintf("queue %q is a quorum queue: browsing it raises delivery counts, and the context is read-only", queue), Cause: backends.ErrReadOnly}
		}
		return c.browseQuorum(ctx, res, q, o, deliver)
	}
	return res, fmt.Errorf("queue %q: unknown queue type %q", queue, res.Type)
}

// browseSegment is how many messages one channel's consumer holds unacked
// (its prefetch) before the next channel takes over. It bounds what the
// client buffers in memory (amqp091-go queues a consumer's deliveries
// without limit; the prefetch is what stops the broker) while the broker
// streams a segment at a time instead of answering one basic.get per
// message.
const browseSegment = 2000

// browseStall is how long a segment may receive nothing before the queue's
// ready count is asked whether anything is left to come (another consumer
// took messages counted before): a liveness check only; what is read
// never depends on it.
const browseStall = time.Second

func (c *Client) browseClassic(ctx context.Context, res BrowseResult, o BrowseOptions, deliver func(amqp.Delivery) error) (BrowseResult, error) {
	res.Method = fmt.Sprintf("basic.consume without ack, %d messages a channel (its prefetch), then the channels closed: classic queues put the messages back at their positions", browseSegment)
	b := &classicBrowse{c: c, queue: res.Queue, each: deliver}
	// Closing the channels requeues everything still held, at its original
	// position: an error or a cancel part-way loses nothing.
	closed := false
	defer func() {
		if !closed {
			b.closeAll(ctx)
		}
	}()
	complete, err := b.read(ctx, o.Limit)
	res.Read = b.got
	if err != nil {
		return res, err
	}
	res.Complete = complete
	if b.got > 0 {
		// Returned by closing the channels, not by nack(multiple, requeue):
		// RabbitMQ 3.10 hands a nack's tags to a classic queue in reverse
		// and matches each against the channel's pending acks from the
		// front, which is quadratic: 10,000 messages took a minute and
		// 100,000 about 17 minutes to requeue, the queue process deaf to
		// basic.consume (redrive execute) all that time. A closing channel
		// returns them in delivery order: 100,000 in about a second.
		closed = true
		if err := b.closeAll(ctx); err != nil {
			return res, err
		}
		res.SideEffects = append(res.SideEffects, "messages read are marked redelivered")
		c.settle(ctx, res.Queue, b.got)
	}
	return res, nil
}

// classicBrowse reads a classic queue in order without acking: a consumer
// per channel, each with a prefetch of one segment. A consumer whose
// prefetch is full receives nothing more, and the messages it holds stay
// unacked on its channel, so the next channel's consumer receives the
// messages that follow, in queue order; the queue forgets nothing until
// the channels close and it puts every message back at its position.
type classicBrowse struct {
	c     *Client
	queue string
	each  func(amqp.Delivery) error
	// chans hold the messages read (unacked); get is the one basic.get
	// uses to ask whether the queue is empty.
	chans []*amqp.Channel
	get   *amqp.Channel
	got   int
}

// read reads up to limit messages; complete is set when the queue ran out
// first.
func (b *classicBrowse) read(ctx context.Context, limit int) (complete bool, err error) {
	for b.got < limit {
		q, err := b.c.passive(ctx, b.queue)
		if err != nil {
			return false, b.notFound(err)
		}
		if want := min(int64(limit-b.got), *q.Ready); want > 0 {
			if err := b.segments(ctx, int(want)); err != nil {
				return false, err
			}
			continue
		}
		// None counted ready: a basic.get says whether the queue is empty
		// (a count taken before a publish lands may be behind).
		if more, err := b.getOne(ctx); err != nil || !more {
			return err == nil, err
		}
	}
	return false, nil
}

// segments consumes up to n messages, one segment a channel. It returns
// early (reading fewer) when the queue runs dry under it.
func (b *classicBrowse) segments(ctx context.Context, n int) error {
	for n > 0 {
		seg := min(n, browseSegment)
		k, err := b.segment(ctx, seg)
		if err != nil {
			return err
		}
		if k < seg {
			return nil
		}
		n -= k
	}
	return nil
}

// segment opens a channel whose consumer holds up to size messages and
// hands each to each; it returns how many arrived: size, or fewer when the
// queue has no more ready.
func (b *classicBrowse) segment(ctx context.Context, size int) (int, error) {
	ch, err := b.c.channel(ctx)
	if err != nil {
		return 0, err
	}
	b.chans = append(b.chans, ch)
	var ds <-chan amqp.Delivery
	tag := fmt.Sprintf("berth-browse-%d", len(b.chans))
	err = b.c.bounded(ctx, "consume from "+b.queue, func() (err error) {
		if err = ch.Qos(size, 0, false); err == nil {
			ds, err = ch.Consume(b.queue, tag, false, false, false, false, nil)
		}
		return err
	})
	if err != nil {
		return 0, b.notFound(err)
	}
	k := 0
	stall := time.NewTimer(browseStall)
	defer stall.Stop()
	for k < size {
		select {
		case d, ok := <-ds:
			if !ok {
				return k, b.c.amqpErr(amqp.ErrClosed)
			}
			k++
			b.got++
			if err := b.each(d); err != nil {
				return k, err
			}
			stall.Reset(browseStall)
		case <-stall.C:
			q, err := b.c.passive(ctx, b.queue)
			if err != nil {
				return k, b.notFound(err)
			}
			if *q.Ready > 0 {
				stall.Reset(browseStall)
				continue
			}
			// Nothing left to come: stop the consumer and take what it
			// was sent before it stopped.
			return b.drain(ctx, ch, tag, ds, k)
		case <-ctx.Done():
			return k, fmt.Errorf("rabbitmq amqp %s: browse %s: %w", b.c.AMQPAddr(), b.queue, ctx.Err())
		}
	}
	// Full: the broker sends this consumer nothing more, so cancelling it
	// (without waiting) only spares the queue a consumer to skip.
	_ = ch.Cancel(tag, true)
	return k, nil
}

// drain cancels a segment's consumer and hands over the deliveries sent
// before the cancel took effect (amqp091-go closes ds after them).
func (b *classicBrowse) drain(ctx context.Context, ch *amqp.Channel, tag string, ds <-chan amqp.Delivery, k int) (int, error) {
	if err := b.c.bounded(ctx, "cancel the browse of "+b.queue, func() error { return ch.Cancel(tag, false) }); err != nil {
		return k, b.c.amqpErr(err)
	}
	for d := range ds {
		k++
		b.got++
		if err := b.each(d); err != nil {
			return k, err
		}
	}
	return k, nil
}

// getOne gets one message (held unacked like the rest) and reports whether
// there was one.
func (b *classicBrowse) getOne(ctx context.Context) (bool, error) {
	if b.get == nil {
		ch, err := b.c.channel(ctx)
		if err != nil {
			return false, err
		}
		b.get = ch
		b.chans = append(b.chans, ch)
	}
	var d amqp.Delivery
	var ok bool
	err := b.c.bounded(ctx, "get from "+b.queue, func() (err error) {
		d, ok, err = b.get.Get(b.queue, false)
		return err
	})
	if err != nil || !ok {
		return false, b.notFound(err)
	}
	b.got++
	return true, b.each(d)
}

// notFound names a queue that is gone; other errors as amqpErr.
func (b *classicBrowse) notFound(err error) error {
	if err == nil {
		return nil
	}
	var ae *amqp.Error
	if errors.Is(err, errNotFound) || (errors.As(err, &ae) && ae.Code == amqp.NotFound) {
		return fmt.Errorf("queue %q %w in vhost %q", b.queue, backends.ErrNotFound, b.c.Vhost())
	}
	if ae != nil {
		return b.c.amqpErr(err)
	}
	return err
}

// closeAll closes every channel of the browse, which returns the messages
// each holds to their positions in the queue.
func (b *classicBrowse) closeAll(ctx context.Context) error {
	var first error
	for _, ch := range b.chans {
		if err := b.c.bounded(ctx, "return the messages read to "+b.queue, ch.Close); err != nil && first == nil {
			first = b.c.amqpErr(err)
		}
	}
	b.chans = nil
	return first
}

// getEach gets up to n messages without ack, handing each to each as it
// arrives; it returns how many it got, and complete when the queue ran out
// first.
func (c *Client) getEach(ctx context.Context, ch *amqp.Channel, queue string, n int, each func(amqp.Delivery) error) (int, bool, error) {
	got := 0
	for got < n {
		if err := ctx.Err(); err != nil {
			return got, false, fmt.Errorf("rabbitmq amqp %s: browse %s: %w", c.AMQPAddr(), queue, err)
		}
		var d amqp.Delivery
		var ok bool
		err := c.bounded(ctx, "get from "+queue, func() (err error) {
			d, ok, err = ch.Get(queue, false)
			return err
		})
		if err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound {
				return got, false, fmt.Errorf("queue %q %w in vhost %q", queue, backends.ErrNotFound, c.Vhost())
			}
			return got, false, c.amqpErr(err)
		}
		if !ok {
			return got, true, nil
		}
		got++
		if err := each(d); err != nil {
			return got, false, err
		}
	}
	return got, false, nil
}

func (c *Client) browseStream(ctx context.Context, res BrowseResult, o BrowseOptions, deliver func(amqp.Delivery) error) (BrowseResult, error) {
	res.Method = "stream consumer from offset first (non-destructive)"
	n, err := c.streamEach(ctx, res.Queue, "first", o.Limit, deliver)
	res.Read = n
	if err != nil {
		return res, err
	}
	res.Complete = n < o.Limit
	return res, nil
}

func (c *Client) browseQuorum(ctx context.Context, res BrowseResult, q backends.Queue, o BrowseOptions, deliver func(amqp.Delivery) error) (BrowseResult, error) {
	if q.Wiring.DeliveryLimit != nil {
		return res, &RefusedError{Why: fmt.Sprintf("queue %q is a quorum queue with delivery limit %d: every browse counts a delivery, and a message at its limit would be dropped or dead-lettered; refusing (RabbitMQ 3.10 offers no side-effect-free read of a quorum queue)", res.Queue, *q.Wiring.DeliveryLimit)}
	}
	if !o.AcceptQuorumSideEffects {
		return res, &RefusedError{Why: fmt.Sprintf("queue %q is a quorum queue: returning a message moves it to the back and adds 1 to its x-delivery-count; browse again accepting that (--accept-requeue-side-effects) to read it", res.Queue), Acceptable: true}
	}
	total, known := q.Total()
	if !known || total > int64(o.Limit) {
		return res, &RefusedError{Why: fmt.Sprintf("queue %q is a quorum queue holding %s messages, more than the browse limit %d: a partial read would put the messages read behind the rest (reordering); raise --limit above the depth", res.Queue, countOr(total, known), o.Limit)}
	}
	res.Method = "quorum: basic.get of the whole queue without ack, then nack(requeue) one by one in order"
	ch, err := c.channel(ctx)
	if err != nil {
		return res, err
	}
	defer ch.Close()
	// Only the delivery tags are kept, to return the messages in order.
	var tags []uint64
	n, complete, err := c.getEach(ctx, ch, res.Queue, o.Limit, func(d amqp.Delivery) error {
		tags = append(tags, d.DeliveryTag)
		return deliver(d)
	})
	res.Read = n
	if err != nil {
		return res, err
	}
	if !complete {
		// More arrived since the count: returning what we hold would put it
		// behind them. Closing the channel returns it (same effect), so say so.
		return res, &RefusedError{Why: fmt.Sprintf("queue %q grew past the browse limit while reading; the messages read were returned to the back of the queue", res.Queue)}
	}
	res.Complete = true
	// Forward order: each requeue appends to the back, so the queue ends in
	// its original order (any message published meanwhile ends up first).
	for _, tag := range tags {
		if err := ch.Nack(tag, false, true); err != nil {
			return res, c.amqpErr(err)
		}
	}
	if n > 0 {
		res.SideEffects = append(res.SideEffects, "each message's x-delivery-count grew by 1 and it is marked redelivered")
	}
	// Quorum requeues go through the Raft log and land a moment later:
	// wait for them, so a browse that follows reads the whole queue again.
	c.settle(ctx, res.Queue, n)
	return res, nil
}

// settle waits (bounded) until queue's ready count reaches n. The bound
// grows with n: the queue process puts a closed channel's messages back
// after the close returns, and 200,000 of them took more than 5 s at load
// average 10, so that the next command (an execute's depth check) found
// the DLQ short of them.
func (c *Client) settle(ctx context.Context, queue string, n int) {
	deadline := time.Now().Add(5*time.Second + time.Duration(n/10_000)*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		q, err := c.passive(ctx, queue)
		if err != nil || (q.Ready != nil && *q.Ready >= int64(n)) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countOr(n int64, known bool) string {
	if !known {
		return "an unknown number of"
	}
	return fmt.Sprint(n)
}
