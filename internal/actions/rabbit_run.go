package actions

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/redrive"
)

// RabbitExecOptions tune a RabbitMQ run (RabbitRedrive.Run).
type RabbitExecOptions struct {
	// Window is how many publishes await confirms per chunk (default 500);
	// each chunk is one ledger transaction before and one after.
	Window int
	// Rate caps messages per second (0: the plan's, then unlimited).
	Rate int
	// MaxHeld bounds the unselected messages held (unacked, to keep their
	// place) while looking for selected ones (default 150,000: a
	// 1,000,000-message DLQ one message in ten of which stays holds
	// 100,000; at segmentHeld a channel, a run then needs at most 1,500
	// channels for them, under the 2,047 a connection allows).
	MaxHeld int
	// StopOnFailure stops at the first failed publish (payments policies).
	StopOnFailure bool
	// Progress is called once the run starts, after each chunk is settled,
	// and once more if the run's end accounts for records no chunk settled
	// (sent before, changed, not visible, gone): its last report counts
	// every record the run settled (RabbitResult.Settled).
	Progress func(RabbitResult)
	// Settled, when set, is called once a chunk's outcome is in the
	// ledger and before its DLQ copies are acked: the confirmed entries
	// and the failures. An error stops the run (the chunk's messages stay
	// in the DLQ; the ledger has them confirmed, so a rerun only acks
	// them).
	Settled func(ctx context.Context, confirmed []rabbitmq.LedgerEntry, failed []RabbitFailure) error
	// Skip holds included records that the checks, run again at execution,
	// now exclude (by event id): they are left in the DLQ and reported.
	Skip map[string]redrive.Verdict
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

// rabbitPolicy is what a run asks the policy (rabbitAdmission): which DLQs
// may run, the checks run again, the signed target against the message's,
// ordering. A message's Position is its place in the order this run read
// the DLQ.
type rabbitPolicy interface {
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

// RabbitCancelled is RabbitResult.Stopped for a run stopped through
// RabbitExecOptions.Cancel or Pause.
const RabbitCancelled = "cancelled by the operator between chunks (run the plan again to send the rest)"

// RabbitSkip is an included record that was not sent: the checks run again
// at execution excluded it.
type RabbitSkip struct {
	EventID  string         `json:"event_id"`
	Position int            `json:"position"`
	Reason   redrive.Reason `json:"reason"`
	Detail   string         `json:"detail,omitempty"`
}

// RabbitVerification is what the DLQ says after a run: its ready count
// before and after, against the messages acked (sent, or confirmed
// earlier), and the messages the broker returned as unroutable.
type RabbitVerification struct {
	DepthBefore int64 `json:"dlq_depth_before"`
	DepthAfter  int64 `json:"dlq_depth_after"`
	Acked       int   `json:"acked"`
	Returned    int   `json:"returned"`
	// OK: depth after = depth before - acked, and nothing returned.
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
	// Watched is how long the DLQ was watched for re-failures afterwards
	// ("" when not); Refailed are the plan's messages found back in it.
	Watched  string               `json:"watched,omitempty"`
	Refailed []rabbitmq.Refailure `json:"refailed,omitempty"`
}

// RabbitFailure is one message that could not be redriven: it stays in the
// DLQ.
type RabbitFailure struct {
	EventID    string `json:"event_id"`
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
	Error      string `json:"error"`
}

// RabbitResult is what a RabbitMQ run did.
type RabbitResult struct {
	Plan string `json:"plan"`
	// Sent were published, confirmed, recorded and acked from the DLQ.
	Sent int `json:"sent"`
	// AlreadySent were confirmed by an earlier run (ledger) and only acked
	// from the DLQ now: not published again.
	AlreadySent int `json:"already_sent"`
	// DoneBefore were sent and acked by an earlier run: no longer in the
	// DLQ, the ledger says confirmed (a rerun of a finished plan).
	DoneBefore int `json:"done_before"`
	// ByAnotherRun (counted in DoneBefore too) were not in the DLQ
	// because another run of the same plan, going on at the same time (a
	// second terminal), sent them: the ledger confirmed them after this
	// run began.
	ByAnotherRun int `json:"by_another_run"`
	// Resent were recorded as intent by an earlier run that stopped before
	// their confirm: sent again (consumers deduplicate by message_id).
	Resent int `json:"resent"`
	// Excluded are plan records whose checks excluded them.
	Excluded int `json:"excluded"`
	// Failed stay in the DLQ: returned unroutable, nacked, or refused.
	Failed []RabbitFailure `json:"failed"`
	// NotFound are included events no longer in the DLQ (and not confirmed
	// in the ledger): consumed or purged by someone else.
	NotFound []string `json:"not_found"`
	// Passed counts unselected messages left in place.
	Passed int `json:"passed_over"`
	// Skipped are included records the checks excluded at execution.
	Skipped []RabbitSkip `json:"skipped"`
	// Returned counts publishes the broker returned (unroutable); each is
	// also a failure.
	Returned int `json:"returned"`
	// Verification is set when RabbitExecOptions.Verify asked for it and
	// the run was not interrupted.
	Verification *RabbitVerification `json:"verification,omitempty"`
	// Stopped says why execution ended early ("" when it finished).
	Stopped string `json:"stopped,omitempty"`
	// redriven counts the Skipped already_redriven (RabbitResult.skip).
	redriven int
}

// skip lists an included record the checks run again excluded; one the
// ledger has confirmed from another plan (already_redriven) is counted
// too, for progress to call it already sent as the summary does.
func (r *RabbitResult) skip(s RabbitSkip) {
	if s.Reason == redrive.ReasonAlreadyRedriven {
		r.redriven++
	}
	r.Skipped = append(r.Skipped, s)
}

// Settled counts the plan's included records whose outcome the run knows:
// sent, already sent (now or by an earlier run), skipped (at execution,
// changed, not visible), not found and failed. Once the run has read what
// it needed it is the plan's included count.
func (r RabbitResult) Settled() int {
	return r.Sent + r.AlreadySent + r.DoneBefore + len(r.Skipped) + len(r.NotFound) + len(r.Failed)
}

// rabbitItem is one message in flight.
type rabbitItem struct {
	d   rabbitmq.Delivery
	rec redrive.QueueRecord
	// m is what the consumed message derives to; its Position is its place
	// in the order this run read the DLQ.
	m     redrive.QueueMessage
	dc    rabbitmq.Confirm
	err   error // publish failed before a confirm
	again bool  // an earlier run recorded intent
}

type rabbitChunk struct {
	items []rabbitItem
	pub   *rabbitmq.Publisher
}

// executeRabbit redrives an approved plan from its DLQ. Each selected
// message is published to its original exchange and routing key (from
// x-death) with mandatory set and publisher confirms, pipelined in chunks;
// the ledger records intent before a chunk is published and completion
// after its confirms; the DLQ message is acked only after that. A returned
// (unroutable) or nacked message is a failure and stays in the DLQ.
// Unselected messages are held unacked while passing and returned in place
// (classic queues keep positions). Killing the process at any point loses
// nothing: unacked messages return to the DLQ, and the ledger tells a
// resumed run what already arrived.
//
// Run enforces read-only contexts and approvals before calling; a
// read-only client is refused here too.
func executeRabbit(ctx context.Context, t RabbitTransport, p redrive.QueuePlan, l RabbitLedger, pol rabbitPolicy, o RabbitExecOptions) (RabbitResult, error) {
	r, err := newRabbitRun(ctx, t, p, l, pol, o)
	if err != nil || len(r.included) == 0 {
		return r.res, err
	}
	// The DLQ's ready count before anything is consumed, for verification.
	before, berr := t.Depth(ctx, p.DLQ)
	if err := r.open(ctx); err != nil {
		if r.conn != nil {
			r.close(ctx)
		}
		return r.res, err
	}
	defer r.close(ctx)
	r.progress()
	settled := r.settleInOrder(ctx)
	readErr := r.read(ctx)
	if readErr == nil && !r.cancelled {
		readErr = r.flush(ctx)
	}
	if r.cancelled {
		r.mu.Lock()
		r.res.Stopped = RabbitCancelled
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
	// Read the ledger again before asking who holds what is missing, and
	// once more after (that waits for the statistics while another run
	// may still be sending).
	r.sentMeanwhile(ctx)
	others := r.otherConsumers(ctx)
	if ctx.Err() == nil {
		for _, s := range r.segs {
			_ = s.Close()
		}
	}
	unseen := r.unseen(ctx, others)
	if r.sentMeanwhile(ctx); r.res.ByAnotherRun > 0 && r.o.Notice != nil {
		r.o.Notice(fmt.Sprintf("plan %s: %d message(s) were sent by another run of this plan going on at the same time (a second terminal?): counted already sent, not sent again", redrive.ShortHash(r.hash), r.res.ByAnotherRun))
	}
	r.account(unseen)
	if r.res.Settled() != r.reported {
		r.progress()
	}
	if readErr != nil {
		return r.res, readErr
	}
	if o.Verify {
		r.res.Verification = verifyDepth(ctx, t, p.DLQ, before, berr, r.res)
	}
	return r.res, nil
}

// rabbitRun is one execution of a plan: what it was asked, what it holds,
// and the two stages that share its result (reading and publishing;
// settling).
type rabbitRun struct {
	t        RabbitTransport
	p        redrive.QueuePlan
	hash     string
	l        RabbitLedger
	pol      rabbitPolicy
	o        RabbitExecOptions
	included map[string]*redrive.QueueRecord // by event id, less the skipped
	states   map[string]string               // the ledger's state per event id

	conn *rabbitmq.RedriveConn
	// segs consumed the DLQ, one channel each; each acks what arrived on
	// it and holds what was passed over. cur is the segment read now; got
	// and held count what it delivered and what of that was passed over.
	segs      []*rabbitmq.Segment
	seg       *rabbitmq.Segment
	got, held int
	next      chan nextSegment    // the segment being opened (nil: none)
	pub       *rabbitmq.Publisher // nil after the broker closed it: reopened on use
	x         rabbitmq.Extractors
	origin    string

	seen    map[string]bool // included ids found (with the plan's content)
	changed map[string]bool // ids met on content other than the plan's
	reads   int             // deliveries taken so far
	cur     []rabbitItem    // the chunk being filled
	pace    *time.Ticker    // nil: no rate limit

	inflight  chan rabbitChunk
	stop      chan string
	cancelled bool
	// exhausted: the DLQ was read to its end; remaining: included ids not
	// yet found.
	exhausted bool
	remaining int

	mu  sync.Mutex // guards res between the two stages
	res RabbitResult
	// reported is res.Settled() at the last Progress.
	reported int
}

// progress reports the counts so far to RabbitExecOptions.Progress.
func (r *rabbitRun) progress() {
	if r.o.Progress == nil {
		return
	}
	r.mu.Lock()
	snapshot := r.res
	r.reported = snapshot.Settled()
	r.mu.Unlock()
	r.o.Progress(snapshot)
}

// newRabbitRun checks that the plan may run on this connection, fills in
// the defaults and reads the plan's ledger states.
func newRabbitRun(ctx context.Context, t RabbitTransport, p redrive.QueuePlan, l RabbitLedger, pol rabbitPolicy, o RabbitExecOptions) (*rabbitRun, error) {
	hash := p.Hash()
	r := &rabbitRun{t: t, p: p, hash: hash, l: l, pol: pol, o: o, res: RabbitResult{Plan: hash, Failed: []RabbitFailure{}, NotFound: []string{}, Skipped: []RabbitSkip{}}}
	if p.Vhost != t.Vhost() {
		return r, fmt.Errorf("plan %s is for vhost %q; this connection is to %q", redrive.ShortHash(hash), p.Vhost, t.Vhost())
	}
	r.o.Window = firstPositive(o.Window, p.Window, 500)
	r.o.Rate = firstPositive(o.Rate, p.Rate, 0)
	r.o.MaxHeld = firstPositive(o.MaxHeld, 150_000)
	if t.ReadOnly() {
		return r, fmt.Errorf("refused: %w", backends.ErrReadOnly)
	}
	if pol == nil {
		// What may be sent is decided by the policy: a run without one
		// would send what nothing checked.
		return r, errors.New("redrive execute needs an Admission (the policy deciding what is sent); nothing sent")
	}
	dlq, err := t.DLQFacts(ctx, p)
	if err != nil {
		return r, err
	}
	if err := pol.Runnable(p, dlq); err != nil {
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
			r.res.skip(RabbitSkip{EventID: id, Position: rec.Position, Reason: v.Reason, Detail: v.Detail})
			delete(r.included, id)
		}
	}
	sort.Slice(r.res.Skipped, func(i, j int) bool { return r.res.Skipped[i].Position < r.res.Skipped[j].Position })
	if r.states, err = l.PlanStates(ctx, hash); err != nil {
		return r, err
	}
	r.remaining = len(r.included)
	// One index of a million included records is enough: the policy's
	// target check looks records up in the run's.
	if s, ok := pol.(interface {
		shareIncluded(map[string]*redrive.QueueRecord)
	}); ok {
		s.shareIncluded(r.included)
	}
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
func (r *rabbitRun) open(ctx context.Context) error {
	conn, err := r.t.OpenRedrive(ctx)
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
	err = r.consume(ctx)
	stopNotes()
	if err != nil {
		return err
	}
	err = conn.Bounded(ctx, "open a publisher", func() (err error) {
		r.pub, err = r.newPublisher()
		return err
	})
	if err != nil {
		return err
	}
	r.x = rabbitmq.Extractors{IdempotencyKey: r.p.Policy.IdempotencyKey, OrderingKey: r.p.Policy.OrderingKey}
	r.origin = url.PathEscape(r.p.Vhost) + "/" + r.p.DLQ
	r.seen, r.changed = make(map[string]bool, len(r.included)), map[string]bool{}
	r.inflight = make(chan rabbitChunk, toConfirm)
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
func (r *rabbitRun) segmentDone() bool {
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
func (r *rabbitRun) consume(ctx context.Context) error {
	s, err := r.conn.Consume(ctx, r.p.DLQ, len(r.segs)+1, segmentPrefetch)
	if err != nil {
		return err
	}
	r.segs = append(r.segs, s)
	r.seg, r.got, r.held = s, 0, 0
	return nil
}

// nextSegment is a segment being opened while the last one's deliveries
// are still read.
type nextSegment struct {
	s   *rabbitmq.Segment
	err error
}

// rotate ends the current segment once it has taken its share: its
// consumer is cancelled and the next one started, in the background, while
// the reader goes on with the deliveries on their way (the broker sends
// every one before the cancel-ok, so the old consumer's deliveries end,
// in order, before the next consumer's begin: nothing is read out of
// order, nothing is left unseen). Its messages stay unacked on its channel
// (acked there once settled, or returned in place at the end).
func (r *rabbitRun) rotate() {
	old, n := r.segs[len(r.segs)-1], len(r.segs)
	ready := make(chan nextSegment, 1)
	r.next = ready
	go func() {
		s, err := r.conn.Rotate(old, r.p.DLQ, n, segmentPrefetch)
		ready <- nextSegment{s: s, err: err}
	}()
}

// takeOver makes the segment rotate opened the current one, once the last
// one's deliveries ended.
func (r *rabbitRun) takeOver(ctx context.Context) error {
	var n nextSegment
	select {
	case n = <-r.next:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.next = nil
	if n.s != nil {
		r.segs = append(r.segs, n.s)
	}
	if n.err != nil {
		return n.err
	}
	r.seg, r.got, r.held = n.s, 0, 0
	return nil
}

// noteWhileBusy says, every few seconds until stopped, that the DLQ has
// not answered the consumer yet and how many messages it holds unacked
// (from the management API): the usual cause is a queue still requeueing
// them.
func (r *rabbitRun) noteWhileBusy(ctx context.Context) (stop func()) {
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
			if n, ok := r.t.Unacked(ctx, r.p.Vhost, r.p.DLQ); ok {
				unacked = fmt.Sprintf("%d", n)
			}
			r.o.Notice(fmt.Sprintf("DLQ %s busy requeueing: %s unacked; RabbitMQ has not let the redrive consume it yet (waiting; ctrl+c stops, nothing is consumed yet)", r.p.DLQ, unacked))
		}
	}()
	return func() { close(quit); <-done }
}

// busyNoteEvery is how often a DLQ that does not answer is reported.
const busyNoteEvery = 5 * time.Second

// close releases the run's connection and rate ticker.
func (r *rabbitRun) close(ctx context.Context) {
	if r.pace != nil {
		r.pace.Stop()
	}
	r.conn.Close(ctx.Err() != nil)
}

// newPublisher opens a confirm-mode channel. Returns arrive before their
// confirm; the buffer holds every return of the chunks in flight so none
// is dropped.
func (r *rabbitRun) newPublisher() (*rabbitmq.Publisher, error) {
	return r.conn.NewPublisher(4*r.o.Window + 16)
}

// stopWith asks the reading stage to stop (the first reason wins).
func (r *rabbitRun) stopWith(why string) {
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

// rabbitSettling is a chunk whose confirms are in: what arrived, what did
// not.
type rabbitSettling struct {
	rabbitChunk
	ok        []bool
	done      []rabbitmq.LedgerEntry // one per item: confirmed or failed
	failed    []RabbitFailure
	nReturned int
}

// settleInOrder starts the settling stages over inflight (closed by the
// reader when it ends) and reports their first error once all have ended.
func (r *rabbitRun) settleInOrder(ctx context.Context) <-chan error {
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
	confirmed := make(chan rabbitSettling) // unbuffered: see inflightWindows
	recorded := make(chan rabbitSettling, 2)
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
func (r *rabbitRun) flush(ctx context.Context) error {
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
	intents := make([]rabbitmq.LedgerEntry, len(r.cur))
	for i, it := range r.cur {
		intents[i] = rabbitmq.LedgerEntry{Plan: r.hash, EventID: it.rec.EventID, Vhost: r.p.Vhost, DLQ: r.p.DLQ, Exchange: it.rec.Exchange(), RoutingKey: it.rec.RoutingKey(), State: rabbitmq.StateIntent}
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
		it.dc, it.err = r.pub.Publish(ctx, it.d, it.rec.Exchange(), it.rec.RoutingKey(),
			rabbitmq.Redriven{EventID: it.rec.EventID, Plan: r.hash, Origin: r.origin, PriorRedrives: it.m.PriorRedrives})
	}
	r.inflight <- rabbitChunk{items: r.cur, pub: r.pub}
	if r.pub.Closed() {
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
func (r *rabbitRun) read(ctx context.Context) error {
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
		case d, ok := <-r.seg.Deliveries():
			if !ok && r.next != nil {
				// The segment's deliveries ended: the next one takes over.
				if err := r.takeOver(ctx); err != nil {
					return err
				}
				continue
			}
			if !ok {
				// The broker cancels the consumers of a queue deleted.
				if _, err := r.t.Depth(ctx, r.p.DLQ); errors.Is(err, backends.ErrNotFound) {
					return err
				}
				return fmt.Errorf("rabbitmq amqp %s: the DLQ consumer was closed", r.t.AMQPAddr())
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
			q, err := r.t.Depth(ctx, r.p.DLQ)
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
func (r *rabbitRun) take(ctx context.Context, d rabbitmq.Delivery) (done bool, err error) {
	m := d.Message(r.x)
	seq := r.reads
	r.reads++
	rec, want := r.included[m.EventID]
	if want && !r.seen[m.EventID] {
		if d, _ := redrive.ParseDigest(m.Digest); rec.Digest != d {
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
			r.pol.PassedOver(f)
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
	it := rabbitItem{d: d, rec: *rec, m: m.Facts()}
	it.m.Position = seq
	switch r.states[m.EventID] {
	case rabbitmq.StateConfirmed:
		// Arrived in an earlier run that stopped before the ack.
		if err := d.Ack(); err != nil {
			return true, err
		}
		r.mu.Lock()
		r.res.AlreadySent++
		r.mu.Unlock()
		return false, nil
	case rabbitmq.StateIntent:
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

// admit asks the policy, before a chunk's intents are recorded, which of
// its messages not to send: they are held (back to the DLQ in place at the
// end) and reported.
func (r *rabbitRun) admit(ctx context.Context) error {
	msgs := make([]redrive.QueueMessage, len(r.cur))
	for i, it := range r.cur {
		msgs[i] = it.m
	}
	out, err := r.pol.Admit(ctx, msgs)
	if err != nil {
		return err
	}
	keep := r.cur[:0]
	var skipped []RabbitSkip
	for _, it := range r.cur {
		if v, no := out[it.rec.EventID]; no && !v.Included {
			skipped = append(skipped, RabbitSkip{EventID: it.rec.EventID, Position: it.rec.Position, Reason: v.Reason, Detail: v.Detail})
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
		for _, sk := range skipped {
			r.res.skip(sk)
		}
		r.mu.Unlock()
	}
	return nil
}

// notFound reports whether the DLQ was read to its end without finding an
// included id that is neither confirmed by an earlier run nor changed.
func (r *rabbitRun) notFound() bool {
	if !r.exhausted || r.remaining == 0 {
		return false
	}
	for id := range r.included {
		if !r.seen[id] && r.states[id] != rabbitmq.StateConfirmed && !r.changed[id] {
			return true
		}
	}
	return false
}

// sentMeanwhile reads the plan's ledger again when the run did not find
// some included message: another run of the same plan going on at the same
// time (a second terminal) consumes and sends messages this one never
// sees, and the ledger has them confirmed since this run read it. Those
// are done, not gone (ByAnotherRun counts them).
func (r *rabbitRun) sentMeanwhile(ctx context.Context) {
	if ctx.Err() != nil || !r.notFound() {
		return
	}
	states, err := r.l.PlanStates(ctx, r.hash)
	if err != nil {
		return // said as not found, as before
	}
	n := 0
	for id := range r.included {
		if !r.seen[id] && !r.changed[id] && r.states[id] != rabbitmq.StateConfirmed && states[id] == rabbitmq.StateConfirmed {
			r.states[id] = rabbitmq.StateConfirmed
			n++
		}
	}
	r.res.ByAnotherRun += n
}

// otherConsumers counts, when the run did not find some included message,
// the DLQ's consumers other than its own, before its segments close: what
// they hold unacknowledged the run could not consume. The queue counts a
// segment's consumer from its consume-ok to its cancel-ok (or its
// channel's close), as Segment.Consuming says.
func (r *rabbitRun) otherConsumers(ctx context.Context) int {
	if ctx.Err() != nil || !r.notFound() {
		return 0
	}
	q, err := r.t.Depth(ctx, r.p.DLQ)
	if err != nil || q.Consumers == nil {
		return 0
	}
	mine := 0
	for _, s := range r.segs {
		if s.Consuming() {
			mine++
		}
	}
	return max(*q.Consumers-mine, 0)
}

// unseenWait bounds the wait for the management API's statistics to count
// what other consumers hold (emitted every 5 s by default): half of it at
// most, as a browse waits half of what is left of its timeout.
const unseenWait = 30 * time.Second

// unseen is what the DLQ's `others` other consumers hold unacknowledged, once
// the run's own messages are back (nil: nothing, or no other consumer).
func (r *rabbitRun) unseen(ctx context.Context, others int) *rabbitmq.Unseen {
	if others == 0 || ctx.Err() != nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, unseenWait)
	defer cancel()
	return r.t.Unseen(wctx, r.p.DLQ, others, r.o.Notice)
}

// account reports, once the DLQ was read to its end or every included id
// was found, the included ids that were not: a changed message as skipped
// (payload_changed); a missing one as not visible when other consumers
// held messages of the DLQ (unseen: it may be one of those), else as not
// found.
func (r *rabbitRun) account(unseen *rabbitmq.Unseen) {
	if !r.exhausted && r.remaining != 0 {
		return
	}
	var notVisible string
	if unseen != nil {
		notVisible = "not visible: " + unseen.String() + " (a run cannot consume them either); not sent: run the plan again once they are back in the DLQ"
	}
	for id, rec := range r.included {
		switch {
		case r.seen[id]:
		case r.states[id] == rabbitmq.StateConfirmed:
			r.res.DoneBefore++
		case r.changed[id]:
			r.res.Skipped = append(r.res.Skipped, RabbitSkip{EventID: id, Position: rec.Position, Reason: ReasonChanged,
				Detail: "the DLQ holds a message with this id whose body, properties or headers differ from the plan's: not sent, left in the DLQ"})
		case unseen != nil:
			r.res.Skipped = append(r.res.Skipped, RabbitSkip{EventID: id, Position: rec.Position, Reason: ReasonNotVisible, Detail: notVisible})
		default:
			r.res.NotFound = append(r.res.NotFound, id)
		}
	}
	sort.Strings(r.res.NotFound)
	sort.Slice(r.res.Skipped, func(i, j int) bool { return r.res.Skipped[i].Position < r.res.Skipped[j].Position })
}

// verifyDepth compares the DLQ's ready count after the run (once held
// messages are back) with the count before minus the messages acked.
// Requeues land after the channel closes (quorum queues go through Raft;
// a lazy queue puts back 100,000 held messages over several seconds): poll
// while the count still comes closer to the expected one, and call it a
// mismatch only once it has not for 5 s (at most two minutes in all, or
// the command's time ran out). A 1,000,000-message
// run that held 100,000 back was called a mismatch at 75,378 by a fixed
// 5 s deadline.
func verifyDepth(ctx context.Context, t RabbitTransport, dlq string, before backends.Queue, berr error, res RabbitResult) *RabbitVerification {
	v := &RabbitVerification{Acked: res.Sent + res.AlreadySent, Returned: res.Returned}
	if berr != nil || before.Ready == nil {
		v.Problem = "the DLQ's depth before the run is unknown"
		return v
	}
	v.DepthBefore = *before.Ready
	want := v.DepthBefore - int64(v.Acked)
	// Only a count that comes closer to the expected one is progress (a
	// live publisher's moves are not), and two minutes is the most it
	// waits in all.
	const still = 5 * time.Second
	deadline, limit := time.Now().Add(still), time.Now().Add(2*time.Minute)
	distance := func(n int64) int64 { return max(n-want, want-n) }
	for first := true; ; first = false {
		q, err := t.Depth(ctx, dlq)
		if err != nil {
			v.Problem = "reading the DLQ's depth after the run: " + err.Error()
			return v
		}
		if q.Ready != nil {
			if !first && distance(*q.Ready) < distance(v.DepthAfter) {
				if deadline = time.Now().Add(still); deadline.After(limit) {
					deadline = limit
				}
			}
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
func (r *rabbitRun) confirm(ctx context.Context, ch rabbitChunk, returned map[string]string) (rabbitSettling, error) {
	st := rabbitSettling{rabbitChunk: ch, ok: make([]bool, len(ch.items))}
	why := make([]string, len(ch.items))
	for i, it := range ch.items {
		if it.err != nil {
			why[i] = it.err.Error()
			continue
		}
		acked, err := it.dc.Wait(ctx)
		if err != nil {
			return st, err
		}
		st.ok[i] = acked
		if !acked {
			why[i] = "nacked by the broker (target full or refused)"
			if r := ch.pub.CloseReason(); r != "" {
				why[i] = "channel closed by the broker: " + r
			}
		}
	}
	ch.pub.TakeReturns(returned)
	for i, it := range ch.items {
		if ret, bad := returned[it.rec.EventID]; bad {
			delete(returned, it.rec.EventID)
			st.nReturned++
			if st.ok[i] {
				st.ok[i], why[i] = false, ret+" (unroutable: no queue bound for this routing key)"
			}
		}
		e := rabbitmq.LedgerEntry{Plan: r.hash, EventID: it.rec.EventID, Vhost: r.p.Vhost, DLQ: r.p.DLQ, Exchange: it.rec.Exchange(), RoutingKey: it.rec.RoutingKey(), State: rabbitmq.StateConfirmed}
		if !st.ok[i] {
			e.State, e.Detail = rabbitmq.StateFailed, why[i]
			st.failed = append(st.failed, RabbitFailure{EventID: it.rec.EventID, Exchange: it.rec.Exchange(), RoutingKey: it.rec.RoutingKey(), Error: why[i]})
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
func (r *rabbitRun) finish(ctx context.Context, st rabbitSettling) error {
	if r.o.Settled != nil {
		var confirmed []rabbitmq.LedgerEntry
		for _, e := range st.done {
			if e.State == rabbitmq.StateConfirmed {
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
		if err := it.d.Ack(); err != nil {
			return err
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
	r.mu.Unlock()
	r.progress()
	return nil
}
