package rabbitmq

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
)

// A classic queue reports its head message's publisher timestamp: the age
// is measured from the first message's timestamp, even when later messages
// are newer. A quorum queue reports none, and Berth invents none.
func TestHeadAgeFromPublisherTimestamp(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	classic, quorum := uniq(t, "classic"), uniq(t, "quorum")
	declareQueue(t, conn, classic, nil)
	declareQueue(t, conn, quorum, amqp.Table{"x-queue-type": "quorum"})

	now := time.Now().Truncate(time.Second)
	head := now.Add(-150 * time.Second)
	var msgs []amqp.Publishing
	for i, ts := range []time.Time{head, now.Add(-30 * time.Second), now.Add(-5 * time.Second)} {
		msgs = append(msgs, amqp.Publishing{Timestamp: ts, Body: []byte{byte('a' + i)}})
	}
	publishConfirmed(t, conn, "", classic, msgs...)
	publishConfirmed(t, conn, "", quorum, msgs...)

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	var cq, qq backends.Queue
	eventually(t, 20*time.Second, "management statistics for both queues", func() bool {
		var err error
		if cq, err = c.Queue(context.Background(), "/", classic); err != nil {
			t.Fatal(err)
		}
		if qq, err = c.Queue(context.Background(), "/", quorum); err != nil {
			t.Fatal(err)
		}
		return cq.HeadPublisherTimestamp != nil && cq.Ready != nil && *cq.Ready == 3 &&
			qq.Ready != nil && *qq.Ready == 3
	})
	if !cq.HeadPublisherTimestamp.Equal(head) {
		t.Errorf("classic head timestamp %s, want the first message's %s", cq.HeadPublisherTimestamp, head)
	}
	at := now.Add(10 * time.Second)
	l := lag.EvaluateQueue(cq, at, time.Minute)
	if l.AgeSource != lag.AgePublisherTimestamp || l.Age == nil || *l.Age != 160*time.Second {
		t.Errorf("classic age %v from %q, want 160s from the publisher timestamp", l.Age, l.AgeSource)
	}
	if !l.Breach || l.Status != lag.QueueStalled {
		t.Errorf("classic: breach %v status %s; want a breach of the 1m SLO and STALLED (no consumers)", l.Breach, l.Status)
	}
	if qq.Type != backends.QueueQuorum || qq.HeadPublisherTimestamp != nil {
		t.Errorf("quorum queue: type %q head %v; want quorum with no head timestamp", qq.Type, qq.HeadPublisherTimestamp)
	}
	ql := lag.EvaluateQueue(qq, at, time.Minute)
	if ql.Age != nil || ql.AgeSource != "" {
		t.Errorf("quorum age %v (%q): with no consumers and no drain rate the age must be unknown", *ql.Age, ql.AgeSource)
	}
}

