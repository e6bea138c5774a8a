package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends/rabbitmq"
)

// Divergences of issue 13's finding 7 on the RabbitMQ side, through the
// command line: the audit log is mirrored into the server and verified
// against it; an unwritable audit log refuses an execution; an approval
// with nothing to verify it against is refused and stored nowhere.

// rmqReadyCount is a queue's ready count (passive declare).
func rmqReadyCount(t *testing.T, conn *amqp.Connection, q string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	n, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n.Messages
}

func TestRabbitAuditIsMirroredAndACutTailShows(t *testing.T) {
	isolateConfig(t)
	_, _, _, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.log")
	r := []string{"--amqp", testAMQPURL(), "--management", testManagementURL(), "--audit-file", log}
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, r...)...) }
	plan := filepath.Join(dir, "plan.json")
	if _, errOut, code := run("redrive", "plan", dlq, "--all", "--out", plan); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	if _, errOut, code := run("redrive", "execute", plan, "--yes"); code != 0 {
		t.Fatalf("execute: %d %s", code, errOut)
	}
	out, errOut, code := run("audit", "verify")
	if code != 0 || !strings.Contains(out, "audit mirror berth.audit") || !strings.Contains(out, log+": ") {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
	// Cut the last entry: the file's chain alone cannot tell.
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("audit log has %d entries after plan and execute", len(lines))
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run("audit", "verify")
	if code != 1 || !strings.Contains(errOut, "berth.audit") || !strings.Contains(errOut, "not in the local file") {
		t.Fatalf("a cut tail must fail audit verify: exit %d\n%s%s", code, out, errOut)
	}
}

func TestRabbitExecuteRefusesWhenTheAuditLogIsUnwritable(t *testing.T) {
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	r := []string{"--amqp", testAMQPURL(), "--management", testManagementURL()}
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, r...)...) }
	plan := filepath.Join(dir, "plan.json")
	if _, errOut, code := run("redrive", "plan", dlq, "--all", "--out", plan, "--audit-file", filepath.Join(dir, "audit.log")); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	// A directory where the log file should be: nothing can be appended.
	blocked := filepath.Join(dir, "blocked.log")
	if err := os.Mkdir(blocked, 0o700); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run("redrive", "execute", plan, "--yes", "--audit-file", blocked)
	if code == 0 || !strings.Contains(errOut, "audit") {
		t.Fatalf("execute with an unwritable audit log: exit %d %s", code, errOut)
	}
	if n := rmqReadyCount(t, conn, work); n != 0 {
		t.Errorf("the work queue received %d message(s): an unaudited redrive ran", n)
	}
	if n := rmqReadyCount(t, conn, dlq); n != 2 {
		t.Errorf("the DLQ holds %d, want both messages still there", n)
	}
}

// The plan was made under a policy that requires review; today's config
// names no allowed_signers for its DLQ (the policy was removed). Nothing
// can verify an approval, so approving refuses and stores nothing.
func TestRabbitApproveRefusesWithoutAllowedSigners(t *testing.T) {
	isolateConfig(t)
	_, _, _, dlq := rmqDLQ(t, 1)
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	reviewed := rabbitRedriveConfig(dir, reviewedPolicy("berth.test.cmd.dlq.*", signers)).write(t)
	unreviewed := rabbitRedriveConfig(dir, "").write(t)
	plan := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--key", alice, "--out", plan, "--config", reviewed); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	_, errOut, code := runBerth(t, "redrive", "approve", plan, "--key", bob, "--config", unreviewed)
	if code == 0 || !strings.Contains(errOut, "allowed_signers") || !strings.Contains(errOut, "nothing stored") {
		t.Fatalf("approve with no allowed_signers: exit %d %s; want refused, nothing stored", code, errOut)
	}
	out, _, _ := runBerth(t, "redrive", "show", plan, "-o", "json", "--config", reviewed)
	if !strings.Contains(out, `"approvals": []`) {
		t.Errorf("an approval was stored: %s", out)
	}
}

