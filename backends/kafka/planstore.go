package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// The redrive plan store and ledger live in the cluster itself, in compacted
// internal topics, so every operator attached to the cluster shares them and
// they last as long as the cluster does.
const (
	PlanTopic   = "__berth_redrive_plans"
	LedgerTopic = "__berth_redrive_ledger"
)

// Record keys in PlanTopic. A plan's content and each signature over it are
// separate records, so approvers at different terminals can add signatures
// concurrently without overwriting each other (compaction keeps the latest
// value per key; a signature's key is unique to its signer and role).
const (
	planKeyPrefix = "plan/" // plan/<hash> -> {"hash","plan"}
	sigKeyPrefix  = "sig/"  // sig/<hash>/<role>/<fingerprint> -> approval.Signature
)

// LedgerKey is the ledger record key for a DLQ record: topic/partition/offset.
func LedgerKey(e redrive.LedgerEntry) string {
	return redrive.FormatOrigin(e.DLQ, e.Partition, e.Offset)
}

// LedgerRecords builds the ledger records for an entry: the entry under its
// DLQ coordinates and, for a redriven record with an event id, the same
// entry under ev/<event id>, so a look-up by coordinates or by event id
// reads only the ledger partition its key hashes to (Lookup, LookupEvents).
// The executor produces them in the same transaction as the copy.
func LedgerRecords(e redrive.LedgerEntry) ([]*kgo.Record, error) {
	v, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	recs := []*kgo.Record{{Topic: LedgerTopic, Key: []byte(LedgerKey(e)), Value: v}}
	if e.EventID != "" && e.Action == redrive.LedgerRedriven {
		recs = append(recs, &kgo.Record{Topic: LedgerTopic, Key: []byte(eventKeyPrefix + e.EventID), Value: v})
	}
	return recs, nil
}

// PlanStore reads and writes plans, signatures and the ledger.
type PlanStore struct {
	c *Client
	// Idle bounds how long a read waits for records that should be there.
	Idle time.Duration
	// pin, when set, bounds ledger look-ups to the ledger as it was at the
	// first one (Pinned).
	pin *ledgerPin
}

// NewPlanStore returns the store on c's cluster.
func NewPlanStore(c *Client) *PlanStore { return &PlanStore{c: c} }

