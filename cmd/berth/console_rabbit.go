package main

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/tui"
)

// The console on a RabbitMQ context: a tui.Source whose snapshots carry
// the queue inventory (monitor.Snapshot.RabbitMQ) instead of topics and
// groups. The TUI's queue pages render it; nothing AMQP-shaped reaches tui/.

func init() { consoleDialers["rabbitmq"] = dialRabbitConsole }

// dlqEvery is how often DLQ discovery (one bindings call per dead-letter
// exchange, plus an inventory) runs: wiring changes rarely, and a refresh
// every few seconds should not double the load on the management API.
const dlqEvery = 30 * time.Second

func dialRabbitConsole(a *app, ctx context.Context) (tui.Source, error) {
	cl, err := a.rabbitClient(ctx)
	if err != nil {
		return nil, err
	}
	cfg := a.cfg
	// The dead-letter pages run the CLI's RabbitMQ redrive functions with a
	// copy of this context's app (their notes are collected per call).
	dead := *a
	dead.stdout, dead.stderr, dead.closers = io.Discard, io.Discard, nil
	return &rabbitSource{
		app:      &dead,
		client:   cl,
		amqpAddr: cl.AMQPAddr(),
		mgmtAddr: config.RedactURL(a.ctx.ManagementURL),
		dlqPairs: cfg.Redrive.DLQs,
		slo: func(q string) time.Duration {
			_, slo := cfg.GroupPolicyFor(q)
			return slo
		},
	}, nil
}

// ReadOnly implements tui.ReadOnlySource: the server is one a read-only
// context names (by cluster name or address), whichever context reached it.
func (s *rabbitSource) ReadOnly() (bool, string) {
	return s.app.readOnlyReason != "", s.app.readOnlyReason
}

// rabbitSource refreshes a RabbitMQ context. Refresh runs in a tea.Cmd;
// the app never runs two at once, the mutex only guards the DLQ cache.
type rabbitSource struct {
	app                *app
	client             *rabbitmq.Client
	amqpAddr, mgmtAddr string
	dlqPairs           []config.DLQPair
	slo                func(queue string) time.Duration

	mu     sync.Mutex
	seq    int
	dlqs   []monitor.RabbitDLQ
	dlqErr string
	dlqAt  time.Time
}

func (s *rabbitSource) Refresh(ctx context.Context) (*tui.Snapshot, error) {
	qs, err := s.client.Snapshot(ctx, s.slo)
	if err != nil {
		return nil, err
	}
	r := &monitor.RabbitMQ{
		AMQPAddr: s.amqpAddr, ManagementAddr: s.mgmtAddr,
		Mode: qs.Mode, Missing: qs.Missing, Warnings: qs.Warnings,
	}
	if srv, err := s.client.Server(ctx); err == nil {
		r.ClusterName, r.Version = srv.ClusterName, srv.Version
		for _, n := range srv.Nodes {
			r.Nodes = append(r.Nodes, monitor.RabbitNode{Name: n.Name, Running: n.Running, MemAlarm: n.MemAlarm, DiskAlarm: n.DiskAlarm, Partitions: n.Partitions})
		}
	} else if !errors.Is(err, rabbitmq.ErrNoManagement) {
		r.NodesErr = err.Error()
	}
	r.DLQs, r.DLQErr = s.discoverDLQs(ctx, qs.Observed)

	dlqOf := map[string]monitor.RabbitDLQ{}
	for _, d := range r.DLQs {
		dlqOf[d.Vhost+"\x00"+d.Name] = d
	}
	r.Queues = make([]monitor.QueueState, len(qs.Queues))
	rows := make([]monitor.QueueLag, len(qs.Queues))
	for i, v := range qs.Queues {
		if _, ok := dlqOf[v.Queue.Vhost+"\x00"+v.Queue.Name]; ok {
			// Holding dead letters is a DLQ's job: never STALLED for it.
			v.Lag = lag.EvaluateDeadLetterQueue(v.Queue, qs.Observed)
		}
		st := monitor.QueueState{Queue: v.Queue, Lag: v.Lag}
		if d, ok := dlqOf[v.Queue.Vhost+"\x00"+v.Queue.Name]; ok {
			st.DeadLetters, st.DLQFound = d.Sources, d.Found
		}
		r.Queues[i] = st
		rows[i] = queueLagRow(v)
	}

	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()
	snap := &tui.Snapshot{Seq: seq, Observed: qs.Observed, RabbitMQ: r, Queues: rows}
	snap.Warnings = append(snap.Warnings, qs.Warnings...)
	return snap, nil
}

