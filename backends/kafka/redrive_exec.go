package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

// RedriveTransport executes redrive batches on Kafka: each batch's records
// and their ledger entries are produced in one transaction, under a
// transactional id derived from the plan hash. Killing the process at any
// moment leaves either a committed batch (records and ledger entries both
// visible to read_committed readers) or an open transaction, which the next
// run's producer (same transactional id) aborts when it starts; the next run
// then skips what the ledger says is done. Two operators running the same
// plan at once fence each other the same way.
type RedriveTransport struct {
	k  *Cluster
	tx *kgo.Client
	// gone is set once a step of a batch got no answer in time: the
	// producer may still hold records it retries, so it sends nothing more.
	gone error
}

// TransactionalID is the transactional id used for a plan.
func TransactionalID(planHash string) string {
	if len(planHash) > 40 {
		planHash = planHash[:40]
	}
	return "berth-redrive-" + planHash
}

// NewRedriveTransport prepares the ledger topic and a transactional producer
// for the plan.
func (k *Cluster) NewRedriveTransport(ctx context.Context, planHash string) (*RedriveTransport, error) {
	if err := NewPlanStore(k.c).EnsureLedger(ctx); err != nil {
		return nil, err
	}
	tx, err := k.c.NewKgo(
		kgo.TransactionalID(TransactionalID(planHash)),
		kgo.TransactionTimeout(60*time.Second),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		// Keyed records go where Kafka's default partitioner puts them
		// (murmur2), so per-key order holds with the original producers'.
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		// Classic transactions (EndTxn v4, produce v11 after
		// AddPartitionsToTxn), not KIP-890 part 2. Under part 2 the
		// broker bumps the producer epoch at every commit and the client
		// must restart each partition's sequence at 0; franz-go v1.22.3
		// sometimes misses that restart for a partition written in the
		// transaction before (seen against the bundled broker under load:
		// the next batch's ledger write went out at epoch 1 with sequence
		// 3, continuing epoch 0's, and was refused
		// OUT_OF_ORDER_SEQUENCE_NUMBER, failing the batch). With one
		// epoch for the whole run, sequences simply continue. Exactly-once
		// is the same: each batch and its ledger entries are one
		// transaction, and a later run fences this one at InitProducerID.
		ClassicTransactions(),
	)
	if err != nil {
		return nil, err
	}
	// Initialise the producer id now, not at the first send: InitProducerId
	// fences an earlier run of this plan and aborts the transaction it left
	// open, so its records never block read_committed readers — even when
	// this run finds nothing left to send.
	if _, _, err := tx.ProducerID(ctx); err != nil {
		tx.Close()
		return nil, fmt.Errorf("init transactional producer %s: %s", TransactionalID(planHash), codeName(err))
	}
	return &RedriveTransport{k: k, tx: tx}, nil
}

// ClassicTransactions caps a transactional client below KIP-890 part 2
// (see NewRedriveTransport): every client that runs more than one
// transaction against the bundled broker needs it, or a later transaction
// can be refused OUT_OF_ORDER_SEQUENCE_NUMBER (franz-go v1.22.3).
func ClassicTransactions() kgo.Opt { return kgo.MaxVersions(classicTransactions()) }

// classicTransactions is the newest protocol the client speaks, capped
// below KIP-890 part 2: franz-go opts into it only when produce >= 12,
// EndTxn >= 5 and TxnOffsetCommit >= 5 are allowed.
func classicTransactions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return v
}

// Close releases the producer.
func (t *RedriveTransport) Close() error { t.tx.Close(); return nil }

// Read returns the DLQ records at coords.
func (t *RedriveTransport) Read(ctx context.Context, dlq string, coords []redrive.Coord) (map[redrive.Coord]redrive.Record, error) {
	return t.k.ReadDLQByCoord(ctx, dlq, coords)
}

