package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/tui"
)

// Bare `berth` opens the console on the current context.
func init() {
	tuiRun = func(a *app, _ *cobra.Command) error { return a.runConsole(consoleOptions{}) }
}

// consoleOptions are what other commands (berth demo) add to the console.
type consoleOptions struct {
	// brokers is the demo's simulated broker switch; the brokers page
	// offers it only when set.
	brokers tui.BrokerSwitch
	// notice is shown once when the console opens (the demo's attach line).
	notice string
	// refresh overrides the configured refresh interval when positive.
	refresh time.Duration
}

// runConsole opens the interactive console and returns when the user quits.
func (a *app) runConsole(o consoleOptions) error {
	reason := ""
	if a.readOnly {
		reason = "--read-only"
		if a.ctx.ReadOnly {
			reason = "context " + a.ctxName + " has read_only: true"
		}
	}
	forced := a.v.GetBool("read-only")
	return tui.Run(tui.Options{
		Config:         a.cfg,
		Context:        a.ctxName,
		ReadOnly:       a.readOnly,
		ReadOnlyReason: reason,
		Dial:           a.dialConsole,
		Timeout:        a.timeout,
		Refresh:        o.refresh,
		Brokers:        o.brokers,
		Notice:         o.notice,
		Services:       consoleServices(),
		KindOf: func(name string) string {
			if name == a.ctxName {
				return a.ctx.Kind // an ad-hoc context (--amqp, --bootstrap) is not in the config
			}
			return a.cfg.Contexts[name].Kind
		},
		ReadOnlyFor: func(name string) (bool, string) {
			switch {
			case a.cfg.Contexts[name].ReadOnly:
				return true, "context " + name + " has read_only: true"
			case forced:
				return true, "--read-only"
			}
			return false, ""
		},
	})
}

// dialConsole attaches the console to a context: a Kafka client, the
// timestamp reader and a monitor (the refresh loop's state and history).
// It runs inside a tea.Cmd, bounded by ctx.
func (a *app) dialConsole(ctx context.Context, name string) (tui.Source, error) {
	b := *a // a copy: the options of another context, without touching a
	if name != a.ctxName {
		c, ok := a.cfg.Contexts[name]
		if !ok {
			return nil, fmt.Errorf("unknown context %q", name)
		}
		b.ctxName, b.ctx = name, c
	}
	if dial, ok := consoleDialers[b.ctx.Kind]; ok {
		return dial(&b, ctx)
	}
	opts, err := b.kafkaOptions()
	if err != nil {
		return nil, err
	}
	client, err := kafka.Dial(ctx, opts)
	if err != nil {
		return nil, err
	}
	// The console's actions are read-only on a cluster a read-only
	// context names, whichever context reached it.
	if err := b.guardKafka(ctx, client); err != nil {
		client.Close()
		return nil, err
	}
	cluster := kafka.NewCluster(client)
	mon := monitor.New(cluster, kafka.NewTimestampReader(client), monitorConfig(a.cfg))
	return &consoleSource{cluster: cluster, mon: mon, readOnlyReason: b.readOnlyReason}, nil
}

// consoleDialers attach the console to contexts of kinds other than Kafka
// (a RabbitMQ source, say): a command file registers one for its kind in an
// init function. The app it receives is already switched to the context
// being dialed (a.ctxName, a.ctx).
var consoleDialers = map[string]func(a *app, ctx context.Context) (tui.Source, error){}

// consoleSource is a tui.Source over the Kafka backend and a monitor.
type consoleSource struct {
	cluster *kafka.Cluster
	mon     *monitor.Monitor
	// readOnlyReason is set when the cluster is one a read-only context
	// names (tui.ReadOnlySource).
	readOnlyReason string
}

// ReadOnly implements tui.ReadOnlySource.
func (s *consoleSource) ReadOnly() (bool, string) { return s.readOnlyReason != "", s.readOnlyReason }

func (s *consoleSource) Refresh(ctx context.Context) (*tui.Snapshot, error) {
	snap, err := s.mon.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	return &snap, nil
}

func (s *consoleSource) Cluster() backends.Cluster { return s.cluster }

func (s *consoleSource) Close() { s.cluster.Close() }
