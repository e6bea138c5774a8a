// Package dlq is the console's dead-letter pages: the DLQ list (":dlq"),
// a DLQ's failure classes, its records, one record's headers and payload,
// and redrive plans (":plans" and the plan made from a selection). Records
// are selected into a plan here; the checks run through the Service off the
// UI goroutine (env.Do) and the plan page shows each record's verdict with
// counts by verdict and class.
//
// The pages talk to a Service (plain redrive types, no client-library
// types); cmd/berth sets Open to build one on the attached Kafka cluster.
// On a RabbitMQ context ":dlq" and ":plans" open the queue pages of
// queue.go and queue_plan.go instead, over a QueueService (OpenQueues);
// the pages of both share their scaffolding (pages.go) and the plan pages
// their actions (actions.go).
package dlq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/record"
	"github.com/berth-dev/berth/tui/styles"
)

// Service is what the pages need from the attached cluster.
type Service interface {
	List(ctx context.Context) ([]redrive.DLQ, error)
	Load(ctx context.Context, dlq string) (actions.Loaded, error)
	// Plan makes a checked plan (not stored).
	Plan(ctx context.Context, req actions.PlanRequest) (redrive.File, error)
	// Store puts a plan in the cluster's shared plan store.
	Store(ctx context.Context, f redrive.File) error
	Plans(ctx context.Context) ([]redrive.File, error)
}

// PlanActions is what approving and executing plans needs on top of
// Service. cmd/berth's Service implements it; the pending-plans view falls
// back to listing plans without approvals and actions when a Service does
// not.
type PlanActions interface {
	Service
	// Status lists the stored plans as `berth redrive status` does, with
	// approvals checked against today's policy; readOnly feeds the
	// execution refusal.
	Status(ctx context.Context, readOnly bool) ([]PlanStatus, error)
	// PlanStatus is Status for one plan (hash or 8+ digit prefix).
	PlanStatus(ctx context.Context, hash string, readOnly bool) (PlanStatus, error)
	// Approve stores an approval signature over a stored plan and audits
	// it (redrive.approved). It refuses, storing nothing, in a read-only
	// context, when the key is the author's or is not in allowed_signers.
	Approve(ctx context.Context, hash string, sig approval.Signature, contextName string, readOnly bool) (Approved, error)
	// RecordPlan appends the audit entry for a plan made in the console
	// (redrive.plan, as `berth redrive plan` does) before it is stored
	// (store: it is to be stored); an error refuses the plan: it is not
	// stored.
	RecordPlan(ctx context.Context, f redrive.File, contextName string, store bool) error
	// SignAsAuthor stores the author's signature over a plan that has none
	// (a plan just made in the console, as `redrive plan --key` signs it).
	SignAsAuthor(ctx context.Context, hash string, sig approval.Signature, contextName string, readOnly bool) error
	// Execute runs a stored plan to its end (or until cancelled through
	// req.Control); it blocks, so the console calls it in a goroutine.
	Execute(ctx context.Context, hash string, req ExecRequest) (actions.Result, error)
	// Verify reads back what the plan produced and compares payload
	// hashes, then watches the DLQ for re-failures for watch (until ctx
	// ends); it audits redrive.verified.
	Verify(ctx context.Context, hash string, watch time.Duration, contextName string) (Verification, error)
}

// Opener builds a Service on the attached cluster. It returns an error
// when the cluster cannot hold DLQs (not Kafka). contextName is the
// console's context (its kind and data dir decide which policies apply on
// the bundled broker). The program that builds the console hands it in as
// PageEnv.Services[ServiceName].
type Opener = func(c backends.Cluster, cfg *config.Config, contextName string) (Service, error)

// Names of this package's entries in PageEnv.Services.
const (
	ServiceName      = "dlq"        // an Opener (Kafka)
	QueueServiceName = "dlq.queues" // a QueueOpener (RabbitMQ)
)

var errNoService = errors.New("dead-letter queues need a Kafka context")

func init() {
	tui.RegisterPageSpec(tui.PageSpec{Name: "dlq", Aliases: []string{"dlqs", "deadletters"}, Help: "dead-letter queues: depth, classes, records; select records into a redrive plan", Factory: NewListPage})
	// From the topics page: D on a DLQ topic opens its failure classes.
	tui.RegisterAction(tui.Action{
		Scope: "topic",
		Key:   key.NewBinding(key.WithKeys("D"), key.WithHelp("D", "dead letters: classes")),
		Open:  func(env tui.PageEnv, topic string) tui.Page { return NewClassesPage(env, topic) },
	})
	tui.RegisterPageSpec(tui.PageSpec{Name: "plans", Aliases: []string{"redrive"}, Help: "redrive plans in the cluster's plan store", Factory: NewPlansPage})
}

