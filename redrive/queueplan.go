package redrive

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
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
	Digest      Digest
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
	// seal is the plan's hash once it is final (Seal) or was read and
	// checked (DecodeQueuePlan): hashing a million records is a pass over
	// ~100 MB of canonical JSON, and a command asks for the hash many
	// times.
	seal seal
}

// seal is a kept hash and what it was kept for: the header (everything
// hashed but the records) and a checksum of what is hashed of the
// records. Any change to either makes it stale, and the hash is computed
// again. The checksum (maphash, in memory only) costs a few milliseconds
// for a million records, the hash itself a second or more.
type seal struct {
	hash string
	head string
	sum  uint64
}

// sealSeed seeds the records' checksums (this process's own).
var sealSeed = maphash.MakeSeed()

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

// QueueRecord is one selected message. Position, EventID, Digest, the
// target (Exchange, RoutingKey) and the verdict's Included/Reason are in
// the hashed core; the rest is derived from the message.
//
// A plan holds a million of them, so a record is kept small: its digest as
// its 32 bytes, and the strings many messages share (target, event id
// source, class, origin, death reason) behind one pointer to a QueueOrigin
// shared by every record with the same ones.
type QueueRecord struct {
	Position int
	EventID  string
	Digest   Digest
	origin   *QueueOrigin
	// Derived from the message and the plan's policy:
	IdempotencyKey string
	OrderingKey    string
	PriorRedrives  int
	// HazardPosition is the DLQ position of the message that makes this one
	// an ordering hazard (also set when the plan allows hazards).
	HazardPosition *int
	// Derived is set once the fields above were filled from the message.
	Derived bool
	Verdict
}

// QueueOrigin is what many records share: the target they are sent to
// (both empty: none) and, once derived, how their event id was found,
// their class, the queue they died in and why.
type QueueOrigin struct {
	Exchange, RoutingKey string
	EventIDSource        string
	Class                string
	OriginalQueue        string
	DeathReason          string
}

// Exchange is the exchange the record is sent to.
func (r QueueRecord) Exchange() string { return r.originOf().Exchange }

// RoutingKey is the routing key the record is sent with.
func (r QueueRecord) RoutingKey() string { return r.originOf().RoutingKey }

// EventIDSource says where the event id was found (message_id, or the
// idempotency key's field).
func (r QueueRecord) EventIDSource() string { return r.originOf().EventIDSource }

// Class is the message's failure class.
func (r QueueRecord) Class() string { return r.originOf().Class }

// OriginalQueue is the queue the message died in.
func (r QueueRecord) OriginalQueue() string { return r.originOf().OriginalQueue }

// DeathReason is why it died (x-death's reason).
func (r QueueRecord) DeathReason() string { return r.originOf().DeathReason }

var noOrigin QueueOrigin

func (r QueueRecord) originOf() *QueueOrigin {
	if r.origin == nil {
		return &noOrigin
	}
	return r.origin
}

// Origin is the record's shared strings (never nil; not to be modified).
func (r QueueRecord) Origin() QueueOrigin { return *r.originOf() }

// SetOrigin sets the record's shared strings (through origins, so that
// records with the same ones share one copy; nil: this record its own).
func (r *QueueRecord) SetOrigin(o QueueOrigin, origins *Origins) {
	if origins == nil {
		r.origin = &o
		return
	}
	r.origin = origins.Of(o)
}

// WithOrigin is r with its shared strings set to o (its own copy).
func (r QueueRecord) WithOrigin(o QueueOrigin) QueueRecord {
	r.SetOrigin(o, nil)
	return r
}

// Origins shares QueueOrigins between the records that have the same.
type Origins struct{ m map[QueueOrigin]*QueueOrigin }

// Of is the shared copy of o.
func (s *Origins) Of(o QueueOrigin) *QueueOrigin {
	if p, ok := s.m[o]; ok {
		return p
	}
	if s.m == nil {
		s.m = map[QueueOrigin]*QueueOrigin{}
	}
	p := &o
	s.m[o] = p
	return p
}

