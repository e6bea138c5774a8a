package dlq

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/styles"
)

func TestMain(m *testing.M) {
	// Plain text: an escape sequence in a view can then only come from
	// unsanitised input.
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

const width, height = 120, 30

// world is a bundled broker with payments.DLT (four Spring-style dead
// letters: two PSP timeouts, pay-1 already captured in the SQLite system of
// record; one validation failure; one with a hostile header and a binary
// payload) and the console environment the pages get.
func world(t *testing.T, readOnly bool) tui.PageEnv {
	t.Helper()
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "payments", 1, 1, nil)
	kc.CreateTopic(t, "payments.DLT", 1, 1, nil)
	kc.Produce(t, &kgo.Record{Topic: "payments", Key: []byte("order-0"), Value: []byte("x")}, &kgo.Record{Topic: "payments", Key: []byte("order-1"), Value: []byte("x")},
		&kgo.Record{Topic: "payments", Key: []byte("order-2"), Value: []byte("x")}, &kgo.Record{Topic: "payments", Key: []byte("order-3"), Value: []byte("x")})
	hdr := func(off int64, cause, msg string) []kgo.RecordHeader {
		o := make([]byte, 8)
		binary.BigEndian.PutUint64(o, uint64(off))
		return []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte("payments")},
			{Key: "kafka_dlt-original-partition", Value: make([]byte, 4)},
			{Key: "kafka_dlt-original-offset", Value: o},
			{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte(cause)},
			{Key: "kafka_dlt-exception-message", Value: []byte(msg)},
		}
	}
	hostile := append(hdr(3, "com.x.ValidationException", "amount is invalid"), kgo.RecordHeader{Key: "x-note", Value: []byte("\x1b[2Jcleared your screen, then some more words")})
	recs := []*kgo.Record{
		{Key: []byte("order-0"), Value: []byte(`{"eventId":"ev-0","idempotencyKey":"pay-0"}`), Headers: hdr(0, "com.x.PspTimeoutException", "PSP timed out after 3000 ms")},
		{Key: []byte("order-1"), Value: []byte(`{"eventId":"ev-1","idempotencyKey":"pay-1"}`), Headers: hdr(1, "com.x.PspTimeoutException", "PSP timed out after 4000 ms")},
		{Key: []byte("order-2"), Value: []byte(`{"eventId":"ev-2","idempotencyKey":"pay-2"}`), Headers: hdr(2, "com.x.ValidationException", "amount is invalid")},
		{Key: []byte("order-3"), Value: []byte{0xca, 0xfe, 0, 1, 2}, Headers: hostile},
	}
	for _, r := range recs {
		r.Topic, r.Timestamp = "payments.DLT", time.Now().Add(-5*time.Minute)
	}
	kc.Produce(t, recs...)

	db := filepath.Join(t.TempDir(), "payments.db")
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	sdb.Exec(`create table payments(idempotency_key TEXT PRIMARY KEY, status TEXT)`)
	sdb.Exec(`insert into payments values ('pay-1', 'captured')`)
	sdb.Close()

	c, err := kafka.Dial(context.Background(), kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	t.Cleanup(cl.Close)
	cfg := config.Default()
	cfg.Redrive.Policies = []config.RedrivePolicy{{Match: "payments*.DLT", IdempotencyKey: "json:idempotencyKey", RequireIdempotencyKey: true,
		SystemOfRecord: &config.SystemOfRecord{Driver: "sqlite", DSN: db, Query: "select 1 from payments where idempotency_key = ? and status = 'captured'"}}}
	open := Opener(func(c backends.Cluster, cfg *config.Config, _ string) (Service, error) {
		k, ok := c.(*kafka.Cluster)
		if !ok {
			return nil, errNoService
		}
		return actions.PlannerConsole{P: actions.NewPlanner(k, cfg)}, nil
	})
	env := tui.PageEnv{
		Services: map[string]any{ServiceName: open},
		Config:   cfg, Context: "test", Styles: styles.New(), ReadOnly: readOnly, ReadOnlyReason: "--read-only",
		Size: func() (int, int) { return width, height },
		Do: func(fn func(ctx context.Context, c backends.Cluster) tea.Msg) tea.Cmd {
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				return fn(ctx, cl)
			}
		},
		Route: func(cmd tea.Cmd) tea.Cmd { return cmd },
	}
	return env
}

// run executes cmd (and any batch) and feeds the messages to page,
// returning the page and any page pushed.
func run(t *testing.T, env tui.PageEnv, page tui.Page, cmd tea.Cmd) (tui.Page, []tui.Page, []string) {
	t.Helper()
	var pushed []tui.Page
	var flashes []string
	queue := []tea.Cmd{cmd}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		switch msg := c().(type) {
		case tea.BatchMsg:
			queue = append(queue, msg...)
		case tui.PushMsg:
			next := msg.Factory(env)
			next, _ = next.Update(tea.WindowSizeMsg{Width: width, Height: height})
			next, _, _ = run(t, env, next, next.Init())
			pushed = append(pushed, next)
		case tui.FlashMsg:
			flashes = append(flashes, msg.Text)
		case nil:
		default:
			var more tea.Cmd
			page, more = page.Update(msg)
			queue = append(queue, more)
		}
	}
	return page, pushed, flashes
}

