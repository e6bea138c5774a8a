package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/kafka"
)

// TestRedriveLargePlanIsStoredAndExecutes: a plan far larger than a broker's
// message size limit is stored in the cluster's plan store (stored: true),
// and executing it by its hash prefix sends every record.
func TestRedriveLargePlanIsStoredAndExecutes(t *testing.T) {
	const n = 3000
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "plan", "ledger-events.DLT", "--offsets", offsetsArg(n), "--rate", "100000", "--batch-size", "500", "--out", t.TempDir()+"/p.json", "-o", "json")
	if code != 0 {
		t.Fatalf("redrive plan: exit %d: %s", code, errOut)
	}
	var p struct {
		Hash      string `json:"hash"`
		Stored    bool   `json:"stored"`
		StoreNote string `json:"store_note"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if !p.Stored {
		t.Fatalf("a %d-record plan was not stored: %s", n, p.StoreNote)
	}
	out, errOut, code = runBerth(t, "--config", f.config, "redrive", "execute", p.Hash[:16], "--yes", "--no-verify", "-o", "json")
	if code != 0 {
		t.Fatalf("execute: exit %d: %s", code, errOut)
	}
	var res struct {
		Sent int `json:"sent"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sent != n {
		t.Fatalf("execute sent %d of %d (%v): %s", res.Sent, n, err, errOut)
	}
	if done := f.state(t, p.Hash); done != n {
		t.Fatalf("%d of %d events are in the target", done, n)
	}
}

// offsetsArg selects the fixture's n DLQ records (two partitions, i%2).
func offsetsArg(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i%2) + ":" + strconv.Itoa(i/2))
	}
	return b.String()
}

// TestRedriveStatusSkipsABadStoreRecord: one malformed record in the plan
// store no longer blocks status and execute for every plan: it is skipped
// and reported by offset (its text escaped), and the other plans work.
func TestRedriveStatusSkipsABadStoreRecord(t *testing.T) {
	f := newRedriveFixture(t, 4, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t)
	f.kc.Produce(t, &kgo.Record{Topic: kafka.PlanTopic, Key: []byte("plan/0badc0de\x1b[2J"), Value: []byte("{not json")})

	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "status", "-o", "json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	var rows []struct {
		Plan string `json:"plan"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].Plan != plan {
		t.Fatalf("status rows %v: %s", err, out)
	}
	if !strings.Contains(errOut, "skipped "+kafka.PlanTopic+" offset ") || strings.Contains(errOut, "\x1b") {
		t.Fatalf("the bad record is not reported by offset, escaped: %q", errOut)
	}
	out, errOut, code = runBerth(t, "--config", f.config, "redrive", "execute", plan[:12], "--yes", "--no-verify", "-o", "json")
	if code != 0 || !strings.Contains(out, `"sent": 4`) {
		t.Fatalf("execute beside a bad record: exit %d: %s %s", code, errOut, out)
	}
}

// TestRedriveWatchEndsWhenTheConsumersCatchUp: execute's re-failure watch
// says what it watches and for how long, and ends as soon as the consumer
// group reading the target has committed past every copy, not after its
// whole window (2 minutes here); JSON says how long it watched and why it
// ended.
func TestRedriveWatchEndsWhenTheConsumersCatchUp(t *testing.T) {
	f := newRedriveFixture(t, 20, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t, "--rate", "1000")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(f.kc.Addrs...), kgo.ConsumerGroup("ledger-svc"), kgo.ConsumeTopics("ledger-events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.AutoCommitInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	go func() {
		for ctx.Err() == nil {
			consumer.PollFetches(ctx)
		}
	}()
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", plan[:12], "--yes", "--watch", "2m", "-o", "json")
	if code != 0 {
		t.Fatalf("execute: exit %d: %s", code, errOut)
	}
	var res struct {
		Sent     int `json:"sent"`
		Verified struct {
			Kafka struct {
				Watched     string   `json:"watched"`
				WatchFor    string   `json:"watch_for"`
				WatchEnded  string   `json:"watch_ended"`
				WatchGroups []string `json:"watch_groups"`
			} `json:"kafka"`
		} `json:"verification"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	v := res.Verified.Kafka
	if res.Sent != 20 || v.WatchEnded != "consumers_caught_up" || v.WatchFor != "2m0s" || len(v.WatchGroups) != 1 || v.WatchGroups[0] != "ledger-svc" {
		t.Fatalf("watch: %+v (sent %d)\n%s", v, res.Sent, errOut)
	}
	if !strings.Contains(errOut, "watching ledger-events.DLT for re-failures of plan "+plan[:12]+" until the consumers of ledger-events pass its 20 copies, at most 2m0s") ||
		!strings.Contains(errOut, "passed every copy; 0 re-failed") {
		t.Fatalf("the watch does not say what it watches and why it ended:\n%s", errOut)
	}
}

// TestRedrivePlanRefusesASelectionPastRead: a class selection over a DLQ
// holding more records than --read is refused with a message naming the
// bound (never planned over the records read only): no plan file, nothing
// in the plan store.
func TestRedrivePlanRefusesASelectionPastRead(t *testing.T) {
	f := newRedriveFixture(t, 30, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	out, errOut, code := runBerth(t, "--config", f.config, "dlq", "classes", "ledger-events.DLT", "-o", "json")
	var classes []struct {
		Class string `json:"class"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &classes) != nil || len(classes) != 1 {
		t.Fatalf("dlq classes: exit %d %s %s", code, out, errOut)
	}
	planFile := t.TempDir() + "/p.json"
	_, errOut, code = runBerth(t, "--config", f.config, "redrive", "plan", "ledger-events.DLT", "--class", classes[0].Class, "--read", "10", "--out", planFile, "-o", "json")
	if code == 0 || !strings.Contains(errOut, "more than the 10 read") || !strings.Contains(errOut, "raise --read") {
		t.Fatalf("a selection past --read: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(planFile); !os.IsNotExist(err) {
		t.Fatalf("a refused plan left a file: %v", err)
	}
	out, errOut, code = runBerth(t, "--config", f.config, "redrive", "status", "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("a refused plan was stored: exit %d %s %s", code, out, errOut)
	}
}
