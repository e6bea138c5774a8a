package offsets

import (
	"testing"

	"github.com/berth-dev/berth/internal/golden"
	reset "github.com/berth-dev/berth/internal/offsets"
)

// TestGoldenViews pins the offset-reset dialog at 100x30 on group g
// (orders, two partitions committed at 5): the form, the dry run of a reset
// to offset 2, and the confirmation that asks for the group's name.
func TestGoldenViews(t *testing.T) {
	f := newFixture(t, 2)
	d := New(f.env, "g")
	send(d, d.Init())
	check := func(name string) {
		t.Helper()
		v := d.View()
		assertFits(t, v, 100, 30)
		golden.Assert(t, "tui/offsets", name, v)
	}
	check("form-100x30")

	chooseMode(t, d, reset.ToOffset)
	keys(d, "tab")
	typeText(d, "2")
	keys(d, "enter")
	if d.step != stepPlan {
		t.Fatalf("after enter: step %d, errors %q %q", d.step, d.formErr, d.planErr)
	}
	check("dry-run-to-offset-100x30")

	keys(d, "enter")
	if d.step != stepConfirm {
		t.Fatalf("enter on the plan: step %d", d.step)
	}
	typeText(d, "g")
	check("confirm-100x30")
}
