package redrive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/redrive/approval"
)

// RabbitMQ redrive plans on format v2. A queue message has no offset: a row
// names it by its position when browsed and its event id (the message_id a
// redrive publishes), "POSITION:EVENT_ID", and pins it by its content
// digest (body, properties and headers: backends/rabbitmq.ContentDigest).
// Its target is "exchange\x00routing-key": the original exchange and
// routing key from x-death, or with the to_queues option the default
// exchange and the queue it died in. Everything else a reviewer sees is
// derived from the message and the plan's policy (QueuePlan.Derive), and
// derived again from the message consumed at execute.

// Queue targets: a plan sends each message to its original exchange and
// routing key, or (--to-queue) to the queue it died in.
const (
	QueueTargetExchange = "original_exchange"
	QueueTargetQueue    = "original_queue"
)

// Options of a RabbitMQ plan's core.
const (
	OptionQuorumSideEffects = "quorum_side_effects"
	OptionToQueues          = "to_queues"
)

// QueueMessage is what the checks and a reviewer know about one DLQ message,
// derived from it with the plan's policy (backends/rabbitmq derives it from
// a delivery).
type QueueMessage struct {
	Position       int
	EventID        string
	EventIDSource  string
	IdempotencyKey string
	Class          string
	OriginalQueue  string
	DeathReason    string
	// Exchange and RoutingKey are where its dead-lettering says it was
	// published (Routed false when x-death names none).
	Exchange, RoutingKey string
	Routed               bool
	PriorRedrives        int
	// OrderingKey is the policy's ordering_key value ("" when none).
	OrderingKey string
	Timestamp   *time.Time
	Digest      string
}

// Target is where the message goes: its original exchange and routing
// key, or with toQueues the queue it died in through the default exchange.
func (m QueueMessage) Target(toQueues bool) (exchange, key string, ok bool) {
	if toQueues {
		return "", m.OriginalQueue, m.OriginalQueue != ""
	}
	return m.Exchange, m.RoutingKey, m.Routed
}

// QueuePlan is a RabbitMQ plan in memory. Its Core is what is hashed,
// signed, written and stored; the records' derived fields are filled by
// MakeQueuePlan or Derive and never read from a file.
type QueuePlan struct {
	Cluster   string
	Vhost     string
	DLQ       string
	QueueType string
	Selection QueueSelection
	// Target is QueueTargetExchange or QueueTargetQueue.
	Target string
	Rate   int // messages per second, 0: unlimited
	Window int // publishes awaiting confirms (the core's batch)
	// AcceptQuorumSideEffects: a quorum DLQ's unselected messages are
	// returned to the back with their delivery count + 1.
	AcceptQuorumSideEffects bool
	AllowHazards            bool
	Policy                  PolicySnapshot
	// Author is who ran the command: informative, never stored.
	Author    string
	CreatedAt time.Time
	Records   []QueueRecord
}

// QueueSelection is how the messages were chosen: always explicit.
type QueueSelection struct {
	Classes        []string
	EventIDs       []string
	Reasons        []string
	OriginalQueues []string
	All            bool
}

// Empty reports whether nothing selects messages.
func (s QueueSelection) Empty() bool {
	return !s.All && len(s.Classes) == 0 && len(s.EventIDs) == 0 && len(s.Reasons) == 0 && len(s.OriginalQueues) == 0
}

// Matches reports whether m is selected: every given criterion must hold.
func (s QueueSelection) Matches(m QueueMessage) bool {
	if s.Empty() {
		return false
	}
	in := func(list []string, v string) bool {
		if len(list) == 0 {
			return true
		}
		for _, x := range list {
			if x == v {
				return true
			}
		}
		return false
	}
	return in(s.Classes, m.Class) && in(s.EventIDs, m.EventID) && in(s.Reasons, m.DeathReason) && in(s.OriginalQueues, m.OriginalQueue)
}

// QueueRecord is one selected message. Position, EventID, Digest, Exchange,
// RoutingKey and the verdict's Included/Reason are in the hashed core; the
// rest is derived from the message.
type QueueRecord struct {
	Position int
	EventID  string
	Digest   string
	// Exchange and RoutingKey are the target (both empty: none).
	Exchange, RoutingKey string
	// Derived from the message and the plan's policy:
	EventIDSource  string
	IdempotencyKey string
	Class          string
	OriginalQueue  string
	DeathReason    string
	PriorRedrives  int
	OrderingKey    string
	// HazardPosition is the DLQ position of the message that makes this one
	// an ordering hazard (also set when the plan allows hazards).
	HazardPosition *int
	// Derived is set once the fields above were filled from the message.
	Derived bool
	Verdict
}

