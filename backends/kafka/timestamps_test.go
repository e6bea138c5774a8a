package kafka

import (
	"encoding/binary"
	"hash/crc32"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/kafkatest"
)

func newReader(t *testing.T, kc *kafkatest.Cluster) *TimestampReader {
	t.Helper()
	c, err := Dial(tctx(t), Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return NewTimestampReader(c)
}

// countFetches counts Fetch requests the brokers receive, without answering
// them (handled=false lets kfake serve them normally).
func countFetches(kc *kafkatest.Cluster) *atomic.Int64 {
	var n atomic.Int64
	kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

func q(topic string, p int32, off int64) backends.OffsetQuery {
	return backends.OffsetQuery{TopicPartition: backends.TopicPartition{Topic: topic, Partition: p}, Offset: off}
}

func byQuery(rts []backends.RecordTime) map[backends.OffsetQuery]backends.RecordTime {
	m := map[backends.OffsetQuery]backends.RecordTime{}
	for _, rt := range rts {
		m[rt.OffsetQuery] = rt
	}
	return m
}

func TestFirstTimestampsExactAndCached(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 3, 1, nil)
	kc.CreateTopic(t, "empty", 1, 1, nil)
	base := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	// Partition 0: 10 records a minute apart; partition 1: 5 records a
	// second apart; partition 2 nothing.
	kc.ProduceTo(t, "orders", 0, 10, base, time.Minute)
	kc.ProduceTo(t, "orders", 1, 5, base.Add(time.Hour), time.Second)
	r := newReader(t, kc)
	fetches := countFetches(kc)

	qs := []backends.OffsetQuery{q("orders", 0, 0), q("orders", 0, 7), q("orders", 1, 3), q("orders", 0, 10), q("orders", 2, 0), q("empty", 0, 0)}
	rts, err := r.FirstTimestamps(tctx(t), qs)
	if err != nil {
		t.Fatal(err)
	}
	got := byQuery(rts)
	want := map[backends.OffsetQuery]time.Time{
		qs[0]: base,
		qs[1]: base.Add(7 * time.Minute),
		qs[2]: base.Add(time.Hour + 3*time.Second),
	}
	for qq, ts := range want {
		rt, ok := got[qq]
		if !ok || !rt.Found || !rt.Timestamp.Equal(ts) || rt.At != qq.Offset || rt.Type != backends.CreateTime || rt.Approximate {
			t.Errorf("%v: got %+v, want timestamp %s", qq, rt, ts)
		}
	}
	for _, qq := range []backends.OffsetQuery{qs[3], qs[4], qs[5]} {
		if rt, ok := got[qq]; !ok || rt.Found {
			t.Errorf("%v (at the end): got %+v ok=%v, want answered and not found", qq, rt, ok)
		}
	}
	first := fetches.Load()
	if first == 0 || first > 6 {
		t.Fatalf("%d fetch requests for 3 brokers; want batched (1..6)", first)
	}

	// The same positions again, and another inside a range already read:
	// no Fetch at all.
	rts, err = r.FirstTimestamps(tctx(t), []backends.OffsetQuery{qs[0], qs[1], qs[2], q("orders", 0, 4)})
	if err != nil {
		t.Fatal(err)
	}
	if n := fetches.Load(); n != first {
		t.Fatalf("cached positions sent %d more fetch requests", n-first)
	}
	if rt := byQuery(rts)[q("orders", 0, 4)]; !rt.Found || !rt.Timestamp.Equal(base.Add(4*time.Minute)) {
		t.Fatalf("offset 4 from cache: %+v", rt)
	}
}

// kfake returns nothing (not a truncated batch) for a partition whose first
// batch exceeds its byte limit unless it is the first in the response; the
// reader must retry with a larger limit and still get every answer.
func TestFirstTimestampsLargeBatchesRetried(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "big", 4, 1, nil)
	base := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	val := make([]byte, 1000)
	for p := int32(0); p < 4; p++ {
		for i := 0; i < 20; i++ { // ~20 KB per batch, far over the 4 KiB limit
			recs = append(recs, &kgo.Record{Topic: "big", Partition: p, Value: val, Timestamp: base.Add(time.Duration(p)*time.Hour + time.Duration(i)*time.Second)})
		}
	}
	if err := cl.ProduceSync(tctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := newReader(t, kc)
	var qs []backends.OffsetQuery
	for p := int32(0); p < 4; p++ {
		qs = append(qs, q("big", p, 5))
	}
	rts, err := r.FirstTimestamps(tctx(t), qs)
	if err != nil {
		t.Fatal(err)
	}
	got := byQuery(rts)
	for p := int32(0); p < 4; p++ {
		want := base.Add(time.Duration(p)*time.Hour + 5*time.Second)
		if rt := got[q("big", p, 5)]; !rt.Found || !rt.Timestamp.Equal(want) {
			t.Errorf("partition %d: %+v, want %s", p, rt, want)
		}
	}
}

// Transaction markers and aborted records are not data: a position followed
// only by them has no first record; one before committed data finds it.
func TestFirstTimestampsSkipsMarkersAndAborted(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "txn", 1, 1, nil)
	base := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	tx, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.TransactionalID("berth-test"), ClassicTransactions(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	produce := func(commit bool, n int, at time.Time) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := tx.ProduceSync(tctx(t), &kgo.Record{Topic: "txn", Value: []byte("x"), Timestamp: at.Add(time.Duration(i) * time.Second)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(tctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	produce(true, 3, base)                   // offsets 0-2, marker 3
	produce(false, 2, base.Add(time.Hour))   // offsets 4-5 aborted, marker 6
	produce(true, 2, base.Add(2*time.Hour))  // offsets 7-8, marker 9
	produce(false, 1, base.Add(3*time.Hour)) // offset 10 aborted, marker 11
	r := newReader(t, kc)
	rts, err := r.FirstTimestamps(tctx(t), []backends.OffsetQuery{q("txn", 0, 3), q("txn", 0, 4), q("txn", 0, 9), q("txn", 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	got := byQuery(rts)
	// From the commit marker and from the aborted records, the first data
	// record is the committed one at offset 7.
	for _, off := range []int64{3, 4} {
		if rt := got[q("txn", 0, off)]; !rt.Found || rt.At != 7 || !rt.Timestamp.Equal(base.Add(2*time.Hour)) {
			t.Errorf("from %d: %+v, want offset 7", off, rt)
		}
	}
	if rt, ok := got[q("txn", 0, 9)]; !ok || rt.Found {
		t.Errorf("from 9 (marker, aborted, marker): %+v ok=%v, want no data record", rt, ok)
	}
	if rt := got[q("txn", 0, 1)]; !rt.Found || rt.At != 1 || !rt.Timestamp.Equal(base.Add(time.Second)) {
		t.Errorf("from 1: %+v", rt)
	}
}

// A position below the log start (records deleted) reads the first record
// that is left.
func TestFirstTimestampsBelowLogStart(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "ret", 1, 1, nil)
	base := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	kc.ProduceTo(t, "ret", 0, 10, base, time.Minute)
	deleteRecords(t, kc, "ret", 0, 6)
	r := newReader(t, kc)
	rts, err := r.FirstTimestamps(tctx(t), []backends.OffsetQuery{q("ret", 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rts) != 1 || !rts[0].Found || rts[0].At != 6 || !rts[0].Timestamp.Equal(base.Add(6*time.Minute)) {
		t.Fatalf("below log start: %+v", rts)
	}
}

func deleteRecords(t *testing.T, kc *kafkatest.Cluster, topic string, p int32, before int64) {
	t.Helper()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: p, At: before})
	resp, err := kc.Admin.DeleteRecords(tctx(t), os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// rawBatch fetches partition 0's log bytes from a single-broker cluster.
func rawBatch(t *testing.T, kc *kafkatest.Cluster, topic string) []byte {
	t.Helper()
	b := rawFetch(t, kc, topic, 0, 0).RecordBatches
	if len(b) < 61 {
		t.Fatalf("fetched %d bytes", len(b))
	}
	return b
}

// Real brokers cut the last batch of a partition at its byte limit; the
// reader then uses the batch header: the first timestamp (exact at the
// batch's first offset, an upper bound on the age inside it), or the
// broker's append time for LogAppendTime batches, exact for every record.
func TestHandleWholeAndTruncatedBatches(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "raw", 1, 1, nil)
	base := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ProducerLinger(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: "raw", Value: []byte("payload"), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := cl.ProduceSync(tctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	create := rawBatch(t, kc, "raw")
	if n, _ := walkBatches(create); n != 10 {
		t.Fatalf("expected one batch of 10, last end %d", n)
	}
	// The same batch as if the broker had stamped it (LogAppendTime).
	appended := append([]byte(nil), create...)
	stamp := base.Add(time.Hour)
	binary.BigEndian.PutUint16(appended[21:], binary.BigEndian.Uint16(appended[21:])|0x08)
	binary.BigEndian.PutUint64(appended[35:], uint64(stamp.UnixMilli()))
	binary.BigEndian.PutUint32(appended[17:], crc32.Checksum(appended[21:], crc32.MakeTable(crc32.Castagnoli)))

	cases := []struct {
		name   string
		bytes  []byte
		off    int64
		want   time.Time
		typ    backends.TimestampType
		approx bool
	}{
		{"whole CreateTime", create, 3, base.Add(3 * time.Second), backends.CreateTime, false},
		{"whole LogAppendTime", appended, 3, stamp, backends.LogAppendTime, false},
		{"truncated at batch start", create[:80], 0, base, backends.CreateTime, false},
		{"truncated inside batch", create[:80], 5, base, backends.CreateTime, true},
		{"truncated LogAppendTime", appended[:80], 5, stamp, backends.LogAppendTime, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &TimestampReader{cache: map[tpKey]*partCache{}, dec: kgo.DefaultDecompressor()}
			queries := []backends.OffsetQuery{q("raw", 0, c.off)}
			answers := make([]backends.RecordTime, 1)
			done := make([]bool, 1)
			w := &pending{key: tpKey{"raw", 0}, idx: []int{0}, cur: c.off, limit: 4096}
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = 10, 10, c.bytes
			retry, err := r.handle(w, &rp, queries, answers, done)
			if err != nil || retry || !done[0] {
				t.Fatalf("retry %v err %v done %v", retry, err, done[0])
			}
			a := answers[0]
			if !a.Found || !a.Timestamp.Equal(c.want) || a.Type != c.typ || a.Approximate != c.approx {
				t.Fatalf("got %+v, want %s %s approx=%v", a, c.want, c.typ, c.approx)
			}
		})
	}
}
