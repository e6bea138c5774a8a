package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/kafkatest"
)

func dialCluster(t testing.TB, kc *kafkatest.Cluster) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Dial(ctx, Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := NewCluster(c)
	t.Cleanup(cl.Close)
	return cl
}

// tctx bounds one call against the bundled broker. It is there to turn a
// hang into a failure, not to measure speed: under -race on a loaded
// 2-core CI machine, compressing a 4 MB plan alone took 38 s (10 s here
// failed TestLargePlanIsChunkedAndFetchedAlone with the broker idle).
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestDescribeListsBrokersAndController(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	cl := dialCluster(t, kc)
	info, err := cl.Describe(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Brokers) != 3 {
		t.Fatalf("brokers = %+v, want 3", info.Brokers)
	}
	controllers := 0
	for i, b := range info.Brokers {
		if b.ID != int32(i) {
			t.Errorf("broker %d has id %d; brokers should be sorted by id", i, b.ID)
		}
		if b.Host == "" || b.Port == 0 {
			t.Errorf("broker %d lacks an address: %+v", b.ID, b)
		}
		if b.Controller {
			controllers++
			if b.ID != info.Controller {
				t.Errorf("broker %d flagged controller, cluster says %d", b.ID, info.Controller)
			}
		}
	}
	if controllers != 1 || info.ID == "" {
		t.Fatalf("want exactly one controller and a cluster id: %+v", info)
	}
}

func TestTopicsReportOffsetsReplicasAndConfigs(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 4, 3, map[string]string{"min.insync.replicas": "2", "retention.ms": "259200000"})
	kc.CreateTopic(t, "customer-profile", 2, 1, map[string]string{"cleanup.policy": "compact"})
	now := time.Now()
	kc.ProduceTo(t, "orders", 0, 5, now, time.Millisecond)
	kc.ProduceTo(t, "orders", 2, 3, now, time.Millisecond)
	// Trim the head of partition 0 so the log start moves.
	resp, err := kc.Admin.DeleteRecords(tctx(t), kadm.Offsets{"orders": {0: {Topic: "orders", Partition: 0, At: 2}}})
	if err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}

	cl := dialCluster(t, kc)
	topics, err := cl.Topics(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range topics {
		names = append(names, tp.Name)
	}
	if !slices.Equal(names, []string{"customer-profile", "orders"}) {
		t.Fatalf("topics = %v, want sorted [customer-profile orders]", names)
	}
	orders := topics[1]
	if orders.ReplicationFactor != 3 || len(orders.Partitions) != 4 {
		t.Fatalf("orders rf=%d partitions=%d, want 3 and 4", orders.ReplicationFactor, len(orders.Partitions))
	}
	if orders.Configs[backends.ConfigMinISR] != "2" || orders.Configs[backends.ConfigRetentionMs] != "259200000" || orders.MinISR() != 2 {
		t.Fatalf("orders configs = %v", orders.Configs)
	}
	if topics[0].Configs[backends.ConfigCleanupPolicy] != "compact" {
		t.Fatalf("customer-profile configs = %v", topics[0].Configs)
	}
	want := map[int32][2]int64{0: {2, 5}, 1: {0, 0}, 2: {0, 3}, 3: {0, 0}}
	for _, p := range orders.Partitions {
		w := want[p.Partition]
		if p.LogStart != w[0] || p.HighWatermark != w[1] || p.LastStable != w[1] {
			t.Errorf("orders[%d] start=%d end=%d lso=%d, want start=%d end=lso=%d (err %q)", p.Partition, p.LogStart, p.HighWatermark, p.LastStable, w[0], w[1], p.Err)
		}
		if len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Leader < 0 || p.Err != "" {
			t.Errorf("orders[%d] = %+v, want 3 replicas in sync with a leader", p.Partition, p)
		}
		if p.UnderReplicated() || p.UnderMinISR(orders.MinISR()) {
			t.Errorf("orders[%d] healthy partition flagged", p.Partition)
		}
	}

	// Named topics: only those, and an unknown one is an error naming it
	// with Kafka's code.
	one, err := cl.Topics(tctx(t), "customer-profile")
	if err != nil || len(one) != 1 || one[0].Name != "customer-profile" {
		t.Fatalf("named topic: %v %+v", err, one)
	}
	_, err = cl.Topics(tctx(t), "no-such-topic")
	if err == nil || !strings.Contains(err.Error(), "no-such-topic") || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("unknown topic error = %v", err)
	}
}

