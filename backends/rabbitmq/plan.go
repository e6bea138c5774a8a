package rabbitmq

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// RabbitMQ redrive plans. A queue message has no offset, so a plan names
// messages by event id (the message_id a redrive publishes) and carries
// each one's target from x-death. The plan file's SHA-256 over its
// canonical encoding is its identity, as for Kafka plans; the checks are the
// same where they mean the same (ledger, system of record, duplicates, loop
// guard, missing idempotency key). Kafka's ordering scan has no queue
// counterpart (a queue has no partition to scan); instead, with a policy's
// ordering_key, messages of one business key are checked against each
// other inside the DLQ (CheckOrdering).

// PlanKind marks a RabbitMQ plan file.
const PlanKind = "rabbitmq"

const planHashDomain = "berth-redrive-plan/rabbitmq/v1\n"

// Plan is a reviewed selection of DLQ messages to redrive.
type Plan struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`
	Server  string `json:"server"` // AMQP host:port
	// Cluster is the RabbitMQ cluster's name (ClusterName): a plan runs
	// only there, and its signatures cover it. Empty in plans made before
	// it existed (they are bound to Server).
	Cluster   string    `json:"cluster,omitempty"`
	Vhost     string    `json:"vhost"`
	DLQ       string    `json:"dlq"`
	QueueType string    `json:"queue_type"`
	Selection Selection `json:"selection"`
	// Target is TargetExchange (each message's original exchange and
	// routing key, from x-death) or TargetQueue (the queue it died in,
	// through the default exchange: no other bound queue gets a copy).
	Target string `json:"target"`
	Rate   int    `json:"rate"`   // messages per second, 0: unlimited
	Window int    `json:"window"` // publishes awaiting confirms
	// AcceptQuorumSideEffects: a quorum DLQ's unselected messages are
	// returned to the back with their delivery count + 1.
	AcceptQuorumSideEffects bool `json:"accept_quorum_side_effects"`
	// AllowHazards: ordering hazards were included (still reported).
	AllowHazards bool                   `json:"allow_ordering_hazards,omitempty"`
	Policy       redrive.PolicySnapshot `json:"policy"`
	Author       string                 `json:"author"`
	CreatedAt    time.Time              `json:"created_at"`
	Records      []PlanRecord           `json:"records"`
}

// Redrive targets.
const (
	TargetExchange = "original_exchange"
	TargetQueue    = "original_queue"
)

// ToQueues retargets every record to the queue it died in, through the
// default exchange. Call before the plan is written (it changes the hash).
func (p *Plan) ToQueues() {
	p.Target = TargetQueue
	for i := range p.Records {
		r := &p.Records[i]
		if r.OriginalQueue == "" {
			continue
		}
		r.Exchange, r.RoutingKey = "", r.OriginalQueue
	}
}

// Selection is how the messages were chosen: always explicit.
type Selection struct {
	Classes        []string `json:"classes,omitempty"`
	EventIDs       []string `json:"event_ids,omitempty"`
	Reasons        []string `json:"reasons,omitempty"`
	OriginalQueues []string `json:"original_queues,omitempty"`
	// All selects every message browsed; it must be said explicitly.
	All bool `json:"all,omitempty"`
}

// Empty reports whether nothing selects messages.
func (s Selection) Empty() bool {
	return !s.All && len(s.Classes) == 0 && len(s.EventIDs) == 0 && len(s.Reasons) == 0 && len(s.OriginalQueues) == 0
}

// Matches reports whether m is selected: every given criterion must hold.
func (s Selection) Matches(m Message) bool {
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
	return in(s.Classes, m.Class) && in(s.EventIDs, m.EventID) && in(s.Reasons, m.Death.Reason()) && in(s.OriginalQueues, m.Death.OriginalQueue())
}

// PlanRecord is one selected message and its verdict.
type PlanRecord struct {
	Position       int    `json:"position"`
	EventID        string `json:"event_id"`
	EventIDSource  string `json:"event_id_source"`
	IdempotencyKey string `json:"idempotency_key"`
	Class          string `json:"class"`
	OriginalQueue  string `json:"original_queue"`
	DeathReason    string `json:"death_reason"`
	Exchange       string `json:"exchange"`
	RoutingKey     string `json:"routing_key"`
	BodySHA256     string `json:"body_sha256"`
	// Digest is the message's ContentDigest when planned (empty in plans
	// made before it existed: execution then compares BodySHA256).
	Digest        string `json:"digest,omitempty"`
	PriorRedrives int    `json:"prior_redrives"`
	// OrderingKey is the business key named by the policy's ordering_key
	// ("" when none is configured or the message lacks it).
	OrderingKey string `json:"ordering_key,omitempty"`
	// HazardPosition is the DLQ position of the message that makes this
	// one an ordering hazard (also set when the plan allows hazards).
	HazardPosition *int `json:"hazard_position,omitempty"`
	redrive.Verdict
}

// CheckInput is what the checks need besides the messages: answers from the
// ledger and the system of record, gathered by the caller (I/O stays out).
type CheckInput struct {
	// Redriven are event ids the ledger has confirmed, from any DLQ (an
	// event redriven from another DLQ was redriven all the same); the value
	// says where and by which plan, for the detail.
	Redriven map[string]string
	// Committed answers the system of record per idempotency key; nil when
	// the policy has none. SORErr is set when it could not be asked.
	Committed map[string]bool
	SORErr    error
	HasSOR    bool
	// AllowHazards includes ordering hazards (still reported).
	AllowHazards bool
}

// MakePlan selects messages and runs the checks. Pure: now, author and the
// check answers are arguments.
func MakePlan(msgs []Message, sel Selection, pol redrive.PolicySnapshot, in CheckInput, now time.Time) (Plan, error) {
	if sel.Empty() {
		return Plan{}, errors.New("selection: say what to redrive (--class, --event-id, --reason, --original-queue, or --all); a plan never means everything implicitly")
	}
	p := Plan{Version: 1, Kind: PlanKind, Selection: sel, Target: TargetExchange, Policy: pol, CreatedAt: now.UTC()}
	max := pol.MaxRedrives
	if max <= 0 {
		max = redrive.DefaultMaxRedrives
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		if !sel.Matches(m) {
			continue
		}
		sum := sha256.Sum256(m.Body)
		r := PlanRecord{
			Position: m.Position, EventID: m.EventID, EventIDSource: m.EventIDSource, IdempotencyKey: m.IdempotencyKey,
			Class: m.Class, OriginalQueue: m.Death.OriginalQueue(), DeathReason: m.Death.Reason(),
			BodySHA256: hex.EncodeToString(sum[:]), Digest: m.Digest, PriorRedrives: m.PriorRedrives,
			Verdict: redrive.Verdict{Included: true},
		}
		x, k, ok := m.Death.Target()
		r.Exchange, r.RoutingKey = x, k
		exclude := func(reason redrive.Reason, f string, a ...any) {
			r.Verdict = redrive.Verdict{Included: false, Reason: reason, Detail: fmt.Sprintf(f, a...)}
		}
		switch {
		case !ok:
			exclude(redrive.ReasonCheckFailed, "no x-death routing: the original exchange and routing key are unknown")
		case redrivenBefore(in.Redriven, m.EventID):
			exclude(redrive.ReasonAlreadyRedriven, "the ledger has event %s confirmed: %s", m.EventID, in.Redriven[m.EventID])
		case pol.RequireIdempotencyKey && m.IdempotencyKey == "":
			exclude(redrive.ReasonMissingKey, "policy requires %s", pol.IdempotencyKey)
		case in.HasSOR && m.IdempotencyKey == "":
			// The system of record cannot be asked without a key: never
			// read as "not applied".
			exclude(redrive.ReasonMissingKey, "no idempotency key (%s) to ask the system of record with", fieldName(pol.IdempotencyKey))
		case in.HasSOR && in.SORErr != nil:
			exclude(redrive.ReasonCheckFailed, "system of record: %v", in.SORErr)
		case in.HasSOR && !answered(in.Committed, m.IdempotencyKey):
			exclude(redrive.ReasonCheckFailed, "system of record: no answer for %s", m.IdempotencyKey)
		case in.HasSOR && in.Committed[m.IdempotencyKey]:
			exclude(redrive.ReasonEffectCommitted, "the system of record has %s (its effect already committed)", m.IdempotencyKey)
		case m.PriorRedrives >= max:
			exclude(redrive.ReasonLoopLimit, "redriven %d times before (limit %d)", m.PriorRedrives, max)
		case seen[m.EventID]:
			exclude(redrive.ReasonDuplicate, "event %s is already in this plan", m.EventID)
		}
		if r.Included {
			seen[m.EventID] = true
		}
		r.OrderingKey = m.OrderingKey
		p.Records = append(p.Records, r)
	}
	p.AllowHazards = in.AllowHazards
	CheckOrdering(msgs, p.Records, in.AllowHazards)
	return p, nil
}

func redrivenBefore(m map[string]string, id string) bool { _, ok := m[id]; return ok }

func answered(m map[string]bool, key string) bool { _, ok := m[key]; return ok }

// CheckOrdering is the ordering check for queues, by the policy's business
// key (ordering_key). Records are redriven in DLQ order, so within the
// selection messages of one key keep their order. Two cases break it:
//   - an older message of the same key stays behind in the DLQ (not
//     selected, or excluded for a reason that leaves it undelivered): the
//     redriven message would overtake it, and it would arrive later, behind
//     a newer event;
//   - within the plan, a message's publisher timestamp is older than that
//     of a same-key message ahead of it in the DLQ (it died later): it
//     would arrive behind the newer event.
//
// Such a record is an ordering_hazard: excluded, or included and still
// reported when allow is set. Excluding it leaves it behind too, so later
// messages of its key become hazards in turn (a plan never mixes a key's
// messages out of order). Messages without the key are not checked.
func CheckOrdering(msgs []Message, recs []PlanRecord, allow bool) {
	inPlan := map[int]*PlanRecord{}
	for i := range recs {
		inPlan[recs[i].Position] = &recs[i]
	}
	ordered := append([]Message(nil), msgs...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Position < ordered[j].Position })
	// behind: per key, the first position of a message that stays in the
	// DLQ undelivered; newest: per key, the sent message with the newest
	// publisher timestamp so far.
	behind := map[string]int{}
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
			if r == nil || staysBehind(r.Reason) {
				if _, ok := behind[k]; !ok {
					behind[k] = m.Position
				}
			}
			continue
		}
		hazard := func(pos int, why string) {
			p := pos
			r.HazardPosition = &p
			r.Detail = why
			if !allow {
				r.Included, r.Reason = false, redrive.ReasonOrderingHazard
				if _, ok := behind[k]; !ok {
					behind[k] = m.Position
				}
			}
		}
		if pos, ok := behind[k]; ok {
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

// staysBehind reports whether an excluded record remains in the DLQ
// undelivered (as opposed to delivered already, or settled in the system
// of record).
func staysBehind(r redrive.Reason) bool {
	switch r {
	case redrive.ReasonAlreadyRedriven, redrive.ReasonDuplicate, redrive.ReasonEffectCommitted:
		return false
	}
	return true
}

// Blocked reports whether a check could not run for some record: the plan
// cannot execute until it is made again (as for Kafka plans).
func (p Plan) Blocked() (bool, string) {
	for _, r := range p.Records {
		if r.Reason == redrive.ReasonCheckFailed {
			return true, fmt.Sprintf("record at position %d (event %s): %s", r.Position, r.EventID, r.Detail)
		}
	}
	return false, ""
}

// Canonical is the plan's canonical encoding (struct field order, UTC
// times, records by position).
func (p Plan) Canonical() ([]byte, error) {
	q := p
	q.CreatedAt = q.CreatedAt.UTC()
	q.Records = append([]PlanRecord(nil), p.Records...)
	sort.SliceStable(q.Records, func(i, j int) bool { return q.Records[i].Position < q.Records[j].Position })
	return redrive.CanonicalJSON(q)
}

// Hash is the plan's identity: hex SHA-256 of a domain prefix and the
// canonical encoding. Any change to the plan changes it.
func (p Plan) Hash() string {
	c, err := p.Canonical()
	if err != nil {
		panic(fmt.Sprintf("rabbitmq: plan does not encode: %v", err))
	}
	return redrive.DomainHash(planHashDomain, c)
}

// Subject is what a signature over the plan covers: its hash and its
// cluster.
func (p Plan) Subject() approval.Subject {
	return approval.Subject{PlanHash: p.Hash(), Cluster: p.Cluster}
}

// Included returns the included records by event id.
func (p Plan) Included() map[string]PlanRecord {
	out := map[string]PlanRecord{}
	for _, r := range p.Records {
		if r.Included {
			out[r.EventID] = r
		}
	}
	return out
}

// Totals counts the plan's records by verdict and class, as Kafka plans do.
func (p Plan) Totals() redrive.Totals {
	t := redrive.Totals{Selected: len(p.Records), ByReason: map[redrive.Reason]int{}, ByClass: map[string]redrive.ClassCount{}}
	for _, r := range redrive.Reasons {
		t.ByReason[r] = 0
	}
	for _, r := range p.Records {
		c := t.ByClass[r.Class]
		c.Selected++
		if r.Included {
			t.Included++
			c.Included++
		} else {
			t.Excluded++
			t.ByReason[r.Reason]++
		}
		t.ByClass[r.Class] = c
	}
	return t
}

// WritePlan writes a plan file (indented JSON, its hash alongside).
func WritePlan(path string, p Plan) error {
	b, err := json.MarshalIndent(planFile{Hash: p.Hash(), Plan: p}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ErrPlanEdited means a plan file's content does not hash to the hash it
// carries (edited after it was made; its approvals would not cover it).
//
// It is the same sentinel as redrive.ErrHashMismatch (errors.Is matches
// either) with the message RabbitMQ users already see.
var ErrPlanEdited = redrive.PlanEditedError("content does not match its hash (edited?)")

// ReadPlan reads a plan file and checks its hash: a plan edited by hand
// is refused (its approvals would not cover it).
func ReadPlan(path string) (Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s: %w", path, errors.Unwrap(err))
	}
	var f planFile
	if err := json.Unmarshal(b, &f); err != nil {
		return Plan{}, fmt.Errorf("plan %s: not a plan file: %w", path, err)
	}
	if f.Plan.Kind != PlanKind {
		return Plan{}, fmt.Errorf("plan %s: not a RabbitMQ plan (kind %q)", path, f.Plan.Kind)
	}
	if h := f.Plan.Hash(); h != f.Hash {
		return Plan{}, fmt.Errorf("plan %s: %w: %s != %s", path, ErrPlanEdited, short(h), short(f.Hash))
	}
	return f.Plan, nil
}

type planFile struct {
	Hash string `json:"hash"`
	Plan Plan   `json:"plan"`
}