func press(t *testing.T, env tui.PageEnv, page tui.Page, k tea.KeyMsg) (tui.Page, []tui.Page, []string) {
	t.Helper()
	page, cmd := page.Update(k)
	return run(t, env, page, cmd)
}

var (
	enterKey = tea.KeyMsg{Type: tea.KeyEnter}
	downKey  = tea.KeyMsg{Type: tea.KeyDown}
)

func runes(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

func checkView(t *testing.T, p tui.Page) string {
	t.Helper()
	v := p.View()
	if strings.ContainsRune(v, 0x1b) {
		t.Fatalf("an escape sequence reached the view:\n%q", v)
	}
	if n := strings.Count(v, "\n") + 1; n != height {
		t.Fatalf("view has %d lines, want %d", n, height)
	}
	return v
}

func TestListClassesRecordsAndRecordDetail(t *testing.T) {
	env := world(t, false)
	list := NewListPage(env)
	list, _, _ = run(t, env, list, list.Init())
	v := checkView(t, list)
	if !strings.Contains(v, "payments.DLT") || !strings.Contains(v, "1 dead-letter queue(s)") {
		t.Fatalf("list view:\n%s", v)
	}
	_, pushed, _ := press(t, env, list, enterKey)
	if len(pushed) != 1 {
		t.Fatal("enter did not open the classes page")
	}
	classes := pushed[0]
	v = checkView(t, classes)
	if !strings.Contains(v, "4 records, 4 pending, 2 classes") || !strings.Contains(v, "PSP timed out after <n> ms") || !strings.Contains(v, "permanent") {
		t.Fatalf("classes view:\n%s", v)
	}
	// Classes read by exception and pattern, the id last; the PSP timeouts
	// are "transient" by their exception, but pay-1 is captured in the
	// system of record: the class says it already took effect. Last seen
	// is the records' age, produced 5 minutes back: 5m00s on a quiet
	// machine, a few seconds more under -race on a loaded one.
	if !regexp.MustCompile(`PspTimeoutException\s+PSP timed out after <n> ms\s+2\s+took effect 1/2!\s+payments\s+5m[0-5]\ds\s+c-[0-9a-f]{10}`).MatchString(v) ||
		!strings.Contains(v, "system of record: 1 pending record(s) already took effect") {
		t.Fatalf("classes view:\n%s", v)
	}
	// "a" lists every record; enter on the last (hostile) one shows it.
	_, pushed, _ = press(t, env, classes, runes("a"))
	records := pushed[0]
	if v := checkView(t, records); !strings.Contains(v, "4 record(s)") || !strings.Contains(v, "pay-2") {
		t.Fatalf("records view:\n%s", v)
	}
	for i := 0; i < 3; i++ {
		records, _, _ = press(t, env, records, downKey)
	}
	_, pushed, _ = press(t, env, records, enterKey)
	detail := checkView(t, pushed[0])
	for _, want := range []string{"offset          3", "class           ValidationException: amount is invalid (c-", `x-note = \e[2Jcleared your screen`, "ca fe 00 01 02", "last hop        payments[0]@3", "payload (5 bytes, binary, hex dump)"} {
		if !strings.Contains(detail, want) {
			t.Fatalf("record view lacks %q:\n%s", want, detail)
		}
	}
}

func TestSelectIntoAPlanAndSeeVerdicts(t *testing.T) {
	env := world(t, false)
	classes := tui.Page(NewClassesPage(env, "payments.DLT"))
	classes, _, _ = run(t, env, classes, classes.Init())
	// No selection: the plan is refused, never "everything".
	_, pushed, flashes := press(t, env, classes, runes("p"))
	if len(pushed) != 0 || len(flashes) != 1 || !strings.Contains(flashes[0], "select records first") {
		t.Fatalf("plan without selection: pushed %d, flashes %v", len(pushed), flashes)
	}
	// Select the timeout class (two records) and plan it.
	for i := 0; i < 5; i++ {
		if r, _ := classes.(*ClassesPage).tbl.Selected(); strings.Contains(strings.Join(r.Cells, " "), "PspTimeout") {
			break
		}
		classes, _, _ = press(t, env, classes, downKey)
	}
	classes, _, _ = press(t, env, classes, runes("x"))
	if v := checkView(t, classes); !strings.Contains(v, "selected 2 record(s)") {
		t.Fatalf("selection not shown:\n%s", v)
	}
	_, pushed, _ = press(t, env, classes, runes("p"))
	if len(pushed) != 1 {
		t.Fatal("p did not open the plan page")
	}
	v := checkView(t, pushed[0])
	for _, want := range []string{"selected 2 · include 1 · exclude 1 (effect_committed 1)", "effect_committed", "include", "stored in the cluster's plan store", "by class (included/selected): c-"} {
		if !strings.Contains(v, want) {
			t.Fatalf("plan view lacks %q:\n%s", want, v)
		}
	}

	// The stored plan is listed on :plans and opens to the same verdicts.
	plans := NewPlansPage(env)
	plans, _, _ = run(t, env, plans, plans.Init())
	if v := checkView(t, plans); !strings.Contains(v, "1 plan(s)") || !strings.Contains(v, "payments.DLT") {
		t.Fatalf("plans view:\n%s", v)
	}
	_, pushed, _ = press(t, env, plans, enterKey)
	if v := checkView(t, pushed[0]); !strings.Contains(v, "effect_committed 1") {
		t.Fatalf("stored plan view:\n%s", v)
	}
}

func TestRecordSelectionAndReadOnlyPlanIsNotStored(t *testing.T) {
	env := world(t, true)
	classes := tui.Page(NewClassesPage(env, "payments.DLT"))
	classes, _, _ = run(t, env, classes, classes.Init())
	_, pushed, _ := press(t, env, classes, runes("a"))
	records := pushed[0]
	// Select records 0:2 and 0:3 individually.
	records, _, _ = press(t, env, records, downKey)
	records, _, _ = press(t, env, records, downKey)
	records, _, _ = press(t, env, records, runes("x"))
	records, _, _ = press(t, env, records, downKey)
	records, _, _ = press(t, env, records, runes("x"))
	if v := checkView(t, records); !strings.Contains(v, "selected 2 record(s)") {
		t.Fatalf("records selection:\n%s", v)
	}
	_, pushed, _ = press(t, env, records, runes("p"))
	v := checkView(t, pushed[0])
	// 0:3 has a binary payload: no idempotency key, which the policy requires.
	for _, want := range []string{"selected 2 · include 1 · exclude 1 (missing_idempotency_key 1)", "not stored: read-only (--read-only)"} {
		if !strings.Contains(v, want) {
			t.Fatalf("plan view lacks %q:\n%s", want, v)
		}
	}
}

func TestPagesFitSmallTerminalsAndReportErrors(t *testing.T) {
	env := world(t, false)
	env.Size = func() (int, int) { return 80, 10 }
	p := NewClassesPage(env, "no-such.DLT")
	page, _, _ := run(t, env, p, p.Init())
	page, _ = page.Update(tea.WindowSizeMsg{Width: 80, Height: 10})
	v := page.View()
	if n := strings.Count(v, "\n") + 1; n != 10 || !strings.Contains(v, "error:") {
		t.Fatalf("%d lines:\n%s", n, v)
	}
	for _, line := range strings.Split(v, "\n") {
		if lipgloss.Width(line) > 80 {
			t.Fatalf("line wider than 80: %q", line)
		}
	}
	env.Services = nil // a console built without the DLQ service
	list := NewListPage(env)
	list, _, _ = run(t, env, list, list.Init())
	if v := list.View(); !strings.Contains(v, "need a Kafka context") {
		t.Fatalf("no service:\n%s", v)
	}
	_ = fmt.Sprint()
}

func TestPlanPageShowsScanProgressWhileChecking(t *testing.T) {
	env := tui.PageEnv{Styles: styles.New(), Size: func() (int, int) { return width, height }}
	p := NewPlanPage(env, actions.PlanRequest{DLQ: "payments.DLT", Classes: []string{"c-1"}})
	if v := checkView(t, p); !strings.Contains(v, "checking the selection") || strings.Contains(v, "ordering scan:") {
		t.Fatalf("before the scan:\n%s", v)
	}
	p.progress.read.Store(250)
	p.progress.total.Store(1000)
	next, cmd := p.Update(progressTick{})
	if cmd == nil {
		t.Fatal("progress stopped ticking while the checks run")
	}
	if v := checkView(t, next); !strings.Contains(v, "ordering scan: 250/1000 records (25%)") {
		t.Fatalf("progress not shown:\n%s", v)
	}
}

func TestTopicActionOpensClassesOnlyForDLQs(t *testing.T) {
	env := world(t, false)
	p := tui.Page(NewClassesPage(env, "payments"))
	p, _, _ = run(t, env, p, p.Init())
	if v := checkView(t, p); !strings.Contains(v, "payments is not a dead-letter topic") {
		t.Fatalf("non-DLQ topic:\n%s", v)
	}
	env.Config.Redrive.DLQs = []config.DLQPair{{DLQ: "payments", Original: "orders"}}
	p = tui.Page(NewClassesPage(env, "payments"))
	p, _, _ = run(t, env, p, p.Init())
	if v := checkView(t, p); strings.Contains(v, "not a dead-letter topic") || !strings.Contains(v, "4 records") {
		t.Fatalf("declared DLQ:\n%s", v)
	}
}
