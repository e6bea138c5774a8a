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
	// Waiting, when not nil, is told in one line when the browse waits
	// for the broker: to put back the messages it read, or for the
	// statistics that count the messages it could not see.
	Waiting func(string)
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
	// Unseen is what the browse could not see (nil: nothing, as far as
	// the broker can tell).
	Unseen *Unseen `json:"unseen,omitempty"`
}

// Unseen counts the messages of a queue that a browse could not see: a
// browse is a consumer, and a consumer only receives ready messages, not
// those other consumers hold unacknowledged. They are in the queue (they
// come back if their consumer goes away without acking them), so a
// message a browse did not find among what it saw is not known to be gone.
type Unseen struct {
	// Consumers are the queue's consumers other than the browse's.
	Consumers int `json:"consumers"`
	// Berth are those of Consumers whose consumer tag is one Berth gives
	// (BerthTagPrefix): another Berth's run or browse still going, or one
	// stopped (killed) whose messages RabbitMQ has yet to put back: the
	// queue counts a closed channel's consumers until it has handled the
	// close, after answering what it was asked meanwhile.
	Berth int `json:"berth_consumers,omitempty"`
	// Messages are what the queue counts unacknowledged once the browse's
	// own messages are back (management API statistics); -1 when unknown
	// (no management API, or its statistics never caught up).
	Messages int64 `json:"messages"`
}

// BerthTagPrefix begins every consumer tag Berth gives on a queue it
// browses or redrives (berth-browse-N, berth-browse-marker,
// berth-redrive-N), so that a browse can tell another Berth's consumers
// from the other consumers of a DLQ (Unseen.Berth).
const BerthTagPrefix = "berth-"

// String says in one line how many messages could not be seen and why.
func (u *Unseen) String() string {
	var by []string
	if other := u.Consumers - u.Berth; other > 0 {
		by = append(by, fmt.Sprintf("%d other consumer(s)", other))
	}
	if u.Berth > 0 {
		by = append(by, fmt.Sprintf("%d consumer(s) of a Berth (consumer tag %s*: another Berth run still going, or one stopped whose messages RabbitMQ has yet to put back)", u.Berth, BerthTagPrefix))
	}
	if u.Messages < 0 {
		return fmt.Sprintf("messages held unacknowledged by %s could not be seen (how many is unknown: it needs the management API's statistics)", strings.Join(by, " and "))
	}
	return fmt.Sprintf("%d message(s) could not be seen: held unacknowledged by %s", u.Messages, strings.Join(by, " and "))
}

// berthOf counts, among a statistics sample's consumers, those whose tag
// is Berth's, at most all consumers counts now.
func berthOf(sample []mConsumer, all int) int {
	n := 0
	for _, c := range sample {
		if strings.HasPrefix(c.Tag, BerthTagPrefix) {
			n++
		}
	}
	return min(n, all)
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
	// Returned by closing the channels, not by nack(multiple, requeue):
	// RabbitMQ 3.10 hands a nack's tags to a classic queue in reverse and
	// matches each against the channel's pending acks from the front,
	// which is quadratic: 10,000 messages took a minute and 100,000 about
	// 17 minutes to requeue, the queue process deaf to basic.consume
	// (redrive execute) all that time. A closing channel returns them in
	// delivery order: 100,000 in about a second.
	closed = true
	others, back, err := b.returnAll(ctx, o.Waiting)
	if err != nil {
		return res, err
	}
	if b.got > 0 {
		res.SideEffects = append(res.SideEffects, "messages read are marked redelivered")
	}
	if !back {
		res.SideEffects = append(res.SideEffects, fmt.Sprintf("RabbitMQ had not put back every message read when the time ran out: a browse of %s started now may not see them all yet", res.Queue))
		return res, nil
	}
	res.Unseen = c.Unseen(ctx, res.Queue, others, o.Waiting)
	return res, nil
}

