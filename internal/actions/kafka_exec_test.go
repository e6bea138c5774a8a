package actions_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

// The executor over the Kafka transport: transactions, resumption, pacing.

func be32(v int32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(v)); return b }

func be64(v int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(v)); return b }

// seedDLQ writes n Spring-style dead letters for records of "orig" into
// "orig.DLT": keys cycle over 3 order ids so same-key order matters.
func seedDLQ(t *testing.T, kc *kafkatest.Cluster, n int) {
	t.Helper()
	kc.CreateTopic(t, "orig", 3, 1, nil)
	kc.CreateTopic(t, "orig.DLT", 1, 1, nil)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic: "orig.DLT",
			Key:   []byte(fmt.Sprintf("order:%d", i%3)),
			Value: []byte(fmt.Sprintf(`{"eventId":"evt-%03d","seq":%d}`, i, i)),
			Headers: []kgo.RecordHeader{
				{Key: "kafka_dlt-original-topic", Value: []byte("orig")},
				{Key: "kafka_dlt-original-partition", Value: be32(int32(i % 3))},
				{Key: "kafka_dlt-original-offset", Value: be64(int64(1000 + i))},
				{Key: "kafka_dlt-original-timestamp", Value: be64(time.Now().UnixMilli())},
				{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")},
				{Key: "kafka_dlt-exception-message", Value: []byte("Read timed out")},
				{Key: "traceparent", Value: []byte("00-abc-def-01")},
			},
		}
	}
	kc.Produce(t, recs...)
}

