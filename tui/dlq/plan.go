package dlq

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/planner"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

// PlanPage makes a plan from a request (or shows a stored one): every
// record's verdict, counts by verdict and by class, and whether the plan is
// blocked. A plan made here is put in the cluster's plan store unless the
// context is read-only.
type PlanPage struct {
	env      tui.PageEnv
	progress *scanProgress
	req      *planner.Request
	file     *redrive.File
	stored   string
	loading  bool
	err      string
	tbl      table.Model
	w, h     int
}

// scanProgress is written by the check running off the UI goroutine and
// read by the page on each tick.
type scanProgress struct{ read, total atomic.Int64 }

type progressTick struct{}

const progressEvery = 200 * time.Millisecond

type planMsg struct {
	file   redrive.File
	stored string
}

// NewPlanPage checks req and shows the resulting plan.
func NewPlanPage(env tui.PageEnv, req planner.Request) *PlanPage {
	p := newPlanPage(env)
	p.req, p.loading, p.progress = &req, true, &scanProgress{}
	return p
}

// NewStoredPlanPage shows a plan read from the store.
func NewStoredPlanPage(env tui.PageEnv, f redrive.File) *PlanPage {
	p := newPlanPage(env)
	p.file, p.stored = &f, "in the plan store"
	p.rows()
	return p
}

func newPlanPage(env tui.PageEnv) *PlanPage {
	p := &PlanPage{env: env}
	p.tbl = table.New([]table.Column{
		{Title: "P:OFFSET", Width: 8},
		{Title: "VERDICT", Width: 16},
		{Title: "EVENT", Width: 16, Flex: 1, Drop: 2},
		{Title: "CLASS", Width: 12, Drop: 3},
		{Title: "DETAIL", Width: 30, Flex: 3, Drop: 1},
	}, env.Styles)
	if env.Size != nil {
		p.setSize(env.Size())
	}
	return p
}

func (p *PlanPage) setSize(w, h int) {
	p.w, p.h = w, h
	p.tbl.SetSize(w, max(h-p.headerLines(), 3))
}

func (p *PlanPage) headerLines() int { return 5 }

func (p *PlanPage) Init() tea.Cmd {
	if p.req == nil {
		return nil
	}
	req := *p.req
	prog := p.progress
	req.Progress = func(read, total int64) { prog.read.Store(read); prog.total.Store(total) }
	readOnly, reason := p.env.ReadOnly, p.env.ReadOnlyReason
	return tea.Batch(p.tick(), do(p.env, func(ctx context.Context, s Service) tea.Msg {
		f, err := s.Plan(ctx, req)
		if err != nil {
			return errMsg{err}
		}
		stored := "stored in the cluster's plan store"
		if readOnly {
			stored = "not stored: read-only (" + reason + ")"
		} else if err := s.Store(ctx, f); err != nil {
			stored = "not stored: " + err.Error()
		}
		return planMsg{file: f, stored: stored}
	}))
}

// tick redraws the scan's progress while the checks run.
func (p *PlanPage) tick() tea.Cmd {
	t := tea.Tick(progressEvery, func(time.Time) tea.Msg { return progressTick{} })
	if p.env.Route != nil {
		return p.env.Route(t)
	}
	return t
}

func (p *PlanPage) Title() string {
	if p.file != nil {
		return "plan " + p.file.Hash[:12]
	}
	return "plan " + sanitize.Text(p.req.DLQ)
}

func (p *PlanPage) KeyBindings() []key.Binding { return p.tbl.KeyBindings() }

func (p *PlanPage) CapturesKey(msg tea.KeyMsg) bool { return p.tbl.CapturesKey(msg) }

func (p *PlanPage) rows() {
	rows := make([]table.Row, 0, len(p.file.Plan.Records))
	for _, r := range p.file.Plan.Records {
		verdict := "include"
		if !r.Included {
			verdict = string(r.Reason)
		}
		row := table.Row{ID: coordID(r.Coord()), Cells: []string{coordID(r.Coord()), verdict, sanitize.Text(r.EventID), r.Class, sanitize.Text(r.Detail)}}
		switch {
		case r.Reason == redrive.ReasonCheckFailed:
			row.Level = styles.Bad
		case !r.Included:
			row.Level = styles.Warn
		}
		rows = append(rows, row)
	}
	p.tbl.SetRows(rows)
}

func (p *PlanPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.setSize(msg.Width, msg.Height)
	case planMsg:
		p.loading, p.err = false, ""
		f := msg.file
		p.file, p.stored = &f, msg.stored
		p.rows()
	case errMsg:
		p.loading, p.err = false, msg.err.Error()
	case progressTick:
		if p.loading {
			return p, p.tick()
		}
		return p, nil
	}
	var cmd tea.Cmd
	p.tbl, cmd = p.tbl.Update(msg)
	return p, cmd
}

// Summary returns the plan's header lines: hash and author, counts by
// verdict, counts by class, blocked state.
func Summary(f redrive.File) []string {
	t := f.Plan.Totals()
	target := f.Plan.Target
	if target == "" {
		target = "original topics"
	}
	signed := "unsigned"
	if a := f.Author(); a != nil {
		signed = "signed " + a.Fingerprint
	}
	lines := []string{fmt.Sprintf("plan %s  %s → %s  by %s (%s), %d approval(s)", f.Hash[:16], sanitize.Text(f.Plan.DLQ), sanitize.Text(target), sanitize.Text(f.Plan.Author), signed, len(f.Approvals()))}
	var reasons []string
	for _, r := range redrive.Reasons {
		if n := t.ByReason[r]; n > 0 {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		}
	}
	line := fmt.Sprintf("selected %d · include %d · exclude %d", t.Selected, t.Included, t.Excluded)
	if len(reasons) > 0 {
		line += " (" + strings.Join(reasons, ", ") + ")"
	}
	lines = append(lines, line)
	var classes []string
	for c := range t.ByClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var parts []string
	for _, c := range classes {
		cc := t.ByClass[c]
		parts = append(parts, fmt.Sprintf("%s %d/%d", c, cc.Included, cc.Selected))
	}
	lines = append(lines, "by class (included/selected): "+strings.Join(parts, ", "))
	if blocked, why := f.Plan.Blocked(); blocked {
		lines = append(lines, "BLOCKED: "+sanitize.Text(why))
	} else {
		lines = append(lines, fmt.Sprintf("policy: review %s, %d approval(s) needed", f.Plan.Policy.Review, f.Plan.Policy.Approvals))
	}
	return lines
}

