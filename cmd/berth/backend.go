package main

import (
	"context"
	"fmt"

	"github.com/berth-dev/berth/backends/kafka"
)

// kafkaClient connects to the current context's Kafka cluster (bundled or
// external). It fails within --timeout naming the address when unreachable.
func (a *app) kafkaClient(ctx context.Context) (*kafka.Client, error) {
	switch a.ctx.Kind {
	case "kafka", "bundled":
	default:
		return nil, fmt.Errorf("context %s is a %s context; this command needs Kafka", a.ctxName, a.ctx.Kind)
	}
	opts := kafka.Options{Bootstrap: a.ctx.Bootstrap, Timeout: a.timeout}
	return kafka.Dial(ctx, opts)
}

// opCtx is a context bounded by --timeout for one operation.
func (a *app) opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, a.timeout)
}
