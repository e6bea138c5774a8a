package actions

import (
	"context"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
)

// reviewLimit is how many messages a review of p browses: past the last
// row's position (a message can only move towards the head as the DLQ is
// consumed), but never past the DLQ's depth. A row position is the plan's
// word, signed by whoever made the file: one claiming a position the DLQ
// does not hold would otherwise have the review read the whole DLQ (a
// quorum DLQ with its side effects), so the read stops at the depth and
// the warning says why, in one line. A stream keeps its own bound (a
// passive declare does not count a stream's messages), and so does a DLQ
// whose depth cannot be asked (another vhost) or cannot be known: one with
// consumers, whose ready count leaves out what they hold unacknowledged
// (the consumers of a browse that was interrupted among them, until the
// broker has put its messages back), so that a cap at the ready count
// would leave records unread and call them gone.
func (r *RabbitRedrive) reviewLimit(ctx context.Context, cl RabbitClient, p redrive.QueuePlan) int {
	limit, last := len(p.Records)+1000, -1
	for _, rec := range p.Records {
		limit, last = max(limit, rec.Position+1000), max(last, rec.Position)
	}
	if p.QueueType == backends.QueueStream {
		return limit
	}
	depth, consumers, err := cl.ReadyAndConsumers(ctx, p.DLQ)
	if err != nil || int64(last) < depth || consumers > 0 {
		return limit
	}
	// One more than the depth: the read that finds the DLQ empty says the
	// review saw all of it.
	// Most often the DLQ has simply been redriven or consumed since the
	// plan was made; the note says so before it names the other cause.
	r.warn("note: plan %s reaches position %d of %s as it was planned, which holds %d ready now (redriven or consumed since, or a forged position): reading those %d only", redrive.ShortHash(p.Hash()), last, sanitize.Text(p.DLQ), depth, depth)
	return int(depth) + 1
}
