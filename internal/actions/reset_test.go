package actions_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/internal/offsets"
)

var _ actions.ResetBackend = (*kafka.Resets)(nil)

// t0 is when the test topic's first record was written; record i of each
// partition is at t0 + i minutes.
var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

type env struct {
	kc  *kafkatest.Cluster
	r   *actions.Resetter
	log *audit.Log
}

// setup starts a cluster with topic orders (2 partitions, 10 records each,
// one a minute from t0) and group g committed at 5 on both partitions.
func setup(t *testing.T) *env {
	t.Helper()
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 2, 1, nil)
	for p := int32(0); p < 2; p++ {
		kc.ProduceTo(t, "orders", p, 10, t0, time.Minute)
	}
	kc.Commit(t, "g", map[string]map[int32]int64{"orders": {0: 5, 1: 5}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kafka.Dial(ctx, kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rb := kafka.NewResets(cl)
	t.Cleanup(rb.Close)
	log, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	r := &actions.Resetter{Backend: rb, Audit: log, Context: "test", Actor: "alice",
		Now: func() time.Time { return t0.Add(10 * time.Minute) }}
	return &env{kc: kc, r: r, log: log}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) committed(t *testing.T, group string) map[int32]int64 {
	t.Helper()
	resp, err := e.kc.Admin.FetchOffsets(ctxT(t), group)
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

func row(t *testing.T, p offsets.Plan, partition int32) offsets.Row {
	t.Helper()
	for _, r := range p.Partitions {
		if r.Topic == "orders" && r.Partition == partition {
			return r
		}
	}
	t.Fatalf("no row for orders[%d] in %+v", partition, p.Partitions)
	return offsets.Row{}
}

func all() offsets.Scope { return offsets.Scope{AllTopics: true} }

func TestEveryModePlansTheRightTargets(t *testing.T) {
	e := setup(t)
	e.kc.Commit(t, "other", map[string]map[int32]int64{"orders": {0: 2}})
	cases := []struct {
		name    string
		spec    offsets.Spec
		scope   offsets.Scope
		targets map[int32]int64
		replay  int64 // on partition 0
		skip    int64
		clamped offsets.Clamp
		warn    string
	}{
		{"earliest", offsets.Spec{Mode: offsets.ToEarliest}, all(), map[int32]int64{0: 0, 1: 0}, 5, 0, "", ""},
		{"latest", offsets.Spec{Mode: offsets.ToLatest}, all(), map[int32]int64{0: 10, 1: 10}, 0, 5, "", ""},
		{"current", offsets.Spec{Mode: offsets.ToCurrent}, all(), map[int32]int64{0: 5, 1: 5}, 0, 0, "", ""},
		{"offset", offsets.Spec{Mode: offsets.ToOffset, Offset: 3}, all(), map[int32]int64{0: 3, 1: 3}, 2, 0, "", ""},
		{"offset beyond end", offsets.Spec{Mode: offsets.ToOffset, Offset: 50}, all(), map[int32]int64{0: 10, 1: 10}, 0, 5, offsets.ClampedLogEnd, "clamped"},
		{"shift back", offsets.Spec{Mode: offsets.ShiftBy, Shift: -2}, all(), map[int32]int64{0: 3, 1: 3}, 2, 0, "", ""},
		{"shift before start", offsets.Spec{Mode: offsets.ShiftBy, Shift: -100}, all(), map[int32]int64{0: 0, 1: 0}, 5, 0, offsets.ClampedLogStart, "clamped"},
		{"shift forward", offsets.Spec{Mode: offsets.ShiftBy, Shift: 3}, all(), map[int32]int64{0: 8, 1: 8}, 0, 3, "", ""},
		{"datetime", offsets.Spec{Mode: offsets.ToDatetime, Time: t0.Add(7 * time.Minute)}, all(), map[int32]int64{0: 7, 1: 7}, 0, 2, "", ""},
		{"datetime between records", offsets.Spec{Mode: offsets.ToDatetime, Time: t0.Add(2*time.Minute + time.Second)}, all(), map[int32]int64{0: 3, 1: 3}, 2, 0, "", ""},
		{"datetime after last record", offsets.Spec{Mode: offsets.ToDatetime, Time: t0.Add(time.Hour)}, all(), map[int32]int64{0: 10, 1: 10}, 0, 5, "", "falling back to the log end"},
		{"by duration", offsets.Spec{Mode: offsets.ByDuration, Duration: 4 * time.Minute}, all(), map[int32]int64{0: 6, 1: 6}, 0, 1, "", ""},
		{"from group", offsets.Spec{Mode: offsets.FromGroup, Group: "other"}, offsets.Scope{}, map[int32]int64{0: 2}, 3, 0, "", ""},
		{"from group, wider scope", offsets.Spec{Mode: offsets.FromGroup, Group: "other"}, offsets.Scope{Topics: []offsets.TopicScope{{Topic: "orders"}}}, map[int32]int64{0: 2}, 3, 0, "", "left unchanged"},
		{"from file", offsets.Spec{Mode: offsets.FromFile, FileName: "f.csv", File: []offsets.FileOffset{{Topic: "orders", Partition: 0, Offset: 4}, {Topic: "orders", Partition: 1, Offset: 99}}}, offsets.Scope{}, map[int32]int64{0: 4, 1: 10}, 1, 0, "", "clamped"},
		{"topic with partitions", offsets.Spec{Mode: offsets.ToEarliest}, offsets.Scope{Topics: []offsets.TopicScope{{Topic: "orders", Partitions: []int32{0}}}}, map[int32]int64{0: 0}, 5, 0, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: tc.spec, Scope: tc.scope})
			if err != nil {
				t.Fatal(err)
			}
			got := map[int32]int64{}
			for _, r := range p.Partitions {
				got[r.Partition] = r.Target
			}
			if len(got) != len(tc.targets) {
				t.Fatalf("targets %v, want %v", got, tc.targets)
			}
			for part, want := range tc.targets {
				if got[part] != want {
					t.Fatalf("targets %v, want %v", got, tc.targets)
				}
			}
			r0 := row(t, p, 0)
			if r0.ReplayRecords != tc.replay || r0.SkipRecords != tc.skip {
				t.Fatalf("partition 0 replay %d skip %d, want %d / %d", r0.ReplayRecords, r0.SkipRecords, tc.replay, tc.skip)
			}
			if *r0.Delta != r0.Target-5 {
				t.Fatalf("delta %d for target %d from 5", *r0.Delta, r0.Target)
			}
			if tc.clamped != "" {
				if !r0.Clamped || r0.ClampedTo != tc.clamped {
					t.Fatalf("partition 0 clamp %v %q, want %q", r0.Clamped, r0.ClampedTo, tc.clamped)
				}
			} else if r0.Clamped {
				t.Fatalf("partition 0 clamped unexpectedly: %+v", r0)
			}
			if tc.warn != "" && !strings.Contains(strings.Join(p.Warnings, "\n"), tc.warn) {
				t.Fatalf("warnings %q lack %q", p.Warnings, tc.warn)
			}
			// A dry run changes nothing.
			if c := e.committed(t, "g"); c[0] != 5 || c[1] != 5 {
				t.Fatalf("dry run changed the group: %v", c)
			}
		})
	}
}