// ensure creates an internal topic if it does not exist: compacted,
// replicated up to 3; the ledger with LedgerPartitions partitions (look-ups
// read only the partitions their keys hash to), the plan store with one.
func (s *PlanStore) ensure(ctx context.Context, topic string) error {
	md, err := s.c.admin.BrokerMetadata(ctx)
	if err != nil {
		return describeErr("metadata", err)
	}
	rf := int16(min(3, len(md.Brokers)))
	cfg := map[string]*string{"cleanup.policy": ptr("compact")}
	if rf > 1 {
		cfg["min.insync.replicas"] = ptr("2")
	}
	partitions := int32(1)
	if topic == LedgerTopic {
		partitions = LedgerPartitions
	}
	resp, err := s.c.admin.CreateTopic(ctx, partitions, rf, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	return nil
}

func ptr(s string) *string { return &s }

// produce writes records synchronously with acks from all in-sync replicas.
func (s *PlanStore) produce(ctx context.Context, topic string, recs ...*kgo.Record) error {
	if err := s.ensure(ctx, topic); err != nil {
		return err
	}
	cl, err := s.c.NewKgo(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, r := range recs {
		r.Topic = topic
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("write %s: %s", topic, codeName(err))
	}
	return nil
}

// storeRecord is the latest value of one key in a store topic, with the
// offset it was read at (problems are reported by offset).
type storeRecord struct {
	Offset int64
	Value  []byte
}

// readAll reads a store topic to its end and returns the latest value per
// key (tombstones delete). A topic that does not exist yet is empty.
func (s *PlanStore) readAll(ctx context.Context, topic string) (map[string]storeRecord, error) {
	latest := map[string]storeRecord{}
	err := s.scan(ctx, topic, func(r *kgo.Record) {
		if r.Value == nil {
			delete(latest, string(r.Key))
			return
		}
		latest[string(r.Key)] = storeRecord{Offset: r.Offset, Value: r.Value}
	})
	return latest, err
}

// scan calls fn with every committed record of a store topic, from its
// start to its end. A topic that does not exist yet has none.
func (s *PlanStore) scan(ctx context.Context, topic string, fn func(*kgo.Record)) error {
	return s.scanPartitions(ctx, topic, nil, fn)
}

// scanPartitions is scan over the partitions in only (nil: every one).
func (s *PlanStore) scanPartitions(ctx context.Context, topic string, only map[int32]bool, fn func(*kgo.Record)) error {
	// A fresh client: kgo answers metadata from a short-lived cache, and a
	// cached "no such topic" right after another terminal (or this one)
	// created the ledger would read as an empty ledger.
	fresh, err := s.c.NewKgo()
	if err != nil {
		return err
	}
	k := NewCluster(&Client{opts: s.c.opts, cl: fresh, admin: kadm.NewClient(fresh)})
	ts, err := k.Topics(ctx, topic)
	fresh.Close()
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil
		}
		return err
	}
	var ranges []readRange
	for _, p := range ts[0].Partitions {
		if only != nil && !only[p.Partition] {
			continue
		}
		if p.Err != "" {
			return fmt.Errorf("%s[%d]: %s", topic, p.Partition, p.Err)
		}
		end := p.LastStable
		if end < 0 {
			end = p.HighWatermark
		}
		if topic == LedgerTopic && s.pin != nil {
			end = s.pin.bound(ts[0].Partitions, p.Partition, end)
		}
		ranges = append(ranges, readRange{topic: topic, partition: p.Partition, from: p.LogStart, end: end})
	}
	stats, err := s.c.readRanges(ctx, ranges, 0, s.Idle, fn, nil)
	if err != nil {
		return err
	}
	if !stats.complete() {
		// A partial read of the ledger would read as "not redriven": refuse.
		return fmt.Errorf("%s: could not read to the end (stopped short)", topic)
	}
	return nil
}

// storedPlan is the value of a plan/<hash> record: a manifest naming the
// plan's chunks, or (plans stored by earlier versions) the plan inline.
type storedPlan struct {
	Hash     string        `json:"hash"`
	Plan     *redrive.Plan `json:"plan,omitempty"`
	Manifest *planManifest `json:"manifest,omitempty"`
}

// PutPlan stores a plan and its signatures: the content as compressed
// chunks first, then its manifest (see planManifest). Storing a plan that
// is already stored writes only its signatures.
func (s *PlanStore) PutPlan(ctx context.Context, f redrive.File) error {
	if f.Hash != f.Plan.Hash() {
		return redrive.ErrHashMismatch
	}
	// The plan's JSON (json.Encoder's, newline and all), written a row at
	// a time as it is compressed: a million-record plan's core is ~65 MB
	// of JSON, ~130 MB as rows.
	return s.put(ctx, f.Hash, contentPlanV1, func(w io.Writer) error {
		if err := f.Plan.WriteJSON(w); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\n")
		return err
	}, f.Signatures)
}

// put stores a plan's content (doc, of the given content kind) as chunks
// and then its manifest, unless a readable copy is stored already, and
// then its signatures: what PutPlan and PutSigned share.
func (s *PlanStore) put(ctx context.Context, hash, content string, doc func(io.Writer) error, sigs []approval.Signature) error {
	ix, err := s.index(ctx)
	if err != nil {
		return err
	}
	var recs []*kgo.Record
	if e, ok := ix.plans[hash]; !ok || e.err != nil {
		m, err := s.writeChunks(ctx, hash, content, doc)
		if err != nil {
			return err
		}
		v, err := json.Marshal(storedPlan{Hash: hash, Manifest: &m})
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Key: []byte(planKeyPrefix + hash), Value: v})
	}
	for _, sig := range sigs {
		r, err := sigRecord(hash, sig)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil
	}
	return s.produce(ctx, PlanTopic, recs...)
}

