package rabbitmq

import (
	"context"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
)

// QueueStatus is one queue with its computed status, age and ETA: the
// plain data the console's queue pages and `berth lag` render.
type QueueStatus struct {
	Queue backends.Queue
	Lag   lag.QueueLag
}

// QueueSnapshot is one refresh of every queue. Immutable once returned.
type QueueSnapshot struct {
	Observed time.Time
	// Mode is ModeManagement or ModeReduced; Missing says what reduced mode
	// cannot show, Warnings what could not be read.
	Mode     string
	Missing  []string
	Warnings []string
	Queues   []QueueStatus
}

// Snapshot reads the inventory and evaluates each queue against its SLO
// (slo may be nil: 5 minutes). Safe to call from a goroutine (the TUI's
// refresh command); it honours ctx.
func (c *Client) Snapshot(ctx context.Context, slo func(queue string) time.Duration) (QueueSnapshot, error) {
	now := time.Now()
	inv, err := c.Inventory(ctx)
	if err != nil {
		return QueueSnapshot{}, err
	}
	s := QueueSnapshot{Observed: now, Mode: inv.Mode, Missing: inv.Missing, Warnings: inv.Warnings, Queues: make([]QueueStatus, len(inv.Queues))}
	for i, q := range inv.Queues {
		d := 5 * time.Minute
		if slo != nil {
			d = slo(q.Name)
		}
		s.Queues[i] = QueueStatus{Queue: q, Lag: lag.EvaluateQueue(q, now, d)}
	}
	return s, nil
}