func (r *QueueRecord) fill(m QueueMessage) {
	r.EventIDSource, r.IdempotencyKey, r.Class = m.EventIDSource, m.IdempotencyKey, m.Class
	r.OriginalQueue, r.DeathReason, r.PriorRedrives, r.OrderingKey = m.OriginalQueue, m.DeathReason, m.PriorRedrives, m.OrderingKey
	r.Derived = true
}

// Loc is the record's row location, "POSITION:EVENT_ID".
func (r QueueRecord) Loc() string { return strconv.Itoa(r.Position) + ":" + r.EventID }

// QueueCheckInput is what the checks need besides the messages: answers
// from the ledger and the system of record, gathered by the caller.
type QueueCheckInput struct {
	// Redriven are event ids the ledger has confirmed (from any DLQ), with
	// where and by which plan, for the detail.
	Redriven map[string]string
	// Committed answers the system of record per idempotency key; SORErr
	// is set when it could not be asked; HasSOR when the policy names one.
	Committed map[string]bool
	SORErr    error
	HasSOR    bool
	// AllowHazards includes ordering hazards (still reported).
	AllowHazards bool
}

// MakeQueuePlan selects messages and runs the checks (ledger, system of
// record, loop guard, duplicates, ordering by business key). Pure: the
// check answers and now are arguments.
func MakeQueuePlan(msgs []QueueMessage, sel QueueSelection, pol PolicySnapshot, in QueueCheckInput, now time.Time) (QueuePlan, error) {
	if sel.Empty() {
		return QueuePlan{}, errors.New("selection: say what to redrive (--class, --event-id, --reason, --original-queue, or --all); a plan never means everything implicitly")
	}
	p := QueuePlan{Selection: sel, Target: QueueTargetExchange, Policy: pol, CreatedAt: now.UTC(), AllowHazards: in.AllowHazards}
	limit := pol.MaxRedrives
	if limit <= 0 {
		limit = DefaultMaxRedrives
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		if !sel.Matches(m) {
			continue
		}
		r := QueueRecord{Position: m.Position, EventID: m.EventID, Digest: m.Digest, Verdict: include()}
		r.fill(m)
		x, k, ok := m.Target(false)
		r.Exchange, r.RoutingKey = x, k
		switch {
		case !ok:
			r.Verdict = exclude(ReasonCheckFailed, "no x-death routing: the original exchange and routing key are unknown")
		case has(in.Redriven, m.EventID):
			r.Verdict = exclude(ReasonAlreadyRedriven, "the ledger has event %s confirmed: %s", m.EventID, in.Redriven[m.EventID])
		case pol.RequireIdempotencyKey && m.IdempotencyKey == "":
			r.Verdict = exclude(ReasonMissingKey, "policy requires %s", orDefault(pol.IdempotencyKey))
		case in.HasSOR && m.IdempotencyKey == "":
			// The system of record cannot be asked without a key: never
			// read as "not applied".
			r.Verdict = exclude(ReasonMissingKey, "no idempotency key (%s) to ask the system of record with", orDefault(pol.IdempotencyKey))
		case in.HasSOR && in.SORErr != nil:
			r.Verdict = exclude(ReasonCheckFailed, "system of record: %v", in.SORErr)
		case in.HasSOR && !has(in.Committed, m.IdempotencyKey):
			r.Verdict = exclude(ReasonCheckFailed, "system of record: no answer for %s", m.IdempotencyKey)
		case in.HasSOR && in.Committed[m.IdempotencyKey]:
			r.Verdict = exclude(ReasonEffectCommitted, "the system of record has %s (its effect already committed)", m.IdempotencyKey)
		case m.PriorRedrives >= limit:
			r.Verdict = exclude(ReasonLoopLimit, "redriven %d times before (limit %d)", m.PriorRedrives, limit)
		case seen[m.EventID]:
			r.Verdict = exclude(ReasonDuplicate, "event %s is already in this plan", m.EventID)
		}
		if r.Included {
			seen[m.EventID] = true
		}
		p.Records = append(p.Records, r)
	}
	CheckQueueOrdering(msgs, p.Records, in.AllowHazards)
	return p, nil
}

