package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/redrive"
)

// Finding 3 of issue 13: execute matched DLQ messages by message_id only,
// so a different body published into the DLQ with an approved message's id
// was redriven under the approved plan. Execute must compare each
// message's content digest with the plan's, send nothing that differs, and
// report it.
func TestExecuteRefusesAMessageWhoseContentChanged(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn, nil, nil)
	publishConfirmed(t, conn, tp.workX, tp.key, workMessages(2)...)
	kill(t, conn, tp.work, 2)
	eventually(t, 10*time.Second, "2 dead letters", func() bool { return readyCount(t, conn, tp.dlq) == 2 })

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	l := sqliteLedger(t)
	p := planFor(t, c, tp.dlq, redrive.QueueSelection{EventIDs: []string{"m1"}}, l)
	if n := len(p.Included()); n != 1 {
		t.Fatalf("plan includes %d, want 1", n)
	}

	// After approval, someone takes the real m1 out of the DLQ and puts a
	// forged message there: same message_id and x-death, another body.
	// Messages gotten before m1 stay unacked and return in place when the
	// channel closes.
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var real amqp.Delivery
	for real.MessageId != "m1" {
		d, ok, err := ch.Get(tp.dlq, false)
		if err != nil || !ok {
			t.Fatalf("m1 not found in the DLQ: %v", err)
		}
		real = d
	}
	if err := real.Ack(false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	forged := amqp.Publishing{MessageId: real.MessageId, Timestamp: real.Timestamp, Headers: real.Headers,
		Body: []byte(`{"eventId":"e1","n":1,"amount":999999}`)}
	publishConfirmed(t, conn, "", tp.dlq, forged)
	eventually(t, 10*time.Second, "the forged message in the DLQ", func() bool { return readyCount(t, conn, tp.dlq) == 2 })

	res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 {
		t.Errorf("sent %d: the forged message went out under the approved plan", res.Sent)
	}
	if got := drain(t, conn, tp.work); len(got) != 0 {
		t.Errorf("the work queue received %d message(s), first body %s", len(got), got[0].Body)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].EventID != "m1" || res.Skipped[0].Reason != ReasonContentChanged {
		t.Errorf("skipped %+v, want m1 reported as %s", res.Skipped, ReasonContentChanged)
	}
	if len(res.NotFound) != 0 {
		t.Errorf("not found %v: a changed message is reported as changed, not missing", res.NotFound)
	}
	// Nothing is lost: both messages are still in the DLQ.
	eventually(t, 10*time.Second, "both messages back in the DLQ", func() bool { return readyCount(t, conn, tp.dlq) == 2 })
}

func TestContentDigestPinsEverythingButTheDeliveryCount(t *testing.T) {
	base := func() amqp.Delivery {
		return amqp.Delivery{MessageId: "m1", ContentType: "application/json", Timestamp: time.Unix(1_700_000_000, 0),
			Headers: amqp.Table{"n": int32(7), "x-delivery-count": int64(0), "x-death": []any{amqp.Table{"queue": "work", "count": int64(1)}}},
			Body:    []byte(`{"eventId":"e1"}`)}
	}
	want := ContentDigest(base())
	same := base()
	same.Headers["x-delivery-count"] = int64(3) // a quorum queue's redelivery
	same.Redelivered = true
	if got := ContentDigest(same); got != want {
		t.Errorf("a redelivery changed the digest")
	}
	changes := map[string]func(d *amqp.Delivery){
		"body":                 func(d *amqp.Delivery) { d.Body = []byte(`{"eventId":"e1" }`) },
		"header value":         func(d *amqp.Delivery) { d.Headers["n"] = int32(8) },
		"header type":          func(d *amqp.Delivery) { d.Headers["n"] = int64(7) },
		"header added":         func(d *amqp.Delivery) { d.Headers["extra"] = "" },
		"x-death":              func(d *amqp.Delivery) { d.Headers["x-death"] = []any{amqp.Table{"queue": "work", "count": int64(2)}} },
		"property":             func(d *amqp.Delivery) { d.ContentType = "text/plain" },
		"timestamp":            func(d *amqp.Delivery) { d.Timestamp = d.Timestamp.Add(time.Second) },
		"body moved to header": func(d *amqp.Delivery) { d.Body = nil; d.Headers["b"] = []byte(`{"eventId":"e1"}`) },
	}
	for name, change := range changes {
		d := base()
		change(&d)
		if ContentDigest(d) == want {
			t.Errorf("%s: changed without changing the digest", name)
		}
	}
}

