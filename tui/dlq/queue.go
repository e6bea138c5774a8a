package dlq

// The dead-letter pages on a RabbitMQ context: the same workflow as the
// Kafka pages (DLQs → classes → messages → a plan → :plans → approve →
// execute), over a QueueService that cmd/berth builds from the same
// functions `berth dlq` and `berth redrive` use on RabbitMQ. Everything here
// is plain data: no AMQP type reaches tui/. The app opens these pages for
// ":dlq" and ":plans" on a RabbitMQ context (tui.queueCounterparts).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

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

// QueueService is what the RabbitMQ dead-letter pages need. Every method
// does I/O: the pages call it through env.Do (or a goroutine for Execute),
// never from Update.
type QueueService interface {
	// DLQs lists the dead-letter queues (wiring and redrive.dlqs) with
	// depth and head age; it reads no message.
	DLQs(ctx context.Context) ([]QueueDLQ, error)
	// Browse reads a DLQ as `berth dlq classes/show` do (never losing,
	// dead-lettering or reordering a message). A browse that would have
	// side effects the operator has not accepted fails with a
	// *BrowseRefusal saying why.
	Browse(ctx context.Context, dlq string, accept bool) (QueueBrowse, error)
	// Plan makes a checked plan as `berth redrive plan` does, stores it in
	// the redrive store (not in a read-only context) and audits it.
	Plan(ctx context.Context, req QueuePlanRequest) (QueuePlan, error)
	// Status lists the stored plans as `berth redrive status` does.
	Status(ctx context.Context, readOnly bool) ([]QueuePlanStatus, error)
	// PlanStatus is Status for one plan (hash or 8+ digit prefix).
	PlanStatus(ctx context.Context, hash string, readOnly bool) (QueuePlanStatus, error)
	// Approve stores an approval as `berth redrive approve` does (refused,
	// storing nothing, in a read-only context, for the author, for a key
	// outside allowed_signers), audited redrive.approved.
	Approve(ctx context.Context, hash string, sig approval.Signature, readOnly bool) (Approved, error)
	// SignAsAuthor stores the author's signature over a plan made in the
	// console, as `redrive plan --key` does in one step.
	SignAsAuthor(ctx context.Context, hash string, sig approval.Signature, readOnly bool) error
	// DryRun is `berth redrive execute` without --yes: the preflight
	// (refusals audited, as the command audits them) and what would be sent
	// and skipped now.
	DryRun(ctx context.Context, hash string, readOnly bool) (QueueDryRun, error)
	// Execute is `berth redrive execute --yes`: it blocks until the run
	// ends (or is cancelled through req.Cancel / paused through req.Pause).
	Execute(ctx context.Context, hash string, req QueueExecRequest) (QueueResult, error)
}

// QueueOpener builds a QueueService on the attached RabbitMQ context; the
// console's builder hands it in as PageEnv.Services[QueueServiceName].
type QueueOpener = func(c backends.Cluster, cfg *config.Config, contextName string) (QueueService, error)

var errNoQueueService = errors.New("RabbitMQ dead-letter pages are not available in this build")

// QueueDLQ is one dead-letter queue in the list.
type QueueDLQ struct {
	Name, Vhost, Type string
	Found             string // wiring or config
	Originals         []string
	Depth             *int64 // nil when unknown
	HeadAge           *time.Duration
	// OtherVhost: the DLQ is in a vhost other than the context's (its
	// AMQP URL's): it is listed, but reading and redriving it needs a
	// context for that vhost.
	OtherVhost bool
}

// BrowseRefusal is a browse the backend will not make as asked: Why says
// what it would do to the queue; CanAccept is set when reading anyway,
// accepting that, is possible (a quorum DLQ without delivery limit).
type BrowseRefusal struct {
	Why       string
	CanAccept bool
}

func (r *BrowseRefusal) Error() string { return r.Why }

// QueueBrowse is what a browse read.
type QueueBrowse struct {
	DLQ, Vhost, Type string
	Method           string
	Complete         bool
	Limit            int
	SideEffects      []string
	// Unseen says what the browse could not see (messages other consumers
	// held unacknowledged), "" when nothing.
	Unseen      string
	Classes     []redrive.Class // OriginalTopic is the original queue, Exception the death reason
	Messages    []QueueMessage
	OldestDeath *time.Time
}

