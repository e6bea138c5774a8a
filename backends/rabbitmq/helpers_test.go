package rabbitmq

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Tests run against the real RabbitMQ on the machine. They skip when it is
// unreachable unless BERTH_TEST_REQUIRE_SERVICES is set (CI), where they fail.

func amqpURL() string {
	if v := os.Getenv("BERTH_TEST_AMQP_URL"); v != "" {
		return v
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

func mgmtURL() string {
	if v := os.Getenv("BERTH_TEST_MANAGEMENT_URL"); v != "" {
		return v
	}
	return "http://127.0.0.1:15672"
}

// needRabbit returns a raw AMQP connection for test setup, skipping (or
// failing under BERTH_TEST_REQUIRE_SERVICES) when RabbitMQ is unreachable.
func needRabbit(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.DialConfig(amqpURL(), amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") != "" {
			t.Fatalf("RabbitMQ unreachable at %s: %v", amqpURL(), err)
		}
		t.Skipf("RabbitMQ unreachable (%v); set BERTH_TEST_REQUIRE_SERVICES to fail instead", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// needManagement skips (or fails) when the management API does not answer.
func needManagement(t testing.TB) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, mgmtURL()+"/api/overview", nil)
	req.SetBasicAuth(mgmtCreds())
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			return
		}
		err = fmt.Errorf("status %s", resp.Status)
	}
	if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") != "" {
		t.Fatalf("RabbitMQ management API unreachable at %s: %v", mgmtURL(), err)
	}
	t.Skipf("RabbitMQ management API unreachable (%v)", err)
}

func mgmtCreds() (string, string) {
	u, err := url.Parse(amqpURL())
	if err != nil || u.User == nil {
		return "guest", "guest"
	}
	p, _ := u.User.Password()
	return u.User.Username(), p
}

// mgmtDo sends a management API request for test setup (policies).
func mgmtDo(t testing.TB, method, path string, body any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, mgmtURL()+path, rd)
	req.SetBasicAuth(mgmtCreds())
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 && !(method == http.MethodDelete && resp.StatusCode == 404) {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
}

var nonName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// uniq returns a name unique to this test run.
func uniq(t testing.TB, what string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := strings.ToLower(nonName.ReplaceAllString(t.Name(), "-"))
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("berth.test.%s.%s.%s", n, what, hex.EncodeToString(b[:]))
}

// declareQueue declares a queue and deletes it when the test ends.
func declareQueue(t testing.TB, conn *amqp.Connection, name string, args amqp.Table) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declare %s: %v", name, err)
	}
	t.Cleanup(func() {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		_, _ = ch.QueueDelete(name, false, false, false)
	})
}

// declareExchange declares a direct exchange, deleted when the test ends.
func declareExchange(t testing.TB, conn *amqp.Connection, name string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclare(name, "direct", true, false, false, false, nil); err != nil {
		t.Fatalf("declare exchange %s: %v", name, err)
	}
	t.Cleanup(func() {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		_ = ch.ExchangeDelete(name, false, false)
	})
}

func bind(t testing.TB, conn *amqp.Connection, queue, key, exchange string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.QueueBind(queue, key, exchange, false, nil); err != nil {
		t.Fatalf("bind %s: %v", queue, err)
	}
}

// publishConfirmed publishes messages and waits for every confirm.
func publishConfirmed(t testing.TB, conn *amqp.Connection, exchange, key string, msgs ...amqp.Publishing) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var dcs []*amqp.DeferredConfirmation
	for _, m := range msgs {
		dc, err := ch.PublishWithDeferredConfirm(exchange, key, true, false, m)
		if err != nil {
			t.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if ok, err := dc.WaitContext(context.Background()); err != nil || !ok {
			t.Fatalf("publish not confirmed: %v", err)
		}
	}
}

// readyCount is the queue's ready count by passive declare.
func readyCount(t testing.TB, conn *amqp.Connection, name string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// eventually polls cond until it holds or the deadline passes. Management
// statistics are emitted every 5 s, so deadlines are generous; the poll
// returns as soon as the condition holds.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func testClient(t testing.TB, o Options) *Client {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	c, err := Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// silentListener accepts connections and never answers: a server that hangs.
func silentListener(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}
