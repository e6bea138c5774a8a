package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/audit"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	// drop removes one record from the DLQ behind berth's back (another
	// consumer, a retention cut).
	drop func(t *testing.T)
	// deleteDLQ deletes the DLQ (topic or queue) behind berth's back.
	deleteDLQ func(t *testing.T)
	// storeUnder writes a record that is not a usable plan under hash in
	// the backend's plan store, behind berth's back.
	storeUnder func(t *testing.T, hash string)
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
	e.storeUnder = func(t *testing.T, hash string) {
		f.kc.Produce(t, &kgo.Record{Topic: kafka.PlanTopic, Key: []byte("plan/" + hash), Value: []byte("{}")})
	}
	admin := func(t *testing.T) *kadm.Client {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(f.kc.Addrs...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	e.deleteDLQ = func(t *testing.T) {
		t.Helper()
		if _, err := admin(t).DeleteTopic(context.Background(), e.dlq); err != nil {
			t.Fatal(err)
		}
	}
	e.drop = func(t *testing.T) {
		t.Helper()
		adm := admin(t)
		ends, err := adm.ListEndOffsets(context.Background(), e.dlq)
		if err != nil {
			t.Fatal(err)
		}
		// Cut the log's first record on the first partition that has one.
		for p := int32(0); ; p++ {
			o, ok := ends.Lookup(e.dlq, p)
			if !ok {
				t.Fatalf("%s holds no record to drop", e.dlq)
			}
			if o.Offset > 0 {
				var cut kadm.Offsets
				cut.Add(kadm.Offset{Topic: e.dlq, Partition: p, At: 1})
				if _, err := adm.DeleteRecords(context.Background(), cut); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	return e
}

// rabbitRuleEnv is a RabbitMQ work queue whose ruleN rejected messages
// lie in a DLQ, and a config with a redrive store and an audit file.
func rabbitRuleEnv(t *testing.T, policy func(ruleEnv) string) ruleEnv {
	isolateConfig(t)
	conn, _, work, dlq := rmqDLQ(t, ruleN)
	e := ruleEnv{backend: "rabbitmq", dlq: dlq, dir: t.TempDir()}
	e.audit = filepath.Join(e.dir, "audit.log")
	e.config = rabbitConfig{Audit: e.audit, Store: filepath.Join(e.dir, "ledger.db"), Policies: policy(e)}.write(t)
	channel := func(t *testing.T) *amqp.Channel {
		t.Helper()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ch.Close() })
		return ch
	}
	e.sent = func(t *testing.T, plan string) int {
		t.Helper()
		q, err := channel(t).QueueDeclarePassive(work, false, true, false, false, amqp.Table{"x-dead-letter-exchange": "x"})
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}
	e.storeUnder = func(t *testing.T, hash string) {
		db, err := sql.Open("sqlite", filepath.Join(e.dir, "ledger.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`INSERT INTO berth_rabbitmq_plans (hash, vhost, dlq, created_at, body) VALUES (?, '/', ?, '2026-11-30T10:00:00Z', '{}')`, hash, dlq); err != nil {
			t.Fatal(err)
		}
	}
	e.deleteDLQ = func(t *testing.T) {
		t.Helper()
		if _, err := channel(t).QueueDelete(dlq, false, false, false); err != nil {
			t.Fatal(err)
		}
	}
	e.drop = func(t *testing.T) {
		t.Helper()
		if _, ok, err := channel(t).Get(dlq, true); err != nil || !ok {
			t.Fatalf("take one message from %s: %v (got one: %v)", dlq, err, ok)
		}
	}
	return e
}

// executeCore is the JSON both backends print for execute: the same field
// names with the same meanings (issue 13, divergence #25).
type executeCore struct {
	Backend     string `json:"backend"`
	Plan        string `json:"plan"`
	DLQ         string `json:"dlq"`
	Sent        *int   `json:"sent"`
	AlreadySent *int   `json:"already_sent"`
	Excluded    *int   `json:"excluded"`
	Skipped     []struct {
		Record string `json:"record"`
		Reason string `json:"reason"`
	} `json:"skipped"`
	Failed       []any    `json:"failed"`
	Cancelled    *bool    `json:"cancelled"`
	Approvers    []string `json:"approvers"`
	Problems     []string `json:"problems"`
	Verification *struct {
		OK       *bool  `json:"ok"`
		Watched  string `json:"watched"`
		Refailed *int   `json:"refailed"`
	} `json:"verification"`
	Kafka    json.RawMessage `json:"kafka"`
	RabbitMQ json.RawMessage `json:"rabbitmq"`
}

// execute runs execute --yes -o json and decodes the common core, failing
// when a core field is missing or a list is null. It returns stdout and
// stderr together, then stderr alone.
func (e ruleEnv) execute(t *testing.T, hash string) (executeCore, string, string, int) {
	t.Helper()
	out, errOut, code := e.run(t, "redrive", "execute", hash[:12], "--yes", "--watch", "0", "-o", "json")
	var c executeCore
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("%s: execute output: %v\n%s%s", e.backend, err, out, errOut)
	}
	if c.Backend != e.backend || c.Plan != hash || c.DLQ != e.dlq || c.Sent == nil || c.AlreadySent == nil || c.Excluded == nil ||
		c.Skipped == nil || c.Failed == nil || c.Cancelled == nil || c.Approvers == nil || c.Problems == nil {
		t.Errorf("%s: execute JSON lacks a core field:\n%s", e.backend, out)
	}
	if v := c.Verification; v == nil || v.OK == nil || v.Refailed == nil || v.Watched == "" {
		t.Errorf("%s: execute JSON lacks verification{ok,watched,refailed}:\n%s", e.backend, out)
	}
	own, other := c.Kafka, c.RabbitMQ
	if e.backend == "rabbitmq" {
		own, other = other, own
	}
	if own == nil || other != nil {
		t.Errorf("%s: backend extras must sit under %q only:\n%s", e.backend, e.backend, out)
	}
	return c, out + errOut, errOut, code
}

var ruleBackends = []struct {
	name string
	env  func(t *testing.T, policy func(ruleEnv) string) ruleEnv
	// nothing is a selection that matches none of the DLQ's records, in
	// the backend's own selectors.
	nothing []string
}{
	{"kafka", kafkaRuleEnv, []string{"--header", "no-such-header=x"}},
	{"rabbitmq", rabbitRuleEnv, []string{"--reason", "expired"}},
}

func noReview(e ruleEnv) string { return e.policyFor("      review: none\n") }

// signersFile writes an allowed_signers file: alice with two keys (one
// principal), bob with one. It returns the key files.
func signersFile(t *testing.T, dir string) (file, alice, alice2, bob string) {
	alice, alicePub := sshKey(t, dir, "alice")
	alice2, alice2Pub := sshKey(t, dir, "alice-laptop")
	bob, bobPub := sshKey(t, dir, "bob")
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
				// What it would send, per target, in the same shape on both
				// (RabbitMQ printed one number).
				var dry struct {
					WouldSend map[string]int `json:"would_send"`
				}
				if err := json.Unmarshal([]byte(out), &dry); err != nil || len(dry.WouldSend) != 1 {
					t.Errorf("dry run would_send: %v, want one target with the %d records:\n%s", err, ruleN, out)
				}
				for target, n := range dry.WouldSend {
					if n != ruleN || target == "" {
						t.Errorf("dry run would send %d to %q, want %d to the records' target", n, target, ruleN)
					}
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d record(s) sent without --yes", n)
				}
			})

			t.Run("the plan file is format v2, the same shape on both, and the review is derived", func(t *testing.T) {
				e := b.env(t, noReview)
				file, hash := e.planAll(t)
				script := filepath.Join("..", "..", "testdata", "redrive", "planhash.py")
				if got, err := exec.Command("python3", script, file).CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != hash {
					t.Errorf("planhash.py: %v %q, want %s", err, got, hash)
				}
				raw, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				var doc struct {
					Hash       string            `json:"hash"`
					Signatures []json.RawMessage `json:"signatures"`
					Plan       struct {
						Format  string               `json:"format"`
						Backend string               `json:"backend"`
						Cluster string               `json:"cluster"`
						Targets []string             `json:"targets"`
						Rows    [][4]json.RawMessage `json:"rows"`
					} `json:"plan"`
				}
				dec := json.NewDecoder(strings.NewReader(string(raw)))
				if err := dec.Decode(&doc); err != nil {
					t.Fatalf("plan file: %v %s", err, raw)
				}
				if doc.Hash != hash || doc.Signatures == nil || doc.Plan.Format != "berth-redrive-plan/v2" || doc.Plan.Backend != b.name || doc.Plan.Cluster == "" ||
					len(doc.Plan.Targets) != 1 || len(doc.Plan.Rows) != ruleN {
					t.Fatalf("not a v2 plan of %d rows to one target: %s", ruleN, raw)
				}
				for _, row := range doc.Plan.Rows {
					var loc, digest, verdict string
					var target int
					if json.Unmarshal(row[0], &loc) != nil || json.Unmarshal(row[1], &digest) != nil || len(digest) != 43 ||
						json.Unmarshal(row[2], &target) != nil || target != 0 || json.Unmarshal(row[3], &verdict) != nil || verdict != "" {
						t.Errorf("row %s: want [loc, digest, 0, \"\"]", row)
					}
				}
				out, errOut, code := e.run(t, "redrive", "show", hash[:12], "-o", "json")
				var shown struct {
					Review struct {
						Targets []struct {
							Included int `json:"included"`
						} `json:"targets"`
						Keys []string `json:"idempotency_keys"`
					} `json:"review"`
				}
				if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Review.Targets) != 1 || shown.Review.Targets[0].Included != ruleN || len(shown.Review.Keys) != ruleN {
					t.Errorf("show: exit %d, want the review derived from the %d records (one target, their keys):\n%s%s", code, ruleN, out, errOut)
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

			t.Run("--batch-size above the maximum is refused in one line naming the flag and the limit, exit 2", func(t *testing.T) {
				e := b.env(t, noReview)
				file := filepath.Join(t.TempDir(), "huge.json")
				// A thousand million crashed execute out of memory (RabbitMQ)
				// or made one transaction of the whole plan (Kafka).
				for _, n := range []string{"10001", "1000000000"} {
					_, errOut, code := e.run(t, "redrive", "plan", e.dlq, "--all", "--batch-size", n, "--out", file)
					if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--batch-size: "+n+" is more than 10000") {
						t.Errorf("--batch-size %s: exit %d %q; want exit 2 and one line naming the flag and 10000", n, code, errOut)
					}
				}
				if _, err := os.Stat(file); err == nil {
					t.Errorf("a plan was written")
				}
				e.planAll(t, "--batch-size", "10000") // the maximum itself is a plan
			})

			t.Run("a selection of no record is refused in one line naming it, nothing written or stored", func(t *testing.T) {
				e := b.env(t, noReview)
				file := filepath.Join(t.TempDir(), "empty.json")
				_, errOut, code := e.run(t, append([]string{"redrive", "plan", e.dlq, "--out", file}, b.nothing...)...)
				if code != 1 || strings.Count(errOut, "berth: ") != 1 || !strings.Contains(errOut, "matches no record in "+e.dlq) ||
					!strings.Contains(errOut, strings.Join(b.nothing, " ")) {
					t.Errorf("plan of nothing: exit %d %q; want exit 1 and one line naming the selection %v and %s", code, errOut, b.nothing, e.dlq)
				}
				if _, err := os.Stat(file); err == nil {
					t.Errorf("a plan of nothing was written to --out")
				}
				out, errOut, code := e.run(t, "redrive", "status", "-o", "json")
				var plans []json.RawMessage
				if code != 0 || json.Unmarshal([]byte(out), &plans) != nil || len(plans) != 0 {
					t.Errorf("redrive status after a plan of nothing: exit %d, want no plan stored:\n%s%s", code, out, errOut)
				}
				if got := auditActions(t, e.audit); strings.Contains(got, "redrive.plan") {
					t.Errorf("a plan of nothing was audited as made: %s", got)
				}
			})

			t.Run("a plan that is not there is named the same way by every command, exit 1", func(t *testing.T) {
				_, alice, _, _ := signersFile(t, t.TempDir())
				e := b.env(t, noReview)
				e.planAll(t) // the store exists and holds another plan
				const missing = "0123456789ab"
				want := regexp.MustCompile(`^berth: plan ` + missing + `: not in the plan store \([^)]+\)\n$`)
				for _, args := range [][]string{{"show", missing}, {"status", missing}, {"approve", missing, "--key", alice}, {"sign", missing, "--key", alice}, {"execute", missing, "--yes"}} {
					_, errOut, code := e.run(t, append([]string{"redrive"}, args...)...)
					if code != 1 || !want.MatchString(errOut) {
						t.Errorf("redrive %s of an unknown plan: exit %d %q; want exit 1 and one line matching %s", args[0], code, errOut, want)
					}
				}
			})

			t.Run("a prefix two stored plans share is named the same way by every command, exit 1", func(t *testing.T) {
				_, alice, _, _ := signersFile(t, t.TempDir())
				e := b.env(t, noReview)
				_, hash := e.planAll(t)
				twin := hash[:8] + strings.Repeat("0", 56)
				if twin[8] == hash[8] {
					twin = hash[:8] + strings.Repeat("1", 56)
				}
				e.storeUnder(t, twin)
				want := regexp.MustCompile(`^berth: plan ` + hash[:8] + `: ambiguous, 2 plans match: give more digits\n$`)
				for _, args := range [][]string{{"show", hash[:8]}, {"status", hash[:8]}, {"approve", hash[:8], "--key", alice}, {"sign", hash[:8], "--key", alice}, {"execute", hash[:8], "--yes"}} {
					_, errOut, code := e.run(t, append([]string{"redrive"}, args...)...)
					if code != 1 || !want.MatchString(errOut) {
						t.Errorf("redrive %s of a shared prefix: exit %d %q; want exit 1 and one line matching %s", args[0], code, errOut, want)
					}
				}
				if out, errOut, code := e.run(t, "redrive", "show", hash[:9], "-o", "json"); code != 0 || !strings.Contains(out, hash) {
					t.Errorf("show with one more digit: exit %d %s", code, errOut)
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d sent on a shared prefix, want none", n)
				}
			})

			t.Run("a PLAN that is neither a file nor 8+ hex digits is refused the same way by every command, exit 2", func(t *testing.T) {
				_, alice, _, _ := signersFile(t, t.TempDir())
				e := b.env(t, noReview)
				_, hash := e.planAll(t)
				for _, ref := range []string{hash[:7], filepath.Join(t.TempDir(), "no-such-plan.json")} {
					want := regexp.MustCompile(`^berth: PLAN: ` + regexp.QuoteMeta(ref) + ` is neither a plan file nor a plan hash \(8\+ hex digits\)\n$`)
					for _, args := range [][]string{{"show", ref}, {"status", ref}, {"approve", ref, "--key", alice}, {"sign", ref, "--key", alice}, {"execute", ref, "--yes"}} {
						_, errOut, code := e.run(t, append([]string{"redrive"}, args...)...)
						if code != 2 || !want.MatchString(errOut) {
							t.Errorf("redrive %s %s: exit %d %q; want exit 2 and one line matching %s", args[0], ref, code, errOut, want)
						}
					}
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d sent, want none", n)
				}
			})

			t.Run("two-person rule by key and by principal", func(t *testing.T) {
				signers, alice, alice2, bob := signersFile(t, t.TempDir())
				e := b.env(t, func(e ruleEnv) string {
					return e.policyFor("      review: required\n      approvals: 1\n", fmt.Sprintf("      allowed_signers: %s\n", signers))
				})
				_, hash := e.planAll(t, "--key", alice)
				// One refusal, worded the same on both backends (it named
				// the principal on Kafka only).
				for key, want := range map[string]*regexp.Regexp{
					alice:  regexp.MustCompile(`^berth: refused: the plan's author cannot approve it \(two-person rule: the author's key\); nothing stored\n$`),
					alice2: regexp.MustCompile(`^berth: refused: the plan's author cannot approve it \(two-person rule: alice@hc is its author\); nothing stored\n$`),
				} {
					if _, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", key); code != 1 || !want.MatchString(errOut) {
						t.Errorf("approve with %s: exit %d %q; want exit 1 and %s", key, code, errOut, want)
					}
				}
				out, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", bob, "-o", "json")
				var got map[string]json.RawMessage
				if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
					t.Fatalf("approve by another person: exit %d %s%s", code, out, errOut)
				}
				// The keys the manual gives approve's JSON, on both.
				for _, k := range []string{"plan", "dlq", "signer", "fingerprint", "decision", "summary"} {
					if _, ok := got[k]; !ok {
						t.Errorf("approve -o json lacks %q:\n%s", k, out)
					}
				}
				var dec struct {
					Approved bool `json:"approved"`
				}
				if !strings.Contains(string(got["signer"]), "bob@hc") || json.Unmarshal(got["decision"], &dec) != nil || !dec.Approved {
					t.Errorf("approve -o json: signer %s, decision %s", got["signer"], got["decision"])
				}
				// What an approver signs names the verified author and the
				// records' classes, derived from them (a v2 plan holds
				// neither): approve's summary and status PLAN's alike.
				var summary struct {
					Author string `json:"author"`
					Totals struct {
						ByClass map[string]json.RawMessage `json:"by_class"`
					} `json:"totals"`
				}
				if json.Unmarshal(got["summary"], &summary) != nil || summary.Author != "alice@hc" {
					t.Errorf("approve -o json: summary %s, want the author alice@hc", got["summary"])
				}
				out, errOut, code = e.run(t, "redrive", "status", hash[:12], "-o", "json")
				var st struct {
					Summary json.RawMessage `json:"summary"`
				}
				summary.Author, summary.Totals.ByClass = "", nil
				if code != 0 || json.Unmarshal([]byte(out), &st) != nil || json.Unmarshal(st.Summary, &summary) != nil {
					t.Fatalf("status PLAN: exit %d %s%s", code, out, errOut)
				}
				if _, unknown := summary.Totals.ByClass[""]; summary.Author != "alice@hc" || unknown || len(summary.Totals.ByClass) == 0 {
					t.Errorf("status PLAN -o json: summary %s, want the author alice@hc and the records' classes", st.Summary)
				}
			})

			t.Run("a plan made without --key is signed by its author later, once, never in read-only", func(t *testing.T) {
				signers, alice, _, bob := signersFile(t, t.TempDir())
				e := b.env(t, func(e ruleEnv) string {
					return e.policyFor("      review: required\n      approvals: 1\n", fmt.Sprintf("      allowed_signers: %s\n", signers))
				})
				_, hash := e.planAll(t)
				author := func() string {
					out, errOut, code := e.run(t, "redrive", "status", hash[:12], "-o", "json")
					var st struct {
						Author string `json:"author"`
					}
					if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
						t.Fatalf("status: exit %d %s%s", code, out, errOut)
					}
					return st.Author
				}
				if got := author(); got != "(unsigned)" {
					t.Fatalf("author of a plan made without --key: %q", got)
				}
				if _, errOut, code := e.run(t, "--read-only", "redrive", "sign", hash[:12], "--key", alice); code == 0 || !strings.Contains(errOut, "read-only") {
					t.Errorf("sign in read-only: exit %d %q; want a refusal", code, errOut)
				}
				out, errOut, code := e.run(t, "redrive", "sign", hash[:12], "--key", alice, "-o", "json")
				if code != 0 || !strings.Contains(out, `"author_key": "SHA256:`) {
					t.Fatalf("sign: exit %d %s%s", code, out, errOut)
				}
				if got := author(); got != "alice@hc" {
					t.Errorf("author after redrive sign: %q, want alice@hc", got)
				}
				if _, errOut, code := e.run(t, "redrive", "sign", hash[:12], "--key", bob); code == 0 || !strings.Contains(errOut, "already signed by its author") {
					t.Errorf("a second author: exit %d %q; want a refusal", code, errOut)
				}
				// The author's signature now counts as the author's: the
				// two-person rule applies to it.
				if _, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", alice); code == 0 || !strings.Contains(errOut, "author cannot approve") {
					t.Errorf("approve by the author who signed later: exit %d %q", code, errOut)
				}
				if !strings.Contains(auditActions(t, e.audit), "redrive.plan.signed") {
					t.Errorf("redrive sign not audited")
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
				// The refusal names the file to edit: the config, whose
				// policies no longer cover the DLQ.
				if _, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", bob); code == 0 || !strings.Contains(errOut, "allowed_signers") || !strings.Contains(errOut, e.config) {
					t.Errorf("approve with no allowed_signers: exit %d %q; want a refusal naming %s", code, errOut, e.config)
				}
				if _, errOut, code := e.run(t, "redrive", "execute", hash[:12], "--yes"); code == 0 || !strings.Contains(errOut, e.config) {
					t.Errorf("execute of a plan that requires review, with no allowed_signers: exit %d %q; want a refusal naming %s", code, errOut, e.config)
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d record(s) sent", n)
				}
			})

			t.Run("an allowed_signers file with no key refuses, naming the file", func(t *testing.T) {
				// As `berth demo` leaves it: the policy names the file, no
				// approver has been added yet.
				dir := t.TempDir()
				_, alice, _, bob := signersFile(t, dir)
				empty := filepath.Join(dir, "empty_signers")
				if err := os.WriteFile(empty, []byte("# approvers, one a line\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				e := b.env(t, func(e ruleEnv) string {
					return e.policyFor("      review: required\n      approvals: 1\n", fmt.Sprintf("      allowed_signers: %s\n", empty))
				})
				_, hash := e.planAll(t, "--key", alice)
				for _, args := range [][]string{{"approve", hash[:12], "--key", bob}, {"execute", hash[:12], "--yes"}} {
					_, errOut, code := e.run(t, append([]string{"redrive"}, args...)...)
					if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") > 0 || !strings.Contains(errOut, "allowed_signers file "+empty+" lists no key") {
						t.Errorf("%s with an empty allowed_signers: exit %d %q; want one line naming %s", args[0], code, errOut, empty)
					}
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
				// One line: RabbitMQ said it twice (a warning, then the refusal).
				if _, errOut, code := e.run(t, "redrive", "execute", hash[:12], "--yes", "--audit-file", blocked); code == 0 || !strings.Contains(errOut, "audit") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
					t.Errorf("execute with an unwritable audit log: exit %d %q; want a refusal in one line", code, errOut)
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d record(s) sent without an audit log", n)
				}
			})

			t.Run("an unwritable audit log refuses plan and sign, storing or writing nothing", func(t *testing.T) {
				signers, alice, _, _ := signersFile(t, t.TempDir())
				e := b.env(t, func(e ruleEnv) string {
					return e.policyFor("      review: required\n      approvals: 1\n", fmt.Sprintf("      allowed_signers: %s\n", signers))
				})
				_, made := e.planAll(t) // unsigned, stored while the log could be written
				blocked := filepath.Join(t.TempDir(), "audit.log")
				if err := os.Mkdir(blocked, 0o700); err != nil {
					t.Fatal(err)
				}
				// redrive plan exited 0 with the plan stored, the failure a
				// warning.
				file := filepath.Join(t.TempDir(), "p.json")
				_, errOut, code := e.run(t, "redrive", "plan", e.dlq, "--all", "--key", alice, "--out", file, "--audit-file", blocked)
				if code != 1 || !strings.Contains(errOut, "berth: refused: audit log: ") || !strings.Contains(errOut, blocked) || !strings.Contains(errOut, "nothing stored") ||
					strings.Count(errOut, "berth: ") != 1 {
					t.Errorf("plan with an unwritable audit log: exit %d %q; want exit 1 and one line naming %s", code, errOut, blocked)
				}
				if _, err := os.Stat(file); err == nil {
					t.Errorf("the refused plan was written to --out")
				}
				out, errOut, code := e.run(t, "redrive", "status", "-o", "json")
				var plans []struct {
					Plan string `json:"plan"`
				}
				if code != 0 || json.Unmarshal([]byte(out), &plans) != nil || len(plans) != 1 || plans[0].Plan != made {
					t.Errorf("status after a refused plan: exit %d, want only the plan made before:\n%s%s", code, out, errOut)
				}
				// sign has no --audit-file: the config's log is made unwritable.
				if err := os.Remove(e.audit); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(e.audit, 0o700); err != nil {
					t.Fatal(err)
				}
				if _, errOut, code := e.run(t, "redrive", "sign", made[:12], "--key", alice); code != 1 || !strings.Contains(errOut, "audit log") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
					t.Errorf("sign with an unwritable audit log: exit %d %q; want a refusal in one line", code, errOut)
				}
				out, errOut, code = e.run(t, "redrive", "status", made[:12], "-o", "json")
				var st struct {
					Author string `json:"author"`
				}
				if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Author != "(unsigned)" {
					t.Errorf("status after a refused sign: exit %d, author %q, want (unsigned):\n%s%s", code, st.Author, out, errOut)
				}
			})

			t.Run("an unwritable audit log refuses approve, storing nothing", func(t *testing.T) {
				signers, alice, _, bob := signersFile(t, t.TempDir())
				e := b.env(t, func(e ruleEnv) string {
					return e.policyFor("      review: required\n      approvals: 1\n", fmt.Sprintf("      allowed_signers: %s\n", signers))
				})
				_, hash := e.planAll(t, "--key", alice)
				blocked := filepath.Join(t.TempDir(), "audit.log")
				if err := os.Mkdir(blocked, 0o700); err != nil {
					t.Fatal(err)
				}
				if _, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", bob, "--audit-file", blocked); code == 0 || !strings.Contains(errOut, "audit") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
					t.Errorf("approve with an unwritable audit log: exit %d %q; want a refusal in one line", code, errOut)
				}
				// RabbitMQ stored the approval, then failed to audit it: an
				// approval on record nowhere in the audit log.
				out, errOut, code := e.run(t, "redrive", "status", hash[:12], "-o", "json")
				var st struct {
					Approvals int `json:"approvals"`
				}
				if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Approvals != 0 {
					t.Errorf("status after a refused approval: exit %d, %d approval(s) counted, want 0:\n%s%s", code, st.Approvals, out, errOut)
				}
			})

			t.Run("execute prints the same JSON core; exit 0 when every record was sent, again 0 on a rerun (already sent)", func(t *testing.T) {
				e := b.env(t, noReview)
				_, hash := e.planAll(t)
				c, out, _, code := e.execute(t, hash)
				if code != 0 || *c.Sent != ruleN || *c.AlreadySent != 0 || len(c.Skipped) != 0 || len(c.Failed) != 0 || len(c.Problems) != 0 || !*c.Verification.OK {
					t.Fatalf("execute: exit %d, want 0 with %d sent:\n%s", code, ruleN, out)
				}
				c, out, _, code = e.execute(t, hash)
				if code != 0 || *c.Sent != 0 || *c.AlreadySent != ruleN || len(c.Skipped) != 0 || len(c.Problems) != 0 {
					t.Errorf("rerun of a finished plan: exit %d, want 0 with %d already sent:\n%s", code, ruleN, out)
				}
				if n := e.sent(t, hash); n != ruleN {
					t.Errorf("%d copies reached the target, want %d", n, ruleN)
				}
			})

			t.Run("a record gone from the DLQ is skipped as record_gone, the rest sent, exit 1", func(t *testing.T) {
				e := b.env(t, noReview)
				_, hash := e.planAll(t)
				e.drop(t)
				// The review names it gone and lists only the keys it can
				// derive, the same on both: a gone record's key read "" in
				// the JSON (and "-", no key, as text).
				out, errOut, code := e.run(t, "redrive", "show", hash[:12], "-o", "json")
				var shown struct {
					Review struct {
						Keys []*string         `json:"idempotency_keys"`
						Gone []json.RawMessage `json:"gone"`
					} `json:"review"`
				}
				if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Review.Gone) != 1 || len(shown.Review.Keys) != ruleN-1 {
					t.Errorf("show with one record gone: exit %d, want one gone and the other %d keys:\n%s%s", code, ruleN-1, out, errOut)
				}
				for _, k := range shown.Review.Keys {
					if k == nil || *k == "" {
						t.Errorf("show lists a key it could not derive: %s", out)
					}
				}
				if out, _, _ := e.run(t, "redrive", "show", hash[:12]); !strings.Contains(out, "GONE from the DLQ") || regexp.MustCompile(`idempotency keys of the included \w+: -`).MatchString(out) {
					t.Errorf("show as text: want the gone record named, not listed as a record without a key:\n%s", out)
				}
				c, out, errOut, code := e.execute(t, hash)
				if code != 1 || *c.Sent != ruleN-1 || len(c.Skipped) != 1 || c.Skipped[0].Reason != "record_gone" || c.Skipped[0].Record == "" ||
					len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "record_gone") {
					t.Errorf("execute with one record gone: exit %d, want 1 with %d sent and one record_gone:\n%s", code, ruleN-1, out)
				}
				if !strings.Contains(errOut, "1 record(s) skipped: record_gone") {
					t.Errorf("stderr does not name the problem:\n%s", errOut)
				}
				// The audit's end entry counts it under the same names on both.
				d := finishedDetails(t, e.audit)
				if d["sent"] != float64(ruleN-1) || d["already_sent"] != float64(0) || d["skipped"] != float64(1) || d["failed"] != float64(0) {
					t.Errorf("redrive.execute.finished details: %v; want sent %d, already_sent 0, skipped 1, failed 0", d, ruleN-1)
				}
				if r, _ := d["skipped_reasons"].(map[string]any); r["record_gone"] != float64(1) {
					t.Errorf("redrive.execute.finished skipped_reasons: %v; want record_gone 1", d["skipped_reasons"])
				}
			})

			t.Run("a DLQ deleted between plan and execute: one error naming it, no summary, nothing sent, exit 1", func(t *testing.T) {
				e := b.env(t, noReview)
				_, hash := e.planAll(t)
				e.deleteDLQ(t)
				// Both printed "sent 0, skipped 0, failed 0" (and a result
				// with no problem) before the error, as if the run had found
				// nothing to do.
				want := fmt.Sprintf("berth: plan %s: its DLQ %q no longer exists (deleted since the plan was made?): nothing sent\n", hash[:12], e.dlq)
				for _, format := range []string{"table", "json"} {
					out, errOut, code := e.run(t, "redrive", "execute", hash[:12], "--yes", "--watch", "0", "-o", format)
					if code != 1 || out != "" || errOut != want {
						t.Errorf("%s -o %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1, nothing on stdout, and on stderr only\n%s", e.backend, format, code, out, errOut, want)
					}
				}
				if n := e.sent(t, hash); n != 0 {
					t.Errorf("%d record(s) sent", n)
				}
				if d := failedDetails(t, e.audit); d["sent"] != float64(0) || !strings.Contains(fmt.Sprint(d["error"]), "no longer exists") {
					t.Errorf("the run's end entry: %v; want sent 0 and the error", d)
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
				// The end entry's details: the same keys on both backends,
				// and only RabbitMQ's extras besides.
				d := finishedDetails(t, e.audit)
				for _, k := range []string{"sent", "already_sent", "excluded", "skipped", "skipped_reasons", "failed", "error"} {
					if _, ok := d[k]; !ok {
						t.Errorf("redrive.execute.finished lacks %q: %v", k, d)
					}
				}
				extras := map[string]bool{"plan": true, "dlq": true, "actor": true}
				if e.backend == "rabbitmq" {
					extras["resent"], extras["returned"], extras["stopped"] = true, true, true
				}
				for k := range d {
					switch k {
					case "sent", "already_sent", "excluded", "skipped", "skipped_reasons", "failed", "error":
					default:
						if !extras[k] {
							t.Errorf("redrive.execute.finished has %q, a name the other backend does not write: %v", k, d)
						}
					}
				}
				if d["sent"] != float64(ruleN) || d["already_sent"] != float64(0) || d["skipped"] != float64(0) {
					t.Errorf("redrive.execute.finished details: %v; want sent %d, nothing already sent or skipped", d, ruleN)
				}
				// `berth audit` reads them as words, the same on both.
				table, errOut, code := e.run(t, "audit")
				if code != 0 || !strings.Contains(table, "already sent 0; excluded 0; failed 0; ") || !strings.Contains(table, fmt.Sprintf("sent %d; skipped 0", ruleN)) {
					t.Errorf("berth audit: exit %d, want the finished entry's counts as words:\n%s%s", code, table, errOut)
				}
				out, errOut, code := e.run(t, "audit", "verify")
				if code != 0 || !strings.Contains(out, "audit mirror") || !strings.Contains(out, e.audit) {
					t.Errorf("audit verify: exit %d, want the mirror checked:\n%s%s", code, out, errOut)
				}
			})
		})
	}
}

