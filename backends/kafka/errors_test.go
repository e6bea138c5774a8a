package kafka

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/kafkatest"
)

// A refused connection is classified as unreachable for callers that branch
// on it (the bundled context's "start the broker" hint), and the message
// still names the address.
func TestDialRefusedIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the dial is refused at once
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, Options{Bootstrap: []string{addr}, Timeout: 3 * time.Second})
	if !errors.Is(err, backends.ErrUnreachable) {
		t.Fatalf("Dial to a closed port: %v, want backends.ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("message %q does not name %s as unreachable", err, addr)
	}
}

// A cluster that never mirrored an audit entry has no audit topic: that is
// an empty mirror, recognised by Kafka's error code rather than its text.
func TestMirroredAuditWithoutTopicIsEmpty(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	cl := dialCluster(t, kc)
	got, err := cl.MirroredAudit(tctx(t))
	if err != nil || len(got) != 0 {
		t.Fatalf("MirroredAudit on a cluster without %s: %v, %v; want none and no error", AuditTopic, got, err)
	}
}

// staleRoute matches franz-go's unexported "unknown broker" error by its
// text; this pins that text to the one franz-go returns today.
func TestStaleRouteRecognisesFranzGoUnknownBroker(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	cl := dialCluster(t, kc)
	_, err := cl.c.cl.Broker(99).Request(tctx(t), kmsg.NewPtrMetadataRequest())
	if err == nil || !staleRoute(err) {
		t.Fatalf("a request to a broker the client does not know: %v; staleRoute does not recognise it", err)
	}
	if staleRoute(errors.New("connection refused")) {
		t.Fatal("staleRoute matches an unrelated error")
	}
}
