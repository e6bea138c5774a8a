package lag

import (
	"strconv"
	"strings"
	"time"
)

// Event-time freshness (Decision 17): beside the ingest age (the record's
// timestamp), topics configured with an event-time field give the age of
// the oldest unprocessed record's event, when it happened at the source. It
// includes upstream delay (an outbox that sat backed up) and depends on the
// producer's clock, so an event time ahead of now by more than the rule's
// margin is flagged as clock error rather than read as fresh. A record whose
// field is missing or unparsable is counted, never guessed.

// EventState says what the event-time probe found at the position.
type EventState uint8

const (
	// EventNone: the topic has no event-time rule, or nothing to read.
	EventNone EventState = iota
	// EventFound: the field held a time.
	EventFound
	// EventMissing: the record has no such field (or it is empty).
	EventMissing
	// EventUnparsable: the field is neither RFC 3339 nor epoch millis.
	EventUnparsable
	// EventUnread: the record could not be read (an error; see warnings).
	EventUnread
)

var eventStateNames = [...]string{"", "found", "missing", "unparsable", "unread"}

func (s EventState) String() string {
	if int(s) < len(eventStateNames) {
		return eventStateNames[s]
	}
	return "unknown"
}

// EventProbe is the event time read at a partition's position.
type EventProbe struct {
	// Rule is set when the topic has an event-time rule.
	Rule  bool
	State EventState
	Time  time.Time
	// Margin is the rule's clock margin.
	Margin time.Duration
}

// ParseEventTime reads an RFC 3339 time (fractional seconds allowed) or
// epoch milliseconds (an integer).
func ParseEventTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// eventAge fills r's event-time fields from the probe at now.
func eventAge(r *PartitionLag, p EventProbe, now time.Time) {
	if !p.Rule {
		return
	}
	r.EventRule = true
	if r.Lag == 0 {
		r.EventAgeKnown = true // nothing unprocessed: fresh
		return
	}
	r.EventState = p.State
	if p.State != EventFound {
		return
	}
	r.EventAgeKnown = true
	r.EventAge = now.Sub(p.Time)
	if r.EventAge < 0 {
		r.EventClockError = -r.EventAge > p.Margin
		r.EventAge = 0
	}
}