// QueueMessage is one DLQ message, raw (the pages sanitise it).
type QueueMessage struct {
	Position                              int
	MessageID, CorrelationID, ContentType string
	EventID, EventIDSource                string
	IdempotencyKey, OrderingKey           string
	Class, OriginalQueue, Reason, Error   string
	PublisherTimestamp                    *time.Time
	Deaths                                []QueueDeath
	FirstDeathQueue, FirstDeathReason     string
	FirstDeathExchange                    string
	DeliveryCount                         *int64
	Malformed                             []string
	Redelivered                           bool
	PriorRedrives                         int
	Redriven                              bool // the ledger has the event confirmed
	Headers                               []QueueHeader
	Body                                  []byte
	Exchange, RoutingKey                  string // where a redrive sends it (most recent death)
}

// QueueDeath is one x-death entry.
type QueueDeath struct {
	Reason, Queue, Exchange string
	RoutingKeys             []string
	Count                   int64
	Time                    *time.Time
}

// QueueHeader is one header (x-death excluded: it is shown parsed).
type QueueHeader struct {
	Key   string
	Value []byte
}

// QueuePlanRequest is a selection made on the pages.
type QueuePlanRequest struct {
	DLQ          string
	Classes      []string
	EventIDs     []string
	AllowHazards bool
	// Accept: the operator accepted the quorum browse side effects.
	Accept   bool
	ReadOnly bool
}

// QueuePlan is a RabbitMQ plan as the pages show it.
type QueuePlan struct {
	// Cluster is the cluster the plan is bound to (its signatures cover it).
	Cluster                             string
	Hash, DLQ, Vhost, QueueType, Target string
	Author, AuthorKey                   string
	CreatedAt                           time.Time
	Stored                              bool
	StoreNote                           string
	Blocked                             bool
	BlockedReason                       string
	Policy                              redrive.PolicySnapshot
	Rate, Window                        int
	Accept                              bool
	Records                             []QueuePlanRecord
	Totals                              redrive.Totals
	// Review is what a reviewer signs, derived from the messages: counts
	// per target, the included messages' idempotency keys (Derived: they
	// were read from the messages), and the event ids whose message
	// changed or is gone (execute skips them).
	Review QueueReview
	// Notes are what the browse said (method, side effects) and any
	// warning (the audit log).
	Notes []string
}

// QueueReview is a RabbitMQ plan's review (actions.RabbitSummary).
type QueueReview struct {
	Targets       []actions.TargetCount
	Keys          []string
	Derived       bool
	Changed, Gone []string
	// NotVisible were not found while other consumers held messages of
	// the DLQ unacknowledged; Unseen says so in one line (raw: the page
	// sanitises).
	NotVisible []string
	Unseen     string
	// AlreadySent counts the messages not found that this plan sent (the
	// ledger has them confirmed).
	AlreadySent int
	// Warnings name each permanent class the plan includes, judged from
	// the messages read (raw: the page sanitises).
	Warnings []string
}

// QueuePlanRecord is one selected message and its verdict.
type QueuePlanRecord struct {
	Position                          int
	EventID, Class                    string
	OriginalQueue, DeathReason        string
	Exchange, RoutingKey, OrderingKey string
	Included                          bool
	Reason                            redrive.Reason
	Detail                            string
	HazardPosition                    *int
}

// QueuePlanStatus is a stored plan with `berth redrive status`'s view.
type QueuePlanStatus struct {
	Plan                     QueuePlan
	Redriven, Intent, Failed int
	Approvals, Required      int
	Approved                 bool
	Reason, State, Policy    string
	Signatures               []SignatureInfo
	Refusal                  string // why executing now is refused ("" when it may run)
	// States is the ledger's state per event id (intent, confirmed,
	// failed) for this plan.
	States map[string]string
}

// QueueDryRun is the preflight of an execution.
type QueueDryRun struct {
	WouldSend int
	Totals    redrive.Totals
	Skipped   []QueueSkip
	Approvers []string
}

// QueueSkip is an included message that would not (or was not) sent.
type QueueSkip struct {
	EventID  string
	Position int
	Reason   redrive.Reason
	Detail   string
}

// QueueFailure is a message that could not be redriven (it stays).
type QueueFailure struct{ EventID, Exchange, RoutingKey, Error string }

