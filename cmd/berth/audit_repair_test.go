package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/audit"
)

// tearAuditLog appends frag, without a newline, to the audit log: what a
// process killed in the middle of an append leaves.
func tearAuditLog(t *testing.T, file, frag string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(frag); err != nil {
		t.Fatal(err)
	}
}

func auditLines(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// A redrive killed mid-append leaves the audit log's last line torn: every
// destructive command refuses and names `berth audit repair`; the repair
// sets the line aside as a chained entry (mirrored to the cluster like any
// other), verify passes, and the redrive goes on. A line cut after it was
// mirrored is repaired locally all the same, but verify still catches it
// against the mirror (Kafka only: see below).
func TestAuditRepairLetsARedriveGoOnAfterATornWrite(t *testing.T) {
	for _, b := range ruleBackends {
		t.Run(b.name, func(t *testing.T) {
			e := b.env(t, noReview)
			_, hash := e.planAll(t)
			complete := auditLines(t, e.audit)
			frag := `{"seq":9,"time":"2026-11-29T09:00:00Z","actor":"carol","action":"redrive.execute.sta`
			tearAuditLog(t, e.audit, frag)

			out, errOut, code := e.run(t, "redrive", "execute", hash[:12], "--yes", "--watch", "0")
			want := "berth: refused: audit log: audit file " + e.audit + ": the last entry is incomplete (no newline at end of file: a write cut short, killed mid-write?) (run `berth audit repair` to set it aside, recorded in the log): nothing sent\n"
			if code != 1 || out != "" || errOut != want {
				t.Fatalf("execute onto a torn log: exit %d, stdout %q\nsaid %q\nwant %q", code, out, errOut, want)
			}
			if n := e.sent(t, hash); n != 0 {
				t.Fatalf("%d record(s) sent", n)
			}
			if _, errOut, code := e.run(t, "audit", "verify"); code != 1 || !strings.Contains(errOut, "`berth audit repair` sets it aside") {
				t.Fatalf("verify of a torn log: exit %d %q", code, errOut)
			}

			out, errOut, code = e.run(t, "audit", "repair")
			sum := sha256.Sum256([]byte(frag))
			seq := complete + 1
			wantOut := fmt.Sprintf("Set aside the incomplete last line (%d bytes, sha256 %s…) as entry %d (audit.torn_write): `berth audit -o json` shows its bytes.\nOK: %d entries, chain intact (head ",
				len(frag), hex.EncodeToString(sum[:])[:12], seq, seq)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, wantOut) || strings.Count(out, "\n") != 2 {
				t.Fatalf("repair: exit %d %q\n%s\nwant %s…", code, errOut, out, wantOut)
			}
			if out, _, code := e.run(t, "audit", "repair"); code != 0 || !strings.HasPrefix(out, "Nothing to repair: "+e.audit+" ends with a complete entry.\nOK: ") {
				t.Fatalf("second repair: exit %d\n%s", code, out)
			}
			// The chain holds, and the mirror has the repair entry too.
			if out, errOut, code := e.run(t, "audit", "verify"); code != 0 || strings.Contains(out, "BROKEN") || strings.Contains(out, "not checked") {
				t.Fatalf("verify after the repair: exit %d %q\n%s", code, errOut, out)
			}
			out, _, _ = e.run(t, "audit")
			row := strings.Split(strings.TrimRight(out, "\n"), "\n")[seq]
			for _, w := range []string{"audit.torn_write", "set aside", fmt.Sprintf("bytes %d", len(frag))} {
				if !strings.Contains(row, w) {
					t.Errorf("audit listing row lacks %q:\n%s", w, row)
				}
			}
			if c, all, _, code := e.execute(t, hash); code != 0 || *c.Sent != ruleN {
				t.Fatalf("execute after the repair: exit %d\n%s", code, all)
			}
			if n := e.sent(t, hash); n != ruleN {
				t.Fatalf("%d of %d records sent", n, ruleN)
			}

			if b.name != "kafka" {
				// The rest leaves this log's mirror showing one entry
				// twice, which every reader of the mirror reports, for as
				// long as the mirror keeps it: only on Kafka, whose broker
				// is this test's own; the RabbitMQ server is shared.
				return
			}
			// The newest entry, mirrored already, cut mid-line: locally the
			// same as a torn write, so repair sets it aside (-o json this
			// time); the mirror still has the entry whole and verify says so.
			raw, err := os.ReadFile(e.audit)
			if err != nil {
				t.Fatal(err)
			}
			cut := raw[:len(raw)-30]
			if err := os.WriteFile(e.audit, cut, 0o600); err != nil {
				t.Fatal(err)
			}
			last := auditLines(t, e.audit) + 1
			out, errOut, code = e.run(t, "audit", "repair", "-o", "json")
			var res auditRepair
			if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || errOut != "" {
				t.Fatalf("repair -o json: exit %d %v %q\n%s", code, err, errOut, out)
			}
			frag2 := cut[strings.LastIndex(string(cut), "\n")+1:]
			sum = sha256.Sum256(frag2)
			if s := res.SetAside; !res.Repaired || s == nil || res.File != e.audit || s.Seq != int64(last) || s.Bytes != len(frag2) || s.SHA256 != hex.EncodeToString(sum[:]) ||
				!res.Chain.OK || res.Chain.Entries != last || res.Chain.Head != s.Hash || res.MirrorWarning != "" {
				t.Fatalf("repair -o json:\n%s", out)
			}
			_, errOut, code = e.run(t, "audit", "verify")
			if code != 1 || !strings.Contains(errOut, fmt.Sprintf("entry %d differs between the mirror and the local file", last)) {
				t.Fatalf("verify of an entry cut after it was mirrored: exit %d %q", code, errOut)
			}
		})
	}
}

