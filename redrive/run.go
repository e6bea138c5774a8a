package redrive

import (
	"context"
	"errors"
)

// Sources are where the checks get their data. Run calls them; they do the
// I/O (the Kafka backend, redrive/sor). A nil Committed means no system of
// record is configured.
type Sources struct {
	// Ledger returns every ledger entry.
	Ledger func(ctx context.Context) ([]LedgerEntry, error)
	// Committed looks up idempotency keys in the system of record (batched).
	Committed func(ctx context.Context, keys []string) (map[string]bool, error)
	// Scan reads the ranges the ordering scan asks for and feeds it; it
	// reports progress as it goes and honours its bound.
	Scan func(ctx context.Context, s *OrderingScan) error
}

// CheckOptions are the policy's and the plan's settings for the checks.
type CheckOptions struct {
	DLQ          string
	RequireKey   bool
	MaxRedrives  int
	AllowHazards bool
}

// Run runs the five checks over cs in order — ledger, system of record
// (missing keys first), loop guard, duplicates, ordering — and returns one
// verdict per candidate: the first check that excludes a record names the
// reason. Each later check sees only the records still included (so a
// duplicate's twin that was already redriven does not hide it). A source
// that fails blocks the records that needed it (check_failed) and never
// reads as "not applied"; Run's error is only ctx's.
func Run(ctx context.Context, cs []Candidate, o CheckOptions, src Sources) ([]Verdict, error) {
	out := make([]Verdict, len(cs))
	active := make([]bool, len(cs))
	for i := range cs {
		out[i], active[i] = include(), true
	}
	apply := func(vs []Verdict) {
		for i, v := range vs {
			if active[i] && !v.Included {
				out[i], active[i] = v, false
			} else if active[i] && v.NewerOffset != nil {
				out[i] = v // included, but say where the hazard is
			}
		}
	}

	// 1. ledger
	var entries []LedgerEntry
	var err error
	if src.Ledger != nil {
		entries, err = src.Ledger(ctx)
	}
	if err != nil {
		apply(all(cs, exclude(ReasonCheckFailed, "ledger: %v", err)))
	} else {
		apply(CheckLedger(cs, NewLedgerIndex(o.DLQ, entries)))
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}

	// 2. system of record, for the records still in.
	sor := SOR{Configured: src.Committed != nil, RequireKey: o.RequireKey}
	if sor.Configured {
		var need []Candidate
		for i, c := range cs {
			if active[i] {
				need = append(need, c)
			}
		}
		if keys := KeysToLookUp(need); len(keys) > 0 {
			sor.Committed, sor.Err = src.Committed(ctx, keys)
			if sor.Err == nil && sor.Committed == nil {
				sor.Err = errors.New("no answer")
			}
		}
	}
	apply(CheckSystemOfRecord(cs, sor))
	if err := ctx.Err(); err != nil {
		return out, err
	}

	// 5. loop guard, 4. duplicates.
	apply(CheckLoop(cs, o.MaxRedrives))
	apply(CheckDuplicates(cs, active))

	// 3. ordering.
	scan := NewOrderingScan(cs, active)
	if src.Scan != nil && len(scan.Ranges()) > 0 {
		if err := src.Scan(ctx, scan); err != nil {
			for _, r := range scan.Ranges() {
				if _, done := scan.result[tpKey{r.Topic, r.Partition}]; !done {
					scan.Finish(r.Topic, r.Partition, false, r.From, err)
				}
			}
		}
	}
	apply(scan.Verdicts(o.AllowHazards))
	return out, ctx.Err()
}

func all(cs []Candidate, v Verdict) []Verdict {
	out := make([]Verdict, len(cs))
	for i := range out {
		out[i] = v
	}
	return out
}
