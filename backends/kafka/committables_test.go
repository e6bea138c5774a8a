package kafka

import (
	"fmt"
	"testing"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/kafkatest"
)

// CommitTables (the monitor's fast path) must say exactly what
// CommittedOffsets says: the same commits, partitions without a commit
// reading -1, the same groups, and topics listed only where a commit exists.
func TestCommitTablesAgreeWithCommittedOffsets(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 4, 3, nil)
	kc.CreateTopic(t, "payments", 2, 3, nil)
	kc.Commit(t, "sales-analytics", map[string]map[int32]int64{"orders": {0: 7, 3: 2}, "payments": {1: 4}})
	kc.Commit(t, "billing", map[string]map[int32]int64{"payments": {0: 0}})
	cl := dialCluster(t, kc)

	groups := []string{"sales-analytics", "billing"}
	want, werr := cl.CommittedOffsets(tctx(t), groups...)
	got, gerr := cl.CommitTables(tctx(t), groups...)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("errors differ: CommittedOffsets %v, CommitTables %v", werr, gerr)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if len(got) != len(want) {
		t.Fatalf("groups: got %d, want %d", len(got), len(want))
	}
	for g, cs := range want {
		tables := got[g]
		topics := map[string]bool{}
		for _, c := range cs {
			topics[c.Topic] = true
			if at := tables[c.Topic].At(c.Partition); at != c.Offset {
				t.Errorf("%s %s[%d] = %d, want %d", g, c.Topic, c.Partition, at, c.Offset)
			}
		}
		if len(tables) != len(topics) {
			t.Errorf("%s: topics %v, want %v", g, keys(tables), topics)
		}
	}
	if at := got["sales-analytics"]["orders"].At(1); at != -1 {
		t.Errorf("uncommitted orders[1] = %d, want -1", at)
	}
	if _, ok := got["billing"]["orders"]; ok {
		t.Error("billing lists orders without a commit on it")
	}
}

func keys(m map[string]backends.TopicCommits) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTopicCommitsSparsePartitionNumbers(t *testing.T) {
	tc := backends.NewTopicCommits(2, 1<<30)
	tc.Set(3, 10)
	tc.Set(1<<30, 20)
	for p, want := range map[int32]int64{3: 10, 1 << 30: 20, 0: -1, 5000: -1} {
		if got := tc.At(p); got != want {
			t.Errorf("At(%d) = %d, want %d", p, got, want)
		}
	}
}
