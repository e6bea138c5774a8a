// Package tui is Berth's interactive console: a bubbletea program made of a
// root model (this file) that owns the page stack, global keys, the ":"
// command palette, help, the status line and the refresh loop, and of pages
// that own their data and messages: overview, topics, groups, members and
// brokers (Kafka), queues and queue (RabbitMQ), and those other packages
// register.
//
// Data flow: a Source, wired in cmd/berth (console.go: the Kafka backend and
// the monitor; console_rabbit.go: RabbitMQ), is refreshed by a tea.Cmd on a
// timer; results carry a generation and a sequence number, so a result from
// before a context switch or an older overlapping refresh is dropped. A
// failed refresh keeps the last good snapshot on screen, marks it stale in
// the status line and flashes the error. Update never blocks on I/O.
package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/internal/termbg"
	"github.com/berth-dev/berth/tui/keys"
	"github.com/berth-dev/berth/tui/styles"
)

// Options configure the console.
type Options struct {
	Config *config.Config
	// Context is the context to attach to first.
	Context string
	// ReadOnly and ReadOnlyReason describe the starting context.
	ReadOnly       bool
	ReadOnlyReason string
	// Dial attaches to a context (at start unless Source is set, and on :ctx).
	Dial Dialer
	// Source, when set, is already attached to Context.
	Source Source
	// Timeout bounds each backend operation.
	Timeout time.Duration
	// Refresh overrides Config.Refresh when positive.
	Refresh time.Duration
	// Brokers is the demo's simulated broker switch for Context; nil
	// hides it.
	Brokers BrokerSwitch
	// ReadOnlyFor tells whether another context is read-only, and why (for
	// :ctx); nil means "as the config says".
	ReadOnlyFor func(name string) (bool, string)
	// KindOf is a context's kind ("kafka", "bundled", "rabbitmq"), for
	// the pages opened before its first snapshot arrives; nil means "as
	// the config says" (ad-hoc contexts are not in the config).
	KindOf func(name string) string
	// Now is the clock (tests fix it).
	Now func() time.Time
	// Start is the first page (default "overview").
	Start string
	// Services are handed to every page as PageEnv.Services.
	Services map[string]any
	// Notice is shown once, when the console opens, for noticeDuration
	// (the demo's line for attaching another terminal, which the
	// full-screen console would otherwise hide).
	Notice string
}

// noticeDuration is how long Options.Notice stays on screen, unless a key
// is pressed first (a long notice covers the page's last lines).
const noticeDuration = 30 * time.Second

// entry is one page on the stack with the id its results are routed by.
type entry struct {
	id   int
	page Page
}

// Model is the root model.
type Model struct {
	opts   Options
	styles *styles.Styles
	keys   keys.Global

	width, height int

	ctxName        string
	readOnly       bool
	readOnlyReason string
	source         Source
	dialing        string // context being dialed ("" when none)

	// gen changes when the attached context changes; every result message
	// carries the gen it was started under and is dropped when it differs.
	gen uint64
	// seq numbers refreshes; only the newest result is applied.
	seq        uint64
	refreshing bool
	snap       *Snapshot
	lastGood   time.Time
	lastErr    error
	lastErrAt  time.Time

	stack  []entry
	nextID int

	flash   FlashMsg
	flashID int

	palette palette
	help    bool

	fleet *fleet // brokers known this session, and the switch's down set
	// toggles counts broker toggles applied to fleet: a refresh that
	// started before the latest one read the switch before it flipped and
	// must not undo it.
	toggles uint64

	// confirm is the question waiting for y (nil when none).
	confirm *ConfirmMsg
	// burst is set while the keys of one multi-key read are delivered.
	burst bool
	// gate is the id of the key command keys wait for (0: none); pending
	// are the keys waiting (input.go).
	gate, gateSeq int
	pending       []pendingKey
	// noticeFlash is the flash id of Options.Notice while it is shown.
	noticeFlash int

	noTimers bool // tests: timers return nil commands
}

