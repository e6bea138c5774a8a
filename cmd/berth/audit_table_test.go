package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/audit"
)

// `berth audit` is a table a person reads: the verified signer of an
// approval and the approvers of an execution in their own column, plan
// hashes shortened with their DLQ, outcomes as words and details as text,
// never raw JSON; a hostile value is escaped; -o json keeps every entry as
// stored.
func TestAuditListIsATableWithSigners(t *testing.T) {
	isolateConfig(t)
	file := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("3f2a9c1e", 8)
	one := int64(120)
	moves := []map[string]any{}
	for p := 0; p < 9; p++ {
		moves = append(moves, map[string]any{"topic": "orders", "partition": p, "before": one, "after": 500})
	}
	moves[1]["before"] = nil
	for _, e := range []audit.Entry{
		{Actor: "alice", Action: "offsets.reset.start", Context: "prod", Target: "fraud-monitor",
			Details: map[string]any{"group": "fraud-monitor", "spec": "--to-latest --topic orders", "status": "started", "partitions": moves}},
		{Actor: "alice", Action: "redrive.plan", Context: "prod", Target: hash,
			Details: map[string]any{"dlq": "payments.DLT", "author": "alice@host", "totals": map[string]any{"selected": 12, "included": 9, "excluded": 3, "by_reason": map[string]any{"effect_committed": 3}}, "blocked": false, "stored": true}},
		{Actor: "bob", Action: "redrive.approved", Context: "prod", Target: hash,
			Details: map[string]any{"plan": hash, "dlq": "payments.DLT", "signer": "bob@harborcart.example", "fingerprint": "SHA256:abc", "approved": true}},
		{Actor: "carol", Action: "redrive.execute.started", Context: "prod", Target: hash,
			Details: map[string]any{"plan": hash, "dlq": "payments.DLT", "records": 9, "approvers": []string{"bob@harborcart.example", "dave@harborcart.example"}}},
		{Actor: "mallory\x1b[2J", Action: "redrive.refused", Context: "prod", Target: hash,
			Details: map[string]any{"plan": hash, "reason": "read-only: context prod has read_only: true\x1b]0;x\x07"}},
	} {
		if _, err := log.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}

	out, errOut, code := runBerth(t, "audit", "--audit-file", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for _, h := range auditHeader {
		if !strings.Contains(lines[0], h) {
			t.Fatalf("header lacks %s: %q", h, lines[0])
		}
	}
	row := func(i int, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("row %d lacks %q:\n%s", i, w, lines[i])
			}
		}
	}
	row(1, "alice", "offsets.reset.start", "fraud-monitor", "started", "--to-latest --topic orders", "orders[0] 120->500 orders[1] none->500",
		"(+3 more partitions: -o json lists them)")
	row(2, "redrive.plan", "plan 3f2a9c1e3f2a on payments.DLT", "done", "12 selected, 9 included, 3 excluded", "author alice@host", "stored yes")
	row(3, "bob", "bob@harborcart.example", "redrive.approved", "approved", "fingerprint SHA256:abc")
	row(4, "carol", "bob@harborcart.example, dave@harborcart.example", "redrive.execute.started", "started", "records 9")
	row(5, `mallory\e[2J`, "refused", `reason: read-only: context prod has read_only: true\e]0;x\x07`)
	if strings.ContainsAny(out, "{}\x1b") || strings.Contains(out, hash) {
		t.Fatalf("raw JSON, a whole hash or an escape byte in the table:\n%s", out)
	}

	// -o json: the entries as stored, hash whole.
	out, _, code = runBerth(t, "audit", "--audit-file", file, "-o", "json")
	if code != 0 || !strings.Contains(out, `"target": "`+hash+`"`) || !strings.Contains(out, `"signer": "bob@harborcart.example"`) {
		t.Fatalf("json: exit %d\n%s", code, out)
	}
}
