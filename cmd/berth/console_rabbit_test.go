package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/rabbittest"
	"github.com/berth-dev/berth/tui"
)

// The console on the real local RabbitMQ: a queue holding three messages
// published with a timestamp ten minutes ago shows on the queues page with
// ready 3 and an age from the publisher timestamp, and its page shows its
// dead-letter wiring. The real bubbletea program runs (timers, renderer,
// the rabbitmq dialer registered in consoleDialers); the test waits on
// screen content with a deadline.
func TestConsoleRabbitMQQueuesPageShowsRealQueue(t *testing.T) {
	isolateConfig(t)
	// Cleanups run last-registered first: rabbittest.Need's close of
	// the connection runs after the deletes registered below.
	conn := rabbittest.Need(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	// Short and unique: the row must show the whole name.
	name := fmt.Sprintf("berth.con.%06x", time.Now().UnixNano()&0xffffff)
	if _, err := ch.QueueDeclare(name, false, false, false, false, amqp.Table{"x-dead-letter-exchange": "dlx.console", "x-message-ttl": int32(3600000)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
		}
	})
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ts := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	for i := 0; i < 3; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", name, false, false, amqp.Publishing{Timestamp: ts, Body: []byte{byte('a' + i)}})
		if err != nil {
			t.Fatal(err)
		}
		dc.Wait()
	}

	tm, waitScreen := rabbitProgram(t)
	waitScreen("the queue overview", regexp.MustCompile(`nodes running`))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("c")})
	// Filtered before looking for the row: the broker is shared, and other
	// tests' older queues can fill the screen above it.
	tm.Type("/" + name)
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	// QUEUE VHOST TYPE STATUS AGE AGE-FROM READY: stalled (no consumers),
	// ~10 minutes from the publisher timestamp, 3 ready.
	row := regexp.MustCompile(regexp.QuoteMeta(name) + `\s+/\s+classic\s+STALLED!\s+1[01]m\d\ds\s+publisher ts\s+3\s`)
	waitScreen("the queue's row with ready 3 and a publisher-timestamp age", row)

	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitScreen("the queue page", regexp.MustCompile(`dead-letter exchange\s+dlx\.console\s+\(argument\)`))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(quitWait)).(*tui.Model)
	v := ansi.Strip(fm.View())
	if strings.Contains(v, "guest:guest") || strings.Contains(v, ":guest@") {
		t.Errorf("the screen shows credentials:\n%s", v)
	}
	for _, want := range []string{"berth › queues › " + name, "ready 3 · unacked 0 · total 3", "publisher ts " + ts.UTC().Format("2006-01-02 15:04:05Z"), "message ttl             1h00m (3600000 ms)  (argument)"} {
		if !strings.Contains(v, want) {
			t.Errorf("queue page lacks %q:\n%s", want, v)
		}
	}
}

// :dlq and :plans on a RabbitMQ context open the RabbitMQ dead-letter
// pages in the real program (the app's page mapping, tui/dlq's pages and
// cmd/berth's QueueService linked together): the DLQ is listed with the
// queue that dead-letters into it, and enter reads its classes.
func TestConsoleRabbitMQDeadLetterPagesThroughTheApp(t *testing.T) {
	isolateConfig(t)
	_, _, work, dlq := rmqDLQ(t, 2)
	tm, waitScreen := rabbitProgram(t)
	waitScreen("the queue overview", regexp.MustCompile(`nodes running`))
	tm.Type(":dlq")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	// Filtered first: other tests' DLQs on the shared broker can fill the
	// screen above this one.
	tm.Type("/" + dlq)
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitScreen("the DLQ list", regexp.MustCompile(regexp.QuoteMeta(dlq)+`\s+/\s+classic\s.*`+regexp.QuoteMeta(work[:20])))
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitScreen("the DLQ's classes", regexp.MustCompile(`2 message\(s\) read, 1 class\(es\)`))
	tm.Type(":plans")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitScreen("the RabbitMQ plans page", regexp.MustCompile(`plan\(s\) in the redrive store`))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(quitWait)).(*tui.Model)
	if v := ansi.Strip(fm.View()); strings.Contains(v, "Kafka only") {
		t.Errorf("a RabbitMQ dead-letter page said Kafka only:\n%s", v)
	}
}

// rabbitProgram is the real program on a "rabbit" context (the test
// broker, with its management API) in a 200x50 terminal, and a wait for
// its screen to match re (what names it in the log).
func rabbitProgram(t *testing.T) (*teatest.TestModel, func(what string, re *regexp.Regexp)) {
	t.Helper()
	cfg := config.Default()
	cfg.Contexts = map[string]config.Context{"rabbit": {Kind: "rabbitmq", AMQPURL: testAMQPURL(), ManagementURL: testManagementURL()}}
	cfg.CurrentContext = "rabbit"
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := newApp(io.Discard, io.Discard)
	a.cfg, a.ctxName, a.ctx, a.timeout = cfg, "rabbit", cfg.Contexts["rabbit"], consoleTimeout

	m := tui.New(tui.Options{Config: cfg, Context: "rabbit", Dial: a.dialConsole, Timeout: consoleTimeout, Refresh: 300 * time.Millisecond, Services: consoleServices()})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(200, 50))
	waitScreen := func(what string, re *regexp.Regexp) {
		t.Helper()
		t.Logf("waiting for %s", what)
		// RabbitMQ emits queue statistics every 5s: allow many rounds.
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return re.MatchString(ansi.Strip(string(b))) },
			teatest.WithDuration(screenWait), teatest.WithCheckInterval(50*time.Millisecond))
	}
	return tm, waitScreen
}
