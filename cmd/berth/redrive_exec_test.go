package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

// redriveFixture is a cluster with an original topic whose records failed
// into a DLQ with Spring headers, and a config whose policy needs no review.
type redriveFixture struct {
	kc     *kafkatest.Cluster
	config string
	audit  string
	n      int
}

func newRedriveFixture(t *testing.T, n int, policy string) *redriveFixture {
	t.Helper()
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "ledger-events", 3, 1, nil)
	kc.CreateTopic(t, "ledger-events.DLT", 2, 1, nil)
	// The originals: keys cycle over 5 accounts, so each key has many events.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var originals []*kgo.Record
	for i := 0; i < n; i++ {
		originals = append(originals, &kgo.Record{Topic: "ledger-events", Partition: int32(i % 5 % 3), Key: []byte(fmt.Sprintf("acct-%d", i%5)), Value: []byte(fmt.Sprintf(`{"eventId":"evt-%04d","seq":%d}`, i, i))})
	}
	if err := cl.ProduceSync(context.Background(), originals...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var dead []*kgo.Record
	for i, o := range originals {
		p, off := make([]byte, 4), make([]byte, 8)
		binary.BigEndian.PutUint32(p, uint32(o.Partition))
		binary.BigEndian.PutUint64(off, uint64(o.Offset))
		dead = append(dead, &kgo.Record{Topic: "ledger-events.DLT", Partition: int32(i % 2), Key: o.Key, Value: o.Value, Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("ledger-events")},
			{Key: "kafka_dlt-original-partition", Value: p},
			{Key: "kafka_dlt-original-offset", Value: off},
			{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")},
			{Key: "kafka_dlt-exception-message", Value: []byte("Read timed out")},
		}})
	}
	if err := cl.ProduceSync(context.Background(), dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &redriveFixture{kc: kc, n: n, audit: filepath.Join(dir, "audit.log")}
	f.config = writeConfig(t, fmt.Sprintf(`current_context: test
contexts:
  test:
    kind: kafka
    bootstrap: [%s]
audit:
  file: %s
redrive:
  policies:
%s`, kc.Addrs[0], f.audit, policy))
	return f
}

// plan makes a plan over every DLQ record and returns its hash.
func (f *redriveFixture) plan(t *testing.T, extra ...string) string {
	t.Helper()
	out, errOut, code := runBerth(t, "--config", f.config, "dlq", "classes", "ledger-events.DLT", "-o", "json")
	if code != 0 {
		t.Fatalf("dlq classes: %s", errOut)
	}
	var classes []struct {
		Class string `json:"class"`
	}
	if err := json.Unmarshal([]byte(out), &classes); err != nil || len(classes) != 1 {
		t.Fatalf("classes: %v %s", err, out)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	args := append([]string{"--config", f.config, "redrive", "plan", "ledger-events.DLT", "--class", classes[0].Class, "--out", planFile, "-o", "json"}, extra...)
	out, errOut, code = runBerth(t, args...)
	if code != 0 {
		t.Fatalf("redrive plan: exit %d: %s %s", code, errOut, out)
	}
	var p struct {
		Hash   string `json:"hash"`
		Totals struct {
			Included int `json:"included"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.Totals.Included != f.n {
		t.Fatalf("plan includes %d of %d records: %s", p.Totals.Included, f.n, out)
	}
	return p.Hash
}

// state reads the target (read_committed) and the ledger and checks they
// agree: no event twice in the target, one ledger entry per copy of this
// plan, at the coordinates where the copy is. It returns how many are done.
func (f *redriveFixture) state(t *testing.T, plan string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := f.kc.Admin.ListCommittedOffsets(ctx, "ledger-events") // the LSO: a killed run may leave a transaction open
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kc.Addrs...), kgo.ConsumeTopics("ledger-events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	copies := map[string]string{} // event -> "p:o"
	lastSeq := map[string]int{}
	next := map[int32]int64{}
	for {
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if next[o.Partition] < o.Offset {
				done = false
			}
		})
		if done {
			break
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the target: %v (at %v)", ctx.Err(), next)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() || !carries(r, plan) {
				return
			}
			var id string
			var seq int
			fmt.Sscanf(string(r.Value), `{"eventId":"%8s","seq":%d}`, &id, &seq)
			if prev, ok := copies[id]; ok {
				t.Fatalf("event %s is in the target twice (%s and %d:%d)", id, prev, r.Partition, r.Offset)
			}
			copies[id] = fmt.Sprintf("%d:%d", r.Partition, r.Offset)
			if prev, ok := lastSeq[string(r.Key)]; ok && seq < prev {
				t.Fatalf("key %s: event %d arrived after %d", r.Key, seq, prev)
			}
			lastSeq[string(r.Key)] = seq
		})
	}
	c, err := kafka.Dial(ctx, kafka.Options{Bootstrap: f.kc.Addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ledger, err := kafka.NewPlanStore(c).Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, e := range ledger {
		if e.Plan != plan {
			continue
		}
		mine++
		if e.EventID == "" || copies[e.EventID] != fmt.Sprintf("%d:%d", e.TargetPartition, e.TargetOffset) {
			t.Fatalf("ledger entry for %s says %d:%d, the target copy is at %q", e.EventID, e.TargetPartition, e.TargetOffset, copies[e.EventID])
		}
	}
	if mine != len(copies) {
		t.Fatalf("ledger has %d entries for the plan, the target %d copies", mine, len(copies))
	}
	return len(copies)
}

func carries(r *kgo.Record, plan string) bool {
	for _, h := range r.Headers {
		if h.Key == redrive.HeaderPlan {
			return string(h.Value) == plan
		}
	}
	return false
}

// TestRedriveSurvivesKill9 kills `berth redrive execute` with SIGKILL at
// random points and resumes it: every time, the target holds each event at
// most once and the ledger agrees; at the end, each exactly once.
func TestRedriveSurvivesKill9(t *testing.T) {
	bin := buildBerth(t)
	const n = 400
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t, "--batch-size", "4", "--rate", "400")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills := 0
	for round := 0; round < 40 && kills < 22; round++ {
		cmd := exec.Command(bin, "--config", f.config, "redrive", "execute", plan[:16], "--no-verify")
		cmd.Env = os.Environ()
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of progress lines, plus a random
		// sub-batch delay so some kills land inside a transaction.
		target := rng.IntN(5)
		lines := bufio.NewScanner(stderr)
		seen, killed := 0, false
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "progress ") {
				if seen == target {
					time.AfterFunc(time.Duration(rng.IntN(12000))*time.Microsecond, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
					killed = true
					break
				}
				seen++
			}
		}
		if killed {
			for lines.Scan() {
			}
		}
		err = cmd.Wait()
		if killed && err != nil {
			kills++
		}
		done := f.state(t, plan)
		if done == n {
			break
		}
	}
	if kills < 20 {
		t.Fatalf("only %d runs were killed mid-plan; the plan finished too early to test resumption", kills)
	}
	// Resume to the end.
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", plan[:16], "--no-verify", "-o", "json"); code != 0 {
		t.Fatalf("final run: exit %d: %s", code, errOut)
	}
	if done := f.state(t, plan); done != n {
		t.Fatalf("after resuming, %d of %d events are in the target", done, n)
	}
	// Every step was audited and the chain holds.
	log, err := audit.Open(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := log.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("audit chain broken: %+v", rep)
	}
	t.Logf("killed %d runs; %d audit entries", kills, rep.Entries)
}