func sigRecord(hash string, sig approval.Signature) (*kgo.Record, error) {
	if sig.PlanHash != hash {
		return nil, fmt.Errorf("signature is for plan %s, not %s", sig.PlanHash, hash)
	}
	v, err := json.Marshal(sig)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Key: []byte(sigKeyPrefix + hash + "/" + string(sig.Role) + "/" + sig.Fingerprint), Value: v}, nil
}

// AddSignature stores one more signature over a stored plan (an approval);
// the plan itself, and so its hash, is untouched.
func (s *PlanStore) AddSignature(ctx context.Context, hash string, sig approval.Signature) error {
	r, err := sigRecord(hash, sig)
	if err != nil {
		return err
	}
	return s.produce(ctx, PlanTopic, r)
}

// StoreProblem is a record of the plan store that is not a usable plan or
// signature. It is skipped (every other plan is still served) and reported
// by its offset; Key is untrusted text from the topic.
type StoreProblem struct {
	Topic  string `json:"topic"`
	Offset int64  `json:"offset"`
	Key    string `json:"key"`
	Error  string `json:"error"`
}

func (p StoreProblem) String() string {
	return fmt.Sprintf("%s offset %d (%s): %s", p.Topic, p.Offset, p.Key, p.Error)
}

// PlanListing is every usable stored plan, newest first, and the records
// that were skipped.
type PlanListing struct {
	Plans    []redrive.File
	Problems []StoreProblem
}

// planEntry is one plan/<hash> record as indexed: its manifest (or inline
// plan), or why it cannot be used.
type planEntry struct {
	offset int64
	key    string
	sp     storedPlan
	err    error
}

type planIndex struct {
	plans    map[string]planEntry // by hash
	sigs     map[string][]approval.Signature
	problems []StoreProblem
}

// index reads PlanTopic (manifests and signatures only: small) and sorts
// out what each record is, without fetching any plan's content.
func (s *PlanStore) index(ctx context.Context) (planIndex, error) {
	latest, err := s.readAll(ctx, PlanTopic)
	if err != nil {
		return planIndex{}, err
	}
	ix := planIndex{plans: map[string]planEntry{}, sigs: map[string][]approval.Signature{}}
	problem := func(k string, rec storeRecord, format string, a ...any) {
		ix.problems = append(ix.problems, StoreProblem{Topic: PlanTopic, Offset: rec.Offset, Key: k, Error: fmt.Sprintf(format, a...)})
	}
	var sigKeys []string
	for k, rec := range latest {
		switch {
		case strings.HasPrefix(k, sigKeyPrefix):
			sigKeys = append(sigKeys, k)
		case strings.HasPrefix(k, planKeyPrefix):
			var sp storedPlan
			hash := strings.TrimPrefix(k, planKeyPrefix)
			e := planEntry{offset: rec.Offset, key: k}
			switch err := json.Unmarshal(rec.Value, &sp); {
			case err != nil:
				e.err = fmt.Errorf("not a plan: %v", err)
			case sp.Hash != hash:
				e.err = fmt.Errorf("record names plan %.12s under key of plan %.12s", sp.Hash, hash)
			case (sp.Plan == nil) == (sp.Manifest == nil):
				e.err = errors.New("not a plan: neither a manifest nor a plan")
			}
			e.sp = sp
			ix.plans[hash] = e
			if e.err != nil {
				problem(k, rec, "%v", e.err)
			}
		}
	}
	sort.Strings(sigKeys)
	for _, k := range sigKeys {
		var sig approval.Signature
		if err := json.Unmarshal(latest[k].Value, &sig); err != nil {
			problem(k, latest[k], "not a signature: %v", err)
			continue
		}
		if !strings.HasPrefix(k, sigKeyPrefix+sig.PlanHash+"/") {
			problem(k, latest[k], "signature for plan %.12s under another plan's key", sig.PlanHash)
			continue
		}
		ix.sigs[sig.PlanHash] = append(ix.sigs[sig.PlanHash], sig)
	}
	return ix, nil
}