// seededDLQ is a broker of the test's own with n dead letters in
// "orig.DLT" (seedDLQ), a client to it (closed when the test ends) and the
// cluster over that client.
func seededDLQ(t *testing.T, n int) (*kafkatest.Cluster, *kafka.Client, *kafka.Cluster) {
	t.Helper()
	kc := kafkatest.Start(t, 1)
	seedDLQ(t, kc, n)
	c, err := kafka.Dial(context.Background(), kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return kc, c, kafka.NewCluster(c)
}

func planFor(t *testing.T, k *kafka.Cluster, dlq string, n int) redrive.File {
	t.Helper()
	res, err := k.ReadDLQ(context.Background(), dlq, kafka.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != n {
		t.Fatalf("read %d DLQ records, want %d", len(res.Records), n)
	}
	p := redrive.Plan{Version: redrive.PlanVersion, DLQ: dlq, Selection: redrive.Selection{Classes: []string{"all-test"}}, Rate: 0, BatchSize: 7, Author: "test", CreatedAt: time.Now().UTC()}
	for _, r := range res.Records {
		p.Records = append(p.Records, redrive.NewPlanRecord(redrive.ParseRecord(r, redrive.DefaultExtractors()), ""))
	}
	return redrive.NewFile(p)
}

func TestRedriveTransactionalExactlyOnce(t *testing.T) {
	kc, c, k := seededDLQ(t, 30)
	ctx := context.Background()
	f := planFor(t, k, "orig.DLT", 30)
	store := kafka.NewPlanStore(c)

	run := func() actions.Result {
		tr, err := k.NewRedriveTransport(ctx, f.Hash)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		res, err := actions.Execute(ctx, f, actions.Options{
			Cluster: f.Plan.Cluster, Policy: f.Plan.Policy, HasPolicy: true, Reader: tr, Publisher: tr,
			Recheck: func(ctx context.Context, p redrive.Plan, cs []redrive.Candidate, _ redrive.PolicySnapshot) ([]redrive.Verdict, error) {
				return redrive.Run(ctx, cs, redrive.CheckOptions{DLQ: p.DLQ}, redrive.Sources{
					Ledger: store.Ledger,
					Scan:   func(ctx context.Context, s *redrive.OrderingScan) error { return k.ScanOrdering(ctx, s, 0, nil) },
				})
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := run()
	if first.Sent != 30 || len(first.Failed) != 0 {
		t.Fatalf("first run: sent %d, failed %v, skipped %v", first.Sent, first.Failed, first.Skipped)
	}
	// The run's five transactions share the epoch its InitProducerID got
	// (0 on this fresh broker). Under KIP-890 part 2 every commit bumps it
	// and the client must restart each partition's sequence at 0, which
	// franz-go v1.22.3 sometimes misses: a batch's ledger write was then
	// refused OUT_OF_ORDER_SEQUENCE_NUMBER (twice in a few thousand runs
	// under load).
	txs, err := kc.Admin.DescribeTransactions(ctx, kafka.TransactionalID(f.Hash))
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		if tx.Err != nil || tx.ProducerEpoch != 0 {
			t.Fatalf("after 5 batches the run's producer is at epoch %d (%v): bumped per transaction", tx.ProducerEpoch, tx.Err)
		}
	}
	if len(txs) != 1 {
		t.Fatalf("%d transactional ids described, want 1", len(txs))
	}
	// The read-back compares every copy with what the run sent (its value
	// hashes) or, without them, with the DLQ records read again; a copy
	// that differs is a mismatch either way.
	kr := &actions.KafkaRedrive{Planner: actions.NewPlanner(k, &config.Config{}), Store: actions.KafkaStore(store)}
	altered := first.SentValues.Clone()
	bad := f.Plan.Records[4].Coord()
	altered.Set(bad, sha256.Sum256([]byte("not what was sent")))
	for name, sent := range map[string]*actions.SentValues{"sent": first.SentValues, "re-read": nil, "altered": altered} {
		v, err := kr.VerifySent(ctx, f, sent, 0, nil)
		if err != nil || v.Checked != 30 {
			t.Fatalf("%s: checked %d: %v", name, v.Checked, err)
		}
		if name == "altered" {
			if len(v.Mismatches) != 1 || v.Mismatches[0].DLQ != bad || v.Mismatches[0].Reason != "payload hash differs" {
				t.Fatalf("an altered copy reads as %+v", v.Mismatches)
			}
		} else if len(v.Mismatches) != 0 {
			t.Fatalf("%s: mismatches %+v", name, v.Mismatches)
		}
	}

	// An aborted transaction in between (a crash mid-batch) must leave nothing visible.
	tx, err := c.NewKgo(kgo.TransactionalID(kafka.TransactionalID(f.Hash)), kafka.ClassicTransactions())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: "orig", Key: []byte("order:0"), Value: []byte("ghost")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tx.Close() // no commit: the next transport's InitProducerID aborts it

	second := run()
	if second.Sent != 0 {
		t.Fatalf("second run sent %d records again", second.Sent)
	}
	for _, s := range second.Skipped {
		if s.Reason != redrive.ReasonAlreadyRedriven {
			t.Fatalf("second run skipped %v for %s, want already_redriven", s, s.Reason)
		}
	}

	// Read the target as a read_committed consumer: each event exactly once,
	// same-key order kept, Berth headers on, DLQ diagnostics off.
	target := readAllCommitted(t, kc, "orig")
	seen := map[string]int{}
	lastSeq := map[string]int{}
	for _, r := range target {
		if string(r.Value) == "ghost" {
			t.Fatal("a record of an aborted transaction is visible to read_committed")
		}
		var eventID string
		var seq int
		fmt.Sscanf(string(r.Value), `{"eventId":"%7s","seq":%d}`, &eventID, &seq)
		seen[eventID]++
		if prev, ok := lastSeq[string(r.Key)]; ok && seq < prev {
			t.Fatalf("key %s: seq %d arrived after %d", r.Key, seq, prev)
		}
		lastSeq[string(r.Key)] = seq
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		if hs[redrive.HeaderPlan] != f.Hash || hs[redrive.HeaderAttempt] != "1" || hs["traceparent"] == "" {
			t.Fatalf("headers not as expected: %v", hs)
		}
		if _, ok := hs["kafka_dlt-exception-message"]; ok {
			t.Fatal("DLQ diagnostics travelled with the redriven record")
		}
	}
	if len(seen) != 30 {
		t.Fatalf("target has %d distinct events, want 30", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s is in the target %d times", id, n)
		}
	}
	ledger, err := store.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 30 {
		t.Fatalf("ledger has %d entries, want 30", len(ledger))
	}
	dlq, err := k.ReadDLQ(ctx, "orig.DLT", kafka.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[redrive.Coord]string{}
	for _, r := range dlq.Records {
		sum := sha256.Sum256(r.Value)
		want[r.Coord()] = hex.EncodeToString(sum[:])
	}
	mism, err := k.VerifyRedriven(ctx, ledger, want)
	if err != nil || len(mism) != 0 {
		t.Fatalf("verification: %v %v", err, mism)
	}
}

func readAllCommitted(t *testing.T, kc *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends, err := kc.Admin.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	next := map[int32]int64{}
	var out []*kgo.Record
	for !caughtUp(next, want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: timed out at %v of %v", topic, next, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

func caughtUp(next, want map[int32]int64) bool {
	for p, e := range want {
		if next[p] < e {
			return false
		}
	}
	return true
}

// pacedRun executes a 20-record plan at 10 records/s in batches of 5 on a
// fake clock against a real broker; stall is added to the clock each time
// a chunk is re-checked (a slow chunk). It returns the progress reports,
// how long the limiter slept and how far the clock moved.
func pacedRun(t *testing.T, stall time.Duration) (progress []actions.Progress, slept, elapsed time.Duration) {
	t.Helper()
	_, c, k := seededDLQ(t, 20)
	ctx := context.Background()
	f := planFor(t, k, "orig.DLT", 20)
	f.Plan.Rate, f.Plan.BatchSize = 10, 5
	f = redrive.NewFile(f.Plan)
	tr, err := k.NewRedriveTransport(ctx, f.Hash)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	start := time.Unix(1_800_000_000, 0)
	clock := start
	res, err := actions.Execute(ctx, f, actions.Options{
		Cluster: f.Plan.Cluster, Policy: f.Plan.Policy, HasPolicy: true, Reader: tr, Publisher: tr,
		Now:   func() time.Time { return clock },
		Sleep: func(_ context.Context, d time.Duration) error { clock = clock.Add(d); slept += d; return nil },
		Recheck: func(ctx context.Context, p redrive.Plan, cs []redrive.Candidate, _ redrive.PolicySnapshot) ([]redrive.Verdict, error) {
			clock = clock.Add(stall)
			return redrive.Run(ctx, cs, redrive.CheckOptions{DLQ: p.DLQ}, redrive.Sources{
				Ledger: kafka.NewPlanStore(c).Ledger,
				Scan:   func(ctx context.Context, s *redrive.OrderingScan) error { return k.ScanOrdering(ctx, s, 0, nil) },
			})
		},
		Progress: func(p actions.Progress) { progress = append(progress, p) },
	})
	if err != nil || res.Sent != 20 {
		t.Fatalf("sent %d: %v", res.Sent, err)
	}
	return progress, slept, clock.Sub(start)
}

// TestRedriveETARespectsTheRate: the first batch goes out at once and the
// rate limiter paces the rest, so the reported ETA is never shorter than
// the plan's rate allows (a fake clock drives the limiter; the broker is
// real).
func TestRedriveETARespectsTheRate(t *testing.T) {
	progress, _, elapsed := pacedRun(t, 0)
	if progress[0].ETA < 2*time.Second {
		t.Fatalf("first ETA %v for 20 records at 10/s, want at least 2s", progress[0].ETA)
	}
	if elapsed < 1500*time.Millisecond {
		t.Fatalf("the limiter waited %v for 4 batches of 5 at 10/s", elapsed)
	}
}

// TestRedriveRateIsNotMadeUpAfterAStall: time spent before the first batch
// (re-reading and re-checking a chunk, here 10 s on a fake clock) is not
// made up by sending the next batches at once: every batch after the first
// waits its turn at the plan's rate.
func TestRedriveRateIsNotMadeUpAfterAStall(t *testing.T) {
	_, slept, _ := pacedRun(t, 10*time.Second)
	// 4 batches of 5 at 10 records/s: the last three each wait 500 ms.
	if slept < 1500*time.Millisecond {
		t.Fatalf("the limiter waited %v after a 10 s stall; 3 batches of 5 at 10/s must wait 1.5 s (a burst made up the stall)", slept)
	}
}

// A Kafka DLQ topic deleted while execute runs: what was sent stays sent
// and is counted, the run ends with the deleted DLQ named (as RabbitMQ's
// does), and the audit log records the run as failed with that error. The
// topic is deleted once the first chunk is sent; the chunk after the next
// is read only then.
func TestRedriveOnADLQTopicDeletedMidRun(t *testing.T) {
	kc, c, k := seededDLQ(t, 21)
	ctx := context.Background()
	f := planFor(t, k, "orig.DLT", 21)
	log, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := k.NewRedriveTransport(ctx, f.Hash)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	deleted := false
	res, err := actions.Execute(ctx, f, actions.Options{
		Cluster: f.Plan.Cluster, Policy: f.Plan.Policy, HasPolicy: true, Reader: tr, Publisher: tr, Audit: log, Chunk: 7,
		Recheck: func(ctx context.Context, p redrive.Plan, cs []redrive.Candidate, _ redrive.PolicySnapshot) ([]redrive.Verdict, error) {
			return redrive.Run(ctx, cs, redrive.CheckOptions{DLQ: p.DLQ}, redrive.Sources{
				Ledger: kafka.NewPlanStore(c).Ledger,
				Scan:   func(ctx context.Context, s *redrive.OrderingScan) error { return k.ScanOrdering(ctx, s, 0, nil) },
			})
		},
		Progress: func(p actions.Progress) {
			if p.Sent == 7 && !deleted {
				deleted = true
				if _, err := kc.Admin.DeleteTopics(ctx, "orig.DLT"); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
	gone := `its DLQ "orig.DLT" no longer exists (deleted since the plan was made?)`
	if err == nil || !strings.Contains(err.Error(), gone) || res.Sent != 14 || len(res.Failed) != 0 {
		t.Fatalf("execute with its DLQ deleted mid-run: sent %d, failed %d, skipped %v, err %v; want the first two chunks sent (14) and the error naming the DLQ", res.Sent, len(res.Failed), res.Skipped, err)
	}
	if got := len(readAllCommitted(t, kc, "orig")); got != 14 {
		t.Errorf("the original topic holds %d records, the run says 14 sent", got)
	}
	entries, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	last := entries[len(entries)-1]
	var d struct {
		Sent  int    `json:"sent"`
		Error string `json:"error"`
	}
	if err := last.Decode(&d); err != nil || last.Action != "redrive.execute.failed" || d.Sent != 14 || !strings.Contains(d.Error, gone) {
		t.Errorf("the audit log ends with %s %+v (%v); want redrive.execute.failed, 14 sent, the error naming the DLQ", last.Action, d, err)
	}
}
