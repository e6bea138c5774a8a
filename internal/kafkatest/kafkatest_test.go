package kafkatest

import (
	"context"
	"testing"
	"time"
)

func TestClusterRoundTrip(t *testing.T) {
	c := Start(t, 3)
	c.CreateTopic(t, "t", 3, 3, nil)
	start := time.Unix(1_700_000_000, 0)
	offs := c.ProduceTo(t, "t", 1, 3, start, time.Second)
	if offs[2] != 2 {
		t.Fatalf("offsets %v", offs)
	}
	c.Commit(t, "g", map[string]map[int32]int64{"t": {1: 2}})
	got, err := c.Admin.FetchOffsets(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := got.Lookup("t", 1); o.At != 2 {
		t.Fatalf("committed %d, want 2", o.At)
	}
}
