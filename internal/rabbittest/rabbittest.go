// Package rabbittest is test support for the tests that run against the
// real RabbitMQ on the machine (BERTH_TEST_AMQP_URL,
// BERTH_TEST_MANAGEMENT_URL): raw AMQP set-up (queues, exchanges, dead
// letters) shared by the backend's tests and the actions' run-loop tests.
// They skip when RabbitMQ is unreachable unless BERTH_TEST_REQUIRE_SERVICES
// is set (CI), where they fail. No production code imports it.
package rabbittest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQPURL is the test broker (BERTH_TEST_AMQP_URL).
func AMQPURL() string {
	if v := os.Getenv("BERTH_TEST_AMQP_URL"); v != "" {
		return v
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// ManagementURL is its management API (BERTH_TEST_MANAGEMENT_URL).
func ManagementURL() string {
	if v := os.Getenv("BERTH_TEST_MANAGEMENT_URL"); v != "" {
		return v
	}
	return "http://127.0.0.1:15672"
}

// Need returns a raw AMQP connection for test setup, skipping (or
// failing under BERTH_TEST_REQUIRE_SERVICES) when RabbitMQ is unreachable.
func Need(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.DialConfig(AMQPURL(), amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") != "" {
			t.Fatalf("RabbitMQ unreachable at %s: %v", AMQPURL(), err)
		}
		t.Skipf("RabbitMQ unreachable (%v); set BERTH_TEST_REQUIRE_SERVICES to fail instead", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// NeedManagement skips (or fails) when the management API does not answer.
func NeedManagement(t testing.TB) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ManagementURL()+"/api/overview", nil)
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
		t.Fatalf("RabbitMQ management API unreachable at %s: %v", ManagementURL(), err)
	}
	t.Skipf("RabbitMQ management API unreachable (%v)", err)
}

func mgmtCreds() (string, string) {
	u, err := url.Parse(AMQPURL())
	if err != nil || u.User == nil {
		return "guest", "guest"
	}
	p, _ := u.User.Password()
	return u.User.Username(), p
}

// MgmtDo sends a management API request for test setup (policies).
func MgmtDo(t testing.TB, method, path string, body any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, ManagementURL()+path, rd)
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

// Uniq returns a name unique to this test run.
func Uniq(t testing.TB, what string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := strings.ToLower(nonName.ReplaceAllString(t.Name(), "-"))
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("berth.test.%s.%s.%s", n, what, hex.EncodeToString(b[:]))
}

// DeclareQueue declares a queue and deletes it when the test ends.
func DeclareQueue(t testing.TB, conn *amqp.Connection, name string, args amqp.Table) {
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

// DeclareExchange declares a direct exchange, deleted when the test ends.
func DeclareExchange(t testing.TB, conn *amqp.Connection, name string) {
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

// Bind binds queue to exchange with key.
func Bind(t testing.TB, conn *amqp.Connection, queue, key, exchange string) {
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

// ConfirmChannel opens a channel in confirm mode (the caller closes it).
func ConfirmChannel(t testing.TB, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// PublishConfirmed publishes messages and waits for every confirm.
func PublishConfirmed(t testing.TB, conn *amqp.Connection, exchange, key string, msgs ...amqp.Publishing) {
	t.Helper()
	ch := ConfirmChannel(t, conn)
	defer ch.Close()
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

// ReadyCount is the queue's ready count by passive declare.
func ReadyCount(t testing.TB, conn *amqp.Connection, name string) int {
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

// Eventually polls cond until it holds or the deadline passes. Management
// statistics are emitted every 5 s, so deadlines are generous; the poll
// returns as soon as the condition holds.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Topology is a work exchange routing to a work queue whose dead letters go
// through a DLX to a DLQ; every name is unique to the test.
type Topology struct {
	WorkX, Work, DLX, DLQ, Key string
}

// NewTopology declares a Topology, deleted when the test ends.
func NewTopology(t testing.TB, conn *amqp.Connection, workArgs, dlqArgs amqp.Table) Topology {
	t.Helper()
	tp := Topology{WorkX: Uniq(t, "work-x"), Work: Uniq(t, "work"), DLX: Uniq(t, "dlx"), DLQ: Uniq(t, "dlq"), Key: "rk.work"}
	DeclareExchange(t, conn, tp.WorkX)
	DeclareExchange(t, conn, tp.DLX)
	args := amqp.Table{"x-dead-letter-exchange": tp.DLX, "x-dead-letter-routing-key": "dead"}
	for k, v := range workArgs {
		args[k] = v
	}
	DeclareQueue(t, conn, tp.Work, args)
	DeclareQueue(t, conn, tp.DLQ, dlqArgs)
	Bind(t, conn, tp.Work, tp.Key, tp.WorkX)
	Bind(t, conn, tp.DLQ, "dead", tp.DLX)
	return tp
}

// Kill takes n messages from queue and rejects them without requeue.
func Kill(t testing.TB, conn *amqp.Connection, queue string, n int) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i := 0; i < n; i++ {
		var d amqp.Delivery
		Eventually(t, 10*time.Second, "a message to reject", func() bool {
			var ok bool
			d, ok, err = ch.Get(queue, false)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
	}
}

// WorkMessages are n work messages m0, m1, ... with an error header and
// a JSON body carrying eventId e0, e1, ...
func WorkMessages(n int) []amqp.Publishing {
	var out []amqp.Publishing
	for i := 0; i < n; i++ {
		out = append(out, amqp.Publishing{
			MessageId: fmt.Sprintf("m%d", i),
			Timestamp: time.Unix(1_700_000_000+int64(i), 0),
			Headers:   amqp.Table{"error": fmt.Sprintf("timeout after %d ms on order ord-%d", 100+i, i), "n": int32(i)},
			Body:      []byte(fmt.Sprintf(`{"eventId":"e%d","n":%d}`, i, i)),
		})
	}
	return out
}

// Drain consumes every message of queue (acking), returning them in order.
func Drain(t testing.TB, conn *amqp.Connection, queue string) []amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}
