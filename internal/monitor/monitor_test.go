package monitor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/internal/lag"
)

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// clock is an injected "now" the test advances by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type rig struct {
	kc      *kafkatest.Cluster
	cluster *kafka.Cluster
	reader  *kafka.TimestampReader
	clock   *clock
	mon     *Monitor
}

func newRig(t testing.TB, brokers int, cfg Config) *rig {
	t.Helper()
	kc := kafkatest.Start(t, brokers)
	c, err := kafka.Dial(tctx(t), kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	t.Cleanup(cl.Close)
	r := &rig{kc: kc, cluster: cl, reader: kafka.NewTimestampReader(c), clock: &clock{t: time.Now().Truncate(time.Second)}}
	cfg.Now = r.clock.now
	r.mon = New(cl, r.reader, cfg)
	return r
}

func (r *rig) refresh(t testing.TB) Snapshot {
	t.Helper()
	s, err := r.mon.Refresh(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// refreshUntil refreshes until cond holds (the client may answer Metadata
// from its cache for a moment after the cluster changes).
func (r *rig) refreshUntil(t testing.TB, cond func(Snapshot) bool) Snapshot {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s := r.refresh(t)
		if cond(s) || time.Now().After(deadline) {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func partRow(t *testing.T, s Snapshot, group, topic string, p int32) lag.PartitionLag {
	t.Helper()
	g, ok := s.Group(group)
	if !ok {
		t.Fatalf("group %s not in snapshot", group)
	}
	for _, r := range g.Partitions {
		if r.Topic.String() == topic && r.Partition == p {
			return r
		}
	}
	t.Fatalf("%s %s[%d] not in snapshot: %+v", group, topic, p, g.Partitions)
	return lag.PartitionLag{}
}

func TestAgesFromExplicitTimestamps(t *testing.T) {
	r := newRig(t, 3, Config{})
	r.kc.CreateTopic(t, "orders", 3, 1, map[string]string{"retention.ms": "86400000"})
	now := r.clock.now()
	// Partition 0: ten records, one a minute, the oldest 10 minutes ago.
	r.kc.ProduceTo(t, "orders", 0, 10, now.Add(-10*time.Minute), time.Minute)
	// Partition 1: five records from an hour ago; partition 2 stays empty.
	r.kc.ProduceTo(t, "orders", 1, 5, now.Add(-time.Hour), time.Second)
	// The group read 3 records of partition 0 and never committed on 1 or 2.
	r.kc.Commit(t, "billing", map[string]map[int32]int64{"orders": {0: 3}})

	s := r.refresh(t)
	p0 := partRow(t, s, "billing", "orders", 0)
	if p0.Lag != 7 || !p0.AgeKnown || p0.Age != 7*time.Minute || p0.TimestampType != backends.CreateTime || p0.Committed != 3 {
		t.Fatalf("p0: lag %d age %s known %v type %s", p0.Lag, p0.Age, p0.AgeKnown, p0.TimestampType)
	}
	// No commit: counted from the log start, age of the first record.
	p1 := partRow(t, s, "billing", "orders", 1)
	if p1.Committed != lag.NoCommit || p1.Lag != 5 || p1.Age != time.Hour {
		t.Fatalf("p1: committed %d lag %d age %s", p1.Committed, p1.Lag, p1.Age)
	}
	// Empty partition: nothing to read.
	p2 := partRow(t, s, "billing", "orders", 2)
	if p2.Lag != 0 || p2.Age != 0 || p2.Status != lag.OK {
		t.Fatalf("p2: %+v", p2)
	}
	g, _ := s.Group("billing")
	if g.MaxAge != time.Hour || g.MaxAgeTopic != "orders" || g.MaxAgePartition != 1 || g.TotalLag != 12 {
		t.Fatalf("roll-up: max age %s at %s[%d], total %d", g.MaxAge, g.MaxAgeTopic, g.MaxAgePartition, g.TotalLag)
	}
	// Retention 24h: an hour-old backlog has 23h before loss.
	if !p1.TimeToLossKnown || p1.TimeToLoss != 23*time.Hour || p1.RetentionRisk {
		t.Fatalf("time to loss %s known %v risk %v", p1.TimeToLoss, p1.TimeToLossKnown, p1.RetentionRisk)
	}
	// No members own anything: lag with no owner is STOPPED; breach of the
	// default 5m SLO.
	if g.Status != lag.STOPPED || !g.Breach {
		t.Fatalf("group status %s breach %v", g.Status, g.Breach)
	}
	// Ages move with the clock, without reading the log again.
	before := r.reader.Fetches()
	r.clock.add(30 * time.Second)
	s = r.refresh(t)
	if p0 = partRow(t, s, "billing", "orders", 0); p0.Age != 7*time.Minute+30*time.Second {
		t.Fatalf("age after 30s: %s", p0.Age)
	}
	if n := r.reader.Fetches() - before; n != 0 {
		t.Fatalf("refresh without new commits sent %d Fetch requests", n)
	}
}

// A second refresh with no new commits sends no Fetch, counted at the
// brokers (a control hook that lets every request through).
func TestSecondRefreshSendsNoFetch(t *testing.T) {
	r := newRig(t, 3, Config{})
	r.kc.CreateTopic(t, "t", 12, 1, nil)
	now := r.clock.now()
	commits := map[int32]int64{}
	for p := int32(0); p < 12; p++ {
		r.kc.ProduceTo(t, "t", p, 5, now.Add(-time.Hour), time.Second)
		commits[p] = int64(p % 4)
	}
	for g := 0; g < 5; g++ {
		r.kc.Commit(t, fmt.Sprintf("g%d", g), map[string]map[int32]int64{"t": commits})
	}
	var fetches atomic.Int64
	r.kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		r.kc.KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})
	r.refresh(t)
	first := fetches.Load()
	if first == 0 || first > 6 {
		t.Fatalf("first refresh: %d Fetch requests over 3 brokers (want batched, 1..6)", first)
	}
	r.clock.add(5 * time.Second)
	r.refresh(t)
	if n := fetches.Load() - first; n != 0 {
		t.Fatalf("second refresh with no new commits sent %d Fetch requests", n)
	}
	// A commit that moves inside records already read needs no Fetch either.
	r.kc.Commit(t, "g0", map[string]map[int32]int64{"t": {0: 2}})
	r.clock.add(5 * time.Second)
	s := r.refresh(t)
	if n := fetches.Load() - first; n != 0 {
		t.Fatalf("commit within a read range sent %d Fetch requests", n)
	}
	if p := partRow(t, s, "g0", "t", 0); p.Age != time.Hour-2*time.Second+10*time.Second {
		t.Fatalf("age at offset 2: %s", p.Age)
	}
}

func TestExpiredCompactedAndTransactional(t *testing.T) {
	r := newRig(t, 1, Config{})
	now := r.clock.now()
	// Retention deleted records the group had not read.
	r.kc.CreateTopic(t, "ret", 1, 1, nil)
	r.kc.ProduceTo(t, "ret", 0, 10, now.Add(-20*time.Minute), time.Minute)
	r.kc.Commit(t, "slow", map[string]map[int32]int64{"ret": {0: 2}})
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "ret", Partition: 0, At: 6})
	if resp, err := r.kc.Admin.DeleteRecords(tctx(t), os); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	// Compacted topic: the age is still exact; lag is flagged as an upper bound.
	r.kc.CreateTopic(t, "state", 1, 1, map[string]string{"cleanup.policy": "compact"})
	r.kc.ProduceTo(t, "state", 0, 4, now.Add(-3*time.Minute), time.Minute)
	r.kc.Commit(t, "slow", map[string]map[int32]int64{"state": {0: 1}})
	// Transactional topic: committed data, an aborted transaction, markers.
	r.kc.CreateTopic(t, "txn", 1, 1, nil)
	tx, err := kgo.NewClient(kgo.SeedBrokers(r.kc.Addrs...), kgo.TransactionalID("berth-mon"), kafka.ClassicTransactions(), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	txn := func(commit bool, at time.Time) {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(tctx(t), &kgo.Record{Topic: "txn", Value: []byte("x"), Timestamp: at}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(tctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, now.Add(-time.Hour))       // 0 data, 1 commit marker
	txn(false, now.Add(-30*time.Minute)) // 2 aborted, 3 abort marker
	r.kc.Commit(t, "txn-done", map[string]map[int32]int64{"txn": {0: 1}})
	r.kc.Commit(t, "txn-behind", map[string]map[int32]int64{"txn": {0: 0}})

	s := r.refresh(t)
	ret := partRow(t, s, "slow", "ret", 0)
	if ret.Status != lag.EXPIRED || ret.Lost != 4 || ret.Lag != 4 || ret.Age != 14*time.Minute {
		t.Fatalf("expired: status %s lost %d lag %d age %s", ret.Status, ret.Lost, ret.Lag, ret.Age)
	}
	st := partRow(t, s, "slow", "state", 0)
	if !st.Compacted || st.Lag != 3 || st.Age != 2*time.Minute || st.TimeToLossKnown {
		t.Fatalf("compacted: %+v", st)
	}
	// Past offset 1 there is only an aborted record and markers: no lag.
	done := partRow(t, s, "txn-done", "txn", 0)
	if done.Lag != 0 || done.Age != 0 || done.Status != lag.OK {
		t.Fatalf("markers counted as lag: %+v", done)
	}
	behind := partRow(t, s, "txn-behind", "txn", 0)
	if behind.Lag != 4 || behind.Age != time.Hour {
		t.Fatalf("txn behind: lag %d age %s", behind.Lag, behind.Age)
	}
}

// Each status from a scripted sequence of commits against the broker.
func TestStatusesFromScriptedCommits(t *testing.T) {
	r := newRig(t, 1, Config{Lag: lag.Config{Window: 2 * time.Minute}})
	r.kc.CreateTopic(t, "s", 1, 1, nil)
	now := r.clock.now()
	r.kc.ProduceTo(t, "s", 0, 100, now.Add(-time.Hour), time.Second)
	commit := func(g string, off int64) {
		r.kc.Commit(t, g, map[string]map[int32]int64{"s": {0: off}})
	}
	commit("ok", 100)
	commit("lagging", 10)
	commit("rewind", 90)
	commit("stopped", 50)
	// A member that owns the partition and never commits: STALLED.
	commit("stalled", 20)
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.kc.Addrs...), kgo.ConsumerGroup("stalled"), kgo.ConsumeTopics("s"),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		cl.PollFetches(ctx)
		cancel()
		g, err := r.cluster.DescribeGroup(tctx(t), "stalled")
		if err == nil && len(g.Members) == 1 && len(g.Members[0].Assigned) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer never got its assignment: %+v %v", g, err)
		}
	}
	r.refresh(t)
	r.clock.add(30 * time.Second)
	r.kc.ProduceTo(t, "s", 0, 50, now.Add(-30*time.Minute), time.Second)
	commit("ok", 150)
	commit("lagging", 20)
	commit("rewind", 5)
	s := r.refresh(t)
	want := map[string]lag.Status{"ok": lag.OK, "lagging": lag.LAGGING, "rewind": lag.REWIND, "stopped": lag.STOPPED, "stalled": lag.STALLED}
	for g, st := range want {
		if got := partRow(t, s, g, "s", 0); got.Status != st {
			t.Errorf("%s: %s, want %s (%+v)", g, got.Status, st, got)
		}
		if gg, _ := s.Group(g); gg.Status != st {
			t.Errorf("%s group status %s, want %s", g, gg.Status, st)
		}
	}
	if g, _ := s.Group("stalled"); len(g.Members) != 1 || g.MemberCount != 1 || len(g.History) != 2 {
		t.Errorf("stalled group: members %d history %d", g.MemberCount, len(g.History))
	}
	if s.Window != 30*time.Second {
		t.Errorf("window %s, want 30s", s.Window)
	}
}

// isrControl answers Metadata from a real response rewritten so that the
// brokers in down have left every ISR and lost leadership (kfake always
// reports ISR = replicas). set changes the down set.
type isrControl struct {
	mu   sync.Mutex
	down map[int32]bool
}

func (c *isrControl) set(down ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = map[int32]bool{}
	for _, d := range down {
		c.down[d] = true
	}
}

func controlISR(t *testing.T, kc *kafkatest.Cluster) *isrControl {
	t.Helper()
	real, err := kmsg.NewPtrMetadataRequest().RequestWith(tctx(t), kc.Client)
	if err != nil {
		t.Fatal(err)
	}
	c := &isrControl{down: map[int32]bool{}}
	kc.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		c.mu.Lock()
		defer c.mu.Unlock()
		mreq := kr.(*kmsg.MetadataRequest)
		resp := mreq.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version = mreq.Version
		resp.Brokers, resp.ClusterID, resp.ControllerID = real.Brokers, real.ClusterID, real.ControllerID
		for _, rt := range real.Topics {
			nt := rt
			nt.Partitions = nil
			for _, p := range rt.Partitions {
				np := p
				np.ISR = nil
				for _, rep := range p.Replicas {
					if !c.down[rep] {
						np.ISR = append(np.ISR, rep)
					}
				}
				if c.down[p.Leader] {
					np.Leader = -1
					np.LeaderEpoch++
				}
				nt.Partitions = append(nt.Partitions, np)
			}
			resp.Topics = append(resp.Topics, nt)
		}
		return resp, nil, true
	})
	return c
}