// internal messages
type (
	refreshTickMsg struct{ gen uint64 }
	refreshedMsg   struct {
		gen, seq uint64
		snap     *Snapshot
		err      error
		// down is the broker switch's down set, read with the refresh
		// (sim is false when there is no switch).
		down    []int32
		sim     bool
		toggles uint64 // Model.toggles when the refresh started
	}
	clockMsg  struct{}
	routedMsg struct {
		gen    uint64
		pageID int
		msg    tea.Msg
	}
	dialedMsg struct {
		gen  uint64
		name string
		src  Source
		err  error
	}
	flashClearMsg struct{ id int }
)

// New builds the console model.
func New(opts Options) *Model {
	if opts.Config == nil {
		opts.Config = config.Default()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Refresh <= 0 {
		opts.Refresh = opts.Config.Refresh
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Start == "" {
		opts.Start = "overview"
	}
	m := &Model{
		opts:           opts,
		styles:         styles.New(),
		keys:           keys.DefaultGlobal(),
		width:          80,
		height:         24,
		ctxName:        opts.Context,
		readOnly:       opts.ReadOnly,
		readOnlyReason: opts.ReadOnlyReason,
		source:         opts.Source,
		gen:            1,
		fleet:          newFleet(opts.Brokers),
	}
	m.palette = newPalette(m.styles)
	if m.source == nil {
		m.dialing = opts.Context
	}
	m.stack = []entry{m.newEntry(opts.Start, nil)}
	return m
}

// Run opens the console full-screen and returns when the user quits.
func Run(opts Options) error {
	// Ask the terminal for its colour support and background before
	// bubbletea takes over the input: the query reads the answer from the
	// terminal, which would race the program's key reader.
	lipgloss.ColorProfile()
	termbg.Query()
	m := New(opts)
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithMouseCellMotion())
	_, err := p.Run()
	if m.source != nil {
		m.source.Close()
	}
	return err
}

// newEntry builds a registered page (the overview when name is unknown).
func (m *Model) newEntry(name string, args []string) entry {
	spec, ok := lookupPage(name)
	if !ok {
		spec, _ = lookupPage("overview")
	}
	m.nextID++
	id := m.nextID
	return entry{id: id, page: spec.Factory(m.env(id, args))}
}

// env builds the environment of page id.
func (m *Model) env(id int, args []string) PageEnv {
	return PageEnv{
		Config:         m.opts.Config,
		Context:        m.ctxName,
		ReadOnly:       m.readOnly,
		ReadOnlyReason: m.readOnlyReason,
		Styles:         m.styles,
		Args:           args,
		Snapshot:       func() *Snapshot { return m.snap },
		Size:           m.bodySize,
		Do:             func(fn func(context.Context, backends.Cluster) tea.Msg) tea.Cmd { return m.do(id, fn) },
		Route:          func(cmd tea.Cmd) tea.Cmd { return m.route(id, cmd) },
		Actions:        actionsFor,
		Brokers:        m.brokerSwitch(),
		Services:       m.opts.Services,
		fleet:          m.fleet,
	}
}

func (m *Model) bodySize() (int, int) { return m.width, m.height - 2 }

// brokerSwitch is the demo's switch while the console is on the demo's
// context (it simulates that cluster's brokers, no other's).
func (m *Model) brokerSwitch() BrokerSwitch {
	if m.ctxName != m.opts.Context {
		return nil
	}
	return m.opts.Brokers
}

// do runs fn against the current source in a command routed to page id.
func (m *Model) do(id int, fn func(context.Context, backends.Cluster) tea.Msg) tea.Cmd {
	src, gen, timeout := m.source, m.gen, m.opts.Timeout
	return func() tea.Msg {
		if src == nil {
			return FlashMsg{Level: Error, Text: "not connected"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return routedMsg{gen: gen, pageID: id, msg: fn(ctx, src.Cluster())}
	}
}

// route wraps cmd so its message returns to page id.
func (m *Model) route(id int, cmd tea.Cmd) tea.Cmd {
	if cmd == nil {
		return nil
	}
	gen := m.gen
	return func() tea.Msg {
		msg := cmd()
		if msg == nil {
			return nil
		}
		return routedMsg{gen: gen, pageID: id, msg: msg}
	}
}

// Init starts the clock, the page and the first dial or refresh.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.clockTick(), m.top().page.Init()}
	if m.opts.Notice != "" {
		cmds = append(cmds, m.flashFor(FlashMsg{Level: Info, Text: m.opts.Notice}, noticeDuration))
		m.noticeFlash = m.flashID
	}
	if m.source == nil {
		cmds = append(cmds, m.dialCmd(m.ctxName))
	} else {
		cmds = append(cmds, m.refreshCmd())
	}
	return tea.Batch(cmds...)
}

func (m *Model) clockTick() tea.Cmd {
	return m.tick(time.Second, func(time.Time) tea.Msg { return clockMsg{} })
}

// tick is tea.Tick, except in model tests (noTimers), where timers are
// delivered by hand so that no test waits on a clock.
func (m *Model) tick(d time.Duration, fn func(time.Time) tea.Msg) tea.Cmd {
	if m.noTimers {
		return nil
	}
	return tea.Tick(d, fn)
}

func (m *Model) top() *entry { return &m.stack[len(m.stack)-1] }

// refreshCmd starts a refresh unless one is running.
func (m *Model) refreshCmd() tea.Cmd {
	if m.refreshing || m.source == nil {
		return nil
	}
	m.refreshing = true
	m.seq++
	src, gen, seq, timeout, sw, toggles := m.source, m.gen, m.seq, m.opts.Timeout, m.brokerSwitch(), m.toggles
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		snap, err := src.Refresh(ctx)
		msg := refreshedMsg{gen: gen, seq: seq, snap: snap, err: err, toggles: toggles}
		if sw != nil {
			msg.down, msg.sim = sw.Down(), true
		}
		return msg
	}
}

func (m *Model) dialCmd(name string) tea.Cmd {
	dial, gen, timeout := m.opts.Dial, m.gen, m.opts.Timeout
	return func() tea.Msg {
		if dial == nil {
			return dialedMsg{gen: gen, name: name, err: fmt.Errorf("no dialer")}
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		src, err := dial(ctx, name)
		return dialedMsg{gen: gen, name: name, src: src, err: err}
	}
}

// Update routes messages: global ones here, the rest to their page.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = max(msg.Width, 20), max(msg.Height, 5)
		w, h := m.bodySize()
		var cmds []tea.Cmd
		for i := range m.stack {
			cmds = append(cmds, m.updatePage(i, tea.WindowSizeMsg{Width: w, Height: h}))
		}
		return m, tea.Batch(cmds...)
	case tea.KeyMsg:
		if msg.Type == tea.KeyCtrlC {
			return m, tea.Quit // never waits
		}
		return m, m.keyInput(msg)
	case gateAnswerMsg:
		return m, gateAnswer(msg)
	case gateOpenMsg:
		return m, m.openGate(msg.id)
	case ConfirmMsg:
		m.confirm = &msg
		return m, nil
	case tea.MouseMsg:
		if m.help || m.palette.open {
			return m, nil
		}
		msg.Y-- // pages get body coordinates (below the breadcrumb line)
		return m, m.updatePage(len(m.stack)-1, msg)
	case clockMsg:
		return m, m.clockTick()
	case refreshTickMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		return m, m.refreshCmd()
	case refreshedMsg:
		return m, m.applyRefresh(msg)
	case dialedMsg:
		return m, m.applyDial(msg)
	case retryDialMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		return m, m.dialCmd(msg.name)
	case routedMsg:
		if msg.gen != m.gen {
			return m, nil // from before a context switch
		}
		if t, ok := msg.msg.(brokerToggledMsg); ok {
			// The switch flipped whether or not its page is still open:
			// keys wait gateWait at most for the answer, so an o typed
			// after y can close the brokers page before a slow switch
			// answers.
			return m, m.applyToggle(t)
		}
		for i := range m.stack {
			if m.stack[i].id == msg.pageID {
				return m, m.updatePage(i, msg.msg)
			}
		}
		return m, nil // the page was closed
	case FlashMsg:
		return m, m.setFlash(msg)
	case flashClearMsg:
		if msg.id == m.flashID {
			m.flash = FlashMsg{}
		}
		return m, nil
	case PushMsg:
		if msg.Factory == nil {
			return m, nil
		}
		m.nextID++
		id := m.nextID
		return m, m.pushEntry(entry{id: id, page: msg.Factory(m.env(id, msg.Args))})
	case OpenMsg:
		return m, m.open(msg.Name, msg.Args)
	case BackMsg:
		return m, m.back()
	case openActionMsg:
		m.nextID++
		id := m.nextID
		page := msg.action.Open(m.env(id, []string{msg.target}), msg.target)
		if page == nil {
			return m, nil
		}
		return m, m.pushEntry(entry{id: id, page: page})
	}
	return m, m.updatePage(len(m.stack)-1, msg)
}

