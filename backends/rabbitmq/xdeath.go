package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Dead-lettering headers as RabbitMQ 3.10 writes them (see the probe in
// shared/reference/rabbitmq.md): x-death is an array of tables, most recent
// death first, one entry per (queue, reason) with a count; x-first-death-*
// keep the first; quorum queues add x-delivery-count to every delivery.
// There are no x-last-death-* headers on 3.10. Parsing is pure and
// defensive: headers come from publishers and may hold anything.

// Death reasons.
const (
	ReasonRejected      = "rejected"
	ReasonExpired       = "expired"
	ReasonMaxLen        = "maxlen"
	ReasonDeliveryLimit = "delivery_limit"
)

// Death is one x-death entry.
type Death struct {
	Count       int64      `json:"count"`
	Reason      string     `json:"reason"`
	Queue       string     `json:"queue"`
	Exchange    string     `json:"exchange"`
	RoutingKeys []string   `json:"routing_keys"`
	Time        *time.Time `json:"time"`
	// OriginalExpiration is the per-message TTL the message had (expired).
	OriginalExpiration string `json:"original_expiration,omitempty"`
}

// DeathInfo is everything the dead-lettering headers say about a message.
type DeathInfo struct {
	// Deaths are the x-death entries, most recent first.
	Deaths             []Death `json:"deaths"`
	FirstDeathQueue    string  `json:"first_death_queue,omitempty"`
	FirstDeathReason   string  `json:"first_death_reason,omitempty"`
	FirstDeathExchange string  `json:"first_death_exchange,omitempty"`
	// DeliveryCount is quorum's x-delivery-count for this delivery (nil on
	// classic queues).
	DeliveryCount *int64 `json:"delivery_count"`
	// Malformed lists what could not be parsed (kept, never fatal).
	Malformed []string `json:"malformed,omitempty"`
}

// Dead reports whether the message carries any dead-lettering header.
func (d DeathInfo) Dead() bool { return len(d.Deaths) > 0 || d.FirstDeathQueue != "" }

// Last is the most recent death, nil when none.
func (d DeathInfo) Last() *Death {
	if len(d.Deaths) == 0 {
		return nil
	}
	return &d.Deaths[0]
}

// TotalDeaths sums every entry's count: how many times this message died.
func (d DeathInfo) TotalDeaths() int64 {
	var n int64
	for _, x := range d.Deaths {
		n += x.Count
	}
	return n
}

// OriginalQueue is the queue the message most recently died in (where a
// redrive sends it back), else the first death's.
func (d DeathInfo) OriginalQueue() string {
	if l := d.Last(); l != nil && l.Queue != "" {
		return l.Queue
	}
	return d.FirstDeathQueue
}

// Reason is the most recent death's reason, else the first death's.
func (d DeathInfo) Reason() string {
	if l := d.Last(); l != nil && l.Reason != "" {
		return l.Reason
	}
	return d.FirstDeathReason
}

// Target is where the message was published before its most recent death:
// that death's exchange and first routing key. ok is false when x-death
// does not say (the message cannot be redriven to its origin).
func (d DeathInfo) Target() (exchange, routingKey string, ok bool) {
	l := d.Last()
	if l == nil || len(l.RoutingKeys) == 0 {
		return "", "", false
	}
	return l.Exchange, l.RoutingKeys[0], true
}

// ParseDeath reads the dead-lettering headers of a message. headers is an
// AMQP table (amqp091's Table is a map[string]interface{}).
func ParseDeath(headers map[string]any) DeathInfo {
	var d DeathInfo
	if raw, ok := headers["x-death"]; ok {
		list, ok := raw.([]any)
		if !ok {
			d.Malformed = append(d.Malformed, fmt.Sprintf("x-death is %T, not an array", raw))
		}
		for i, e := range list {
			t, ok := asTable(e)
			if !ok {
				d.Malformed = append(d.Malformed, fmt.Sprintf("x-death[%d] is %T, not a table", i, e))
				continue
			}
			x := Death{Count: 1}
			if n, ok := asInt(t["count"]); ok {
				x.Count = n
			} else if _, has := t["count"]; has {
				d.Malformed = append(d.Malformed, fmt.Sprintf("x-death[%d].count is %T", i, t["count"]))
			}
			x.Reason = asString(t["reason"])
			if !reasonKnown(x.Reason) {
				d.Malformed = append(d.Malformed, fmt.Sprintf("x-death[%d].reason %q is not one RabbitMQ writes", i, x.Reason))
			}
			x.Queue = asString(t["queue"])
			x.Exchange = asString(t["exchange"])
			x.OriginalExpiration = asString(t["original-expiration"])
			switch rk := t["routing-keys"].(type) {
			case []any:
				for _, k := range rk {
					if s, ok := k.(string); ok {
						x.RoutingKeys = append(x.RoutingKeys, s)
					}
				}
			case []string:
				x.RoutingKeys = append(x.RoutingKeys, rk...)
			case nil:
			default:
				d.Malformed = append(d.Malformed, fmt.Sprintf("x-death[%d].routing-keys is %T", i, rk))
			}
			switch tm := t["time"].(type) {
			case time.Time:
				u := tm.UTC()
				x.Time = &u
			case nil:
			default:
				if n, ok := asInt(tm); ok {
					u := time.Unix(n, 0).UTC()
					x.Time = &u
				}
			}
			d.Deaths = append(d.Deaths, x)
		}
	}
	d.FirstDeathQueue = asString(headers["x-first-death-queue"])
	d.FirstDeathReason = asString(headers["x-first-death-reason"])
	d.FirstDeathExchange = asString(headers["x-first-death-exchange"])
	if n, ok := asInt(headers["x-delivery-count"]); ok {
		d.DeliveryCount = &n
	}
	return d
}

func asTable(v any) (map[string]any, bool) {
	switch t := v.(type) {
	case map[string]any:
		return t, true
	case amqp.Table:
		return t, true
	}
	return nil, false
}

func asString(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case []byte:
		return string(s)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// HeaderString renders an application header value for classes and
// display ("" when absent).
func HeaderString(headers map[string]any, name string) string {
	v, ok := headers[name]
	if !ok || v == nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

// DiagnosticHeaders are the headers RabbitMQ adds when it dead-letters or
// delivers from a quorum queue; a redrive drops x-delivery-count (it would
// pollute the next queue) and keeps x-death so the history continues.
var DiagnosticHeaders = []string{"x-delivery-count"}

// reasonKnown reports whether r is one of RabbitMQ's dead-letter reasons.
func reasonKnown(r string) bool {
	switch strings.ToLower(r) {
	case ReasonRejected, ReasonExpired, ReasonMaxLen, ReasonDeliveryLimit:
		return true
	}
	return false
}