func TestISRHealth(t *testing.T) {
	r := newRig(t, 3, Config{})
	r.kc.CreateTopic(t, "orders", 6, 3, map[string]string{"min.insync.replicas": "2"})
	r.kc.CreateTopic(t, "clicks", 3, 3, map[string]string{"min.insync.replicas": "1"})
	s := r.refresh(t)
	if len(s.Health.ISR) != 0 {
		t.Fatalf("healthy cluster reports %+v", s.Health.ISR)
	}
	// Two of three brokers down: partitions led by them are offline, the
	// rest are under min ISR on orders (writes blocked) and at min ISR on
	// clicks.
	// Keep the leader of orders[0] up so some partitions stay readable.
	var up, clicksLeader int32
	for _, tp := range s.Topics {
		switch tp.Name {
		case "orders":
			up = tp.Partitions[0].Leader
		case "clicks":
			clicksLeader = tp.Partitions[0].Leader
		}
	}
	var down []int32
	for b := int32(0); b < 3; b++ {
		if b != up {
			down = append(down, b)
		}
	}
	isr := controlISR(t, r.kc)
	isr.set(down...)
	s = r.refreshUntil(t, func(s Snapshot) bool { return len(s.Health.ISR) > 0 })
	var orders, clicks []lag.PartitionHealth
	for _, tp := range s.Topics {
		switch tp.Name {
		case "orders":
			orders = tp.Health
		case "clicks":
			clicks = tp.Health
		}
	}
	for _, h := range orders {
		want := lag.UnderMinISR
		if h.Leader < 0 {
			want = lag.Offline
		}
		if h.Class != want || !h.WritesBlocked {
			t.Errorf("orders[%d]: %s blocked %v, want %s blocked", h.Partition, h.Class, h.WritesBlocked, want)
		}
		if h.Leader < 0 && h.Elections != 1 {
			t.Errorf("orders[%d]: %d elections, want 1", h.Partition, h.Elections)
		}
	}
	for _, h := range clicks {
		if h.Leader >= 0 && (h.Class != lag.AtMinISR || h.WritesBlocked) {
			t.Errorf("clicks[%d]: %s blocked %v, want at_min_isr", h.Partition, h.Class, h.WritesBlocked)
		}
	}
	if s.Health.UnderMinISR+s.Health.AtMinISR+s.Health.Offline != 9 || s.Health.Offline == 0 || s.Health.Elections != s.Health.Offline || len(s.Health.ISR) != 9 || s.Health.ISR[0].Class != lag.Offline {
		t.Fatalf("health counts: %+v", s.Health)
	}
	// One broker down: under-replicated but writable. It is not the leader
	// of clicks[0] (kfake places leaders at random), so that partition
	// stays led, with 2 of 3 replicas in sync.
	one := down[0]
	if one == clicksLeader {
		one = down[1]
	}
	isr.set(one)
	s = r.refreshUntil(t, func(s Snapshot) bool { return s.Health.UnderMinISR == 0 })
	if s.Health.UnderMinISR != 0 || s.Health.UnderReplicated == 0 {
		t.Fatalf("one broker down: %+v", s.Health)
	}
	for _, tp := range s.Topics {
		for _, h := range tp.Health {
			if h.Leader >= 0 && h.ISR == 2 && tp.Name == "orders" && h.Class != lag.AtMinISR {
				t.Errorf("orders[%d] with 2 of 3 in sync and min 2: %s", h.Partition, h.Class)
			}
			if h.Leader >= 0 && h.ISR == 2 && tp.Name == "clicks" && h.Class != lag.UnderReplicated {
				t.Errorf("clicks[%d] with 2 of 3 in sync and min 1: %s", h.Partition, h.Class)
			}
		}
	}
}

