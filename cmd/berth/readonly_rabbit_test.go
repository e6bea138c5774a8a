package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/actions"
)

// Reading a quorum DLQ with --accept-requeue-side-effects raises delivery
// counts: a write. It is refused in read-only, including when the server is
// one a read-only context names (by its cluster name or its addresses)
// and is reached with --amqp/--management; the message's delivery count
// stays untouched.
func TestQuorumBrowseIsRefusedOnAReadOnlyRabbitMQCluster(t *testing.T) {
	isolateConfig(t)
	rabbitQueue(t) // skips (or fails under BERTH_TEST_REQUIRE_SERVICES) without RabbitMQ
	conn, err := amqp.Dial(testAMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, _ := conn.Channel()
	q := fmt.Sprintf("berth.test.readonly.quorum.%d", time.Now().UnixNano())
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			c.QueueDelete(q, false, false, false)
		}
	})
	_ = ch.Confirm(false)
	dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp.Publishing{MessageId: "m-1", Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	dc.Wait()

	name := rabbitClusterName(t)
	adhoc := []string{"--amqp", testAMQPURL(), "--management", testManagementURL()}
	show := []string{"dlq", "show", q, "--accept-requeue-side-effects"}
	for _, tc := range []struct {
		what string
		args []string
	}{
		{"--read-only", append(append([]string{"--read-only"}, adhoc...), show...)},
		{"addresses", append(append([]string{"--config", writeConfig(t, fmt.Sprintf("contexts:\n  prodmq:\n    kind: rabbitmq\n    amqp_url: %s\n    management_url: %s\n    read_only: true\n", testAMQPURL(), testManagementURL()))}, adhoc...), show...)},
		{"cluster name", append(append([]string{"--config", writeConfig(t, fmt.Sprintf("contexts:\n  prodmq:\n    kind: rabbitmq\n    management_url: https://mq.prod.invalid:15671\n    cluster_id: %q\n    read_only: true\n", name))}, adhoc...), show...)},
	} {
		_, errOut, code := runBerth(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, "read-only") {
			t.Errorf("%s: exit %d, stderr %q; want a read-only refusal", tc.what, code, errOut)
		}
		// The same one error value whether the CLI refuses the flag or the
		// backend refuses the quorum browse itself.
		for _, args := range [][]string{tc.args, tc.args[:len(tc.args)-1]} {
			if err := berthErr(t, args...); !errors.Is(err, actions.ErrReadOnly) {
				t.Errorf("%s: %v; want errors.Is(err, actions.ErrReadOnly)", strings.Join(args[len(args)-3:], " "), err)
			}
		}
	}
	d, ok, err := ch.Get(q, false)
	if err != nil || !ok {
		t.Fatalf("message gone: %v %v", ok, err)
	}
	if n, has := d.Headers["x-delivery-count"]; has && fmt.Sprint(n) != "0" {
		t.Fatalf("the refused reads raised the delivery count to %v", n)
	}
	d.Nack(false, true)
}

func rabbitClusterName(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest("GET", testManagementURL()+"/api/overview", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o struct {
		ClusterName string `json:"cluster_name"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil || o.ClusterName == "" {
		t.Fatalf("cluster name: %v", err)
	}
	return o.ClusterName
}
