package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

// ExecOptions tune Execute.
type ExecOptions struct {
	// Window is how many publishes await confirms per chunk (default 500);
	// each chunk is one ledger transaction before and one after.
	Window int
	// Rate caps messages per second (0: the plan's, then unlimited).
	Rate int
	// MaxHeld bounds the unselected messages held (unacked, to keep their
	// place) while looking for selected ones (default 50,000).
	MaxHeld int
	// StopOnFailure stops at the first failed publish (payments policies).
	StopOnFailure bool
	// Progress is called after each chunk is settled.
	Progress func(Result)
	// Settled, when set, is called once a chunk's outcome is in the
	// ledger and before its DLQ copies are acked: the confirmed entries
	// and the failures. An error stops the run (the chunk's messages stay
	// in the DLQ; the ledger has them confirmed, so a rerun only acks
	// them).
	Settled func(ctx context.Context, confirmed []LedgerEntry, failed []Failure) error
	// Skip holds included records that the checks, run again at execution,
	// now exclude (by event id): they are left in the DLQ and reported.
	Skip map[string]redrive.Verdict
	// Admission is the policy that decides whether the plan may run on
	// this DLQ and which included messages are sent as the run consumes
	// them (internal/actions'). Required: Execute refuses a run without one
	// rather than send what nothing checked.
	Admission Admission
	// Verify checks, after the run, that the DLQ's depth fell by exactly
	// the number of messages acked and that nothing was returned.
	Verify bool
	// Pause, when set, is called before each chunk's intents are recorded
	// and published: it blocks while the operator has paused (nothing is
	// published; the messages read stay unacked, in place) and returns
	// false to stop the run instead (as Cancel does).
	Pause func(ctx context.Context) bool
	// Notice, when set, is told what the run waits for when the broker
	// keeps it waiting (a DLQ still busy requeueing), so the wait is not
	// silent.
	Notice func(string)
	// Cancel, when closed, stops the run cleanly between chunks: the chunk
	// in flight settles (ledger, acks), nothing more is published, and the
	// messages read but not published return to the DLQ in place. A run of
	// the same plan resumes from the ledger.
	Cancel <-chan struct{}
}

// Admission is the policy a run consults (internal/actions implements it:
// which DLQs may run, the checks run again, the signed target against the
// message's, ordering). The run only reports what it reads; a message's
// Position is its place in the order this run read the DLQ.
type Admission interface {
	// Runnable is told, before anything is read, what the broker says
	// about the DLQ (type, auto-delete, delivery limit from the management
	// API; without it only the plan's queue type is known) and refuses
	// with an error what cannot run safely.
	Runnable(p redrive.QueuePlan, dlq backends.Queue) error
	// PassedOver is told of each message the run leaves in the DLQ (not
	// included, content changed, skipped before the run), before any
	// message read after it is admitted.
	PassedOver(m redrive.QueueMessage)
	// Admit returns, for a chunk of included messages about to be sent
	// (with what each derives to: its dead-lettering's target, key, prior
	// redrives), those not to send and why; they stay in the DLQ and are
	// reported. An error stops the run (the chunk stays in the DLQ).
	Admit(ctx context.Context, chunk []redrive.QueueMessage) (map[string]redrive.Verdict, error)
}

// ReasonContentChanged skips an included message whose content no longer
// matches the plan (the name Kafka's executor uses for the same skip).
const ReasonContentChanged redrive.Reason = "payload_changed"

// Cancelled is Result.Stopped for a run stopped through ExecOptions.Cancel
// or Pause.
const Cancelled = "cancelled by the operator between chunks (run the plan again to send the rest)"

// Skip is an included record that was not sent: the checks run again at
// execution excluded it.
type Skip struct {
	EventID  string         `json:"event_id"`
	Position int            `json:"position"`
	Reason   redrive.Reason `json:"reason"`
	Detail   string         `json:"detail,omitempty"`
}

// Verification is what the DLQ says after a run: its ready count before
// and after, against the messages acked (sent, or confirmed earlier), and
// the messages the broker returned as unroutable.
type Verification struct {
	DepthBefore int64 `json:"dlq_depth_before"`
	DepthAfter  int64 `json:"dlq_depth_after"`
	Acked       int   `json:"acked"`
	Returned    int   `json:"returned"`
	// OK: depth after = depth before - acked, and nothing returned.
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
	// Watched is how long the DLQ was watched for re-failures afterwards
	// ("" when not); Refailed are the plan's messages found back in it.
	Watched  string      `json:"watched,omitempty"`
	Refailed []Refailure `json:"refailed,omitempty"`
}