// discoverDLQs returns the DLQs, re-reading them every dlqEvery. A failed
// discovery keeps the last good list and says why.
func (s *rabbitSource) discoverDLQs(ctx context.Context, now time.Time) ([]monitor.RabbitDLQ, string) {
	s.mu.Lock()
	fresh := !s.dlqAt.IsZero() && now.Sub(s.dlqAt) < dlqEvery
	dlqs, why := s.dlqs, s.dlqErr
	s.mu.Unlock()
	if fresh {
		return dlqs, why
	}
	found, err := s.client.DLQs(ctx, s.dlqPairs)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dlqAt = now
	if err != nil {
		s.dlqErr = "DLQ discovery: " + err.Error()
		return s.dlqs, s.dlqErr
	}
	s.dlqs, s.dlqErr = nil, ""
	for _, d := range found {
		s.dlqs = append(s.dlqs, monitor.RabbitDLQ{Vhost: d.Vhost, Name: d.Name, Sources: d.Sources, Found: d.Found})
	}
	return s.dlqs, ""
}

// queueLagRow is the generic row (monitor.Snapshot.Queues) of a queue.
func queueLagRow(v rabbitmq.QueueStatus) monitor.QueueLag {
	q, l := v.Queue, v.Lag
	r := monitor.QueueLag{
		Queue: q.Name, Vhost: q.Vhost, Type: q.Type,
		AgeSeconds: l.AgeSeconds(), AgeSource: l.AgeSource,
		Status: l.Status.String(), SLOSeconds: l.SLO.Seconds(), Breach: l.Breach,
		// nil until RabbitMQ has produced the statistic: unknown, not 0
		Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers,
		Extra: map[string]any{"stats_known": q.Ready != nil && q.Unacked != nil && q.Consumers != nil},
	}
	return r
}

func (s *rabbitSource) Cluster() backends.Cluster { return rabbitCluster{s.client, s.app} }

func (s *rabbitSource) Close() { s.client.Close() }

// errNotKafka answers the Kafka-shaped calls a page might make on a
// RabbitMQ context (the console routes its Kafka pages elsewhere, but an
// action registered by another package must get an error, not a panic).
var errNotKafka = errors.New("this is a RabbitMQ context: Kafka topics, groups and offsets do not apply (see :queues)")

// rabbitCluster is the console's backend handle on a RabbitMQ context: it
// refuses the Kafka calls and reads one queue in full for the queue page
// (tui.QueueDescriber).
type rabbitCluster struct {
	c *rabbitmq.Client
	a *app // the context's settings, for the dead-letter pages (dlq_console_rabbit.go)
}

func (rabbitCluster) Describe(context.Context) (backends.ClusterInfo, error) {
	return backends.ClusterInfo{}, errNotKafka
}
func (rabbitCluster) Topics(context.Context, ...string) ([]backends.Topic, error) {
	return nil, errNotKafka
}
func (rabbitCluster) Groups(context.Context) ([]backends.Group, error) { return nil, errNotKafka }
func (rabbitCluster) DescribeGroup(context.Context, string) (backends.Group, error) {
	return backends.Group{}, errNotKafka
}
func (rabbitCluster) CommittedOffsets(context.Context, ...string) (map[string][]backends.Committed, error) {
	return nil, errNotKafka
}

// Close does nothing: the source owns the client.
func (rabbitCluster) Close() {}

// DescribeQueue reads one queue; for a stream also its first and last
// messages' publisher timestamps (a non-destructive stream read).
func (r rabbitCluster) DescribeQueue(ctx context.Context, vhost, name string) (backends.Queue, error) {
	return r.c.Queue(ctx, vhost, name)
}
