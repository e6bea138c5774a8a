package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/kafkatest"
)

func dialResets(t *testing.T, kc *kafkatest.Cluster) *Resets {
	t.Helper()
	r := &Resets{Cluster: dialCluster(t, kc)}
	r.ts = NewTimestampReader(r.c)
	return r
}

func TestResetsUnknownGroupIsEmpty(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	r := dialResets(t, kc)
	g, err := r.GroupForReset(tctx(t), "never-seen")
	if err != nil || g.State != "Dead" || len(g.Members) != 0 {
		t.Fatalf("unknown group: %+v %v", g, err)
	}
	c, err := r.CommittedOffsets(tctx(t), "never-seen")
	if err != nil || len(c["never-seen"]) != 0 {
		t.Fatalf("unknown group's offsets: %+v %v", c, err)
	}
}

func TestResetsOffsetsForTimeFromRecordTimestamps(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "events", 2, 1, nil)
	start := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	kc.ProduceTo(t, "events", 0, 6, start, 10*time.Minute) // 06:00 .. 06:50
	kc.ProduceTo(t, "events", 1, 3, start, time.Hour)      // 06:00, 07:00, 08:00
	r := dialResets(t, kc)
	got, err := r.OffsetsForTime(tctx(t), start.Add(25*time.Minute), "events")
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := got[backends.TopicPartition{Topic: "events", Partition: 0}], got[backends.TopicPartition{Topic: "events", Partition: 1}]
	if p0 != 3 || p1 != 1 {
		t.Fatalf("offsets for 06:25: p0 %d p1 %d, want 3 and 1", p0, p1)
	}
	// No record at or after: the log end.
	got, err = r.OffsetsForTime(tctx(t), start.Add(5*time.Hour), "events")
	if err != nil {
		t.Fatal(err)
	}
	if got[backends.TopicPartition{Topic: "events", Partition: 0}] != 6 || got[backends.TopicPartition{Topic: "events", Partition: 1}] != 3 {
		t.Fatalf("offsets after the last record: %v, want the log ends", got)
	}
	if _, err := r.OffsetsForTime(tctx(t), start, "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("unknown topic: %v", err)
	}
}

func TestResetsCommitNamesFailedPartitions(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "events", 1, 1, nil)
	r := dialResets(t, kc)
	if err := r.CommitOffsets(tctx(t), "g", []backends.Committed{{Topic: "events", Partition: 0, Offset: 0, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	err := r.CommitOffsets(tctx(t), "g", []backends.Committed{{Topic: "ghost", Partition: 2, Offset: 0, LeaderEpoch: -1}})
	if err == nil || !strings.Contains(err.Error(), "ghost[2]") {
		t.Fatalf("commit to a missing topic: %v", err)
	}
}