// QueueProgress is what a run reports once it starts, after each settled
// chunk and once more at its end (actions.RabbitExecOptions.Progress):
// the plan's included records and rate limit, and the run's result so
// far. The page counts it as `berth redrive execute` does
// (actions.RabbitProgress): records skipped before the run, sent by an
// earlier run or gone are settled too.
type QueueProgress struct {
	Included, Rate int
	Result         actions.RabbitResult
}

// QueueExecRequest is how the console runs a plan.
type QueueExecRequest struct {
	ReadOnly bool
	Progress func(QueueProgress)
	// Pause blocks while the run is paused; false stops it.
	Pause  func(ctx context.Context) bool
	Cancel <-chan struct{}
}

// QueueResult is what an execution did.
type QueueResult struct {
	Sent, Resent, AlreadySent, Excluded, Returned, Passed int
	Skipped                                               []QueueSkip
	Failed                                                []QueueFailure
	NotFound                                              []string
	Stopped                                               string
	Cancelled                                             bool
	Approvers                                             []string
	Verification                                          *QueueVerification
	Warnings                                              []string
}

// QueueVerification is the DLQ's depth after a run.
type QueueVerification struct {
	Before, After   int64
	Acked, Returned int
	OK              bool
	Problem         string
}

// ExecRefusal is an execution refused before anything was sent.
type ExecRefusal struct{ Reason string }

func (r *ExecRefusal) Error() string { return r.Reason }

// doQueues runs fn with the QueueService off the UI goroutine.
func doQueues(env tui.PageEnv, onErr func(error) tea.Msg, fn func(ctx context.Context, s QueueService) tea.Msg) tea.Cmd {
	return doWith(env, QueueServiceName, errNoQueueService, onErr, fn)
}

func errOf(err error) tea.Msg { return errMsg{err} }

func init() {
	tui.RegisterPageSpec(tui.PageSpec{Name: "queue-dlq", Help: "RabbitMQ dead-letter queues: depth, classes, messages; select into a redrive plan", Factory: newQueueDLQPage})
	tui.RegisterPageSpec(tui.PageSpec{Name: "queue-plans", Help: "RabbitMQ redrive plans in the redrive store", Factory: NewQueuePlansPage})
}

// newQueueDLQPage is ":dlq" on RabbitMQ: the list, or with an argument
// (":dlq NAME", D on a queue page) that DLQ's classes.
func newQueueDLQPage(env tui.PageEnv) tui.Page {
	if len(env.Args) > 0 && env.Args[0] != "" {
		return NewQueueClassesPage(env, env.Args[0])
	}
	return NewQueueListPage(env)
}

// classCounts remembers, per DLQ, the classes read in this console: the
// list reads no message (a browse marks messages redelivered and holds a
// classic queue for a moment), so it shows what was read when opened.
var classCounts = struct {
	sync.Mutex
	m map[string]queueSeen
}{m: map[string]queueSeen{}}

type queueSeen struct {
	classes  int
	complete bool
	oldest   *time.Time
}

// ---------------------------------------------------------------- list

// QueueListPage lists the RabbitMQ DLQs.
type QueueListPage struct {
	loadingPage
	dlqs []QueueDLQ
}

type queueListMsg struct{ dlqs []QueueDLQ }

// NewQueueListPage builds ":dlq" on a RabbitMQ context.
func NewQueueListPage(env tui.PageEnv) tui.Page {
	p := &QueueListPage{loadingPage: loadingPage{loading: true, tablePage: newTablePage(env, 1, []table.Column{
		{Title: "DLQ", Width: 20, Flex: 2},
		{Title: "VHOST", Width: 6, Drop: 3},
		{Title: "TYPE", Width: 7, Drop: 2},
		{Title: "DEPTH", Width: 6, Right: true, Numeric: true},
		{Title: "HEAD AGE", Width: 8, Right: true, Numeric: true},
		{Title: "OLDEST DEATH", Width: 12, Right: true, Numeric: true, Drop: 4},
		{Title: "CLASSES", Width: 7, Right: true, Numeric: true},
		{Title: "ORIGINAL QUEUES", Width: 16, Flex: 1, Drop: 1},
	})}}
	p.tbl.SetEmpty("no dead-letter queues (none is wired as a dead-letter target, and redrive.dlqs names none)")
	p.tbl.SetSort(3, true)
	p.fitToConsole()
	return p
}

