package tui

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/tui/styles"
)

// bigQueueSnapshot is a RabbitMQ server with n queues of every kind.
func bigQueueSnapshot(n int) *monitor.Snapshot {
	s := rabbitSnapshot(1)
	r := *s.RabbitMQ
	r.Queues = nil
	for i := 0; i < n; i++ {
		q := backends.Queue{Name: fmt.Sprintf("jobs-%05d", i), Vhost: "/", Type: "classic", Source: "management",
			Ready: i64(int64(i % 500)), Unacked: i64(int64(i % 7)), Consumers: intp(i % 3),
			PublishRate: f64(float64(i % 11)), AckRate: f64(float64(i % 13)), DeliverRate: f64(1)}
		if i%5 == 0 {
			q.HeadPublisherTimestamp = tsp(fixtureNow.Add(-time.Duration(i) * time.Second))
		}
		if i%7 == 0 {
			q.Type, q.HeadPublisherTimestamp = "quorum", nil
		}
		r.Queues = append(r.Queues, monitor.QueueState{Queue: q, Lag: lag.EvaluateQueue(q, fixtureNow, 5*time.Minute)})
	}
	s.RabbitMQ = &r
	return s
}

// BenchmarkQueues measures the queues page on 10,000 queues at 200x50:
// building, filtering and sorting the rows (what runs in a tea.Cmd after
// each refresh) and rendering one frame (what a key press costs). The
// Kafka group page's rows for 10,000 partitions are the baseline in the
// same run.
//
//	go test ./tui/ -run '^$' -bench 'Queues' -benchmem
func BenchmarkQueues(b *testing.B) {
	const n = 10000
	qs := bigQueueSnapshot(n)
	b.Run("rows-10k-queues", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if len(queueRows(qs)) != n {
				b.Fatal("rows")
			}
		}
	})
	ks := bigSnapshot(n)
	gp := newGroup(PageEnv{Args: []string{"big-group"}, Styles: styles.New(), Actions: actionsFor}).(*groupPage)
	b.Run("baseline-rows-10k-partitions", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if len(gp.partitionRows(ks)) != n {
				b.Fatal("rows")
			}
		}
	})
	b.Run("frame-200x50", func(b *testing.B) {
		m, _ := newRabbitModel(b, 200, 50, func(int) *monitor.Snapshot { return qs })
		press(m, "c")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			press(m, "j")
			_ = m.View()
		}
	})
}
