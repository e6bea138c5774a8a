package rabbitmq

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/rabbittest"
)

// Tests run against the real RabbitMQ on the machine (internal/rabbittest:
// they skip when it is unreachable unless BERTH_TEST_REQUIRE_SERVICES is
// set, CI, where they fail).
var (
	amqpURL          = rabbittest.AMQPURL
	mgmtURL          = rabbittest.ManagementURL
	needRabbit       = rabbittest.Need
	needManagement   = rabbittest.NeedManagement
	mgmtDo           = rabbittest.MgmtDo
	uniq             = rabbittest.Uniq
	declareQueue     = rabbittest.DeclareQueue
	publishConfirmed = rabbittest.PublishConfirmed
	readyCount       = rabbittest.ReadyCount
	eventually       = rabbittest.Eventually
	newTopology      = rabbittest.NewTopology
	kill             = rabbittest.Kill
	workMessages     = rabbittest.WorkMessages
)

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