// degradeISR makes the cluster answer Metadata as if one broker had died:
// it leaves every ISR and is reported offline. kfake always reports
// ISR = replicas, so the answer is rewritten from a real response captured
// before the "failure". The broker chosen is a replica of partition 0 of
// topic (kfake places replicas by leader, which varies); it is returned.
func degradeISR(t *testing.T, kc *kafkatest.Cluster, topic string) (down int32) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	real, err := req.RequestWith(tctx(t), kc.Client)
	if err != nil {
		t.Fatal(err)
	}
	down = -1
	for _, rt := range real.Topics {
		for _, p := range rt.Partitions {
			if *rt.Topic == topic && p.Partition == 0 {
				down = p.Replicas[len(p.Replicas)-1]
			}
		}
	}
	if down < 0 {
		t.Fatalf("topic %s has no partition 0", topic)
	}
	kc.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		mreq := kr.(*kmsg.MetadataRequest)
		resp := mreq.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version = mreq.Version
		resp.Brokers = real.Brokers
		resp.ClusterID = real.ClusterID
		resp.ControllerID = real.ControllerID
		wanted := map[string]bool{}
		for _, rt := range mreq.Topics {
			if rt.Topic != nil {
				wanted[*rt.Topic] = true
			}
		}
		for _, rt := range real.Topics {
			if mreq.Topics != nil && !wanted[*rt.Topic] {
				continue
			}
			nt := rt
			nt.Partitions = nil
			for _, p := range rt.Partitions {
				np := p
				np.ISR = nil
				np.OfflineReplicas = nil
				for _, r := range p.Replicas {
					if r == down {
						np.OfflineReplicas = append(np.OfflineReplicas, r)
					} else {
						np.ISR = append(np.ISR, r)
					}
				}
				nt.Partitions = append(nt.Partitions, np)
			}
			resp.Topics = append(resp.Topics, nt)
		}
		return resp, nil, true
	})
	return down
}

func TestTopicsShowDegradedISR(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 6, 3, map[string]string{"min.insync.replicas": "2"})
	kc.CreateTopic(t, "payments", 6, 2, map[string]string{"min.insync.replicas": "2"})
	down := degradeISR(t, kc, "payments")

	cl := dialCluster(t, kc)
	topics, err := cl.Topics(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 2 {
		t.Fatalf("topics = %+v", topics)
	}
	for _, tp := range topics {
		sawUnderMin := false
		for _, p := range tp.Partitions {
			hasDown := slices.Contains(p.Replicas, down)
			if slices.Contains(p.ISR, down) {
				t.Errorf("%s[%d]: ISR %v still holds the down broker", tp.Name, p.Partition, p.ISR)
			}
			if hasDown != p.UnderReplicated() {
				t.Errorf("%s[%d]: replicas %v isr %v: under-replicated = %v", tp.Name, p.Partition, p.Replicas, p.ISR, p.UnderReplicated())
			}
			if hasDown && !slices.Equal(p.Offline, []int32{down}) {
				t.Errorf("%s[%d]: offline replicas %v, want [%d]", tp.Name, p.Partition, p.Offline, down)
			}
			// RF 3 minus one is still at min ISR 2; RF 2 minus one is below it.
			wantUnderMin := hasDown && tp.ReplicationFactor == 2
			if p.UnderMinISR(tp.MinISR()) != wantUnderMin {
				t.Errorf("%s[%d]: isr %v under min ISR = %v, want %v", tp.Name, p.Partition, p.ISR, p.UnderMinISR(tp.MinISR()), wantUnderMin)
			}
			sawUnderMin = sawUnderMin || wantUnderMin
		}
		if tp.Name == "payments" && !sawUnderMin {
			t.Errorf("payments: expected partition 0 (replicated on the down broker) to be under min ISR")
		}
	}
}