func TestHotPartitionFromSkewedKey(t *testing.T) {
	r := newRig(t, 3, Config{})
	r.kc.CreateTopic(t, "events", 6, 1, nil)
	r.refresh(t)
	now := r.clock.now()
	var recs []*kgo.Record
	for i := 0; i < 600; i++ {
		key := "tenant-meridian" // 30% of traffic on one key
		if i%10 >= 3 {
			key = fmt.Sprintf("order-%d", i)
		}
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(key), Value: []byte("v"), Timestamp: now})
	}
	r.kc.Produce(t, recs...)
	r.clock.add(10 * time.Second)
	s := r.refresh(t)
	var skew lag.TopicSkew
	for _, tp := range s.Topics {
		if tp.Name == "events" {
			skew = tp.Skew
		}
	}
	if len(skew.Hot) != 1 || skew.Ratio < 3 || len(s.Health.Hot) != 1 {
		t.Fatalf("skew %+v", skew)
	}
	// The hot partition is the meridian key's.
	res := r.kc.Client.ProduceSync(tctx(t), &kgo.Record{Topic: "events", Key: []byte("tenant-meridian"), Value: []byte("v")})
	if p := res[0].Record.Partition; p != skew.Hot[0].Partition {
		t.Fatalf("hot partition %d, meridian key lands on %d", skew.Hot[0].Partition, p)
	}
	var leaders int
	var share float64
	for _, b := range s.Brokers {
		leaders += b.Leaders
		share += b.ProduceShare
	}
	if leaders != 6 || share < 0.999 || share > 1.001 {
		t.Fatalf("broker shares %+v", s.Brokers)
	}
}