// ReadDLQByCoord returns the DLQ records at coords by coordinates; a record
// that is gone (retention, compaction) is absent.
func (k *Cluster) ReadDLQByCoord(ctx context.Context, dlq string, coords []redrive.Coord) (map[redrive.Coord]redrive.Record, error) {
	recs, _, err := k.ReadDLQAt(ctx, dlq, coords)
	if err != nil {
		return nil, err
	}
	out := make(map[redrive.Coord]redrive.Record, len(recs))
	for _, r := range recs {
		out[r.Coord()] = r
	}
	return out, nil
}

// Publish produces one batch and its ledger entries in one transaction.
// Each step (produce, ledger, commit) is bounded by the cluster's
// operation timeout (--timeout): one the broker does not answer in time
// ends the run with backends.ErrUnreachable, saying whether the batch may
// have been committed.
func (t *RedriveTransport) Publish(ctx context.Context, batch []redrive.Outgoing) ([]redrive.LedgerEntry, error) {
	if t.gone != nil {
		return nil, t.gone
	}
	if err := t.tx.BeginTransaction(); err != nil {
		return nil, txErr(fmt.Errorf("begin transaction: %w", err), err)
	}
	abort := func(err error) ([]redrive.LedgerEntry, error) {
		if t.gone != nil {
			// No answer: nothing to abort with. The broker aborts the
			// open transaction at its timeout, or the next run fences it.
			return nil, t.gone
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = t.tx.AbortBufferedRecords(actx)
		_ = t.tx.EndTransaction(actx, kgo.TryAbort)
		return nil, err
	}
	recs := make([]*kgo.Record, len(batch))
	for i, o := range batch {
		r := &kgo.Record{Topic: o.Target, Value: o.Record.Value}
		if !o.Record.KeyNull {
			r.Key = o.Record.Key
		}
		for _, h := range o.Record.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		recs[i] = r
	}
	// Produced in order on one producer: records for the same key land on
	// the same partition in the order sent.
	if err := t.step(ctx, "produce", func(ctx context.Context) error { return t.tx.ProduceSync(ctx, recs...).FirstErr() }); err != nil {
		return abort(t.failed(fmt.Errorf("produce: %s", codeName(err)), err))
	}
	entries := make([]redrive.LedgerEntry, len(batch))
	ledger := make([]*kgo.Record, 0, 2*len(batch))
	for i, o := range batch {
		e := o.Ledger
		e.TargetPartition, e.TargetOffset = recs[i].Partition, recs[i].Offset
		entries[i] = e
		lr, err := LedgerRecords(e)
		if err != nil {
			return abort(err)
		}
		ledger = append(ledger, lr...)
	}
	if err := t.step(ctx, "ledger write", func(ctx context.Context) error { return t.tx.ProduceSync(ctx, ledger...).FirstErr() }); err != nil {
		return abort(t.failed(fmt.Errorf("write ledger: %s", codeName(err)), err))
	}
	if err := t.step(ctx, "commit", func(ctx context.Context) error { return t.tx.EndTransaction(ctx, kgo.TryCommit) }); err != nil {
		return abort(t.failed(fmt.Errorf("commit transaction: %s", codeName(err)), err))
	}
	return entries, nil
}

// step runs one step of a batch's transaction, waiting at most the
// cluster's operation timeout for the broker's answer (awaitAnswer: a run
// whose broker went away mid-batch spun for minutes). Without an answer
// the producer is done (t.gone) and the run stops.
func (t *RedriveTransport) step(ctx context.Context, what string, fn func(context.Context) error) error {
	d := t.k.c.opts.timeout()
	answered, err := awaitAnswer(ctx, d, fn)
	var dial *net.OpError
	if answered && !errors.As(err, &dial) {
		return err
	}
	why := fmt.Sprintf("no answer to the batch's %s within %s (--timeout)", what, d)
	if answered {
		why = fmt.Sprintf("the batch's %s could not reach the broker (%s)", what, codeName(err))
	}
	outcome := "the batch's transaction was not committed, so none of it is visible (the broker aborts it at its transaction timeout, or the next run fences it)"
	if what == "commit" {
		outcome = "whether the batch was committed is not known: the next run reads the ledger and sends only what it does not hold"
	}
	t.gone = backends.Failure(fmt.Sprintf("kafka unreachable: %s: the run stopped; %s; run the plan again once the cluster answers", why, outcome), backends.ErrUnreachable)
	return t.gone
}

// failed is the error of a failed step: the step's own when it got no
// answer (t.gone), else txErr.
func (t *RedriveTransport) failed(msg, err error) error {
	if t.gone != nil {
		return t.gone
	}
	return txErr(msg, err)
}

// txErr is msg (a failed step of a batch's transaction), matching
// backends.ErrTakenOver when the broker's answer err says a newer producer
// with the plan's transactional id fenced this one: another run of the
// plan started since.
func txErr(msg, err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return backends.Failure(msg.Error(), backends.ErrTakenOver)
	}
	return msg
}

