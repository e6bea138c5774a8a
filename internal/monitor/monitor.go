// Package monitor is the refresh loop between a backend and the lag engine:
// it reads topics, groups, commits and record timestamps from a
// backends.Cluster and backends.TimestampReader, keeps the sample history the
// engine's sliding-window statuses and the TUI's charts need, and produces
// immutable Snapshots. It owns no terminal and no goroutines of its own:
// callers (the TUI, `berth lag --watch`) decide when to Refresh.
package monitor

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/redrive"
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
	// EventTime are the event-time rules: topics whose records carry the
	// time their event happened (the first matching rule applies).
	EventTime []EventRule
	// EventSLO returns a group's event-time SLO (0: none); nil: none.
	EventSLO func(group string) time.Duration
	// DeadLetter reports the topics that hold failures rather than
	// traffic: dead-letter and retry topics. They are not judged for hot
	// partitions (their rates follow failures, not keys). nil: the naming
	// conventions (DeadLetterTopics(nil)).
	DeadLetter func(topic string) bool
}

// DeadLetterTopics is the DeadLetter of a config: topics named like a DLQ
// (redrive.IsDLQName) or a retry topic (IsRetryName), and the declared DLQs.
func DeadLetterTopics(declared []string) func(string) bool {
	set := make(map[string]bool, len(declared))
	for _, d := range declared {
		set[d] = true
	}
	return func(t string) bool { return set[t] || redrive.IsDLQName(t) || IsRetryName(t) }
}

// IsRetryName reports whether a topic is named like a retry topic: a
// "-retry", ".retry" or "_retry" suffix, optionally followed by a number
// (Spring's non-blocking retries: orders-retry-0, orders-retry-5000).
func IsRetryName(t string) bool {
	if i := strings.LastIndexAny(t, "-_"); i > 0 && i < len(t)-1 && strings.Trim(t[i+1:], "0123456789") == "" {
		t = t[:i]
	}
	for _, suf := range []string{"-retry", ".retry", "_retry"} {
		if strings.HasSuffix(t, suf) && len(t) > len(suf) {
			return true
		}
	}
	return false
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
	if cfg.DeadLetter == nil {
		cfg.DeadLetter = DeadLetterTopics(nil)
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
