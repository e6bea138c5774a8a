package tui

import (
	"context"
	"errors"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
)

func TestMain(m *testing.M) {
	// Goldens compare plain text: no colour, whatever the terminal.
	lipgloss.SetColorProfile(termenv.Ascii)
	lipgloss.SetHasDarkBackground(true)
	time.Local = time.UTC // "as of hh:mm:ss" in goldens does not depend on the machine's zone
	os.Exit(m.Run())
}

// fixtureNow is the fixed clock of every model test.
var fixtureNow = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// hostileTopic and hostileClient carry terminal escape sequences: a clear
// screen, a colour and an OSC title change. They must be shown escaped.
const (
	hostileTopic  = "evil\x1b[2J\x1b[31mPWNED\x1b]0;title\x07"
	hostileClient = "cli\x1b[41mKEY\x1b[0m"
)

// fixtureSnapshot is a HarborCart-like cluster: orders with 24 partitions
// (one under min ISR), orders-by-tenant with a hot partition, DLQs, and the
// demo's three groups: email-notifier OK, sales-analytics LAGGING and
// fraud-monitor with partition 7 STALLED (the worst, by age).
func fixtureSnapshot(seq int) *monitor.Snapshot {
	now := fixtureNow
	s := &monitor.Snapshot{
		Seq:      seq,
		Observed: now,
		Window:   2 * time.Minute,
		Cluster: backends.ClusterInfo{ID: "berth-bundled", Controller: 0, Brokers: []backends.Broker{
			{ID: 0, Host: "127.0.0.1", Port: 9092, Controller: true},
			{ID: 1, Host: "127.0.0.1", Port: 9093},
			{ID: 2, Host: "127.0.0.1", Port: 9094},
		}},
	}
	orders := monitor.Topic{Name: "orders", ReplicationFactor: 3, MinISR: 2, Retention: 72 * time.Hour, Deletes: true,
		Configs: map[string]string{"min.insync.replicas": "2", "retention.ms": "259200000", "cleanup.policy": "delete", "message.timestamp.type": "CreateTime"}}
	for p := int32(0); p < 24; p++ {
		part := backends.Partition{Topic: "orders", Partition: p, Leader: p % 3, Replicas: []int32{p % 3, (p + 1) % 3, (p + 2) % 3},
			ISR: []int32{p % 3, (p + 1) % 3, (p + 2) % 3}, LogStart: 0, HighWatermark: 5000 + int64(p)}
		h := lag.PartitionHealth{Topic: "orders", Partition: p, Leader: p % 3, Replicas: 3, ISR: 3, MinISR: 2}
		if p == 5 {
			part.ISR = []int32{p % 3}
			h.ISR, h.Class, h.WritesBlocked = 1, lag.UnderMinISR, true
		}
		orders.Partitions = append(orders.Partitions, part)
		orders.Health = append(orders.Health, h)
		orders.Rates = append(orders.Rates, lag.PartitionRate{Topic: "orders", Partition: p, Leader: p % 3, Rate: 8.3, Known: true})
	}
	orders.Skew = lag.TopicSkew{Topic: "orders", Partitions: 24, TotalRate: 200, MaxRate: 8.3, MedianRate: 8.3, Ratio: 1}

	tenant := monitor.Topic{Name: "orders-by-tenant", ReplicationFactor: 3, MinISR: 2, Deletes: true, Configs: map[string]string{}}
	for p := int32(0); p < 24; p++ {
		rate := 6.0
		if p == 3 {
			rate = 42
		}
		tenant.Partitions = append(tenant.Partitions, backends.Partition{Topic: tenant.Name, Partition: p, Leader: p % 3, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1, 2}, HighWatermark: 500})
		tenant.Health = append(tenant.Health, lag.PartitionHealth{Topic: tenant.Name, Partition: p, Replicas: 3, ISR: 3, MinISR: 2})
		tenant.Rates = append(tenant.Rates, lag.PartitionRate{Topic: tenant.Name, Partition: p, Rate: rate, Known: true})
	}
	hot := lag.HotPartition{Topic: tenant.Name, Partition: 3, Leader: 0, Rate: 42, Ratio: 7, Share: 0.23}
	tenant.Skew = lag.TopicSkew{Topic: tenant.Name, Partitions: 24, TotalRate: 180, MaxRate: 42, MedianRate: 6, Ratio: 7, Hot: []lag.HotPartition{hot}}

	dlt := monitor.Topic{Name: "shipment-jobs.DLT", ReplicationFactor: 3, Configs: map[string]string{},
		Partitions: []backends.Partition{{Topic: "shipment-jobs.DLT", Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, LogStart: 2, HighWatermark: 14}},
		Health:     []lag.PartitionHealth{{Topic: "shipment-jobs.DLT", Replicas: 1, ISR: 1, MinISR: 1}},
	}
	evil := monitor.Topic{Name: hostileTopic, ReplicationFactor: 1, Configs: map[string]string{"x\x1b[5m": "v\x1b[5mblink"},
		Partitions: []backends.Partition{{Topic: hostileTopic, Partition: 0, Leader: 2, Replicas: []int32{2}, ISR: []int32{2}, HighWatermark: 3}},
		Health:     []lag.PartitionHealth{{Topic: hostileTopic, Replicas: 1, ISR: 1, MinISR: 1}},
	}
	s.Topics = []monitor.Topic{evil, orders, tenant, dlt}
	s.Health = monitor.Health{UnderMinISR: 1, ISR: []lag.PartitionHealth{orders.Health[5]}, Hot: []lag.HotPartition{hot}, Skewed: []lag.TopicSkew{tenant.Skew}}
	s.Brokers = []lag.BrokerShare{
		{Broker: 0, Leaders: 17, LeaderShare: 0.34, ProduceRate: 140, ProduceShare: 0.37},
		{Broker: 1, Leaders: 17, LeaderShare: 0.34, ProduceRate: 120, ProduceShare: 0.32},
		{Broker: 2, Leaders: 16, LeaderShare: 0.32, ProduceRate: 120, ProduceShare: 0.31},
	}

	member := func(id, client string, parts ...int32) backends.Member {
		m := backends.Member{ID: id, ClientID: client, Host: "/10.0.0.1"}
		for _, p := range parts {
			m.Assigned = append(m.Assigned, backends.TopicPartition{Topic: "orders", Partition: p})
		}
		return m
	}
	all := func() []int32 {
		var ps []int32
		for p := int32(0); p < 24; p++ {
			ps = append(ps, p)
		}
		return ps
	}
	mkGroup := func(name string, lagOf func(p int32) (int64, time.Duration, lag.Status), members []backends.Member, hist []monitor.Point) monitor.Group {
		g := monitor.Group{Members: members, History: hist}
		g.Group, g.State, g.SLO = name, "Stable", 5*time.Minute
		for _, p := range all() {
			l, age, st := lagOf(p)
			end := orders.Partitions[p].HighWatermark
			pl := lag.PartitionLag{Topic: lag.Intern("orders"), Partition: p, Committed: end - l, End: end, Lag: l, Age: age, AgeKnown: true,
				Status: st, Owner: lag.Intern(members[0].ID), ProduceRate: 8.3, ConsumeRate: 8.3, RatesKnown: true,
				TimeToLoss: 72*time.Hour - age, TimeToLossKnown: true}
			if l > 0 && st == lag.STALLED {
				pl.FallingBehind = true
				pl.ConsumeRate = 0
				pl.Breach = age > g.SLO
			} else if l > 0 {
				pl.ETA, pl.ETAKnown = time.Duration(l)*time.Second/4, true
			}
			g.Partitions = append(g.Partitions, pl)
			g.TotalLag += l
			g.Counts[st]++
			if st > g.Status {
				g.Status = st
			}
			if age > g.MaxAge {
				g.MaxAge, g.MaxAgeTopic, g.MaxAgePartition = age, "orders", p
			}
		}
		g.MaxAgeKnown = true
		g.Breach = g.MaxAge > g.SLO
		return g
	}
	hist := func(f func(i int) (time.Duration, int64)) []monitor.Point {
		var out []monitor.Point
		for i := 0; i < 30; i++ {
			a, l := f(i)
			out = append(out, monitor.Point{At: now.Add(time.Duration(i-29) * 10 * time.Second), MaxAge: a, MaxAgeKnown: true, TotalLag: l})
		}
		return out
	}
	s.Groups = []monitor.Group{
		mkGroup("email-notifier", func(int32) (int64, time.Duration, lag.Status) { return 0, 0, lag.OK },
			[]backends.Member{member("m-email", "email-1", all()...)}, hist(func(int) (time.Duration, int64) { return 0, 0 })),
		mkGroup("fraud-monitor", func(p int32) (int64, time.Duration, lag.Status) {
			if p == 7 {
				return 2412, 7*time.Minute + 12*time.Second, lag.STALLED
			}
			return 1, time.Second, lag.OK
		}, []backends.Member{member("m-fraud", hostileClient, all()...)}, hist(func(i int) (time.Duration, int64) {
			return time.Duration(i) * 15 * time.Second, int64(i) * 80
		})),
		mkGroup("sales-analytics", func(p int32) (int64, time.Duration, lag.Status) {
			return 40 + int64(p), 95 * time.Second, lag.LAGGING
		}, []backends.Member{member("m-sales", "sales-1", all()...)}, hist(func(i int) (time.Duration, int64) {
			return time.Duration(i) * 3 * time.Second, int64(i) * 30
		})),
	}
	return s
}