// Failure is one message that could not be redriven: it stays in the DLQ.
type Failure struct {
	EventID    string `json:"event_id"`
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
	Error      string `json:"error"`
}

// Result is what an execution did.
type Result struct {
	Plan string `json:"plan"`
	// Sent were published, confirmed, recorded and acked from the DLQ.
	Sent int `json:"sent"`
	// AlreadySent were confirmed by an earlier run (ledger) and only acked
	// from the DLQ now: not published again.
	AlreadySent int `json:"already_sent"`
	// DoneBefore were sent and acked by an earlier run: no longer in the
	// DLQ, the ledger says confirmed (a rerun of a finished plan).
	DoneBefore int `json:"done_before"`
	// Resent were recorded as intent by an earlier run that stopped before
	// their confirm: sent again (consumers deduplicate by message_id).
	Resent int `json:"resent"`
	// Excluded are plan records whose checks excluded them.
	Excluded int `json:"excluded"`
	// Failed stay in the DLQ: returned unroutable, nacked, or refused.
	Failed []Failure `json:"failed"`
	// NotFound are included events no longer in the DLQ (and not confirmed
	// in the ledger): consumed or purged by someone else.
	NotFound []string `json:"not_found"`
	// Passed counts unselected messages left in place.
	Passed int `json:"passed_over"`
	// Skipped are included records the checks excluded at execution.
	Skipped []Skip `json:"skipped"`
	// Returned counts publishes the broker returned (unroutable); each is
	// also a failure.
	Returned int `json:"returned"`
	// Verification is set when ExecOptions.Verify asked for it and the run
	// was not interrupted.
	Verification *Verification `json:"verification,omitempty"`
	// Stopped says why execution ended early ("" when it finished).
	Stopped string `json:"stopped,omitempty"`
}

// item is one message in flight.
type item struct {
	d   amqp.Delivery
	rec redrive.QueueRecord
	// m is what the consumed message derives to; its Position is its place
	// in the order this run read the DLQ.
	m     redrive.QueueMessage
	dc    *amqp.DeferredConfirmation
	err   error // publish failed before a confirm
	again bool  // an earlier run recorded intent
}

type chunk struct {
	items []item
	pub   *publisher
}

// publisher is a confirm-mode channel with its returns.
type publisher struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
	reason  string // why the broker closed the channel, once known
}