// updatePage sends msg to the i-th page on the stack.
func (m *Model) updatePage(i int, msg tea.Msg) tea.Cmd {
	p, cmd := m.stack[i].page.Update(msg)
	m.stack[i].page = p
	return cmd
}

func (m *Model) handleKey(msg tea.KeyMsg) tea.Cmd {
	if msg.Type == tea.KeyCtrlC {
		return tea.Quit
	}
	if m.confirm != nil {
		return m.answerConfirm(msg)
	}
	if m.palette.open {
		return m.updatePalette(msg)
	}
	if m.help {
		m.help = false // any key closes help
		return nil
	}
	top := len(m.stack) - 1
	if c, ok := m.stack[top].page.(InputCapturer); ok && c.CapturesKey(msg) {
		return m.updatePage(top, msg)
	}
	switch {
	case key.Matches(msg, m.keys.Quit):
		return tea.Quit
	case key.Matches(msg, m.keys.Help):
		m.help = true
		return nil
	case key.Matches(msg, m.keys.Palette):
		m.palette.start(m.snap)
		return nil
	case key.Matches(msg, m.keys.Back):
		return m.back()
	case key.Matches(msg, m.keys.Refresh):
		if m.source == nil {
			return m.dialCmd(m.ctxName) // not attached yet: try again now
		}
		return m.refreshCmd()
	case key.Matches(msg, m.keys.Overview):
		return m.open("overview", nil)
	case key.Matches(msg, m.keys.Topics):
		return m.open("topics", nil)
	case key.Matches(msg, m.keys.Groups):
		return m.open("groups", nil)
	case key.Matches(msg, m.keys.Brokers):
		return m.open("brokers", nil)
	}
	return m.updatePage(top, msg)
}

