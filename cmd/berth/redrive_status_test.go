package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The approvals count in `redrive status` is of approvals that count today:
// a signature by a key since removed from allowed_signers is not one of the
// n in "n/N" that the approving SRE reads.
func TestRedriveStatusCountsOnlyValidApprovals(t *testing.T) {
	dir := t.TempDir()
	alice, alicePub := sshKey(t, dir, "alice")
	bob, bobPub := sshKey(t, dir, "bob")
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, []byte("alice@hc "+alicePub+"\nbob@hc "+bobPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newRedriveFixture(t, 3, fmt.Sprintf("    - match: \"ledger-events.DLT\"\n      review: required\n      approvals: 1\n      allowed_signers: %s\n", signers))
	plan := f.plan(t, "--key", alice)
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "approve", plan[:12], "--key", bob); code != 0 {
		t.Fatalf("approve: exit %d %s", code, errOut)
	}
	status := func() statusRow {
		out, errOut, code := runBerth(t, "--config", f.config, "redrive", "status", "-o", "json")
		var rows []statusRow
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
			t.Fatalf("status: exit %d %s %s", code, errOut, out)
		}
		return rows[0]
	}
	if r := status(); r.Approvals != 1 || !r.Approved {
		t.Fatalf("approved plan: %+v", r)
	}
	// Bob leaves the team.
	if err := os.WriteFile(signers, []byte("alice@hc "+alicePub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := status(); r.Approvals != 0 || r.Approved || r.State != "pending approval" {
		t.Fatalf("bob's approval no longer counts: %+v", r)
	}
}
