package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/internal/offsets"
	"github.com/berth-dev/berth/tui"
	tuioffsets "github.com/berth-dev/berth/tui/offsets"
)

// resetJSON is the documented JSON of `berth offsets reset -o json`;
// decoding with DisallowUnknownFields keeps the docs and the code in step.
type resetJSON struct {
	Group      string   `json:"group"`
	Context    string   `json:"context"`
	Mode       string   `json:"mode"`
	GroupState string   `json:"group_state"`
	Members    []string `json:"members"`
	Effects    bool     `json:"effects"`
	Executed   bool     `json:"executed"`
	Verified   bool     `json:"verified"`
	AuditSeq   int64    `json:"audit_seq"`
	Refused    string   `json:"refused"`
	Digest     string   `json:"plan_digest"`
	PlanFile   string   `json:"plan_file"`
	Partitions []struct {
		Topic         string     `json:"topic"`
		Partition     int32      `json:"partition"`
		Current       *int64     `json:"current"`
		Requested     int64      `json:"requested"`
		Target        int64      `json:"target"`
		Delta         *int64     `json:"delta"`
		ReplayRecords int64      `json:"replay_records"`
		SkipRecords   int64      `json:"skip_records"`
		Clamped       bool       `json:"clamped"`
		ClampedTo     string     `json:"clamped_to"`
		LogStart      int64      `json:"log_start"`
		LogEnd        int64      `json:"log_end"`
		SpanFrom      *time.Time `json:"span_from"`
		SpanTo        *time.Time `json:"span_to"`
		Note          string     `json:"note"`
	} `json:"partitions"`
	Warnings []string `json:"warnings"`
}

var resetT0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// resetCluster starts a cluster with orders (2 partitions, 10 records a
// minute apart from resetT0) and group g committed at 5, and points the
// audit log at a temporary file.
func resetCluster(t *testing.T) (*kafkatest.Cluster, string) {
	t.Helper()
	isolateConfig(t)
	auditFile := filepath.Join(t.TempDir(), "audit.log")
	t.Setenv("BERTH_AUDIT_FILE", auditFile)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 2, 1, nil)
	for p := int32(0); p < 2; p++ {
		kc.ProduceTo(t, "orders", p, 10, resetT0, time.Minute)
	}
	kc.Commit(t, "g", map[string]map[int32]int64{"orders": {0: 5, 1: 5}})
	return kc, auditFile
}

func bootstrap(kc *kafkatest.Cluster) []string {
	return []string{"--bootstrap", strings.Join(kc.Addrs, ",")}
}

func resetRun(t *testing.T, kc *kafkatest.Cluster, args ...string) (resetJSON, string, int) {
	t.Helper()
	full := append(append(bootstrap(kc), "-o", "json", "offsets", "reset"), args...)
	out, errOut, code := runBerth(t, full...)
	var got resetJSON
	if out != "" {
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("berth %s: decoding JSON: %v\n%s", strings.Join(full, " "), err, out)
		}
	}
	return got, errOut, code
}