func (m *Model) pushEntry(e entry) tea.Cmd {
	m.stack = append(m.stack, e)
	return tea.Batch(e.page.Init(), m.activate())
}

// activate gives the top page its size and the latest snapshot.
func (m *Model) activate() tea.Cmd {
	top := len(m.stack) - 1
	w, h := m.bodySize()
	c1 := m.updatePage(top, tea.WindowSizeMsg{Width: w, Height: h})
	var c2 tea.Cmd
	if m.snap != nil {
		c2 = m.updatePage(top, SnapshotMsg{Snap: m.snap})
	}
	return tea.Batch(c1, c2)
}

// open opens a registered page on top of the current one: a drill-down
// (enter on a row, a page's own key). The top-level pages (overview,
// topics, groups, brokers, queues) start a fresh trail instead.
func (m *Model) open(name string, args []string) tea.Cmd { return m.openPage(name, args, false) }

// jump opens a page from the ":" command line: as in k9s, a jump starts a
// fresh breadcrumb trail, so esc retraces only the pages opened from it.
func (m *Model) jump(name string, args []string) tea.Cmd { return m.openPage(name, args, true) }

func (m *Model) openPage(name string, args []string, fresh bool) tea.Cmd {
	name, notHere := forQueues(m.rabbit(), name) // RabbitMQ: queue pages (page_queues.go)
	if notHere != "" {
		return m.setFlash(FlashMsg{Level: Error, Text: notHere})
	}
	spec, ok := lookupPage(name)
	if !ok {
		return m.setFlash(FlashMsg{Level: Error, Text: "no such page: " + sanitize.Text(name)})
	}
	if fresh || (rootPages[spec.Name] && len(args) == 0) {
		m.stack = m.stack[:0]
	}
	return m.pushEntry(m.newEntry(spec.Name, args))
}

// rootPages are the pages that start a fresh breadcrumb trail.
var rootPages = map[string]bool{"overview": true, "topics": true, "groups": true, "brokers": true, "queues": true}

