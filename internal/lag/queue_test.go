package lag

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
)

func i64(v int64) *int64        { return &v }
func f64(v float64) *float64    { return &v }
func intp(v int) *int           { return &v }
func tp(t time.Time) *time.Time { return &t }

func TestEvaluateQueue(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	slo := time.Minute
	cases := []struct {
		name      string
		q         backends.Queue
		status    QueueStatus
		age       *float64
		source    string
		eta       *float64
		breach    bool
		clockSkew bool
	}{
		{
			name:   "classic with head timestamp: age from publisher timestamp",
			q:      backends.Queue{Type: "classic", Ready: i64(10), Unacked: i64(0), Consumers: intp(1), PublishRate: f64(1), AckRate: f64(1), HeadPublisherTimestamp: tp(now.Add(-90 * time.Second))},
			status: QueueOK, age: f64(90), source: AgePublisherTimestamp, breach: true,
		},
		{
			name:   "quorum never uses a head timestamp: estimate from depth and drain",
			q:      backends.Queue{Type: "quorum", Ready: i64(100), Unacked: i64(0), Consumers: intp(2), PublishRate: f64(5), AckRate: f64(10), HeadPublisherTimestamp: tp(now.Add(-time.Hour))},
			status: QueueDraining, age: f64(10), source: AgeEstimate, eta: f64(20),
		},
		{
			name:   "quorum without drain: age unknown, not zero",
			q:      backends.Queue{Type: "quorum", Ready: i64(100), Unacked: i64(0), Consumers: intp(0), PublishRate: f64(5)},
			status: QueueStalled,
		},
		{
			name:   "messages and no consumers is stalled",
			q:      backends.Queue{Type: "classic", Ready: i64(3), Unacked: i64(0), Consumers: intp(0), PublishRate: f64(0), AckRate: f64(0)},
			status: QueueStalled,
		},
		{
			name:   "consumers that never ack are stalled",
			q:      backends.Queue{Type: "classic", Ready: i64(3), Unacked: i64(5), Consumers: intp(2), PublishRate: f64(2), AckRate: f64(0)},
			status: QueueStalled,
		},
		{
			name:   "publishing faster than draining is growing",
			q:      backends.Queue{Type: "classic", Ready: i64(50), Unacked: i64(10), Consumers: intp(2), PublishRate: f64(20), AckRate: f64(10)},
			status: QueueGrowing, age: f64(5), source: AgeEstimate,
		},
		{
			name:   "auto-ack deliveries count as drain",
			q:      backends.Queue{Type: "classic", Ready: i64(40), Unacked: i64(0), Consumers: intp(1), PublishRate: f64(0), AckRate: f64(0), NoAckRate: f64(20)},
			status: QueueDraining, age: f64(2), source: AgeEstimate, eta: f64(2),
		},
		{
			name:   "empty queue: age 0, ok",
			q:      backends.Queue{Type: "classic", Ready: i64(0), Unacked: i64(0), Consumers: intp(0)},
			status: QueueOK, age: f64(0), source: AgeEmpty,
		},
		{
			name:   "reduced mode: ready messages and no consumers is stalled (unacked unknown)",
			q:      backends.Queue{Ready: i64(12), Consumers: intp(0), Source: "passive_declare"},
			status: QueueStalled,
		},
		{
			name:   "reduced mode: ready messages with a consumer: status unknown, OK",
			q:      backends.Queue{Ready: i64(12), Consumers: intp(1), Source: "passive_declare"},
			status: QueueOK,
		},
		{
			name:   "head timestamp known before the counts, no consumers: stalled",
			q:      backends.Queue{Type: "classic", Consumers: intp(0), HeadPublisherTimestamp: tp(now.Add(-10 * time.Minute))},
			status: QueueStalled, age: f64(600), source: AgePublisherTimestamp, breach: true,
		},
		{
			name:   "no statistics yet: unknown age, not zero",
			q:      backends.Queue{Type: "classic"},
			status: QueueOK,
		},
		{
			name:   "future publisher timestamp reads 0 with clock skew",
			q:      backends.Queue{Type: "classic", Ready: i64(1), Unacked: i64(0), Consumers: intp(1), PublishRate: f64(1), AckRate: f64(1), HeadPublisherTimestamp: tp(now.Add(time.Minute))},
			status: QueueOK, age: f64(0), source: AgePublisherTimestamp, clockSkew: true,
		},
		{
			name:   "stream: no age, ok",
			q:      backends.Queue{Type: "stream", Messages: i64(1000), Ready: i64(1000), Unacked: i64(0), Consumers: intp(0)},
			status: QueueOK,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := EvaluateQueue(c.q, now, slo)
			if got.Status != c.status {
				t.Errorf("status %s (%s), want %s", got.Status, got.Reason, c.status)
			}
			checkF(t, "age", got.AgeSeconds(), c.age)
			checkF(t, "eta", got.ETASeconds(), c.eta)
			if got.AgeSource != c.source {
				t.Errorf("age source %q, want %q", got.AgeSource, c.source)
			}
			if got.Breach != c.breach {
				t.Errorf("breach %v, want %v", got.Breach, c.breach)
			}
			if got.ClockSkew != c.clockSkew {
				t.Errorf("clock skew %v, want %v", got.ClockSkew, c.clockSkew)
			}
		})
	}
}