// load fetches one indexed plan's content and checks it against its hash.
func (s *PlanStore) load(ctx context.Context, hash string, e planEntry, sigs []approval.Signature) (redrive.File, error) {
	if e.err != nil {
		return redrive.File{}, e.err
	}
	var p redrive.Plan
	if e.sp.Plan != nil {
		p = *e.sp.Plan
	} else {
		// Decoded as it is read: a million-record plan's JSON and rows
		// are never held beside its records.
		err := s.readChunks(ctx, *e.sp.Manifest, contentPlanV1, func(r io.Reader) (err error) {
			p, err = redrive.DecodePlan(r) // an io.LimitedReader: the size is known
			return err
		})
		if err != nil {
			return redrive.File{}, err
		}
	}
	if p.Hash() != hash {
		return redrive.File{}, redrive.ErrHashMismatch
	}
	if sigs == nil {
		sigs = []approval.Signature{}
	}
	return redrive.File{Hash: hash, Plan: p, Signatures: sigs}, nil
}

// List returns every usable stored plan with its signatures, newest first.
// A record that is not a usable plan (undecodable, content not matching its
// hash, chunks missing) is skipped and reported in Problems: one bad record
// never hides the others.
func (s *PlanStore) List(ctx context.Context) (PlanListing, error) {
	out := PlanListing{Plans: []redrive.File{}}
	var err error
	out.Problems, err = s.Each(ctx, func(f redrive.File) { out.Plans = append(out.Plans, f) })
	if err != nil {
		return PlanListing{}, err
	}
	sort.Slice(out.Plans, func(i, j int) bool {
		a, b := out.Plans[i], out.Plans[j]
		if !a.Plan.CreatedAt.Equal(b.Plan.CreatedAt) {
			return a.Plan.CreatedAt.After(b.Plan.CreatedAt)
		}
		return a.Hash < b.Hash
	})
	return out, nil
}

// Each loads every usable stored plan in turn, in no particular order, and
// gives it to fn; it returns the records that are not usable plans, as
// List does, in offset order. One plan is held at a time (unless fn keeps
// them): a store of several million-record plans is listed in the memory
// of one.
func (s *PlanStore) Each(ctx context.Context, fn func(redrive.File)) ([]StoreProblem, error) {
	ix, err := s.index(ctx)
	if err != nil {
		return nil, err
	}
	problems := ix.problems
	for hash, e := range ix.plans {
		if e.err != nil || e.isV2() {
			continue // already a problem, or a v2 plan (ListSigned)
		}
		f, err := s.load(ctx, hash, e, ix.sigs[hash])
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			problems = append(problems, StoreProblem{Topic: PlanTopic, Offset: e.offset, Key: e.key, Error: err.Error()})
			continue
		}
		fn(f)
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Offset < problems[j].Offset })
	return problems, nil
}

// Plans returns every usable stored plan with its signatures, newest first
// (List without the skipped records).
func (s *PlanStore) Plans(ctx context.Context) ([]redrive.File, error) {
	l, err := s.List(ctx)
	return l.Plans, err
}

// Plan returns the stored plan whose hash starts with prefix (at least 8
// hex digits), fetching only that plan's content; an ambiguous or unknown
// prefix is an error, and so is a matching record that is not a usable
// plan (named by its offset).
func (s *PlanStore) Plan(ctx context.Context, prefix string) (redrive.File, error) {
	return findPlan(ctx, s, prefix, s.load)
}

