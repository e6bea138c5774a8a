package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
)

// hostileQueue carries a clear screen, a colour and an OSC title change.
const hostileQueue = "jobs\x1b[2J\x1b[31mPWNED\x1b]0;title\x07"

func i64(v int64) *int64         { return &v }
func intp(v int) *int            { return &v }
func f64(v float64) *float64     { return &v }
func strp(v string) *string      { return &v }
func tsp(t time.Time) *time.Time { return &t }

// rabbitSnapshot is a RabbitMQ context as the console's RabbitMQ source
// delivers it: a stalled classic queue with a publisher timestamp (the
// worst), a draining quorum queue with an estimated age, a quorum queue
// with no drain rate (age unknown), a queue whose statistics RabbitMQ has
// not produced yet, a stream, the DLQ the first queue dead-letters into,
// and a queue with a hostile name.
func rabbitSnapshot(seq int) *monitor.Snapshot {
	now := fixtureNow
	eval := func(q backends.Queue) monitor.QueueState {
		return monitor.QueueState{Queue: q, Lag: lag.EvaluateQueue(q, now, 5*time.Minute)}
	}
	shipment := backends.Queue{Name: "shipment-jobs", Vhost: "/", Type: "classic", State: "running", Node: "rabbit@mq1", Source: "management",
		Messages: i64(12), Ready: i64(12), Unacked: i64(0), Consumers: intp(0), ConsumerUtilisation: f64(0),
		PublishRate: f64(0.4), DeliverRate: f64(0), AckRate: f64(0),
		HeadPublisherTimestamp: tsp(now.Add(-7*time.Minute - 12*time.Second)),
		Wiring: backends.QueueWiring{DeadLetterExchange: strp(""), DeadLetterRoutingKey: strp("shipment-jobs.dlq"),
			MessageTTLMs: i64(600000), MaxLength: i64(100000), Overflow: strp("reject-publish"),
			From: map[string]string{"dead_letter_exchange": "argument", "dead_letter_routing_key": "argument", "message_ttl_ms": "policy", "max_length": "policy", "overflow": "argument"}},
		Policy: "jobs-limits"}
	dlq := backends.Queue{Name: "shipment-jobs.dlq", Vhost: "/", Type: "classic", Source: "management",
		Messages: i64(14), Ready: i64(14), Unacked: i64(0), Consumers: intp(0), PublishRate: f64(0), AckRate: f64(0),
		HeadPublisherTimestamp: tsp(now.Add(-3 * time.Hour))}
	orders := backends.Queue{Name: "orders", Vhost: "/", Type: "quorum", Source: "management",
		Messages: i64(300), Ready: i64(280), Unacked: i64(20), Consumers: intp(4), ConsumerUtilisation: f64(0.85),
		PublishRate: f64(10), DeliverRate: f64(30), AckRate: f64(30),
		Wiring: backends.QueueWiring{DeliveryLimit: i64(20), From: map[string]string{"delivery_limit": "argument"}}}
	payments := backends.Queue{Name: "payments", Vhost: "/", Type: "quorum", Source: "management",
		Messages: i64(5), Ready: i64(5), Unacked: i64(0), Consumers: intp(1)}
	fresh := backends.Queue{Name: "new-queue", Vhost: "sales", Type: "classic", Source: "management"}
	events := backends.Queue{Name: "events", Vhost: "/", Type: "stream", Source: "management",
		Messages: i64(5000), Consumers: intp(2),
		Stream: &backends.StreamInfo{Messages: i64(5000), MaxAge: "7D", MaxLengthBytes: i64(1 << 30)}}
	evil := backends.Queue{Name: hostileQueue, Vhost: "/", Type: "classic", Source: "management",
		Messages: i64(0), Ready: i64(0), Unacked: i64(0), Consumers: intp(1), PublishRate: f64(0), AckRate: f64(0)}

	r := &monitor.RabbitMQ{
		AMQPAddr: "127.0.0.1:5672", ManagementAddr: "http://127.0.0.1:15672",
		ClusterName: "rabbit@harborcart", Version: "3.10.8", Mode: "management",
		Nodes: []monitor.RabbitNode{{Name: "rabbit@mq1", Running: true}},
		DLQs:  []monitor.RabbitDLQ{{Vhost: "/", Name: "shipment-jobs.dlq", Sources: []string{"shipment-jobs"}, Found: "wiring"}},
	}
	for _, q := range []backends.Queue{evil, events, orders, payments, shipment, dlq, fresh} {
		st := eval(q)
		if q.Name == dlq.Name {
			st.DeadLetters, st.DLQFound = []string{"shipment-jobs"}, "wiring"
		}
		r.Queues = append(r.Queues, st)
	}
	return &monitor.Snapshot{Seq: seq, Observed: now, RabbitMQ: r}
}

