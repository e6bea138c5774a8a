package lag

// Queue status and age (RabbitMQ), kept apart from the Kafka engine: a queue
// has no offsets, only a depth, the management API's smoothed rates and, on
// classic queues, the head message's publisher timestamp.
//
// Definitions:
//   - depth = ready + unacked; drain rate = acks + no-ack deliveries per second.
//   - age: now - head message's publisher timestamp (classic queues that
//     report it); otherwise an estimated wait = ready / drain rate, labelled
//     "estimate"; unknown (nil) when neither exists. An empty queue has age 0.
//     Quorum queues never report a head timestamp on 3.10: their age is an
//     estimate or unknown, never invented.
//   - STALLED: messages but no consumers, or consumers that acknowledge
//     nothing (drain rate 0 with messages waiting).
//   - GROWING: publish rate above drain rate with messages waiting.
//   - DRAINING: drain rate above publish rate with messages waiting.
//   - OK: empty, or balanced; also streams (a stream keeps its messages:
//     depth is retention, not backlog).
//   - ETA to drain = depth / (drain - publish) when draining.

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/backends"
)

// QueueStatus is a queue's status, ordered by severity.
type QueueStatus uint8

const (
	QueueOK QueueStatus = iota
	QueueDraining
	QueueGrowing
	QueueStalled
	// Dead-letter queues (EvaluateDeadLetterQueue) are not consumers'
	// queues: holding messages is what they are for. Their statuses say
	// what they hold, outside the severity scale above.
	QueueDLQEmpty     // no dead letters
	QueueDLQHolding   // dead letters waiting for review or redrive
	QueueDLQReceiving // dead letters arriving now
)

var queueStatusNames = [...]string{"OK", "DRAINING", "GROWING", "STALLED", "EMPTY", "HOLDING", "RECEIVING"}

// DeadLetter reports whether s is one of a dead-letter queue's statuses.
func (s QueueStatus) DeadLetter() bool { return s >= QueueDLQEmpty }

func (s QueueStatus) String() string {
	if int(s) < len(queueStatusNames) {
		return queueStatusNames[s]
	}
	return fmt.Sprintf("QueueStatus(%d)", s)
}

