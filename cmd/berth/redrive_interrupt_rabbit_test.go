package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/audit"
)

// stallProxy forwards TCP to RabbitMQ until stalled; stalled, it stops
// passing bytes either way, as a broker whose queue process is busy (a
// classic queue requeueing tens of thousands of messages) stops answering
// declares and closes. release closes every connection: the broker then
// returns what they held unacked.
type stallProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	stalled bool
	wake    chan struct{}
	conns   []net.Conn
	// onConsume, when set, stalls the proxy at the first basic.consume a
	// client sends (held, unanswered: what a busy queue process does) and
	// is closed then.
	onConsume chan struct{}
}

// isConsume reports whether b holds an AMQP method frame for
// basic.consume (frame type 1, class 60, method 20).
func isConsume(b []byte) bool {
	for i := 0; i+11 <= len(b); i++ {
		if b[i] == 1 && b[i+7] == 0 && b[i+8] == 60 && b[i+9] == 0 && b[i+10] == 20 {
			return true
		}
	}
	return false
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, wake: make(chan struct{})}
	t.Cleanup(p.release)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go p.pipe(up, c, true)
			go p.pipe(c, up, false)
		}
	}()
	return p
}

// pipe copies src to dst, holding each read while stalled.
func (p *stallProxy) pipe(dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		if fromClient && p.onConsume != nil && isConsume(buf[:n]) {
			p.stalled = true
			close(p.onConsume)
			p.onConsume = nil
		}
		wake := p.wake
		stalled := p.stalled
		p.mu.Unlock()
		if stalled {
			<-wake
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *stallProxy) stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

func (p *stallProxy) release() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	if p.stalled {
		p.stalled = false
		close(p.wake)
	}
}