// classicBrowse reads a classic queue in order without acking: a consumer
// per channel, each with a prefetch of one segment. A consumer whose
// prefetch is full receives nothing more, and the messages it holds stay
// unacked on its channel, so the next channel's consumer receives the
// messages that follow, in queue order; the queue forgets nothing until
// the channels close and it puts every message back at its position.
//
// A full segment's consumer stays registered until its channel closes.
// RabbitMQ 3.10 closes a channel by telling, and waiting for (up to its
// channel_operation_timeout, 15 s by default), only the queues it has a
// consumer on; a queue it merely holds messages of learns of the close
// from a process monitor, after the close returns. Browses that cancelled
// each full segment's consumer returned, so, while the queue was still
// putting the messages back: right after the close, a lazy queue of 5,000
// counted 2,000 ready, one of 100,000 counted 12,000 (all back 13 s later,
// load average 12). And the queue drops a closed channel's consumers in
// the same step as it puts the channel's messages back, so its consumer
// count (a passive declare, answered at once) says when the messages are
// back (returnAll).
type classicBrowse struct {
	c     *Client
	queue string
	each  func(amqp.Delivery) error
	// consuming are the channels whose consumer is still registered;
	// loose those without one (a drained segment's, basic.get's). Both
	// hold messages read (unacked). get is the one basic.get uses to ask
	// whether the queue is empty.
	consuming []*amqp.Channel
	loose     []*amqp.Channel
	get       *amqp.Channel
	got       int
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
	// Loose until its consumer is registered: a channel closes the same
	// way either way.
	b.loose = append(b.loose, ch)
	var ds <-chan amqp.Delivery
	tag := fmt.Sprintf("berth-browse-%d", len(b.consuming)+len(b.loose))
	err = b.c.bounded(ctx, "consume from "+b.queue, func() (err error) {
		if err = ch.Qos(size, 0, false); err == nil {
			ds, err = ch.Consume(b.queue, tag, false, false, false, false, nil)
		}
		return err
	})
	if err != nil {
		return 0, b.notFound(err)
	}
	b.loose = b.loose[:len(b.loose)-1]
	b.consuming = append(b.consuming, ch)
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
			b.consuming = b.consuming[:len(b.consuming)-1]
			b.loose = append(b.loose, ch)
			return b.drain(ctx, ch, tag, ds, k)
		case <-ctx.Done():
			return k, fmt.Errorf("rabbitmq amqp %s: browse %s: %w", b.c.AMQPAddr(), b.queue, ctx.Err())
		}
	}
	// Full: the broker sends this consumer nothing more. It stays
	// registered (see classicBrowse).
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
		b.loose = append(b.loose, ch)
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
// each holds to their positions in the queue: those without a consumer
// first, so that the queue, which handles closed channels in the order
// they closed, has put their messages back by the time it drops the last
// consumer (returnAll).
func (b *classicBrowse) closeAll(ctx context.Context) error {
	var first error
	for _, ch := range append(b.loose, b.consuming...) {
		if err := b.c.bounded(ctx, "return the messages read to "+b.queue, ch.Close); err != nil && first == nil {
			first = b.c.amqpErr(err)
		}
	}
	b.loose, b.consuming, b.get = nil, nil, nil
	return first
}