// On a terminal, execute without --yes shows the dry run and asks for the
// first 8 hex digits of the plan hash: anything else sends nothing; the
// digits send.
func TestRabbitExecuteOnATerminalAsksForThePlanHash(t *testing.T) {
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, "").write(t)
	plan := filepath.Join(dir, "plan.json")
	out, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", plan, "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	var p struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	wrong := startTmux(t, 150, 20, "redrive", "execute", plan, "--config", cfg)
	wrong.waitText("the dry run and the question", "type the first 8 hex digits")
	wrong.keys("deadbeef", "Enter")
	s := wrong.waitText("the refusal", "[berth exited]")
	if !strings.Contains(s, "not confirmed") {
		t.Errorf("a wrong hash prefix: %s", s)
	}
	if n := rmqReadyCount(t, conn, work); n != 0 {
		t.Fatalf("%d message(s) sent after a wrong hash prefix", n)
	}
	// ctrl+c at the question ends the command at once, nothing sent (it
	// sat at the prompt: the run's SIGINT handler had taken the signal).
	stop := startTmux(t, 150, 20, "redrive", "execute", plan, "--config", cfg)
	stop.waitText("the dry run and the question", "type the first 8 hex digits")
	stop.keys("C-c")
	if s := stop.waitText("the interruption", "[berth exited]"); !strings.Contains(s, "interrupted at the prompt: nothing sent") {
		t.Errorf("ctrl+c at the prompt: %s", s)
	}
	if n := rmqReadyCount(t, conn, work); n != 0 {
		t.Fatalf("%d message(s) sent after ctrl+c", n)
	}
	right := startTmux(t, 150, 20, "redrive", "execute", plan, "--config", cfg)
	right.waitText("the dry run", "would redrive 2 message(s)")
	right.keys(p.Hash[:8], "Enter")
	s = right.waitText("the run", "[berth exited]")
	if !strings.Contains(s, "sent 2") {
		t.Errorf("after the hash prefix: %s", s)
	}
	if n := rmqReadyCount(t, conn, work); n != 2 {
		t.Errorf("the work queue holds %d, want 2", n)
	}
}

// SIGUSR1 pauses a RabbitMQ run between chunks and SIGUSR2 resumes it, as
// on Kafka: no chunk starts while paused, and the run then sends the rest.
// As on Kafka, a progress line marked [paused] says it paused and the next
// one, unmarked, that it resumed.
func TestRabbitExecutePausesOnSIGUSR1(t *testing.T) {
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, 6)
	bin := buildBerth(t)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, "").write(t)
	plan := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--batch-size", "1", "--rate", "20", "--out", plan, "--config", cfg); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	cmd := exec.Command(bin, "redrive", "execute", plan, "--yes", "--config", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A bound, not a measurement: a run that pauses without saying so
	// would wait for SIGUSR2 forever.
	bound := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer bound.Stop()
	lines := bufio.NewScanner(stderr)
	var between []string
	var all strings.Builder
	state := "running"
	for lines.Scan() {
		l := lines.Text()
		all.WriteString(l + "\n")
		if !strings.HasPrefix(l, "progress ") {
			continue
		}
		marked := strings.HasSuffix(l, " [paused]")
		switch {
		case state == "running":
			state = "pausing"
			if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
		case state == "pausing" && marked:
			state = "paused"
			if n := rmqReadyCount(t, conn, work); n >= 6 {
				t.Errorf("paused after all %d were sent", n)
			}
			if err := cmd.Process.Signal(syscall.SIGUSR2); err != nil {
				t.Fatal(err)
			}
		case state == "paused" && marked:
			between = append(between, l)
		case state == "paused":
			state = "resumed"
		case marked:
			t.Errorf("a progress line marked paused while %s: %q", state, l)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("execute: %v (state %s)\n%s", err, state, all.String())
	}
	lastProgress(t, all.String(), "6/6 (100%) sent 6 already sent 0 skipped 0 failed 0, ")
	if state != "resumed" {
		t.Fatalf("never paused and resumed (state %s)", state)
	}
	// A chunk already published when the pause came may settle; no other.
	if len(between) > 1 {
		t.Errorf("chunks settled while paused: %q", between)
	}
	if n := rmqReadyCount(t, conn, work); n != 6 {
		t.Errorf("the work queue holds %d after resuming, want 6", n)
	}
}