// Repair refuses, in one line and changing nothing, a torn line that
// follows an edited entry (that is not a torn write); with nothing torn it
// says so and exits 0. No cluster: the refusal comes before any mirror.
func TestAuditRepairRefusesADamagedLogAndSaysWhenNothingIsTorn(t *testing.T) {
	isolateConfig(t)
	file := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := log.Append(t.Context(), audit.Entry{Actor: "alice", Action: "offsets.reset", Target: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runBerth(t, "audit", "repair", "--audit-file", file, "--read-only")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "Nothing to repair: "+file+" ends with a complete entry.\nOK: 2 entries, chain intact") {
		t.Fatalf("nothing torn: exit %d %q\n%s", code, errOut, out)
	}
	out, _, code = runBerth(t, "audit", "repair", "--audit-file", file, "--read-only", "-o", "json")
	var res auditRepair
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Repaired || res.SetAside != nil || !res.Chain.OK || res.Chain.Entries != 2 {
		t.Fatalf("nothing torn, -o json: exit %d %v\n%s", code, err, out)
	}

	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	damaged := strings.Replace(string(raw), `"actor":"alice"`, `"actor":"mallory"`, 2) + `{"seq":3,"ti`
	if err := os.WriteFile(file, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"table", "json"} {
		out, errOut, code := runBerth(t, "audit", "repair", "--audit-file", file, "--read-only", "-o", format)
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 ||
			!strings.HasPrefix(errOut, "berth: audit file "+file+": not a torn write: before the incomplete line, the last entry is damaged: hash mismatch") ||
			!strings.HasSuffix(errOut, "; nothing changed (run `berth audit verify`)\n") {
			t.Fatalf("%s: damaged log: exit %d, stdout %q\n%s", format, code, out, errOut)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != damaged {
		t.Fatal("a refused repair changed the file")
	}
}

// Repair of a log with no entries says why there is nothing to repair, not
// that the log "ends with a complete entry": the file does not exist (no
// audit entries yet), or is empty; -o json says which (nothing_to_repair).
// Exit 0, and no file is created or written.
func TestAuditRepairSaysWhenTheLogIsMissingOrEmpty(t *testing.T) {
	isolateConfig(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name, why, json string
		exists          bool
	}{
		{"missing", "does not exist (no audit entries yet)", "missing", false},
		{"empty", "is empty", "empty", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, c.name+".log")
			if c.exists {
				if err := os.WriteFile(file, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, errOut, code := runBerth(t, "audit", "repair", "--audit-file", file, "--read-only")
			want := "Nothing to repair: " + file + " " + c.why + ".\nOK: 0 entries, chain intact"
			if code != 0 || errOut != "" || !strings.HasPrefix(out, want) || strings.Contains(out, "complete entry") {
				t.Fatalf("exit %d %q\n%s\nwant %s…", code, errOut, out, want)
			}
			out, errOut, code = runBerth(t, "audit", "repair", "--audit-file", file, "--read-only", "-o", "json")
			var res auditRepair
			if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || errOut != "" || res.Repaired || res.SetAside != nil ||
				res.NothingToRepair != c.json || res.File != file || !res.Chain.OK || res.Chain.Entries != 0 {
				t.Fatalf("-o json: exit %d %v %q\n%s\nwant nothing_to_repair %q", code, err, errOut, out, c.json)
			}
			switch b, err := os.ReadFile(file); {
			case !c.exists && !errors.Is(err, os.ErrNotExist):
				t.Fatalf("repair created %s: %v", file, err)
			case c.exists && (err != nil || len(b) != 0):
				t.Fatalf("repair wrote %q to the empty log (%v)", b, err)
			}
		})
	}
	// A log ending with a complete entry says so in -o json too.
	log, err := audit.Open(filepath.Join(dir, "whole.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(t.Context(), audit.Entry{Actor: "alice", Action: "offsets.reset", Target: "g"}); err != nil {
		t.Fatal(err)
	}
	out, _, code := runBerth(t, "audit", "repair", "--audit-file", log.Path(), "--read-only", "-o", "json")
	var res auditRepair
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.NothingToRepair != "complete" || res.Chain.Entries != 1 {
		t.Fatalf("whole log, -o json: exit %d %v\n%s", code, err, out)
	}
}
