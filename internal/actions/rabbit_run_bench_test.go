package actions

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/rabbittest"
	"github.com/berth-dev/berth/redrive"
)

// BenchmarkRabbitRedrive measures the run loop executing a plan against the
// real RabbitMQ, with the SQLite ledger: window=1 waits for each confirm
// (the baseline), window=500 pipelines confirms. The msgs/s metric is the figure to
// compare; filling the DLQ and planning are not timed.
//
//	go test ./internal/actions -run '^$' -bench RabbitRedrive -benchtime 3x
func BenchmarkRabbitRedrive(b *testing.B) {
	for _, bc := range []struct {
		name   string
		window int
		n      int
	}{{"window=1", 1, 1000}, {"window=500", 500, 20000}} {
		b.Run(bc.name, func(b *testing.B) {
			conn := rabbittest.Need(b)
			rabbittest.NeedManagement(b)
			c := rabbitClient(b, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL(), Timeout: 30 * time.Second})
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dlq, work := rabbittest.Uniq(b, "dlq"), rabbittest.Uniq(b, "work")
				rabbittest.DeclareQueue(b, conn, dlq, nil)
				rabbittest.DeclareQueue(b, conn, work, nil)
				msgs := deadLetters(work, bc.n)
				for start := 0; start < bc.n; start += 1000 {
					rabbittest.PublishConfirmed(b, conn, "", dlq, msgs[start:min(start+1000, bc.n)]...)
				}
				l, err := rabbitmq.OpenLedger(context.Background(), filepath.Join(b.TempDir(), "l.db"))
				if err != nil {
					b.Fatal(err)
				}
				// The plan is built from what fillDLQ published rather than by
				// browsing: a browse of 20,000 persistent messages makes a
				// 3.10 classic queue process busy requeueing for minutes.
				p := syntheticPlan(c, dlq, msgs)
				start := time.Now()
				b.StartTimer()
				res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: bc.window})
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

// syntheticPlan is the plan a browse of the published messages would
// produce: each becomes the delivery a browse returns (content digests
// and derived fields included, so execution sends every one).
func syntheticPlan(c *rabbitmq.Client, dlq string, pubs []amqp.Publishing) redrive.QueuePlan {
	var msgs []rabbitmq.Message
	for i, m := range pubs {
		d := amqp.Delivery{MessageId: m.MessageId, DeliveryMode: m.DeliveryMode, Headers: m.Headers, Body: m.Body}
		msgs = append(msgs, rabbitmq.ToMessage(i, d, rabbitmq.Extractors{}))
	}
	p, _ := redrive.MakeQueuePlan(rabbitmq.FactsOf(msgs), redrive.QueueSelection{All: true}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	p.Vhost, p.DLQ, p.QueueType = c.Vhost(), dlq, "classic"
	return p
}
