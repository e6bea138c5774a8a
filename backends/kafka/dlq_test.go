package kafka

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