// closeReason is the broker's reason for closing the channel ("" if open).
func (p *publisher) closeReason() string {
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

// Execute redrives an approved plan from its DLQ. Each selected message is
// published to its original exchange and routing key (from x-death) with
// mandatory set and publisher confirms, pipelined in chunks; the ledger
// records intent before a chunk is published and completion after its
// confirms; the DLQ message is acked only after that. A returned
// (unroutable) or nacked message is a failure and stays in the DLQ.
// Unselected messages are held unacked while passing and returned in place
// (classic queues keep positions). Killing the process at any point loses
// nothing: unacked messages return to the DLQ, and the ledger tells a
// resumed run what already arrived.
//
// Callers enforce read-only contexts and approvals before calling (the
// action layer refuses too: Execute itself refuses a read-only client).
func (c *Client) Execute(ctx context.Context, p redrive.QueuePlan, l *Ledger, o ExecOptions) (Result, error) {
	r, err := c.newRun(ctx, p, l, o)
	if err != nil || len(r.included) == 0 {
		return r.res, err
	}
	// The DLQ's ready count before anything is consumed, for verification.
	before, berr := c.passive(ctx, p.DLQ)
	if err := r.open(ctx); err != nil {
		if r.conn != nil {
			r.close(ctx)
		}
		return r.res, err
	}
	defer r.close(ctx)
	settled := r.settleInOrder(ctx)
	readErr := r.read(ctx)
	if readErr == nil && !r.cancelled {
		readErr = r.flush(ctx)
	}
	if r.cancelled {
		r.mu.Lock()
		r.res.Stopped = Cancelled
		r.mu.Unlock()
	}
	close(r.inflight)
	if err := <-settled; err != nil && readErr == nil {
		readErr = err
	}
	// Stop the consumer; closing the channel returns every held message
	// (unselected, failed, changed) to the DLQ in place. Interrupted, do not
	// wait for the broker's close-ok (a classic queue busy requeueing holds
	// it up for minutes): closing the connection (r.close, bounded) or the
	// process exiting returns them just the same.
	if r.next != nil {
		// A segment opened as the read ended holds what it was sent:
		// returned in place with the others.
		_ = r.takeOver(ctx)
	}
	if ctx.Err() == nil {
		for _, ch := range r.segs {
			_ = ch.Close()
		}
	}
	r.account()
	if readErr != nil {
		return r.res, readErr
	}
	if o.Verify {
		r.res.Verification = c.verifyDepth(ctx, p.DLQ, before, berr, r.res)
	}
	return r.res, nil
}

// run is one execution of a plan: what it was asked, what it holds, and
// the two stages that share its result (reading and publishing; settling).
type run struct {
	c        *Client
	p        redrive.QueuePlan
	hash     string
	l        *Ledger
	o        ExecOptions
	included map[string]redrive.QueueRecord // by event id, less the skipped
	states   map[string]string              // the ledger's state per event id

	conn *amqp.Connection
	// segs are the channels that consumed the DLQ, one per segment; each
	// acks what arrived on it and holds what was passed over. deliveries
	// are the current segment's; got and held count what it delivered and
	// what of that was passed over.
	segs       []*amqp.Channel
	deliveries <-chan amqp.Delivery
	got, held  int
	next       chan next  // the segment being opened (nil: none)
	pub        *publisher // nil after the broker closed it: reopened on use
	x          Extractors
	origin     string

	seen    map[string]bool // included ids found (with the plan's content)
	changed map[string]bool // ids met on content other than the plan's
	reads   int             // deliveries taken so far
	cur     []item          // the chunk being filled
	pace    *time.Ticker    // nil: no rate limit

	inflight  chan chunk
	stop      chan string
	cancelled bool
	// exhausted: the DLQ was read to its end; remaining: included ids not
	// yet found.
	exhausted bool
	remaining int

	mu  sync.Mutex // guards res between the two stages
	res Result
}

// newRun checks that the plan may run on this client, fills in the
// defaults and reads the plan's ledger states.
func (c *Client) newRun(ctx context.Context, p redrive.QueuePlan, l *Ledger, o ExecOptions) (*run, error) {
	hash := p.Hash()
	r := &run{c: c, p: p, hash: hash, l: l, o: o, res: Result{Plan: hash, Failed: []Failure{}, NotFound: []string{}, Skipped: []Skip{}}}
	if p.Vhost != c.Vhost() {
		return r, fmt.Errorf("plan %s is for vhost %q; this connection is to %q", short(hash), p.Vhost, c.Vhost())
	}
	r.o.Window = firstPositive(o.Window, p.Window, 500)
	r.o.Rate = firstPositive(o.Rate, p.Rate, 0)
	r.o.MaxHeld = firstPositive(o.MaxHeld, 50_000)
	if c.opts.ReadOnly {
		return r, fmt.Errorf("refused: %w", backends.ErrReadOnly)
	}
	if o.Admission == nil {
		// The I/O layer's contract, not policy: what may be sent is decided
		// by an Admission (internal/actions), so a run without one would
		// send what nothing checked.
		return r, errors.New("redrive execute needs an Admission (the policy deciding what is sent); nothing sent")
	}
	dlq, err := c.dlqFacts(ctx, p)
	if err != nil {
		return r, err
	}
	if err := o.Admission.Runnable(p, dlq); err != nil {
		return r, err
	}
	r.included = p.Included()
	for _, rec := range p.Records {
		if !rec.Included {
			r.res.Excluded++
		}
	}
	for id, v := range o.Skip {
		if rec, ok := r.included[id]; ok && !v.Included {
			r.res.Skipped = append(r.res.Skipped, Skip{EventID: id, Position: rec.Position, Reason: v.Reason, Detail: v.Detail})
			delete(r.included, id)
		}
	}
	sort.Slice(r.res.Skipped, func(i, j int) bool { return r.res.Skipped[i].Position < r.res.Skipped[j].Position })
	if r.states, err = l.PlanStates(ctx, hash); err != nil {
		return r, err
	}
	r.remaining = len(r.included)
	return r, nil
}

func firstPositive(v ...int) int {
	for _, n := range v {
		if n > 0 {
			return n
		}
	}
	return 0
}

// open dials the run's own connection, starts consuming the DLQ (prefetch
// large enough to hold the unselected messages passed over and two chunks)
// and opens the first publisher.
func (r *run) open(ctx context.Context) error {
	c := r.c
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	r.conn = conn
	// Each of these waits for the broker's answer, and the answer to
	// basic.consume comes from the DLQ's queue process: one still busy
	// requeueing (a large browse's nack by an older berth or another tool
	// keeps a 3.10 classic queue busy for many minutes) does not answer.
	// Bounded by ctx so that an interrupt ends the wait; nothing is
	// consumed yet; and said, so that the wait is not silent.
	stopNotes := r.noteWhileBusy(ctx)
	err = c.bounded(ctx, "consume "+r.p.DLQ, r.consume)
	stopNotes()
	if err != nil {
		return c.amqpErr(err)
	}
	err = c.bounded(ctx, "open a publisher", func() (err error) {
		r.pub, err = r.newPublisher()
		return err
	})
	if err != nil {
		return err
	}
	r.x = Extractors{IdempotencyKey: r.p.Policy.IdempotencyKey, OrderingKey: r.p.Policy.OrderingKey}
	r.origin = url.PathEscape(r.p.Vhost) + "/" + r.p.DLQ
	r.seen, r.changed = map[string]bool{}, map[string]bool{}
	r.inflight = make(chan chunk, toConfirm)
	r.stop = make(chan string, 1)
	if r.o.Rate > 0 {
		r.pace = time.NewTicker(time.Second / time.Duration(r.o.Rate))
	}
	return nil
}

// A segment ends once it has passed over segmentHeld messages and
// delivered segmentMin, or delivered segmentMax. Each segment is one
// channel, and a connection allows 2,047 by default: the run holds at most
// MaxHeld messages, so a run takes at most MaxHeld/segmentHeld +
// depth/segmentMax channels. The prefetch lets the broker send ahead what
// the reader takes while the next segment opens.
const (
	segmentHeld     = 100
	segmentMin      = 500
	segmentMax      = 20_000
	segmentPrefetch = 2_000
)

// segmentDone says whether the current segment has taken its share.
func (r *run) segmentDone() bool {
	return (r.held >= segmentHeld && r.got >= segmentMin) || r.got >= segmentMax
}

// consume starts the first segment: a channel of its own consuming the
// DLQ.
//
// Why segments: RabbitMQ 3.10 matches each ack against the channel's
// unacked deliveries from the oldest, so every ack walks past the
// messages held ahead of it on the same channel. With one channel for the
// whole run, acks cost what the run holds: holding one message in ten of
// 100,000 brought acking down to 195 messages/s (8,245 holding none). A
// channel per segment bounds the walk by what the segment holds.
func (r *run) consume() error {
	ch, d, err := r.openSegment(len(r.segs) + 1)
	if ch != nil {
		r.segs = append(r.segs, ch)
	}
	r.deliveries, r.got, r.held = d, 0, 0
	return err
}

// openSegment opens segment n's channel and consumer.
func (r *run) openSegment(n int) (*amqp.Channel, <-chan amqp.Delivery, error) {
	ch, err := r.conn.Channel()
	if err != nil {
		return nil, nil, err
	}
	if err := ch.Qos(segmentPrefetch, 0, false); err != nil {
		return ch, nil, err
	}
	d, err := ch.Consume(r.p.DLQ, segmentTag(n), false, false, false, false, nil)
	return ch, d, err
}

func segmentTag(n int) string { return fmt.Sprintf("berth-redrive-%d", n) }

// next is a segment being opened while the last one's deliveries are
// still read.
type next struct {
	ch  *amqp.Channel
	d   <-chan amqp.Delivery
	err error
}

// rotate ends the current segment once it has taken its share: its
// consumer is cancelled and the next one started, in the background, while
// the reader goes on with the deliveries on their way (the broker sends
// every one before the cancel-ok, so the old consumer's deliveries end,
// in order, before the next consumer's begin: nothing is read out of
// order, nothing is left unseen). Its messages stay unacked on its channel
// (acked there once settled, or returned in place at the end).
func (r *run) rotate() {
	old, n := r.segs[len(r.segs)-1], len(r.segs)
	ready := make(chan next, 1)
	r.next = ready
	go func() {
		if err := old.Cancel(segmentTag(n), false); err != nil {
			ready <- next{err: err}
			return
		}
		ch, d, err := r.openSegment(n + 1)
		ready <- next{ch: ch, d: d, err: err}
	}()
}

// takeOver makes the segment rotate opened the current one, once the last
// one's deliveries ended.
func (r *run) takeOver(ctx context.Context) error {
	var n next
	select {
	case n = <-r.next:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.next = nil
	if n.ch != nil {
		r.segs = append(r.segs, n.ch)
	}
	if n.err != nil {
		return r.c.amqpErr(n.err)
	}
	r.deliveries, r.got, r.held = n.d, 0, 0
	return nil
}

// noteWhileBusy says, every few seconds until stopped, that the DLQ has
// not answered the consumer yet and how many messages it holds unacked
// (from the management API): the usual cause is a queue still requeueing
// them.
func (r *run) noteWhileBusy(ctx context.Context) (stop func()) {
	if r.o.Notice == nil {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(busyNoteEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			unacked := "an unknown number of messages"
			if r.c.mgmt != nil {
				if q, err := r.c.Queue(ctx, r.p.Vhost, r.p.DLQ); err == nil && q.Unacked != nil {
					unacked = fmt.Sprintf("%d", *q.Unacked)
				}
			}
			r.o.Notice(fmt.Sprintf("DLQ %s busy requeueing: %s unacked; RabbitMQ has not let the redrive consume it yet (waiting; ctrl+c stops, nothing is consumed yet)", r.p.DLQ, unacked))
		}
	}()
	return func() { close(quit); <-done }
}

// busyNoteEvery is how often a DLQ that does not answer is reported.
const busyNoteEvery = 5 * time.Second

// close releases the run's connection and rate ticker.
func (r *run) close(ctx context.Context) {
	if r.pace != nil {
		r.pace.Stop()
	}
	if ctx.Err() != nil {
		// Interrupted: the broker gets closeGrace to answer; the socket
		// closes either way and the broker returns every unacked message.
		_ = r.conn.CloseDeadline(time.Now().Add(closeGrace))
		return
	}
	_ = r.conn.Close()
}

// newPublisher opens a confirm-mode channel. Returns arrive before their
// confirm; the buffer holds every return of the chunks in flight so none
// is dropped.
func (r *run) newPublisher() (*publisher, error) {
	ch, err := r.conn.Channel()
	if err != nil {
		return nil, r.c.amqpErr(err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, r.c.amqpErr(err)
	}
	return &publisher{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 4*r.o.Window+16)), closed: ch.NotifyClose(make(chan *amqp.Error, 1))}, nil
}

// stopWith asks the reading stage to stop (the first reason wins).
func (r *run) stopWith(why string) {
	select {
	case r.stop <- why:
	default:
	}
}

// The settling stages. A chunk, once published, goes through three
// goroutines in the order it was published: confirm (its publisher
// confirms and returns), record (its outcome in the ledger) and finish (its
// audit entry, then the acks of its DLQ copies). Each works on a different
// chunk at once, so that the round trips of one chunk (PostgreSQL's commit,
// the audit log's fsync and mirror, the acks) overlap the broker's confirms
// of the next instead of adding to them: under load every round trip waits
// to be scheduled, and in one stage their sum set the pace.
//
// The at-least-once window stays where it was: at most inflightWindows
// chunks are published without their completion in the ledger (the one
// being published, one queued for confirm, the one confirming, the one
// being recorded), since the queue between confirm and record holds none.
// A DLQ copy is still acked only after its confirm and its ledger row, and
// after its chunk's audit entry.
const (
	// inflightWindows is how many publish windows can be published and not
	// yet recorded as confirmed at any moment: what a kill can resend.
	inflightWindows = 4
	// toConfirm is the queue from publishing to confirm (one chunk).
	toConfirm = inflightWindows - 3
)

// settling is a chunk whose confirms are in: what arrived, what did not.
type settling struct {
	chunk
	ok        []bool
	done      []LedgerEntry // one per item: confirmed or failed
	failed    []Failure
	nReturned int
}

// settleInOrder starts the settling stages over inflight (closed by the
// reader when it ends) and reports their first error once all have ended.
func (r *run) settleInOrder(ctx context.Context) <-chan error {
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
			r.stopWith("error: " + err.Error())
		}
		mu.Unlock()
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	confirmed := make(chan settling) // unbuffered: see inflightWindows
	recorded := make(chan settling, 2)
	returned := map[string]string{}
	go func() {
		defer close(confirmed)
		for ch := range r.inflight {
			if failed() {
				continue // drain; unacked messages return to the DLQ
			}
			st, err := r.confirm(ctx, ch, returned)
			if err != nil {
				fail(err)
				continue
			}
			confirmed <- st
		}
	}()
	go func() {
		defer close(recorded)
		for st := range confirmed {
			if failed() {
				continue
			}
			if err := r.l.Record(ctx, st.done); err != nil {
				fail(err)
				continue
			}
			recorded <- st
		}
	}()
	done := make(chan error, 1)
	go func() {
		for st := range recorded {
			if failed() {
				continue
			}
			if err := r.finish(ctx, st); err != nil {
				fail(err)
			}
		}
		mu.Lock()
		done <- firstErr
		mu.Unlock()
	}()
	return done
}

