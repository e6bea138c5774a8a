package tui

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/tui/styles"
)

// Page is one screen of the console. Other packages add pages without
// touching this package's files: implement Page, and register a factory in
// an init function with RegisterPageSpec (a page reachable from ":name") or
// RegisterAction (a page opened by a key on a group, topic or DLQ row).
//
// The contract:
//
//   - Update never does I/O. Anything that talks to a cluster, a file or a
//     database runs inside env.Do (or a tea.Cmd passed through env.Route), and
//     its result comes back to this page's Update as a message, even if
//     another page is on top by then. Results from before a context switch
//     are dropped by the app.
//   - The page receives a tea.WindowSizeMsg with the size of its body (the
//     screen minus the breadcrumb and status lines) when it is pushed and on
//     every resize; View must render exactly that many lines, none wider
//     (the app truncates and pads as a safety net, but a page that relies on
//     it loses its right edge).
//   - Mouse messages reach the active page with coordinates relative to
//     the page body (row 0 is the first body line).
//   - After every successful refresh the active page receives a SnapshotMsg;
//     env.Snapshot() returns the latest good snapshot at any time (nil before
//     the first). A page that becomes active again (after esc) gets the
//     latest SnapshotMsg straight away.
//   - Keys: the app handles global keys (quit, help, back, ":" and page
//     shortcuts) first, then passes the key to the page. A page that takes
//     text input implements InputCapturer so that typing "q" in a field does
//     not quit.
//   - Untrusted text (topic and group names, client ids, keys, values,
//     headers) goes through internal/sanitize before it reaches View.
//   - Mutating actions check env.ReadOnly and show themselves disabled with
//     env.ReadOnlyReason; the action layer enforces read-only again.
//   - Navigation is by command: tui.Push(factory) opens a sub-page (the app
//     builds it with its own env), tui.Open("group", name) a registered
//     page, tui.Back() closes the current one, tui.Flash(level, text) shows
//     a message in the status line that clears itself.
//
// A minimal page:
//
//	func init() {
//		tui.RegisterPageSpec(tui.PageSpec{Name: "hello", Factory: func(env tui.PageEnv) tui.Page { return &hello{env: env} }})
//	}
//
//	type hello struct{ env tui.PageEnv; w, h int }
//
//	func (p *hello) Init() tea.Cmd                { return nil }
//	func (p *hello) Title() string                { return "hello" }
//	func (p *hello) KeyBindings() []key.Binding   { return nil }
//	func (p *hello) View() string {
//		s := p.env.Snapshot() // nil before the first refresh
//		if s == nil {
//			return "waiting…"
//		}
//		return fmt.Sprintf("%d topics", len(s.Topics))
//	}
//	func (p *hello) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
//		if ws, ok := msg.(tea.WindowSizeMsg); ok { p.w, p.h = ws.Width, ws.Height }
//		return p, nil
//	}
type Page interface {
	// Init returns the page's first command (e.g. a load through env.Do).
	Init() tea.Cmd
	// Update handles a message and returns the page (value or pointer).
	Update(msg tea.Msg) (Page, tea.Cmd)
	// View renders the page body.
	View() string
	// Title is the page's breadcrumb text (sanitised).
	Title() string
	// KeyBindings lists the page's own keys, for "?" help and the hint line.
	KeyBindings() []key.Binding
}

// InputCapturer is implemented by pages that sometimes take text input (a
// filter, a form). While CapturesKey returns true for a key, the key goes to
// the page before any global binding (ctrl+c still quits).
type InputCapturer interface {
	CapturesKey(msg tea.KeyMsg) bool
}

// PageEnv is what a page gets from the app. It is a value: keep it.
type PageEnv struct {
	// Config is the effective configuration (SLOs, policies, refresh).
	Config *config.Config
	// Context is the name of the context the console is attached to.
	Context string
	// ReadOnly is set when the context refuses changes; ReadOnlyReason says
	// why ("context prod has read_only: true", "--read-only").
	ReadOnly       bool
	ReadOnlyReason string
	// Styles is the shared style sheet (built once).
	Styles *styles.Styles
	// Args are the arguments given on the ":" line ("group fraud-monitor"
	// gives ["fraud-monitor"]) or the row an action was started from.
	Args []string

	// Snapshot returns the latest good snapshot (nil before the first).
	// Call it (and Size) from Init, Update or View only: a tea.Cmd runs on
	// another goroutine, so pass it the snapshot value instead. Snapshots
	// are immutable, so reading one from a command is safe.
	Snapshot func() *Snapshot
	// Size returns the page body's current width and height.
	Size func() (width, height int)
	// Do runs fn off the UI goroutine with a context bounded by the
	// operation timeout and the attached cluster; the message fn returns is
	// delivered to this page's Update. Use it for every backend call.
	Do func(fn func(ctx context.Context, c backends.Cluster) tea.Msg) tea.Cmd
	// Route wraps any command (a tea.Tick, a long-running task's next step)
	// so that its message comes back to this page even while another page is
	// on top.
	Route func(cmd tea.Cmd) tea.Cmd
	// Actions returns the actions registered for a scope ("group", ...).
	Actions func(scope string) []Action

	// Brokers is the demo's simulated broker switch; nil when the attached
	// cluster has none.
	Brokers BrokerSwitch

	// Services are what pages need from outside the console (the DLQ
	// pages' services over the redrive actions), handed in by the program
	// that builds it (Options.Services); a page package names and types
	// its own entries. nil in a console built without them.
	Services map[string]any

	// fleet is every broker known in this session and the switch's down
	// set, shared by every page (pages are rebuilt on each visit).
	fleet *fleet
}