// MarshalText writes the status name.
func (s QueueStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Age sources.
const (
	AgePublisherTimestamp = "publisher_timestamp"
	AgeEstimate           = "estimate"
	AgeEmpty              = "empty"
	// AgeUnknown: a dead-letter queue holds (or may hold) messages whose
	// oldest age is not known: the management API has not reported the
	// head message's timestamp yet, or never does (quorum queues, a head
	// message without a timestamp property). It is said, so an unknown
	// age never reads as an empty or fresh queue.
	AgeUnknown = "unknown"
)

// QueueLag is a queue's computed status, age and ETA at one moment.
type QueueLag struct {
	Status QueueStatus `json:"status"`
	// Reason says in words why the status was chosen.
	Reason string `json:"reason"`
	// Age is nil when unknown; AgeSource says where it came from.
	Age       *time.Duration `json:"-"`
	AgeSource string         `json:"age_source"`
	// ClockSkew: the publisher timestamp lies in the future (age reads 0).
	ClockSkew bool `json:"clock_skew"`
	// EstimatedWait is ready / drain rate: how long a message published now
	// would wait (an estimate, nil when the drain rate is unknown or 0).
	EstimatedWait *time.Duration `json:"-"`
	// ETA is the time to drain at current rates (nil unless draining).
	ETA *time.Duration `json:"-"`
	SLO time.Duration  `json:"-"`
	// Breach: the age (of either source) exceeds the SLO.
	Breach bool `json:"breach"`
}

// AgeSeconds is the age in seconds, nil when unknown.
func (l QueueLag) AgeSeconds() *float64 { return seconds(l.Age) }

// ETASeconds is the ETA in seconds, nil when unknown.
func (l QueueLag) ETASeconds() *float64 { return seconds(l.ETA) }

// EstimatedWaitSeconds is the estimated wait in seconds, nil when unknown.
func (l QueueLag) EstimatedWaitSeconds() *float64 { return seconds(l.EstimatedWait) }

func seconds(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	s := d.Seconds()
	return &s
}

// EvaluateQueue computes q's status, age and ETA at now against slo.
func EvaluateQueue(q backends.Queue, now time.Time, slo time.Duration) QueueLag {
	out := QueueLag{SLO: slo}
	depth, depthKnown := q.Total()
	ready := depth
	if q.Ready != nil {
		ready = *q.Ready
	}
	drain, drainKnown := q.DrainRate()
	publish, publishKnown := 0.0, q.PublishRate != nil
	if publishKnown {
		publish = *q.PublishRate
	}

	if drainKnown && drain > 0 && ready > 0 {
		w := time.Duration(float64(ready) / drain * float64(time.Second))
		out.EstimatedWait = &w
	}

	// Age.
	switch {
	case q.Type == backends.QueueStream:
		// A stream's messages are never "waiting": no age.
	case depthKnown && depth == 0:
		zero := time.Duration(0)
		out.Age, out.AgeSource = &zero, AgeEmpty
	case q.HeadPublisherTimestamp != nil && q.Type != backends.QueueQuorum:
		a := now.Sub(*q.HeadPublisherTimestamp)
		if a < 0 {
			a, out.ClockSkew = 0, true
		}
		out.Age, out.AgeSource = &a, AgePublisherTimestamp
	case out.EstimatedWait != nil:
		w := *out.EstimatedWait
		out.Age, out.AgeSource = &w, AgeEstimate
	}
	if out.Age != nil && slo > 0 && *out.Age > slo {
		out.Breach = true
	}

	// Status.
	consumers := -1
	if q.Consumers != nil {
		consumers = *q.Consumers
	}
	switch {
	case q.Type == backends.QueueStream:
		out.Status, out.Reason = QueueOK, "stream: messages are kept by retention, not consumed"
	case !depthKnown && q.Ready != nil && *q.Ready > 0 && consumers == 0:
		// Reduced mode (passive declare): ready and consumers are known,
		// unacked is not; messages nobody will take are stalled anyway.
		out.Status, out.Reason = QueueStalled, fmt.Sprintf("%d messages ready and no consumers", *q.Ready)
	case !depthKnown && out.AgeSource == AgePublisherTimestamp && consumers == 0:
		// The head message's timestamp is known, so a message is there,
		// and nobody consumes: stalled, whatever the counts say later.
		out.Status, out.Reason = QueueStalled, "messages waiting and no consumers (depth not produced yet)"
	case !depthKnown:
		out.Status, out.Reason = QueueOK, "depth unknown (statistics not produced yet)"
	case depth == 0:
		out.Status, out.Reason = QueueOK, "empty"
	case consumers == 0:
		out.Status, out.Reason = QueueStalled, fmt.Sprintf("%d messages and no consumers", depth)
	case drainKnown && drain == 0:
		out.Status, out.Reason = QueueStalled, "messages waiting and no acknowledgements"
	case !drainKnown || !publishKnown:
		out.Status, out.Reason = QueueOK, "rates unknown (statistics not produced yet)"
	case publish > drain:
		out.Status, out.Reason = QueueGrowing, fmt.Sprintf("publish %.1f/s > drain %.1f/s", publish, drain)
	case drain > publish:
		out.Status, out.Reason = QueueDraining, fmt.Sprintf("drain %.1f/s > publish %.1f/s", drain, publish)
		eta := time.Duration(float64(depth) / (drain - publish) * float64(time.Second))
		out.ETA = &eta
	default:
		out.Status, out.Reason = QueueOK, "balanced"
	}
	return out
}

// EvaluateDeadLetterQueue judges a queue that receives dead letters. Its
// messages are failures kept for review or redrive and nobody consumes
// them, which is its normal state: it is never STALLED and never in breach
// of an SLO for holding messages. It reads EMPTY, HOLDING (depth, and the
// oldest message's age when its publisher timestamp is known) or RECEIVING
// (dead letters arriving now: a publish rate above 0).
func EvaluateDeadLetterQueue(q backends.Queue, now time.Time) QueueLag {
	var out QueueLag
	depth, depthKnown := q.Total()
	if q.HeadPublisherTimestamp != nil && q.Type != backends.QueueQuorum && (!depthKnown || depth > 0) {
		a := now.Sub(*q.HeadPublisherTimestamp)
		if a < 0 {
			a, out.ClockSkew = 0, true
		}
		out.Age, out.AgeSource = &a, AgePublisherTimestamp
	}
	switch {
	case q.PublishRate != nil && *q.PublishRate > 0:
		out.Status, out.Reason = QueueDLQReceiving, fmt.Sprintf("dead letters arriving at %.1f/s", *q.PublishRate)
	case !depthKnown:
		out.Status, out.Reason = QueueDLQHolding, "dead-letter queue (depth not produced yet)"
	case depth == 0:
		zero := time.Duration(0)
		out.Status, out.Reason, out.Age, out.AgeSource = QueueDLQEmpty, "no dead letters", &zero, AgeEmpty
	default:
		out.Status, out.Reason = QueueDLQHolding, fmt.Sprintf("%d dead letters held for review or redrive", depth)
	}
	if out.Age == nil {
		out.AgeSource = AgeUnknown
		if q.Type == backends.QueueQuorum {
			out.Reason += "; oldest's age unknown (a quorum queue reports no head timestamp)"
		} else {
			out.Reason += "; oldest's age unknown (head timestamp not reported yet, or the head message carries none)"
		}
	}
	return out
}
