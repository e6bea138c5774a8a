package kafka

import (
	"context"
	"fmt"
	"sort"

	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// Plan format v2 in the same store: the core (redrive.Core) is stored in
// chunks like a v1 plan, its manifest's content naming redrive.PlanFormat;
// signatures are the same sig/<hash>/<role>/<fingerprint> records. A v1 and
// a v2 plan never share a hash (their hashed inputs start with different
// format lines), so both can live in one store while v1 is retired.

// ListedPlan is one v2 plan of the store, or (Err set) a record that is not
// a usable one: skipped, never hiding the others.
type ListedPlan struct {
	Key    string
	Offset int64
	Plan   redrive.SignedPlan
	Err    error
}

// PutSigned stores a v2 plan and its signatures: content first, in chunks,
// then its manifest; a plan already stored gets only its signatures.
func (s *PlanStore) PutSigned(ctx context.Context, p redrive.SignedPlan) error {
	if err := p.Plan.Validate(); err != nil {
		return err
	}
	if h, err := p.Plan.Hash(); err != nil || h != p.Hash {
		return redrive.ErrHashMismatch
	}
	return s.put(ctx, p.Hash, redrive.PlanFormat, jsonDoc(p.Plan), p.Signatures)
}

// isV2 reports whether an indexed entry holds a v2 core.
func (e planEntry) isV2() bool {
	return e.err == nil && e.sp.Manifest != nil && e.sp.Manifest.Content == redrive.PlanFormat
}

// loadSigned fetches one v2 plan's core and checks it validates and hashes
// to its key.
func (s *PlanStore) loadSigned(ctx context.Context, hash string, e planEntry, sigs []approval.Signature) (redrive.SignedPlan, error) {
	if e.err != nil {
		return redrive.SignedPlan{}, e.err
	}
	if !e.isV2() {
		return redrive.SignedPlan{}, fmt.Errorf("a %s plan: make it again", contentPlanV1)
	}
	var c redrive.Core
	if err := s.readChunks(ctx, *e.sp.Manifest, redrive.PlanFormat, decodeInto(&c)); err != nil {
		return redrive.SignedPlan{}, err
	}
	if err := c.Validate(); err != nil {
		return redrive.SignedPlan{}, err
	}
	if h, err := c.Hash(); err != nil || h != hash {
		return redrive.SignedPlan{}, redrive.ErrHashMismatch
	}
	if sigs == nil {
		sigs = []approval.Signature{}
	}
	return redrive.SignedPlan{Hash: hash, Plan: c, Signatures: sigs}, nil
}

// GetSigned returns the v2 plan whose hash starts with prefix (8+ hex
// digits) with its stored signatures, fetching only that plan's chunks.
func (s *PlanStore) GetSigned(ctx context.Context, prefix string) (redrive.SignedPlan, error) {
	return findPlan(ctx, s, prefix, s.loadSigned)
}

// ListSigned returns every v2 plan, newest first, and one entry with Err
// for each record of the store that is not usable (undecodable, content not
// matching its hash, a chunk missing or altered, a broken signature). v1
// plans are not listed.
func (s *PlanStore) ListSigned(ctx context.Context) ([]ListedPlan, error) {
	ix, err := s.index(ctx)
	if err != nil {
		return nil, err
	}
	var good, bad []ListedPlan
	for _, p := range ix.problems {
		bad = append(bad, ListedPlan{Key: p.Key, Offset: p.Offset, Err: fmt.Errorf("%s offset %d: %s", p.Topic, p.Offset, p.Error)})
	}
	for hash, e := range ix.plans {
		if e.err != nil || !e.isV2() {
			continue // a problem already, or a v1 plan
		}
		p, err := s.loadSigned(ctx, hash, e, ix.sigs[hash])
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			bad = append(bad, ListedPlan{Key: e.key, Offset: e.offset, Err: fmt.Errorf("%s offset %d: %w", PlanTopic, e.offset, err)})
			continue
		}
		good = append(good, ListedPlan{Key: e.key, Offset: e.offset, Plan: p})
	}
	sort.Slice(good, func(i, j int) bool {
		a, b := good[i].Plan, good[j].Plan
		if a.Plan.CreatedAt != b.Plan.CreatedAt {
			return a.Plan.CreatedAt > b.Plan.CreatedAt // the layout sorts as time
		}
		return a.Hash < b.Hash
	})
	sort.Slice(bad, func(i, j int) bool { return bad[i].Offset < bad[j].Offset })
	return append(good, bad...), nil
}