// reducedSnapshot is a RabbitMQ context without the management API.
func reducedSnapshot(seq int) *monitor.Snapshot {
	q := backends.Queue{Name: "shipment-jobs", Vhost: "/", Ready: i64(12), Consumers: intp(0), Source: "passive_declare"}
	r := &monitor.RabbitMQ{AMQPAddr: "127.0.0.1:5672", Mode: "reduced",
		Missing: []string{"no management API (rabbitmq management 127.0.0.1:15672: connection refused)", "unacknowledged counts, rates, …"},
		Queues:  []monitor.QueueState{{Queue: q, Lag: lag.EvaluateQueue(q, fixtureNow, 5*time.Minute)}}}
	return &monitor.Snapshot{Seq: seq, Observed: fixtureNow, RabbitMQ: r}
}

func newRabbitModel(t testing.TB, w, h int, snap func(int) *monitor.Snapshot) (*Model, *fakeSource) {
	t.Helper()
	src := &fakeSource{snap: snap}
	m, _ := newTestModel(t, w, h, func(o *Options) {
		o.Source, o.Context = describerSource{src, describer{calls: new(int)}}, "rabbit"
	})
	return m, src
}

// describerSource is a RabbitMQ fake whose backend handle reads a queue in
// full (a stream's extent), as the console's RabbitMQ source does.
type describerSource struct {
	*fakeSource
	cl describer
}

func (d describerSource) Cluster() backends.Cluster { return d.cl }

type describer struct {
	backends.Cluster // nil: the Kafka calls are not used here
	calls            *int
}

func (d describer) DescribeQueue(_ context.Context, vhost, name string) (backends.Queue, error) {
	*d.calls++
	first, last := fixtureNow.Add(-48*time.Hour), fixtureNow.Add(-2*time.Second)
	return backends.Queue{Name: name, Vhost: vhost, Type: "stream", Stream: &backends.StreamInfo{
		Messages: i64(5000), FirstOffset: i64(0), LastOffset: i64(4999), FirstTimestamp: &first, LastTimestamp: &last, MaxAge: "7D"}}, nil
}

// rowOf finds a queue's row on the page's table by queue name.
func rowOf(t *testing.T, p *tablePage, name string) []string {
	t.Helper()
	for _, r := range p.tbl.Rows() {
		if _, n, _ := strings.Cut(r.ID, "\x00"); n == name {
			return r.Cells
		}
	}
	t.Fatalf("no row for queue %q", name)
	return nil
}

func TestRabbitOverviewWorstAgeFirstStalledAndDLQs(t *testing.T) {
	m, _ := newRabbitModel(t, 120, 40, rabbitSnapshot)
	if got := crumbs(m); got != "overview" {
		t.Fatalf("stack = %q", got)
	}
	p := m.top().page.(*overviewPage)
	if p.queues == nil {
		t.Fatal("the overview did not switch to its queue form on a RabbitMQ snapshot")
	}
	var order []string
	for i := 0; i < 3; i++ {
		r, _ := p.queues.tbl.VisibleRow(i)
		order = append(order, r.Cells[colQName])
	}
	if strings.Join(order, ",") != "shipment-jobs.dlq,shipment-jobs,orders" {
		t.Fatalf("rows by age = %v, want the oldest head first", order)
	}
	v := ansi.Strip(m.View())
	for _, want := range []string{
		"1/1 nodes running", "RabbitMQ 3.10.8", "amqp 127.0.0.1:5672",
		"7 queues · 2 STALLED · 1 DRAINING · 2 over SLO",
		"stalled  shipment-jobs (12 messages and no consumers)",
		"DLQs     shipment-jobs.dlq 14",
		"1 node · 7 queues · 1 DLQ", // breadcrumb line
	} {
		if !strings.Contains(v, want) {
			t.Errorf("overview lacks %q:\n%s", want, v)
		}
	}
	// A DLQ nobody consumes is normal: not on the stalled line.
	for _, l := range strings.Split(v, "\n") {
		if strings.HasPrefix(l, "stalled") && strings.Contains(l, "shipment-jobs.dlq") {
			t.Errorf("the DLQ is listed as a stalled queue: %q", l)
		}
	}
	// enter opens the selected queue.
	press(m, "enter")
	if got := crumbs(m); got != "overview > shipment-jobs.dlq" {
		t.Fatalf("after enter: %q", got)
	}
}

