package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// rawFetch fetches partition 0 of topic from offset from, whole response
// partition: its batches and, with isolation 1 (read_committed), the
// aborted transactions the broker lists for that fetch.
func rawFetch(t *testing.T, kc *kafkatest.Cluster, topic string, from int64, isolation int8) *kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch, req.IsolationLevel = -1, 8<<20, -1, isolation
	md, err := kc.Admin.Metadata(tctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, md.Topics[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset, rp.FetchOffset = 8<<20, -1, -1, from
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := kc.Client.Broker(0).Request(tctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return &resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// rawCommitted fetches as a read_committed consumer would.
func rawCommitted(t *testing.T, kc *kafkatest.Cluster, topic string, from int64) *kmsg.FetchResponseTopicPartition {
	t.Helper()
	return rawFetch(t, kc, topic, from, 1)
}

// The reader's own batch walk must see exactly the data records kgo's full
// decoder sees (offsets, timestamps, types), from every starting offset:
// every compression codec, and two transactional producers interleaving
// committed and aborted transactions with plain records between them.
func TestBatchTimestampsMatchKgo(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	base := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		topic := "codec-" + name
		kc.CreateTopic(t, topic, 1, 1, nil)
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range 40 {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte("some payload to compress, some payload to compress"),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}, Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
		if err := cl.ProduceSync(tctx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}

	kc.CreateTopic(t, "txns", 1, 1, nil)
	producer := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.TransactionalID(id), ClassicTransactions(), kgo.ProducerLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	a, b := producer("a"), producer("b")
	plain, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	n := 0
	send := func(cl *kgo.Client) {
		t.Helper()
		n++
		if err := cl.ProduceSync(tctx(t), &kgo.Record{Topic: "txns", Value: []byte("x"), Timestamp: base.Add(time.Duration(n) * time.Minute)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	begin := func(cl *kgo.Client) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	end := func(cl *kgo.Client, commit bool) {
		t.Helper()
		if err := cl.EndTransaction(tctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// a aborts, then commits, then aborts again; b's transactions
	// interleave with a's; plain records land in between.
	send(plain)
	begin(a)
	send(a)
	begin(b)
	send(b)
	send(a)
	end(a, false)
	send(plain)
	send(b)
	end(b, true)
	begin(a)
	send(a)
	end(a, true)
	begin(b)
	send(b)
	begin(a)
	send(a)
	end(b, false)
	send(a)
	end(a, false)
	send(plain)

	dec := kgo.DefaultDecompressor()
	for _, topic := range []string{"codec-none", "codec-gzip", "codec-snappy", "codec-lz4", "codec-zstd", "txns"} {
		last, _ := walkBatches(rawCommitted(t, kc, topic, 0).RecordBatches)
		for from := int64(0); from < last; from++ {
			rp := rawCommitted(t, kc, topic, from)
			got, err := batchTimestamps(rp, from, dec, nil)
			if err != nil {
				t.Fatalf("%s from %d: %v", topic, from, err)
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: from, IsolationLevel: kgo.ReadCommitted(), Topic: topic}, rp, dec, nil)
			if fp.Err != nil {
				t.Fatal(fp.Err)
			}
			var want []recTS
			for _, r := range fp.Records {
				if r.Offset >= from {
					want = append(want, recTS{off: r.Offset, ms: r.Timestamp.UnixMilli(), typ: tsType(r.Attrs.TimestampType())})
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s from %d:\n got %v\nwant %v", topic, from, got, want)
			}
		}
	}

	// The ground truth of the transactional log: 0 plain, 1 a, 2 b, 3 a,
	// 4 a's abort marker, 5 plain, 6 b, 7 b's commit marker, 8 a, 9 a's
	// commit marker, 10 b, 11 a, 12 b's abort marker, 13 a, 14 a's abort
	// marker, 15 plain. Committed data: 0, 2, 5, 6, 8, 15, from any
	// offset of the response, even when the response starts below an
	// abort marker that closes an earlier transaction of the same producer.
	sent := map[int64]int{0: 1, 2: 3, 5: 5, 6: 6, 8: 7, 15: 11} // offset -> n of its send
	rp := rawCommitted(t, kc, "txns", 0)
	if len(rp.AbortedTransactions) == 0 {
		t.Fatal("the fetch lists no aborted transactions")
	}
	for _, c := range []struct {
		from int64
		want []int64
	}{{0, []int64{0, 2, 5, 6, 8, 15}}, {5, []int64{5, 6, 8, 15}}, {9, []int64{15}}} {
		got, err := batchTimestamps(rp, c.from, dec, nil)
		if err != nil {
			t.Fatal(err)
		}
		var offs []int64
		for _, r := range got {
			offs = append(offs, r.off)
			if want := base.Add(time.Duration(sent[r.off]) * time.Minute).UnixMilli(); r.ms != want {
				t.Errorf("offset %d: timestamp %d, want %d", r.off, r.ms, want)
			}
		}
		if fmt.Sprint(offs) != fmt.Sprint(c.want) {
			t.Errorf("txns from %d: offsets %v, want %v", c.from, offs, c.want)
		}
	}

	// A corrupted batch is an error, not wrong timestamps.
	rp = rawCommitted(t, kc, "codec-none", 0)
	rp.RecordBatches = append([]byte(nil), rp.RecordBatches...)
	rp.RecordBatches[70] ^= 0xff
	if _, err := batchTimestamps(rp, 0, dec, nil); err == nil {
		t.Fatal("a batch with a bad CRC decoded without error")
	}
}