// Dead-letter and retry topics receive failures wherever they land: the
// same skewed traffic that makes "events" hot is not judged on them, by name
// or when the config declares the DLQ.
func TestDeadLetterTopicsAreNeverHot(t *testing.T) {
	r := newRig(t, 3, Config{DeadLetter: DeadLetterTopics([]string{"failed-events"})})
	names := []string{"events", "events.DLT", "events-retry-5000", "failed-events"}
	for _, n := range names {
		r.kc.CreateTopic(t, n, 6, 1, nil)
	}
	r.refresh(t)
	now := r.clock.now()
	var recs []*kgo.Record
	for _, n := range names {
		for i := 0; i < 300; i++ {
			recs = append(recs, &kgo.Record{Topic: n, Partition: 0, Value: []byte("v"), Timestamp: now})
		}
	}
	r.kc.Produce(t, recs...)
	r.clock.add(10 * time.Second)
	s := r.refresh(t)
	if len(s.Health.Hot) != 1 || s.Health.Hot[0].Topic != "events" || len(s.Health.Skewed) != 1 {
		t.Fatalf("hot %+v, skewed %+v", s.Health.Hot, s.Health.Skewed)
	}
	for _, tp := range s.Topics {
		if dl := tp.Name != "events"; tp.DeadLetter != dl || (dl && len(tp.Skew.Hot) != 0) {
			t.Errorf("%s: dead letter %v, hot %v", tp.Name, tp.DeadLetter, tp.Skew.Hot)
		}
	}
}