// flush records the chunk's intents, publishes it (paced) and hands it to
// the settling stage. A pause that ends in a stop cancels the run instead.
func (r *run) flush(ctx context.Context) error {
	if len(r.cur) == 0 {
		return nil
	}
	if r.o.Pause != nil && !r.o.Pause(ctx) {
		r.cancelled = true
		return nil
	}
	if err := r.admit(ctx); err != nil || len(r.cur) == 0 {
		return err
	}
	intents := make([]LedgerEntry, len(r.cur))
	for i, it := range r.cur {
		intents[i] = LedgerEntry{Plan: r.hash, EventID: it.rec.EventID, Vhost: r.p.Vhost, DLQ: r.p.DLQ, Exchange: it.rec.Exchange, RoutingKey: it.rec.RoutingKey, State: StateIntent}
	}
	if err := r.l.Record(ctx, intents); err != nil {
		return err
	}
	for i := range r.cur {
		it := &r.cur[i]
		if r.pace != nil {
			select {
			case <-r.pace.C:
			case <-ctx.Done():
				it.err = ctx.Err()
				continue
			}
		}
		if r.pub == nil {
			var err error
			if r.pub, err = r.newPublisher(); err != nil {
				return err
			}
		}
		msg := redriveMessage(it.d, it.rec.EventID, it.m.PriorRedrives, r.hash, r.origin)
		it.dc, it.err = r.pub.ch.PublishWithDeferredConfirmWithContext(ctx, it.rec.Exchange, it.rec.RoutingKey, true, false, msg)
	}
	r.inflight <- chunk{items: r.cur, pub: r.pub}
	if r.pub.ch.IsClosed() {
		r.pub = nil // a missing exchange closes the channel: open another
	}
	r.cur = nil
	return nil
}