func TestRabbitUnknownStatsAreNeverZero(t *testing.T) {
	m, _ := newRabbitModel(t, 200, 40, rabbitSnapshot)
	press(m, "c")
	if got := crumbs(m); got != "queues" {
		t.Fatalf("c on a RabbitMQ context opened %q, want queues", got)
	}
	p := &m.top().page.(*queuesPage).tablePage
	// RabbitMQ has not produced statistics for new-queue yet.
	fresh := rowOf(t, p, "new-queue")
	for _, c := range []int{colQReady, colQUnacked, colQConsumers, colQUtil, colQPublish, colQDeliver, colQAck, colQAge, colQETA} {
		if fresh[c] != "?" {
			t.Errorf("new-queue column %s = %q, want ? (unknown, not 0)", queueColumns()[c].Title, fresh[c])
		}
	}
	// A quorum queue with no drain rate: no head timestamp, no estimate.
	pay := rowOf(t, p, "payments")
	if pay[colQAge] != "?" || pay[colQAgeSrc] != "—" {
		t.Errorf("payments age = %q from %q, want ? (quorum: never a made-up age)", pay[colQAge], pay[colQAgeSrc])
	}
	// A quorum queue that drains: an estimate, labelled so.
	ord := rowOf(t, p, "orders")
	if ord[colQAge] != "~9s" || ord[colQAgeSrc] != "est." || ord[colQETA] != "15s" || ord[colQStatus] != "DRAINING" {
		t.Errorf("orders = %q", ord)
	}
	// A classic queue's head timestamp: the publisher's.
	sj := rowOf(t, p, "shipment-jobs")
	if sj[colQAge] != "7m12s" || sj[colQAgeSrc] != "publisher ts" || sj[colQStatus] != "STALLED!" || sj[colQETA] != "behind" {
		t.Errorf("shipment-jobs = %q", sj)
	}
	// Balanced with messages waiting: steady, as on a group page.
	bal := backends.Queue{Name: "bal", Type: "classic", Ready: i64(5), Unacked: i64(1), Consumers: intp(1), PublishRate: f64(3), AckRate: f64(3)}
	if eta, _ := queueETA(bal, lag.EvaluateQueue(bal, fixtureNow, time.Minute)); eta != "steady" {
		t.Errorf("balanced queue ETA = %q, want steady", eta)
	}
	// A DLQ whose head timestamp is not reported yet: its age is said
	// to be unknown, not left as blank as a queue with nothing to age.
	dlq := backends.Queue{Name: "held.dlq", Type: "classic", Ready: i64(3), Unacked: i64(0), Consumers: intp(0)}
	if age, src := queueAgeText(dlq, lag.EvaluateDeadLetterQueue(dlq, fixtureNow)); age != "?" || src != "unknown" {
		t.Errorf("DLQ with no head timestamp yet: age %q from %q, want ? from unknown", age, src)
	}
	// A stream has no age and no ETA.
	ev := rowOf(t, p, "events")
	if ev[colQAge] != "—" || ev[colQAgeSrc] != "stream: n/a" || ev[colQType] != "stream" {
		t.Errorf("events = %q", ev)
	}
	v := ansi.Strip(m.View())
	for _, h := range []string{"VHOST", "TYPE", "READY", "UNACKED", "CONS", "UTIL", "PUB/S", "DLV/S", "ACK/S", "AGE FROM", "ETA"} {
		if !strings.Contains(v, h) {
			t.Errorf("at 200 columns the queues page lacks column %s", h)
		}
	}
}