// returnAll closes the browse's channels and waits until the queue has put
// back every message they held, so that what runs next (the next
// command's browse, a review's depth check) finds them. Closing a channel
// with a consumer waits for the queue only up to the broker's channel
// operation timeout, and one without (a drained segment's) not at all
// (see classicBrowse). A passive declare answers at once, ahead of the
// closed channels the queue has yet to handle, so its ready count is short
// of them then, and cannot say when they are all back (another consumer
// may take some meanwhile). The queue's consumer count can: the queue
// drops a closed channel's consumers in the same step as it puts back the
// channel's messages, so once the count no longer holds the browse's own
// consumers, their messages are back (and, handled in the order they
// closed, those of the channels closed before them). A browse
// left with no consumer registered (its one segment drained) registers one
// to close last. The wait is bounded by ctx and said through waiting;
// others is the queue's consumer count after it (the other consumers),
// back is false when ctx ended first.
func (b *classicBrowse) returnAll(ctx context.Context, waiting func(string)) (others int, back bool, err error) {
	held := b.got
	if held > 0 && len(b.consuming) == 0 {
		if err := b.marker(ctx); err != nil {
			_ = b.closeAll(ctx)
			return 0, false, err
		}
	}
	mine := len(b.consuming)
	q, err := b.c.passive(ctx, b.queue)
	if err != nil {
		_ = b.closeAll(ctx)
		return 0, false, b.notFound(err)
	}
	if err := b.closeAll(ctx); err != nil {
		return 0, false, err
	}
	others = max(*q.Consumers-mine, 0)
	if mine == 0 {
		return others, true, nil
	}
	start, said := time.Now(), false
	pause := 10 * time.Millisecond
	for {
		q, err := b.c.passive(ctx, b.queue)
		if ctx.Err() != nil {
			if waiting != nil {
				waiting(fmt.Sprintf("RabbitMQ had not put back all %d message(s) read from %s when the time ran out; it goes on doing so, and a browse started before it is done may miss some", held, b.queue))
			}
			return others, false, nil
		}
		if err != nil {
			return others, false, b.notFound(err)
		}
		left := *q.Consumers - others
		if left <= 0 {
			return *q.Consumers, true, nil
		}
		if !said && waiting != nil && time.Since(start) >= waitingSaid {
			said = true
			waiting(fmt.Sprintf("waiting for RabbitMQ to put back the %d message(s) read from %s (%d of the browse's %d channel(s) left to close in the queue; until the timeout at most)", held, b.queue, left, mine))
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// waitingSaid is how long a wait for the broker lasts before it is said:
// most are over in a fraction of a second.
const waitingSaid = 500 * time.Millisecond

// statsInterval is how often RabbitMQ emits a queue's statistics
// (collect_statistics_interval, 5 s by default).
const statsInterval = 5 * time.Second

// marker registers a consumer on a channel of its own, closed last, so
// that the queue's consumer count shows when the browse's channels are
// handled (returnAll). The queue has nothing ready for the browse (it read
// to the end, or to a drained segment), so at most one newer message
// reaches it, and it goes back with the rest.
func (b *classicBrowse) marker(ctx context.Context) error {
	ch, err := b.c.channel(ctx)
	if err != nil {
		return err
	}
	b.loose = append(b.loose, ch)
	err = b.c.bounded(ctx, "consume from "+b.queue, func() (err error) {
		if err = ch.Qos(1, 0, false); err == nil {
			_, err = ch.Consume(b.queue, "berth-browse-marker", false, false, false, false, nil)
		}
		return err
	})
	if err != nil {
		return b.notFound(err)
	}
	b.loose = b.loose[:len(b.loose)-1]
	b.consuming = append(b.consuming, ch)
	return nil
}

// Unseen counts what a browse (or a redrive run) could not see: the
// messages the queue's `others` other consumers hold unacknowledged (nil:
// nothing of the kind). With no other consumer there are
// none. The count is the management API's, whose queue figures are
// statistics emitted every few seconds (collect_statistics_interval, 5 s
// by default), its consumer count and message counts at different moments:
// a sample taken while the browse held its messages counts them as
// unacknowledged too. A sample whose ready and consumer counts are the
// queue's own now (a passive declare, answered at once) was taken when the
// browse held nothing: before it took anything (its ready count was the
// same), or once it had put everything back. The wait for one is said
// through waiting and takes at most half of what is left of ctx (the
// command has more to do than count): when it ends first, the count is
// unknown.
//
// A consistent sample saying the others hold nothing is trusted only once
// the samples have said so for a whole statistics interval: the API's
// figures arrive in pieces, seconds late on a busy broker (a queue made
// moments before: no figures for 3 s, then the consumer count, then ready
// and unacknowledged at 0, then, 7 s in, the consumer count now, ready 0
// as now, and unacknowledged still 0 for a quarter of a second before the
// 2 another consumer held). Trusted at once, that sample called the held
// messages gone, 4 runs in 4.
func (c *Client) Unseen(ctx context.Context, queue string, others int, waiting func(string)) *Unseen {
	if others == 0 {
		return nil
	}
	u := &Unseen{Consumers: others, Messages: -1}
	if c.mgmt == nil {
		return u
	}
	var giveUp <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		giveUp = time.After(time.Until(dl) / 2)
	}
	start, said := time.Now(), false
	var zeroSince time.Time // since when the samples have said nothing is held
	for {
		mq, merr := c.mgmt.queueWith(ctx, c.Vhost(), queue, unseenColumns)
		q, err := c.passive(ctx, queue)
		if err != nil || merr != nil {
			return u
		}
		u.Consumers = *q.Consumers
		if u.Consumers == 0 {
			return nil
		}
		// Which are Berth's, from the latest sample (the one counted when
		// it is consistent with the queue now).
		u.Berth = berthOf(mq.ConsumerDetails, u.Consumers)
		if mq.Consumers != nil && *mq.Consumers == u.Consumers && mq.Ready != nil && *mq.Ready == *q.Ready && mq.Unacked != nil {
			if u.Messages = *mq.Unacked; u.Messages > 0 {
				return u
			}
			if zeroSince.IsZero() {
				zeroSince = time.Now()
			}
			if time.Since(zeroSince) >= statsInterval {
				return nil
			}
			u.Messages = -1 // not yet known
		} else {
			zeroSince = time.Time{}
		}
		if !said && waiting != nil && time.Since(start) >= waitingSaid {
			said = true
			waiting(fmt.Sprintf("waiting for the management API's statistics (emitted every few seconds) to count the messages %d other consumer(s) of %s hold unacknowledged; half of what is left of the timeout at most", u.Consumers, queue))
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-giveUp:
			return u
		case <-ctx.Done():
			return u
		}
	}
}

// unseenColumns are what unseen asks of the queue's statistics.
const unseenColumns = "consumers,messages_ready,messages_unacknowledged,consumer_details"

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

// settle waits (bounded) until a quorum queue's ready count reaches n (a
// guess kept for quorum browses only: see returnAll). The bound grows with n: the queue process puts a closed channel's messages back
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