func has[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// CheckQueueOrdering is the ordering check for queues, by the policy's
// business key (ordering_key). Records are redriven in DLQ order, so within
// the selection messages of one key keep their order. Two cases break it:
//   - an older message of the same key stays behind in the DLQ (not
//     selected, or excluded for a reason that leaves it undelivered): the
//     redriven message would overtake it;
//   - within the plan, a message's publisher timestamp is older than that
//     of a same-key message ahead of it in the DLQ (it died later): it
//     would arrive behind the newer event.
//
// Such a record is an ordering_hazard: excluded, or included and still
// reported when allow is set. Excluding it leaves it behind too, so later
// messages of its key become hazards in turn. Messages without the key are
// not checked.
func CheckQueueOrdering(msgs []QueueMessage, recs []QueueRecord, allow bool) {
	inPlan := map[int]*QueueRecord{}
	for i := range recs {
		inPlan[recs[i].Position] = &recs[i]
	}
	ordered := append([]QueueMessage(nil), msgs...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Position < ordered[j].Position })
	behind := NewQueueOrdering()
	type stamp struct {
		pos int
		at  time.Time
	}
	newest := map[string]stamp{}
	for _, m := range ordered {
		k := m.OrderingKey
		if k == "" {
			continue
		}
		r := inPlan[m.Position]
		if r == nil || !r.Included {
			if r == nil || StaysBehind(r.Reason) {
				behind.StaysBehind(k, m.Position)
			}
			continue
		}
		hazard := func(pos int, why string) {
			p := pos
			r.HazardPosition = &p
			r.Detail = why
			if !allow {
				r.Included, r.Reason = false, ReasonOrderingHazard
				behind.StaysBehind(k, m.Position)
			}
		}
		if pos, ok := behind.Hazard(k, m.Position); ok {
			hazard(pos, fmt.Sprintf("an older message with ordering key %s stays in the DLQ at position %d; this one would overtake it", k, pos))
			continue
		}
		if m.Timestamp != nil {
			if s, ok := newest[k]; ok && m.Timestamp.Before(s.at) {
				hazard(s.pos, fmt.Sprintf("published before the same-key message at position %d (ahead of it in the DLQ): it would arrive behind a newer event", s.pos))
				continue
			}
			if s, ok := newest[k]; !ok || m.Timestamp.After(s.at) {
				newest[k] = stamp{m.Position, *m.Timestamp}
			}
		}
	}
}

// StaysBehind reports whether a message excluded for r remains in the DLQ
// undelivered (as opposed to delivered already, or settled in the system of
// record): a same-key message sent after it would overtake it.
func StaysBehind(r Reason) bool {
	switch r {
	case ReasonAlreadyRedriven, ReasonDuplicate, ReasonEffectCommitted:
		return false
	}
	return true
}

// QueueOrdering tracks, per ordering key, the first message that stays
// behind in the DLQ, in the order the DLQ is read: at plan time over the
// messages browsed, at execute over the messages consumed (a run sees every
// message ahead of a planned one, so a same-key message passed over,
// changed or skipped then makes the planned one a hazard, as at plan time).
type QueueOrdering struct{ behind map[string]int }

// NewQueueOrdering starts with nothing behind.
func NewQueueOrdering() *QueueOrdering { return &QueueOrdering{behind: map[string]int{}} }

// StaysBehind notes that the message at pos (in read order) with key stays
// in the DLQ. Keyless messages are not tracked.
func (o *QueueOrdering) StaysBehind(key string, pos int) {
	if key == "" {
		return
	}
	if p, ok := o.behind[key]; !ok || pos < p {
		o.behind[key] = pos
	}
}

// Hazard reports whether a message at pos with key would overtake an older
// same-key message that stays behind, and that message's position.
func (o *QueueOrdering) Hazard(key string, pos int) (int, bool) {
	if key == "" {
		return 0, false
	}
	p, ok := o.behind[key]
	return p, ok && p < pos
}

