package sor

import (
	"context"
	"sort"

	"github.com/berth-dev/berth/internal/config"
)

// Applied opens the system of record, asks it once about the distinct keys
// and closes it: which of them already have their effect committed. It
// reads only; an empty list asks nothing.
func Applied(ctx context.Context, s config.SystemOfRecord, keys []string) (map[string]bool, error) {
	seen := map[string]bool{}
	var ask []string
	for _, k := range keys {
		if k != "" && !seen[k] {
			seen[k] = true
			ask = append(ask, k)
		}
	}
	if len(ask) == 0 {
		return map[string]bool{}, nil
	}
	sort.Strings(ask)
	l, err := Open(ctx, s)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Committed(ctx, ask)
}
