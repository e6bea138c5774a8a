package actions

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/config"
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

	// Today's config saying review: none does not lift the review the plan
	// was made under (the stricter policy applies) ...
	none := base
	none.Policy = redrive.PolicySnapshot{Review: "none"}
	if _, err := Preflight(mk(), none); !errors.Is(err, ErrNotApproved) {
		t.Fatalf("review none today ran a review-required plan: %v", err)
	}
	// ... but a plan made and run under review: none needs no signatures.
	plain := mk()
	plain.Plan.Policy = redrive.PolicySnapshot{Review: "none"}
	plain = redrive.NewFile(plain.Plan)
	if _, err := Preflight(plain, none); err != nil {
		t.Fatalf("review none refused: %v", err)
	}
}

// Each refusal is typed, so the CLI and the console need not parse text.
func TestPreflightRefusalsAreTyped(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	mk := func(created time.Time) redrive.File {
		p := redrive.Plan{Cluster: "cluster-a", DLQ: "d.DLT", Policy: redrive.PolicySnapshot{Review: "none"}, CreatedAt: created,
			Records: []redrive.PlanRecord{{Partition: 0, Offset: 1, Target: "d", Verdict: redrive.Verdict{Included: true}}}}
		return redrive.NewFile(p)
	}
	base := Options{Cluster: "cluster-a", MaxAge: 24 * time.Hour, Now: func() time.Time { return now }}
	other, ro := base, base
	other.Cluster = "cluster-b"
	ro.ReadOnly = true
	unsigners := base
	unsigners.HasPolicy, unsigners.Policy = true, redrive.PolicySnapshot{Review: "required", Approvals: 1}
	for name, c := range map[string]struct {
		f    redrive.File
		o    Options
		want error
	}{
		"another cluster":                {mk(now), other, ErrClusterMismatch},
		"made next year":                 {mk(now.Add(365 * 24 * time.Hour)), base, ErrPlanFromFuture},
		"expired":                        {mk(now.Add(-25 * time.Hour)), base, ErrPlanExpired},
		"read-only":                      {mk(now), ro, ErrReadOnly},
		"review without allowed_signers": {mk(now), unsigners, ErrNoAllowedSigners},
	} {
		if _, err := Preflight(c.f, c.o); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
	// A clock a little behind the planner's is not "the future".
	if _, err := Preflight(mk(now.Add(ClockMargin/2)), base); err != nil {
		t.Errorf("created_at within the clock margin: %v", err)
	}
}

// Status judges as execute would: a plan dated ahead of the clock is not
// "ready", and an unsigned plan has no author to name.
func TestStatusOfAPlanDatedInTheFuture(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	k := &KafkaRedrive{Planner: &Planner{Config: &config.Config{}}, Now: func() time.Time { return now }, MaxAge: 24 * time.Hour}
	mk := func(created time.Time) redrive.File {
		return redrive.NewFile(redrive.Plan{Cluster: "c", DLQ: "d.DLT", Policy: redrive.PolicySnapshot{Review: "none"}, CreatedAt: created,
			Records: []redrive.PlanRecord{{Partition: 0, Offset: 1, Target: "d", Verdict: redrive.Verdict{Included: true}}}})
	}
	for created, want := range map[time.Time]string{
		now.Add(time.Hour):       "dated in the future",
		now.Add(-time.Hour):      "ready",
		now.Add(-48 * time.Hour): "expired",
		now.Add(ClockMargin / 2): "ready",
	} {
		st := k.Status(mk(created), 0)
		if st.State != want || st.Author != "(unsigned)" {
			t.Errorf("made %s: state %q author %q, want %q", created.Sub(now), st.State, st.Author, want)
		}
	}
}
