package execute

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

func key(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	k := filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", k).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	pub, _ := os.ReadFile(k + ".pub")
	return k, strings.TrimSpace(string(pub))
}

func signed(t *testing.T, f *redrive.File, keyFile string, role approval.Role) {
	t.Helper()
	s, err := approval.LoadSigner(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := approval.Sign(approval.Subject{PlanHash: f.Hash, Cluster: f.Plan.Cluster}, s, role, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f.Signatures = append(f.Signatures, sig)
}

func TestPreflightRefusals(t *testing.T) {
	dir := t.TempDir()
	aliceKey, alicePub := key(t, dir, "alice")
	bobKey, bobPub := key(t, dir, "bob")
	signers, err := approval.ParseAllowedSigners("s", []byte("alice "+alicePub+"\nbob "+bobPub+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	policy := redrive.PolicySnapshot{Review: "required", Approvals: 1}
	mk := func() redrive.File {
		p := redrive.Plan{Version: redrive.PlanVersion, DLQ: "payments.DLT", Selection: redrive.Selection{Classes: []string{"c"}},
			Policy: policy, Author: "alice", CreatedAt: now.Add(-time.Hour), BatchSize: 10,
			Records: []redrive.PlanRecord{{Partition: 0, Offset: 1, EventID: "e1", Verdict: redrive.Verdict{Included: true}}}}
		return redrive.NewFile(p)
	}
	base := Options{Policy: policy, HasPolicy: true, Signers: signers, MaxAge: 24 * time.Hour, Now: func() time.Time { return now }}

	approved := mk()
	signed(t, &approved, aliceKey, approval.RoleAuthor)
	signed(t, &approved, bobKey, approval.RoleApproval)
	if _, err := Preflight(approved, base); err != nil {
		t.Fatalf("an approved plan was refused: %v", err)
	}

	selfApproved := mk()
	signed(t, &selfApproved, aliceKey, approval.RoleAuthor)
	signed(t, &selfApproved, aliceKey, approval.RoleApproval)

	edited := approved
	edited.Plan.Records = append([]redrive.PlanRecord{}, approved.Plan.Records...)
	edited.Plan.Records[0].Offset = 2 // content changed, hash and signatures kept

	rehashed := edited
	rehashed.Hash = rehashed.Plan.Hash() // re-hashed: the old signatures are over another plan

	blocked := mk()
	blocked.Plan.Records[0].Verdict = redrive.Verdict{Reason: redrive.ReasonCheckFailed, Detail: "system of record: connection refused"}
	blocked = redrive.NewFile(blocked.Plan)
	signed(t, &blocked, aliceKey, approval.RoleAuthor)
	signed(t, &blocked, bobKey, approval.RoleApproval)

	readOnly := base
	readOnly.ReadOnly = true
	expired := base
	expired.Now = func() time.Time { return now.Add(48 * time.Hour) }

	cases := []struct {
		name string
		f    redrive.File
		o    Options
		want string
	}{
		{"read-only context", approved, readOnly, "read-only"},
		{"expired plan", approved, expired, "expired"},
		{"unapproved plan", func() redrive.File { f := mk(); signed(t, &f, aliceKey, approval.RoleAuthor); return f }(), base, "0 of 1 required approvals"},
		{"self-approval", selfApproved, base, "author cannot approve"},
		{"edited plan", edited, base, "does not match its hash"},
		{"edited and re-hashed plan", rehashed, base, "does not verify"},
		{"blocked plan", blocked, base, "blocked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Preflight(c.f, c.o)
			var r *Refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a refusal containing %q", err, c.want)
			}
		})
	}

	// No review required: no signatures needed.
	none := base
	none.Policy = redrive.PolicySnapshot{Review: "none"}
	if _, err := Preflight(mk(), none); err != nil {
		t.Fatalf("review none refused: %v", err)
	}
}