// read is the first stage: it consumes the DLQ, holds what it passes over,
// and fills and flushes chunks until every included message was found, the
// DLQ is exhausted, or the run stops. Every included event is looked for,
// confirmed ones too: their DLQ copy may be a leftover of a run that
// stopped before the ack.
func (r *run) read(ctx context.Context) error {
	emptySeen := false
	idle := time.NewTimer(250 * time.Millisecond)
	defer idle.Stop()
	for r.remaining > 0 {
		select {
		case why := <-r.stop:
			r.mu.Lock()
			r.res.Stopped = why
			r.mu.Unlock()
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-r.o.Cancel:
			r.cancelled = true
			return nil
		case d, ok := <-r.deliveries:
			if !ok && r.next != nil {
				// The segment's deliveries ended: the next one takes over.
				if err := r.takeOver(ctx); err != nil {
					return err
				}
				continue
			}
			if !ok {
				return fmt.Errorf("rabbitmq amqp %s: the DLQ consumer was closed", r.c.AMQPAddr())
			}
			done, err := r.take(ctx, d)
			if err != nil || done {
				return err
			}
			if r.got++; r.next == nil && r.segmentDone() && r.remaining > 0 {
				r.rotate()
			}
			emptySeen = false
			if !idle.Stop() {
				select {
				case <-idle.C:
				default:
				}
			}
			idle.Reset(250 * time.Millisecond)
		case <-idle.C:
			if err := r.flush(ctx); err != nil || r.cancelled {
				return err
			}
			// Nothing arriving: is the DLQ exhausted? Everything we hold is
			// unacked, so ready 0 means every message has been seen.
			q, err := r.c.passive(ctx, r.p.DLQ)
			if err != nil {
				return err
			}
			if q.Ready != nil && *q.Ready == 0 {
				// Twice in a row with nothing delivered in between: a message
				// pushed just before the count has had time to arrive.
				if emptySeen {
					r.exhausted = true
					return nil
				}
				emptySeen = true
			} else {
				emptySeen = false
			}
			idle.Reset(250 * time.Millisecond)
		}
	}
	return nil
}

