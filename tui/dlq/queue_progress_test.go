package dlq

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/styles"
)

// steppedQueues is a QueueService whose Execute reports the given results
// as a RabbitMQ run does (once it starts, after each chunk) and waits
// after each report until the test has looked at the page: the run's
// steps are the test's, with no timing involved. Its plan is a stored,
// ready plan of included messages.
type steppedQueues struct {
	plan     QueuePlan
	reports  []actions.RabbitResult
	reported chan struct{}
	seen     chan struct{}
}

func (s *steppedQueues) DLQs(context.Context) ([]QueueDLQ, error) { return nil, nil }
func (s *steppedQueues) Browse(context.Context, string, bool) (QueueBrowse, error) {
	return QueueBrowse{}, nil
}
func (s *steppedQueues) Plan(context.Context, QueuePlanRequest) (QueuePlan, error) {
	return s.plan, nil
}
func (s *steppedQueues) Status(context.Context, bool) ([]QueuePlanStatus, error) { return nil, nil }
func (s *steppedQueues) PlanStatus(context.Context, string, bool) (QueuePlanStatus, error) {
	return QueuePlanStatus{Plan: s.plan, Approved: true, State: "ready", Policy: "review none"}, nil
}
func (s *steppedQueues) Approve(context.Context, string, approval.Signature, bool) (Approved, error) {
	return Approved{}, nil
}
func (s *steppedQueues) SignAsAuthor(context.Context, string, approval.Signature, bool) error {
	return nil
}
func (s *steppedQueues) DryRun(context.Context, string, bool) (QueueDryRun, error) {
	return QueueDryRun{WouldSend: 2, Totals: s.plan.Totals, Skipped: []QueueSkip{{EventID: "ev-2", Position: 2, Reason: redrive.ReasonEffectCommitted}}}, nil
}
func (s *steppedQueues) Execute(_ context.Context, _ string, req QueueExecRequest) (QueueResult, error) {
	for _, r := range s.reports {
		req.Progress(QueueProgress{Included: s.plan.Totals.Included, Rate: s.plan.Rate, Result: r})
		s.reported <- struct{}{}
		<-s.seen
	}
	last := s.reports[len(s.reports)-1]
	return QueueResult{Sent: last.Sent, Skipped: queueSkipsOf(last.Skipped)}, nil
}

func queueSkipsOf(in []actions.RabbitSkip) []QueueSkip {
	var out []QueueSkip
	for _, s := range in {
		out = append(out, QueueSkip{EventID: s.EventID, Position: s.Position, Reason: s.Reason, Detail: s.Detail})
	}
	return out
}

// A RabbitMQ run whose checks, run again at execution, skip one of the
// plan's three messages before it sends anything (its payment was captured
// meanwhile): the plan page's progress counts it as `berth redrive
// execute`'s progress line does (actions.Progress.Line), as settled from
// the start, out of the plan's three: 1/3 at the start, 3/3 at the end,
// skipped 1 throughout; the plans list's state says the same percentage.
// (The console used to leave it out of both: 0/2, then 2/2.)
func TestQueueRunProgressCountsASkipBeforeTheRunAsTheCLI(t *testing.T) {
	hash := strings.Repeat("5e", 32)
	skip := []actions.RabbitSkip{{EventID: "ev-2", Position: 2, Reason: redrive.ReasonEffectCommitted, Detail: "the system of record has pay-2"}}
	svc := &steppedQueues{
		plan: QueuePlan{Hash: hash, DLQ: "orders.dlq", Vhost: "/", QueueType: "classic", Stored: true, Rate: 100, Window: 1,
			Totals:  redrive.Totals{Selected: 3, Included: 3},
			Records: []QueuePlanRecord{{Position: 1, EventID: "ev-1", Included: true}, {Position: 2, EventID: "ev-2", Included: true}, {Position: 3, EventID: "ev-3", Included: true}}},
		// What the run reports: once it starts (the skip already known),
		// then after each chunk of one.
		reports: []actions.RabbitResult{
			{Plan: hash, Skipped: skip},
			{Plan: hash, Sent: 1, Skipped: skip},
			{Plan: hash, Sent: 2, Skipped: skip},
		},
		reported: make(chan struct{}), seen: make(chan struct{}),
	}
	env := tui.PageEnv{
		Services: map[string]any{QueueServiceName: QueueOpener(func(backends.Cluster, *config.Config, string) (QueueService, error) { return svc, nil })},
		Config:   config.Default(), Context: "rmq", Styles: styles.New(),
		Size: func() (int, int) { return width, height },
		Do: func(fn func(ctx context.Context, c backends.Cluster) tea.Msg) tea.Cmd {
			return func() tea.Msg { return fn(context.Background(), nil) }
		},
		Route: func(cmd tea.Cmd) tea.Cmd { return cmd },
	}
	// X on the stored plan: its status, the dry run, then the hash typed.
	var page tui.Page = NewStoredQueuePlanPage(env, QueuePlanStatus{Plan: svc.plan}, "X")
	page, _ = page.Update(tea.WindowSizeMsg{Width: width, Height: height})
	page, _, _ = run(t, env, page, page.Init())
	if v := checkView(t, page); !strings.Contains(v, "DRY RUN: would redrive 2 message(s)") {
		t.Fatalf("X did not show the dry run:\n%s", v)
	}
	page, _, _ = press(t, env, page, runes(hash[:8]))
	// enter starts the run; its progress is delivered step by step below
	// (the page's own listener would wait on the run).
	page, start := page.Update(enterKey)
	page, _ = page.Update(start())
	qp := page.(*QueuePlanPage)
	r := qp.run

	for i, want := range []struct{ counts, state string }{
		{"1/3 (33%) sent 0 already sent 0 skipped 1 failed 0", "executing 33%"},
		{"2/3 (66%) sent 1 already sent 0 skipped 1 failed 0", "executing 66%"},
		{"3/3 (100%) sent 2 already sent 0 skipped 1 failed 0", "executing 100%"},
	} {
		<-svc.reported
		page, _ = page.Update(queueRunMsg{run: r})
		v := checkView(t, page)
		// The CLI's line for the same report, from the same counts.
		cli := actions.RabbitProgress(hash, 3, 100, svc.reports[i], time.Second, false).Line()
		if !strings.Contains(cli, ": "+want.counts+",") {
			t.Fatalf("report %d: the CLI prints %q; want its counts %q", i, cli, want.counts)
		}
		if !strings.Contains(v, want.counts+" · elapsed") {
			t.Errorf("report %d: the page does not show the CLI's counts %q:\n%s", i, want.counts, v)
		}
		if bar := want.counts[strings.Index(want.counts, "(")+1 : strings.Index(want.counts, ")")]; !strings.Contains(v, "executing ") || !strings.Contains(v, " "+bar+"\n") {
			t.Errorf("report %d: the bar does not stand at %s:\n%s", i, bar, v)
		}
		if st, ok := r.stateText(); !ok || st != want.state {
			t.Errorf("report %d: the plans list says %q; want %q", i, st, want.state)
		}
		svc.seen <- struct{}{}
	}
	// The run ends: the result says the same.
	page, _, _ = run(t, env, page, qp.listen())
	if v := checkView(t, page); !strings.Contains(v, "result: sent 2 · already sent 0 · skipped 1 (effect_committed 1) · failed 0") {
		t.Fatalf("the run's result:\n%s", v)
	}
}
