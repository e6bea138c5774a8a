package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

// dltRecord is a record as Spring's DeadLetterPublishingRecoverer writes it.
func dltRecord(dlq string, partition int32, origTopic string, origPartition int32, origOffset int64, key, value string, ts time.Time) *kgo.Record {
	p := make([]byte, 4)
	binary.BigEndian.PutUint32(p, uint32(origPartition))
	o := make([]byte, 8)
	binary.BigEndian.PutUint64(o, uint64(origOffset))
	return &kgo.Record{
		Topic: dlq, Partition: partition, Key: []byte(key), Value: []byte(value), Timestamp: ts,
		Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte(origTopic)},
			{Key: "kafka_dlt-original-partition", Value: p},
			{Key: "kafka_dlt-original-offset", Value: o},
			{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte("java.net.SocketTimeoutException")},
			{Key: "kafka_dlt-exception-message", Value: []byte(fmt.Sprintf("Read timed out after %d ms", 1000+origOffset))},
		},
	}
}

func produceManual(t *testing.T, kc *kafkatest.Cluster, recs ...*kgo.Record) []int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res := cl.ProduceSync(tctx(t), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs := make([]int64, len(res))
	for i, r := range res {
		offs[i] = r.Record.Offset
	}
	return offs
}

func TestDLQDiscoveryByNameAndDeclaredPairs(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	for _, name := range []string{"payments", "payments.DLT", "shipments-dlt", "a.dlq", "b-dlq", "c.DLQ", "parked-orders", "DLT", "orders.DLTX"} {
		kc.CreateTopic(t, name, 1, 1, nil)
	}
	cl := dialCluster(t, kc)
	dlqs, topics, err := cl.DLQs(tctx(t), []redrive.Pair{{DLQ: "parked-orders", Original: "orders"}, {DLQ: "missing", Original: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dlqs {
		names = append(names, d.Name)
		if _, ok := topics[d.Name]; !ok {
			t.Errorf("no partitions for %s", d.Name)
		}
	}
	want := []string{"a.dlq", "b-dlq", "c.DLQ", "parked-orders", "payments.DLT", "shipments-dlt"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("dlqs %v, want %v", names, want)
	}
	for _, d := range dlqs {
		if d.Name == "parked-orders" && d.Declared != "orders" {
			t.Fatalf("declared pair lost: %+v", d)
		}
	}
}

func TestReadDLQIsBoundedAndOrdered(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "payments.DLT", 2, 1, nil)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, dltRecord("payments.DLT", int32(i%2), "payments", 0, int64(i), fmt.Sprintf("order-%d", i), fmt.Sprintf(`{"eventId":"e%d"}`, i), t0.Add(time.Duration(i)*time.Second)))
	}
	produceManual(t, kc, recs...)
	cl := dialCluster(t, kc)

	all, err := cl.ReadDLQ(tctx(t), "payments.DLT", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Records) != 10 || all.Total != 10 || !all.Complete {
		t.Fatalf("read %d of %d complete=%v", len(all.Records), all.Total, all.Complete)
	}
	if r := all.Records[0]; r.Partition != 0 || r.Offset != 0 || string(r.Key) != "order-0" || len(r.Headers) != 5 || !r.Timestamp.Equal(t0) {
		t.Fatalf("first record %+v", r)
	}
	some, err := cl.ReadDLQ(tctx(t), "payments.DLT", ReadOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(some.Records) != 3 || some.Complete || some.Total != 10 {
		t.Fatalf("bounded read: %d records, complete=%v total=%d", len(some.Records), some.Complete, some.Total)
	}
	one, err := cl.ReadDLQ(tctx(t), "payments.DLT", ReadOptions{Partitions: []int32{1}})
	if err != nil || len(one.Records) != 5 || one.Records[0].Partition != 1 {
		t.Fatalf("partition 1: %d records, %v", len(one.Records), err)
	}

	at, missing, err := cl.ReadDLQAt(tctx(t), "payments.DLT", []redrive.Coord{{Partition: 1, Offset: 2}, {Partition: 0, Offset: 4}, {Partition: 0, Offset: 99}, {Partition: 7, Offset: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 2 || at[0].Partition != 0 || at[0].Offset != 4 || at[1].Partition != 1 || at[1].Offset != 2 {
		t.Fatalf("records at coordinates: %+v", at)
	}
	if len(missing) != 2 {
		t.Fatalf("missing %v", missing)
	}

	// An empty DLQ reads as complete and empty.
	kc.CreateTopic(t, "empty.DLT", 1, 1, nil)
	empty, err := cl.ReadDLQ(tctx(t), "empty.DLT", ReadOptions{})
	if err != nil || len(empty.Records) != 0 || !empty.Complete {
		t.Fatalf("empty: %+v %v", empty, err)
	}
	if _, err := cl.ReadDLQ(tctx(t), "no-such.DLT", ReadOptions{}); err == nil {
		t.Fatal("reading a missing DLQ succeeded")
	}
}

func TestOrderingScanFindsNewerSameKeyRecordAndReportsProgress(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "payments", 1, 1, nil)
	var orig []*kgo.Record
	for i := 0; i < 50; i++ {
		key := fmt.Sprintf("order-%d", i)
		if i == 30 {
			key = "order-3" // a newer event for order-3 after its failed one at offset 3
		}
		orig = append(orig, &kgo.Record{Topic: "payments", Partition: 0, Key: []byte(key), Value: []byte("v")})
	}
	produceManual(t, kc, orig...)
	cl := dialCluster(t, kc)

	located := func(off int64, key string) redrive.Candidate {
		return redrive.Candidate{Coord: redrive.Coord{Partition: 0, Offset: off}, Key: []byte(key),
			Origin: redrive.Origin{Topic: "payments", Partition: 0, Offset: off, HasPartition: true, HasOffset: true}}
	}
	cs := []redrive.Candidate{located(3, "order-3"), located(5, "order-5")}
	s := redrive.NewOrderingScan(cs, []bool{true, true})
	var seen []ScanProgress
	if err := cl.ScanOrdering(tctx(t), s, 0, func(p ScanProgress) { seen = append(seen, p) }); err != nil {
		t.Fatal(err)
	}
	vs := s.Verdicts(false)
	if vs[0].Reason != redrive.ReasonOrderingHazard || *vs[0].NewerOffset != 30 || !vs[1].Included {
		t.Fatalf("verdicts %+v", vs)
	}
	if len(seen) < 2 || seen[len(seen)-1].Read != 46 || seen[len(seen)-1].Total != 46 || seen[0].Read != 0 {
		t.Fatalf("progress %+v (want 0..46 of 46)", seen)
	}

	// A bound short of the end blocks rather than guessing.
	s = redrive.NewOrderingScan(cs[1:], []bool{true})
	if err := cl.ScanOrdering(tctx(t), s, 10, nil); err != nil {
		t.Fatal(err)
	}
	if v := s.Verdicts(false)[0]; v.Reason != redrive.ReasonCheckFailed {
		t.Fatalf("bounded scan verdict %+v", v)
	}
	// An original topic that does not exist blocks.
	gone := located(1, "k")
	gone.Origin.Topic = "deleted-topic"
	s = redrive.NewOrderingScan([]redrive.Candidate{gone}, []bool{true})
	if err := cl.ScanOrdering(tctx(t), s, 0, nil); err != nil {
		t.Fatal(err)
	}
	if v := s.Verdicts(false)[0]; v.Reason != redrive.ReasonCheckFailed {
		t.Fatalf("missing topic verdict %+v", v)
	}
}

// A record that berth dlq show lists is found by its coordinates even when
// the broker is slow to answer the read (a busy machine, a 3-broker demo):
// the first fetch here is answered after 4s, longer than the idle time of
// a bounded read, which used to stop the read short and report the record
// as "no record at 0:1".
func TestReadDLQAtWaitsForASlowBroker(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "payments.DLT", 3, 3, nil)
	ts := time.Now().Add(-time.Minute)
	produceManual(t, kc,
		dltRecord("payments.DLT", 0, "payments", 0, 7, "order-7", "a", ts),
		dltRecord("payments.DLT", 0, "payments", 0, 9, "order-9", "b", ts))
	cl := dialCluster(t, kc)
	var slowed atomic.Bool
	kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if slowed.CompareAndSwap(false, true) {
			kc.SleepControl(func() { time.Sleep(4 * time.Second) })
		}
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at, missing, err := cl.ReadDLQAt(ctx, "payments.DLT", []redrive.Coord{{Partition: 0, Offset: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 0 || len(at) != 1 || at[0].Offset != 1 || string(at[0].Key) != "order-9" {
		t.Fatalf("records %+v, missing %v: want the record at 0:1", at, missing)
	}
	if !slowed.Load() {
		t.Fatal("no fetch was slowed: the test did not test a slow broker")
	}

	// Where there is no record the read still says so: a commit marker
	// (partition 1: a record at 0, its marker at 1) and aborted data
	// (partition 2: aborted at 0, its marker at 1, a record at 2).
	tx, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.TransactionalID("berth-test-readat"), ClassicTransactions(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for _, w := range []struct {
		partition int32
		commit    bool
	}{{1, true}, {2, false}, {2, true}} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, dltRecord("payments.DLT", w.partition, "payments", w.partition, 1, "k", "v", ts)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(w.commit)); err != nil {
			t.Fatal(err)
		}
	}
	at, missing, err = cl.ReadDLQAt(ctx, "payments.DLT", []redrive.Coord{{Partition: 1, Offset: 1}, {Partition: 2, Offset: 0}, {Partition: 2, Offset: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 1 || at[0].Partition != 2 || at[0].Offset != 2 || fmt.Sprint(missing) != "[1:1 2:0]" {
		t.Fatalf("records %+v, missing %v: want 2:2, and 1:1 (marker) and 2:0 (aborted) missing", at, missing)
	}
	// Alone, the aborted offset is a range whose next record lies past
	// its end: that ends the read at once (not a wait for more).
	if at, missing, err = cl.ReadDLQAt(ctx, "payments.DLT", []redrive.Coord{{Partition: 2, Offset: 0}}); err != nil || len(at) != 0 || fmt.Sprint(missing) != "[2:0]" {
		t.Fatalf("aborted 2:0: records %+v, missing %v, %v", at, missing, err)
	}
}