// take handles one delivery: passed over (held) unless it is an included
// message with the plan's content; acked at once when an earlier
// run confirmed it; else added to the chunk, flushed when full. done reports
// that the run must stop reading. A message passed over stays in the DLQ
// ahead of what follows: its ordering key is noted (admit).
func (r *run) take(ctx context.Context, d amqp.Delivery) (done bool, err error) {
	m := ToMessage(0, d, r.x)
	seq := r.reads
	r.reads++
	rec, want := r.included[m.EventID]
	if want && !r.seen[m.EventID] {
		if rec.Digest != m.Digest {
			// The approved id on other content: never sent under this
			// plan; held like an unselected message (it stays in place).
			r.changed[m.EventID] = true
			want = false
		}
	}
	if !want || r.seen[m.EventID] {
		if !r.seen[m.EventID] {
			f := m.Facts()
			f.Position = seq
			r.o.Admission.PassedOver(f)
		}
		r.held++
		r.mu.Lock()
		r.res.Passed++
		held := r.res.Passed
		if held >= r.o.MaxHeld {
			r.res.Stopped = fmt.Sprintf("%d unselected messages lie ahead of the selected ones (limit %d); nothing lost, run again after draining or narrowing", held, r.o.MaxHeld)
		}
		r.mu.Unlock()
		return held >= r.o.MaxHeld, nil
	}
	r.seen[m.EventID] = true
	r.remaining--
	it := item{d: d, rec: rec, m: m.Facts()}
	it.m.Position = seq
	switch r.states[m.EventID] {
	case StateConfirmed:
		// Arrived in an earlier run that stopped before the ack.
		if err := d.Ack(false); err != nil {
			return true, r.c.amqpErr(err)
		}
		r.mu.Lock()
		r.res.AlreadySent++
		r.mu.Unlock()
		return false, nil
	case StateIntent:
		it.again = true
	}
	r.cur = append(r.cur, it)
	if len(r.cur) >= r.o.Window {
		if err := r.flush(ctx); err != nil {
			return true, err
		}
		return r.cancelled, nil
	}
	return false, nil
}