// Finding 5 on RabbitMQ: `redrive status` names the verified signer, never
// the author the plan declares about itself; a plan dated in the future
// (it would never expire) is refused, and `status` says so (as on Kafka;
// it read "ready" before).
func TestRabbitStatusShowsVerifiedSignersAndAFuturePlanIsRefused(t *testing.T) {
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, 1)
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	cfg := rabbitRedriveConfig(dir, reviewedPolicy(dlq, signers)).write(t)
	run := func(args ...string) (string, string, int) { return runBerth(t, append(args, "--config", cfg)...) }
	type statusRow struct {
		Author    string   `json:"author"`
		Approvers []string `json:"approvers"`
		State     string   `json:"state"`
	}
	statusOf := func(plan string) statusRow {
		t.Helper()
		out, errOut, code := run("redrive", "status", plan, "-o", "json")
		var st statusRow
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status: exit %d %s %s", code, out, errOut)
		}
		return st
	}
	status := func(plan string) (author string, approvers []string) {
		t.Helper()
		st := statusOf(plan)
		return st.Author, st.Approvers
	}

	unsigned := filepath.Join(dir, "unsigned.json")
	if _, errOut, code := run("redrive", "plan", dlq, "--all", "--out", unsigned); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	if a, _ := status(unsigned); a != "(unsigned)" {
		t.Errorf("an unsigned plan's author: %q, want (unsigned) (never the name the plan declares)", a)
	}
	signed := filepath.Join(dir, "signed.json")
	if _, errOut, code := run("redrive", "plan", dlq, "--all", "--key", alice, "--out", signed); code != 0 {
		t.Fatalf("plan --key: %d %s", code, errOut)
	}
	if _, errOut, code := run("redrive", "approve", signed, "--key", bob); code != 0 {
		t.Fatalf("approve: %d %s", code, errOut)
	}
	if a, ap := status(signed); a != "alice@hc" || fmt.Sprint(ap) != "[bob@hc]" {
		t.Errorf("status: author %q approvers %v, want alice@hc and [bob@hc]", a, ap)
	}

	// Date the plan a day ahead (its hash recomputed, as anyone holding the
	// file can): refused for that before anything else is considered.
	p, err := rabbitmq.ReadPlan(signed)
	if err != nil {
		t.Fatal(err)
	}
	p.CreatedAt = time.Now().Add(24 * time.Hour)
	future := filepath.Join(dir, "future.json")
	if err := rabbitmq.WritePlan(future, p); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run("redrive", "execute", future, "--yes")
	if code == 0 || !strings.Contains(errOut, "future") && !strings.Contains(errOut, "ahead") {
		t.Errorf("a plan from the future: exit %d %q; want refused", code, errOut)
	}
	if n := rmqReadyCount(t, conn, work); n != 0 {
		t.Errorf("%d message(s) sent", n)
	}
	if _, errOut, code := run("redrive", "approve", future, "--key", bob); code == 0 || !strings.Contains(errOut, "future") || !strings.Contains(errOut, "nothing stored") {
		t.Errorf("approve of a plan dated a day ahead: exit %d %q; want a refusal, nothing stored", code, errOut)
	}
	if st := statusOf(future); st.State != "dated in the future" {
		t.Errorf("status of a plan dated a day ahead: %q, want \"dated in the future\" (execute refuses it)", st.State)
	}
}

// A RabbitMQ plan is bound to its cluster's name (and its signatures
// cover it), not to the address it was reached by: the same cluster
// through another address runs it; a plan claiming another cluster is
// refused.
func TestRabbitPlanIsBoundToItsClusterNotItsAddress(t *testing.T) {
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, 2)
	dir := t.TempDir()
	other := strings.Replace(testAMQPURL(), "127.0.0.1", "localhost", 1)
	if other == testAMQPURL() {
		t.Skip("the AMQP URL does not name 127.0.0.1: no second address to reach it by")
	}
	common := []string{"--management", testManagementURL(), "--audit-file", filepath.Join(dir, "audit.log")}
	plan := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, append([]string{"redrive", "plan", dlq, "--all", "--out", plan, "--amqp", testAMQPURL()}, common...)...); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	p, err := rabbitmq.ReadPlan(plan)
	if err != nil || p.Cluster == "" {
		t.Fatalf("the plan names no cluster: %+v %v", p.Cluster, err)
	}
	// Another cluster's plan (its hash recomputed): refused, nothing sent.
	forged := p
	forged.Cluster = "rabbit@elsewhere"
	elsewhere := filepath.Join(dir, "elsewhere.json")
	if err := rabbitmq.WritePlan(elsewhere, forged); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runBerth(t, append([]string{"redrive", "execute", elsewhere, "--yes", "--amqp", testAMQPURL()}, common...)...); code == 0 || !strings.Contains(errOut, "rabbit@elsewhere") {
		t.Errorf("a plan of another cluster: exit %d %q; want refused", code, errOut)
	}
	if n := rmqReadyCount(t, conn, work); n != 0 {
		t.Fatalf("%d message(s) sent by another cluster's plan", n)
	}
	// The same cluster reached as localhost: runs.
	if out, errOut, code := runBerth(t, append([]string{"redrive", "execute", plan, "--yes", "--amqp", other}, common...)...); code != 0 {
		t.Fatalf("the same cluster through another address: exit %d %s %s", code, out, errOut)
	}
	if n := rmqReadyCount(t, conn, work); n != 2 {
		t.Errorf("the work queue holds %d, want 2", n)
	}
}

