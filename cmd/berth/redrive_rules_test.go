package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// One rule suite, run against both backends through the command line a
// user runs (issue 13: "the same rules on both backends"): the bundled
// Kafka broker (kfake, in-process) and the machine's RabbitMQ. Each rule
// gets a fresh DLQ of ruleN failed records; a backend that truly cannot
// follow a rule would say so here in one line (none does).

const ruleN = 3

// ruleEnv is one backend's DLQ, its config and how to count what a plan
// delivered to the DLQ's original destination.
type ruleEnv struct {
	backend string
	dlq     string
	config  string
	audit   string
	dir     string
	// sent counts the copies of plan (hash) that reached the target.
	sent func(t *testing.T, plan string) int
}

// policy is a redrive.policies entry for the DLQ (YAML, indented).
func (e ruleEnv) policyFor(lines ...string) string {
	return fmt.Sprintf("    - match: %q\n", e.dlq) + strings.Join(lines, "")
}

func (e ruleEnv) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runBerth(t, append(args, "--config", e.config)...)
}

// planAll makes a plan over every DLQ record (--all) and returns its file
// and hash.
func (e ruleEnv) planAll(t *testing.T, extra ...string) (file, hash string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "plan.json")
	out, errOut, code := e.run(t, append([]string{"redrive", "plan", e.dlq, "--all", "--out", file, "-o", "json"}, extra...)...)
	if code != 0 {
		t.Fatalf("%s: redrive plan --all: exit %d %s", e.backend, code, errOut)
	}
	var p struct {
		Hash   string `json:"hash"`
		Totals struct {
			Selected int `json:"selected"`
			Included int `json:"included"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%s: plan output: %v %s", e.backend, err, out)
	}
	if p.Totals.Selected != ruleN || p.Totals.Included != ruleN {
		t.Fatalf("%s: --all selected %d and included %d of %d: %s", e.backend, p.Totals.Selected, p.Totals.Included, ruleN, out)
	}
	return file, p.Hash
}

// kafkaRuleEnv is a bundled broker whose ledger-events.DLT holds ruleN
// records with Spring DLT headers.
func kafkaRuleEnv(t *testing.T, policy func(ruleEnv) string) ruleEnv {
	e := ruleEnv{backend: "kafka", dlq: "ledger-events.DLT"}
	f := newRedriveFixture(t, ruleN, policy(e))
	e.config, e.audit, e.dir = f.config, f.audit, filepath.Dir(f.audit)
	e.sent = func(t *testing.T, plan string) int { return f.state(t, plan) }
	return e
}

// rabbitRuleEnv is a RabbitMQ work queue whose ruleN rejected messages
// lie in a DLQ, and a config with a redrive store and an audit file.
func rabbitRuleEnv(t *testing.T, policy func(ruleEnv) string) ruleEnv {
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, ruleN)
	e := ruleEnv{backend: "rabbitmq", dlq: dlq, dir: t.TempDir()}
	e.audit = filepath.Join(e.dir, "audit.log")
	e.config = writeConfig(t, fmt.Sprintf(`current_context: rmq
contexts:
  rmq:
    kind: rabbitmq
    amqp_url: %s
    management_url: %s
audit:
  file: %s
redrive:
  store_dsn: %s
  policies:
%s`, testAMQPURL(), testManagementURL(), e.audit, filepath.Join(e.dir, "ledger.db"), policy(e)))
	e.sent = func(t *testing.T, plan string) int {
		t.Helper()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive(work, false, true, false, false, amqp.Table{"x-dead-letter-exchange": "x"})
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}
	return e
}

var ruleBackends = []struct {
	name string
	env  func(t *testing.T, policy func(ruleEnv) string) ruleEnv
}{
	{"kafka", kafkaRuleEnv},
	{"rabbitmq", rabbitRuleEnv},
}

func noReview(e ruleEnv) string { return e.policyFor("      review: none\n") }

// signersFile writes an allowed_signers file: alice with two keys (one
// principal), bob with one. It returns the key files.
func signersFile(t *testing.T, dir string) (file, alice, alice2, bob string) {
	alice, alicePub := rmqSSHKey(t, dir, "alice")
	alice2, alice2Pub := rmqSSHKey(t, dir, "alice-laptop")
	bob, bobPub := rmqSSHKey(t, dir, "bob")
	file = filepath.Join(dir, "allowed_signers")
	list := "alice@hc " + alicePub + "\nalice@hc " + alice2Pub + "\nbob@hc " + bobPub + "\n"
	if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, alice, alice2, bob
}

func TestRedriveRulesOnBothBackends(t *testing.T) {
	for _, b := range ruleBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Run("execute without --yes sends nothing and prints the dry run", func(t *testing.T) {
				e := b.env(t, noReview)
				file, hash := e.planAll(t)
				out, errOut, code := e.run(t, "redrive", "execute", file, "-o", "json")
				if code != 0 || !strings.Contains(out, `"dry_run": true`) {
					t.Errorf("execute without --yes (no terminal): exit %d, want 0 and a dry run:\n%s%s", code, out, errOut)
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d record(s) sent without --yes", n)
				}
			})

			t.Run("--all selects every record, --read smaller than the DLQ refuses", func(t *testing.T) {
				e := b.env(t, noReview)
				e.planAll(t) // asserts all ruleN are selected and included
				file := filepath.Join(t.TempDir(), "short.json")
				_, errOut, code := e.run(t, "redrive", "plan", e.dlq, "--all", "--read", "2", "--out", file)
				if code == 0 || !strings.Contains(errOut, "--read") {
					t.Errorf("--all over a DLQ larger than --read: exit %d %q; want a refusal naming --read", code, errOut)
				}
				if _, err := os.Stat(file); err == nil {
					t.Errorf("a truncated plan was written")
				}
			})

			t.Run("two-person rule by key and by principal", func(t *testing.T) {
				signers, alice, alice2, bob := signersFile(t, t.TempDir())
				e := b.env(t, func(e ruleEnv) string {
					return e.policyFor("      review: required\n      approvals: 1\n", fmt.Sprintf("      allowed_signers: %s\n", signers))
				})
				_, hash := e.planAll(t, "--key", alice)
				for key, who := range map[string]string{alice: "the author's key", alice2: "the author's other key"} {
					if _, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", key); code == 0 || !strings.Contains(errOut, "author cannot approve") {
						t.Errorf("approve with %s: exit %d %q; want the two-person rule", who, code, errOut)
					}
				}
				if _, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", bob); code != 0 {
					t.Errorf("approve by another person: exit %d %s", code, errOut)
				}
			})

			t.Run("no allowed_signers refuses the approval, storing nothing", func(t *testing.T) {
				dir := t.TempDir()
				signers, alice, _, bob := signersFile(t, dir)
				reviewed := func(e ruleEnv) string {
					return e.policyFor("      review: required\n      approvals: 1\n", fmt.Sprintf("      allowed_signers: %s\n", signers))
				}
				e := b.env(t, reviewed)
				_, hash := e.planAll(t, "--key", alice)
				// Today's config lost the policy: the plan still requires
				// review, and nothing can verify an approval.
				cfg, err := os.ReadFile(e.config)
				if err != nil {
					t.Fatal(err)
				}
				bare := strings.Replace(string(cfg), reviewed(e), "", 1)
				e.config = writeConfig(t, strings.Replace(bare, "  policies:\n", "", 1))
				if _, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", bob); code == 0 || !strings.Contains(errOut, "allowed_signers") {
					t.Errorf("approve with no allowed_signers: exit %d %q; want a refusal", code, errOut)
				}
				if _, _, code := e.run(t, "redrive", "execute", hash[:12], "--yes"); code == 0 {
					t.Errorf("execute of a plan that requires review, with no allowed_signers: exit 0")
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d record(s) sent", n)
				}
			})

			t.Run("an unwritable audit log refuses execute", func(t *testing.T) {
				e := b.env(t, noReview)
				_, hash := e.planAll(t)
				blocked := filepath.Join(t.TempDir(), "audit.log")
				if err := os.Mkdir(blocked, 0o700); err != nil {
					t.Fatal(err)
				}
				if _, errOut, code := e.run(t, "redrive", "execute", hash[:12], "--yes", "--audit-file", blocked); code == 0 || !strings.Contains(errOut, "audit") {
					t.Errorf("execute with an unwritable audit log: exit %d %q; want a refusal", code, errOut)
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d record(s) sent without an audit log", n)
				}
			})

			t.Run("audit entries carry the same names and are mirrored off the machine", func(t *testing.T) {
				e := b.env(t, noReview)
				_, hash := e.planAll(t)
				if _, errOut, code := e.run(t, "redrive", "execute", hash[:12], "--yes", "--watch", "0"); code != 0 {
					t.Fatalf("execute: exit %d %s", code, errOut)
				}
				if n := e.sent(t, hash); n != ruleN {
					t.Fatalf("sent %d, want %d", n, ruleN)
				}
				got := " " + auditActions(t, e.audit) + " "
				for _, want := range []string{"redrive.plan", "redrive.execute.started", "redrive.batch.sent", "redrive.execute.finished", "redrive.verified"} {
					if !strings.Contains(got, " "+want+" ") {
						t.Errorf("audit log lacks %s: %s", want, got)
					}
				}
				out, errOut, code := e.run(t, "audit", "verify")
				if code != 0 || !strings.Contains(out, "audit mirror") || !strings.Contains(out, e.audit) {
					t.Errorf("audit verify: exit %d, want the mirror checked:\n%s%s", code, out, errOut)
				}
			})
		})
	}
}