func TestRetryNames(t *testing.T) {
	for name, want := range map[string]bool{
		"orders-retry": true, "orders.retry": true, "orders_retry": true, "orders-retry-0": true,
		"orders-retry-5000": true, "orders-retry-": false, "retry": false, "-retry": false,
		"orders-retryable": false, "orders-5000": false, "orders": false,
	} {
		if got := IsRetryName(name); got != want {
			t.Errorf("IsRetryName(%q) = %v", name, got)
		}
	}
}

// A producer clock an hour ahead reads as age 0 with clock skew flagged.
// (LogAppendTime is covered in backends/kafka with synthetic batches: kfake
// stamps append time only when the producer asks for it.)
func TestClockSkew(t *testing.T) {
	r := newRig(t, 1, Config{})
	now := r.clock.now()
	r.kc.CreateTopic(t, "future", 1, 1, nil)
	r.kc.ProduceTo(t, "future", 0, 2, now.Add(time.Hour), time.Second)
	r.kc.Commit(t, "g", map[string]map[int32]int64{"future": {0: 0}})
	s := r.refresh(t)
	f := partRow(t, s, "g", "future", 0)
	if f.Lag != 2 || f.Age != 0 || !f.ClockSkew || f.TimestampType != backends.CreateTime {
		t.Fatalf("future timestamps: %+v", f)
	}
	if g, _ := s.Group("g"); !g.ClockSkew {
		t.Fatal("group roll-up lost the clock-skew flag")
	}
}