func (p *QueueListPage) load() tea.Cmd {
	p.loading = true
	return doQueues(p.env, errOf, func(ctx context.Context, s QueueService) tea.Msg {
		ds, err := s.DLQs(ctx)
		if err != nil {
			return errMsg{err}
		}
		return queueListMsg{ds}
	})
}

func (p *QueueListPage) Init() tea.Cmd              { return p.load() }
func (p *QueueListPage) Title() string              { return "dead-letter queues" }
func (p *QueueListPage) KeyBindings() []key.Binding { return p.bindings(keyOpen, keyReload) }

func (p *QueueListPage) rows() {
	now := time.Now()
	rows := make([]table.Row, len(p.dlqs))
	for i, d := range p.dlqs {
		depth, depthN := "?", -1.0
		if d.Depth != nil {
			depth, depthN = fmt.Sprint(*d.Depth), float64(*d.Depth)
		}
		age, ageN := "?", -1.0
		if d.HeadAge != nil {
			age, ageN = durations.Format(*d.HeadAge), d.HeadAge.Seconds()
		}
		classes, oldest, oldestN := "enter", "?", -1.0
		classCounts.Lock()
		seen, ok := classCounts.m[d.Vhost+"\x00"+d.Name]
		classCounts.Unlock()
		if ok {
			classes = fmt.Sprint(seen.classes)
			if !seen.complete {
				classes += "+"
			}
			if seen.oldest != nil {
				oldest, oldestN = durations.Format(now.Sub(*seen.oldest)), now.Sub(*seen.oldest).Seconds()
			} else {
				oldest = "-"
			}
		}
		id := d.Name
		if d.OtherVhost {
			id = d.Vhost + "\x00" + d.Name // never the same row as a local DLQ of that name
		}
		r := table.Row{ID: id, Cells: []string{sanitize.Text(d.Name), sanitize.Text(d.Vhost), sanitize.Text(dash(d.Type)), depth, age, oldest, classes, sanitize.Text(strings.Join(d.Originals, ","))},
			Nums: []float64{0, 0, 0, depthN, ageN, oldestN, 0}}
		if d.Depth != nil && *d.Depth > 0 {
			r.Level = styles.Warn
		}
		rows[i] = r
	}
	p.tbl.SetRows(rows)
}

func (p *QueueListPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	if msg, ok := msg.(queueListMsg); ok {
		p.loaded()
		p.dlqs = msg.dlqs
		p.rows()
	}
	return p, p.update(msg, func(msg tea.KeyMsg) (tea.Cmd, bool) { return p.listKey(msg, p.load, p.open) })
}

// open reads the classes of the DLQ named id; one in another vhost (its
// id is vhost NUL name) cannot be read on this context.
func (p *QueueListPage) open(id string) tea.Cmd {
	for _, d := range p.dlqs {
		if d.OtherVhost && d.Vhost+"\x00"+d.Name == id {
			return tui.Flash(tui.Error, fmt.Sprintf("%s is in vhost %s: attach a context whose AMQP URL names that vhost to read it", sanitize.Text(d.Name), sanitize.Text(d.Vhost)))
		}
	}
	return tui.Push(func(env tui.PageEnv) tui.Page { return NewQueueClassesPage(env, id) })
}

func (p *QueueListPage) View() string {
	return p.listView("finding dead-letter queues (dead-letter exchange wiring, redrive.dlqs)…", fmt.Sprintf("%d dead-letter queue(s) · enter: read its classes (a browse: nothing lost or reordered) · u: reload", len(p.dlqs)))
}

// ---------------------------------------------------------------- session

// queueSession is one DLQ's browse and the selection being built.
type queueSession struct {
	dlq    string
	accept bool // quorum side effects accepted
	read   QueueBrowse
	// picks holds single messages by event id.
	picks[string]
	effects
}

func (s *queueSession) chosen(m QueueMessage) bool { return s.has(m.Class, m.EventID) }

func (s *queueSession) selected() int {
	n := 0
	for _, m := range s.read.Messages {
		if s.chosen(m) {
			n++
		}
	}
	return n
}

