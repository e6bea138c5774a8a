package tui

import (
	"context"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/monitor"
)

// Snapshot is what one refresh observed and computed (the monitor's
// snapshot: topics with ISR health and produce skew, groups with lag rows,
// roll-ups and chart history, broker shares). It is immutable once
// delivered: pages read it and never modify it.
type Snapshot = monitor.Snapshot

// Source is one attached context: it produces snapshots and holds the
// backend. cmd/berth implements it with the Kafka backend and
// internal/monitor; tests implement it with fixtures. Refresh and Cluster
// are called from tea.Cmds, never from Update.
type Source interface {
	// Refresh observes the cluster once.
	Refresh(ctx context.Context) (*Snapshot, error)
	// Cluster is the backend, for page actions (env.Do).
	Cluster() backends.Cluster
	// Close releases connections.
	Close()
}

// ReadOnlySource is a Source that found, once attached, that its cluster is
// one a read-only context names: the console is then read-only whatever
// the context it was reached through says.
type ReadOnlySource interface {
	ReadOnly() (bool, string)
}

// Dialer attaches to the named context. It runs in a tea.Cmd.
type Dialer func(ctx context.Context, contextName string) (Source, error)
