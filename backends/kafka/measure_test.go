package kafka

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
)

func measureClient(t *testing.T, kc *kafkatest.Cluster) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Dial(ctx, Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// producer writes records to explicit partitions.
type producer struct {
	t  *testing.T
	cl *kgo.Client
	n  int
}

func newProducer(t *testing.T, kc *kafkatest.Cluster) *producer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &producer{t: t, cl: cl}
}

// produce writes n records round-robin over partitions, each exactly size
// payload bytes: a 5-byte key, one header "h"="xy" (3 bytes), and the value.
func (p *producer) produce(topic string, partitions int32, n, size int) {
	p.t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic:     topic,
			Partition: int32(p.n % int(partitions)),
			Key:       []byte("k-" + strings.Repeat("x", 3)),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte("xy")}},
			Value:     bytes.Repeat([]byte{'v'}, size-8),
		}
		p.n++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		p.t.Fatal(err)
	}
}

// drivenClock is the measurement's clock in tests: time moves only when the
// test says, and each tick waits for the sample it triggers.
type drivenClock struct {
	mu      sync.Mutex
	now     time.Time
	tick    chan time.Time
	sampled chan int
}

func newDrivenClock() *drivenClock {
	return &drivenClock{now: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), tick: make(chan time.Time), sampled: make(chan int, 1)}
}

func (c *drivenClock) hooks() *loadHooks {
	return &loadHooks{
		now:     func() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now },
		tick:    c.tick,
		sampled: func(n int) { c.sampled <- n },
	}
}

// advance moves the clock, ticks, and waits until the sample at the new
// time has been taken.
func (c *drivenClock) advance(t *testing.T, d time.Duration, wantSample int) {
	t.Helper()
	c.mu.Lock()
	c.now = c.now.Add(d)
	at := c.now
	c.mu.Unlock()
	select {
	case c.tick <- at:
	case <-time.After(2 * time.Minute):
		t.Fatal("measurement did not wait for a tick")
	}
	c.wait(t, wantSample)
}

func (c *drivenClock) wait(t *testing.T, want int) {
	t.Helper()
	select {
	case n := <-c.sampled:
		if n != want {
			t.Fatalf("sample %d, want %d", n, want)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("sample %d never taken", want)
	}
}

// TestMeasureLoad produces a known pattern (100, then 300, then 200 records
// in three one-second intervals of a driven clock) after older, smaller
// records, and checks every figure the worksheet's prefill uses: the rate
// comes from offsets and the clock's timestamps, not from sleeping.
func TestMeasureLoad(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 3, 3, map[string]string{"retention.ms": "259200000"})
	kc.CreateTopic(t, "audit", 1, 1, nil)
	kc.Commit(t, "billing", map[string]map[int32]int64{"orders": {0: 0}})
	kc.Commit(t, "analytics", map[string]map[int32]int64{"orders": {1: 0}})
	kc.Commit(t, "auditor", map[string]map[int32]int64{"audit": {0: 0}})
	c := measureClient(t, kc)
	p := newProducer(t, kc)
	p.produce("orders", 3, 30, 50) // older, smaller: outside the window and the size sample

	clock := newDrivenClock()
	type result struct {
		load TopicLoad
		err  error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		l, err := c.MeasureLoad(ctx, "orders", LoadOptions{Window: 3 * time.Second, SampleRecords: 60, hooks: clock.hooks()})
		done <- result{l, err}
	}()
	clock.wait(t, 0)
	p.produce("orders", 3, 100, 208)
	clock.advance(t, time.Second, 1)
	p.produce("orders", 3, 300, 208)
	clock.advance(t, time.Second, 2)
	p.produce("orders", 3, 200, 208)
	clock.advance(t, time.Second, 3)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	l := r.load
	if l.Window != 3*time.Second || l.RateSamples != 4 {
		t.Errorf("window %v over %d samples, want 3s over 4", l.Window, l.RateSamples)
	}
	if l.AvgRate != 200 || l.PeakRate != 300 {
		t.Errorf("rate avg %v peak %v, want 200 (600 records / 3 s) and 300", l.AvgRate, l.PeakRate)
	}
	if l.RecordsSampled != 60 || l.RecordBytes != 208 {
		t.Errorf("sampled %d records of mean %v bytes, want the 60 most recent of 208", l.RecordsSampled, l.RecordBytes)
	}
	if l.Partitions != 3 || l.ReplicationFactor != 3 || l.RetentionMs != 259200000 || l.Groups != 2 {
		t.Errorf("partitions %d rf %d retention %d groups %d, want 3, 3, 259200000, 2",
			l.Partitions, l.ReplicationFactor, l.RetentionMs, l.Groups)
	}
}

// TestMeasureLoad_AllTopicsNoRate: every topic together, rate not sampled.
func TestMeasureLoad_AllTopicsNoRate(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 2, 1, map[string]string{"retention.ms": "3600000"})
	kc.CreateTopic(t, "audit", 1, 1, map[string]string{"retention.ms": "-1"})
	kc.Commit(t, "billing", map[string]map[int32]int64{"orders": {0: 0}})
	kc.Commit(t, "auditor", map[string]map[int32]int64{"audit": {0: 0}})
	p := newProducer(t, kc)
	p.produce("orders", 2, 10, 100)
	p.produce("audit", 1, 10, 300)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := measureClient(t, kc).MeasureLoad(ctx, "", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Window != 0 || l.AvgRate != 0 || l.RateSamples != 0 {
		t.Errorf("rate measured without a window: %+v", l)
	}
	if l.Partitions != 3 || l.Groups != 2 || l.RetentionMs != -1 || l.RecordsSampled != 20 || l.RecordBytes != 200 {
		t.Errorf("got %+v; want 3 partitions, 2 groups, unlimited retention, 20 records of mean 200 bytes", l)
	}
}

func TestMeasureLoad_UnknownTopic(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := measureClient(t, kc).MeasureLoad(ctx, "nope", LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v, want one naming the topic", err)
	}
}

// TestMeasureLoad_Cancel: an interrupted measurement returns promptly with
// the context's error instead of waiting out the window.
func TestMeasureLoad_Cancel(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 1, 1, nil)
	c := measureClient(t, kc)
	clock := newDrivenClock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.MeasureLoad(ctx, "orders", LoadOptions{Window: time.Hour, hooks: clock.hooks()})
		done <- err
	}()
	clock.wait(t, 0)
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("measurement ignored cancellation")
	}
}

// TestMeasureLoad_SampleBound: the size sample reads at most SampleRecords
// (here 10 over 3 partitions: 4, 3 and 3), never a rounded-up 12.
func TestMeasureLoad_SampleBound(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 3, 1, nil)
	newProducer(t, kc).produce("orders", 3, 30, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := measureClient(t, kc).MeasureLoad(ctx, "orders", LoadOptions{SampleRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	if l.RecordsSampled != 10 {
		t.Fatalf("sampled %d records, want 10 (--sample is an upper bound)", l.RecordsSampled)
	}
}
