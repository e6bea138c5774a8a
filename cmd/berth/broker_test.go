package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	berthBinOnce sync.Once
	berthBin     string
	berthBinErr  error
)

// buildBerth builds the berth binary once per test run.
func buildBerth(t testing.TB) string {
	t.Helper()
	berthBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berth-bin-")
		if err != nil {
			berthBinErr = err
			return
		}
		berthBin = filepath.Join(dir, "berth")
		args := []string{"build", "-o", berthBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			berthBinErr = &buildError{string(out), err}
		}
	})
	if berthBinErr != nil {
		t.Fatalf("go build: %v", berthBinErr)
	}
	return berthBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// brokerProc is a `berth broker` subprocess.
type brokerProc struct {
	cmd   *exec.Cmd
	addrs []string
	out   *strings.Builder
	mu    sync.Mutex
	done  chan struct{}
}

var listeningRe = regexp.MustCompile(`^broker (\d+) listening on (\S+)`)

// startBrokerProc runs `berth broker` with args and waits for it to print
// every broker's address.
func startBrokerProc(t *testing.T, brokers int, args ...string) *brokerProc {
	t.Helper()
	return startBerthProc(t, brokers, append([]string{"broker"}, args...)...)
}

// startBerthProc runs the berth binary with args (isolated from the user's
// config) and waits for it to print the addresses of that many brokers.
func startBerthProc(t *testing.T, brokers int, args ...string) *brokerProc {
	t.Helper()
	bin := buildBerth(t)
	cmd := exec.Command(bin, args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_DATA_HOME="+filepath.Join(home, "data"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &brokerProc{cmd: cmd, out: &strings.Builder{}, done: make(chan struct{})}
	addrCh := make(chan string, brokers)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listeningRe.FindStringSubmatch(line); m != nil {
				addrCh <- m[2]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(p.done)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.After(2 * time.Minute)
	for len(p.addrs) < brokers {
		select {
		case a := <-addrCh:
			p.addrs = append(p.addrs, a)
		case <-p.done:
			t.Fatalf("berth %s exited early:\n%s", args[0], p.output())
		case <-deadline:
			t.Fatalf("berth %s printed no addresses within 15s:\n%s", args[0], p.output())
		}
	}
	return p
}

// waitOutput polls the process's output until it contains want.
func (p *brokerProc) waitOutput(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.output(), want) {
		select {
		case <-p.done:
			t.Fatalf("berth exited before printing %q:\n%s", want, p.output())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("berth did not print %q within %s:\n%s", want, within, p.output())
		}
	}
}

func (p *brokerProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// stop sends sig and returns the exit code.
func (p *brokerProc) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("berth broker did not stop within a minute of %v", sig)
	}
	err := p.cmd.Wait()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatal(err)
	}
	return 0
}

func TestBrokerCommandSIGTERMAndRestart(t *testing.T) {
	dir := t.TempDir()
	p := startBrokerProc(t, 3, "--listen", "127.0.0.1:0", "--data-dir", dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "payments", Key: []byte("k1"), Value: []byte("survives")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM exit status %d, want 0; output:\n%s", code, p.output())
	}

	p2 := startBrokerProc(t, 3, "--listen", "127.0.0.1:0", "--data-dir", dir)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(p2.addrs...), kgo.ConsumeTopics("payments"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	var got string
	for got == "" {
		fs := cl2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("record produced before SIGTERM not found after restart")
		}
		fs.EachRecord(func(r *kgo.Record) { got = string(r.Value) })
	}
	if got != "survives" {
		t.Fatalf("after restart read %q", got)
	}
	if code := p2.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("SIGINT exit status %d, want 0", code)
	}
}

func TestBrokerCommandBadFlags(t *testing.T) {
	isolateConfig(t)
	for _, args := range [][]string{
		{"broker", "--listen", "nonsense"},
		{"broker", "--seed", "bogus"},
		{"broker", "--brokers", "0"},
		{"broker", "--down-broker", "5"},
	} {
		_, stderr, code := runBerth(t, args...)
		if code != 2 || !strings.HasPrefix(stderr, "berth: --") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming the flag", args, code, stderr)
		}
	}
}

// kcat (librdkafka) can list, produce, consume and consume in a group
// against `berth broker`.
func TestKcatAgainstBrokerCommand(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") != "" {
			t.Fatal("kcat not installed (apt-get install -y kcat)")
		}
		t.Skip("kcat not installed")
	}
	p := startBrokerProc(t, 3, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	bootstrap := strings.Join(p.addrs, ",")
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", bootstrap}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	md := run("", "-L")
	for _, want := range []string{"3 brokers", `topic "orders" with 24 partitions`, `topic "payments" with 12 partitions`} {
		if !strings.Contains(md, want) {
			t.Errorf("kcat -L lacks %q:\n%s", want, md)
		}
	}
	run("order:1|first\norder:2|second\norder:3|third\n", "-P", "-t", "shipment-jobs", "-K", "|")
	got := run("", "-C", "-t", "shipment-jobs", "-o", "beginning", "-e", "-f", "%k=%s\n")
	for _, want := range []string{"order:1=first", "order:2=second", "order:3=third"} {
		if !strings.Contains(got, want) {
			t.Errorf("kcat -C lacks %q:\n%s", want, got)
		}
	}
	got = run("", "-G", "kcat-group", "-o", "beginning", "-e", "-f", "%k=%s\n", "shipment-jobs")
	if strings.Count(got, "order:") != 3 {
		t.Errorf("kcat -G read:\n%s", got)
	}
	// The group's consumption was committed on the broker.
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "kcat-group")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 3 {
		t.Errorf("kcat-group committed offsets sum to %d, want 3", total)
	}
}