// request is the selection as a plan request. rabbitmq.Selection requires
// every criterion, so a mix of whole classes and single messages is sent
// as the event ids of the messages read (exactly what the operator saw).
func (s *queueSession) request(readOnly bool) QueuePlanRequest {
	req := QueuePlanRequest{DLQ: s.dlq, AllowHazards: s.hazards, Accept: s.accept, ReadOnly: readOnly}
	if len(s.items) == 0 {
		for c := range s.classes {
			req.Classes = append(req.Classes, c)
		}
		sort.Strings(req.Classes)
		return req
	}
	seen := map[string]bool{}
	for _, m := range s.read.Messages {
		if s.chosen(m) && !seen[m.EventID] {
			seen[m.EventID] = true
			req.EventIDs = append(req.EventIDs, m.EventID)
		}
	}
	return req
}

func queuePlanCmd(env tui.PageEnv, s *queueSession) tea.Cmd {
	req := s.request(env.ReadOnly)
	if len(req.Classes) == 0 && len(req.EventIDs) == 0 {
		return tui.Flash(tui.Error, "select messages first (x on a class or a message): a plan never takes everything implicitly")
	}
	return tui.Push(func(env tui.PageEnv) tui.Page { return NewQueuePlanPage(env, req) })
}

func (s *queueSession) selectionLine() string { return s.line(s.selected(), "message(s)") }

// ---------------------------------------------------------------- classes

// QueueClassesPage reads a DLQ and shows its classes: original queue ×
// death reason × error pattern.
type QueueClassesPage struct {
	loadingPage
	s *queueSession
	// ask is set when the browse was refused and can be made accepting
	// its side effects: the page says why and asks (y).
	ask *BrowseRefusal
}

type browsedMsg struct{ b QueueBrowse }

var keyAccept = binding("y", "read anyway, accepting the side effects")

// NewQueueClassesPage builds the classes page of a RabbitMQ DLQ.
func NewQueueClassesPage(env tui.PageEnv, dlq string) *QueueClassesPage {
	p := &QueueClassesPage{s: &queueSession{dlq: dlq, picks: newPicks[string]()}}
	p.loadingPage = loadingPage{loading: true, tablePage: newTablePage(env, 5, classColumns(queueClassTitles))}
	p.tbl.SetEmpty("no messages")
	p.tbl.SetSort(colClassCount, true)
	p.fitToConsole()
	return p
}

func (p *QueueClassesPage) browse() tea.Cmd {
	p.loading, p.ask, p.err = true, nil, ""
	dlq, accept := p.s.dlq, p.s.accept
	return doQueues(p.env, errOf, func(ctx context.Context, s QueueService) tea.Msg {
		b, err := s.Browse(ctx, dlq, accept)
		if err != nil {
			return errMsg{err}
		}
		return browsedMsg{b}
	})
}

func (p *QueueClassesPage) Init() tea.Cmd { return p.browse() }

// probeApplied asks the system of record about the messages read.
func (p *QueueClassesPage) probeApplied() tea.Cmd {
	keys := make([]keyed, len(p.s.read.Messages))
	for i, m := range p.s.read.Messages {
		keys[i] = keyed{m.Class, m.IdempotencyKey}
	}
	return p.s.probe(keys, func(ask func(ctx context.Context, a Applier) tea.Msg) tea.Cmd {
		return doQueues(p.env, errOf, func(ctx context.Context, s QueueService) tea.Msg {
			if a, ok := s.(Applier); ok {
				return ask(ctx, a)
			}
			return nil
		})
	}, p.s.dlq)
}
func (p *QueueClassesPage) Title() string { return sanitize.Text(p.s.dlq) + " · classes" }
func (p *QueueClassesPage) KeyBindings() []key.Binding {
	return p.bindings(keyOpen, keyAll, keySelect, keyPlan, keyHazard, keyReload, keyAccept)
}
func (p *QueueClassesPage) CapturesKey(msg tea.KeyMsg) bool {
	if p.ask != nil && msg.String() == "y" {
		return true
	}
	return p.tbl.CapturesKey(msg)
}

func (p *QueueClassesPage) rows() {
	now := time.Now()
	rows := make([]table.Row, len(p.s.read.Classes))
	for i, c := range p.s.read.Classes {
		sel := ""
		if p.s.classes[c.ID] {
			sel = "●"
		}
		last, lastN := "?", -1.0
		if !c.LastSeen.IsZero() {
			last, lastN = durations.Format(now.Sub(c.LastSeen)), now.Sub(c.LastSeen).Seconds()
		}
		rows[i] = classRow(c, sel, last, lastN, p.s.byClass[c.ID])
	}
	p.tbl.SetRows(rows)
}

