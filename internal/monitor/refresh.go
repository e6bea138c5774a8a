package monitor

import (
	"context"
	"errors"
)

// state is the history the monitor keeps between refreshes.
type state struct{}

func newState() *state { return &state{} }

func (m *Monitor) refresh(ctx context.Context) (Snapshot, error) {
	return Snapshot{}, errors.New("monitor: not implemented yet")
}
