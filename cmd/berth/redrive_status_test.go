package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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
	f := newRedriveFixture(t, 3, reviewPolicy(signers, ""))
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

// A blocked plan (a check could not run) is never shown as "ready": execute
// refuses it, so status says blocked and why.
func TestRedriveStatusShowsBlockedPlans(t *testing.T) {
	f := newRedriveFixture(t, 2, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	// A dead letter that does not say where it came from: with no --target
	// its ordering check cannot run, which blocks the plan.
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r := &kgo.Record{Topic: "ledger-events.DLT", Partition: 0, Key: []byte("acct-x"), Value: []byte(`{"eventId":"evt-orphan"}`)}
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	_, errOut, code := runBerth(t, "--config", f.config, "redrive", "plan", "ledger-events.DLT", "--offsets", fmt.Sprintf("0:0,0:%d", r.Offset), "--out", planFile)
	if code != 1 || !strings.Contains(errOut, "blocked") {
		t.Fatalf("plan: exit %d %q", code, errOut)
	}
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "status", "-o", "json")
	var rows []statusRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("status: exit %d %s %s", code, errOut, out)
	}
	if rows[0].State != "blocked" || !strings.Contains(rows[0].Reason, "0:") {
		t.Fatalf("blocked plan shown as %+v", rows[0])
	}
}

// A plan made under a review policy that no configured policy matches any
// more keeps its review (see policyFor); approving it then has no
// allowed_signers to verify against, so it is refused and nothing stored.
func TestRedriveApproveWithoutAllowedSignersIsRefused(t *testing.T) {
	dir := t.TempDir()
	signers, alice, _, bob := signersFile(t, dir)
	f := newRedriveFixture(t, 2, reviewPolicy(signers, ""))
	plan := f.plan(t, "--key", alice)
	noPolicy := writeConfig(t, fmt.Sprintf("current_context: test\ncontexts:\n  test:\n    kind: kafka\n    bootstrap: [%s]\naudit:\n  file: %s\n", f.kc.Addrs[0], f.audit))
	_, errOut, code := runBerth(t, "--config", noPolicy, "redrive", "approve", plan[:12], "--key", bob)
	if code != 1 || !strings.Contains(errOut, "allowed_signers") || !strings.Contains(errOut, noPolicy) {
		t.Fatalf("approve: exit %d %q", code, errOut)
	}
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "status", "-o", "json")
	var rows []statusRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Approvals != 0 || rows[0].Approved {
		t.Fatalf("status after a refused approval: exit %d %s %s", code, errOut, out)
	}
}