// consume joins group with a franz-go consumer until the test ends.
func consume(t *testing.T, kc *kafkatest.Cluster, group, clientID string, topics []string, extra ...kgo.Opt) {
	t.Helper()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(kc.Addrs...), kgo.ClientID(clientID), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within %s (last: %s)", what, d, last)
}

func TestGroupsDescribeMembersAssignmentsAndCommits(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 4, 3, nil)
	kc.CreateTopic(t, "payments", 2, 3, nil)
	consume(t, kc, "email-notifier", "email-worker", []string{"orders"})
	consume(t, kc, "fraud-monitor", "fraud-worker", []string{"orders"}, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	kc.Commit(t, "sales-analytics", map[string]map[int32]int64{"orders": {0: 7, 3: 2}, "payments": {1: 4}})

	cl := dialCluster(t, kc)
	eventually(t, 15*time.Second, "both live groups stable with all 4 partitions assigned", func() (bool, string) {
		gs, err := cl.Groups(tctx(t))
		if err != nil {
			return false, err.Error()
		}
		stable := 0
		for _, g := range gs {
			n := 0
			for _, m := range g.Members {
				n += len(m.Assigned)
			}
			if g.State == "Stable" && n == 4 {
				stable++
			}
		}
		return stable == 2, describeGroups(gs)
	})

	gs, err := cl.Groups(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]backends.Group{}
	var names []string
	for _, g := range gs {
		byName[g.Name] = g
		names = append(names, g.Name)
	}
	if !slices.Equal(names, []string{"email-notifier", "fraud-monitor", "sales-analytics"}) {
		t.Fatalf("groups = %v", names)
	}
	for name, typ := range map[string]string{"email-notifier": "classic", "fraud-monitor": "consumer"} {
		g := byName[name]
		if g.Type != typ || len(g.Members) != 1 {
			t.Fatalf("%s: type %q members %d, want %s with 1 member: %+v", name, g.Type, len(g.Members), typ, g)
		}
		m := g.Members[0]
		wantClient := map[string]string{"email-notifier": "email-worker", "fraud-monitor": "fraud-worker"}[name]
		if m.ClientID != wantClient || m.Host == "" {
			t.Errorf("%s member = %+v, want client id %s and a host", name, m, wantClient)
		}
		want := []backends.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 2}, {Topic: "orders", Partition: 3}}
		if !slices.Equal(m.Assigned, want) {
			t.Errorf("%s assignment = %v, want %v", name, m.Assigned, want)
		}
	}
	if g := byName["sales-analytics"]; g.State != "Empty" || len(g.Members) != 0 {
		t.Errorf("sales-analytics = %+v, want Empty with no members", g)
	}

	// DescribeGroup answers for both protocols and refuses unknown groups.
	for _, name := range []string{"email-notifier", "fraud-monitor", "sales-analytics"} {
		g, err := cl.DescribeGroup(tctx(t), name)
		if err != nil || g.Name != name || g.State != byName[name].State {
			t.Errorf("DescribeGroup(%s) = %+v, %v", name, g, err)
		}
	}
	_, err = cl.DescribeGroup(tctx(t), "nobody-home")
	if err == nil || !strings.Contains(err.Error(), "nobody-home") || !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Errorf("unknown group error = %v", err)
	}

	commits, err := cl.CommittedOffsets(tctx(t), "sales-analytics", "email-notifier")
	if err != nil {
		t.Fatal(err)
	}
	want := []backends.Committed{{Topic: "orders", Partition: 0, Offset: 7}, {Topic: "orders", Partition: 3, Offset: 2}, {Topic: "payments", Partition: 1, Offset: 4}}
	got := commits["sales-analytics"]
	if len(got) != len(want) {
		t.Fatalf("sales-analytics commits = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Topic != want[i].Topic || got[i].Partition != want[i].Partition || got[i].Offset != want[i].Offset {
			t.Errorf("commit %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, ok := commits["email-notifier"]; !ok {
		t.Errorf("email-notifier (no commits yet) missing from %v", commits)
	}
}

func describeGroups(gs []backends.Group) string {
	var b strings.Builder
	for _, g := range gs {
		n := 0
		for _, m := range g.Members {
			n += len(m.Assigned)
		}
		b.WriteString(g.Name + "=" + g.State + "/" + g.Type + " ")
	}
	return b.String()
}

func TestCallsHonourTheContextDeadline(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 1, 1, nil)
	cl := dialCluster(t, kc)
	// The broker stops answering ListOffsets; the caller's deadline must end
	// the call, with an error, rather than hang.
	kc.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		return nil, nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := cl.Topics(ctx)
	if err == nil {
		t.Fatal("Topics succeeded although the broker never answered")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("want a deadline error, got %v", err)
	}
}