func (p *QueueClassesPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	switch msg := msg.(type) {
	case browsedMsg:
		p.loaded()
		p.s.read = msg.b
		// A new read: selected single messages may be gone.
		p.s.items = map[string]bool{}
		p.rows()
		classCounts.Lock()
		classCounts.m[msg.b.Vhost+"\x00"+p.s.dlq] = queueSeen{classes: len(msg.b.Classes), complete: msg.b.Complete, oldest: msg.b.OldestDeath}
		classCounts.Unlock()
		return p, p.probeApplied()
	case appliedMsg:
		p.s.answered(msg, "message(s)")
		p.rows()
		return p, nil
	case errMsg:
		// A refused browse asks (y) instead of failing.
		var ref *BrowseRefusal
		if errors.As(msg.err, &ref) {
			p.loading, p.ask, p.err = false, ref, ""
			return p, nil
		}
	}
	return p, p.update(msg, p.key)
}

func (p *QueueClassesPage) key(msg tea.KeyMsg) (tea.Cmd, bool) {
	if p.ask != nil {
		// Only y, u and leaving the page while the browse is refused.
		if key.Matches(msg, keyAccept) && p.ask.CanAccept {
			p.s.accept = true
			return p.browse(), true
		}
		if key.Matches(msg, keyReload) {
			return p.browse(), true
		}
		return nil, msg.String() != "esc" && msg.String() != "q"
	}
	if p.loading {
		return nil, false
	}
	return p.s.pickKey(msg, p.tbl, pickKeys{
		open: func(row table.Row) tea.Cmd {
			return tui.Push(func(env tui.PageEnv) tui.Page { return NewQueueMessagesPage(env, p.s, row.ID) })
		},
		all: func() tea.Cmd {
			return tui.Push(func(env tui.PageEnv) tui.Page { return NewQueueMessagesPage(env, p.s, "") })
		},
		toggle: func(row table.Row) { p.s.toggleClass(row.ID); p.rows(); p.tbl.Select(row.ID) },
		plan:   func() tea.Cmd { return queuePlanCmd(p.env, p.s) },
		reload: p.browse,
	})
}

// readLines say how the messages were read and what it left behind.
func readLines(b QueueBrowse) []string {
	line := fmt.Sprintf("read %d message(s) by %s", len(b.Messages), b.Method)
	if !b.Complete {
		line += fmt.Sprintf(" (the first %d only: more remain)", b.Limit)
	}
	out := []string{sanitize.Text(line)}
	if len(b.SideEffects) > 0 {
		out = append(out, "side effects: "+sanitize.Text(strings.Join(b.SideEffects, "; ")))
	}
	if b.Unseen != "" {
		out = append(out, "note: "+sanitize.Text(b.Unseen))
	}
	return out
}

func (p *QueueClassesPage) View() string {
	b := p.s.read
	switch {
	case p.ask != nil:
		lines := []string{"cannot read " + sanitize.Text(p.s.dlq) + " without side effects:", "  " + sanitize.Text(p.ask.Why)}
		if p.ask.CanAccept {
			lines = append(lines, "", "y: read it anyway, accepting that (plans made from this read accept it too) · u: ask again · esc: back")
		} else {
			lines = append(lines, "", "no safe way to read this queue from the console now (u: ask again · esc: back)")
		}
		return body(lines, p.w, p.h)
	case p.loading:
		return body([]string{"reading " + sanitize.Text(p.s.dlq) + " (a browse: nothing is lost, dead-lettered or reordered)…"}, p.w, p.h)
	case p.err != "":
		return body([]string{"error: " + sanitize.Text(p.err)}, p.w, p.h)
	}
	head := fmt.Sprintf("%s (%s, vhost %s): %d message(s) read, %d class(es)", sanitize.Text(p.s.dlq), sanitize.Text(dash(b.Type)), sanitize.Text(b.Vhost), len(b.Messages), len(b.Classes))
	if b.OldestDeath != nil {
		head += " · oldest death " + durations.Format(time.Since(*b.OldestDeath)) + " ago"
	}
	head += " · enter: messages · a: all messages"
	above := append([]string{head}, readLines(b)...)
	if p.s.note != "" {
		above = append(above, sanitize.Text(p.s.note))
	}
	for len(above) < 4 {
		above = append(above, "")
	}
	return p.render(append(above, p.s.selectionLine())...)
}