// Findings 1 and 2 of issue 13 on RabbitMQ: a plan's author can edit their
// own plan file (its hash is an unkeyed SHA-256 they can recompute) and
// sign it: change a record's target, or its idempotency key so that the
// system-of-record check asks about another payment. The message's content
// digest still matches, but what execution judges and sends must be derived
// from the message itself: the run hands its Admission (internal/actions,
// which skips a target the message does not derive to as derived_mismatch)
// the target and key the consumed message derives to, whatever the plan in
// memory says, and a message the Admission excludes is not sent, stays in
// the DLQ and is reported with the Admission's reason.
func TestExecuteDerivesTargetAndKeyFromTheMessage(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	tp := newTopology(t, conn, nil, nil)
	elsewhere := uniq(t, "elsewhere")
	declareQueue(t, conn, elsewhere, nil)
	publishConfirmed(t, conn, tp.workX, tp.key, workMessages(3)...)
	kill(t, conn, tp.work, 3)
	eventually(t, 10*time.Second, "3 dead letters", func() bool { return readyCount(t, conn, tp.dlq) == 3 })

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	l := sqliteLedger(t)
	p := planFor(t, c, tp.dlq, redrive.QueueSelection{All: true}, l)
	var m2Key string
	for i := range p.Records {
		r := &p.Records[i]
		switch r.EventID {
		case "m1": // finding 2: another target, never shown as such at review
			r.Exchange, r.RoutingKey = "", elsewhere
		case "m2": // finding 1: another idempotency key (an invisible character):
			// a v2 plan holds no key, and execute derives it from the message
			m2Key = r.IdempotencyKey
			r.IdempotencyKey += "\u200b"
		}
	}
	const why redrive.Reason = "excluded_by_admission"
	adm := &excludeAdmission{exclude: map[string]redrive.Verdict{"m1": {Reason: why}}, asked: map[string]redrive.QueueMessage{}}
	res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: adm})
	if err != nil {
		t.Fatal(err)
	}
	if m := adm.asked["m1"]; m.Exchange != tp.workX || m.RoutingKey != tp.key || !m.Routed {
		t.Errorf("the admission was told m1 goes to exchange %q key %q (routed %v), want the message's dead-lettering: %q %q", m.Exchange, m.RoutingKey, m.Routed, tp.workX, tp.key)
	}
	if m := adm.asked["m2"]; m2Key == "" || m.IdempotencyKey != m2Key {
		t.Errorf("the admission was told m2's key is %q, want the message's %q", m.IdempotencyKey, m2Key)
	}
	if n := readyCount(t, conn, elsewhere); n != 0 {
		t.Errorf("%d message(s) went to the edited target", n)
	}
	got := drain(t, conn, tp.work)
	if fmt.Sprint(sortedIDs(got)) != "[m0 m2]" {
		t.Errorf("the work queue received %v, want m0 and m2 (whose key is the message's, whatever the plan in memory said)", sortedIDs(got))
	}
	for _, d := range got {
		if d.MessageId == "m2" && d.Headers[HeaderAttempt] != int64(1) {
			t.Errorf("m2 was sent with attempt %v, want 1 (derived from the message)", d.Headers[HeaderAttempt])
		}
	}
	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.EventID] = string(s.Reason)
	}
	if len(skipped) != 1 || skipped["m1"] != string(why) {
		t.Errorf("skipped %+v, want m1 as %s", res.Skipped, why)
	}
	eventually(t, 10*time.Second, "m1 back in the DLQ", func() bool { return readyCount(t, conn, tp.dlq) == 1 })
}

// An edited plan file is refused with a typed error the CLI audits as a
// refusal (it matched the error's text before).
func TestReadPlanRefusesAnEditedFileWithATypedError(t *testing.T) {
	m := Message{Position: 0, EventID: "m0", Digest: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", Death: DeathInfo{Deaths: []Death{{Queue: "q", Reason: "rejected", RoutingKeys: []string{"q"}}}}}
	p, err := redrive.MakeQueuePlan([]redrive.QueueMessage{m.Facts()}, redrive.QueueSelection{All: true}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster = "rabbit@test"
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := WritePlan(path, p); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlan(path); err != nil {
		t.Fatalf("an intact plan: %v", err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"0:m0"`, `"0:m9"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlan(path); !errors.Is(err, ErrPlanEdited) {
		t.Fatalf("an edited plan: %v, want ErrPlanEdited", err)
	}
}