// findPlan finds the one stored plan whose hash starts with prefix and
// loads it with load (v1 files and v2 signed plans share the look-up).
func findPlan[T any](ctx context.Context, s *PlanStore, prefix string, load func(context.Context, string, planEntry, []approval.Signature) (T, error)) (T, error) {
	var zero T
	if len(prefix) < 8 {
		return zero, fmt.Errorf("plan %q: give at least 8 hex digits of its hash", prefix)
	}
	ix, err := s.index(ctx)
	if err != nil {
		return zero, err
	}
	prefix = strings.ToLower(prefix)
	var match []string
	for hash := range ix.plans {
		if strings.HasPrefix(hash, prefix) {
			match = append(match, hash)
		}
	}
	switch len(match) {
	case 0:
		return zero, backends.NoPlan(prefix, "topic "+PlanTopic)
	case 1:
		e := ix.plans[match[0]]
		p, err := load(ctx, match[0], e, ix.sigs[match[0]])
		if err != nil {
			return zero, fmt.Errorf("plan %s: %s offset %d: %w", prefix, PlanTopic, e.offset, err)
		}
		return p, nil
	}
	return zero, backends.AmbiguousPlan(prefix, len(match))
}

// Ledger returns every ledger entry (read committed: entries of an aborted
// redrive transaction are not there).
func (s *PlanStore) Ledger(ctx context.Context) ([]redrive.LedgerEntry, error) {
	latest, err := s.readAll(ctx, LedgerTopic)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]redrive.LedgerEntry, 0, len(keys))
	for _, k := range keys {
		if strings.HasPrefix(k, eventKeyPrefix) {
			continue // the event-id index: the same entry again
		}
		var e redrive.LedgerEntry
		if err := json.Unmarshal(latest[k].Value, &e); err != nil {
			return nil, fmt.Errorf("ledger: record %s: %v", k, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// RedrivenByPlan counts, per plan hash, the DLQ records whose latest ledger
// entry says the plan redrove them (the event-id index is not counted
// again): what Ledger would give, counted as the ledger streams by, keeping
// one small entry per record and never the entries themselves.
func (s *PlanStore) RedrivenByPlan(ctx context.Context) (map[string]int, error) {
	plans := map[string]int32{} // plan hash -> index in hashes
	var hashes []string
	latest := map[string]int32{} // ledger key -> plan index, -1: settled
	var decodeErr error
	err := s.scan(ctx, LedgerTopic, func(r *kgo.Record) {
		if bytes.HasPrefix(r.Key, []byte(eventKeyPrefix)) {
			return
		}
		if r.Value == nil {
			delete(latest, string(r.Key))
			return
		}
		var e struct {
			Plan   string `json:"plan"`
			Action string `json:"action"`
		}
		if err := json.Unmarshal(r.Value, &e); err != nil {
			decodeErr = errors.Join(decodeErr, fmt.Errorf("ledger: record %s: %v", r.Key, err))
			return
		}
		i := int32(-1)
		if e.Action == redrive.LedgerRedriven {
			var ok bool
			if i, ok = plans[e.Plan]; !ok {
				i = int32(len(hashes))
				plans[e.Plan] = i
				hashes = append(hashes, e.Plan)
			}
		}
		latest[string(r.Key)] = i
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	out := map[string]int{}
	for _, i := range latest {
		if i >= 0 {
			out[hashes[i]]++
		}
	}
	return out, nil
}

// AppendLedger writes ledger entries outside a transaction (settling records
// by hand; the executor writes its entries transactionally with LedgerRecords).
func (s *PlanStore) AppendLedger(ctx context.Context, entries ...redrive.LedgerEntry) error {
	recs := make([]*kgo.Record, 0, len(entries))
	for _, e := range entries {
		rs, err := LedgerRecords(e)
		if err != nil {
			return err
		}
		recs = append(recs, rs...)
	}
	return s.produce(ctx, LedgerTopic, recs...)
}

// EnsureLedger creates the ledger topic (the executor's transactional
// producer needs it to exist).
func (s *PlanStore) EnsureLedger(ctx context.Context) error { return s.ensure(ctx, LedgerTopic) }
