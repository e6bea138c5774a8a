package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

func newRedriveFixture(t *testing.T, n int, policy string, opts ...kfake.Opt) *redriveFixture {
	t.Helper()
	isolateConfig(t)
	kc := kafkatest.Start(t, 1, opts...)
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
			// Decoded, not scanned: past evt-9999 the ids are longer, and a
			// fixed-width scan would read evt-10000 as evt-1000.
			var ev struct {
				ID  string `json:"eventId"`
				Seq int    `json:"seq"`
			}
			if err := json.Unmarshal(r.Value, &ev); err != nil {
				t.Fatalf("copy %d:%d: %v", r.Partition, r.Offset, err)
			}
			id, seq := ev.ID, ev.Seq
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
//
// Where a run is killed does not depend on how fast the machine is: the
// broker holds each transaction's commit until the test lets it through
// (commitGate), so a run is let commit 0 to 3 batches and is then killed while
// its next commit waits (its records written, not committed: a kill inside
// a transaction) or, every other run, a random moment after that commit is
// let through too (before or after it lands, or in the next batch). No run
// can reach the plan's end, so every run is a kill mid-plan. A kill that
// lands mid-append tears the audit log's last line; the next run refuses,
// and the test repairs the log (`berth audit repair`) as an operator would
// and runs that round again.
func TestRedriveSurvivesKill9(t *testing.T) {
	bin := buildBerth(t)
	const n, runs = 400, 22 // at most 4 batches of 4 a run: 352 of 400 records
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t, "--batch-size", "4", "--rate", "400")
	c := newCommitGate(f.kc)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills, repairs := 0, 0
	for round := 0; round < runs; round++ {
		cmd := exec.Command(bin, "--config", f.config, "redrive", "execute", plan[:16], "--yes", "--no-verify")
		cmd.Env = os.Environ()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		torn := false
	run:
		for commits := rng.IntN(4); commits >= 0; commits-- {
			select {
			case <-c.arrived:
			case err := <-exited:
				if !strings.Contains(stderr.String(), "the last entry is incomplete") {
					t.Fatalf("round %d: the run ended (%v) before it was killed: %s", round, err, stderr.String())
				}
				torn = true
				break run
			}
			if commits > 0 || round%2 == 1 {
				c.let <- struct{}{}
			}
		}
		if torn {
			// A kill in an earlier round landed mid-append and left the
			// audit log's last line torn, so this run refused before its
			// first batch (no commit of it waits). Do what an operator
			// does: set the line aside, check the chain, run again.
			if repairs++; repairs > runs {
				t.Fatalf("%d torn audit logs in %d rounds", repairs, runs)
			}
			if out, errOut, code := runBerth(t, "--config", f.config, "audit", "repair"); code != 0 || !strings.HasPrefix(out, "Set aside the incomplete last line") {
				t.Fatalf("round %d: audit repair: exit %d %s\n%s", round, code, errOut, out)
			}
			if out, errOut, code := runBerth(t, "--config", f.config, "audit", "verify"); code != 0 {
				t.Fatalf("round %d: audit verify after the repair: exit %d %s\n%s", round, code, errOut, out)
			}
			round--
			continue
		}
		if round%2 == 1 {
			time.Sleep(time.Duration(rng.IntN(12000)) * time.Microsecond) // where the kill lands, not synchronisation
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if err := <-exited; err != nil {
			kills++
		}
		c.drop() // a commit the killed run left waiting is not made
		if done := f.state(t, plan); done == n {
			t.Fatalf("round %d: the plan finished although each run was held to a few batches", round)
		}
	}
	c.open()
	if kills != runs {
		t.Fatalf("%d of %d runs were killed mid-plan", kills, runs)
	}
	// Resume to the end.
	// On failure the JSON (its failed[] carries each batch's error) is
	// printed too: a failed batch's reason is not on stderr.
	if out, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", plan[:16], "--yes", "--no-verify", "-o", "json"); code != 0 {
		t.Fatalf("final run: exit %d: %s\n%s", code, errOut, out)
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
	t.Logf("killed %d runs; %d audit entries; %d torn audit logs repaired", kills, rep.Entries, repairs)
}

func sshKey(t testing.TB, dir, name string) (keyFile, pub string) {
	t.Helper()
	keyFile = filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	b, err := os.ReadFile(keyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return keyFile, strings.TrimSpace(string(b))
}

// TestRedriveApprovalWorkflow drives the two-person rule from the command
// line: every refusal names its reason and sends nothing.
func TestRedriveApprovalWorkflow(t *testing.T) {
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	mallory, _ := sshKey(t, dir, "mallory")
	const n = 12
	f := newRedriveFixture(t, n, reviewPolicy(signers, ""))
	plan := f.plan(t, "--key", alice)
	exec := func(extra ...string) (string, string, int) {
		return runBerth(t, append([]string{"--config", f.config, "redrive", "execute", plan[:12], "--yes", "--no-verify", "-o", "json"}, extra...)...)
	}
	approve := func(key string) (string, int) {
		_, errOut, code := runBerth(t, "--config", f.config, "redrive", "approve", plan[:12], "--key", key)
		return errOut, code
	}

	if _, errOut, code := exec(); code != 1 || !strings.Contains(errOut, "0 of 1 required approvals") {
		t.Fatalf("unapproved plan: exit %d %q", code, errOut)
	}
	if errOut, code := approve(alice); code != 1 || !strings.Contains(errOut, "author cannot approve") {
		t.Fatalf("self-approval: exit %d %q", code, errOut)
	}
	if errOut, code := approve(mallory); code != 1 || !strings.Contains(errOut, "not in allowed_signers") {
		t.Fatalf("stranger's approval: exit %d %q", code, errOut)
	}
	if f.state(t, plan) != 0 {
		t.Fatal("a refused plan sent records")
	}
	// A signature over another plan, handed in as made by ssh-keygen.
	other := filepath.Join(dir, "other.hash")
	if err := os.WriteFile(other, []byte(strings.Repeat("0", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := osexec(t, "ssh-keygen", "-Y", "sign", "-n", "berth-redrive", "-f", bob, other); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	_, errOut, code := runBerth(t, "--config", f.config, "redrive", "approve", plan[:12], "--signature", other+".sig")
	if code != 1 || !strings.Contains(errOut, "does not verify") {
		t.Fatalf("signature over another plan: exit %d %q", code, errOut)
	}
	// A read-only context refuses an approval (it writes to the plan store).
	if _, errOut, code := runBerth(t, "--config", f.config, "--read-only", "redrive", "approve", plan[:12], "--key", bob); code != 1 || !strings.Contains(errOut, "read-only") {
		t.Fatalf("read-only approval: exit %d %q", code, errOut)
	}
	// Read-only refuses even an approved plan.
	if errOut, code := approve(bob); code != 0 {
		t.Fatalf("bob's approval: exit %d %q", code, errOut)
	}
	if _, errOut, code := exec("--read-only"); code != 1 || !strings.Contains(errOut, "read-only") {
		t.Fatalf("read-only: exit %d %q", code, errOut)
	}
	out, errOut, code := exec()
	if code != 0 {
		t.Fatalf("approved plan: exit %d %q", code, errOut)
	}
	var res struct {
		Sent      int      `json:"sent"`
		Approvers []string `json:"approvers"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sent != n || len(res.Approvers) != 1 || res.Approvers[0] != "bob@hc" {
		t.Fatalf("result %+v (%v) from %s", res, err, out)
	}
	if f.state(t, plan) != n {
		t.Fatal("not every record arrived")
	}
	// The audit log has the refusals, the approval and the execution, chained.
	log, err := audit.Open(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	joined := strings.Join(actions, " ")
	for _, want := range []string{"redrive.refused", "redrive.approved", "redrive.execute.started", "redrive.batch.sent", "redrive.execute.finished"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("audit log lacks %s: %v", want, actions)
		}
	}
}

func osexec(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	return exec.Command(name, args...).CombinedOutput()
}

// TestRedriveCancelFinishesTheBatchThenStops interrupts an execution with
// SIGINT: the batch in flight completes, the run reports itself cancelled,
// and running it again finishes the plan.
func TestRedriveCancelFinishesTheBatchThenStops(t *testing.T) {
	bin := buildBerth(t)
	const n = 60
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t, "--batch-size", "5", "--rate", "50")
	cmd, stdout, lines := startLines(t, bin, "--config", f.config, "redrive", "execute", plan[:12], "--yes", "--no-verify", "-o", "json")
	progress, summary := 0, ""
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "progress ") {
			if progress++; progress == 3 {
				_ = cmd.Process.Signal(os.Interrupt)
			}
		}
		if strings.HasPrefix(lines.Text(), "redrive ") {
			summary = lines.Text()
		}
	}
	if !strings.Contains(summary, "cancelled") {
		t.Fatalf("the summary line does not say the run was cancelled: %q", summary)
	}
	// Not every approved record was sent: a script must not read it as
	// done (exit 1, as on RabbitMQ).
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("cancelled run exited with %v, want exit status 1", err)
	}
	var res struct {
		Sent      int  `json:"sent"`
		Cancelled bool `json:"cancelled"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if !res.Cancelled || res.Sent == 0 || res.Sent >= n || res.Sent%5 != 0 {
		t.Fatalf("cancel: %+v (want whole batches, some but not all sent)", res)
	}
	if got := f.state(t, plan); got != res.Sent {
		t.Fatalf("target has %d copies, the run reported %d", got, res.Sent)
	}
	if out, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", plan[:12], "--yes", "--no-verify"); code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := f.state(t, plan); got != n {
		t.Fatalf("after resuming: %d of %d", got, n)
	}
}

// TestAuditTopicMirrorsAndCatchesATruncatedFile: destructive steps go to the
// local log and to the cluster's audit topic; `berth audit verify` checks
// both, and the topic shows entries cut from the end of the file, which the
// file's own chain cannot.
func TestAuditTopicMirrorsAndCatchesATruncatedFile(t *testing.T) {
	f := newRedriveFixture(t, 4, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t)
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", plan[:12], "--yes", "--no-verify"); code != 0 {
		t.Fatalf("execute: %s", errOut)
	}
	out, errOut, code := runBerth(t, "--config", f.config, "audit", "verify", "-o", "json")
	if code != 0 {
		t.Fatalf("verify: exit %d %s", code, errOut)
	}
	var rep struct {
		OK      bool `json:"ok"`
		Entries int  `json:"entries"`
		Mirror  struct {
			Checked bool `json:"checked"`
			Sources []struct {
				Entries int  `json:"entries"`
				OK      bool `json:"ok"`
			} `json:"sources"`
		} `json:"mirror"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || !rep.Mirror.Checked || len(rep.Mirror.Sources) != 1 || rep.Mirror.Sources[0].Entries != rep.Entries || !rep.Mirror.Sources[0].OK {
		t.Fatalf("mirror not in agreement with the file: %s", out)
	}
	// Cut the newest entry from the file: its chain still holds, the mirror does not agree.
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimRight(string(raw), "\n"), "\n")
	if err := os.WriteFile(f.audit, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runBerth(t, "--config", f.config, "audit", "verify")
	if code != 1 || !strings.Contains(errOut, "not in the local file") {
		t.Fatalf("a truncated file passed: exit %d %q", code, errOut)
	}
}

// commitGate holds the broker's answer to every transaction commit
// (EndTxn) until the test lets it through: arrived says one is waiting,
// let lets one through, drop refuses those still waiting (their client was
// killed), open lets every later one through at once.
type commitGate struct {
	kc      *kafkatest.Cluster
	arrived chan struct{}
	let     chan struct{}
	mu      sync.Mutex
	gone    chan struct{} // closed by drop: the waiting commits are refused
	free    bool
}

func newCommitGate(kc *kafkatest.Cluster) *commitGate {
	g := &commitGate{kc: kc, arrived: make(chan struct{}, 16), let: make(chan struct{}), gone: make(chan struct{})}
	kc.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		g.mu.Lock()
		free, gone := g.free, g.gone
		g.mu.Unlock()
		if free {
			return nil, nil, false
		}
		g.arrived <- struct{}{}
		// Atomic: a broker closed mid-sleep returns from SleepControl
		// before the sleeping function ends.
		var refused atomic.Bool
		kc.SleepControl(func() {
			select {
			case <-g.let:
			case <-gone:
				refused.Store(true)
			}
		})
		if refused.Load() {
			return nil, errors.New("the client was killed"), true
		}
		return nil, nil, false
	})
	return g
}

func (g *commitGate) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gone)
	g.gone = make(chan struct{})
	// A commit that arrived but was not yet waited on is the killed run's.
	for len(g.arrived) > 0 {
		<-g.arrived
	}
}

func (g *commitGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free = true
	close(g.gone)
}

// TestRedriveTwoRunsOfOnePlanAtOnce: two operators start the same approved
// plan at once (two terminals). The second run's producer fences the
// first; the first's batch that commits after the second read the ledger
// but before it fenced must not be sent again: every record lands once.
// The gates fix that order: the first run's commit waits until the second
// run is about to fence (its checks done), then lands, then the fence.
func TestRedriveTwoRunsOfOnePlanAtOnce(t *testing.T) {
	bin := buildBerth(t)
	const n = 40
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t, "--batch-size", "5")
	commits := newCommitGate(f.kc)
	start := func() (*strings.Builder, *strings.Builder, <-chan error) {
		return startBin(t, bin, "--config", f.config, "redrive", "execute", plan[:12], "--yes", "--no-verify", "-o", "json")
	}
	aOut, aErr, aDone := start()
	select {
	case <-commits.arrived: // the first run's first batch, not yet committed
	case err := <-aDone:
		t.Fatalf("the first run ended (%v) before its first commit: %s", err, aErr)
	}
	// From now on the plan's producer waits before it starts (fences).
	txID := kafka.TransactionalID(plan)
	inits, letInit := make(chan struct{}, 4), make(chan struct{})
	f.kc.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.kc.KeepControl()
		if id := req.(*kmsg.InitProducerIDRequest).TransactionalID; id == nil || *id != txID {
			return nil, nil, false
		}
		inits <- struct{}{}
		f.kc.SleepControl(func() { <-letInit })
		return nil, nil, false
	})
	bOut, bErr, bDone := start()
	select {
	case <-inits: // the second run checked its records and is about to fence
	case err := <-bDone:
		t.Fatalf("the second run ended (%v) before it fenced the first: %s%s", err, bOut, bErr)
	}
	commits.let <- struct{}{} // the first run's first batch lands
	select {
	case <-commits.arrived: // its second batch: the first has landed
	case err := <-aDone:
		t.Fatalf("the first run ended (%v) after one batch: %s", err, aErr)
	}
	close(letInit) // the second run fences the first
	commits.open()
	errA, errB := <-aDone, <-bDone
	t.Logf("first run (%v):\n%s%s\nsecond run (%v):\n%s%s", errA, aOut, aErr, errB, bOut, bErr)
	if got := f.state(t, plan); got != n {
		t.Fatalf("after both runs %d of %d events are in the target", got, n)
	}
	var b struct {
		Sent        int `json:"sent"`
		AlreadySent int `json:"already_sent"`
	}
	if err := json.Unmarshal([]byte(bOut.String()), &b); err != nil || errB != nil || b.AlreadySent == 0 || b.Sent+b.AlreadySent != n {
		t.Fatalf("the second run (%v, %v): %d sent, %d already sent; want exit 0, the first run's batch already sent and the rest sent", errB, err, b.Sent, b.AlreadySent)
	}
	// Its progress lines count them as the summary does: already sent, not
	// skipped; in the shape RabbitMQ's share.
	progressLines(t, aErr.String())
	lines := progressLines(t, bErr.String())
	if want := fmt.Sprintf("progress %s: %d/%d (100%%) sent %d already sent %d skipped 0 failed 0, ", plan[:12], n, n, b.Sent, b.AlreadySent); len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Fatalf("the second run's progress lines do not end with %q:\n%s", want, bErr)
	}
	// The first run says it was taken over, once, in words: not a raw
	// PRODUCER_FENCED for each batch left, counted as failed and "staying
	// in the DLQ" while the other run sends them.
	var a struct {
		Sent     int               `json:"sent"`
		Failed   []json.RawMessage `json:"failed"`
		Problems []string          `json:"problems"`
	}
	over := fmt.Sprintf("plan %s: another run of this plan started and took over (a second terminal?): this run stopped; its batch in flight was not sent, the other run sends what is left", plan[:12])
	if err := json.Unmarshal([]byte(aOut.String()), &a); err != nil || errA == nil || a.Sent != 5 || len(a.Failed) != 0 ||
		len(a.Problems) != 1 || !strings.Contains(a.Problems[0], over) || !strings.Contains(aErr.String(), "berth: "+over) || strings.Contains(aErr.String(), "FENCED") {
		t.Fatalf("the first run (%v, %v): sent %d, failed %d, problems %q\n%s\nwant exit 1, its one batch sent, none failed, one line saying it was taken over", errA, err, a.Sent, len(a.Failed), a.Problems, aErr)
	}
}

// A Kafka DLQ topic deleted while execute sends: the plan's records were
// read before the first batch, so all are sent and counted; the copies are
// read back, the re-failure watch has no DLQ to watch, and the run ends
// naming the deleted DLQ among its problems and last on stderr, exit 1,
// the audit's redrive.verified entry saying why (it ended with the raw
// "topic X: UNKNOWN_TOPIC_OR_PARTITION" and nothing read back).
func TestRedriveOnADLQTopicDeletedDuringTheRun(t *testing.T) {
	bin := buildBerth(t)
	const n = 60
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t, "--batch-size", "5", "--rate", "50")
	cmd, stdout, lines := startLines(t, bin, "--config", f.config, "redrive", "execute", plan[:12], "--yes", "--watch", "2s", "-o", "json")
	progress, last := 0, ""
	for lines.Scan() {
		last = lines.Text()
		// The third line follows the first batch.
		if strings.HasPrefix(last, "progress ") {
			if progress++; progress == 3 {
				if _, err := f.kc.Admin.DeleteTopics(context.Background(), "ledger-events.DLT"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	_ = cmd.Wait()
	var res struct {
		Sent         int      `json:"sent"`
		Problems     []string `json:"problems"`
		Verification struct {
			Kafka struct {
				Checked int `json:"checked"`
			} `json:"kafka"`
		} `json:"verification"`
	}
	gone := fmt.Sprintf("plan %s: its DLQ %q no longer exists (deleted since the plan was made?)", plan[:12], "ledger-events.DLT")
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil || cmd.ProcessState.ExitCode() != 1 || res.Sent != n || res.Verification.Kafka.Checked != n ||
		len(res.Problems) != 1 || res.Problems[0] != "stopped by an error: "+gone || last != "berth: "+gone {
		t.Fatalf("execute with its DLQ deleted during the run: exit %d %v, sent %d, read back %d, problems %q, last line %q\nwant exit 1, all %d sent and read back, the DLQ named", cmd.ProcessState.ExitCode(), err, res.Sent, res.Verification.Kafka.Checked, res.Problems, last, n)
	}
	if got := f.state(t, plan); got != n {
		t.Errorf("the target holds %d of the %d", got, n)
	}
	entries := auditEntries(t, f.audit)
	var d struct {
		Error string `json:"error"`
	}
	if e := entries[len(entries)-1]; e.Action != "redrive.verified" || e.Decode(&d) != nil || d.Error != gone {
		t.Errorf("the audit log ends with %s %q; want redrive.verified saying %q", e.Action, d.Error, gone)
	}
}

// A PLAN that is neither a file nor a hash prefix is said as such by
// execute even when the cluster cannot be reached: the operator who
// mistyped a path learns that, not that the broker is down.
func TestRedriveExecuteNamesAMistypedPlanBeforeDialling(t *testing.T) {
	isolateConfig(t)
	ref := filepath.Join(t.TempDir(), "no-such-plan.json")
	_, errOut, code := runBerth(t, "--bootstrap", "127.0.0.1:1", "--timeout", "2s", "redrive", "execute", ref, "--yes")
	if want := "berth: PLAN: " + ref + " is neither a plan file nor a plan hash (8+ hex digits)\n"; code != 2 || errOut != want {
		t.Fatalf("execute of a missing file with the cluster down: exit %d %q; want exit 2 and %q", code, errOut, want)
	}
}

// TestRedriveEndsWhenTheBrokerGoesAwayMidBatch: the broker dies while a
// batch's commit is in flight (here: held, then the broker closed). The run
// must end with a message naming what happened, within its --timeout
// bounds, not retry a dead address forever (a run left behind so spun at
// 76% CPU for minutes).
func TestRedriveEndsWhenTheBrokerGoesAwayMidBatch(t *testing.T) {
	bin := buildBerth(t)
	f := newRedriveFixture(t, 40, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t, "--batch-size", "5")
	commits := newCommitGate(f.kc)
	out, errOut, exited := startBin(t, bin, "--config", f.config, "--timeout", "2s", "redrive", "execute", plan[:12], "--yes", "--no-verify", "-o", "json")
	select {
	case <-commits.arrived: // the first batch's commit, held
	case err := <-exited:
		t.Fatalf("the run ended (%v) before its first commit: %s", err, errOut)
	}
	commits.drop()
	f.kc.Close()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("the run ended with %v, want exit 1:\n%s\n%s", err, out, errOut)
		}
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "berth: kafka unreachable: ") || !strings.Contains(last, "run the plan again once the cluster answers") {
			t.Fatalf("last line %q does not say the cluster went away and what to do", last)
		}
		if !strings.Contains(out.String(), "kafka unreachable") {
			t.Fatalf("the JSON does not carry the reason:\n%s", out)
		}
	case <-time.After(2 * time.Minute): // a bound on a hang, not synchronisation
		// A goroutine dump says where it waits.
		_ = exec.Command("pkill", "-QUIT", "-f", "redrive execute "+plan[:12]).Run()
		<-exited
		t.Fatalf("the run was still going 2 minutes after the broker went away:\n%s", errOut)
	}
}
