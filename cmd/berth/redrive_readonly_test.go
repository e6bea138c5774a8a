package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/audit"
)

// Executing in a read-only context is refused before the cluster is touched,
// and the refusal is in the audit log like every other refusal.
func TestRedriveExecuteReadOnlyRefusalIsAudited(t *testing.T) {
	isolateConfig(t)
	file := filepath.Join(t.TempDir(), "audit.log")
	cfg := writeConfig(t, fmt.Sprintf("current_context: prod\ncontexts:\n  prod:\n    kind: kafka\n    bootstrap: [127.0.0.1:1]\n    read_only: true\naudit:\n  file: %s\n", file))
	_, errOut, code := runBerth(t, "--config", cfg, "--timeout", "1s", "redrive", "execute", "deadbeefdeadbeef")
	if code != 1 || !strings.Contains(errOut, "read-only") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	log, err := audit.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Action != "redrive.refused" || entries[0].Context != "prod" || !strings.Contains(fmt.Sprintf("%s", entries[0].Details), "read-only") {
		t.Fatalf("audit entries: %+v", entries)
	}
}

// Bad usage of execute and status exits 2 before anything runs: a negative
// --watch is refused, not read as "no watch".
func TestRedriveUsageErrors(t *testing.T) {
	isolateConfig(t)
	for _, args := range [][]string{
		{"redrive", "execute", "deadbeefdeadbeef", "--watch", "-5s"},
		{"redrive", "status", "deadbeefdeadbeef", "cafebabecafebabe"},
	} {
		_, errOut, code := runBerth(t, append([]string{"--bootstrap", "127.0.0.1:1", "--timeout", "1s"}, args...)...)
		if code != 2 || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