// PageFactory builds a page.
type PageFactory func(env PageEnv) Page

// PageSpec describes a page reachable from the ":" command line.
type PageSpec struct {
	// Name is the command ("groups"); Aliases are other words for it.
	Name    string
	Aliases []string
	// Help is one line for the palette ("consumer groups and their lag").
	Help string
	// Factory builds the page; env.Args holds the words after the name.
	Factory PageFactory
	// Complete, when set, suggests arguments from the latest snapshot
	// (e.g. group names); snap may be nil.
	Complete func(snap *Snapshot) []string
}

// Action is a page opened by a key on a row of another page: a group page's
// "R" opens the offset-reset dialog for the selected group, for example.
// Scopes used by the built-in pages: "group" (target: group name), "topic"
// (target: topic name), "dlq" (target: DLQ topic name).
type Action struct {
	Scope string
	// Key triggers the action; its help text is shown in the hint line.
	Key key.Binding
	// Mutates marks actions that change the cluster: in a read-only context
	// they are shown disabled with the reason and the key does nothing.
	Mutates bool
	// Open builds the page to push for target.
	Open func(env PageEnv, target string) Page
}

var registry struct {
	sync.Mutex
	pages   map[string]PageSpec
	actions []Action
}

// RegisterPageSpec makes a page reachable as ":name" (and its aliases), with
// its help line and completion. Call it from init.
// Registering a name twice replaces the earlier page.
func RegisterPageSpec(s PageSpec) {
	registry.Lock()
	defer registry.Unlock()
	if registry.pages == nil {
		registry.pages = map[string]PageSpec{}
	}
	registry.pages[s.Name] = s
}

// RegisterAction adds an action to a scope. Call it from init.
func RegisterAction(a Action) {
	registry.Lock()
	defer registry.Unlock()
	registry.actions = append(registry.actions, a)
}

// pageSpecs returns the registered pages sorted by name.
func pageSpecs() []PageSpec {
	registry.Lock()
	defer registry.Unlock()
	out := make([]PageSpec, 0, len(registry.pages))
	for _, s := range registry.pages {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// lookupPage finds a page by name or alias.
func lookupPage(name string) (PageSpec, bool) {
	registry.Lock()
	defer registry.Unlock()
	if s, ok := registry.pages[name]; ok {
		return s, true
	}
	for _, s := range registry.pages {
		for _, a := range s.Aliases {
			if a == name {
				return s, true
			}
		}
	}
	return PageSpec{}, false
}

func actionsFor(scope string) []Action {
	registry.Lock()
	defer registry.Unlock()
	var out []Action
	for _, a := range registry.actions {
		if a.Scope == scope {
			out = append(out, a)
		}
	}
	return out
}

// SnapshotMsg tells the active page that a refresh succeeded.
type SnapshotMsg struct{ Snap *Snapshot }

// Level is the severity of a flash message.
type Level int

const (
	Info Level = iota
	Error
)

// FlashMsg shows a message in the status line; it clears itself.
type FlashMsg struct {
	Level Level
	Text  string
}

// Flash returns a command that shows a flash message.
func Flash(level Level, text string) tea.Cmd {
	return func() tea.Msg { return FlashMsg{Level: level, Text: text} }
}

// PushMsg pushes a page onto the stack.
type PushMsg struct {
	Factory PageFactory
	Args    []string
}

// Push returns a command that opens the page f builds on top of the current
// one. The app gives the new page its own PageEnv (so its env.Do results
// come back to it, not to the page that pushed it).
func Push(f PageFactory, args ...string) tea.Cmd {
	return func() tea.Msg { return PushMsg{Factory: f, Args: args} }
}

// OpenMsg opens a registered page by name, as ":name args..." would.
type OpenMsg struct {
	Name string
	Args []string
}

// Open returns a command that opens a registered page.
func Open(name string, args ...string) tea.Cmd {
	return func() tea.Msg { return OpenMsg{Name: name, Args: args} }
}

// BackMsg pops the current page (as esc does).
type BackMsg struct{}

// Back returns a command that closes the current page.
func Back() tea.Cmd { return func() tea.Msg { return BackMsg{} } }

// flashDuration is how long a flash message stays.
const flashDuration = 6 * time.Second