// do runs fn with a Service off the UI goroutine.
func do(env tui.PageEnv, fn func(ctx context.Context, s Service) tea.Msg) tea.Cmd {
	return doOr(env, func(err error) tea.Msg { return errMsg{err} }, fn)
}

// doOr is do with the message for a missing Service chosen by the caller.
func doOr(env tui.PageEnv, onErr func(error) tea.Msg, fn func(ctx context.Context, s Service) tea.Msg) tea.Cmd {
	return doWith(env, ServiceName, errNoService, onErr, fn)
}

// doWith runs fn off the UI goroutine with the service (Service,
// QueueService) that the opener env.Services[name] builds on the attached
// cluster (the console's builder hands openers in; tests hand in their
// own). Without one (missing) or failing to build it, the message is
// onErr's.
func doWith[S any](env tui.PageEnv, name string, missing error, onErr func(error) tea.Msg, fn func(ctx context.Context, s S) tea.Msg) tea.Cmd {
	if env.Do == nil {
		return nil
	}
	open, _ := env.Services[name].(func(backends.Cluster, *config.Config, string) (S, error))
	return env.Do(func(ctx context.Context, c backends.Cluster) tea.Msg {
		if open == nil {
			return onErr(missing)
		}
		s, err := open(c, env.Config, env.Context)
		if err != nil {
			return onErr(err)
		}
		return fn(ctx, s)
	})
}

// doActions runs fn with the plan actions off the UI goroutine; failing
// to get them, it returns onErr's message.
func doActions(env tui.PageEnv, onErr func(error) tea.Msg, fn func(ctx context.Context, s PlanActions) tea.Msg) tea.Cmd {
	return doOr(env, onErr, func(ctx context.Context, s Service) tea.Msg {
		a, ok := s.(PlanActions)
		if !ok {
			return onErr(errNoActions)
		}
		return fn(ctx, a)
	})
}

var errNoActions = errors.New("this console cannot approve or execute plans")

type errMsg struct{ err error }

func binding(keys, help string, ks ...string) key.Binding {
	return key.NewBinding(key.WithKeys(append([]string{keys}, ks...)...), key.WithHelp(keys, help))
}

var (
	keyOpen   = binding("enter", "open")
	keyReload = binding("u", "reload")
	keySelect = binding("x", "select/unselect", " ")
	keyAll    = binding("a", "all records")
	keyPlan   = binding("p", "plan the selection")
	keyHazard = binding("H", "plan: allow ordering hazards")
)