// fakeSource serves fixture snapshots; fail makes the next refreshes fail.
type fakeSource struct {
	mu     sync.Mutex
	seq    int
	fail   error
	closed bool
	snap   func(seq int) *monitor.Snapshot
}

func (f *fakeSource) Refresh(context.Context) (*Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	f.seq++
	if f.snap != nil {
		return f.snap(f.seq), nil
	}
	return fixtureSnapshot(f.seq), nil
}

func (f *fakeSource) Cluster() backends.Cluster { return nil }
func (f *fakeSource) Close()                    { f.mu.Lock(); f.closed = true; f.mu.Unlock() }

func (f *fakeSource) setFail(err error) { f.mu.Lock(); f.fail = err; f.mu.Unlock() }

// testConfig has two contexts: bundled and a read-only prod.
func testConfig() *config.Config {
	c := config.Default()
	c.Contexts["prod"] = config.Context{Kind: "kafka", Bootstrap: []string{"prod:9092"}, ReadOnly: true}
	return c
}

// newTestModel builds a console on a fake source at w x h, with timers off,
// and runs its first refresh.
func newTestModel(t testing.TB, w, h int, mods ...func(*Options)) (*Model, *fakeSource) {
	t.Helper()
	src := &fakeSource{}
	opts := Options{
		Config:  testConfig(),
		Context: "bundled",
		Source:  src,
		Now:     func() time.Time { return fixtureNow.Add(3 * time.Second) },
		Dial: func(_ context.Context, name string) (Source, error) {
			if name == "prod" {
				return &fakeSource{}, nil
			}
			return nil, errors.New("dial " + name + ": connection refused")
		},
	}
	for _, f := range mods {
		f(&opts)
	}
	m := New(opts)
	m.noTimers = true
	send(m, tea.WindowSizeMsg{Width: w, Height: h})
	run(m, m.Init())
	return m, src
}

