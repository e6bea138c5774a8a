package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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

// LedgerRecord builds the ledger record for an entry (the executor produces
// it in the same transaction as the redriven copy).
func LedgerRecord(e redrive.LedgerEntry) (*kgo.Record, error) {
	v, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: LedgerTopic, Key: []byte(LedgerKey(e)), Value: v}, nil
}

// PlanStore reads and writes plans, signatures and the ledger.
type PlanStore struct {
	c *Client
	// Idle bounds how long a read waits for records that should be there.
	Idle time.Duration
}

// NewPlanStore returns the store on c's cluster.
func NewPlanStore(c *Client) *PlanStore { return &PlanStore{c: c} }

// ensure creates an internal topic if it does not exist: one partition
// (the store is small and read whole), compacted, replicated up to 3.
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
	resp, err := s.c.admin.CreateTopic(ctx, 1, rf, cfg, topic)
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

// readAll reads a store topic to its end and returns the latest value per
// key (tombstones delete). A topic that does not exist yet is empty.
func (s *PlanStore) readAll(ctx context.Context, topic string) (map[string][]byte, error) {
	// A fresh client: kgo answers metadata from a short-lived cache, and a
	// cached "no such topic" right after another terminal (or this one)
	// created the ledger would read as an empty ledger.
	fresh, err := s.c.NewKgo()
	if err != nil {
		return nil, err
	}
	k := NewCluster(&Client{opts: s.c.opts, cl: fresh, admin: kadm.NewClient(fresh)})
	ts, err := k.Topics(ctx, topic)
	fresh.Close()
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return map[string][]byte{}, nil
		}
		return nil, err
	}
	var ranges []readRange
	for _, p := range ts[0].Partitions {
		if p.Err != "" {
			return nil, fmt.Errorf("%s[%d]: %s", topic, p.Partition, p.Err)
		}
		end := p.LastStable
		if end < 0 {
			end = p.HighWatermark
		}
		ranges = append(ranges, readRange{topic: topic, partition: p.Partition, from: p.LogStart, end: end})
	}
	latest := map[string][]byte{}
	stats, err := s.c.readRanges(ctx, ranges, 0, s.Idle, func(r *kgo.Record) {
		if r.Value == nil {
			delete(latest, string(r.Key))
			return
		}
		latest[string(r.Key)] = r.Value
	}, nil)
	if err != nil {
		return nil, err
	}
	if !stats.complete() {
		// A partial read of the ledger would read as "not redriven": refuse.
		return nil, fmt.Errorf("%s: could not read to the end (stopped short)", topic)
	}
	return latest, nil
}

type storedPlan struct {
	Hash string       `json:"hash"`
	Plan redrive.Plan `json:"plan"`
}

// PutPlan stores a plan and its signatures. Storing the same plan again is
// harmless (same key, same content).
func (s *PlanStore) PutPlan(ctx context.Context, f redrive.File) error {
	if f.Hash != f.Plan.Hash() {
		return redrive.ErrHashMismatch
	}
	v, err := json.Marshal(storedPlan{Hash: f.Hash, Plan: f.Plan})
	if err != nil {
		return err
	}
	recs := []*kgo.Record{{Key: []byte(planKeyPrefix + f.Hash), Value: v}}
	for _, sig := range f.Signatures {
		r, err := sigRecord(f.Hash, sig)
		if err != nil {
			return err
		}
		recs = append(recs, r)
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

// Plans returns every stored plan with its signatures, newest first. A
// stored plan whose content does not match its hash is an error naming it.
func (s *PlanStore) Plans(ctx context.Context) ([]redrive.File, error) {
	latest, err := s.readAll(ctx, PlanTopic)
	if err != nil {
		return nil, err
	}
	files := map[string]*redrive.File{}
	for k, v := range latest {
		if !strings.HasPrefix(k, planKeyPrefix) {
			continue
		}
		var sp storedPlan
		if err := json.Unmarshal(v, &sp); err != nil {
			return nil, fmt.Errorf("%s: record %s is not a plan: %v", PlanTopic, k, err)
		}
		if got := sp.Plan.Hash(); got != sp.Hash || k != planKeyPrefix+sp.Hash {
			return nil, fmt.Errorf("%s: plan %s: %w", PlanTopic, k, redrive.ErrHashMismatch)
		}
		f := redrive.File{Hash: sp.Hash, Plan: sp.Plan, Signatures: []approval.Signature{}}
		files[sp.Hash] = &f
	}
	var sigKeys []string
	for k := range latest {
		if strings.HasPrefix(k, sigKeyPrefix) {
			sigKeys = append(sigKeys, k)
		}
	}
	sort.Strings(sigKeys)
	for _, k := range sigKeys {
		var sig approval.Signature
		if err := json.Unmarshal(latest[k], &sig); err != nil {
			return nil, fmt.Errorf("%s: record %s is not a signature: %v", PlanTopic, k, err)
		}
		if f, ok := files[sig.PlanHash]; ok && strings.HasPrefix(k, sigKeyPrefix+sig.PlanHash+"/") {
			f.Signatures = append(f.Signatures, sig)
		}
	}
	out := make([]redrive.File, 0, len(files))
	for _, f := range files {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Plan.CreatedAt.Equal(out[j].Plan.CreatedAt) {
			return out[i].Plan.CreatedAt.After(out[j].Plan.CreatedAt)
		}
		return out[i].Hash < out[j].Hash
	})
	return out, nil
}

// Plan returns the stored plan whose hash starts with prefix (at least 8
// hex digits); an ambiguous or unknown prefix is an error.
func (s *PlanStore) Plan(ctx context.Context, prefix string) (redrive.File, error) {
	if len(prefix) < 8 {
		return redrive.File{}, fmt.Errorf("plan %q: give at least 8 hex digits of its hash", prefix)
	}
	all, err := s.Plans(ctx)
	if err != nil {
		return redrive.File{}, err
	}
	var match []redrive.File
	for _, f := range all {
		if strings.HasPrefix(f.Hash, strings.ToLower(prefix)) {
			match = append(match, f)
		}
	}
	switch len(match) {
	case 0:
		return redrive.File{}, fmt.Errorf("plan %s: not in the plan store (%s)", prefix, PlanTopic)
	case 1:
		return match[0], nil
	}
	return redrive.File{}, fmt.Errorf("plan %s: ambiguous, %d plans match", prefix, len(match))
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
		var e redrive.LedgerEntry
		if err := json.Unmarshal(latest[k], &e); err != nil {
			return nil, fmt.Errorf("ledger: record %s: %v", k, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// AppendLedger writes ledger entries outside a transaction (settling records
// by hand; the executor writes its entries transactionally with LedgerRecord).
func (s *PlanStore) AppendLedger(ctx context.Context, entries ...redrive.LedgerEntry) error {
	recs := make([]*kgo.Record, 0, len(entries))
	for _, e := range entries {
		r, err := LedgerRecord(e)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	return s.produce(ctx, LedgerTopic, recs...)
}

// EnsureLedger creates the ledger topic (the executor's transactional
// producer needs it to exist).
func (s *PlanStore) EnsureLedger(ctx context.Context) error { return s.ensure(ctx, LedgerTopic) }