// ---------------------------------------------------------------- messages

// QueueMessagesPage lists a DLQ's messages (one class, or all).
type QueueMessagesPage struct {
	tablePage
	s     *queueSession
	class string
}

// NewQueueMessagesPage lists the messages of class ("" for all).
func NewQueueMessagesPage(env tui.PageEnv, s *queueSession, class string) *QueueMessagesPage {
	p := &QueueMessagesPage{s: s, class: class, tablePage: newTablePage(env, 2, []table.Column{
		{Title: "SEL", Width: 3},
		{Title: "POS", Width: 5, Right: true, Numeric: true},
		{Title: "STATE", Width: 8},
		{Title: "EVENT", Width: 16, Flex: 1},
		{Title: "REASON", Width: 10},
		{Title: "ORIGINAL QUEUE", Width: 14, Flex: 1, Drop: 2},
		{Title: "IDEMPOTENCY KEY", Width: 16, Flex: 1, Drop: 1},
		{Title: "CLASS", Width: 24, Flex: 1, Drop: 3},
	})}
	p.fitToConsole()
	p.rows()
	return p
}

func (p *QueueMessagesPage) rows() {
	labels := classLabels(p.s.read.Classes)
	var rows []table.Row
	for _, m := range p.s.read.Messages {
		if p.class != "" && m.Class != p.class {
			continue
		}
		sel := ""
		if p.s.chosen(m) {
			sel = "●"
		}
		state := "pending"
		if m.Redriven {
			state = "redriven"
		}
		rows = append(rows, table.Row{ID: fmt.Sprint(m.Position), Cells: []string{sel, fmt.Sprint(m.Position), state, sanitize.Text(m.EventID), sanitize.Text(m.Reason),
			sanitize.Text(m.OriginalQueue), sanitize.Text(m.IdempotencyKey), sanitize.Text(labels.of(m.Class))}, Nums: []float64{0, float64(m.Position)}})
	}
	p.tbl.SetRows(rows)
}

func (p *QueueMessagesPage) message(id string) (QueueMessage, bool) {
	for _, m := range p.s.read.Messages {
		if fmt.Sprint(m.Position) == id {
			return m, true
		}
	}
	return QueueMessage{}, false
}

// view opens the record viewer on the message with this row id; n and p
// step through the messages of the list in its order on screen.
func (p *QueueMessagesPage) view(id string) tea.Cmd {
	labels := classLabels(p.s.read.Classes)
	byID := make(map[string]QueueMessage, len(p.s.read.Messages))
	for _, m := range p.s.read.Messages {
		byID[fmt.Sprint(m.Position)] = m
	}
	return openViewer(p.tbl, byID, id, classTitle(p.s.dlq, p.class, "messages"), func(m QueueMessage) record.Record {
		return queueRecord(p.s.dlq, m, labels.of(m.Class), p.s.applied)
	})
}

func (p *QueueMessagesPage) Init() tea.Cmd { return nil }
func (p *QueueMessagesPage) Title() string { return classTitle(p.s.dlq, p.class, "messages") }
func (p *QueueMessagesPage) KeyBindings() []key.Binding {
	return p.bindings(keyOpen, keySelect, keyPlan, keyHazard)
}

func (p *QueueMessagesPage) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	return p, p.update(msg, func(msg tea.KeyMsg) (tea.Cmd, bool) {
		return p.s.pickKey(msg, p.tbl, pickKeys{
			open: func(row table.Row) tea.Cmd {
				return p.view(row.ID)
			},
			toggle: func(row table.Row) {
				m, found := p.message(row.ID)
				if !found {
					return
				}
				// The other messages of its class, selected one by one
				// if this one is taken out of a selected class.
				var others []string
				for _, o := range p.s.read.Messages {
					if o.Class == m.Class && o.EventID != m.EventID {
						others = append(others, o.EventID)
					}
				}
				p.s.toggleItem(m.Class, m.EventID, others)
				p.rows()
				p.tbl.Select(row.ID)
			},
			plan: func() tea.Cmd { return queuePlanCmd(p.env, p.s) },
		})
	})
}

func (p *QueueMessagesPage) View() string {
	return p.render(fmt.Sprintf("%d message(s) · enter: x-death, headers and body", p.tbl.Len()), p.s.selectionLine())
}
