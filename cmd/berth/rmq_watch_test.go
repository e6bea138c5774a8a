package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ctrl+c during RabbitMQ's re-failure watch leaves the watch, as on Kafka:
// the line said so, what was sent stays sent (exit 0), and the JSON says how
// long it really watched, not the --watch it was given.
func TestRabbitWatchLeftWithCtrlCSaysHowLongItWatched(t *testing.T) {
	plan, r := rmqOneMessagePlan(t)
	cmd := exec.Command(buildBerth(t), append([]string{"redrive", "execute", plan, "--yes", "--watch", "10m", "-o", "json"}, r...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var said []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		said = append(said, sc.Text())
		if strings.HasPrefix(sc.Text(), "watching ") {
			if !strings.Contains(sc.Text(), "at most 10m0s (ctrl+c stops watching; what was sent stays sent)") {
				t.Errorf("the watch line: %q", sc.Text())
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("execute left during the watch: %v\nstderr so far: %q\n%s", err, said, out.String())
	}
	var res struct {
		Sent         int `json:"sent"`
		Verification struct {
			Watched string `json:"watched"`
		} `json:"verification"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	watched, err := time.ParseDuration(res.Verification.Watched)
	if res.Sent != 1 || err != nil || watched >= 10*time.Minute {
		t.Fatalf("after ctrl+c in the watch: sent %d, watched %q (%v); want 1 sent and the time it really watched", res.Sent, res.Verification.Watched, err)
	}
}

// On a terminal enter leaves RabbitMQ's re-failure watch, as it leaves
// Kafka's, and the watch line says so.
func TestRabbitWatchLeftWithEnterOnATerminal(t *testing.T) {
	plan, r := rmqOneMessagePlan(t)
	term := startTmux(t, 200, 40, append([]string{"redrive", "execute", plan, "--yes", "--watch", "10m"}, r...)...)
	s := term.waitText("the watch", "(enter or ctrl+c stops watching; what was sent stays sent)")
	if !strings.Contains(s, "at most 10m0s") {
		t.Fatalf("the watch line:\n%s", s)
	}
	term.keys("Enter")
	if s := term.waitText("the end of the run", "[berth exited]"); !strings.Contains(s, "sent 1") {
		t.Fatalf("after enter in the watch:\n%s", s)
	}
}

// rmqOneMessagePlan is a plan file over a DLQ holding one dead letter, and
// the flags that reach the machine's RabbitMQ with an audit log of the test.
func rmqOneMessagePlan(t *testing.T) (string, []string) {
	t.Helper()
	isolateConfig(t)
	_, _, dlq, _ := rmqDLQWith(t, []rmqTestMsg{{"job-0", "A", "k0", time.Now()}})
	dir := t.TempDir()
	r := []string{"--amqp", testAMQPURL(), "--management", testManagementURL(), "--audit-file", filepath.Join(dir, "audit.log")}
	plan := filepath.Join(dir, "p.json")
	if _, errOut, code := runBerth(t, append([]string{"redrive", "plan", dlq, "--all", "--out", plan}, r...)...); code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	return plan, r
}
