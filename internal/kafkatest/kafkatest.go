// Package kafkatest starts an in-process Kafka-protocol cluster (kfake) on
// random loopback ports for integration tests, with helpers to create topics,
// produce records with known timestamps and commit offsets. It is test
// support: no production code imports it.
package kafkatest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is a running test cluster.
type Cluster struct {
	*kfake.Cluster
	Addrs  []string
	Client *kgo.Client
	Admin  *kadm.Client
}

// Start runs a cluster of n brokers on random ports; it is closed when the
// test ends. Extra kfake options are appended.
func Start(t testing.TB, brokers int, opts ...kfake.Opt) *Cluster {
	t.Helper()
	ports := make([]int, brokers)
	// The broker's own warnings (failed requests, aborted transactions)
	// are kept and shown when the test fails: a failure seen once under
	// load in CI then says what the broker refused, not only what the
	// client reported.
	warnings := &warnLog{}
	o := append([]kfake.Opt{kfake.NumBrokers(brokers), kfake.Ports(ports...), kfake.WithLogger(kfake.BasicLogger(warnings, kfake.LogLevelWarn))}, opts...)
	kc, err := kfake.NewCluster(o...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	addrs := kc.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ProducerLinger(0))
	if err != nil {
		kc.Close()
		t.Fatalf("client: %v", err)
	}
	c := &Cluster{Cluster: kc, Addrs: addrs, Client: cl, Admin: kadm.NewClient(cl)}
	t.Cleanup(func() {
		cl.Close()
		kc.Close()
		if t.Failed() {
			if w := warnings.String(); w != "" {
				t.Logf("broker warnings (the last 200 at most):\n%s", w)
			}
		}
	})
	return c
}

// warnLog keeps the broker's last warnings (the broker writes from its own
// goroutines).
type warnLog struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, string(p))
	if len(w.lines) > 200 {
		w.lines = w.lines[len(w.lines)-200:]
	}
	return len(p), nil
}

func (w *warnLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "")
}

// CreateTopic creates a topic with the given partitions, replication factor
// and configs (nil values are dropped).
func (c *Cluster) CreateTopic(t testing.TB, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		v := v
		cfg[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Admin.CreateTopics(ctx, partitions, rf, cfg, name)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// Produce writes records synchronously (records keep their Topic, Partition
// when set with a manual partitioner, Key, Value, Headers and Timestamp).
func (c *Cluster) Produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// ProduceTo writes n records to one partition with timestamps start,
// start+step, ... and returns the offsets written.
func (c *Cluster) ProduceTo(t testing.TB, topic string, partition int32, n int, start time.Time, step time.Duration) []int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: []byte("v"), Timestamp: start.Add(time.Duration(i) * step)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	offs := make([]int64, n)
	for i, r := range res {
		offs[i] = r.Record.Offset
	}
	return offs
}

// Commit commits offsets for a group (no members needed).
func (c *Cluster) Commit(t testing.TB, group string, offsets map[string]map[int32]int64) {
	t.Helper()
	os := kadm.Offsets{}
	for topic, ps := range offsets {
		for p, o := range ps {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Admin.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}

// SeedLagging fills the cluster for lag benchmarks: `partitions` partitions
// (topics of 100), 10 records per partition an hour old, and `groups`
// groups whose commits leave every partition lagging (group g commits
// offset g%10), so a full refresh reads an age for every group x partition.
// It returns the topic and group names.
func (c *Cluster) SeedLagging(t testing.TB, partitions, groups int) (topics, groupNames []string) {
	t.Helper()
	const perTopic = 100
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := 0; i < partitions/perTopic; i++ {
		name := fmt.Sprintf("bench-%03d", i)
		topics = append(topics, name)
		if _, err := c.Admin.CreateTopic(ctx, perTopic, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(20*time.Millisecond), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	base := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	var perr atomic.Value
	for _, tp := range topics {
		for p := int32(0); p < perTopic; p++ {
			for i := 0; i < 10; i++ {
				wg.Add(1)
				pcl.Produce(ctx, &kgo.Record{Topic: tp, Partition: p, Value: []byte("order"), Timestamp: base.Add(time.Duration(i) * time.Second)},
					func(_ *kgo.Record, err error) {
						if err != nil {
							perr.Store(err)
						}
						wg.Done()
					})
			}
		}
	}
	wg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < groups; g++ {
		name := fmt.Sprintf("group-%02d", g)
		groupNames = append(groupNames, name)
		os := kadm.Offsets{}
		for _, tp := range topics {
			for p := int32(0); p < perTopic; p++ {
				os.Add(kadm.Offset{Topic: tp, Partition: p, At: int64(g % 10), LeaderEpoch: -1})
			}
		}
		resp, err := c.Admin.CommitOffsets(ctx, name, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return topics, groupNames
}