// amqpURLVia is the test broker's URL with its host replaced by addr.
func amqpURLVia(t *testing.T, addr string) string {
	t.Helper()
	u, err := url.Parse(testAMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// TestRabbitRedriveInterruptWhileTheBrokerStalls is the 100,000-message
// finding in seconds. At that size the plan's browse leaves the DLQ's
// queue process (RabbitMQ 3.10, classic) requeueing for many minutes, and
// `redrive execute` then waits for the answer to basic.consume, which
// only that process gives: nothing published, and SIGINT/SIGTERM ignored
// (amqp091 calls take no context). Here a proxy stops the broker's
// answers at the same points, in seconds: at basic.consume, and after a
// first chunk was settled (the close-oks a run waits for on its way out).
// SIGINT must end the command promptly: non-zero exit saying it was
// interrupted, the stop audited (redrive.execute.cancelled), and nothing
// lost: once the connection is gone every message is on the work queue or
// back on the DLQ.
func TestRabbitRedriveInterruptWhileTheBrokerStalls(t *testing.T) {
	for _, phase := range []string{"waiting for basic.consume", "after a chunk"} {
		t.Run(phase, func(t *testing.T) { interruptStalledRedrive(t, phase == "after a chunk") })
	}
}

func interruptStalledRedrive(t *testing.T, afterChunk bool) {
	isolateConfig(t)
	rabbitQueue(t)
	conn, err := amqp.Dial(testAMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	sfx := strconv.FormatInt(time.Now().UnixNano(), 10)
	work, dlq := "berth.test.interrupt.work."+sfx, "berth.test.interrupt.dlq."+sfx
	for _, q := range []string{work, dlq} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			_, _ = c.QueueDelete(work, false, false, false)
			_, _ = c.QueueDelete(dlq, false, false, false)
		}
	})
	const n = 3000
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []interface{}{work}, "time": time.Now().Truncate(time.Second)}
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", dlq, true, false, amqp.Publishing{MessageId: fmt.Sprintf("evt-%d", i), DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{"x-death": []interface{}{death}, "x-first-death-queue": work, "x-first-death-reason": "rejected", "x-first-death-exchange": ""},
			Body:    []byte(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 || i == n-1 {
			if !dc.Wait() {
				t.Fatal("publish not confirmed")
			}
		}
	}

	proxy := newStallProxy(t, mustHost(t, testAMQPURL()))
	dir := t.TempDir()
	auditFile := filepath.Join(dir, "audit.log")
	config := rabbitConfig{AMQP: amqpURLVia(t, proxy.ln.Addr().String()), Audit: auditFile}.write(t)
	bin := buildBerth(t)
	planFile := filepath.Join(dir, "plan.json")
	// Paced so that the run is still going when the broker stalls.
	if out, err := exec.Command(bin, "--config", config, "redrive", "plan", dlq, "--all", "--read", strconv.Itoa(n+1), "--rate", "400", "--batch-size", "100", "--out", planFile, "-o", "json").CombinedOutput(); err != nil {
		t.Fatalf("plan: %v: %s", err, out)
	}
	consumeSeen := make(chan struct{})
	if !afterChunk {
		proxy.mu.Lock()
		proxy.onConsume = consumeSeen
		proxy.mu.Unlock()
	}
	cmd := exec.Command(bin, "--config", config, "redrive", "execute", planFile, "--yes", "-o", "json")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var errText strings.Builder
	var signalledAt time.Time
	var once sync.Once
	interrupt := func() {
		once.Do(func() {
			signalledAt = time.Now()
			_ = cmd.Process.Signal(os.Interrupt)
		})
	}
	// Stalled at basic.consume, the run says every 5 s that the DLQ keeps
	// it waiting; the operator presses ctrl+c once it has said so.
	noticed := make(chan struct{})
	if !afterChunk {
		go func() {
			<-consumeSeen
			<-noticed
			interrupt()
		}()
	}
	go func() {
		lines := bufio.NewScanner(stderr)
		signalled := false
		for lines.Scan() {
			errText.WriteString(lines.Text() + "\n")
			if !afterChunk && !signalled && strings.Contains(lines.Text(), "busy requeueing") {
				signalled = true
				close(noticed)
			}
			// (The run's first progress line, before any chunk, says
			// "sent 0".)
			if afterChunk && !signalled && strings.HasPrefix(lines.Text(), "progress ") && !strings.Contains(lines.Text(), "%) sent 0 ") {
				// One chunk settled: the broker stops answering, then the
				// operator presses ctrl+c.
				signalled = true
				proxy.stall()
				interrupt()
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	// A bound, not a measurement: the run ignored SIGINT for as long as the
	// broker stayed silent (minutes at scale).
	select {
	case err = <-exited:
		t.Logf("exited %s after SIGINT", time.Since(signalledAt).Round(time.Millisecond))
	case <-time.After(25 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("redrive execute did not say the DLQ kept it waiting, or ignored SIGINT while the broker stalled (killed after 25s); stderr:\n%s", errText.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("interrupted execute exited %v; want non-zero. stderr:\n%s", err, errText.String())
	}
	if !strings.Contains(errText.String(), "interrupted") {
		t.Errorf("stderr does not say the run was interrupted:\n%s", errText.String())
	}
	log, err := audit.Open(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	if !strings.Contains(strings.Join(actions, " "), "redrive.execute.cancelled") {
		t.Errorf("audit log has no redrive.execute.cancelled: %v", actions)
	}

	// Nothing lost: with the connection gone, each message is on the work
	// queue (redriven, acked on the DLQ) or back on the DLQ.
	proxy.release()
	var inWork, inDLQ int
	deadline := time.Now().Add(30 * time.Second)
	for {
		w, werr := ch.QueueDeclarePassive(work, true, false, false, false, nil)
		d, derr := ch.QueueDeclarePassive(dlq, true, false, false, false, nil)
		if werr != nil || derr != nil {
			t.Fatal(werr, derr)
		}
		inWork, inDLQ = w.Messages, d.Messages
		if (inWork+inDLQ >= n && d.Consumers == 0) || time.Now().After(deadline) {
			break
		}
		// Waiting for the broker to requeue what the closed connection
		// held: a condition polled to a deadline, not a sleep as a signal.
		time.Sleep(50 * time.Millisecond)
	}
	if inWork+inDLQ < n {
		t.Fatalf("messages lost: work %d + DLQ %d < %d", inWork, inDLQ, n)
	}
	if !afterChunk && inWork != 0 {
		t.Fatalf("interrupted before consuming, yet %d reached the work queue", inWork)
	}
	if inWork >= n {
		t.Fatalf("work queue holds %d of %d: the interrupt came after the end, the test proved nothing", inWork, n)
	}
	got := map[string]int{}
	for _, q := range []string{work, dlq} {
		for {
			d, ok, err := ch.Get(q, true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got[d.MessageId]++
		}
	}
	for i := 0; i < n; i++ {
		if got[fmt.Sprintf("evt-%d", i)] == 0 {
			t.Fatalf("evt-%d is on neither the work queue nor the DLQ", i)
		}
	}
	t.Logf("interrupted with %d on the work queue, %d back on the DLQ", inWork, inDLQ)
}

func mustHost(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