// Wiring comes from arguments and policies; for numeric limits the lower
// value applies, for the dead-letter exchange the argument wins.
func TestWiringFromArgumentsAndPolicy(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	name := uniq(t, "wired")
	declareQueue(t, conn, name, amqp.Table{
		"x-dead-letter-exchange":    "dlx.arg",
		"x-dead-letter-routing-key": "dead.key",
		"x-message-ttl":             int32(60000),
		"x-max-length":              int32(1000),
	})
	pol := uniq(t, "pol")
	mgmtDo(t, http.MethodPut, "/api/policies/%2F/"+pol, map[string]any{
		"pattern": "^" + strings.ReplaceAll(name, ".", `\.`) + "$", "apply-to": "queues", "priority": 10,
		"definition": map[string]any{"max-length": 10, "message-ttl": 120000, "dead-letter-exchange": "dlx.policy", "overflow": "reject-publish"},
	})
	t.Cleanup(func() { mgmtDo(t, http.MethodDelete, "/api/policies/%2F/"+pol, nil) })

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	var q backends.Queue
	eventually(t, 20*time.Second, "the policy to apply", func() bool {
		var err error
		q, err = c.Queue(context.Background(), "/", name)
		if err != nil {
			t.Fatal(err)
		}
		return q.Policy == pol
	})
	w := q.Wiring
	check := func(what string, got any, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("dead-letter exchange", *w.DeadLetterExchange, "dlx.arg")
	check("dead-letter exchange from", w.From["dead_letter_exchange"], "argument")
	check("dead-letter routing key", *w.DeadLetterRoutingKey, "dead.key")
	check("max length (policy lower)", *w.MaxLength, int64(10))
	check("max length from", w.From["max_length"], "policy")
	check("ttl (argument lower)", *w.MessageTTLMs, int64(60000))
	check("overflow", *w.Overflow, "reject-publish")
	if w.DeliveryLimit != nil {
		t.Errorf("delivery limit %d on a queue without one", *w.DeliveryLimit)
	}
}

// Without the management API the client still lists configured queues by
// passive declare, and says what it cannot show.
func TestReducedModeWithoutManagementAPI(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	name, missing := uniq(t, "q"), uniq(t, "missing")
	declareQueue(t, conn, name, nil)
	publishConfirmed(t, conn, "", name, amqp.Publishing{Body: []byte("1")}, amqp.Publishing{Body: []byte("2")})

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: "http://127.0.0.1:1", Queues: []string{name, missing}})
	reduced, why := c.Reduced()
	if !reduced || why == nil || !strings.Contains(why.Error(), "127.0.0.1:1") {
		t.Fatalf("reduced=%v why=%v; want reduced mode naming the management address", reduced, why)
	}
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if inv.Mode != ModeReduced || len(inv.Missing) == 0 {
		t.Fatalf("mode %q missing %v; want reduced mode listing what is missing", inv.Mode, inv.Missing)
	}
	if len(inv.Queues) != 1 || inv.Queues[0].Name != name {
		t.Fatalf("queues %+v; want only %s", inv.Queues, name)
	}
	q := inv.Queues[0]
	if q.Ready == nil || *q.Ready != 2 || q.Consumers == nil || *q.Consumers != 0 {
		t.Errorf("ready %v consumers %v; want 2 and 0", q.Ready, q.Consumers)
	}
	if q.Unacked != nil || q.PublishRate != nil || q.Type != "" {
		t.Errorf("reduced mode must leave unacked, rates and type unknown: %+v", q)
	}
	if len(inv.Warnings) != 1 || !strings.Contains(inv.Warnings[0], missing) {
		t.Errorf("warnings %v; want one naming the missing queue", inv.Warnings)
	}
}

// A server that accepts connections and never answers times out with the
// address in the message; credentials never appear in errors.
func TestTimeoutsNameTheAddress(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)
	for _, o := range []Options{
		{AMQPURL: "amqp://berth:s3cret-pw@" + addr + "/"},
		{ManagementURL: "http://berth:s3cret-pw@" + addr},
	} {
		o.Timeout = 300 * time.Millisecond
		start := time.Now()
		_, err := Dial(context.Background(), o)
		if err == nil {
			t.Fatalf("%+v: dial succeeded against a silent server", o)
		}
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("error %q does not name %s", err, addr)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("error %q leaks the password", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("took %s to give up; the timeout is 300ms", took)
		}
	}
}

func TestBadPasswordIsNotPrinted(t *testing.T) {
	t.Parallel()
	needRabbit(t)
	u := strings.Replace(amqpURL(), "guest:guest", "guest:wrong-pw-123", 1)
	if u == amqpURL() {
		t.Skip("BERTH_TEST_AMQP_URL has no guest:guest to alter")
	}
	_, err := Dial(context.Background(), Options{AMQPURL: u, Timeout: 5 * time.Second})
	if err == nil || strings.Contains(err.Error(), "wrong-pw-123") || !strings.Contains(err.Error(), "authentication") {
		t.Fatalf("error %v: want an authentication failure without the password", err)
	}
}

// A management API that accepts connections and never answers leaves the
// client in reduced mode over AMQP within the operation's budget, its
// reason naming the management address, and time left to list the
// configured queues. Before, the management API's wait used the whole
// budget and the command failed with "rabbitmq amqp ...: no time left to
// connect", naming the server that was fine.
func TestSilentManagementAPIFallsBackToReducedModeWithinTheBudget(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	name := uniq(t, "q")
	declareQueue(t, conn, name, nil)
	addr := silentListener(t)
	o := Options{AMQPURL: amqpURL(), ManagementURL: "http://guest:guest@" + addr, Timeout: time.Second, Queues: []string{name}}
	// The command line's budget: one --timeout for the whole operation.
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	c, err := Dial(ctx, o)
	if err != nil {
		t.Fatalf("dial with a silent management API: %v; want reduced mode over AMQP", err)
	}
	defer c.Close()
	if reduced, why := c.Reduced(); !reduced || why == nil || !strings.Contains(why.Error(), addr) {
		t.Errorf("reduced %v, reason %v; want reduced mode naming %s", reduced, why, addr)
	}
	if inv, err := c.Inventory(ctx); err != nil || len(inv.Queues) != 1 {
		t.Errorf("inventory in the same budget: %v %+v; want %s by passive declare", err, inv, name)
	}
}
