package rabbitmq

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

// Before it reads anything, execution hands its Admission what the
// management API says about the DLQ (internal/actions refuses an auto-delete
// DLQ: its consumer leaving would make RabbitMQ delete it with every message
// not redriven); a refusal leaves the DLQ untouched.
func TestExecuteGivesTheAdmissionTheDLQsFacts(t *testing.T) {
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
	p := redrive.QueuePlan{Vhost: c.Vhost(), DLQ: dlq, QueueType: "classic", Records: []redrive.QueueRecord{{EventID: "m0", Exchange: "", RoutingKey: dlq, Verdict: redrive.Verdict{Included: true}}}}
	var facts backends.Queue
	_, err = c.Execute(context.Background(), p, sqliteLedger(t), ExecOptions{Admission: refuseRun{got: &facts}})
	if err == nil || !strings.Contains(err.Error(), "refused by the test's admission") {
		t.Fatalf("err %v; want the admission's refusal", err)
	}
	if !facts.AutoDelete || facts.Type != backends.QueueClassic {
		t.Errorf("the admission was told %+v; want an auto-delete classic queue", facts)
	}
	if q, err := ch.QueueDeclarePassive(dlq, false, true, false, false, nil); err != nil || q.Messages != 2 {
		t.Errorf("the DLQ must be untouched: %v %+v", err, q)
	}
}

// orderAdmission is the ordering half of internal/actions' admission: what
// the run passes over stays behind; recheck stands for the checks run again.
type orderAdmission struct {
	noPolicy
	order   *redrive.QueueOrdering
	recheck map[string]redrive.Verdict
	allow   bool
}

func (a *orderAdmission) PassedOver(m redrive.QueueMessage) {
	a.order.StaysBehind(m.OrderingKey, m.Position)
}

func (a *orderAdmission) Admit(_ context.Context, msgs []redrive.QueueMessage) (map[string]redrive.Verdict, error) {
	return a.order.Admit(msgs, a.recheck, a.allow), nil
}

// Ordering is checked again as the run consumes the DLQ (it was not, before
// plan format v2): the run tells its Admission every message it passes over
// and asks before each chunk, with each message's place in the order read,
// so when an older message of the same ordering key stays in the DLQ —
// skipped by the checks run again at execute, or before the run — the newer
// one is skipped as ordering_hazard and stays too, unless hazards are
// allowed. Another key is not held up.
func TestExecuteRechecksOrderingAsItConsumes(t *testing.T) {
	t.Parallel()
	loop := redrive.Verdict{Reason: redrive.ReasonLoopLimit, Detail: "limit 1 today"}
	for _, tc := range []struct {
		name    string
		allow   bool
		skip    map[string]redrive.Verdict // before the run
		recheck map[string]redrive.Verdict // as consumed
		sent    string
		hazard  bool
	}{
		{name: "recheck skips the older", recheck: map[string]redrive.Verdict{"m0": loop}, sent: "[m2]", hazard: true},
		{name: "preflight skips the older", skip: map[string]redrive.Verdict{"m0": loop}, sent: "[m2]", hazard: true},
		{name: "hazards allowed", allow: true, skip: map[string]redrive.Verdict{"m0": loop}, sent: "[m1 m2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := needRabbit(t)
			needManagement(t)
			tp := newTopology(t, conn, nil, nil)
			msgs := workMessages(3)
			for i, key := range []string{"ord-1", "ord-1", "ord-2"} {
				msgs[i].Headers["order"] = key
			}
			publishConfirmed(t, conn, tp.workX, tp.key, msgs...)
			kill(t, conn, tp.work, 3)
			eventually(t, 10*time.Second, "3 dead letters", func() bool { return readyCount(t, conn, tp.dlq) == 3 })
			c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
			pol := redrive.PolicySnapshot{OrderingKey: "header:order"}
			res, err := c.Browse(context.Background(), tp.dlq, BrowseOptions{Limit: 10, Extractors: Extractors{OrderingKey: pol.OrderingKey}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := redrive.MakeQueuePlan(FactsOf(res.Messages), redrive.QueueSelection{All: true}, pol, redrive.QueueCheckInput{AllowHazards: tc.allow}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			p.Cluster, p.Vhost, p.DLQ, p.QueueType = c.ClusterName(), c.Vhost(), tp.dlq, res.Type
			if p.Totals().Included != 3 {
				t.Fatalf("the plan includes %d, want all 3 (no hazard when it was made)", p.Totals().Included)
			}
			o := ExecOptions{Skip: tc.skip, Admission: &orderAdmission{order: redrive.NewQueueOrdering(), recheck: tc.recheck, allow: tc.allow}}
			r, err := c.Execute(context.Background(), p, sqliteLedger(t), o)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(sortedIDs(drain(t, conn, tp.work))); got != tc.sent {
				t.Errorf("sent %s, want %s", got, tc.sent)
			}
			var hazard *Skip
			for i := range r.Skipped {
				if r.Skipped[i].EventID == "m1" {
					hazard = &r.Skipped[i]
				}
			}
			if tc.hazard && (hazard == nil || hazard.Reason != redrive.ReasonOrderingHazard || !strings.Contains(hazard.Detail, "ord-1")) {
				t.Errorf("skipped %+v, want m1 as ordering_hazard naming its key", r.Skipped)
			}
			if !tc.hazard && hazard != nil {
				t.Errorf("hazards allowed, yet m1 was skipped: %+v", hazard)
			}
			want := 3 - len(strings.Fields(strings.Trim(tc.sent, "[]")))
			eventually(t, 10*time.Second, "the rest back in the DLQ", func() bool { return readyCount(t, conn, tp.dlq) == want })
		})
	}
}
