package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
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