// finishedDetails is the details of the last redrive.execute.finished
// entry in the audit log, as JSON reads them.
func finishedDetails(t *testing.T, file string) map[string]any {
	t.Helper()
	return endDetails(t, file, "redrive.execute.finished")
}

// failedDetails is the details of the last redrive.execute.failed entry.
func failedDetails(t *testing.T, file string) map[string]any {
	t.Helper()
	return endDetails(t, file, "redrive.execute.failed")
}

// endDetails is the details of the last entry of action in the audit log.
func endDetails(t *testing.T, file, action string) map[string]any {
	t.Helper()
	log, err := audit.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Action != action {
			continue
		}
		d := map[string]any{}
		if err := json.Unmarshal(entries[i].DetailsJSON(), &d); err != nil {
			t.Fatalf("%s details: %v", action, err)
		}
		return d
	}
	t.Fatalf("no %s entry in %s", action, file)
	return nil
}

// A plan file made on one backend given to the other is refused by every
// command that reads a plan file, in one wording (internal/actions) both
// ways, exit 1, nothing stored or sent. They used to differ: "plan F: a
// kafka plan is not a RabbitMQ plan", "F: not a valid plan: a rabbitmq
// plan is not a Kafka plan" (execute), "F: a rabbitmq plan is not a Kafka
// plan" (show).
func TestRedriveRefusesTheOtherBackendsPlan(t *testing.T) {
	k := kafkaRuleEnv(t, noReview)
	r := rabbitRuleEnv(t, noReview)
	kfile, _ := k.planAll(t)
	rfile, _ := r.planAll(t)
	key, _ := sshKey(t, t.TempDir(), "alice")
	for _, c := range []struct {
		e          ruleEnv
		file       string
		plan, here string
	}{{r, kfile, "Kafka", "RabbitMQ"}, {k, rfile, "RabbitMQ", "Kafka"}} {
		want := fmt.Sprintf("berth: refused: plan %s is a %s plan and this is a %s context: a plan runs only on the backend it was made on; nothing stored or sent\n", c.file, c.plan, c.here)
		for _, args := range [][]string{{"execute", c.file, "--yes"}, {"execute", c.file}, {"approve", c.file, "--key", key}, {"sign", c.file, "--key", key}, {"show", c.file}} {
			out, errOut, code := c.e.run(t, append([]string{"redrive"}, args...)...)
			if code != 1 || out != "" || errOut != want {
				t.Errorf("%s: redrive %v: exit %d\n%s%s\nwant exit 1 and only\n%s", c.e.backend, args, code, out, errOut, want)
			}
		}
		out, errOut, code := c.e.run(t, "redrive", "status", "-o", "json")
		if code != 0 || strings.Count(out, `"plan"`) != 1 {
			t.Errorf("%s: status after the refusals: exit %d, want only its own plan stored:\n%s%s", c.e.backend, code, out, errOut)
		}
	}
}