func (m *Model) back() tea.Cmd {
	if len(m.stack) <= 1 {
		if _, ok := m.stack[0].page.(*overviewPage); ok {
			return nil
		}
		m.stack = m.stack[:0]
		return m.pushEntry(m.newEntry("overview", nil))
	}
	m.stack = m.stack[:len(m.stack)-1]
	return m.activate()
}

func (m *Model) setFlash(f FlashMsg) tea.Cmd { return m.flashFor(f, flashDuration) }

// flashFor shows f for d.
func (m *Model) flashFor(f FlashMsg, d time.Duration) tea.Cmd {
	f.Text = oneLine(f.Text)
	m.flash = f
	m.flashID++
	id := m.flashID
	return m.tick(d, func(time.Time) tea.Msg { return flashClearMsg{id: id} })
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(sanitize.Text(strings.ReplaceAll(s, "\n", " "))), " ")
}

// applyRefresh stores a good snapshot or keeps the old one and flashes.
func (m *Model) applyRefresh(msg refreshedMsg) tea.Cmd {
	if msg.gen != m.gen || msg.seq != m.seq {
		return nil // a stale context or an older refresh
	}
	m.refreshing = false
	next := m.scheduleRefresh()
	if msg.err != nil {
		m.lastErr, m.lastErrAt = msg.err, m.opts.Now()
		return tea.Batch(next, m.setFlash(FlashMsg{Level: Error, Text: "refresh failed: " + msg.err.Error()}))
	}
	if msg.sim && msg.toggles == m.toggles {
		m.fleet.setDown(msg.down)
	}
	m.snap = msg.snap
	m.fleet.observe(m.snap)
	m.lastGood = m.opts.Now()
	if m.snap != nil && !m.snap.Observed.IsZero() {
		m.lastGood = m.snap.Observed
	}
	m.lastErr = nil
	return tea.Batch(next, m.updatePage(len(m.stack)-1, SnapshotMsg{Snap: m.snap}))
}

// applyToggle records a broker toggle's result in the fleet every page
// counts from, redraws the page on top with it, and says what happened.
func (m *Model) applyToggle(t brokerToggledMsg) tea.Cmd {
	if t.err != nil {
		return m.setFlash(FlashMsg{Level: Error, Text: fmt.Sprintf("broker %d: %v", t.id, t.err)})
	}
	m.fleet.setDown(t.downNow)
	m.toggles++
	var redraw tea.Cmd
	if m.snap != nil {
		redraw = m.updatePage(len(m.stack)-1, SnapshotMsg{Snap: m.snap})
	}
	state := "back up"
	if t.down {
		state = "down (simulated): ISR shrinks on the next refresh"
	}
	return tea.Batch(redraw, m.setFlash(FlashMsg{Level: Info, Text: fmt.Sprintf("broker %d %s", t.id, state)}))
}

func (m *Model) scheduleRefresh() tea.Cmd {
	gen := m.gen
	return m.tick(m.opts.Refresh, func(time.Time) tea.Msg { return refreshTickMsg{gen: gen} })
}

// switchContext starts dialing another context; the current one stays on
// screen until the new one answers.
func (m *Model) switchContext(name string) tea.Cmd {
	if _, ok := m.opts.Config.Contexts[name]; !ok {
		return m.setFlash(FlashMsg{Level: Error, Text: fmt.Sprintf("unknown context %q (have: %s)", name, strings.Join(m.opts.Config.ContextNames(), ", "))})
	}
	m.gen++ // results from the old context are now stale
	m.dialing = name
	m.refreshing = false
	return tea.Batch(m.dialCmd(name), m.setFlash(FlashMsg{Level: Info, Text: "connecting to " + name + "…"}))
}

