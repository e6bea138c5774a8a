package bundled

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func startBroker(t *testing.T, dir string, seed string) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Start(ctx, Options{Listen: "127.0.0.1:0", DataDir: dir, Seed: seed})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func adminFor(t *testing.T, b *Broker, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addrs()...), kgo.MetadataMinAge(10 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestSeededTopology(t *testing.T) {
	b := startBroker(t, t.TempDir(), "")
	if !IsBundledClusterID(b.ClusterID()) {
		t.Fatalf("cluster id %q lacks the %q prefix", b.ClusterID(), ClusterIDPrefix)
	}
	if len(b.Addrs()) != 3 {
		t.Fatalf("addrs = %v, want 3 brokers", b.Addrs())
	}
	_, adm := adminFor(t, b)
	ctx := tctx(t)
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"orders": 24, "orders.dlq": 3, "shipment-jobs": 6, "shipment-jobs.DLT": 6,
		"payments": 12, "payments.DLT": 12, "orders-by-tenant": 24, "customer-profile": 6}
	for name, parts := range want {
		td, ok := tds[name]
		if !ok {
			t.Errorf("topic %s missing", name)
			continue
		}
		if len(td.Partitions) != parts {
			t.Errorf("%s: %d partitions, want %d", name, len(td.Partitions), parts)
		}
		for _, p := range td.Partitions {
			r := slices.Clone(p.Replicas)
			slices.Sort(r)
			if !slices.Equal(r, []int32{0, 1, 2}) {
				t.Errorf("%s/%d replicas %v, want one copy on each of brokers 0,1,2", name, p.Partition, p.Replicas)
			}
			if !slices.Equal(p.ISR, p.Replicas) {
				t.Errorf("%s/%d ISR %v != replicas %v on a healthy cluster", name, p.Partition, p.ISR, p.Replicas)
			}
		}
	}
	if len(tds) != len(want) {
		t.Errorf("topics = %v, want exactly the seeded ones", tds.Names())
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "orders", "customer-profile")
	if err != nil {
		t.Fatal(err)
	}
	get := func(topic, key string) string {
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatalf("%s configs: %v", topic, err)
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				return c.MaybeValue()
			}
		}
		return ""
	}
	if v := get("orders", "min.insync.replicas"); v != "2" {
		t.Errorf("orders min.insync.replicas = %q, want 2", v)
	}
	if v := get("orders", "retention.ms"); v != "259200000" {
		t.Errorf("orders retention.ms = %q, want 259200000 (3 days)", v)
	}
	if v := get("customer-profile", "cleanup.policy"); v != "compact" {
		t.Errorf("customer-profile cleanup.policy = %q, want compact", v)
	}
}

func TestSeedNone(t *testing.T) {
	b := startBroker(t, t.TempDir(), SeedNone)
	_, adm := adminFor(t, b)
	tds, err := adm.ListTopics(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(tds) != 0 {
		t.Fatalf("seed none created topics %v", tds.Names())
	}
}

func TestPersistenceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, "")
	id := b.ClusterID()
	cl, adm := adminFor(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := tctx(t)
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % 3), Key: []byte(fmt.Sprintf("order:%d", i)),
			Value: []byte(fmt.Sprintf(`{"n":%d}`, i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 3, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 2, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "email-notifier", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	// A seeded topic the user deletes must stay deleted.
	if _, err := adm.DeleteTopic(ctx, "orders.dlq"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	b2 := startBroker(t, dir, "")
	if b2.ClusterID() != id {
		t.Fatalf("cluster id changed across restart: %q -> %q", id, b2.ClusterID())
	}
	cl2, adm2 := adminFor(t, b2, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"orders": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()},
	}))
	tds, err := adm2.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tds["orders.dlq"]; ok {
		t.Errorf("orders.dlq was re-created on restart")
	}
	if len(tds) != 7 || len(tds["orders"].Partitions) != 24 {
		t.Errorf("after restart topics = %v (orders %d partitions)", tds.Names(), len(tds["orders"].Partitions))
	}
	got := map[string]*kgo.Record{}
	for len(got) < len(recs) {
		fs := cl2.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", len(got), len(recs), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = r })
	}
	for _, r := range recs {
		g := got[string(r.Key)]
		if g == nil || string(g.Value) != string(r.Value) || !g.Timestamp.Equal(r.Timestamp) || g.Partition != r.Partition {
			t.Errorf("record %s came back as %+v", r.Key, g)
		}
	}
	fo, err := adm2.FetchOffsets(ctx, "email-notifier")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := fo.Lookup("orders", 0); o.At != 3 {
		t.Errorf("committed orders/0 = %d, want 3", o.At)
	}
	if o, _ := fo.Lookup("orders", 1); o.At != 2 {
		t.Errorf("committed orders/1 = %d, want 2", o.At)
	}
}