func (p *PlanPage) View() string {
	switch {
	case p.loading:
		lines := []string{"checking the selection: ledger, system of record, loop guard, duplicates, ordering scan…"}
		if total := p.progress.total.Load(); total > 0 {
			read := p.progress.read.Load()
			lines = append(lines, fmt.Sprintf("ordering scan: %d/%d records (%d%%)", read, total, read*100/total))
		}
		return body(lines, p.w, p.h)
	case p.err != "":
		return body([]string{"cannot plan: " + sanitize.Text(p.err)}, p.w, p.h)
	case p.file == nil:
		return body(nil, p.w, p.h)
	}
	head := Summary(*p.file)
	head = append(head, sanitize.Text(p.stored))
	return body(append(head, strings.Split(p.tbl.View(), "\n")...), p.w, p.h)
}

// ---------------------------------------------------------------- plans

// PlansPage lists the plans in the cluster's plan store.
type PlansPage struct {
	env     tui.PageEnv
	tbl     table.Model
	files   []redrive.File
	loading bool
	err     string
	w, h    int
}

type plansMsg struct{ files []redrive.File }

// NewPlansPage builds the ":plans" page.
func NewPlansPage(env tui.PageEnv) tui.Page {
	p := &PlansPage{env: env, loading: true}
	p.tbl = table.New([]table.Column{
		{Title: "PLAN", Width: 12},
		{Title: "DLQ", Width: 16, Flex: 1},
		{Title: "CREATED", Width: 16, Drop: 2},
		{Title: "AUTHOR", Width: 12, Flex: 1, Drop: 3},
		{Title: "INCLUDE", Width: 7, Right: true, Numeric: true},
		{Title: "SELECTED", Width: 8, Right: true, Numeric: true, Drop: 1},
		{Title: "APPROVALS", Width: 9, Right: true, Numeric: true},
		{Title: "STATE", Width: 8},
	}, env.Styles)
	p.tbl.SetEmpty("no plans (make one from :dlq, or berth redrive plan)")
	if env.Size != nil {
		p.setSize(env.Size())
	}
	return p
}

func (p *PlansPage) setSize(w, h int) { p.w, p.h = w, h; p.tbl.SetSize(w, max(h-1, 3)) }

func (p *PlansPage) load() tea.Cmd {
	p.loading = true
	return do(p.env, func(ctx context.Context, s Service) tea.Msg {
		fs, err := s.Plans(ctx)
		if err != nil {
			return errMsg{err}
		}
		return plansMsg{fs}
	})
}

func (p *PlansPage) Init() tea.Cmd { return p.load() }
func (p *PlansPage) Title() string { return "redrive plans" }
func (p *PlansPage) KeyBindings() []key.Binding {
	return append([]key.Binding{keyOpen, keyReload}, p.tbl.KeyBindings()...)
}
func (p *PlansPage) CapturesKey(msg tea.KeyMsg) bool { return p.tbl.CapturesKey(msg) }

func (p *PlansPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.setSize(msg.Width, msg.Height)
	case plansMsg:
		p.loading, p.err, p.files = false, "", msg.files
		rows := make([]table.Row, len(msg.files))
		for i, f := range msg.files {
			t := f.Plan.Totals()
			state := "ready"
			if b, _ := f.Plan.Blocked(); b {
				state = "blocked"
			}
			rows[i] = table.Row{ID: f.Hash, Cells: []string{f.Hash[:12], sanitize.Text(f.Plan.DLQ), f.Plan.CreatedAt.UTC().Format("2006-01-02 15:04"),
				sanitize.Text(f.Plan.Author), fmt.Sprint(t.Included), fmt.Sprint(t.Selected), fmt.Sprint(len(f.Approvals())), state},
				Nums: []float64{0, 0, 0, 0, float64(t.Included), float64(t.Selected), float64(len(f.Approvals()))}}
		}
		p.tbl.SetRows(rows)
	case errMsg:
		p.loading, p.err = false, msg.err.Error()
	case tea.KeyMsg:
		if p.tbl.Filtering() {
			break
		}
		switch {
		case key.Matches(msg, keyOpen):
			if r, ok := p.tbl.Selected(); ok {
				for _, f := range p.files {
					if f.Hash == r.ID {
						f := f
						return p, tui.Push(func(env tui.PageEnv) tui.Page { return NewStoredPlanPage(env, f) })
					}
				}
			}
			return p, nil
		case key.Matches(msg, keyReload):
			return p, p.load()
		}
	}
	var cmd tea.Cmd
	p.tbl, cmd = p.tbl.Update(msg)
	return p, cmd
}

func (p *PlansPage) View() string {
	status := fmt.Sprintf("%d plan(s) in the cluster's plan store · enter: verdicts", len(p.files))
	switch {
	case p.loading:
		status = "reading the plan store…"
	case p.err != "":
		status = "error: " + sanitize.Text(p.err)
	}
	return body(append([]string{status}, strings.Split(p.tbl.View(), "\n")...), p.w, p.h)
}
