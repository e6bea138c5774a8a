package rabbitmq

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/redrive"
)

func orderedMsg(pos int, id, key string, ts time.Time) Message {
	m := Message{Position: pos, EventID: id, OrderingKey: key, Timestamp: &ts,
		Death: DeathInfo{Deaths: []Death{{Count: 1, Reason: "rejected", Queue: "q", Exchange: "x", RoutingKeys: []string{"k"}}}}}
	m.Class = ClassOf(m).ID
	return m
}

func verdictsOf(p Plan) string {
	var out []string
	for _, r := range p.Records {
		v := "in"
		if !r.Included {
			v = string(r.Reason)
		} else if r.HazardPosition != nil {
			v = fmt.Sprintf("in!%d", *r.HazardPosition)
		}
		out = append(out, r.EventID+":"+v)
	}
	return strings.Join(out, " ")
}

// Ordering by business key: a message overtaking an older same-key message
// left in the DLQ, or published before a same-key message ahead of it, is a
// hazard; excluding one leaves it behind, so its key's later messages
// follow; a key whose older message was already redriven is no hazard.
func TestCheckOrdering(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	msgs := []Message{
		orderedMsg(0, "a0", "A", t0),                    // not selected: stays behind
		orderedMsg(1, "a1", "A", t0.Add(time.Second)),   // overtakes a0
		orderedMsg(2, "a2", "A", t0.Add(2*time.Second)), // a1 stays behind too
		orderedMsg(3, "b0", "B", t0.Add(5*time.Second)),
		orderedMsg(4, "b1", "B", t0.Add(3*time.Second)), // published before b0
		orderedMsg(5, "c0", "C", t0),                    // already redriven: delivered
		orderedMsg(6, "c1", "C", t0.Add(time.Second)),
		orderedMsg(7, "n0", "", t0), // no key: not checked
	}
	sel := Selection{EventIDs: []string{"a1", "a2", "b0", "b1", "c0", "c1", "n0"}}
	in := CheckInput{Redriven: map[string]string{"c0": "earlier plan"}}
	p, err := MakePlan(msgs, sel, redrive.PolicySnapshot{}, in, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := verdictsOf(p), "a1:ordering_hazard a2:ordering_hazard b0:in b1:ordering_hazard c0:already_redriven c1:in n0:in"; got != want {
		t.Errorf("strict\n got %s\nwant %s", got, want)
	}
	in.AllowHazards = true
	p, _ = MakePlan(msgs, sel, redrive.PolicySnapshot{}, in, t0)
	if got, want := verdictsOf(p), "a1:in!0 a2:in!0 b0:in b1:in!3 c0:already_redriven c1:in n0:in"; got != want {
		t.Errorf("allowed\n got %s\nwant %s", got, want)
	}
	if !p.AllowHazards {
		t.Error("the plan does not record that hazards were allowed")
	}
}

// The system-of-record check never reads silence as "not applied": a
// record with no key to ask with is excluded, and a key the system of
// record did not answer for blocks the plan.
func TestPlanSystemOfRecordNeedsAnAnswer(t *testing.T) {
	a := orderedMsg(0, "a", "", time.Unix(0, 0))
	a.IdempotencyKey = "ka"
	b := orderedMsg(1, "b", "", time.Unix(0, 0))
	p, err := MakePlan([]Message{a, b}, Selection{All: true}, redrive.PolicySnapshot{}, CheckInput{HasSOR: true, Committed: map[string]bool{}}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := verdictsOf(p); got != "a:check_failed b:missing_idempotency_key" {
		t.Errorf("got %s", got)
	}
	if blocked, _ := p.Blocked(); !blocked {
		t.Error("a plan with check_failed must be blocked")
	}
}

// Execution refuses an auto-delete DLQ: its consumer leaving would make
// RabbitMQ delete it with every message not redriven.
func TestExecuteRefusesAutoDeleteDLQ(t *testing.T) {
	conn := needRabbit(t)
	needManagement(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	dlq := uniq(t, "dlq")
	if _, err := ch.QueueDeclare(dlq, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.QueueDelete(dlq, false, false, false) })
	for i := 0; i < 2; i++ {
		if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: fmt.Sprint("m", i), Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	p := Plan{Kind: PlanKind, Vhost: c.Vhost(), DLQ: dlq, QueueType: "classic", Records: []PlanRecord{{EventID: "m0", Exchange: "", RoutingKey: dlq, Verdict: redrive.Verdict{Included: true}}}}
	_, err = c.Execute(context.Background(), p, sqliteLedger(t), ExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "auto-delete") {
		t.Fatalf("err %v; want a refusal naming auto-delete", err)
	}
	if q, err := ch.QueueDeclarePassive(dlq, false, true, false, false, nil); err != nil || q.Messages != 2 {
		t.Errorf("the DLQ must be untouched: %v %+v", err, q)
	}
}
