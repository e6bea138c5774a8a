package main

import (
	"os"
	"strings"
	"testing"
)

// A config whose current_context names a context since removed from the
// file: every plain command still refuses (naming the field), but the user
// is not locked out — `config use-context` repairs it, `config view` shows
// it, and --context picks another context for one command.
func TestStaleCurrentContextCanBeRepaired(t *testing.T) {
	isolateConfig(t)
	path := writeConfig(t, "current_context: qa\ncontexts:\n  local:\n    kind: bundled\n    bootstrap: [127.0.0.1:1]\n")

	_, errOut, code := runBerth(t, "--config", path, "--timeout", "1s", "brokers")
	if code != 1 || !strings.Contains(errOut, `current_context: unknown context "qa"`) {
		t.Fatalf("plain command: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runBerth(t, "--config", path, "-c", "nope", "--timeout", "1s", "brokers")
	if code != 1 || !strings.Contains(errOut, `unknown context "nope"`) {
		t.Fatalf("-c nope: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runBerth(t, "--config", path, "-c", "local", "--timeout", "1s", "brokers")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("-c local should reach the local context: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := runBerth(t, "--config", path, "config", "view")
	if code != 0 || !strings.Contains(out, "current_context: qa") {
		t.Fatalf("config view: exit %d, stderr %q, out %q", code, errOut, out)
	}
	if _, errOut, code = runBerth(t, "--config", path, "config", "use-context", "local"); code != 0 {
		t.Fatalf("config use-context local: exit %d, stderr %q", code, errOut)
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), "current_context: local") {
		t.Fatalf("file not repaired:\n%s", raw)
	}
}

// A --timeout below what the Kafka client accepts is a usage error naming
// the flag, not the client library's complaint about "request timeout min
// overhead" after dialing.
func TestTimeoutTooShortIsAUsageError(t *testing.T) {
	isolateConfig(t)
	_, errOut, code := runBerth(t, "--bootstrap", "127.0.0.1:1", "--timeout", "1ms", "brokers")
	if code != 2 || !strings.HasPrefix(errOut, "berth: --timeout: 1ms is too short") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// A bad value from the environment is named by its variable, not by the
// flag the user never typed.
func TestBadEnvironmentValueNamesTheVariable(t *testing.T) {
	isolateConfig(t)
	t.Setenv("BERTH_OUTPUT", "yaml")
	if _, errOut, code := runBerth(t, "--bootstrap", "127.0.0.1:1", "brokers"); code != 2 || !strings.HasPrefix(errOut, `berth: BERTH_OUTPUT: "yaml"`) {
		t.Fatalf("BERTH_OUTPUT: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := runBerth(t, "--bootstrap", "127.0.0.1:1", "-o", "yaml", "brokers"); code != 2 || !strings.HasPrefix(errOut, `berth: --output: "yaml"`) {
		t.Fatalf("-o: exit %d, stderr %q", code, errOut)
	}
	os.Unsetenv("BERTH_OUTPUT")
	t.Setenv("BERTH_TIMEOUT", "-1s")
	if _, errOut, code := runBerth(t, "--bootstrap", "127.0.0.1:1", "brokers"); code != 2 || !strings.HasPrefix(errOut, "berth: BERTH_TIMEOUT: must be positive") {
		t.Fatalf("BERTH_TIMEOUT: exit %d, stderr %q", code, errOut)
	}
}