// body pads or cuts lines to exactly h lines of at most w cells.
func body(lines []string, w, h int) string {
	if h < 0 {
		h = 0
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	if w > 0 {
		for i, l := range lines {
			if ansi.StringWidth(l) > w {
				lines[i] = ansi.Truncate(l, w, "…")
			}
		}
	}
	return strings.Join(lines, "\n")
}

func javaSimpleName(s string) string {
	if i := strings.LastIndexByte(s, '.'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	return s
}

// ---------------------------------------------------------------- list

// ListPage lists the DLQs.
type ListPage struct {
	loadingPage
	dlqs []redrive.DLQ
}

type listMsg struct{ dlqs []redrive.DLQ }

// NewListPage builds the ":dlq" page.
func NewListPage(env tui.PageEnv) tui.Page {
	p := &ListPage{loadingPage: loadingPage{loading: true, tablePage: newTablePage(env, 1, []table.Column{
		{Title: "DLQ", Width: 20, Flex: 2},
		{Title: "DEPTH", Width: 6, Right: true, Numeric: true},
		{Title: "RECORDS", Width: 7, Right: true, Numeric: true, Drop: 2},
		{Title: "OLDEST", Width: 7, Right: true, Numeric: true},
		{Title: "CLASSES", Width: 7, Right: true, Numeric: true},
		{Title: "ORIGINAL TOPICS", Width: 16, Flex: 1, Drop: 1},
	})}}
	p.tbl.SetEmpty("no dead-letter topics (*.DLT, *-dlt, *.dlq, *-dlq, *.DLQ, or redrive.dlqs)")
	p.tbl.SetSort(1, true) // deepest first: the DLQs someone must look at
	p.fitToConsole()
	return p
}

func (p *ListPage) load() tea.Cmd {
	p.loading = true
	return do(p.env, func(ctx context.Context, s Service) tea.Msg {
		ds, err := s.List(ctx)
		if err != nil {
			return errMsg{err}
		}
		return listMsg{ds}
	})
}

func (p *ListPage) Init() tea.Cmd              { return p.load() }
func (p *ListPage) Title() string              { return "dead-letter queues" }
func (p *ListPage) KeyBindings() []key.Binding { return p.bindings(keyOpen, keyReload) }

func (p *ListPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	if msg, ok := msg.(listMsg); ok {
		p.loaded()
		p.dlqs = msg.dlqs
		rows := make([]table.Row, len(msg.dlqs))
		for i, d := range msg.dlqs {
			classes := fmt.Sprint(d.Classes)
			if d.Sampled {
				classes += "+"
			}
			oldest := "-"
			if d.OldestAt != nil {
				oldest = durations.Format(d.OldestAge)
			}
			r := table.Row{ID: d.Name, Cells: []string{sanitize.Text(d.Name), fmt.Sprint(d.Depth), fmt.Sprint(d.Records), oldest, classes, sanitize.Text(strings.Join(d.Originals, ","))},
				Nums: []float64{0, float64(d.Depth), float64(d.Records), d.OldestAge.Seconds(), float64(d.Classes)}}
			if d.Depth > 0 {
				r.Level = styles.Warn // someone owns a non-empty DLQ
			}
			rows[i] = r
		}
		p.tbl.SetRows(rows)
	}
	return p, p.update(msg, func(msg tea.KeyMsg) (tea.Cmd, bool) {
		return p.listKey(msg, p.load, func(name string) tea.Cmd {
			return tui.Push(func(env tui.PageEnv) tui.Page { return NewClassesPage(env, name) })
		})
	})
}

func (p *ListPage) View() string {
	return p.listView("reading dead-letter queues…", fmt.Sprintf("%d dead-letter queue(s) · enter: classes · u: reload", len(p.dlqs)))
}

// ---------------------------------------------------------------- session

// session is one DLQ's loaded records and the selection being built, shared
// by the classes, records and record pages opened from it.
type session struct {
	dlq    string
	loaded actions.Loaded
	picks[redrive.Coord]
	effects
}

func (s *session) selected() int {
	n := 0
	for _, r := range s.loaded.Records {
		if s.has(r.Class, r.Coord()) {
			n++
		}
	}
	return n
}

func (s *session) request() actions.PlanRequest {
	req := actions.PlanRequest{DLQ: s.dlq, AllowHazards: s.hazards}
	for c := range s.classes {
		req.Classes = append(req.Classes, c)
	}
	sort.Strings(req.Classes)
	classOf := make(map[redrive.Coord]string, len(s.loaded.Records))
	for _, r := range s.loaded.Records {
		classOf[r.Coord()] = r.Class
	}
	for c := range s.items {
		if !s.classes[classOf[c]] {
			req.Offsets = append(req.Offsets, c)
		}
	}
	sort.Slice(req.Offsets, func(i, j int) bool {
		a, b := req.Offsets[i], req.Offsets[j]
		return a.Partition < b.Partition || a.Partition == b.Partition && a.Offset < b.Offset
	})
	return req
}

// planCmd pushes the plan page for the selection.
func planCmd(s *session) tea.Cmd {
	req := s.request()
	if len(req.Classes) == 0 && len(req.Offsets) == 0 {
		return tui.Flash(tui.Error, "select records first (x on a class or a record): a plan never takes everything implicitly")
	}
	return tui.Push(func(env tui.PageEnv) tui.Page { return NewPlanPage(env, req) })
}

// ---------------------------------------------------------------- classes

// ClassesPage shows one DLQ's failure classes.
type ClassesPage struct {
	loadingPage
	s *session
}

type loadedMsg struct{ l actions.Loaded }

// NewClassesPage builds the classes page for a DLQ.
func NewClassesPage(env tui.PageEnv, dlq string) *ClassesPage {
	p := &ClassesPage{s: &session{dlq: dlq, picks: newPicks[redrive.Coord]()}}
	p.loadingPage = loadingPage{loading: true, tablePage: newTablePage(env, 3, classColumns(kafkaClassTitles))}
	p.tbl.SetEmpty("no pending records")
	p.tbl.SetSort(colClassCount, true) // biggest class first
	p.fitToConsole()
	return p
}

// isDLQ reports whether a topic is a DLQ by name or by the config's pairs.
func isDLQ(topic string, cfg *config.Config) bool {
	if redrive.IsDLQName(topic) {
		return true
	}
	if cfg != nil {
		for _, d := range cfg.Redrive.DLQs {
			if d.DLQ == topic {
				return true
			}
		}
	}
	return false
}

func (p *ClassesPage) Init() tea.Cmd {
	dlq := p.s.dlq
	if !isDLQ(dlq, p.env.Config) {
		return func() tea.Msg {
			return errMsg{fmt.Errorf("%s is not a dead-letter topic (names *.DLT, *-dlt, *.dlq, *-dlq, *.DLQ, or redrive.dlqs in the config)", dlq)}
		}
	}
	return do(p.env, func(ctx context.Context, s Service) tea.Msg {
		l, err := s.Load(ctx, dlq)
		if err != nil {
			return errMsg{err}
		}
		return loadedMsg{l}
	})
}

func (p *ClassesPage) Title() string { return sanitize.Text(p.s.dlq) + " · classes" }
func (p *ClassesPage) KeyBindings() []key.Binding {
	return p.bindings(keyOpen, keyAll, keySelect, keyPlan, keyHazard)
}

func (p *ClassesPage) rows() {
	now := time.Now()
	applied := p.s.byClass
	rows := make([]table.Row, len(p.s.loaded.Classes))
	for i, c := range p.s.loaded.Classes {
		sel := ""
		if p.s.classes[c.ID] {
			sel = "●"
		}
		age := now.Sub(c.LastSeen)
		rows[i] = classRow(c, sel, durations.Format(age), age.Seconds(), applied[c.ID])
	}
	p.tbl.SetRows(rows)
}

// probeApplied asks the system of record about the pending records.
func (p *ClassesPage) probeApplied() tea.Cmd {
	keys := make([]keyed, len(p.s.loaded.Pending))
	for i, r := range p.s.loaded.Pending {
		keys[i] = keyed{r.Class, r.IdempotencyKey}
	}
	dlq := p.s.dlq
	return p.s.probe(keys, func(ask func(ctx context.Context, a Applier) tea.Msg) tea.Cmd {
		return do(p.env, func(ctx context.Context, s Service) tea.Msg {
			if a, ok := s.(Applier); ok {
				return ask(ctx, a)
			}
			return nil
		})
	}, dlq)
}

func (p *ClassesPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	switch msg := msg.(type) {
	case loadedMsg:
		p.loaded()
		p.s.loaded = msg.l
		p.rows()
		return p, p.probeApplied()
	case appliedMsg:
		p.s.answered(msg, "pending record(s)")
		p.rows()
		return p, nil
	}
	return p, p.update(msg, func(msg tea.KeyMsg) (tea.Cmd, bool) {
		return p.s.pickKey(msg, p.tbl, pickKeys{
			open: func(row table.Row) tea.Cmd {
				return tui.Push(func(env tui.PageEnv) tui.Page { return NewRecordsPage(env, p.s, row.ID) })
			},
			all: func() tea.Cmd {
				return tui.Push(func(env tui.PageEnv) tui.Page { return NewRecordsPage(env, p.s, "") })
			},
			toggle: func(row table.Row) { p.s.toggleClass(row.ID); p.rows() },
			plan:   func() tea.Cmd { return planCmd(p.s) },
		})
	})
}

func (p *ClassesPage) View() string {
	l := p.s.loaded
	head := fmt.Sprintf("%s: %d records, %d pending, %d classes", sanitize.Text(p.s.dlq), l.Total, len(l.Pending), len(l.Classes))
	if !l.Complete && !p.loading {
		head += " (first records only)"
	}
	switch {
	case p.loading:
		head = "reading " + sanitize.Text(p.s.dlq) + "…"
	case p.err != "":
		head = "error: " + sanitize.Text(p.err)
	}
	// The system of record's answer has a line of its own: at 80 columns
	// it would be cut at the end of the header.
	return p.render(head, sanitize.Text(p.s.note), p.s.selectionLine())
}

func (s *session) selectionLine() string { return s.line(s.selected(), "record(s)") }

// ---------------------------------------------------------------- records

// RecordsPage lists a DLQ's records (one class, or all).
type RecordsPage struct {
	tablePage
	s     *session
	class string
}

// NewRecordsPage lists the records of class ("" for all) in a session.
func NewRecordsPage(env tui.PageEnv, s *session, class string) *RecordsPage {
	p := &RecordsPage{s: s, class: class, tablePage: newTablePage(env, 2, []table.Column{
		{Title: "SEL", Width: 3},
		{Title: "P:OFFSET", Width: 8},
		{Title: "STATE", Width: 8},
		{Title: "KEY", Width: 14, Flex: 1},
		{Title: "EVENT", Width: 16, Flex: 1, Drop: 2},
		{Title: "IDEMPOTENCY KEY", Width: 16, Flex: 1, Drop: 1},
		{Title: "CLASS", Width: 24, Flex: 1, Drop: 3},
	})}
	p.fitToConsole()
	p.rows()
	return p
}

func coordID(c redrive.Coord) string { return fmt.Sprintf("%d:%d", c.Partition, c.Offset) }

func keyText(r redrive.Parsed) string {
	switch {
	case r.KeyNull:
		return "(null)"
	case sanitize.IsBinary(r.Key):
		return fmt.Sprintf("hex:%x", r.Key)
	}
	return sanitize.Bytes(r.Key)
}

func (p *RecordsPage) rows() {
	labels := classLabels(p.s.loaded.Classes)
	var rows []table.Row
	for _, r := range p.s.loaded.Records {
		if p.class != "" && r.Class != p.class {
			continue
		}
		sel := ""
		if p.s.has(r.Class, r.Coord()) {
			sel = "●"
		}
		state := "pending"
		if p.s.loaded.Ledger.Done(r.Coord()) {
			state = "redriven"
		}
		rows = append(rows, table.Row{ID: coordID(r.Coord()), Cells: []string{sel, coordID(r.Coord()), state, keyText(r),
			sanitize.Text(r.EventID), sanitize.Text(r.IdempotencyKey), sanitize.Text(labels.of(r.Class))}})
	}
	p.tbl.SetRows(rows)
}

func (p *RecordsPage) record(id string) (redrive.Parsed, bool) {
	for _, r := range p.s.loaded.Records {
		if coordID(r.Coord()) == id {
			return r, true
		}
	}
	return redrive.Parsed{}, false
}

// view opens the record viewer on the record with this row id; n and p
// step through the records of the list in its order on screen.
func (p *RecordsPage) view(id string) tea.Cmd {
	labels := classLabels(p.s.loaded.Classes)
	byID := make(map[string]redrive.Parsed, len(p.s.loaded.Records))
	for _, r := range p.s.loaded.Records {
		byID[coordID(r.Coord())] = r
	}
	return openViewer(p.tbl, byID, id, classTitle(p.s.dlq, p.class, "records"), func(r redrive.Parsed) record.Record {
		return dlqRecord(p.s.dlq, r, p.s.loaded.Ledger.Done(r.Coord()), labels.of(r.Class), p.s.applied)
	})
}

func (p *RecordsPage) Init() tea.Cmd { return nil }
func (p *RecordsPage) Title() string { return classTitle(p.s.dlq, p.class, "records") }
func (p *RecordsPage) KeyBindings() []key.Binding {
	return p.bindings(keyOpen, keySelect, keyPlan, keyHazard)
}

func (p *RecordsPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	return p, p.update(msg, func(msg tea.KeyMsg) (tea.Cmd, bool) {
		return p.s.pickKey(msg, p.tbl, pickKeys{
			open: func(row table.Row) tea.Cmd {
				return p.view(row.ID)
			},
			toggle: func(row table.Row) {
				r, found := p.record(row.ID)
				if !found {
					return
				}
				// The other records of its class, selected as single
				// records if this one is taken out of a selected class.
				var others []redrive.Coord
				for _, o := range p.s.loaded.Records {
					if o.Class == r.Class && o.Coord() != r.Coord() {
						others = append(others, o.Coord())
					}
				}
				p.s.toggleItem(r.Class, r.Coord(), others)
				p.rows()
				p.tbl.Select(row.ID)
			},
			plan: func() tea.Cmd { return planCmd(p.s) },
		})
	})
}

func (p *RecordsPage) View() string {
	return p.render(fmt.Sprintf("%d record(s) · enter: headers and payload", p.tbl.Len()), p.s.selectionLine())
}
