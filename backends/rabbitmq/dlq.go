package rabbitmq

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/redrive"
)

// Message is one dead-lettered message as Berth shows it: plain data (no
// amqp091 type), unsanitised: the display layer sanitises every string.
type Message struct {
	// Position is the message's 0-based place in the queue when browsed.
	Position      int        `json:"position"`
	MessageID     string     `json:"message_id,omitempty"`
	CorrelationID string     `json:"correlation_id,omitempty"`
	ContentType   string     `json:"content_type,omitempty"`
	Type          string     `json:"type,omitempty"`
	AppID         string     `json:"app_id,omitempty"`
	Timestamp     *time.Time `json:"publisher_timestamp"`
	// Headers are the application and RabbitMQ headers, rendered as text.
	Headers     map[string]string `json:"headers,omitempty"`
	Body        []byte            `json:"body"`
	Redelivered bool              `json:"redelivered"`
	Death       DeathInfo         `json:"death"`
	// EventID is the stable id a redrive publishes as message_id: the
	// message's own message_id, else the configured field, else a hash of
	// the message (EventIDSource says which).
	EventID       string `json:"event_id"`
	EventIDSource string `json:"event_id_source"`
	// IdempotencyKey is the configured idempotency field's value ("" when
	// absent), used by the system-of-record check.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// ErrorHeader is the configured application error header's value.
	ErrorHeader string `json:"error,omitempty"`
	// OrderingKey is the business key named by the policy's ordering_key
	// ("" when none is configured or the message lacks it).
	OrderingKey string `json:"ordering_key,omitempty"`
	// PriorRedrives is Berth's redrive attempt header (0 when never).
	PriorRedrives int    `json:"prior_redrives"`
	Class         string `json:"class"`
	// Digest pins the message's content (ContentDigest): a plan approves
	// it, and execution sends only a message whose digest still matches.
	Digest string `json:"digest"`
}

// Berth's redrive headers on every message it redrives.
const (
	HeaderPlan    = "berth-redrive-plan"
	HeaderOrigin  = "berth-redrive-origin"
	HeaderAttempt = "berth-redrive-attempt"
)

// Extractors say where a message's ids and error text live.
type Extractors struct {
	// IdempotencyKey is header:NAME or json:FIELD (default json:eventId).
	IdempotencyKey string
	// ErrorHeader names an application header with the failure's text.
	ErrorHeader string
	// OrderingKey is header:NAME or json:FIELD: the business key whose
	// messages must keep their order (none when empty).
	OrderingKey string
}

// ToMessage converts a delivery into a Message.
func ToMessage(pos int, d amqp.Delivery, x Extractors) Message {
	m := deriveMessage(pos, d, x)
	if len(d.Headers) > 0 {
		m.Headers = make(map[string]string, len(d.Headers))
		for k := range d.Headers {
			m.Headers[k] = HeaderString(d.Headers, k)
		}
	}
	return m
}

// deriveMessage is ToMessage without the headers rendered as text: what a
// redrive run needs of each message it consumes (its facts and digest).
// Rendering x-death's tables as text was a fifth of deriving a message.
func deriveMessage(pos int, d amqp.Delivery, x Extractors) Message {
	m := Message{
		Position: pos, MessageID: d.MessageId, CorrelationID: d.CorrelationId,
		ContentType: d.ContentType, Type: d.Type, AppID: d.AppId,
		Body: d.Body, Redelivered: d.Redelivered,
		Death: ParseDeath(d.Headers), Digest: ContentDigest(d),
	}
	if !d.Timestamp.IsZero() {
		t := d.Timestamp.UTC()
		m.Timestamp = &t
	}
	if x.ErrorHeader != "" {
		m.ErrorHeader = HeaderString(d.Headers, x.ErrorHeader)
	}
	if n, ok := asInt(d.Headers[HeaderAttempt]); ok {
		m.PriorRedrives = int(n)
	}
	m.IdempotencyKey = fieldValue(x.IdempotencyKey, d.Headers, d.Body)
	if x.OrderingKey != "" {
		m.OrderingKey = fieldValue(x.OrderingKey, d.Headers, d.Body)
	}
	switch {
	case d.MessageId != "":
		m.EventID, m.EventIDSource = d.MessageId, "message_id"
	case m.IdempotencyKey != "":
		m.EventID, m.EventIDSource = m.IdempotencyKey, fieldName(x.IdempotencyKey)
	default:
		m.EventID, m.EventIDSource = derivedID(d, m.Death), "derived"
	}
	if m.IdempotencyKey == "" && x.IdempotencyKey == "" {
		m.IdempotencyKey = d.MessageId
	}
	m.Class = ClassOf(m).ID
	return m
}