func (m *Model) applyDial(msg dialedMsg) tea.Cmd {
	if msg.gen != m.gen {
		return closeCmd(msg.src) // dialed for a context no longer wanted
	}
	m.dialing = ""
	if msg.err != nil {
		flash := m.setFlash(FlashMsg{Level: Error, Text: msg.err.Error()})
		if m.source != nil && msg.name != m.ctxName {
			// A failed :ctx keeps the console on the context it had.
			return tea.Batch(flash, m.refreshCmd())
		}
		m.lastErr, m.lastErrAt = msg.err, m.opts.Now()
		return tea.Batch(flash, m.retryDial(msg.name))
	}
	closeOld := closeCmd(m.source)
	switched := m.ctxName != msg.name
	m.source = msg.src
	m.ctxName = msg.name
	if switched {
		m.readOnly, m.readOnlyReason = m.readOnlyOf(msg.name)
	}
	if ro, ok := msg.src.(ReadOnlySource); ok && !m.readOnly {
		// The cluster, not only the context, decides.
		m.readOnly, m.readOnlyReason = ro.ReadOnly()
	}
	if switched {
		m.snap, m.lastGood, m.lastErr = nil, time.Time{}, nil
		m.fleet = newFleet(m.brokerSwitch())
		m.stack = m.stack[:0]
		return tea.Batch(closeOld, m.pushEntry(m.newEntry("overview", nil)), m.refreshCmd(),
			m.setFlash(FlashMsg{Level: Info, Text: "attached to " + msg.name}))
	}
	return tea.Batch(closeOld, m.refreshCmd())
}

// closeCmd closes a source off the UI goroutine (closing a Kafka client
// waits for its connections to wind down).
func closeCmd(s Source) tea.Cmd {
	if s == nil {
		return nil
	}
	return func() tea.Msg { s.Close(); return nil }
}

// retryDial tries again after one refresh interval (the cluster may come up).
func (m *Model) retryDial(name string) tea.Cmd {
	gen := m.gen
	m.dialing = name
	return m.tick(m.opts.Refresh, func(time.Time) tea.Msg {
		return retryDialMsg{gen: gen, name: name}
	})
}

type retryDialMsg struct {
	gen  uint64
	name string
}

// rabbit tells whether the attached context is RabbitMQ: from its snapshot,
// or before the first one arrives, from the context's kind.
func (m *Model) rabbit() bool {
	if m.snap != nil {
		return m.snap.RabbitMQ != nil
	}
	if m.opts.KindOf != nil {
		return m.opts.KindOf(m.ctxName) == "rabbitmq"
	}
	if m.opts.Config != nil {
		return m.opts.Config.Contexts[m.ctxName].Kind == "rabbitmq"
	}
	return false
}

func (m *Model) readOnlyOf(name string) (bool, string) {
	if m.opts.ReadOnlyFor != nil {
		return m.opts.ReadOnlyFor(name)
	}
	if c, ok := m.opts.Config.Contexts[name]; ok && c.ReadOnly {
		return true, "context " + name + " has read_only: true"
	}
	return false, ""
}

// View draws breadcrumbs, the page body and the status line.
func (m *Model) View() string {
	w, h := m.bodySize()
	var body string
	switch {
	case m.help:
		body = m.helpView(w, h)
	case m.snap == nil && m.lastErr != nil:
		body = m.noDataView(w)
	default:
		body = m.top().page.View()
	}
	lines := fitLines(body, w, h)
	switch {
	case m.palette.open:
		lines = m.palette.overlay(lines, w)
	case m.flashAbove():
		lines = m.flashLines(lines, w)
	}
	var b strings.Builder
	b.Grow((w + 40) * (h + 2))
	b.WriteString(m.crumbsView())
	for _, l := range lines {
		b.WriteByte('\n')
		b.WriteString(l)
	}
	b.WriteByte('\n')
	if m.palette.open {
		b.WriteString(m.palette.inputView(w))
	} else {
		b.WriteString(m.statusView())
	}
	return b.String()
}