func checkF(t *testing.T, what string, got, want *float64) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", what, fmtF(got), fmtF(want))
	case *got-*want > 0.001 || *want-*got > 0.001:
		t.Errorf("%s = %v, want %v", what, *got, *want)
	}
}

func fmtF(p *float64) any {
	if p == nil {
		return "unknown"
	}
	return *p
}

// A dead-letter queue holds messages nobody consumes, and that is its job:
// the same queue that would read STALLED and in breach as a work queue reads
// as what it holds, never STALLED, never in breach.
func TestDeadLetterQueueIsNeverStalled(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	held := backends.Queue{Type: "classic", Ready: i64(40), Unacked: i64(0), Consumers: intp(0), PublishRate: f64(0), AckRate: f64(0), HeadPublisherTimestamp: tp(now.Add(-2 * time.Hour))}
	if w := EvaluateQueue(held, now, time.Minute); w.Status != QueueStalled || !w.Breach {
		t.Fatalf("as a work queue: %s breach %v", w.Status, w.Breach)
	}
	notYet := held
	notYet.HeadPublisherTimestamp = nil
	cases := []struct {
		name   string
		q      backends.Queue
		status QueueStatus
		age    *float64
		source string
	}{
		{"holding, oldest from the head's timestamp", held, QueueDLQHolding, f64(7200), AgePublisherTimestamp},
		// The management API reports the counts before the head's
		// timestamp: the age is said to be unknown, never left blank
		// as if the queue were empty or its messages fresh.
		{"holding, head timestamp not reported yet", notYet, QueueDLQHolding, nil, AgeUnknown},
		{"receiving now", backends.Queue{Type: "quorum", Ready: i64(3), Unacked: i64(0), Consumers: intp(0), PublishRate: f64(2.5), HeadPublisherTimestamp: tp(now.Add(-time.Hour))}, QueueDLQReceiving, nil, AgeUnknown},
		{"empty", backends.Queue{Type: "classic", Ready: i64(0), Unacked: i64(0), Consumers: intp(0), PublishRate: f64(0)}, QueueDLQEmpty, f64(0), AgeEmpty},
		{"statistics not produced yet", backends.Queue{Type: "classic"}, QueueDLQHolding, nil, AgeUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := EvaluateDeadLetterQueue(c.q, now)
			if l.Status != c.status || l.Breach || l.Status == QueueStalled || !l.Status.DeadLetter() {
				t.Fatalf("status %s breach %v (%s)", l.Status, l.Breach, l.Reason)
			}
			got := l.AgeSeconds()
			if (got == nil) != (c.age == nil) || (got != nil && *got != *c.age) {
				t.Fatalf("age %v, want %v", got, c.age)
			}
			if l.AgeSource != c.source {
				t.Errorf("age source %q, want %q (%s)", l.AgeSource, c.source, l.Reason)
			}
			if c.source == AgeUnknown && !strings.Contains(l.Reason, "age unknown") {
				t.Errorf("reason %q does not say the oldest's age is unknown", l.Reason)
			}
		})
	}
}