func (r *QueueRecord) fill(m QueueMessage, origins *Origins) {
	o := r.Origin()
	o.EventIDSource, o.Class, o.OriginalQueue, o.DeathReason = m.EventIDSource, m.Class, m.OriginalQueue, m.DeathReason
	r.SetOrigin(o, origins)
	r.IdempotencyKey, r.PriorRedrives, r.OrderingKey = m.IdempotencyKey, m.PriorRedrives, m.OrderingKey
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
// check answers and now are arguments. It is QueuePlanner over msgs.
func MakeQueuePlan(msgs []QueueMessage, sel QueueSelection, pol PolicySnapshot, in QueueCheckInput, now time.Time) (QueuePlan, error) {
	b, err := NewQueuePlanner(sel)
	if err != nil {
		return QueuePlan{}, err
	}
	for _, m := range msgs {
		b.Add(m)
	}
	return b.Plan(pol, in, now), nil
}

// QueuePlanner makes a plan from messages handed to it one at a time, as a
// browse reads them: it keeps the selected messages' records and, for the
// ordering check, the first position of each ordering key left behind,
// never the messages (a DLQ of a million messages is planned holding the
// plan, not also a million messages' facts).
type QueuePlanner struct {
	sel  QueueSelection
	recs []QueueRecord
	// behind is the unselected messages: each stays in the DLQ.
	behind *QueueOrdering
	// stamps are the publisher timestamps of the records with an
	// ordering key, by record index (only the ordering check reads them).
	stamps  map[int]time.Time
	origins Origins
}

// NewQueuePlanner starts a plan of what sel selects; an empty selection is
// refused (a plan never means everything implicitly).
func NewQueuePlanner(sel QueueSelection) (*QueuePlanner, error) {
	if sel.Empty() {
		return nil, errors.New("selection: say what to redrive (--class, --event-id, --reason, --original-queue, or --all); a plan never means everything implicitly")
	}
	return &QueuePlanner{sel: sel, behind: NewQueueOrdering(), stamps: map[int]time.Time{}}, nil
}

// Reserve makes room for n records: a caller that knows the DLQ's depth
// spares the plan the copies growing it by appending makes (at a million
// records, the old and the new array at once).
func (b *QueuePlanner) Reserve(n int) {
	if n > cap(b.recs) {
		recs := make([]QueueRecord, len(b.recs), n)
		copy(recs, b.recs)
		b.recs = recs
	}
}

// Add takes the next message read and reports whether it is selected.
func (b *QueuePlanner) Add(m QueueMessage) bool {
	if !b.sel.Matches(m) {
		b.behind.StaysBehind(m.OrderingKey, m.Position)
		return false
	}
	r := QueueRecord{Position: m.Position, EventID: m.EventID, Digest: m.Digest, Verdict: include()}
	x, k, ok := m.Target(false)
	r.SetOrigin(QueueOrigin{Exchange: x, RoutingKey: k}, &b.origins)
	r.fill(m, &b.origins)
	if !ok {
		// Decided now: the first check (nothing after it can include it).
		r.Verdict = exclude(ReasonCheckFailed, "no x-death routing: the original exchange and routing key are unknown")
	}
	if m.OrderingKey != "" && m.Timestamp != nil {
		b.stamps[len(b.recs)] = *m.Timestamp
	}
	b.recs = append(b.recs, r)
	return true
}

// Selected are the records of the messages selected so far (their
// verdicts are not final until Plan): what the checks need to be asked.
func (b *QueuePlanner) Selected() []QueueRecord { return b.recs }

// Plan runs the checks over the selected messages and returns the plan;
// the planner is spent.
func (b *QueuePlanner) Plan(pol PolicySnapshot, in QueueCheckInput, now time.Time) QueuePlan {
	p := QueuePlan{Selection: b.sel, Target: QueueTargetExchange, Policy: pol, CreatedAt: now.UTC(), AllowHazards: in.AllowHazards, Records: b.recs}
	limit := pol.MaxRedrives
	if limit <= 0 {
		limit = DefaultMaxRedrives
	}
	for i := range p.Records {
		r := &p.Records[i]
		if !r.Included {
			continue // no routing (Add)
		}
		switch {
		case has(in.Redriven, r.EventID):
			r.Verdict = exclude(ReasonAlreadyRedriven, "the ledger has event %s confirmed: %s", r.EventID, in.Redriven[r.EventID])
		case pol.RequireIdempotencyKey && r.IdempotencyKey == "":
			r.Verdict = exclude(ReasonMissingKey, "policy requires %s "+NoKeyNote, orDefault(pol.IdempotencyKey))
		case in.HasSOR && r.IdempotencyKey == "":
			// The system of record cannot be asked without a key: never
			// read as "not applied".
			r.Verdict = exclude(ReasonMissingKey, "no idempotency key (%s) to ask the system of record with "+NoKeyNote, orDefault(pol.IdempotencyKey))
		case in.HasSOR && in.SORErr != nil:
			r.Verdict = exclude(ReasonCheckFailed, "system of record: %v", in.SORErr)
		case in.HasSOR && !has(in.Committed, r.IdempotencyKey):
			r.Verdict = exclude(ReasonCheckFailed, "system of record: no answer for %s", r.IdempotencyKey)
		case in.HasSOR && in.Committed[r.IdempotencyKey]:
			r.Verdict = exclude(ReasonEffectCommitted, "the system of record has %s (its effect already committed)", r.IdempotencyKey)
		case r.PriorRedrives >= limit:
			r.Verdict = exclude(ReasonLoopLimit, "redriven %d times before (limit %d)", r.PriorRedrives, limit)
		}
	}
	excludeDuplicates(p.Records)
	b.ordering(p.Records, in.AllowHazards)
	*b = QueuePlanner{}
	return p
}

// excludeDuplicates excludes, of the included records sharing an event id,
// every one after the first (in record order): an event is sent once. The
// records are sorted by event id through an index (4 bytes a record)
// rather than a set of a million ids.
func excludeDuplicates(recs []QueueRecord) {
	var idx []int32
	for i := range recs {
		if recs[i].Included {
			idx = append(idx, int32(i))
		}
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := strings.Compare(recs[a].EventID, recs[b].EventID); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for j := 1; j < len(idx); j++ {
		if r := &recs[idx[j]]; r.EventID == recs[idx[j-1]].EventID {
			r.Verdict = exclude(ReasonDuplicate, "event %s is already in this plan", r.EventID)
		}
	}
}

// ordering is CheckQueueOrdering over the planner's records: the
// unselected messages' keys were noted as they were read (b.behind; a
// message left behind after a record cannot make it a hazard, so noting
// them all first changes nothing).
func (b *QueuePlanner) ordering(recs []QueueRecord, allow bool) {
	order := positionOrder(recs)
	behind := b.behind
	type stamp struct {
		pos int
		at  time.Time
	}
	newest := map[string]stamp{}
	for j := range recs {
		i := j
		if order != nil {
			i = int(order[j])
		}
		r := &recs[i]
		k := r.OrderingKey
		if k == "" {
			continue
		}
		if !r.Included {
			if StaysBehind(r.Reason) {
				behind.StaysBehind(k, r.Position)
			}
			continue
		}
		hazard := func(pos int, why string) {
			p := pos
			r.HazardPosition = &p
			r.Detail = why
			if !allow {
				r.Included, r.Reason = false, ReasonOrderingHazard
				behind.StaysBehind(k, r.Position)
			}
		}
		if pos, ok := behind.Hazard(k, r.Position); ok {
			hazard(pos, fmt.Sprintf("an older message with ordering key %s stays in the DLQ at position %d; this one would overtake it", k, pos))
			continue
		}
		if at, ok := b.stamps[i]; ok {
			if s, ok := newest[k]; ok && at.Before(s.at) {
				hazard(s.pos, fmt.Sprintf("published before the same-key message at position %d (ahead of it in the DLQ): it would arrive behind a newer event", s.pos))
				continue
			}
			if s, ok := newest[k]; !ok || at.After(s.at) {
				newest[k] = stamp{r.Position, at}
			}
		}
	}
}

// positionOrder is the records' indexes in position order (stable), or
// nil when they are in that order already (as a plan is made and read).
func positionOrder(recs []QueueRecord) []int32 {
	if sort.SliceIsSorted(recs, func(i, j int) bool { return recs[i].Position < recs[j].Position }) {
		return nil
	}
	order := make([]int32, len(recs))
	for i := range order {
		order[i] = int32(i)
	}
	sort.SliceStable(order, func(i, j int) bool { return recs[order[i]].Position < recs[order[j]].Position })
	return order
}

func has[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

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
	p.seal = seal{}
	var origins Origins
	for i := range p.Records {
		r := &p.Records[i]
		o := r.Origin()
		if o.OriginalQueue == "" {
			continue
		}
		o.Exchange, o.RoutingKey = "", o.OriginalQueue
		r.SetOrigin(o, &origins)
	}
}

// queueRow is a record's row before it is written: what Row holds,
// without the strings.
type queueRow struct {
	pos     int
	id      string
	digest  Digest
	target  int
	verdict Reason
}

// Row is the row as a Core holds it.
func (r queueRow) Row() Row {
	return Row{Loc: strconv.Itoa(r.pos) + ":" + r.id, Digest: r.digest.String(), Target: r.target, Verdict: r.verdict}
}

// write writes the row as [loc, digest, target, verdict], each string
// written by str (both of a plan's encodings escape character by
// character, so the location is its digits and ':', which need no
// escaping, then the event id escaped).
func (r queueRow) write(b *bytes.Buffer, str func(*bytes.Buffer, string)) {
	var num [48]byte
	b.WriteByte('[')
	at := b.Len()
	str(b, r.id) // "ID": the position goes between the quote and the id
	pre := append(strconv.AppendInt(num[:0], int64(r.pos), 10), ':')
	b.Write(pre)
	buf := b.Bytes()
	copy(buf[at+1+len(pre):], buf[at+1:len(buf)-len(pre)])
	copy(buf[at+1:], pre)
	b.WriteString(`,"`)
	b.Write(r.digest.appendText(num[:0]))
	b.WriteString(`",`)
	b.Write(strconv.AppendInt(num[:0], int64(r.target), 10))
	b.WriteByte(',')
	str(b, string(r.verdict))
	b.WriteByte(']')
}

// coreHead returns the plan's core without its rows (targets tabled in
// order of first use), the records' position order (nil: as they are) and
// how record i becomes its row.
func (p QueuePlan) coreHead() (Core, []int32, func(i int) queueRow) {
	c := Core{
		Format: PlanFormat, Backend: BackendRabbitMQ, Cluster: p.Cluster, Vhost: p.Vhost, DLQ: p.DLQ, QueueType: p.QueueType,
		CreatedAt: FormatCreatedAt(p.CreatedAt), Policy: p.Policy, Rate: p.Rate, Batch: p.Window, AllowHazards: p.AllowHazards,
		Selection: CoreSelection{All: p.Selection.All, Classes: p.Selection.Classes, EventIDs: p.Selection.EventIDs, Reasons: p.Selection.Reasons, OriginalQueues: p.Selection.OriginalQueues},
		Targets:   []string{},
	}
	if p.AcceptQuorumSideEffects {
		c.Options = append(c.Options, OptionQuorumSideEffects)
	}
	if p.Target == QueueTargetQueue {
		c.Options = append(c.Options, OptionToQueues)
	}
	// Rows are in position order. A plan is made in that order, so its
	// records are only indexed in order when they are not.
	recs := p.Records
	order := positionOrder(recs)
	at := func(j int) int {
		if order != nil {
			return int(order[j])
		}
		return j
	}
	// Records share their origins: the target of each is looked up once
	// per origin, not once per record.
	index := map[string]int{}
	byOrigin := map[*QueueOrigin]int{}
	target := func(r *QueueRecord) int {
		if t, ok := byOrigin[r.origin]; ok && r.origin != nil {
			return t
		}
		t := -1
		if x, k := r.Exchange(), r.RoutingKey(); x != "" || k != "" {
			name := x + "\x00" + k
			i, ok := index[name]
			if !ok {
				i = len(c.Targets)
				index[name] = i
				c.Targets = append(c.Targets, name)
			}
			t = i
		}
		if r.origin != nil {
			byOrigin[r.origin] = t
		}
		return t
	}
	targets := make([]int32, len(recs))
	for j := range recs {
		i := at(j)
		targets[i] = int32(target(&recs[i]))
	}
	row := func(j int) queueRow {
		i := at(j)
		r := &recs[i]
		v := Reason("")
		if !r.Included {
			v = r.Reason
		}
		return queueRow{pos: r.Position, id: r.EventID, digest: r.Digest, target: int(targets[i]), verdict: v}
	}
	return c, order, row
}

// Core is the plan's hashed content: rows sorted by position, targets
// tabled in order of first use.
func (p QueuePlan) Core() Core {
	c, _, row := p.coreHead()
	c.Rows = make([]Row, 0, len(p.Records))
	for j := range p.Records {
		c.Rows = append(c.Rows, row(j).Row())
	}
	return c
}

// Hash is the plan's identity (Core.Hash, exactly as for Kafka plans): the
// rows are written as they are made from the records, never held.
func (p QueuePlan) Hash() string {
	if p.seal.hash != "" && p.seal == p.sealOf(p.seal.hash) {
		return p.seal.hash
	}
	return p.computeHash()
}

// sealOf is the seal of the plan as it is now, with hash.
func (p QueuePlan) sealOf(hash string) seal {
	var h maphash.Hash
	h.SetSeed(sealSeed)
	var num [8]byte
	for i := range p.Records {
		r := &p.Records[i]
		o := r.originOf()
		binary.LittleEndian.PutUint64(num[:], uint64(r.Position))
		h.Write(num[:])
		h.WriteString(r.EventID)
		h.WriteByte(0)
		h.Write(r.Digest[:])
		h.WriteString(o.Exchange)
		h.WriteByte(0)
		h.WriteString(o.RoutingKey)
		h.WriteByte(0)
		if r.Included {
			h.WriteByte(1)
		}
		h.WriteString(string(r.Reason))
		h.WriteByte(0)
	}
	s := seal{hash: hash, sum: h.Sum64()}
	if b, err := json.Marshal(p.header()); err == nil {
		s.head = string(b)
	}
	return s
}

// header is what of the plan is hashed besides the records.
func (p QueuePlan) header() any {
	return struct {
		Cluster, Vhost, DLQ, QueueType, Target string
		Selection                              QueueSelection
		Rate, Window                           int
		Accept, Allow                          bool
		Policy                                 PolicySnapshot
		CreatedAt                              string
	}{p.Cluster, p.Vhost, p.DLQ, p.QueueType, p.Target, p.Selection, p.Rate, p.Window, p.AcceptQuorumSideEffects, p.AllowHazards, p.Policy, FormatCreatedAt(p.CreatedAt)}
}

func (p QueuePlan) computeHash() string {
	c, _, row := p.coreHead()
	h, err := hashCanonical(func(w io.Writer) error {
		return c.writeCanonical(w, len(p.Records), func(b *bytes.Buffer, j int) { row(j).write(b, writeASCIIString) })
	})
	if err != nil {
		panic(fmt.Sprintf("redrive: plan does not encode: %v", err))
	}
	return h
}

// Seal computes the hash of the plan as it is now and keeps it: call once
// the plan is final (made, retargeted, bound to its cluster). Anything
// hashed that changes afterwards makes Hash compute it again.
func (p *QueuePlan) Seal() { p.seal = p.sealOf(p.computeHash()) }

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
		return QueuePlan{}, &OtherBackend{Plan: c.Backend, Want: BackendRabbitMQ}
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
	targets := make([]*QueueOrigin, len(c.Targets))
	for i, t := range c.Targets {
		x, k, ok := strings.Cut(t, "\x00")
		if !ok {
			return QueuePlan{}, fmt.Errorf("target %q: want EXCHANGE\\u0000ROUTING_KEY", t)
		}
		targets[i] = &QueueOrigin{Exchange: x, RoutingKey: k}
	}
	p.Records = make([]QueueRecord, 0, len(c.Rows))
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
		d, _ := ParseDigest(row.Digest) // validated
		r := QueueRecord{Position: n, EventID: id, Digest: d, Verdict: Verdict{Included: row.Included(), Reason: row.Verdict}}
		if row.Target >= 0 {
			r.origin = targets[row.Target]
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
	p, _, err := DecodeQueuePlanSignedFrom(bytes.NewReader(raw))
	return p, err
}

// DecodeQueuePlanSigned is DecodeQueuePlan with the file's signatures (each
// over the plan's hash, none verified: a file's author signature is checked
// when it is imported into the redrive store, and counted only as
// allowed_signers says).
func DecodeQueuePlanSigned(raw []byte) (QueuePlan, []approval.Signature, error) {
	return DecodeQueuePlanSignedFrom(bytes.NewReader(raw))
}

// DecodeQueuePlanFrom is DecodeQueuePlan reading from r, a row at a time
// (DecodeQueuePlanSignedFrom).
func DecodeQueuePlanFrom(r io.Reader) (QueuePlan, error) {
	p, _, err := DecodeQueuePlanSignedFrom(r)
	return p, err
}

// Encode writes the plan as a v2 plan file (SignedPlan, one line) with no
// signature.
func (p QueuePlan) Encode() ([]byte, error) { return p.EncodeSigned(nil) }

// EncodeSigned writes the plan as a v2 plan file carrying sigs (the
// author's, as `redrive plan --key` writes it, the same as a Kafka plan
// file does).
func (p QueuePlan) EncodeSigned(sigs []approval.Signature) ([]byte, error) {
	var b bytes.Buffer
	if err := p.EncodeSignedTo(&b, sigs); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EncodeTo writes exactly what Encode returns (EncodeSignedTo).
func (p QueuePlan) EncodeTo(w io.Writer) error { return p.EncodeSignedTo(w, nil) }

// EncodeSignedTo writes exactly what EncodeSigned returns (a SignedPlan as
// encoding/json writes it, and a newline), each row as it is made from its
// record: a million-record plan is ~95 MB of JSON, which a plan command
// cannot afford to hold beside the records (nor its rows as []Row).
func (p QueuePlan) EncodeSignedTo(w io.Writer, sigs []approval.Signature) error {
	c, _, row := p.coreHead()
	head, err := json.Marshal(SignedPlan{Hash: p.Hash(), Plan: c, Signatures: append([]approval.Signature{}, sigs...)})
	if err != nil {
		return err
	}
	// Rows is Core's last field: its JSON ends the plan, and the
	// signatures follow (a string cannot hold this unescaped).
	const rows = `"rows":null}`
	at := bytes.Index(head, []byte(rows+`,"signatures":`))
	if at < 0 {
		return fmt.Errorf("redrive: a plan file's JSON does not end its plan with its rows: %.60q", head)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(head[:at])
	bw.WriteString(`"rows":[`)
	var b bytes.Buffer
	for j := range p.Records {
		if j > 0 {
			b.WriteByte(',')
		}
		row(j).write(&b, writeJSONString)
		if b.Len() >= 32<<10 {
			bw.Write(b.Bytes())
			b.Reset()
		}
	}
	bw.Write(b.Bytes())
	bw.WriteString("]}")
	bw.Write(head[at+len(rows):])
	bw.WriteString("\n")
	return bw.Flush()
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
	origins       Origins
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
			d.p.Records[i].fill(m, &d.origins)
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
	n := 0
	for i := range p.Records {
		if p.Records[i].Included {
			n++
		}
	}
	out := make(map[string]*QueueRecord, n)
	for i := range p.Records {
		if r := &p.Records[i]; r.Included {
			out[r.EventID] = r
		}
	}
	return out
}

// Totals counts the plan's records by verdict and class, as Kafka plans do.
func (p QueuePlan) Totals() Totals {
	return totalsOf(len(p.Records), func(i int) (string, Verdict) { return p.Records[i].Class(), p.Records[i].Verdict })
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