func TestShiftByWithoutCommitIsAnError(t *testing.T) {
	e := setup(t)
	_, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "fresh", Spec: offsets.Spec{Mode: offsets.ShiftBy, Shift: -1},
		Scope: offsets.Scope{Topics: []offsets.TopicScope{{Topic: "orders"}}}})
	if err == nil || !strings.Contains(err.Error(), "no committed offset") || !strings.Contains(err.Error(), "orders[0]") {
		t.Fatalf("shift-by without a commit: %v", err)
	}
	// --to-current without a commit is the log end.
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "fresh", Spec: offsets.Spec{Mode: offsets.ToCurrent},
		Scope: offsets.Scope{Topics: []offsets.TopicScope{{Topic: "orders", Partitions: []int32{1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, p, 1); r.Target != 10 || r.Current != nil || r.Delta != nil {
		t.Fatalf("to-current without a commit: %+v", r)
	}
}

func TestScopeErrorsNameTheTopicOrPartition(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct {
		scope offsets.Scope
		want  string
	}{
		{offsets.Scope{Topics: []offsets.TopicScope{{Topic: "nope"}}}, "nope"},
		{offsets.Scope{Topics: []offsets.TopicScope{{Topic: "orders", Partitions: []int32{7}}}}, "partition 7"},
		{offsets.Scope{}, "no scope"},
	} {
		_, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToEarliest}, Scope: tc.scope})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("scope %+v: %v, want mention of %q", tc.scope, err, tc.want)
		}
	}
}

