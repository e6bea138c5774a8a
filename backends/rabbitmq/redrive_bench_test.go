package rabbitmq

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-dev/berth/redrive"
)

// BenchmarkRedrive measures executing a plan against the real RabbitMQ,
// with the SQLite ledger: window=1 waits for each confirm (the baseline),
// window=500 pipelines confirms. The msgs/s metric is the figure to
// compare; filling the DLQ and planning are not timed.
//
//	go test ./backends/rabbitmq -run '^$' -bench Redrive -benchtime 3x
func BenchmarkRedrive(b *testing.B) {
	for _, bc := range []struct {
		name   string
		window int
		n      int
	}{{"window=1", 1, 1000}, {"window=500", 500, 20000}} {
		b.Run(bc.name, func(b *testing.B) {
			conn := needRabbit(b)
			needManagement(b)
			c := testClient(b, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL(), Timeout: 30 * time.Second})
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dlq, work := uniq(b, "dlq"), uniq(b, "work")
				declareQueue(b, conn, dlq, nil)
				declareQueue(b, conn, work, nil)
				ids := fillDLQ(b, conn, dlq, work, bc.n)
				l, err := OpenLedger(context.Background(), filepath.Join(b.TempDir(), "l.db"))
				if err != nil {
					b.Fatal(err)
				}
				// The plan is built from what fillDLQ published rather than by
				// browsing: a browse of 20,000 persistent messages makes a
				// 3.10 classic queue process busy requeueing for minutes.
				p := syntheticPlan(c, dlq, work, ids)
				start := time.Now()
				b.StartTimer()
				res, err := c.Execute(context.Background(), p, l, ExecOptions{Window: bc.window})
				b.StopTimer()
				total += time.Since(start)
				if err != nil || res.Sent != bc.n {
					b.Fatalf("sent %d of %d: %v", res.Sent, bc.n, err)
				}
				l.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(bc.n*b.N)/total.Seconds(), "msgs/s")
		})
	}
}

// syntheticPlan is the plan a browse of fillDLQ's messages would produce.
func syntheticPlan(c *Client, dlq, work string, ids []string) Plan {
	var msgs []Message
	for i, id := range ids {
		m := Message{Position: i, EventID: id, EventIDSource: "message_id",
			Death: DeathInfo{Deaths: []Death{{Count: 1, Reason: ReasonRejected, Queue: work, RoutingKeys: []string{work}}}}}
		m.Class = ClassOf(m).ID
		msgs = append(msgs, m)
	}
	p, _ := MakePlan(msgs, Selection{All: true}, redrive.PolicySnapshot{}, CheckInput{}, time.Now())
	p.Server, p.Vhost, p.DLQ, p.QueueType = c.AMQPAddr(), c.Vhost(), dlq, "classic"
	return p
}