// Mismatch is a redriven record whose read-back copy differs from the plan.
type Mismatch struct {
	DLQ    redrive.Coord `json:"dlq"`
	Target string        `json:"target"`
	Where  string        `json:"where"`
	Reason string        `json:"reason"`
}

// VerifyRedriven reads back every redriven copy named in the ledger entries
// (read_committed) and compares its payload hash with the plan's.
func (k *Cluster) VerifyRedriven(ctx context.Context, entries []redrive.LedgerEntry, want map[redrive.Coord]string) ([]Mismatch, error) {
	type at struct {
		topic     string
		partition int32
		offset    int64
	}
	byTarget := map[at]redrive.LedgerEntry{}
	lo, hi := map[rangeKey]int64{}, map[rangeKey]int64{}
	for _, e := range entries {
		a := at{e.Target, e.TargetPartition, e.TargetOffset}
		byTarget[a] = e
		rk := rangeKey{e.Target, e.TargetPartition}
		if v, ok := lo[rk]; !ok || e.TargetOffset < v {
			lo[rk] = e.TargetOffset
		}
		if e.TargetOffset+1 > hi[rk] {
			hi[rk] = e.TargetOffset + 1
		}
	}
	var ranges []readRange
	for rk, from := range lo {
		ranges = append(ranges, readRange{topic: rk.topic, partition: rk.partition, from: from, end: hi[rk]})
	}
	seen := map[at]bool{}
	var out []Mismatch
	if _, err := k.c.readRanges(ctx, ranges, 0, 0, func(r *kgo.Record) {
		a := at{r.Topic, r.Partition, r.Offset}
		e, ok := byTarget[a]
		if !ok {
			return
		}
		seen[a] = true
		c := redrive.Coord{Partition: e.Partition, Offset: e.Offset}
		sum := sha256.Sum256(r.Value)
		if w, ok := want[c]; ok && hex.EncodeToString(sum[:]) != w {
			out = append(out, Mismatch{DLQ: c, Target: e.Target, Where: fmt.Sprintf("%d:%d", r.Partition, r.Offset), Reason: "payload hash differs"})
		}
	}, nil); err != nil {
		return nil, err
	}
	for a, e := range byTarget {
		if !seen[a] {
			out = append(out, Mismatch{DLQ: redrive.Coord{Partition: e.Partition, Offset: e.Offset}, Target: e.Target, Where: fmt.Sprintf("%d:%d", a.partition, a.offset), Reason: "not found (read_committed)"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Where < out[j].Where })
	return out, nil
}

// DLQEnds returns the DLQ's current end offsets (where a re-failure watch starts).
func (k *Cluster) DLQEnds(ctx context.Context, dlq string) (map[int32]int64, error) {
	ts, err := k.Topics(ctx, dlq)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, p := range ts[0].Partitions {
		out[p.Partition] = p.HighWatermark
	}
	return out, nil
}

// Refailure is a redriven record that came back to the DLQ.
type Refailure struct {
	DLQ       redrive.Coord `json:"dlq"`    // where it landed again
	Origin    string        `json:"origin"` // berth-redrive-origin: the record it was redriven from
	Exception string        `json:"exception,omitempty"`
}
