package main

import (
	"encoding/json"
	"fmt"
	"os"
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
	_, errOut, code := runBerth(t, "--config", cfg, "--timeout", "1s", "redrive", "execute", "deadbeefdeadbeef", "--yes")
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

// Executing a plan file edited after it was made is refused, nothing sent,
// and the refusal is audited.
func TestRedriveExecuteEditedPlanFileRefusalIsAudited(t *testing.T) {
	f := newRedriveFixture(t, 2, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "plan", "ledger-events.DLT", "--offsets", "0:0,1:0", "--out", planFile); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	raw, err := os.ReadFile(planFile)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), `"rate":100`, `"rate":100000`, 1)
	if edited == string(raw) {
		t.Fatalf("no rate in the plan file:\n%s", raw)
	}
	if err := os.WriteFile(planFile, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", planFile, "--yes", "--no-verify")
	if code != 1 || !strings.Contains(errOut, "edited") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	entries := auditEntries(t, f.audit)
	last := entries[len(entries)-1]
	if last.Action != "redrive.refused" || last.Target != planFile || !strings.Contains(fmt.Sprintf("%s", last.Details), "edited") {
		t.Fatalf("last audit entry: %+v", last)
	}
	var pf struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(raw, &pf); err != nil || pf.Hash == "" {
		t.Fatalf("plan hash: %v", err)
	}
	if f.state(t, pf.Hash) != 0 {
		t.Fatal("an edited plan sent records")
	}
}