func TestReplaySpanFromRecordTimestamps(t *testing.T) {
	e := setup(t)
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToOffset, Offset: 2}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	r := row(t, p, 0)
	// Replays offsets 2..4: written at t0+2m .. t0+4m.
	if r.SpanFrom == nil || r.SpanTo == nil || !r.SpanFrom.Equal(t0.Add(2*time.Minute)) || !r.SpanTo.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("replay span %v .. %v, want %s .. %s", r.SpanFrom, r.SpanTo, t0.Add(2*time.Minute), t0.Add(4*time.Minute))
	}
	p, err = e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToLatest}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	r = row(t, p, 1)
	// Skips offsets 5..9: t0+5m .. t0+9m.
	if r.SpanFrom == nil || !r.SpanFrom.Equal(t0.Add(5*time.Minute)) || !r.SpanTo.Equal(t0.Add(9*time.Minute)) {
		t.Fatalf("skip span %v .. %v", r.SpanFrom, r.SpanTo)
	}
}

func TestClampAtLogStartAfterDeleteRecords(t *testing.T) {
	e := setup(t)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 4})
	if _, err := e.kc.Admin.DeleteRecords(ctxT(t), del); err != nil {
		t.Fatal(err)
	}
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToOffset, Offset: 1}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := row(t, p, 0), row(t, p, 1)
	if r0.Target != 4 || !r0.Clamped || r0.ClampedTo != offsets.ClampedLogStart || r0.Requested != 1 || r0.ReplayRecords != 1 {
		t.Fatalf("partition 0 (log start 4): %+v", r0)
	}
	if r1.Target != 1 || r1.Clamped {
		t.Fatalf("partition 1 (log start 0): %+v", r1)
	}
	res, err := e.r.Execute(ctxT(t), p, actions.ResetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Executed || !res.Verified {
		t.Fatalf("result %+v", res)
	}
	if c := e.committed(t, "g"); c[0] != 4 || c[1] != 1 {
		t.Fatalf("committed %v, want the clamped targets 4 and 1", c)
	}
}

func TestExecuteCommitsThePlanAndAudits(t *testing.T) {
	e := setup(t)
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToDatetime, Time: t0.Add(3 * time.Minute)}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.r.Execute(ctxT(t), p, actions.ResetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Executed || !res.Verified || res.AuditSeq != 2 {
		t.Fatalf("result %+v", res)
	}
	if c := e.committed(t, "g"); c[0] != 3 || c[1] != 3 {
		t.Fatalf("committed %v, want 3 and 3", c)
	}
	entries, err := e.log.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Action != actions.ActionStart || entries[1].Action != actions.ActionReset {
		t.Fatalf("audit entries %+v", entries)
	}
	var d actions.ResetAuditDetails
	if err := entries[1].Decode(&d); err != nil {
		t.Fatal(err)
	}
	if entries[1].Actor != "alice" || entries[1].Context != "test" || entries[1].Target != "g" || d.Status != "committed" || !d.Verified || d.PlanDigest != p.Digest {
		t.Fatalf("audit entry %+v %+v", entries[1], d)
	}
	if len(d.Partitions) != 2 || *d.Partitions[0].Before != 5 || d.Partitions[0].After != 3 {
		t.Fatalf("audit before/after %+v", d.Partitions)
	}
	if rep, _ := e.log.Verify(); !rep.OK {
		t.Fatalf("audit chain %+v", rep)
	}
}