// admit asks the Admission, before a chunk's intents are recorded, which of
// its messages not to send: they are held (back to the DLQ in place at the
// end) and reported.
func (r *run) admit(ctx context.Context) error {
	msgs := make([]redrive.QueueMessage, len(r.cur))
	for i, it := range r.cur {
		msgs[i] = it.m
	}
	out, err := r.o.Admission.Admit(ctx, msgs)
	if err != nil {
		return err
	}
	keep := r.cur[:0]
	var skipped []Skip
	for _, it := range r.cur {
		if v, no := out[it.rec.EventID]; no && !v.Included {
			skipped = append(skipped, Skip{EventID: it.rec.EventID, Position: it.rec.Position, Reason: v.Reason, Detail: v.Detail})
			continue
		}
		keep = append(keep, it)
	}
	r.cur = keep
	if len(keep) == 0 {
		r.cur = nil
	}
	if len(skipped) > 0 {
		r.mu.Lock()
		r.res.Skipped = append(r.res.Skipped, skipped...)
		r.mu.Unlock()
	}
	return nil
}

// account reports, once the DLQ was read to its end or every included id
// was found, the included ids that were not: a changed message as skipped
// (payload_changed), a missing one as not found.
func (r *run) account() {
	if !r.exhausted && r.remaining != 0 {
		return
	}
	for id, rec := range r.included {
		switch {
		case r.seen[id]:
		case r.states[id] == StateConfirmed:
			r.res.DoneBefore++
		case r.changed[id]:
			r.res.Skipped = append(r.res.Skipped, Skip{EventID: id, Position: rec.Position, Reason: ReasonContentChanged,
				Detail: "the DLQ holds a message with this id whose body, properties or headers differ from the plan's: not sent, left in the DLQ"})
		default:
			r.res.NotFound = append(r.res.NotFound, id)
		}
	}
	sort.Strings(r.res.NotFound)
	sort.Slice(r.res.Skipped, func(i, j int) bool { return r.res.Skipped[i].Position < r.res.Skipped[j].Position })
}

// verifyDepth compares the DLQ's ready count after the run (once held
// messages are back) with the count before minus the messages acked.
// Requeues land a moment after the channel closes (quorum queues go
// through Raft): poll to a short deadline before calling it a mismatch.
func (c *Client) verifyDepth(ctx context.Context, dlq string, before backends.Queue, berr error, res Result) *Verification {
	v := &Verification{Acked: res.Sent + res.AlreadySent, Returned: res.Returned}
	if berr != nil || before.Ready == nil {
		v.Problem = "the DLQ's depth before the run is unknown"
		return v
	}
	v.DepthBefore = *before.Ready
	want := v.DepthBefore - int64(v.Acked)
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, err := c.passive(ctx, dlq)
		if err != nil {
			v.Problem = "reading the DLQ's depth after the run: " + err.Error()
			return v
		}
		if q.Ready != nil {
			v.DepthAfter = *q.Ready
		}
		if v.DepthAfter == want || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch {
	case v.DepthAfter != want:
		v.Problem = fmt.Sprintf("the DLQ holds %d ready messages, expected %d (%d before - %d acked): another publisher or consumer on the DLQ, or messages not yet returned", v.DepthAfter, want, v.DepthBefore, v.Acked)
	case v.Returned > 0:
		v.Problem = fmt.Sprintf("%d publish(es) were returned unroutable (they stay in the DLQ)", v.Returned)
	default:
		v.OK = true
	}
	return v
}

