package approval

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type person struct {
	name, key, pub string
}

// newPerson makes an ed25519 key with ssh-keygen, the tool approvers use.
func newPerson(t *testing.T, dir, name string) person {
	t.Helper()
	key := filepath.Join(dir, name)
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return person{name: name, key: key, pub: strings.TrimSpace(string(pub))}
}

func allowed(t *testing.T, dir string, people ...person) (string, AllowedSigners) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# team\n")
	for _, p := range people {
		b.WriteString(p.name + "@harborcart.example namespaces=\"berth-redrive,git\" " + p.pub + "\n")
	}
	file := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadAllowedSigners(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, s
}

func sign(t *testing.T, hash string, p person, role Role) Signature {
	t.Helper()
	signer, err := LoadSigner(p.key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Sign(Subject{PlanHash: hash, Cluster: "c1"}, signer, role, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signOn signs as if the plan had been made on another cluster.
func signOn(t *testing.T, cluster, hash string, p person, role Role) Signature {
	t.Helper()
	signer, err := LoadSigner(p.key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Sign(Subject{PlanHash: hash, Cluster: cluster}, signer, role, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// restamp and asRole edit what a stored signature claims (the store is
// editable): the signed statement must still decide.
func restamp(s Signature, hash string) Signature { s.PlanHash = hash; return s }
func asRole(s Signature, r Role) Signature       { s.Role = r; return s }

const planA = "5b1e0d6c0f3a9b7e2c4d8f1a6b3e9c0d7f2a5b8e1c4d7f0a3b6e9c2d5f8a1b4e"
const planB = "0000000000000000000000000000000000000000000000000000000000000001"

func TestTwoPersonRule(t *testing.T) {
	dir := t.TempDir()
	alice, bob, carol, mallory := newPerson(t, dir, "alice"), newPerson(t, dir, "bob"), newPerson(t, dir, "carol"), newPerson(t, dir, "mallory")
	_, signers := allowed(t, dir, alice, bob, carol)
	now := time.Now()
	author := sign(t, planA, alice, RoleAuthor)

	cases := []struct {
		name      string
		approvals []Signature
		required  int
		approved  bool
		reason    string // in Decision.Reason or a Refused entry
	}{
		{"one distinct approver", []Signature{sign(t, planA, bob, RoleApproval)}, 1, true, ""},
		{"self-approval", []Signature{sign(t, planA, alice, RoleApproval)}, 1, false, "author cannot approve"},
		{"key not in allowed_signers", []Signature{sign(t, planA, mallory, RoleApproval)}, 1, false, "not in allowed_signers"},
		{"signature over another plan", []Signature{sign(t, planB, bob, RoleApproval)}, 1, false, "stored for plan"},
		{"signature over another plan, restamped", []Signature{restamp(sign(t, planB, bob, RoleApproval), planA)}, 1, false, "does not verify as approval"},
		{"author signature offered as an approval", []Signature{asRole(sign(t, planA, bob, RoleAuthor), RoleApproval)}, 1, false, "does not verify as approval"},
		{"signature made on another cluster", []Signature{signOn(t, "c2", planA, bob, RoleApproval)}, 1, false, `cluster "c1"`},
		{"too few approvers", []Signature{sign(t, planA, bob, RoleApproval)}, 2, false, "1 of 2 required approvals"},
		{"same approver twice", []Signature{sign(t, planA, bob, RoleApproval), sign(t, planA, bob, RoleApproval)}, 2, false, "already counted"},
		{"two distinct approvers", []Signature{sign(t, planA, bob, RoleApproval), sign(t, planA, carol, RoleApproval)}, 2, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Evaluate(Subject{PlanHash: planA, Cluster: "c1"}, &author, c.approvals, signers, c.required, now)
			if d.Approved != c.approved {
				t.Fatalf("approved = %v, want %v (%+v)", d.Approved, c.approved, d)
			}
			if c.reason != "" && !strings.Contains(d.Reason+strings.Join(d.Refused, ";"), c.reason) {
				t.Fatalf("want reason %q, got %+v", c.reason, d)
			}
			if d.Approved && d.Author != "alice@harborcart.example" {
				t.Fatalf("author = %q", d.Author)
			}
		})
	}
}

func TestEditedPlanVoidsApprovals(t *testing.T) {
	dir := t.TempDir()
	alice, bob := newPerson(t, dir, "alice"), newPerson(t, dir, "bob")
	_, signers := allowed(t, dir, alice, bob)
	author, approval := sign(t, planA, alice, RoleAuthor), sign(t, planA, bob, RoleApproval)
	// The plan was edited: its hash is now planB, the stored signatures are over planA.
	d := Evaluate(Subject{PlanHash: planB, Cluster: "c1"}, &author, []Signature{approval}, signers, 1, time.Now())
	if d.Approved || d.Author != "" {
		t.Fatalf("an edited plan kept its approvals: %+v", d)
	}
}

func TestInteroperatesWithSSHKeygen(t *testing.T) {
	dir := t.TempDir()
	bob := newPerson(t, dir, "bob")
	file, signers := allowed(t, dir, bob)

	// ssh-keygen signs, Berth verifies.
	msg := filepath.Join(dir, "plan.hash")
	subj := Subject{PlanHash: planA, Cluster: "c1"}
	if err := os.WriteFile(msg, Statement(RoleApproval, subj), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", Namespace, "-f", bob.key, msg).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	armored, err := os.ReadFile(msg + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	s, err := FromArmored(planA, armored, RoleApproval, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := Verify(Subject{PlanHash: planA, Cluster: "c1"}, s, signers, time.Now())
	if err != nil || v.Principal != "bob@harborcart.example" {
		t.Fatalf("verify ssh-keygen signature: %v %+v", err, v)
	}

	// Berth signs, ssh-keygen verifies.
	ours := sign(t, planA, bob, RoleApproval)
	if err := os.WriteFile(msg+".sig", []byte(ours.Armored), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", file, "-I", "bob@harborcart.example", "-n", Namespace, "-s", msg+".sig")
	cmd.Stdin = strings.NewReader(string(Statement(RoleApproval, subj)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y verify rejected Berth's signature: %v: %s", err, out)
	}
}

func TestAllowedSignersErrorsNameTheLine(t *testing.T) {
	_, err := ParseAllowedSigners("signers", []byte("# c\nalice ssh-ed25519\n"))
	if err == nil || !strings.Contains(err.Error(), "signers:2") {
		t.Fatalf("err = %v", err)
	}
	_, err = ParseAllowedSigners("signers", []byte("alice bogus=1 ssh-ed25519 AAAA\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown option "bogus"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestNamespaceRestrictionIsHonoured(t *testing.T) {
	dir := t.TempDir()
	bob := newPerson(t, dir, "bob")
	signers, err := ParseAllowedSigners("s", []byte("bob namespaces=\"git\" "+bob.pub+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(Subject{PlanHash: planA, Cluster: "c1"}, sign(t, planA, bob, RoleApproval), signers, time.Now()); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("a git-only key approved a redrive: %v", err)
	}
}

func TestEncryptedKeyIsRefusedWithAHint(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "enc")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "secret-pass", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	_, err := LoadSigner(key)
	if err == nil || !strings.Contains(err.Error(), "passphrase-protected") || strings.Contains(err.Error(), "secret-pass") {
		t.Fatalf("err = %v", err)
	}
}