func TestChangeBetweenDryRunAndExecuteIsRefused(t *testing.T) {
	e := setup(t)
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToEarliest}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	// Someone commits in between (a consumer ran briefly).
	e.kc.Commit(t, "g", map[string]map[int32]int64{"orders": {1: 7}})
	_, err = e.r.Execute(ctxT(t), p, actions.ResetOptions{})
	var ce *actions.ChangedError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "orders[1] committed offset is 7, was 5") {
		t.Fatalf("execute after a change: %v", err)
	}
	if c := e.committed(t, "g"); c[0] != 5 || c[1] != 7 {
		t.Fatalf("a refused execute committed something: %v", c)
	}
	if entries, _ := e.log.List(); len(entries) != 0 {
		t.Fatalf("a refused execute was audited as a reset: %+v", entries)
	}
}

func TestSavedPlanRoundTripAndTamper(t *testing.T) {
	e := setup(t)
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ShiftBy, Shift: -1}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	back, err := offsets.ParsePlan("plan.json", b)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"target":4`, `"target":0`, 1)
	if edited == string(b) {
		t.Fatal("test setup: no target to edit")
	}
	if _, err := offsets.ParsePlan("plan.json", []byte(edited)); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("edited plan accepted: %v", err)
	}
	// Plan for another context: refused.
	other := *e.r
	other.Context = "prod"
	if _, err := other.Execute(ctxT(t), back, actions.ResetOptions{}); err == nil || !strings.Contains(err.Error(), "context") {
		t.Fatalf("plan for another context: %v", err)
	}
	res, err := e.r.Execute(ctxT(t), back, actions.ResetOptions{})
	if err != nil || !res.Verified {
		t.Fatalf("executing a saved plan: %+v %v", res, err)
	}
	if c := e.committed(t, "g"); c[0] != 4 || c[1] != 4 {
		t.Fatalf("committed %v", c)
	}
}

func TestReadOnlyRefusedInTheAction(t *testing.T) {
	e := setup(t)
	e.r.ReadOnly = true
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToLatest}, Scope: all()})
	if err != nil {
		t.Fatalf("a dry run is allowed read-only: %v", err)
	}
	if _, err := e.r.Execute(ctxT(t), p, actions.ResetOptions{}); !errors.Is(err, actions.ErrReadOnly) {
		t.Fatalf("read-only execute: %v", err)
	}
	if c := e.committed(t, "g"); c[0] != 5 {
		t.Fatalf("read-only execute committed: %v", c)
	}
}

func TestEffectsGuard(t *testing.T) {
	e := setup(t)
	e.r.Effects = func(g string) bool { return g == "g" }
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToEarliest}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Effects || !strings.Contains(strings.Join(p.Warnings, "\n"), "side effects") {
		t.Fatalf("dry run does not warn about effects: %q", p.Warnings)
	}
	_, err = e.r.Execute(ctxT(t), p, actions.ResetOptions{})
	var ee *actions.EffectsError
	if !errors.As(err, &ee) || ee.Replay != 10 || !strings.Contains(err.Error(), "--confirm-replay-effects") {
		t.Fatalf("unconfirmed replay of an effects group: %v", err)
	}
	if c := e.committed(t, "g"); c[0] != 5 {
		t.Fatalf("refused replay committed: %v", c)
	}
	// Skipping forward replays nothing: no confirmation needed.
	fwd, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToLatest}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	if fwd.NeedsEffectsConfirmation() {
		t.Fatal("a forward skip asks for replay confirmation")
	}
	res, err := e.r.Execute(ctxT(t), p, actions.ResetOptions{ConfirmReplayEffects: true})
	if err != nil || !res.Executed {
		t.Fatalf("confirmed replay: %+v %v", res, err)
	}
	var d actions.ResetAuditDetails
	entries, _ := e.log.List()
	entries[len(entries)-1].Decode(&d)
	if !d.Effects || !d.Confirmed {
		t.Fatalf("audit does not record the confirmation: %+v", d)
	}
}

// joinGroup starts a live franz-go consumer in group g and waits until the
// coordinator lists it as a member.
func joinGroup(t *testing.T, e *env, group, clientID string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kc.Addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
		kgo.ClientID(clientID), kgo.DisableAutoCommit())
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
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		gs, err := e.kc.Admin.DescribeGroups(context.Background(), group)
		if err == nil && len(gs[group].Members) > 0 && gs[group].State == "Stable" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer did not join %s: %+v %v", group, gs, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
}

func TestActiveGroupRefusedNamingTheMember(t *testing.T) {
	e := setup(t)
	joinGroup(t, e, "g", "payments-worker-1")
	p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToEarliest}, Scope: all()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "payments-worker-1") {
		t.Fatalf("dry run does not name the member: %q", p.Warnings)
	}
	before := e.committed(t, "g")
	_, err = e.r.Execute(ctxT(t), p, actions.ResetOptions{})
	var ae *actions.ActiveError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "payments-worker-1") {
		t.Fatalf("execute with an active member: %v", err)
	}
	after := e.committed(t, "g")
	if before[0] != after[0] || before[1] != after[1] {
		t.Fatalf("refused reset changed offsets: %v -> %v", before, after)
	}
}

func TestBrokerRefusesNonMemberCommitToActiveGroup(t *testing.T) {
	// The last line of defence against a consumer joining between the
	// membership check and the commit: the broker itself refuses.
	e := setup(t)
	joinGroup(t, e, "g", "late-joiner")
	rb := e.r.Backend
	err := rb.CommitOffsets(ctxT(t), "g", []backends.Committed{{Topic: "orders", Partition: 0, Offset: 0, LeaderEpoch: -1}})
	if err == nil || !strings.Contains(err.Error(), "a consumer joined the group") {
		t.Fatalf("non-member commit to an active group: %v", err)
	}
}

// lossyCommit commits through the real backend and then reports an error,
// as a request cancelled after the broker applied it would; with apply
// false it fails without committing.
type lossyCommit struct {
	actions.ResetBackend
	apply bool
}

func (l lossyCommit) CommitOffsets(ctx context.Context, group string, offs []backends.Committed) error {
	if l.apply {
		if err := l.ResetBackend.CommitOffsets(ctx, group, offs); err != nil {
			return err
		}
	}
	return context.Canceled
}

func TestOutcomeIsReadBackWhenTheCommitReportsAnError(t *testing.T) {
	e := setup(t)
	real := e.r.Backend
	plan := func() offsets.Plan {
		p, err := e.r.Plan(ctxT(t), actions.ResetRequest{Group: "g", Spec: offsets.Spec{Mode: offsets.ToOffset, Offset: 2}, Scope: all()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Not applied: failed, nothing changed, and the audit says so.
	e.r.Backend = lossyCommit{ResetBackend: real}
	res, err := e.r.Execute(ctxT(t), plan(), actions.ResetOptions{})
	if err == nil || !strings.Contains(err.Error(), "nothing changed") || res.Executed {
		t.Fatalf("unapplied commit: %+v %v", res, err)
	}
	entries, _ := e.log.List()
	var d actions.ResetAuditDetails
	entries[len(entries)-1].Decode(&d)
	if d.Status != "failed" || d.Error == "" || len(d.ReadBack) != 2 || d.ReadBack[0].After != 5 {
		t.Fatalf("audit of an unapplied commit: %+v", d)
	}

	// Applied despite the error: recorded as committed and verified.
	e.r.Backend = lossyCommit{ResetBackend: real, apply: true}
	res, err = e.r.Execute(ctxT(t), plan(), actions.ResetOptions{})
	if err != nil || !res.Executed || !res.Verified || !strings.Contains(res.Warning, "read back match the plan") {
		t.Fatalf("applied commit with an error: %+v %v", res, err)
	}
	entries, _ = e.log.List()
	d = actions.ResetAuditDetails{}
	entries[len(entries)-1].Decode(&d)
	if d.Status != "committed" || !d.Verified {
		t.Fatalf("audit of an applied commit: %+v", d)
	}
	if c := e.committed(t, "g"); c[0] != 2 || c[1] != 2 {
		t.Fatalf("committed %v", c)
	}
}