// Admit completes, for messages a run consumed (Position: their place in
// the order it read the DLQ, every message passed over before them already
// noted with StaysBehind), the verdicts of the checks run again (by event
// id; absent: included) with ordering: in read order, a message whose
// older same-key message stays behind would overtake it, and is an
// ordering_hazard unless allow is set; an excluded message stays behind in
// turn for the messages after it. It returns every exclusion.
func (o *QueueOrdering) Admit(msgs []QueueMessage, verdicts map[string]Verdict, allow bool) map[string]Verdict {
	excluded := map[string]Verdict{}
	ordered := append([]QueueMessage(nil), msgs...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Position < ordered[j].Position })
	for _, m := range ordered {
		v, checked := verdicts[m.EventID]
		out := checked && !v.Included
		if pos, behind := o.Hazard(m.OrderingKey, m.Position); !out && behind && !allow {
			v, out = exclude(ReasonOrderingHazard, "an older message with ordering key %s stays in the DLQ (read %d message(s) before this one); this one would overtake it", m.OrderingKey, m.Position-pos), true
		}
		if !out {
			continue
		}
		if StaysBehind(v.Reason) {
			o.StaysBehind(m.OrderingKey, m.Position)
		}
		excluded[m.EventID] = v
	}
	return excluded
}

// ToQueues retargets every record to the queue it died in, through the
// default exchange. Call before the plan is written (it changes the hash).
func (p *QueuePlan) ToQueues() {
	p.Target = QueueTargetQueue
	for i := range p.Records {
		r := &p.Records[i]
		if r.OriginalQueue == "" {
			continue
		}
		r.Exchange, r.RoutingKey = "", r.OriginalQueue
	}
}

// Core is the plan's hashed content: rows sorted by position, targets
// tabled in order of first use.
func (p QueuePlan) Core() Core {
	c := Core{
		Format: PlanFormat, Backend: BackendRabbitMQ, Cluster: p.Cluster, Vhost: p.Vhost, DLQ: p.DLQ, QueueType: p.QueueType,
		CreatedAt: FormatCreatedAt(p.CreatedAt), Policy: p.Policy, Rate: p.Rate, Batch: p.Window, AllowHazards: p.AllowHazards,
		Selection: CoreSelection{All: p.Selection.All, Classes: p.Selection.Classes, EventIDs: p.Selection.EventIDs, Reasons: p.Selection.Reasons, OriginalQueues: p.Selection.OriginalQueues},
		Targets:   []string{}, Rows: make([]Row, 0, len(p.Records)),
	}
	if p.AcceptQuorumSideEffects {
		c.Options = append(c.Options, OptionQuorumSideEffects)
	}
	if p.Target == QueueTargetQueue {
		c.Options = append(c.Options, OptionToQueues)
	}
	// Rows are in position order. A plan is made in that order, so its
	// records are only copied to be sorted when they are not: a million
	// records are not held twice each time a plan is hashed.
	recs := p.Records
	if !sort.SliceIsSorted(recs, func(i, j int) bool { return recs[i].Position < recs[j].Position }) {
		recs = append([]QueueRecord(nil), p.Records...)
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].Position < recs[j].Position })
	}
	index := map[string]int{}
	for _, r := range recs {
		t := -1
		if r.Exchange != "" || r.RoutingKey != "" {
			name := r.Exchange + "\x00" + r.RoutingKey
			i, ok := index[name]
			if !ok {
				i = len(c.Targets)
				index[name] = i
				c.Targets = append(c.Targets, name)
			}
			t = i
		}
		v := Reason("")
		if !r.Included {
			v = r.Reason
		}
		c.Rows = append(c.Rows, Row{Loc: r.Loc(), Digest: r.Digest, Target: t, Verdict: v})
	}
	return c
}

// Hash is the plan's identity (Core.Hash, exactly as for Kafka plans).
func (p QueuePlan) Hash() string {
	h, err := p.Core().Hash()
	if err != nil {
		panic(fmt.Sprintf("redrive: plan does not encode: %v", err))
	}
	return h
}

// Subject is what a signature over the plan covers: its hash and cluster.
func (p QueuePlan) Subject() approval.Subject {
	return approval.Subject{PlanHash: p.Hash(), Cluster: p.Cluster}
}