func committedOf(t *testing.T, kc *kafkatest.Cluster, group string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := kc.Admin.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == "orders" && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

func TestOffsetsResetDryRunJSON(t *testing.T) {
	kc, _ := resetCluster(t)
	got, errOut, code := resetRun(t, kc, "g", "--to-offset", "50", "--topic", "orders:1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got.Executed || len(got.Partitions) != 1 || got.Group != "g" || got.GroupState != "Empty" {
		t.Fatalf("dry run %+v", got)
	}
	r := got.Partitions[0]
	if r.Topic != "orders" || r.Partition != 1 || *r.Current != 5 || r.Target != 10 || *r.Delta != 5 ||
		r.SkipRecords != 5 || r.ReplayRecords != 0 || !r.Clamped || r.ClampedTo != "log-end" || r.Requested != 50 {
		t.Fatalf("row %+v", r)
	}
	if r.SpanFrom == nil || !r.SpanFrom.Equal(resetT0.Add(5*time.Minute)) || !r.SpanTo.Equal(resetT0.Add(9*time.Minute)) {
		t.Fatalf("skip span %v %v", r.SpanFrom, r.SpanTo)
	}
	if c := committedOf(t, kc, "g"); c[1] != 5 {
		t.Fatalf("dry run committed: %v", c)
	}
}

func TestOffsetsResetTableShowsImpact(t *testing.T) {
	kc, _ := resetCluster(t)
	out, errOut, code := runBerth(t, append(bootstrap(kc), "offsets", "reset", "g", "--to-datetime", "2026-11-29T08:02:00", "--all-topics")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"CURRENT", "NEW", "CHANGE", "replay 3 record(s) (2026-11-29 08:02:00Z → 2026-11-29 08:04:00Z)", "-3", "Dry run: nothing committed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestOffsetsResetExecuteToDatetimeAndAudit(t *testing.T) {
	kc, auditFile := resetCluster(t)
	// No zone: UTC. 08:07:30 lies between records 7 and 8.
	got, errOut, code := resetRun(t, kc, "g", "--to-datetime", "2026-11-29T08:07:30", "--all-topics", "--execute")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !got.Executed || !got.Verified || got.AuditSeq != 2 {
		t.Fatalf("execute %+v", got)
	}
	if c := committedOf(t, kc, "g"); c[0] != 8 || c[1] != 8 {
		t.Fatalf("committed %v, want 8 and 8", c)
	}
	out, errOut, code := runBerth(t, append(bootstrap(kc), "-o", "json", "audit")...)
	if code != 0 {
		t.Fatalf("audit: exit %d: %s", code, errOut)
	}
	var entries []struct {
		Seq     int64  `json:"seq"`
		Time    string `json:"time"`
		Actor   string `json:"actor"`
		Action  string `json:"action"`
		Context string `json:"context"`
		Target  string `json:"target"`
		Prev    string `json:"prev"`
		Hash    string `json:"hash"`
		Details struct {
			Group      string `json:"group"`
			Status     string `json:"status"`
			Partitions []struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Before    *int64 `json:"before"`
				After     int64  `json:"after"`
			} `json:"partitions"`
		} `json:"details"`
	}
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("audit JSON: %v\n%s", err, out)
	}
	if len(entries) != 2 || entries[1].Action != "offsets.reset" || entries[1].Details.Status != "committed" || entries[1].Target != "g" ||
		entries[1].Context != "adhoc" || entries[1].Actor == "" || entries[1].Prev != entries[0].Hash {
		t.Fatalf("audit entries %+v", entries)
	}
	if p := entries[1].Details.Partitions; len(p) != 2 || *p[0].Before != 5 || p[0].After != 8 {
		t.Fatalf("audit before/after %+v", p)
	}
	if _, err := os.Stat(auditFile); err != nil {
		t.Fatalf("BERTH_AUDIT_FILE not used: %v", err)
	}
	// The reset was mirrored to the cluster's audit topic, and verify
	// checks that copy against the file.
	if out, _, code := runBerth(t, append(bootstrap(kc), "audit", "verify")...); code != 0 || !strings.Contains(out, "OK: 2 entries") ||
		!strings.Contains(out, "__berth_audit") || !strings.Contains(out, "2 entries, OK") {
		t.Fatalf("verify: %d %s", code, out)
	}
}

func TestAuditVerifyDetectsTamperingFromTheCLI(t *testing.T) {
	kc, auditFile := resetCluster(t)
	for _, to := range []string{"3", "4", "6"} {
		if _, errOut, code := resetRun(t, kc, "g", "--to-offset", to, "--all-topics", "--execute"); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	}
	orig, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(orig), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d audit lines, want 6", len(lines))
	}
	for _, tc := range []struct {
		name    string
		content string
		want    string
	}{
		{"edit a byte", strings.Replace(string(orig), `"after":4`, `"after":9`, 1), "line 3"},
		{"delete a line", strings.Join(append(append([]string{}, lines[:2]...), lines[3:]...), "") + "\n", "line 3"},
		{"reorder", lines[0] + lines[2] + lines[1] + strings.Join(lines[3:], "") + "\n", "line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.content == string(orig) {
				t.Fatal("tampering changed nothing")
			}
			if err := os.WriteFile(auditFile, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := runBerth(t, append(bootstrap(kc), "audit", "verify")...)
			if code != 1 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "tampered") {
				t.Fatalf("verify after %s: exit %d: %s", tc.name, code, errOut)
			}
		})
	}
	// --audit-file overrides the environment.
	other := filepath.Join(t.TempDir(), "other.log")
	if out, _, code := runBerth(t, append(bootstrap(kc), "audit", "verify", "--audit-file", other)...); code != 0 || !strings.Contains(out, "OK: 0 entries") {
		t.Fatalf("verify of an empty override: %d %s", code, out)
	}
}