// The loop guard runs again at execution under the stricter policy: a
// message redriven once before, planned under the default limit (3), is
// not sent once today's policy allows one redrive only.
func TestRabbitExecuteRechecksTheLoopLimitUnderTodaysPolicy(t *testing.T) {
	isolateConfig(t)
	conn, ch, work, dlq := rmqDLQ(t, 0)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []any{work}, "time": time.Now().Truncate(time.Second)}
	if err := ch.Publish("", dlq, false, false, amqp.Publishing{MessageId: "again-1", Body: []byte(`{}`),
		Headers: amqp.Table{"x-death": []any{death}, "berth-redrive-attempt": int64(1)}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	before := rabbitRedriveConfig(dir, "").write(t)
	today := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      review: none\n      max_redrives: 1\n", dlq)).write(t)
	plan := filepath.Join(dir, "plan.json")
	out, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", plan, "--config", before, "-o", "json")
	if code != 0 || !strings.Contains(out, `"included": 1`) {
		t.Fatalf("plan: exit %d %s %s", code, out, errOut)
	}
	out, errOut, code = runBerth(t, "redrive", "execute", plan, "--yes", "--config", today, "-o", "json")
	if !strings.Contains(out, `"loop_limit"`) {
		t.Errorf("execute under max_redrives 1: exit %d, want the message skipped as loop_limit:\n%s%s", code, out, errOut)
	}
	if n := rmqReadyCount(t, conn, work); n != 0 {
		t.Errorf("%d message(s) sent past today's loop limit", n)
	}
}

// rabbitReviewedPlan is a one-message DLQ under a policy that requires a
// review, planned by alice into a plan file; bob is the key that may
// approve it.
func rabbitReviewedPlan(t *testing.T) (conn *amqp.Connection, work, cfg, plan string, p struct{ Hash string }, bob string) {
	t.Helper()
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, 1)
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	cfg = rabbitRedriveConfig(dir, reviewedPolicy(dlq, signers)).write(t)
	plan = filepath.Join(dir, "plan.json")
	out, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--key", alice, "--out", plan, "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	return conn, work, cfg, plan, p, bob
}

// On a terminal, approve shows the plan (each message's target and
// verdict) and signs only after the plan hash's first 8 hex digits.
func TestRabbitApproveOnATerminalShowsThePlanAndAsks(t *testing.T) {
	_, work, cfg, plan, p, bob := rabbitReviewedPlan(t)
	approvals := func() string {
		out, _, _ := runBerth(t, "redrive", "status", plan, "--config", cfg, "-o", "json")
		return out
	}
	wrong := startTmux(t, 160, 30, "redrive", "approve", plan, "--key", bob, "--config", cfg)
	s := wrong.waitText("the review and the question", "type the first 8 hex digits")
	if !strings.Contains(s, work) || !strings.Contains(s, "include") || !strings.Contains(s, "review (derived from the messages as they are now)") ||
		!strings.Contains(s, "idempotency keys of the included messages: job-0") {
		t.Errorf("the review does not show the target, verdict and the keys derived from the message:\n%s", s)
	}
	wrong.keys("0000000", "Enter")
	if s := wrong.waitText("the refusal", "[berth exited]"); !strings.Contains(s, "not confirmed: nothing signed") {
		t.Errorf("a wrong prefix: %s", s)
	}
	if st := approvals(); !strings.Contains(st, `"approvers": []`) {
		t.Fatalf("an approval was stored after a wrong prefix: %s", st)
	}
	right := startTmux(t, 160, 30, "redrive", "approve", plan, "--key", bob, "--config", cfg)
	right.waitText("the question", "type the first 8 hex digits")
	right.keys(p.Hash[:8], "Enter")
	if s := right.waitText("the signature", "[berth exited]"); !strings.Contains(s, "approved by bob@hc") {
		t.Errorf("after the prefix: %s", s)
	}
}

// As on Kafka (TestRedrivePromptsOutlastTheTimeout): an approval or a send
// typed after --timeout has passed still goes through.
func TestRabbitPromptsOutlastTheTimeout(t *testing.T) {
	conn, work, cfg, plan, p, bob := rabbitReviewedPlan(t)
	const timeout = 3 * time.Second
	// The person reads for longer than --timeout: this wait is the input
	// under test (a slow reader), not a synchronisation.
	read := func() { time.Sleep(timeout + time.Second) }
	approve := startTmux(t, 160, 30, "--timeout", timeout.String(), "redrive", "approve", plan, "--key", bob, "--config", cfg)
	approve.waitText("the question", "type the first 8 hex digits")
	read()
	approve.keys(p.Hash[:8], "Enter")
	if s := approve.waitText("the signature", "[berth exited]"); !strings.Contains(s, "approved by bob@hc") {
		t.Fatalf("an approval typed after --timeout: %s", s)
	}
	run := startTmux(t, 150, 20, "--timeout", timeout.String(), "redrive", "execute", plan, "--config", cfg)
	run.waitText("the dry run", "type the first 8 hex digits")
	read()
	run.keys(p.Hash[:8], "Enter")
	s := run.waitText("the run", "[berth exited]")
	if n := rmqReadyCount(t, conn, work); n != 1 {
		t.Fatalf("the work queue holds %d after a send typed after --timeout, want 1: %s", n, s)
	}
}