// Requests are batched: reading many partitions costs a few requests per
// broker, never one per partition.
func TestTopicsBatchRequests(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	for _, name := range []string{"a", "b", "c", "d"} {
		kc.CreateTopic(t, name, 50, 3, nil)
	}
	cl := dialCluster(t, kc)
	var mu sync.Mutex
	counts := map[int16]int{}
	kc.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		mu.Lock()
		counts[r.Key()]++
		mu.Unlock()
		return nil, nil, false
	})
	topics, err := cl.Topics(tctx(t))
	if err != nil || len(topics) != 4 {
		t.Fatalf("%v %d", err, len(topics))
	}
	mu.Lock()
	// 200 partitions led by 3 brokers: one ListOffsets per broker for each
	// of log start, end and last stable offsets.
	if n := counts[int16(kmsg.ListOffsets)]; n == 0 || n > 9 {
		t.Errorf("%d ListOffsets requests for 200 partitions, want at most 9", n)
	}
	if n := counts[int16(kmsg.DescribeConfigs)]; n == 0 || n > 3 {
		t.Errorf("%d DescribeConfigs requests for 4 topics, want 1-3", n)
	}
	if n := counts[int16(kmsg.Metadata)]; n > 5 {
		t.Errorf("%d Metadata requests, want a handful", n)
	}
	mu.Unlock()
	commits := map[string][]string{}
	for i := 0; i < 20; i++ {
		g := fmt.Sprintf("g%d", i)
		kc.Commit(t, g, map[string]map[int32]int64{"a": {0: 1}})
		commits[g] = nil
	}
	mu.Lock()
	counts = map[int16]int{}
	mu.Unlock()
	var groups []string
	for g := range commits {
		groups = append(groups, g)
	}
	if _, err := cl.CommittedOffsets(tctx(t), groups...); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// 20 groups spread over 3 coordinators: at most one OffsetFetch each.
	if n := counts[int16(kmsg.OffsetFetch)]; n == 0 || n > 3 {
		t.Errorf("%d OffsetFetch requests for 20 groups, want 1-3", n)
	}
}

// One silent broker does not cost the whole answer: the partitions it leads
// carry an error naming it, the others have their offsets.
func TestTopicsKeepAnswersFromHealthyBrokers(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 9, 3, nil)
	cl := dialCluster(t, kc)
	kc.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		return nil, nil, kc.CurrentNode() == 2 // broker 2 never answers
	})
	// The silent broker holds the call to this deadline; the others must
	// answer within it, also under -race on a loaded CI machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	topics, err := cl.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	silent, healthy := 0, 0
	for _, p := range topics[0].Partitions {
		if p.Leader == 2 {
			silent++
			if p.HighWatermark != -1 || !strings.Contains(p.Err, "broker 2") {
				t.Errorf("orders[%d] led by the silent broker: end %d, error %q", p.Partition, p.HighWatermark, p.Err)
			}
		} else {
			healthy++
			if p.HighWatermark != 0 || p.Err != "" {
				t.Errorf("orders[%d] led by broker %d: end %d, error %q", p.Partition, p.Leader, p.HighWatermark, p.Err)
			}
		}
	}
	if silent == 0 || healthy == 0 {
		t.Skipf("leaders not spread over brokers (silent %d, healthy %d)", silent, healthy)
	}
}