func TestRabbitQueuesFilterAndSort(t *testing.T) {
	m, _ := newRabbitModel(t, 120, 40, rabbitSnapshot)
	press(m, "c", "/")
	typeText(m, "dlq")
	send(m, keyMsg("enter"))
	p := m.top().page.(*queuesPage)
	if p.tbl.Len() != 1 {
		t.Fatalf("filter dlq: %d rows", p.tbl.Len())
	}
	press(m, "esc") // clears the filter
	if p.tbl.Len() != 7 {
		t.Fatalf("after esc: %d rows", p.tbl.Len())
	}
	// Sort by READY (the 5th column on screen at 120: QUEUE TYPE STATUS AGE AGE-FROM READY...).
	press(m, "6")
	r, _ := p.tbl.VisibleRow(0)
	if r.Cells[colQName] != "orders" {
		t.Fatalf("sorted by ready, first row = %q, want orders (280)", r.Cells[colQName])
	}
}

func TestRabbitQueuePageWiringAndResetNote(t *testing.T) {
	m, _ := newRabbitModel(t, 100, 40, rabbitSnapshot)
	send(m, OpenMsg{Name: "group", Args: []string{"shipment-jobs"}}) // ":group X" opens the queue
	if got := crumbs(m); got != "overview > shipment-jobs" {
		t.Fatalf("stack = %q", got)
	}
	v := ansi.Strip(m.View())
	for _, want := range []string{
		"STALLED!: 12 messages and no consumers",
		"7m12s  publisher ts 2026-11-29 08:52:48Z",
		`dead-letter exchange    "" (default exchange)  (argument)`,
		"dead-letter routing key shipment-jobs.dlq  (argument)",
		"message ttl             10m00s (600000 ms)  (policy)",
		"max length              100000 messages  (policy)",
		"overflow                reject-publish  (argument)",
		"delivery limit          -",
		"dead letters go to      shipment-jobs.dlq",
		"Offset resets", "do not apply",
		"ready 12 · unacked 0 · total 12",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("queue page lacks %q:\n%s", want, v)
		}
	}
	press(m, "R")
	if !strings.Contains(m.flash.Text, "offset resets do not apply") {
		t.Errorf("R flashed %q", m.flash.Text)
	}
	press(m, "d")
	if got := crumbs(m); got != "overview > shipment-jobs > shipment-jobs.dlq" {
		t.Fatalf("d opened %q", got)
	}
	if v := ansi.Strip(m.View()); !strings.Contains(v, "this is a DLQ (wiring): dead letters from shipment-jobs") {
		t.Errorf("DLQ page:\n%s", v)
	}
}

func TestRabbitStreamPageReadsExtentInBackground(t *testing.T) {
	calls := 0
	m, _ := newTestModel(t, 100, 40, func(o *Options) {
		o.Source, o.Context = describerSource{&fakeSource{snap: rabbitSnapshot}, describer{calls: &calls}}, "rabbit"
	})
	send(m, OpenMsg{Name: "queue", Args: []string{"events"}})
	if calls != 1 {
		t.Fatalf("stream extent read %d times, want 1", calls)
	}
	v := ansi.Strip(m.View())
	for _, want := range []string{"Stream", "5000 messages", "max age 7D", "first 0 · last 4999",
		"2026-11-27 09:00:00Z / 2026-11-29 08:59:58Z", "Offset resets"} {
		if !strings.Contains(v, want) {
			t.Errorf("stream page lacks %q:\n%s", want, v)
		}
	}
	// The next refresh does not read the stream again (every 30s at most).
	send(m, refreshTickMsg{gen: m.gen})
	if calls != 1 {
		t.Fatalf("stream extent re-read on the next refresh (%d reads)", calls)
	}
}