func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	startBroker(t, dir, SeedNone)
	_, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", DataDir: dir, Seed: SeedNone})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second broker on the same data dir: err = %v, want 'in use'", err)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Listen: "nonsense"},
		{Listen: "127.0.0.1:65535", Brokers: 3},
		{Listen: "127.0.0.1:0", Seed: "bogus"},
		{Listen: "127.0.0.1:0", Brokers: -1},
	} {
		o.DataDir = t.TempDir()
		if b, err := Start(context.Background(), o); err == nil {
			b.Close()
			t.Errorf("Start(%+v) succeeded", o)
		}
	}
}

// metadata issues a plain Metadata request for the given topics.
func metadata(t *testing.T, cl *kgo.Client, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(tctx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestDegradedISR(t *testing.T) {
	b := startBroker(t, t.TempDir(), "")
	cl, adm := adminFor(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2),
		kgo.RecordDeliveryTimeout(3*time.Second))
	ctx := tctx(t)

	if err := b.SetDown(1, true); err != nil {
		t.Fatal(err)
	}
	md := metadata(t, cl, "orders")
	for _, br := range md.Brokers {
		if br.NodeID == 1 {
			t.Errorf("down broker 1 still listed among brokers")
		}
	}
	if len(md.Brokers) != 2 {
		t.Errorf("brokers = %d, want 2", len(md.Brokers))
	}
	for _, p := range md.Topics[0].Partitions {
		if len(p.Replicas) != 3 {
			t.Errorf("orders/%d replicas %v, want 3 (the assignment does not shrink)", p.Partition, p.Replicas)
		}
		if len(p.ISR) != 2 || slices.Contains(p.ISR, 1) {
			t.Errorf("orders/%d ISR %v, want the two up replicas", p.Partition, p.ISR)
		}
		if !slices.Equal(p.OfflineReplicas, []int32{1}) {
			t.Errorf("orders/%d offline %v, want [1]", p.Partition, p.OfflineReplicas)
		}
		if p.Leader == 1 || p.Leader < 0 {
			t.Errorf("orders/%d leader %d, want an up broker", p.Partition, p.Leader)
		}
	}
	// kadm (what the backend uses) sees the same.
	tds, err := adm.ListTopics(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tds["orders"].Partitions {
		if len(p.ISR) != 2 {
			t.Fatalf("kadm orders/%d ISR %v", p.Partition, p.ISR)
		}
	}
	// One copy lost of three with min.insync.replicas=2: writes still succeed
	// on every partition, including those whose leader moved.
	var recs []*kgo.Record
	for p := int32(0); p < 24; p++ {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("x")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce with one broker down: %v", err)
	}

	// Two down: one copy left, below min.insync.replicas=2.
	if err := b.SetDown(2, true); err != nil {
		t.Fatal(err)
	}
	md = metadata(t, cl, "orders", "payments")
	for _, tp := range md.Topics {
		for _, p := range tp.Partitions {
			if !slices.Equal(p.ISR, []int32{0}) || p.Leader != 0 {
				t.Errorf("%s/%d ISR %v leader %d, want ISR [0] led by 0", *tp.Topic, p.Partition, p.ISR, p.Leader)
			}
		}
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 5, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Errorf("acks=all produce under min ISR: err = %v, want NOT_ENOUGH_REPLICAS", err)
	}
	// payments has no min.insync.replicas override (1): writes still work.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "payments", Partition: 3, Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("produce to payments with one copy left: %v", err)
	}

	// All three down: no leader anywhere.
	if err := b.SetDown(0, true); err != nil {
		t.Fatal(err)
	}
	md = metadata(t, cl, "orders")
	if len(md.Brokers) != 0 {
		t.Errorf("brokers listed with all down: %v", md.Brokers)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Leader != -1 || p.ErrorCode != kerr.LeaderNotAvailable.Code || len(p.OfflineReplicas) != 3 {
			t.Errorf("orders/%d leader %d err %d offline %v, want offline partition", p.Partition, p.Leader, p.ErrorCode, p.OfflineReplicas)
		}
	}

	// DescribeTopicPartitions is edited the same way.
	for _, id := range []int32{0, 2} {
		if err := b.SetDown(id, false); err != nil {
			t.Fatal(err)
		}
	}
	dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "orders"
	dreq.Topics = append(dreq.Topics, rt)
	dreq.ResponsePartitionLimit = 100
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dresp.Topics[0].Partitions {
		if len(p.ISR) != 2 || slices.Contains(p.ISR, 1) || p.LeaderID == 1 {
			t.Errorf("DescribeTopicPartitions orders/%d ISR %v leader %d", p.Partition, p.ISR, p.LeaderID)
		}
	}
	if got := b.Down(); !slices.Equal(got, []int32{1}) {
		t.Errorf("Down() = %v, want [1]", got)
	}

	// Everything back up: kfake's honest healthy answer again.
	if err := b.SetDown(1, false); err != nil {
		t.Fatal(err)
	}
	md = metadata(t, cl, "orders")
	if len(md.Brokers) != 3 {
		t.Errorf("brokers after recovery = %d", len(md.Brokers))
	}
	for _, p := range md.Topics[0].Partitions {
		if len(p.ISR) != 3 || len(p.OfflineReplicas) != 0 {
			t.Errorf("orders/%d after recovery ISR %v offline %v", p.Partition, p.ISR, p.OfflineReplicas)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 5, Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("produce after recovery: %v", err)
	}
	if err := b.SetDown(7, true); err == nil {
		t.Errorf("SetDown of a broker that does not exist succeeded")
	}
}

// A consumer group keeps working while a broker is down: its coordinator
// moves off the down broker.
func TestDegradedGroupsKeepWorking(t *testing.T) {
	b := startBroker(t, t.TempDir(), "")
	for id := int32(0); id < 2; id++ {
		if err := b.SetDown(id, true); err != nil {
			t.Fatal(err)
		}
	}
	cl, _ := adminFor(t, b, kgo.ConsumerGroup("g-degraded"), kgo.ConsumeTopics("payments"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := tctx(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "payments", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("group consumer read nothing with brokers 0 and 1 down")
		}
		if fs.NumRecords() > 0 {
			break
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit with brokers down: %v", err)
	}
	if c := b.Kfake().CoordinatorFor("g-degraded"); c != 2 {
		t.Errorf("coordinator is broker %d, want the only up broker 2", c)
	}
}

func TestDegradePartition(t *testing.T) {
	down := map[int32]bool{1: true}
	l, isr, off := degradePartition([]int32{1, 2, 0}, 1, down)
	if l != 2 || !slices.Equal(isr, []int32{2, 0}) || !slices.Equal(off, []int32{1}) {
		t.Errorf("leader on down broker: got %d %v %v", l, isr, off)
	}
	l, isr, _ = degradePartition([]int32{0, 1, 2}, 2, down)
	if l != 2 || !slices.Equal(isr, []int32{0, 2}) {
		t.Errorf("leader up stays: got %d %v", l, isr)
	}
	l, isr, off = degradePartition([]int32{0, 1}, 0, map[int32]bool{0: true, 1: true})
	if l != -1 || !slices.Equal(isr, []int32{0}) || len(off) != 2 {
		t.Errorf("all down: got %d %v %v", l, isr, off)
	}
}

func TestListenPorts(t *testing.T) {
	host, ports, err := listenPorts("127.0.0.1:9092", 3)
	if err != nil || host != "127.0.0.1" || !slices.Equal(ports, []int{9092, 9093, 9094}) {
		t.Errorf("got %s %v %v", host, ports, err)
	}
	_, ports, _ = listenPorts("127.0.0.1:0", 2)
	if !slices.Equal(ports, []int{0, 0}) {
		t.Errorf("port 0: %v", ports)
	}
	for _, bad := range []string{"9092", "host:x", "h:70000"} {
		if _, _, err := listenPorts(bad, 1); err == nil || !strings.Contains(err.Error(), "listen") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func TestProbe(t *testing.T) {
	b := startBroker(t, t.TempDir(), SeedNone)
	id, err := Probe(context.Background(), b.Addrs()[0], 5*time.Second)
	if err != nil || id != b.ClusterID() {
		t.Fatalf("Probe = %q, %v; want %q", id, err, b.ClusterID())
	}
}

func TestSetDownAfterClose(t *testing.T) {
	b := startBroker(t, t.TempDir(), SeedNone)
	b.Close()
	if err := b.SetDown(1, true); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("SetDown on a closed broker: err = %v", err)
	}
}
