package kafka

import (
	"context"
	"errors"
	"time"
)

// awaitAnswer runs fn with a context bounded by d and waits at most that
// long. It reports whether fn answered: false when d passed first (or fn
// itself ran out of time) while ctx was still live.
//
// Why the wait and not only fn's context: franz-go retries a produce the
// broker never answered for as long as the client lives (an idempotent
// record in flight is never failed, whatever its context says),
// redialling a dead address in a tight loop. A caller that gets false
// stops using the client and closes it, which drops what it holds.
func awaitAnswer(ctx context.Context, d time.Duration, fn func(context.Context) error) (answered bool, err error) {
	bctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(bctx) }()
	select {
	case err = <-done:
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return false, err
		}
		return true, err
	case <-bctx.Done():
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		return false, bctx.Err()
	}
}