func TestRabbitHostileNamesAreEscaped(t *testing.T) {
	m, _ := newRabbitModel(t, 120, 40, rabbitSnapshot)
	press(m, "c", "/")
	typeText(m, "pwned")
	send(m, keyMsg("enter"))
	press(m, "enter")
	v := m.View()
	for _, bad := range []string{"\x1b[2J", "\x1b[31m", "\x1b]0;", "\x07"} {
		if strings.Contains(v, bad) {
			t.Fatalf("a raw escape %q reached the screen", bad)
		}
	}
	if !strings.Contains(ansi.Strip(v), `jobs\e[2J\e[31mPWNED`) {
		t.Fatalf("hostile name not shown escaped:\n%s", ansi.Strip(v))
	}
}

func TestRabbitKafkaPagesSaySoAndKafkaUnchanged(t *testing.T) {
	m, _ := newRabbitModel(t, 80, 24, rabbitSnapshot)
	press(m, "?")
	help := ansi.Strip(m.View())
	for _, want := range []string{"c            queues", "t            topics (Kafka only)", "b            brokers (Kafka only)"} {
		if !strings.Contains(help, want) {
			t.Errorf("help on a RabbitMQ context lacks %q:\n%s", want, help)
		}
	}
	press(m, "x") // closes help
	for _, k := range []string{"t", "b"} {
		press(m, k)
		if got := crumbs(m); got != "overview" {
			t.Fatalf("%s opened %q on a RabbitMQ context", k, got)
		}
		if !strings.Contains(m.flash.Text, "Kafka only") {
			t.Errorf("%s flashed %q", k, m.flash.Text)
		}
	}
	// On Kafka, c still opens the groups.
	k, _ := newTestModel(t, 80, 24)
	press(k, "c")
	if got := crumbs(k); got != "groups" {
		t.Fatalf("Kafka: c opened %q", got)
	}
}

func TestRabbitReducedModeSaysWhatIsMissing(t *testing.T) {
	m, _ := newRabbitModel(t, 100, 30, reducedSnapshot)
	v := ansi.Strip(m.View())
	for _, want := range []string{"REDUCED MODE: no management API (rabbitmq management 127.0.0.1:15672: connection refused)",
		"nodes unknown (reduced mode)", "REDUCED · 1 queue · 0 DLQs"} {
		if !strings.Contains(v, want) {
			t.Errorf("reduced overview lacks %q:\n%s", want, v)
		}
	}
	press(m, "c")
	v = ansi.Strip(m.View())
	if !strings.Contains(v, "REDUCED MODE") || !strings.Contains(v, "only configured queues are listed") {
		t.Errorf("reduced queues page:\n%s", v)
	}
	r := rowOf(t, &m.top().page.(*queuesPage).tablePage, "shipment-jobs")
	if r[colQReady] != "12" || r[colQUnacked] != "?" || r[colQType] != "?" || r[colQStatus] != "STALLED" {
		t.Errorf("reduced row = %q", r)
	}
	press(m, "enter")
	if v := ansi.Strip(m.View()); !strings.Contains(v, "dead-letter exchange    ?") {
		t.Errorf("reduced queue page shows wiring as known:\n%s", v)
	}
}

func TestRabbitGoldenViews(t *testing.T) {
	cases := []struct {
		name string
		w, h int
		snap func(int) *monitor.Snapshot
		nav  []string
	}{
		{"rabbit-overview-80x24", 80, 24, rabbitSnapshot, nil},
		{"rabbit-overview-120x40", 120, 40, rabbitSnapshot, nil},
		{"rabbit-queues-80x24", 80, 24, rabbitSnapshot, []string{"c"}},
		{"rabbit-queues-120x40", 120, 40, rabbitSnapshot, []string{"c"}},
		{"rabbit-queue-shipment-jobs-80x24", 80, 24, rabbitSnapshot, []string{"c", "j", "enter"}},
		{"rabbit-queue-shipment-jobs-120x40", 120, 40, rabbitSnapshot, []string{"c", "j", "enter"}},
		{"rabbit-queue-stream-120x40", 120, 40, rabbitSnapshot, []string{"c", "/", "e", "v", "enter", "enter"}},
		{"rabbit-reduced-80x24", 80, 24, reducedSnapshot, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := newRabbitModel(t, c.w, c.h, c.snap)
			for _, k := range c.nav {
				press(m, k)
			}
			v := m.View()
			assertFits(t, v, c.w, c.h, c.name)
			requireGolden(t, c.name, v)
		})
	}
}