// send delivers msg and runs every command it produces, recursively, until
// the model is idle. Commands are instant here: timers are off and the
// source is in memory.
func send(m *Model, msg tea.Msg) (quit bool) {
	_, cmd := m.Update(msg)
	return run(m, cmd)
}

func run(m *Model, cmd tea.Cmd) (quit bool) {
	if cmd == nil {
		return false
	}
	msg := cmd()
	switch msg := msg.(type) {
	case nil:
		return false
	case tea.QuitMsg:
		return true
	case tea.BatchMsg:
		for _, c := range msg {
			if run(m, c) {
				quit = true
			}
		}
		return quit
	}
	if v := reflect.ValueOf(msg); v.Kind() == reflect.Slice && v.Type().String() == "tea.sequenceMsg" {
		// tea.Sequence: its commands in order, as the runtime runs them.
		for i := 0; i < v.Len(); i++ {
			if c, _ := v.Index(i).Interface().(tea.Cmd); run(m, c) {
				quit = true
			}
		}
		return quit
	}
	return send(m, msg)
}

// keys sends each string as a key press ("enter", "esc", "down", or runes).
func press(m *Model, ks ...string) (quit bool) {
	for _, k := range ks {
		if send(m, keyMsg(k)) {
			quit = true
		}
	}
	return quit
}

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	case "home":
		return tea.KeyMsg{Type: tea.KeyHome}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case "ctrl+r":
		return tea.KeyMsg{Type: tea.KeyCtrlR}
	case " ":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// typeText sends each rune of s as its own key.
func typeText(m *Model, s string) {
	for _, r := range s {
		send(m, keyMsg(string(r)))
	}
}

// crumbs returns the page titles on the stack.
func crumbs(m *Model) string {
	s := ""
	for i, e := range m.stack {
		if i > 0 {
			s += " > "
		}
		s += e.page.Title()
	}
	return s
}
