package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One loader for plan files: whatever `redrive show` refuses to load,
// `redrive execute` refuses too, sending nothing. Variants of a real plan
// file: edited, truncated, with trailing data, empty, not JSON, a directory.
func TestRedriveExecuteLoadsNoPlanFileThatShowRejects(t *testing.T) {
	f := newRedriveFixture(t, 2, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	dir := t.TempDir()
	good := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "plan", "ledger-events.DLT", "--offsets", "0:0,1:0", "--out", good); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	variants := map[string]string{
		"edited":         strings.Replace(s, "ledger-events", "ledger-evenTs", 1),
		"truncated":      s[:len(s)/2],
		"trailing data":  s + "\n{}",
		"empty":          "",
		"not json":       "plan: yes\n",
		"null":           "null",
		"array":          "[]",
		"bom":            "\ufeff" + s,
		"unknown fields": strings.Replace(s, "{", `{"x_extra":1,`, 1),
	}
	for name, body := range variants {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		os.WriteFile(p, []byte(body), 0o600)
		_, _, showCode := runBerth(t, "--config", f.config, "redrive", "show", p)
		_, errOut, execCode := runBerth(t, "--config", f.config, "redrive", "execute", p, "--yes", "--no-verify")
		if showCode != 0 && execCode == 0 {
			t.Errorf("%s: show refuses it (exit %d) but execute ran it: %s", name, showCode, errOut)
		}
	}
	sub := filepath.Join(dir, "a-directory")
	os.Mkdir(sub, 0o700)
	_, _, showCode := runBerth(t, "--config", f.config, "redrive", "show", sub)
	if _, _, execCode := runBerth(t, "--config", f.config, "redrive", "execute", sub, "--yes", "--no-verify"); showCode != 0 && execCode == 0 {
		t.Error("a directory: show refuses it but execute ran")
	}
}