// :ctx from a Kafka context to a RabbitMQ one (and back) swaps the
// overview's form; nothing of the old context stays on screen.
func TestRabbitContextSwitchFromKafkaAndBack(t *testing.T) {
	m, _ := newTestModel(t, 120, 40, func(o *Options) {
		o.Config.Contexts["rabbit"] = config.Context{Kind: "rabbitmq", AMQPURL: "amqp://127.0.0.1:5672/"}
		o.Dial = func(_ context.Context, name string) (Source, error) {
			if name == "rabbit" {
				return &fakeSource{snap: rabbitSnapshot}, nil
			}
			return &fakeSource{}, nil
		}
	})
	send(m, m.switchContext("rabbit")())
	// The dial's result arrives through Update, as under bubbletea.
	v := ansi.Strip(m.View())
	if !strings.Contains(v, "shipment-jobs") || strings.Contains(v, "fraud-monitor") || !strings.Contains(v, "1 node · 7 queues") {
		t.Fatalf("after :ctx rabbit:\n%s", v)
	}
	press(m, "c")
	if got := crumbs(m); got != "queues" {
		t.Fatalf("c on rabbit: %q", got)
	}
	send(m, m.switchContext("bundled")())
	v = ansi.Strip(m.View())
	if !strings.Contains(v, "fraud-monitor") || strings.Contains(v, "7 queues") || strings.Contains(v, "Queues, worst age first") {
		t.Fatalf("after :ctx bundled:\n%s", v)
	}
	press(m, "c")
	if got := crumbs(m); got != "groups" {
		t.Fatalf("c on Kafka again: %q", got)
	}
}

// On a RabbitMQ context :dlq and :plans open the RabbitMQ dead-letter
// pages (registered by tui/dlq), not a flash; t and b still say Kafka only.
func TestRabbitDeadLetterPagesHaveCounterparts(t *testing.T) {
	for in, want := range map[string]string{"dlq": "queue-dlq", "plans": "queue-plans", "groups": "queues"} {
		if got, why := forQueues(true, in); got != want || why != "" {
			t.Errorf(":%s on RabbitMQ opens %q (%q), want %q", in, got, why, want)
		}
	}
	if got, why := forQueues(true, "topics"); got != "" || !strings.Contains(why, "Kafka only") {
		t.Errorf(":topics on RabbitMQ: %q %q", got, why)
	}
	if got, _ := forQueues(false, "dlq"); got != "dlq" {
		t.Errorf(":dlq on Kafka opens %q", got)
	}
}

// Before a context's first snapshot arrives, its kind decides which pages
// :dlq and :plans open (a RabbitMQ context's, even ad hoc from --amqp).
func TestRabbitContextKnownBeforeItsFirstSnapshot(t *testing.T) {
	cfg := config.Default()
	cfg.Contexts["rabbit"] = config.Context{Kind: "rabbitmq"}
	for _, c := range []struct {
		name   string
		opts   Options
		rabbit bool
	}{
		{"configured rabbitmq", Options{Config: cfg, Context: "rabbit"}, true},
		{"bundled", Options{Config: cfg, Context: config.DefaultContextName}, false},
		{"ad hoc --amqp", Options{Config: cfg, Context: "adhoc", KindOf: func(string) string { return "rabbitmq" }}, true},
	} {
		m := New(c.opts)
		if got := m.rabbit(); got != c.rabbit {
			t.Errorf("%s: rabbit %v before any snapshot, want %v", c.name, got, c.rabbit)
		}
	}
	m := New(Options{Config: cfg, Context: "rabbit"})
	m.snap = &Snapshot{}
	if m.rabbit() {
		t.Error("a Kafka snapshot on a context configured as RabbitMQ: the snapshot wins")
	}
}
