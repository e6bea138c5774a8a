package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/audit"
)

// Deadlines of tests that wait for the console. They only turn a screen
// that never comes into a failure; they are not speed limits: CI runs the
// -race suite on 2 cores with every package at once, where a refresh
// against the bundled broker or RabbitMQ (whose queue statistics lag a few
// seconds even on a quiet machine) takes many times longer than here.
const (
	screenWait     = 2 * time.Minute  // a screen to show (teatest.WaitFor)
	quitWait       = time.Minute      // the console to exit after q
	consoleTimeout = 30 * time.Second // one console call (dial, refresh)
)

// runBerth runs the berth command line in-process, exactly as the binary
// would (same error formatting and exit codes), and returns what it wrote.
// It does not touch the environment: tests that must not see the user's
// config call isolateConfig first.
func runBerth(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// berthResult is what runBerth returned.
type berthResult struct {
	out, errOut string
	code        int
}

// startBerth runs berth with args in the background (runBerth); its
// result arrives on the channel returned.
func startBerth(t testing.TB, args ...string) <-chan berthResult {
	done := make(chan berthResult, 1)
	go func() {
		out, errOut, code := runBerth(t, args...)
		done <- berthResult{out, errOut, code}
	}()
	return done
}

// startBin runs the built binary bin with args in the background, as a
// second terminal would: its stdout and stderr fill the builders returned,
// and its exit arrives on the channel.
func startBin(t testing.TB, bin string, args ...string) (stdout, stderr *strings.Builder, exited <-chan error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, stderr = &strings.Builder{}, &strings.Builder{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return stdout, stderr, done
}

// startLines runs the built binary bin with args, its stdout filling the
// builder returned and its stderr read line by line from the scanner (read
// it to its end, then Wait).
func startLines(t testing.TB, bin string, args ...string) (*exec.Cmd, *strings.Builder, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout := &strings.Builder{}
	cmd.Stdout = stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, bufio.NewScanner(stderr)
}

// auditEntries is the audit log at path, oldest first.
func auditEntries(t testing.TB, path string) []audit.Entry {
	t.Helper()
	log, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// isolateConfig points XDG_CONFIG_HOME and XDG_DATA_HOME at fresh temporary
// directories and clears BERTH_* overrides, so a test sees no config file
// unless it writes one. It returns the config directory's berth/config.yaml
// path (not created).
func isolateConfig(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	for _, k := range []string{"BERTH_CONTEXT", "BERTH_BOOTSTRAP", "BERTH_TIMEOUT", "BERTH_READ_ONLY", "BERTH_OUTPUT", "BERTH_CONFIG", "BERTH_AMQP", "BERTH_MANAGEMENT"} {
		if _, ok := os.LookupEnv(k); ok {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	return filepath.Join(dir, "config", "berth", "config.yaml")
}

// writeConfig writes a config file to a temporary path and returns it, for
// use with --config.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rabbitConfig is a config file whose current context, rmq, is the
// machine's RabbitMQ: the YAML most RabbitMQ tests write, in one place.
type rabbitConfig struct {
	AMQP       string // amqp_url ("": testAMQPURL())
	Management string // management_url ("": testManagementURL())
	Context    string // more lines of the context, indented by 4 ("    read_only: true\n")
	Audit      string // audit.file ("": the default)
	Store      string // redrive.store_dsn ("": none)
	Policies   string // the items under redrive.policies, indented by 4 ("    - match: q\n      review: none\n")
	Rest       string // more top-level YAML
}

// write writes the config to a temporary file and returns its path.
func (c rabbitConfig) write(t testing.TB) string {
	t.Helper()
	return writeConfig(t, c.yaml())
}

func (c rabbitConfig) yaml() string {
	if c.AMQP == "" {
		c.AMQP = testAMQPURL()
	}
	if c.Management == "" {
		c.Management = testManagementURL()
	}
	y := fmt.Sprintf("current_context: rmq\ncontexts:\n  rmq:\n    kind: rabbitmq\n    amqp_url: %s\n    management_url: %s\n%s", c.AMQP, c.Management, c.Context)
	if c.Audit != "" {
		y += fmt.Sprintf("audit:\n  file: %s\n", c.Audit)
	}
	if c.Store != "" || c.Policies != "" {
		y += "redrive:\n"
		if c.Store != "" {
			y += fmt.Sprintf("  store_dsn: %s\n", c.Store)
		}
		if c.Policies != "" {
			y += "  policies:\n" + c.Policies
		}
	}
	return y + c.Rest
}

// rabbitRedriveConfig is the usual redrive test config: the audit log
// (audit.log) and the redrive store (ledger.db) in dir, and policies.
func rabbitRedriveConfig(dir, policies string) rabbitConfig {
	return rabbitConfig{Audit: filepath.Join(dir, "audit.log"), Store: filepath.Join(dir, "ledger.db"), Policies: policies}
}

// reviewedPolicy is a redrive policy item for DLQs matching match: one
// reviewed approval, verified against the allowed_signers file signers.
func reviewedPolicy(match, signers string) string {
	return fmt.Sprintf("    - match: %q\n      review: required\n      approvals: 1\n      allowed_signers: %s\n", match, signers)
}