// Refreshing faster than the commit interval (1 s against 5 s) keeps only a
// few sample slots, the newest overwritten each refresh; a stall must still
// show at the first refresh past the steady age, not when a slot happens to
// be kept after it. The commit moves every second until 41 s, then sticks
// on the record produced at 41 s: its age passes 15 s at 57 s.
func TestStallShowsAtRefreshPrecision(t *testing.T) {
	r := newRig(t, 1, Config{})
	r.kc.CreateTopic(t, "ticks", 1, 1, nil)
	for sec := 0; sec <= 60; sec++ {
		now := r.clock.now()
		r.kc.Produce(t, &kgo.Record{Topic: "ticks", Value: []byte("t"), Timestamp: now})
		if sec <= 41 {
			// Caught up but for the record just produced.
			r.kc.Commit(t, "ticker", map[string]map[int32]int64{"ticks": {0: int64(sec)}})
		}
		s := r.refresh(t)
		got := partRow(t, s, "ticker", "ticks", 0)
		want := lag.OK
		if sec >= 57 {
			want = lag.STOPPED // no members: nobody will move it
		}
		if got.Status != want {
			t.Fatalf("at %ds: %s, want %s (age %s, committed %d)", sec, got.Status, want, got.Age, got.Committed)
		}
		r.clock.add(time.Second)
	}
}

// A cluster can hold a retention.ms longer than time.Duration reaches;
// it reads as "kept forever", never as a negative retention that would
// make every partition look about to expire.
func TestRetentionPastDurationRangeIsForever(t *testing.T) {
	for ms, want := range map[string]time.Duration{
		"604800000":           7 * 24 * time.Hour,
		"-1":                  0,
		"junk":                0,
		"9223372036854775807": 0,
		"9223372036855":       0, // one past the longest time.Duration
		"9223372036854":       9223372036854 * time.Millisecond,
	} {
		if got := retentionOf(ms); got != want {
			t.Errorf("retention.ms %s read as %v, want %v", ms, got, want)
		}
	}
}
