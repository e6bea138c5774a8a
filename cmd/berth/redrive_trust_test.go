package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// Issue 13's trust findings, reproduced through the CLI: a plan is a signed
// selection, and execution is derived from the records re-read at execute,
// never from what the plan file says about them.

// people are three allowed signers and their allowed_signers file.
type people struct {
	alice, bob, carol string // private key files
	signers           string
}

func newPeople(t *testing.T) people {
	t.Helper()
	dir := t.TempDir()
	p := people{signers: filepath.Join(dir, "allowed_signers")}
	var lines []string
	for _, who := range []struct {
		name string
		file *string
	}{{"alice", &p.alice}, {"bob", &p.bob}, {"carol", &p.carol}} {
		key, pub := sshKey(t, dir, who.name)
		*who.file = key
		lines = append(lines, who.name+"@hc "+pub)
	}
	if err := os.WriteFile(p.signers, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func reviewPolicy(signers, extra string) string {
	return reviewedPolicy("ledger-events.DLT", signers) + extra
}

// planFile makes a plan over every DLQ record into a file and returns the
// file and the plan's hash.
func (f *redriveFixture) planFile(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	out, errOut, code := runBerth(t, "--config", f.config, "dlq", "classes", "ledger-events.DLT", "-o", "json")
	var classes []struct {
		Class string `json:"class"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &classes) != nil || len(classes) != 1 {
		t.Fatalf("dlq classes: exit %d %s %s", code, errOut, out)
	}
	file := filepath.Join(t.TempDir(), "plan.json")
	out, errOut, code = runBerth(t, append([]string{"--config", f.config, "redrive", "plan", "ledger-events.DLT", "--class", classes[0].Class, "--out", file, "-o", "json"}, extra...)...)
	var p struct {
		Hash string `json:"hash"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil {
		t.Fatalf("redrive plan: exit %d %s %s", code, errOut, out)
	}
	return file, p.Hash
}

// forge edits a plan file the way its own author could: decode, edit,
// recompute the hash (it is unkeyed), and sign the result as author with
// key. It returns the new file and hash.
func forge(t *testing.T, file, key string, edit func(*redrive.Plan)) (string, string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := redrive.DecodeFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	edit(&f.Plan)
	nf := redrive.NewFile(f.Plan)
	if key != "" {
		s, err := approval.LoadSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := approval.Sign(approval.Subject{PlanHash: nf.Hash, Cluster: nf.Plan.Cluster}, s, approval.RoleAuthor, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		nf.Signatures = append(nf.Signatures, sig)
	}
	b, err := nf.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "forged.json")
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out, nf.Hash
}

// topicRecords is a topic's end offsets summed: the records in it plus any
// transaction markers (so 0 above the originals means nothing was sent).
func topicRecords(t *testing.T, kc *kafkatest.Cluster, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends, err := kc.Admin.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ps := range ends {
		for _, o := range ps {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			n += int(o.Offset)
		}
	}
	return n
}

// Finding 1: the author edits their own plan so that a captured payment
// reads as not captured (its idempotency key gains an invisible character)
// and is included; the reviewer sees "3 included" and approves. Execute
// must derive the key from the record it re-reads, find it captured in the
// system of record, and send it nowhere.
func TestRedriveExecuteDerivesIdempotencyKeysFromTheRecordNotThePlan(t *testing.T) {
	dsn, conn := rmqPostgres(t)
	table := fmt.Sprintf("payments_trust_%d", time.Now().UnixNano())
	if _, err := conn.Exec(context.Background(), "create table "+table+" (idempotency_key text primary key, status text)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "drop table "+table) })
	if _, err := conn.Exec(context.Background(), "insert into "+table+" values ('evt-0001','captured')"); err != nil {
		t.Fatal(err)
	}
	ppl := newPeople(t)
	sorCfg := fmt.Sprintf("      idempotency_key: json:eventId\n      system_of_record:\n        driver: postgres\n        dsn: %s\n        query: select 1 from %s where idempotency_key = $1 and status = 'captured'\n", dsn, table)
	f := newRedriveFixture(t, 3, reviewPolicy(ppl.signers, sorCfg))
	file, _ := f.planFile(t, "--key", ppl.alice)

	forged, hash := forge(t, file, ppl.alice, func(p *redrive.Plan) {
		for i := range p.Records {
			r := &p.Records[i]
			if r.Reason == redrive.ReasonEffectCommitted {
				r.IdempotencyKey += "\u200b"
				r.Verdict = redrive.Verdict{Included: true}
			}
		}
	})
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "approve", forged, "--key", ppl.bob, "-o", "json")
	if code != 0 {
		t.Fatalf("approve: exit %d %s %s", code, errOut, out)
	}
	out, errOut, code = runBerth(t, "--config", f.config, "redrive", "execute", hash[:12], "--yes", "--no-verify", "-o", "json")
	if code != 0 {
		t.Fatalf("execute: exit %d %s %s", code, errOut, out)
	}
	var res struct {
		Sent    int `json:"sent"`
		Skipped []struct {
			Reason string `json:"reason"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Sent != 2 || len(res.Skipped) != 1 || res.Skipped[0].Reason != string(redrive.ReasonEffectCommitted) {
		t.Fatalf("the captured payment was redriven (charged twice): %s", out)
	}
	if got := f.state(t, hash); got != 2 {
		t.Fatalf("%d copies reached the target, want 2", got)
	}
}

// Finding 2: a per-record target the reviewer never saw. The review shows
// counts per target, and execute re-derives each record's target from the
// record and refuses the plan when one differs: nothing is sent.
func TestRedriveExecuteRefusesATargetTheRecordDoesNotName(t *testing.T) {
	f := newRedriveFixture(t, 3, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	f.kc.CreateTopic(t, "shipment-jobs", 1, 1, nil)
	file, _ := f.planFile(t)
	forged, hash := forge(t, file, "", func(p *redrive.Plan) { p.Records[1].Target = "shipment-jobs" })

	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "show", forged)
	if code != 0 || !strings.Contains(out, "shipment-jobs") {
		t.Fatalf("the review hides a record's target: exit %d %s %s", code, errOut, out)
	}
	out, errOut, code = runBerth(t, "--config", f.config, "redrive", "execute", forged, "--yes", "--no-verify", "-o", "json")
	if code == 0 || !strings.Contains(errOut, "target") {
		t.Fatalf("plan %s with a forged target executed: exit %d %s %s", hash[:12], code, errOut, out)
	}
	if n := topicRecords(t, f.kc, "shipment-jobs"); n != 0 {
		t.Fatalf("%d records went to shipment-jobs", n)
	}
	if got := topicRecords(t, f.kc, "ledger-events") - f.n; got != 0 {
		t.Fatalf("%d records sent by a refused plan", got)
	}
}

// Finding 4: the executor's config is not the plan's policy. A plan made
// under review: required is not run unapproved because today's config says
// review: none, or because a catch-all policy now matches first.
func TestRedriveExecuteAppliesTheStricterPolicy(t *testing.T) {
	ppl := newPeople(t)
	f := newRedriveFixture(t, 2, reviewPolicy(ppl.signers, ""))
	_, hash := f.planFile(t, "--key", ppl.alice)
	for name, policies := range map[string]string{
		"review none":       "    - match: \"ledger-events.DLT\"\n      review: none\n",
		"catch-all first":   "    - match: \"*\"\n      review: none\n" + reviewPolicy(ppl.signers, ""),
		"approvals lowered": fmt.Sprintf("    - match: \"ledger-events.DLT\"\n      review: required\n      approvals: 0\n      allowed_signers: %s\n", ppl.signers),
	} {
		cfg := writeConfig(t, fmt.Sprintf("current_context: test\ncontexts:\n  test:\n    kind: kafka\n    bootstrap: [%s]\naudit:\n  file: %s\nredrive:\n  policies:\n%s", f.kc.Addrs[0], f.audit, policies))
		out, errOut, code := runBerth(t, "--config", cfg, "redrive", "execute", hash[:12], "--yes", "--no-verify", "-o", "json")
		if code == 0 || !strings.Contains(errOut, "refused") {
			t.Fatalf("%s: an unapproved review-required plan ran: exit %d %s %s", name, code, errOut, out)
		}
	}
	if got := topicRecords(t, f.kc, "ledger-events") - f.n; got != 0 {
		t.Fatalf("%d records sent", got)
	}
}

// Finding 5: a plan runs only on the cluster it was made on.
func TestRedriveExecuteRefusesAPlanFromAnotherCluster(t *testing.T) {
	policy := "    - match: \"ledger-events.DLT\"\n      review: none\n"
	a := newRedriveFixture(t, 2, policy)
	file, _ := a.planFile(t)
	b := newRedriveFixture(t, 2, policy, kfake.ClusterID("another-cluster")) // same topics, same records, another cluster
	out, errOut, code := runBerth(t, "--config", b.config, "redrive", "execute", file, "--yes", "--no-verify", "-o", "json")
	if code == 0 || !strings.Contains(errOut, "cluster") {
		t.Fatalf("a plan made on another cluster executed: exit %d %s %s", code, errOut, out)
	}
	// Nor is it reviewed there: the records at its coordinates are others.
	if _, errOut, code := runBerth(t, "--config", b.config, "redrive", "show", file); code != 1 || !strings.Contains(errOut, `made on cluster "kfake"`) {
		t.Fatalf("show on another cluster: exit %d %s", code, errOut)
	}
	if got := topicRecords(t, b.kc, "ledger-events") - b.n; got != 0 {
		t.Fatalf("%d records sent", got)
	}
}

// Finding 5: a created_at in the future would never expire.
func TestRedriveExecuteRefusesAPlanMadeInTheFuture(t *testing.T) {
	f := newRedriveFixture(t, 2, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	file, _ := f.planFile(t)
	forged, _ := forge(t, file, "", func(p *redrive.Plan) {
		p.CreatedAt = time.Now().Add(24 * 365 * time.Hour).UTC().Truncate(time.Millisecond)
	})
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", forged, "--yes", "--no-verify", "-o", "json")
	if code == 0 || !strings.Contains(errOut, "future") {
		t.Fatalf("a plan dated next year executed: exit %d %s %s", code, errOut, out)
	}
	if got := topicRecords(t, f.kc, "ledger-events") - f.n; got != 0 {
		t.Fatalf("%d records sent", got)
	}
}

// Finding 5, at approval: a plan dated ahead of the clock is not approved
// (nothing stored). An approval given now would count once the clock
// reaches the plan's date, and the plan would then run until a day past
// it: approved today, executable the day after tomorrow.
func TestRedriveApproveRefusesAPlanMadeInTheFuture(t *testing.T) {
	ppl := newPeople(t)
	f := newRedriveFixture(t, 2, reviewPolicy(ppl.signers, ""))
	file, _ := f.planFile(t, "--key", ppl.alice)
	forged, _ := forge(t, file, ppl.alice, func(p *redrive.Plan) {
		p.CreatedAt = time.Now().Add(24 * time.Hour).UTC().Truncate(time.Millisecond)
	})
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "approve", forged, "--key", ppl.bob); code == 0 || !strings.Contains(errOut, "future") || !strings.Contains(errOut, "nothing stored") {
		t.Errorf("approve of a plan dated tomorrow: exit %d %q; want a refusal, nothing stored", code, errOut)
	}
}

// Finding 5: the signature covers its role. Bob authored a plan; Alice
// re-signs it as author and relabels Bob's author signature as an approval:
// Bob never approved it, so it is not approved.
func TestRedriveAnAuthorSignatureDoesNotCountAsAnApproval(t *testing.T) {
	ppl := newPeople(t)
	f := newRedriveFixture(t, 2, reviewPolicy(ppl.signers, ""))
	file, hash := f.planFile(t, "--key", ppl.bob)
	raw, _ := os.ReadFile(file)
	pf, err := redrive.DecodeFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := approval.LoadSigner(ppl.alice)
	alice, err := approval.Sign(approval.Subject{PlanHash: pf.Hash, Cluster: pf.Plan.Cluster}, s, approval.RoleAuthor, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bob := pf.Signatures[0]
	bob.Role = approval.RoleApproval
	pf.Signatures = []approval.Signature{alice, bob}
	b, _ := pf.Encode()
	relabelled := filepath.Join(t.TempDir(), "relabelled.json")
	os.WriteFile(relabelled, b, 0o600)
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", relabelled, "--yes", "--no-verify", "-o", "json")
	if code == 0 {
		t.Fatalf("plan %s ran on a relabelled author signature: %s %s", hash[:12], errOut, out)
	}
	if got := topicRecords(t, f.kc, "ledger-events") - f.n; got != 0 {
		t.Fatalf("%d records sent", got)
	}
}

// Finding 5: status names the verified signers, never a self-declared author.
func TestRedriveStatusShowsVerifiedSigners(t *testing.T) {
	ppl := newPeople(t)
	f := newRedriveFixture(t, 2, reviewPolicy(ppl.signers, ""))
	_, hash := f.planFile(t, "--key", ppl.alice)
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "approve", hash[:12], "--key", ppl.carol); code != 0 {
		t.Fatalf("approve: %s", errOut)
	}
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "status", hash[:12], "-o", "json")
	if code != 0 {
		t.Fatalf("status: %s", errOut)
	}
	var st struct {
		Author    string   `json:"author"`
		Approvers []string `json:"approvers"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Author != "alice@hc" || len(st.Approvers) != 1 || st.Approvers[0] != "carol@hc" {
		t.Fatalf("status shows author %q approvers %v, want verified alice@hc and carol@hc: %s", st.Author, st.Approvers, out)
	}
}

// The plan format is documented precisely enough for an independent script
// to verify a plan the CLI made, and to notice an edit.
func TestRedrivePlanHashVerifiesWithAnIndependentScript(t *testing.T) {
	f := newRedriveFixture(t, 5, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	file, hash := f.planFile(t)
	script := filepath.Join("..", "..", "testdata", "redrive", "planhash.py")
	out, err := exec.Command("python3", script, file).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != hash {
		t.Fatalf("planhash.py on the CLI's plan: %v: %q, want %s", err, out, hash)
	}
	raw, _ := os.ReadFile(file)
	if per := len(raw) / 5; per > 400 {
		t.Errorf("a 5-record plan file is %d bytes, %d a record", len(raw), per)
	}
	edited := strings.Replace(string(raw), `"rate":100`, `"rate":101`, 1)
	if edited == string(raw) {
		t.Fatalf("no rate in %s", raw)
	}
	os.WriteFile(file, []byte(edited), 0o600)
	if err := exec.Command("python3", script, file).Run(); err == nil {
		t.Fatal("planhash.py accepted an edited plan")
	}
}

// Finding 5: one malformed record in the plan store does not block status,
// approve or execute of the other plans; status names it.
func TestRedriveAMalformedStoredPlanBlocksOnlyItself(t *testing.T) {
	ppl := newPeople(t)
	f := newRedriveFixture(t, 2, reviewPolicy(ppl.signers, ""))
	_, hash := f.planFile(t, "--key", ppl.alice)
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kc.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	bad := &kgo.Record{Topic: "__berth_redrive_plans", Key: []byte("plan/" + strings.Repeat("e", 64)), Value: []byte(`{"hash":"eee","plan":`)}
	if err := cl.ProduceSync(context.Background(), bad).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "status")
	if code != 0 || !strings.Contains(out, hash[:12]) || !strings.Contains(out+errOut, "eeeeeeee") {
		t.Fatalf("status with one malformed stored plan: exit %d %s %s", code, errOut, out)
	}
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "approve", hash[:12], "--key", ppl.bob); code != 0 {
		t.Fatalf("approve: %s", errOut)
	}
	if out, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", hash[:12], "--yes", "--no-verify", "-o", "json"); code != 0 {
		t.Fatalf("execute: exit %d %s %s", code, errOut, out)
	}
	if got := f.state(t, hash); got != 2 {
		t.Fatalf("%d records sent, want 2", got)
	}
}

// Execute without --yes is a dry run on Kafka as on RabbitMQ: it checks the
// plan, re-reads and re-derives its records, says what would be sent where,
// exits 0 and sends nothing; in a read-only context too.
func TestRedriveExecuteWithoutYesIsADryRun(t *testing.T) {
	f := newRedriveFixture(t, 3, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	_, hash := f.planFile(t)
	for _, extra := range [][]string{nil, {"--read-only"}} {
		out, errOut, code := runBerth(t, append([]string{"--config", f.config, "redrive", "execute", hash[:12], "-o", "json"}, extra...)...)
		var res struct {
			DryRun    bool           `json:"dry_run"`
			WouldSend map[string]int `json:"would_send"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.DryRun || res.WouldSend["ledger-events"] != 3 {
			t.Fatalf("dry run %v: exit %d %s %s", extra, code, errOut, out)
		}
	}
	if got := topicRecords(t, f.kc, "ledger-events") - f.n; got != 0 {
		t.Fatalf("a dry run sent %d records", got)
	}
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", hash[:12])
	if code != 0 || !strings.Contains(out, "would send 3 (ledger-events 3)") || !strings.Contains(out, "--yes sends") {
		t.Fatalf("dry run as text: exit %d %s %s", code, errOut, out)
	}
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", hash[:12], "--yes", "--no-verify"); code != 0 {
		t.Fatalf("--yes: exit %d %s", code, errOut)
	}
	if got := f.state(t, hash); got != 3 {
		t.Fatalf("--yes sent %d of 3", got)
	}
}

// On a terminal, approve shows the review derived from the records (where
// they go, their idempotency keys) and signs only after the first 8 hex
// digits of the plan hash are typed; execute shows its dry run and sends
// only after the same. A wrong prefix stores and sends nothing.
func TestRedriveApproveAndExecuteAskOnATerminal(t *testing.T) {
	ppl := newPeople(t)
	f := newRedriveFixture(t, 2, reviewPolicy(ppl.signers, ""))
	_, hash := f.planFile(t, "--key", ppl.alice)
	approve := func() *tmuxTerm {
		return startTmux(t, 160, 40, "--config", f.config, "redrive", "approve", hash[:12], "--key", ppl.bob)
	}
	wrong := approve()
	review := wrong.waitText("the review", "type the first 8 hex digits")
	for _, want := range []string{"review (derived from the records as they are now)", "ledger-events", "idempotency keys of the included records: evt-0000, evt-0001"} {
		if !strings.Contains(review, want) {
			t.Errorf("the review lacks %q:\n%s", want, review)
		}
	}
	wrong.keys("deadbeef", "Enter")
	if s := wrong.waitText("the refusal", "[berth exited]"); !strings.Contains(s, "not confirmed") {
		t.Fatalf("a wrong prefix:\n%s", s)
	}
	out, _, _ := runBerth(t, "--config", f.config, "redrive", "status", hash[:12], "-o", "json")
	if !strings.Contains(out, `"approvals": 0`) {
		t.Fatalf("a refused approval was stored: %s", out)
	}
	right := approve()
	right.waitText("the review", "type the first 8 hex digits")
	right.keys(hash[:8], "Enter")
	if s := right.waitText("the signature", "[berth exited]"); !strings.Contains(s, "approved by bob@hc") {
		t.Fatalf("after the prefix:\n%s", s)
	}

	// ctrl+c at the question ends the command at once, nothing sent (it
	// sat at the prompt: execute's SIGINT handler had taken the signal).
	stop := startTmux(t, 160, 40, "--config", f.config, "redrive", "execute", hash[:12], "--no-verify")
	stop.waitText("the dry run", "type the first 8 hex digits")
	stop.keys("C-c")
	if s := stop.waitText("the interruption", "[berth exited]"); !strings.Contains(s, "interrupted at the prompt: nothing sent") || f.state(t, hash) != 0 {
		t.Fatalf("ctrl+c at the prompt:\n%s", s)
	}
	run := startTmux(t, 160, 40, "--config", f.config, "redrive", "execute", hash[:12], "--no-verify")
	dry := run.waitText("the dry run", "type the first 8 hex digits")
	if !strings.Contains(dry, "would send 2 (ledger-events 2)") || f.state(t, hash) != 0 {
		t.Fatalf("the dry run:\n%s", dry)
	}
	run.keys(hash[:8], "Enter")
	run.waitText("the run", "[berth exited]")
	if got := f.state(t, hash); got != 2 {
		t.Fatalf("sent %d of 2 after the prefix", got)
	}
}

// --out naming something that is not a regular file (a pipe here; /dev/null
// on a real machine) is written in place, never renamed over: doing so as
// root replaced /dev/null with a 0600 file.
func TestRedrivePlanOutToAPipeKeepsThePipe(t *testing.T) {
	f := newRedriveFixture(t, 2, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	pipe := filepath.Join(t.TempDir(), "plan.pipe")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		r, err := os.Open(pipe) // blocks until the writer opens it
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(r)
		r.Close()
		got <- b
	}()
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "plan", "ledger-events.DLT", "--offsets", "0:0", "--out", pipe, "-o", "json")
	if code != 0 {
		t.Fatalf("plan --out a pipe: exit %d %s %s", code, errOut, out)
	}
	// Checked first: had the pipe been replaced, its reader would wait on
	// the old one for ever.
	if st, err := os.Lstat(pipe); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("--out replaced the pipe: %v", err)
	}
	if b := <-got; !strings.Contains(string(b), `"format":"berth-redrive-plan/v2"`) {
		t.Fatalf("the pipe's reader got %q", b)
	}
}

// The time a person spends reading at a prompt is theirs: an approval or a
// send typed after --timeout has passed still goes through, because the
// writes that follow the prompt get a --timeout of their own (they used to
// share the one that began before the review and fail "context deadline
// exceeded" for anyone who read for longer than 10 s).
func TestRedrivePromptsOutlastTheTimeout(t *testing.T) {
	ppl := newPeople(t)
	f := newRedriveFixture(t, 2, reviewPolicy(ppl.signers, ""))
	_, hash := f.planFile(t, "--key", ppl.alice)
	const timeout = 3 * time.Second
	// The person reads for longer than --timeout: this wait is the input
	// under test (a slow reader), not a synchronisation.
	read := func() { time.Sleep(timeout + time.Second) }

	approve := startTmux(t, 160, 40, "--config", f.config, "--timeout", timeout.String(), "redrive", "approve", hash[:12], "--key", ppl.bob)
	approve.waitText("the review", "type the first 8 hex digits")
	read()
	approve.keys(hash[:8], "Enter")
	if s := approve.waitText("the signature", "[berth exited]"); !strings.Contains(s, "approved by bob@hc") {
		t.Fatalf("an approval typed after --timeout:\n%s", s)
	}

	run := startTmux(t, 160, 40, "--config", f.config, "--timeout", timeout.String(), "redrive", "execute", hash[:12], "--no-verify")
	run.waitText("the dry run", "type the first 8 hex digits")
	read()
	run.keys(hash[:8], "Enter")
	if s := run.waitText("the run", "[berth exited]"); f.state(t, hash) != 2 {
		t.Fatalf("sent %d of 2 after a prefix typed after --timeout:\n%s", f.state(t, hash), s)
	}
}
