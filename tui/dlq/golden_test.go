package dlq

import (
	"regexp"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/golden"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/styles"
)

// volatile are the parts of a DLQ view that change from run to run: plan
// hashes (they cover the creation time), timestamps and ages measured
// against the wall clock. Each is masked character for character, so the
// layout around it is still pinned.
var volatile = []*regexp.Regexp{
	regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d`),                // created, as listed
	regexp.MustCompile(`\b[0-9a-f]{12,64}\b`),                      // plan hashes
	regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?`), // timestamps
	regexp.MustCompile(`\b\d\d:\d\d:\d\d\b`),                       // clock times
	regexp.MustCompile(`\b\d+(ms|s|m\d\ds|h\d\dm|d\d\dh)\b`),       // ages (durations.Format)
}

// stable masks what varies (above) and the plan's author, user@host, which
// varies from machine to machine and so in length: its lines lose their
// trailing padding, the one part of the layout not pinned.
func stable(v string) string {
	for _, re := range volatile {
		v = re.ReplaceAllStringFunc(v, func(s string) string { return strings.Repeat("#", len(s)) })
	}
	v = strings.ReplaceAll(v, actions.DefaultAuthor(), "<author>")
	lines := strings.Split(v, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// TestGoldenViews pins the DLQ pages at 120x30 on the payments.DLT world:
// the list, the classes of one DLQ, the plan made from the timeout class
// and the plans list.
func TestGoldenViews(t *testing.T) {
	env := world(t, false)
	list := NewListPage(env)
	list, _, _ = run(t, env, list, list.Init())
	golden.Assert(t, "tui/dlq", "list-120x30", stable(checkView(t, list)))

	classes := tui.Page(NewClassesPage(env, "payments.DLT"))
	classes, _, _ = run(t, env, classes, classes.Init())
	golden.Assert(t, "tui/dlq", "classes-120x30", stable(checkView(t, classes)))

	for i := 0; i < 5; i++ {
		if r, _ := classes.(*ClassesPage).tbl.Selected(); strings.Contains(strings.Join(r.Cells, " "), "PspTimeout") {
			break
		}
		classes, _, _ = press(t, env, classes, downKey)
	}
	classes, _, _ = press(t, env, classes, runes("x"))
	_, pushed, _ := press(t, env, classes, runes("p"))
	if len(pushed) != 1 {
		t.Fatal("p did not open the plan page")
	}
	golden.Assert(t, "tui/dlq", "plan-120x30", stable(checkView(t, pushed[0])))

	plans := NewPlansPage(env)
	plans, _, _ = run(t, env, plans, plans.Init())
	golden.Assert(t, "tui/dlq", "plans-120x30", stable(checkView(t, plans)))
}

// TestGoldenQueueViews pins the RabbitMQ classes page of orders.dlq at
// 120x30 from a browse answer (plain data, no broker): two classes, the
// bigger one selected.
func TestGoldenQueueViews(t *testing.T) {
	env := tui.PageEnv{Styles: styles.New(), Size: func() (int, int) { return width, height }}
	read := QueueBrowse{DLQ: "orders.dlq", Vhost: "/", Type: "classic", Method: "basic.get + nack", Complete: true, Limit: 100,
		Classes: []redrive.Class{
			{ID: "c-timeout", Count: 2, Verdict: "transient", ClassKey: redrive.ClassKey{OriginalTopic: "orders", Exception: "rejected", Pattern: "PSP timed out after <n> ms"}},
			{ID: "c-invalid", Count: 1, Verdict: "permanent", ClassKey: redrive.ClassKey{OriginalTopic: "orders", Exception: "rejected", Pattern: "amount is invalid"}},
		},
		Messages: []QueueMessage{
			{Position: 1, EventID: "ev-1", Class: "c-timeout"},
			{Position: 2, EventID: "ev-2", Class: "c-timeout"},
			{Position: 3, EventID: "ev-3", Class: "c-invalid"},
		}}
	classes := tui.Page(NewQueueClassesPage(env, "orders.dlq"))
	classes, _ = classes.Update(browsedMsg{read})
	classes, _, _ = press(t, env, classes, runes("x"))
	golden.Assert(t, "tui/dlq", "queue-classes-120x30", stable(checkView(t, classes)))
}