// noDataView explains, in full, why there is nothing to show yet: the
// status line has room for only the start of an error.
func (m *Model) noDataView(w int) string {
	st := m.styles
	msg := ansi.Wrap(oneLine(m.lastErr.Error()), max(20, w-4), " ")
	var b strings.Builder
	b.WriteString("\n")
	b.WriteString(st.Levels[styles.Bad].Render("  cannot read the cluster of context " + sanitize.Text(m.ctxName)))
	b.WriteString("\n\n")
	for _, l := range strings.Split(msg, "\n") {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("\n" + st.Muted.Render(fmt.Sprintf("  retrying every %s; ctrl+r retries now, :ctx switches context, q quits", m.opts.Refresh)))
	return b.String()
}

// fitLines makes body exactly h lines of exactly w cells: longer lines are
// cut (never wrapped), short ones padded, missing ones added.
func fitLines(body string, w, h int) []string {
	lines := strings.SplitN(body, "\n", h+1)
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lw := ansi.StringWidth(l)
		switch {
		case lw > w:
			l = ansi.Truncate(l, w, "")
			lw = ansi.StringWidth(l)
			fallthrough
		case lw < w:
			l += strings.Repeat(" ", w-lw)
		}
		lines[i] = l
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", w))
	}
	return lines
}

// crumbsView is the top line: where you are, and the cluster at a glance.
func (m *Model) crumbsView() string {
	parts := []string{"berth"}
	for _, e := range m.stack {
		parts = append(parts, e.page.Title())
	}
	sep := m.styles.Crumbs.Render(" › ")
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString(sep)
		}
		if i == len(parts)-1 {
			b.WriteString(m.styles.CrumbLast.Render(p))
		} else {
			b.WriteString(m.styles.Crumbs.Render(p))
		}
	}
	left := b.String()
	right := ""
	switch {
	case m.snap != nil && m.snap.RabbitMQ != nil:
		right = queueCrumbs(m.snap.RabbitMQ)
	case m.snap != nil:
		right = fmt.Sprintf("%d brokers · %d topics · %d groups", len(m.snap.Cluster.Brokers), len(m.snap.Topics), len(m.snap.Groups))
	}
	return joinEnds(left, m.styles.Muted.Render(right), m.width)
}

// joinEnds puts left and right on one line of width w, dropping right (then
// cutting left) when they do not fit.
func joinEnds(left, right string, w int) string {
	lw, rw := ansi.StringWidth(left), ansi.StringWidth(right)
	if lw+rw+1 > w {
		right, rw = "", 0
	}
	if lw > w {
		left = ansi.Truncate(left, w-1, "…")
		lw = ansi.StringWidth(left)
	}
	return left + strings.Repeat(" ", max(0, w-lw-rw)) + right
}

// statusView is the bottom line: context, read-only badge, freshness, flash
// or hints, help.
func (m *Model) statusView() string {
	st := m.styles
	line := m.statusLeft()
	var msg string
	switch {
	case m.confirm != nil:
		msg = st.FlashError.Render(" " + oneLine(m.confirm.Question) + "  y: yes · any other key: no ")
	case m.flash.Text != "" && !m.flashAbove():
		style := st.FlashInfo
		if m.flash.Level == Error {
			style = st.FlashError
		}
		msg = style.Render(" " + m.flash.Text + " ")
	}
	jump := ""
	if msg == "" {
		// The page's keys, then ":" and the pages behind it, which no
		// letter key opens: the footer teaches how to reach them.
		room := m.width - ansi.StringWidth(line) - len(" ? help ")
		jump = m.jumpHint(room)
		msg = st.StatusBar.Render(" " + m.hints(room-ansi.StringWidth(jump)-2) + " ")
	}
	right := st.StatusBar.Render(jump + " ? help ")
	avail := m.width - ansi.StringWidth(line) - ansi.StringWidth(right)
	if avail > 0 {
		if ansi.StringWidth(msg) > avail {
			msg = ansi.Truncate(msg, avail, "…")
		}
		line += msg
		if pad := avail - ansi.StringWidth(msg); pad > 0 {
			line += st.StatusBar.Render(strings.Repeat(" ", pad))
		}
		line += right
	} else {
		line = ansi.Truncate(line, m.width, "")
	}
	return line
}

// statusLeft is the context badge, read-only badge and freshness.
func (m *Model) statusLeft() string {
	st := m.styles
	left := []string{st.Badge.Render(" " + sanitize.Text(m.ctxName) + " ")}
	if m.readOnly {
		left = append(left, st.ReadOnly.Render(" READ-ONLY "))
	}
	left = append(left, m.freshness())
	return strings.Join(left, st.StatusBar.Render(" "))
}