// QueuePlanFromCore rebuilds a RabbitMQ plan from a core; the records'
// derived fields are empty until Derive fills them.
func QueuePlanFromCore(c Core) (QueuePlan, error) {
	if err := c.Validate(); err != nil {
		return QueuePlan{}, err
	}
	if c.Backend != BackendRabbitMQ {
		return QueuePlan{}, fmt.Errorf("a %s plan is not a RabbitMQ plan", c.Backend)
	}
	created, _ := ParseCreatedAt(c.CreatedAt)
	p := QueuePlan{
		Cluster: c.Cluster, Vhost: c.Vhost, DLQ: c.DLQ, QueueType: c.QueueType, Target: QueueTargetExchange, Rate: c.Rate, Window: c.Batch,
		AllowHazards: c.AllowHazards, Policy: c.Policy, CreatedAt: created,
		Selection: QueueSelection{All: c.Selection.All, Classes: c.Selection.Classes, EventIDs: c.Selection.EventIDs, Reasons: c.Selection.Reasons, OriginalQueues: c.Selection.OriginalQueues},
	}
	if !sort.StringsAreSorted(c.Options) {
		return QueuePlan{}, fmt.Errorf("options %q: not sorted", c.Options)
	}
	for i, o := range c.Options {
		switch {
		case i > 0 && c.Options[i-1] == o:
			return QueuePlan{}, fmt.Errorf("options: %q listed twice", o)
		case o == OptionQuorumSideEffects:
			p.AcceptQuorumSideEffects = true
		case o == OptionToQueues:
			p.Target = QueueTargetQueue
		default:
			return QueuePlan{}, fmt.Errorf("options: %q is not a RabbitMQ plan option (%s, %s)", o, OptionQuorumSideEffects, OptionToQueues)
		}
	}
	targets := make([][2]string, len(c.Targets))
	for i, t := range c.Targets {
		x, k, ok := strings.Cut(t, "\x00")
		if !ok {
			return QueuePlan{}, fmt.Errorf("target %q: want EXCHANGE\\u0000ROUTING_KEY", t)
		}
		targets[i] = [2]string{x, k}
	}
	// An event is sent at most once: a plan lists a second message of the
	// same event id excluded as duplicate, never included twice (an author
	// re-hashing an edited plan could list it so; the run would send it once
	// and the review would count it twice).
	includedAt := map[string]int{}
	for _, row := range c.Rows {
		pos, id, ok := strings.Cut(row.Loc, ":")
		n, err := strconv.Atoi(pos)
		if !ok || err != nil || n < 0 || strconv.Itoa(n) != pos || id == "" {
			return QueuePlan{}, fmt.Errorf("row %q: want POSITION:EVENT_ID", row.Loc)
		}
		if !row.Included() && !knownReason(row.Verdict) {
			return QueuePlan{}, fmt.Errorf("row %s: verdict %q is not a reason", row.Loc, row.Verdict)
		}
		if row.Included() {
			if at, twice := includedAt[id]; twice {
				return QueuePlan{}, fmt.Errorf("row %s: event %s is included twice (also at position %d); a plan sends an event once: make the plan again", row.Loc, id, at)
			}
			includedAt[id] = n
		}
		r := QueueRecord{Position: n, EventID: id, Digest: row.Digest, Verdict: Verdict{Included: row.Included(), Reason: row.Verdict}}
		if row.Target >= 0 {
			r.Exchange, r.RoutingKey = targets[row.Target][0], targets[row.Target][1]
		}
		p.Records = append(p.Records, r)
	}
	return p, nil
}

// ErrQueuePlanV1 refuses a RabbitMQ plan in the format before v2: its
// signatures covered its v1 hash, so it cannot be carried over.
var ErrQueuePlanV1 = errors.New("a RabbitMQ plan in the old format (v1), whose signatures cannot carry over to format v2: make the plan again (berth redrive plan)")

// DecodeQueuePlan reads a RabbitMQ plan file or stored plan (SignedPlan):
// it must be a v2 RabbitMQ core hashing to its hash (an edit matches
// ErrHashMismatch); a v1 plan is ErrQueuePlanV1. The file's signatures are
// dropped: DecodeQueuePlanSigned returns them.
func DecodeQueuePlan(raw []byte) (QueuePlan, error) {
	p, _, err := DecodeQueuePlanSigned(raw)
	return p, err
}

// DecodeQueuePlanSigned is DecodeQueuePlan with the file's signatures (each
// over the plan's hash, none verified: a file's author signature is checked
// when it is imported into the redrive store, and counted only as
// allowed_signers says).
func DecodeQueuePlanSigned(raw []byte) (QueuePlan, []approval.Signature, error) {
	var probe struct {
		Plan struct {
			Format  string `json:"format"`
			Kind    string `json:"kind"`
			Version int    `json:"version"`
		} `json:"plan"`
	}
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&probe) == nil && probe.Plan.Format == "" && probe.Plan.Kind == BackendRabbitMQ {
		return QueuePlan{}, nil, ErrQueuePlanV1
	}
	sp, err := DecodeSignedPlan(raw)
	if err != nil {
		return QueuePlan{}, nil, err
	}
	p, err := QueuePlanFromCore(sp.Plan)
	return p, sp.Signatures, err
}

