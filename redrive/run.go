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
	err := RunInto(ctx, CandidateSlice(cs), VerdictSlice(out), o, src)
	return out, err
}

// RunInto is Run reading the candidates through cs and writing the
// verdicts through out (a plan's records are both: PlanRecords), so
// checking a plan holds no copy of its records and one verdict per record
// (in the record) whatever the number of checks.
func RunInto(ctx context.Context, cs Candidates, out Verdicts, o CheckOptions, src Sources) error {
	n := cs.Len()
	active := make([]bool, n)
	for i := range n {
		out.SetVerdict(i, include())
		active[i] = true
	}
	// Each check reports only what it excludes; an excluded record is out
	// of every later check.
	ex := func(i int, v Verdict) {
		out.SetVerdict(i, v)
		if !v.Included {
			active[i] = false
		}
	}

	// 1. ledger
	var entries []LedgerEntry
	var err error
	if src.Ledger != nil {
		entries, err = src.Ledger(ctx)
	}
	if err != nil {
		v := exclude(ReasonCheckFailed, "ledger: %v", err)
		for i := range n {
			ex(i, v)
		}
	} else {
		checkLedger(cs, active, NewLedgerIndex(o.DLQ, entries), ex)
	}
	entries = nil
	if err := ctx.Err(); err != nil {
		return err
	}

	// 2. system of record, for the records still in.
	sor := SOR{Configured: src.Committed != nil, RequireKey: o.RequireKey}
	if sor.Configured {
		if keys := keysToLookUp(cs, active); len(keys) > 0 {
			sor.Committed, sor.Err = src.Committed(ctx, keys)
			if sor.Err == nil && sor.Committed == nil {
				sor.Err = errors.New("no answer")
			}
		}
	}
	checkSystemOfRecord(cs, active, sor, ex)
	sor.Committed = nil
	if err := ctx.Err(); err != nil {
		return err
	}

	// 5. loop guard, 4. duplicates.
	checkLoop(cs, active, o.MaxRedrives, ex)
	checkDuplicates(cs, active, ex)

	// 3. ordering.
	scan := newOrderingScan(cs, active)
	if src.Scan != nil && len(scan.parts) > 0 {
		if err := src.Scan(ctx, scan); err != nil {
			for _, r := range scan.Ranges() {
				if !scan.part(r.Topic, r.Partition).done {
					scan.Finish(r.Topic, r.Partition, false, r.From, err)
				}
			}
		}
	}
	scan.verdicts(o.AllowHazards, ex)
	return ctx.Err()
}
