package redrive

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
	"time"
)

// streamedQueuePlan is a plan with what encodings must escape in its event
// ids (quotes, backslashes, HTML characters, controls, U+2028, invalid
// UTF-8, a character beyond U+FFFF), several targets, a record without
// one, exclusions, and records out of position order.
func streamedQueuePlan() QueuePlan {
	ids := []string{"m-\"1\"\\", "e<0>&", "\u2028é", "\x1b[31m", "\xff\xfe", "\U0001F600", "plain"}
	p := QueuePlan{Cluster: "rabbit@c", Vhost: "/", DLQ: "orders.dlq", QueueType: "classic", Target: QueueTargetExchange, Rate: 50, Window: 500,
		Selection: QueueSelection{All: true}, CreatedAt: time.Unix(1_700_000_000, 0).UTC(), Policy: PolicySnapshot{Review: "required", Approvals: 1}}
	for i, id := range ids {
		r := QueueRecord{Position: (i * 5) % len(ids), EventID: id, Digest: sha256.Sum256([]byte(id)), Verdict: include()}
		switch i % 3 {
		case 0:
			r = r.WithOrigin(QueueOrigin{Exchange: "orders", RoutingKey: "created"})
		case 1:
			r = r.WithOrigin(QueueOrigin{RoutingKey: "work<&>"})
		}
		if i%3 == 2 {
			r.Verdict = exclude(ReasonCheckFailed, "no routing")
		} else if i == 4 {
			r.Verdict = exclude(ReasonLoopLimit, "redriven 5 times")
		}
		p.Records = append(p.Records, r)
	}
	return p
}

// A RabbitMQ plan is hashed and written a row at a time from its records,
// and read back a row at a time: the file is byte for byte what encoding
// its whole core gives, its hash the whole core's, and reading it gives
// the same plan (same hash, same records in position order).
func TestQueuePlanStreamsAsTheWholeCore(t *testing.T) {
	p := streamedQueuePlan()
	c := p.Core()
	whole, err := NewSignedPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	want, err := whole.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash() != whole.Hash {
		t.Fatalf("hash %s, the whole core's %s", p.Hash(), whole.Hash)
	}
	var got bytes.Buffer
	if err := p.EncodeTo(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("streamed file\n%s\nwhole core's\n%s", got.String(), want)
	}
	back, err := DecodeQueuePlanFrom(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if back.Hash() != whole.Hash || back.computeHash() != whole.Hash {
		t.Fatalf("read back: hash %s (computed %s), want %s", back.Hash(), back.computeHash(), whole.Hash)
	}
	// As the whole file decodes (invalid UTF-8 is U+FFFD once written).
	read, err := DecodeSignedPlan(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Records) != len(read.Plan.Rows) {
		t.Fatalf("read back %d records, want %d", len(back.Records), len(read.Plan.Rows))
	}
	for i, r := range back.Records {
		row := read.Plan.Rows[i]
		if r.Loc() != row.Loc || r.Digest.String() != row.Digest || r.Included != row.Included() || (!r.Included && r.Reason != row.Verdict) {
			t.Errorf("record %d: %s %s %v %s; row %+v", i, r.Loc(), r.Digest, r.Included, r.Reason, row)
		}
	}
	// Sealed, the hash is kept while nothing hashed changes: a header
	// field, a record edited in place or retargeting make it computed again.
	p.Seal()
	p.Records[1].Position = 99
	if p.Hash() == whole.Hash {
		t.Fatal("a record edited after the plan was sealed kept its old hash")
	}
	p = streamedQueuePlan()
	p.Seal()
	p.Cluster = "elsewhere"
	if p.Hash() == whole.Hash {
		t.Fatal("a header edited after the plan was sealed kept its old hash")
	}
	p = streamedQueuePlan()
	p.Seal()
	p.ToQueues()
	if p.Hash() == whole.Hash || p.Hash() != p.computeHash() {
		t.Fatal("retargeting a sealed plan kept its old hash")
	}
}

// A file whose header holds what a RabbitMQ plan does not keep is read
// (its hash is what its content hashes to) but the plan made from it is
// hashed again, as before: its hash is not the file's, so nothing signed
// over the file's hash counts for it.
func TestQueuePlanReadWithForeignHeaderIsHashedAgain(t *testing.T) {
	c := streamedQueuePlan().Core()
	c.Selection.Key = "kafka-only"
	sp, err := NewSignedPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodeQueuePlanFrom(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash() == sp.Hash {
		t.Fatal("a plan that does not keep the file's header took the file's hash")
	}
}

// Planning from messages one at a time keeps only the selected messages'
// records; the messages passed over still count for ordering.
func TestQueuePlannerKeepsOnlySelected(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	b, err := NewQueuePlanner(QueueSelection{EventIDs: []string{"a1"}})
	if err != nil {
		t.Fatal(err)
	}
	b.Reserve(8)
	for _, m := range []QueueMessage{orderedMsg(0, "a0", "A", t0), orderedMsg(1, "a1", "A", t0.Add(time.Second))} {
		b.Add(m)
	}
	p := b.Plan(PolicySnapshot{}, QueueCheckInput{}, t0)
	if got := verdictsOf(p); got != "a1:ordering_hazard" {
		t.Fatalf("verdicts %s", got)
	}
	if _, err := NewQueuePlanner(QueueSelection{}); err == nil || !strings.Contains(err.Error(), "selection") {
		t.Fatalf("an empty selection: %v", err)
	}
}