// Encode writes the plan as a v2 plan file (SignedPlan, one line) with no
// signature.
func (p QueuePlan) Encode() ([]byte, error) { return p.EncodeSigned(nil) }

// EncodeSigned writes the plan as a v2 plan file carrying sigs (the
// author's, as `redrive plan --key` writes it, the same as a Kafka plan
// file does).
func (p QueuePlan) EncodeSigned(sigs []approval.Signature) ([]byte, error) {
	sp, err := NewSignedPlan(p.Core())
	if err != nil {
		return nil, err
	}
	sp.Signatures = append(sp.Signatures, sigs...)
	return sp.Encode()
}

// Derive fills each record's derived fields from the messages read now,
// matched by event id and content digest. It returns the event ids whose
// message no longer has the plan's content, and those not found.
func (p *QueuePlan) Derive(msgs []QueueMessage) (changed, gone []string) {
	d := p.Deriver()
	for _, m := range msgs {
		d.Add(m)
	}
	return d.Result()
}

// QueueDeriver is Derive over messages handed to it one at a time, in
// queue order, so that a review of a large DLQ holds the plan and an index
// of its event ids, never the messages read.
type QueueDeriver struct {
	p *QueuePlan
	// first is the first record of each event id; next chains the records
	// that share one (-1 ends a chain).
	first map[string]int32
	next  []int32
	// found is set for a record once a message with its event id is read
	// (filled: one with its digest too).
	found, filled []bool
}

// Deriver starts a Derive whose messages are given by Add.
func (p *QueuePlan) Deriver() *QueueDeriver {
	n := len(p.Records)
	d := &QueueDeriver{p: p, first: make(map[string]int32, n), next: make([]int32, n), found: make([]bool, n), filled: make([]bool, n)}
	// Chained from the last record back, so each chain runs in plan order.
	for i := n - 1; i >= 0; i-- {
		id := p.Records[i].EventID
		d.next[i] = -1
		if j, ok := d.first[id]; ok {
			d.next[i] = j
		}
		d.first[id] = int32(i)
	}
	return d
}

// Add matches one message read: every record with its event id is found,
// and one not yet filled whose digest is the message's is filled from it
// (the first such message fills it, as Derive does).
func (d *QueueDeriver) Add(m QueueMessage) {
	i, ok := d.first[m.EventID]
	for ok && i >= 0 {
		d.found[i] = true
		if !d.filled[i] && d.p.Records[i].Digest == m.Digest {
			d.p.Records[i].fill(m)
			d.filled[i] = true
		}
		i = d.next[i]
	}
}

// Result returns, in plan order, the event ids whose message changed (read
// with another digest only) and those not read at all.
func (d *QueueDeriver) Result() (changed, gone []string) {
	for i, r := range d.p.Records {
		switch {
		case d.filled[i]:
		case d.found[i]:
			changed = append(changed, r.EventID)
		default:
			gone = append(gone, r.EventID)
		}
	}
	return changed, gone
}

// Included returns the included records by event id: pointers into
// p.Records, so that a run over a million records does not hold them twice.
func (p QueuePlan) Included() map[string]*QueueRecord {
	out := map[string]*QueueRecord{}
	for i := range p.Records {
		if r := &p.Records[i]; r.Included {
			out[r.EventID] = r
		}
	}
	return out
}

// Totals counts the plan's records by verdict and class, as Kafka plans do.
func (p QueuePlan) Totals() Totals {
	return totalsOf(len(p.Records), func(i int) (string, Verdict) { return p.Records[i].Class, p.Records[i].Verdict })
}

// Blocked reports whether a check could not run for some record: the plan
// cannot execute until it is made again.
func (p QueuePlan) Blocked() (bool, string) {
	for _, r := range p.Records {
		if r.Reason == ReasonCheckFailed {
			why := r.Detail
			if why == "" {
				why = "a check could not run when the plan was made"
			}
			return true, fmt.Sprintf("record at position %d (event %s): %s", r.Position, r.EventID, why)
		}
	}
	return false, ""
}
