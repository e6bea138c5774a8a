package main

import (
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// Reported on the 3-broker demo: berth redrive plan --offsets 0:1 said "no
// record at 0:1" while berth dlq show listed that record. The read of the
// coordinates gave up after 3s without an answer and took that for "no
// record". Here the broker answers that read after 4s (a busy machine):
// the plan still finds the record that dlq show lists.
func TestRedrivePlanOffsetsOnASlowBroker(t *testing.T) {
	isolateConfig(t)
	t.Setenv("BERTH_AUDIT_FILE", filepath.Join(t.TempDir(), "audit.log"))
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "payments", 3, 3, nil)
	kc.CreateTopic(t, "payments.DLT", 3, 3, nil)
	var dlt []*kgo.Record
	for i, key := range []string{"order-1", "order-2"} {
		origOffset := make([]byte, 8)
		binary.BigEndian.PutUint64(origOffset, uint64(i))
		dlt = append(dlt, &kgo.Record{Topic: "payments.DLT", Partition: 0, Key: []byte(key), Value: []byte(key),
			Headers: []kgo.RecordHeader{
				{Key: "kafka_dlt-original-topic", Value: []byte("payments")},
				{Key: "kafka_dlt-original-partition", Value: make([]byte, 4)},
				{Key: "kafka_dlt-original-offset", Value: origOffset},
			}})
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(t.Context(), dlt...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	bs := strings.Join(kc.Addrs, ",")

	out, errOut, code := runBerth(t, "--bootstrap", bs, "dlq", "show", "payments.DLT", "-o", "json")
	if code != 0 {
		t.Fatalf("dlq show: exit %d: %s", code, errOut)
	}
	var shown []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	listed := false
	for _, r := range shown {
		listed = listed || (r.Partition == 0 && r.Offset == 1)
	}
	if !listed {
		t.Fatalf("dlq show does not list 0:1: %s", out)
	}

	// The read that starts at offset 1 of partition 0 (the plan's read of
	// its coordinates) is answered 4s late, once.
	var slowed atomic.Bool
	kc.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if p.Partition == 0 && p.FetchOffset == 1 && slowed.CompareAndSwap(false, true) {
					kc.SleepControl(func() { time.Sleep(4 * time.Second) })
				}
			}
		}
		return nil, nil, false
	})
	planFile := filepath.Join(t.TempDir(), "p.json")
	out, errOut, code = runBerth(t, "--bootstrap", bs, "redrive", "plan", "payments.DLT", "--offsets", "0:1", "--out", planFile, "-o", "json")
	if code != 0 {
		t.Fatalf("redrive plan --offsets 0:1: exit %d: %s", code, errOut)
	}
	var p struct {
		Records []struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(p.Records) != 1 || p.Records[0].Partition != 0 || p.Records[0].Offset != 1 {
		t.Fatalf("plan records %+v, want 0:1", p.Records)
	}
	if !slowed.Load() {
		t.Fatal("no read at 0:1 was slowed: the test did not test a slow broker")
	}
}
