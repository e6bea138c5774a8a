// Package monitor is the refresh loop between a backend and the lag engine:
// it reads topics, groups, commits and record timestamps from a
// backends.Cluster and backends.TimestampReader, keeps the sample history the
// engine's sliding-window statuses and the TUI's charts need, and produces
// immutable Snapshots. It owns no terminal and no goroutines of its own:
// callers (the TUI, `berth lag --watch`) decide when to Refresh.
package monitor

import (
	"context"
	"sync"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
)

// Config configures a Monitor. Zero fields take defaults.
type Config struct {
	// Lag tunes the engine (window, steady age, retention margin, skew).
	Lag lag.Config
	// SLO returns the age SLO for a group (config.GroupPolicyFor); nil: 5m.
	SLO func(group string) time.Duration
	// Groups limits the refresh to these groups (empty: every group).
	Groups []string
	// History is how much per-group history to keep for charts (default 15m).
	History time.Duration
	// Now is the clock (default time.Now); tests inject a fixed one.
	Now func() time.Time
	// SkipAges disables timestamp reads (offset lag only).
	SkipAges bool
}

// Monitor refreshes one cluster. It is safe for concurrent use: Refresh
// calls are serialised.
type Monitor struct {
	cluster backends.Cluster
	ts      backends.TimestampReader
	cfg     Config

	mu sync.Mutex
	st *state
}

// New returns a Monitor over cluster. ts may be nil (ages then stay unknown).
func New(cluster backends.Cluster, ts backends.TimestampReader, cfg Config) *Monitor {
	cfg.Lag = cfg.Lag.WithDefaults()
	if cfg.History <= 0 {
		cfg.History = 15 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SLO == nil {
		cfg.SLO = func(string) time.Duration { return 5 * time.Minute }
	}
	return &Monitor{cluster: cluster, ts: ts, cfg: cfg, st: newState()}
}

// Refresh reads the cluster once, feeds the engine and returns the new
// snapshot. The monitor keeps no snapshot itself (only the compact sample
// history), so a caller that drops the previous one frees it. Errors that stop the whole refresh (cluster unreachable) are
// returned; partial failures become Snapshot.Warnings.
func (m *Monitor) Refresh(ctx context.Context) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refresh(ctx)
}
