package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/internal/actions"
)

// berthErr runs the command line in-process like runBerth but returns the
// error the command returned, for tests that match it with errors.Is.
func berthErr(t *testing.T, args ...string) error {
	t.Helper()
	a := newApp(io.Discard, io.Discard)
	defer a.close()
	root := newRoot(a)
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	return root.Execute()
}

// Every read-only refusal is one error value, whichever command refuses:
// a script (or the console) tests errors.Is(err, actions.ErrReadOnly)
// instead of matching one of several messages.
func TestReadOnlyRefusalsAreActionsErrReadOnly(t *testing.T) {
	kc, _ := resetCluster(t)
	isolateConfig(t)
	auditFile := filepath.Join(t.TempDir(), "audit.log")
	cfg := writeConfig(t, fmt.Sprintf("current_context: frozen\ncontexts:\n  frozen:\n    kind: kafka\n    bootstrap: [%q]\n    read_only: true\naudit:\n  file: %s\n", kc.Addrs[0], auditFile))
	for name, args := range map[string][]string{
		"offsets reset --execute, read-only context": {"--config", cfg, "offsets", "reset", "g", "--to-earliest", "--all-topics", "--execute"},
		"offsets reset --execute, --read-only":       {"--bootstrap", kc.Addrs[0], "--read-only", "offsets", "reset", "g", "--to-earliest", "--all-topics", "--execute"},
		"redrive execute --yes, read-only context":   {"--config", cfg, "redrive", "execute", "deadbeefdeadbeef", "--yes"},
	} {
		err := berthErr(t, args...)
		if !errors.Is(err, actions.ErrReadOnly) || !actions.IsRefusal(err) {
			t.Errorf("%s: %v (want a refusal matching actions.ErrReadOnly)", name, err)
		}
	}
}