func TestOffsetsResetUsageErrors(t *testing.T) {
	kc, _ := resetCluster(t)
	csv := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(csv, []byte("orders,0,1\norders,one,2\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"g", "--all-topics"}, "no reset mode"},
		{[]string{"g", "--to-earliest", "--to-latest", "--all-topics"}, "--to-earliest and --to-latest"},
		{[]string{"g", "--to-earliest"}, "no scope"},
		{[]string{"g", "--to-earliest", "--all-topics", "--topic", "orders"}, "--all-topics and --topic"},
		{[]string{"g", "--to-datetime", "last tuesday", "--all-topics"}, "--to-datetime"},
		{[]string{"g", "--by-duration", "soon", "--all-topics"}, "--by-duration"},
		{[]string{"g", "--to-offset", "-1", "--all-topics"}, "--to-offset"},
		{[]string{"g", "--from-file", csv}, "line 2: partition \"one\""},
		{[]string{"g", "--from-group", "g"}, "--from-group g: that is the group being reset"},
		{[]string{"g", "--to-earliest", "--topic", "orders:x"}, "--topic"},
		{[]string{"g", "--plan", "p.json"}, "add --execute"},
		{[]string{"g", "--to-earliest", "--all-topics", "--execute", "--dry-run-out", "p.json"}, "--dry-run-out"},
	} {
		_, errOut, code := resetRun(t, kc, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
	if c := committedOf(t, kc, "g"); c[0] != 5 || c[1] != 5 {
		t.Fatalf("a usage error changed offsets: %v", c)
	}
}

func TestOffsetsResetFromFileAndFromGroup(t *testing.T) {
	kc, _ := resetCluster(t)
	csv := filepath.Join(t.TempDir(), "offsets.csv")
	os.WriteFile(csv, []byte("topic,partition,offset\norders,0,2\norders,1,9\n"), 0o600)
	got, errOut, code := resetRun(t, kc, "g", "--from-file", csv, "--execute")
	if code != 0 || !got.Executed {
		t.Fatalf("from-file: exit %d: %s %+v", code, errOut, got)
	}
	if c := committedOf(t, kc, "g"); c[0] != 2 || c[1] != 9 {
		t.Fatalf("from-file committed %v", c)
	}
	got, errOut, code = resetRun(t, kc, "copy", "--from-group", "g", "--execute")
	if code != 0 || !got.Executed {
		t.Fatalf("from-group: exit %d: %s %+v", code, errOut, got)
	}
	if c := committedOf(t, kc, "copy"); c[0] != 2 || c[1] != 9 {
		t.Fatalf("from-group committed %v", c)
	}
}

func TestOffsetsResetRefusals(t *testing.T) {
	kc, auditFile := resetCluster(t)
	cfg := writeConfig(t, fmt.Sprintf(`current_context: local
contexts:
  local:
    kind: kafka
    bootstrap: [%q]
  frozen:
    kind: kafka
    bootstrap: [%q]
    read_only: true
groups:
  - match: "pay*"
    effects: true
`, kc.Addrs[0], kc.Addrs[0]))
	kc.Commit(t, "payments-capture", map[string]map[int32]int64{"orders": {0: 5, 1: 5}})
	run := func(args ...string) (string, int) {
		_, errOut, code := runBerth(t, append([]string{"--config", cfg}, args...)...)
		return errOut, code
	}

	t.Run("read-only context", func(t *testing.T) {
		errOut, code := run("-c", "frozen", "offsets", "reset", "g", "--to-earliest", "--all-topics", "--execute")
		if code != 1 || !strings.Contains(errOut, "read-only") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if c := committedOf(t, kc, "g"); c[0] != 5 {
			t.Fatalf("read-only reset committed: %v", c)
		}
	})
	t.Run("read-only flag", func(t *testing.T) {
		errOut, code := run("--read-only", "offsets", "reset", "g", "--to-earliest", "--all-topics", "--execute")
		if code != 1 || !strings.Contains(errOut, "read-only") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if _, err := os.Stat(auditFile); !os.IsNotExist(err) {
			t.Fatalf("a refused read-only reset touched the audit log: %v", err)
		}
	})
	t.Run("effects need confirmation", func(t *testing.T) {
		// Without the read-only context: it names this very cluster, which
		// makes every context reaching it read-only.
		cfg := writeConfig(t, fmt.Sprintf("current_context: local\ncontexts:\n  local:\n    kind: kafka\n    bootstrap: [%q]\ngroups:\n  - match: \"pay*\"\n    effects: true\n", kc.Addrs[0]))
		run := func(args ...string) (string, int) {
			_, errOut, code := runBerth(t, append([]string{"--config", cfg}, args...)...)
			return errOut, code
		}
		out, _, code := runBerth(t, "--config", cfg, "offsets", "reset", "payments-capture", "--shift-by", "-2", "--all-topics")
		if code != 0 || !strings.Contains(out, "effect-producing") {
			t.Fatalf("dry run does not warn: %d\n%s", code, out)
		}
		errOut, code := run("offsets", "reset", "payments-capture", "--shift-by", "-2", "--all-topics", "--execute")
		if code != 1 || !strings.Contains(errOut, "--confirm-replay-effects") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if c := committedOf(t, kc, "payments-capture"); c[0] != 5 {
			t.Fatalf("unconfirmed replay committed: %v", c)
		}
		errOut, code = run("offsets", "reset", "payments-capture", "--shift-by", "-2", "--all-topics", "--execute", "--confirm-replay-effects")
		if code != 0 {
			t.Fatalf("confirmed: exit %d: %s", code, errOut)
		}
		if c := committedOf(t, kc, "payments-capture"); c[0] != 3 {
			t.Fatalf("confirmed replay committed %v", c)
		}
	})
}

func TestOffsetsResetActiveGroupRefusedNamingMember(t *testing.T) {
	kc, _ := resetCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"),
		kgo.ClientID("capture-worker-7"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	defer func() { cancel(); <-done; cl.Close() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		gs, err := kc.Admin.DescribeGroups(context.Background(), "g")
		if err == nil && gs["g"].State == "Stable" && len(gs["g"].Members) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer never joined: %+v %v", gs, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
	got, errOut, code := resetRun(t, kc, "g", "--to-earliest", "--all-topics", "--execute")
	if code != 1 || !strings.Contains(errOut, "active member") || !strings.Contains(errOut, "capture-worker-7") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got.Executed || !strings.Contains(got.Refused, "capture-worker-7") || len(got.Members) != 1 {
		t.Fatalf("JSON of a refused reset: %+v", got)
	}
	if c := committedOf(t, kc, "g"); c[0] != 5 || c[1] != 5 {
		t.Fatalf("refused reset committed: %v", c)
	}
}

func TestOffsetsResetSavedPlanRefusedAfterChange(t *testing.T) {
	kc, _ := resetCluster(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	got, errOut, code := resetRun(t, kc, "g", "--to-earliest", "--all-topics", "--dry-run-out", plan)
	if code != 0 || got.PlanFile != plan {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	// Unchanged: the saved plan executes exactly. (Keep its bytes: it is
	// executed once, the group changes, and it is retried.)
	b, _ := os.ReadFile(plan)
	got, errOut, code = resetRun(t, kc, "g", "--execute", "--plan", plan)
	if code != 0 || !got.Executed || !got.Verified {
		t.Fatalf("execute saved plan: exit %d: %s", code, errOut)
	}
	if c := committedOf(t, kc, "g"); c[0] != 0 || c[1] != 0 {
		t.Fatalf("committed %v", c)
	}
	// The group moved on (its consumers ran): the same plan is now stale.
	kc.Commit(t, "g", map[string]map[int32]int64{"orders": {0: 4, 1: 6}})
	os.WriteFile(plan, b, 0o600)
	_, errOut, code = resetRun(t, kc, "g", "--execute", "--plan", plan)
	if code != 1 || !strings.Contains(errOut, "changed since the dry run") || !strings.Contains(errOut, "orders[0] committed offset is 4, was 5") {
		t.Fatalf("stale plan: exit %d: %s", code, errOut)
	}
	if c := committedOf(t, kc, "g"); c[0] != 4 || c[1] != 6 {
		t.Fatalf("stale plan committed: %v", c)
	}
	// A hand-edited plan is refused before anything is read.
	os.WriteFile(plan, []byte(strings.Replace(string(b), `"target": 0`, `"target": 1`, 1)), 0o600)
	if _, errOut, code := resetRun(t, kc, "g", "--execute", "--plan", plan); code != 1 || !strings.Contains(errOut, "digest") {
		t.Fatalf("edited plan: exit %d: %s", code, errOut)
	}
	// A plan for one group does not execute against another.
	os.WriteFile(plan, b, 0o600)
	if _, errOut, code := resetRun(t, kc, "other", "--execute", "--plan", plan); code != 1 || !strings.Contains(errOut, "for group g, not other") {
		t.Fatalf("plan for another group: exit %d: %s", code, errOut)
	}
}

// TestConsoleResetterWiring checks what the console's R dialog runs: the
// same action on the console's connection, writing the configured audit
// file (mirrored to the cluster's audit topic) and honouring effects
// policies and read-only.
func TestConsoleResetterWiring(t *testing.T) {
	kc, auditFile := resetCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kafka.Dial(ctx, kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cluster := kafka.NewCluster(cl)
	defer cluster.Close()
	cfg := config.Default()
	cfg.Groups = []config.GroupPolicy{{Match: "g", Effects: true}}
	env := tui.PageEnv{Config: cfg, Context: "wired"}

	// The console gets the action through its services, not a package variable.
	open, ok := consoleServices()[tuioffsets.ServiceName].(tuioffsets.ResetterOpener)
	if !ok {
		t.Fatal("the console's services lack the offset-reset action")
	}
	r, err := open(cluster, env)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Plan(ctx, actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToEarliest}, Scope: offsets.Scope{AllTopics: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Effects || p.Context != "wired" {
		t.Fatalf("policy or context not wired: effects %v context %q", p.Effects, p.Context)
	}
	if _, err := r.Execute(ctx, p, actions.ResetOptions{}); err == nil || !strings.Contains(err.Error(), "--confirm-replay-effects") {
		t.Fatalf("effects guard: %v", err)
	}
	res, err := r.Execute(ctx, p, actions.ResetOptions{ConfirmReplayEffects: true})
	if err != nil || !res.Verified || res.Warning != "" {
		t.Fatalf("execute: %+v %v", res, err)
	}
	log, _ := audit.Open(auditFile)
	entries, err := log.List()
	if err != nil || len(entries) != 2 || entries[1].Context != "wired" {
		t.Fatalf("audit file %s: %+v %v", auditFile, entries, err)
	}
	mirrored, err := cluster.MirroredAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if src := audit.Sources(mirrored); len(src) != 1 || len(mirrored[src[0]]) != 2 {
		t.Fatalf("audit topic holds %v", mirrored)
	}

	env.ReadOnly = true
	ro, err := openConsoleResetter(cluster, env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Execute(ctx, p, actions.ResetOptions{ConfirmReplayEffects: true}); !errors.Is(err, actions.ErrReadOnly) {
		t.Fatalf("read-only console: %v", err)
	}
}