// flashAbove reports whether the flash message is too long for the status
// line: it is then drawn in full just above it (an error cut to "…" would
// hide the part that says what to do).
func (m *Model) flashAbove() bool {
	if m.flash.Text == "" {
		return false
	}
	avail := m.width - ansi.StringWidth(m.statusLeft()) - len(" ? help ")
	return ansi.StringWidth(m.flash.Text)+2 > avail
}

// flashLines renders a long flash message over the last body lines (at
// most three), full width.
func (m *Model) flashLines(lines []string, w int) []string {
	style := m.styles.FlashInfo
	if m.flash.Level == Error {
		style = m.styles.FlashError
	}
	wrapped := strings.Split(ansi.Wrap(m.flash.Text, max(10, w-2), " "), "\n")
	if len(wrapped) > 3 {
		wrapped = wrapped[:3]
		wrapped[2] = ansi.Truncate(wrapped[2], max(10, w-2)-1, "") + "…"
	}
	n := min(len(wrapped), len(lines))
	out := append([]string(nil), lines...)
	for i := 0; i < n; i++ {
		text := " " + wrapped[len(wrapped)-n+i]
		text += strings.Repeat(" ", max(0, w-ansi.StringWidth(text)))
		out[len(out)-n+i] = style.Render(ansi.Truncate(text, w, ""))
	}
	return out
}

// freshness says how old the data on screen is, and whether it is stale.
func (m *Model) freshness() string {
	st := m.styles
	now := m.opts.Now()
	switch {
	case m.dialing != "" && m.snap == nil:
		return st.Stale.Render(" connecting to " + sanitize.Text(m.dialing) + "… ")
	case m.snap == nil && m.lastErr != nil:
		return st.Stale.Render(" no data ")
	case m.snap == nil:
		return st.StatusBar.Render(" loading… ")
	}
	at := ""
	if m.width >= 100 { // room for the wall-clock time as well
		at = " as of " + m.lastGood.Local().Format("15:04:05")
	}
	if m.lastErr != nil {
		return st.Stale.Render(" STALE " + durations.Format(now.Sub(m.lastGood)) + at + " ")
	}
	if at != "" {
		return st.StatusBar.Render(at + " (" + durations.Format(now.Sub(m.lastGood)) + " ago) ")
	}
	return st.StatusBar.Render(" " + durations.Format(now.Sub(m.lastGood)) + " ago ")
}

// jumpPages are the pages only ":" reaches (no letter key opens them): the
// status line names them so that ":" is discovered.
var jumpPages = []string{"dlq", "plans", "capacity"}

// jumpHint teaches ":" on the status line: the pages behind it when room
// cells leave enough for the page's main keys, else ": pages".
func (m *Model) jumpHint(room int) string {
	var names []string
	for _, n := range jumpPages {
		if _, ok := lookupPage(n); ok {
			names = append(names, n)
		}
	}
	long := " : " + strings.Join(append(names, "…"), " ")
	short := " : pages"
	if len(names) == 0 {
		long = short
	}
	switch {
	case room-ansi.StringWidth(long) >= 48:
		return long
	case room-len(short) >= 16:
		return short
	}
	return ""
}

// navKeys are left out of the hint line: everyone knows arrows; "?" lists them.
var navKeys = map[string]bool{"↑/k": true, "↓/j": true, "pgup/ctrl+b": true, "pgdn/ctrl+f": true, "home/g": true, "end/G": true, ">": true, "<": true, "r": true}

// hints lists the page's own keys first (the full list is under "?"), as
// many whole ones as fit in room cells (at least one, cut if it must be).
func (m *Model) hints(room int) string {
	var parts []string
	seen := map[string]bool{} // a page's own keys and its table's can both name enter
	for _, b := range m.top().page.KeyBindings() {
		h := b.Help()
		if h.Key == "" || !b.Enabled() || navKeys[h.Key] || seen[h.Key] {
			continue
		}
		seen[h.Key] = true
		part := h.Key + " " + h.Desc
		if len(parts) > 0 && ansi.StringWidth(strings.Join(append(parts, part), " · ")) > room {
			break
		}
		parts = append(parts, part)
		if len(parts) == 4 {
			break
		}
	}
	return strings.Join(parts, " · ")
}