func fieldName(s string) string {
	if s == "" {
		return redrive.DefaultEventID
	}
	return s
}

// fieldValue reads header:NAME or json:FIELD from a message.
func fieldValue(spec string, headers amqp.Table, body []byte) string {
	f, err := redrive.ParseField(spec)
	if err != nil {
		return ""
	}
	var hs []redrive.Header
	if f.Kind == "header" {
		if v := HeaderString(headers, f.Name); v != "" {
			hs = append(hs, redrive.Header{Key: f.Name, Value: []byte(v)})
		}
	}
	v, _ := f.Extract(hs, body)
	return v
}

// derivedID is a stable id for a message with no id of its own: a hash of
// what RabbitMQ never changes about it (its body, publisher timestamp and
// first death). The same message gets the same id on every browse, so the
// ledger recognises it after a crash.
func derivedID(d amqp.Delivery, di DeathInfo) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00", di.FirstDeathQueue, di.FirstDeathReason, d.CorrelationId, d.Timestamp.Unix())
	if n := len(di.Deaths); n > 0 && di.Deaths[n-1].Time != nil {
		fmt.Fprintf(h, "%d", di.Deaths[n-1].Time.Unix())
	}
	h.Write([]byte{0})
	h.Write(d.Body)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// ClassOf is a message's failure class: original queue, death reason and
// the application error text (normalised: numbers and ids replaced), with
// the same stable id scheme as Kafka classes.
func ClassOf(m Message) redrive.Class {
	return redrive.ClassOf(m.Death.OriginalQueue(), m.Death.Reason(), redrive.Normalise(m.ErrorHeader))
}

// JudgeClass is m's class with the rules' verdict on its death reason and
// error header, as a tally judges a class on its first message.
func JudgeClass(m Message, rules redrive.Rules) redrive.Class {
	cl := ClassOf(m)
	cl.Verdict, cl.Rule = rules.Judge(m.Death.Reason(), m.ErrorHeader)
	cl.Transient = cl.Verdict == redrive.VerdictTransient
	return cl
}

// Classes groups messages into failure classes, largest first. Seen times
// are death times (the most recent death of each message).
func Classes(msgs []Message, rules redrive.Rules) []redrive.Class {
	t := NewClassTally(rules)
	for _, m := range msgs {
		t.Add(m)
	}
	return t.Classes()
}

// OldestDeath is the earliest most-recent-death time among msgs (the DLQ's
// oldest age is now minus it), nil when none says.
func OldestDeath(msgs []Message) *time.Time {
	t := NewClassTally(redrive.Rules{})
	for _, m := range msgs {
		t.Add(m)
	}
	return t.OldestDeath()
}

// ClassTally counts messages into classes one at a time, keeping per class
// only its counts and times: `dlq classes` reads a DLQ of any size
// without holding its messages.
type ClassTally struct {
	rules  redrive.Rules
	by     map[string]*redrive.Class
	oldest *time.Time
}

// NewClassTally is an empty tally judged by rules.
func NewClassTally(rules redrive.Rules) *ClassTally {
	return &ClassTally{rules: rules, by: map[string]*redrive.Class{}}
}

// Add counts m.
func (t *ClassTally) Add(m Message) {
	c, ok := t.by[m.Class]
	if !ok {
		cl := JudgeClass(m, t.rules)
		c = &cl
		t.by[m.Class] = c
	}
	c.Count++
	if l := m.Death.Last(); l != nil && l.Time != nil {
		if c.FirstSeen.IsZero() || l.Time.Before(c.FirstSeen) {
			c.FirstSeen = *l.Time
		}
		if l.Time.After(c.LastSeen) {
			c.LastSeen = *l.Time
		}
		if t.oldest == nil || l.Time.Before(*t.oldest) {
			at := *l.Time
			t.oldest = &at
		}
	}
}

// Classes are the classes counted, largest first.
func (t *ClassTally) Classes() []redrive.Class {
	out := make([]redrive.Class, 0, len(t.by))
	for _, c := range t.by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// OldestDeath is OldestDeath of the messages counted.
func (t *ClassTally) OldestDeath() *time.Time { return t.oldest }