// The files Berth trusts, edited between approve and execute (the
// approver dropped from allowed_signers, the file emptied or gone, more
// approvals required, the audit log's last entry edited or cut mid-line):
// execute refuses in one line, the same words on both backends, exit 1,
// nothing sent. Three said it differently: RabbitMQ "plan H is not
// approved: no approval can be verified: ..." where Kafka said "review is
// required but no approval can be verified: ...; nothing sent"; an
// unreadable allowed_signers lacked ": nothing sent" on RabbitMQ; a damaged
// audit log ended "(nothing sent)" on RabbitMQ and "a write that cannot be
// recorded does not go on" on Kafka.
func TestRedriveFilesEditedAfterApprovalRefuseInOneWording(t *testing.T) {
	keys := t.TempDir()
	_, alice, _, bob := signersFile(t, keys)
	list, err := os.ReadFile(filepath.Join(keys, "allowed_signers"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(t *testing.T, file, s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(t *testing.T, file string) string {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	for _, c := range []struct {
		edit string
		do   func(t *testing.T, e ruleEnv, signers string)
		want string
	}{
		{"the approver dropped from allowed_signers", func(t *testing.T, e ruleEnv, signers string) {
			var keep []string
			for _, l := range strings.Split(read(t, signers), "\n") {
				if !strings.HasPrefix(l, "bob@hc") {
					keep = append(keep, l)
				}
			}
			write(t, signers, strings.Join(keep, "\n"))
		}, "berth: refused: plan HASH is not approved: 0 of 1 required approvals (signature by SHA256:FP: key is not in allowed_signers)"},
		{"allowed_signers emptied", func(t *testing.T, e ruleEnv, signers string) { write(t, signers, "") },
			"berth: refused: review is required but no approval can be verified: the allowed_signers file SIGNERS lists no key: add each approver's public key there, one line each (principal key-type key); nothing sent"},
		{"allowed_signers gone", func(t *testing.T, e ruleEnv, signers string) { _ = os.Remove(signers) },
			"berth: allowed_signers: cannot read SIGNERS: no such file or directory: nothing sent"},
		{"two approvals required", func(t *testing.T, e ruleEnv, signers string) {
			write(t, e.config, strings.Replace(read(t, e.config), "approvals: 1", "approvals: 2", 1))
		}, "berth: refused: plan HASH is not approved: 1 of 2 required approvals"},
		{"the audit log's last entry edited", func(t *testing.T, e ruleEnv, signers string) {
			s := strings.TrimSuffix(read(t, e.audit), "\n")
			i := strings.LastIndex(s, "\n")
			write(t, e.audit, s[:i+1]+strings.Replace(s[i+1:], "bob@hc", "eve@hc", 1)+"\n")
		}, "berth: refused: audit log: audit file AUDIT: the last entry is damaged: hash mismatch: content hashes to H…, entry says H… (run `berth audit verify`): nothing sent"},
		{"the audit log cut mid-line", func(t *testing.T, e ruleEnv, signers string) {
			s := read(t, e.audit)
			write(t, e.audit, s[:len(s)-20])
		}, "berth: refused: audit log: audit file AUDIT: the last entry is incomplete (no newline at end of file: a write cut short, killed mid-write?) (run `berth audit repair` to set it aside, recorded in the log): nothing sent"},
	} {
		t.Run(c.edit, func(t *testing.T) {
			for _, b := range ruleBackends {
				t.Run(b.name, func(t *testing.T) {
					signers := filepath.Join(t.TempDir(), "allowed_signers")
					write(t, signers, string(list))
					e := b.env(t, func(e ruleEnv) string {
						return e.policyFor("      review: required\n      approvals: 1\n", fmt.Sprintf("      allowed_signers: %s\n", signers))
					})
					_, hash := e.planAll(t, "--key", alice)
					if _, errOut, code := e.run(t, "redrive", "approve", hash[:12], "--key", bob); code != 0 {
						t.Fatalf("approve: exit %d %s", code, errOut)
					}
					c.do(t, e, signers)
					out, errOut, code := e.run(t, "redrive", "execute", hash[:12], "--yes")
					said := strings.NewReplacer(hash[:12], "HASH", signers, "SIGNERS", e.audit, "AUDIT").Replace(strings.TrimSuffix(errOut, "\n"))
					said = regexp.MustCompile(`SHA256:[A-Za-z0-9+/]+`).ReplaceAllString(said, "SHA256:FP")
					said = regexp.MustCompile(`[0-9a-f]{12}…`).ReplaceAllString(said, "H…")
					if code != 1 || out != "" || said != c.want {
						t.Errorf("execute after %s: exit %d, stdout %q\nsaid  %q\nwant %q", c.edit, code, out, said, c.want)
					}
					if n := e.sent(t, hash); n != 0 {
						t.Errorf("%d record(s) sent", n)
					}
				})
			}
		})
	}
}