// confirm waits for a chunk's confirms and collects its returns: what
// arrived (ok) and the ledger entry of each item. returned holds the
// returns drained so far that belong to later chunks (their publisher's
// returns queue holds every return of the chunks in flight, and each
// return precedes its confirm); only this stage touches it. A failure
// stops the reading at once when the policy says to stop at the first.
func (r *run) confirm(ctx context.Context, ch chunk, returned map[string]string) (settling, error) {
	st := settling{chunk: ch, ok: make([]bool, len(ch.items))}
	why := make([]string, len(ch.items))
	for i, it := range ch.items {
		if it.err != nil {
			why[i] = it.err.Error()
			continue
		}
		acked, err := it.dc.WaitContext(ctx)
		if err != nil {
			return st, err
		}
		st.ok[i] = acked
		if !acked {
			why[i] = "nacked by the broker (target full or refused)"
			if r := ch.pub.closeReason(); r != "" {
				why[i] = "channel closed by the broker: " + r
			}
		}
	}
drain:
	for {
		select {
		case ret, open := <-ch.pub.returns:
			if !open {
				break drain // the channel closed: its returns are all in
			}
			returned[ret.MessageId] = fmt.Sprintf("returned %d %s", ret.ReplyCode, ret.ReplyText)
		default:
			break drain
		}
	}
	for i, it := range ch.items {
		if ret, bad := returned[it.rec.EventID]; bad {
			delete(returned, it.rec.EventID)
			st.nReturned++
			if st.ok[i] {
				st.ok[i], why[i] = false, ret+" (unroutable: no queue bound for this routing key)"
			}
		}
		e := LedgerEntry{Plan: r.hash, EventID: it.rec.EventID, Vhost: r.p.Vhost, DLQ: r.p.DLQ, Exchange: it.rec.Exchange, RoutingKey: it.rec.RoutingKey, State: StateConfirmed}
		if !st.ok[i] {
			e.State, e.Detail = StateFailed, why[i]
			st.failed = append(st.failed, Failure{EventID: it.rec.EventID, Exchange: it.rec.Exchange, RoutingKey: it.rec.RoutingKey, Error: why[i]})
		}
		st.done = append(st.done, e)
	}
	if len(st.failed) > 0 && r.o.StopOnFailure {
		r.stopWith(fmt.Sprintf("stopped at the first failure (policy): %s", st.failed[0].Error))
	}
	return st, nil
}

// finish audits a chunk whose outcome is in the ledger (Settled), then
// acks the DLQ copies of what arrived and counts it.
func (r *run) finish(ctx context.Context, st settling) error {
	if r.o.Settled != nil {
		var confirmed []LedgerEntry
		for _, e := range st.done {
			if e.State == StateConfirmed {
				confirmed = append(confirmed, e)
			}
		}
		if err := r.o.Settled(ctx, confirmed, st.failed); err != nil {
			return err
		}
	}
	sent, resent := 0, 0
	for i, it := range st.items {
		if !st.ok[i] {
			continue // held unacked: back to the DLQ in place at the end
		}
		// On the channel it arrived on (its segment's).
		if err := it.d.Ack(false); err != nil {
			return r.c.amqpErr(err)
		}
		sent++
		if it.again {
			resent++
		}
	}
	r.mu.Lock()
	r.res.Sent += sent
	r.res.Resent += resent
	r.res.Failed = append(r.res.Failed, st.failed...)
	r.res.Returned += st.nReturned
	snapshot := r.res
	r.mu.Unlock()
	if r.o.Progress != nil {
		r.o.Progress(snapshot)
	}
	return nil
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

// dlqFacts is what the broker says about a plan's DLQ, for the
// Admission's Runnable: the management API's view (type, auto-delete,
// delivery limit); without the API, only the queue type the plan recorded.
func (c *Client) dlqFacts(ctx context.Context, p redrive.QueuePlan) (backends.Queue, error) {
	if c.mgmt == nil {
		return backends.Queue{Name: p.DLQ, Type: p.QueueType}, nil
	}
	return c.Queue(ctx, p.Vhost, p.DLQ)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
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
	res, err := c.Browse(ctx, p.DLQ, BrowseOptions{Limit: limit, QueueType: p.QueueType, AcceptQuorumSideEffects: p.AcceptQuorumSideEffects, Extractors: x})
	if err != nil {
		return nil, false, err
	}
	hash := p.Hash()
	out = []Refailure{}
	for _, m := range res.Messages {
		if m.Headers[HeaderPlan] != hash {
			continue
		}
		out = append(out, Refailure{EventID: m.EventID, Position: m.Position, OriginalQueue: m.Death.OriginalQueue(), Reason: m.Death.Reason(), Error: m.ErrorHeader})
	}
	return out, res.Complete, nil
}
