package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type resetDetails struct {
	Group  string           `json:"group"`
	Before map[string]int64 `json:"before"`
	After  map[string]int64 `json:"after"`
}

func newLog(t *testing.T, opts ...Option) *Log {
	t.Helper()
	l, err := Open(filepath.Join(t.TempDir(), "sub", "audit.log"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func appendN(t *testing.T, l *Log, n int) []Entry {
	t.Helper()
	var out []Entry
	for i := 0; i < n; i++ {
		e, err := l.Append(context.Background(), Entry{Actor: "alice", Action: "offsets.reset", Context: "prod",
			Target: fmt.Sprintf("group-%d", i), Details: resetDetails{Group: "g", Before: map[string]int64{"t/0": int64(i)}, After: map[string]int64{"t/0": 0}}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestAppendChainsAndLists(t *testing.T) {
	clock := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	l := newLog(t, WithClock(func() time.Time { return clock }))
	written := appendN(t, l, 3)
	if written[0].Prev != Genesis || written[0].Seq != 1 {
		t.Fatalf("first entry: seq %d prev %s", written[0].Seq, written[0].Prev)
	}
	for i := 1; i < 3; i++ {
		if written[i].Prev != written[i-1].Hash || written[i].Seq != int64(i+1) {
			t.Fatalf("entry %d does not chain: %+v", i, written[i])
		}
	}
	got, err := l.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("listed %d entries, want 3", len(got))
	}
	var d resetDetails
	if err := got[2].Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Before["t/0"] != 2 || got[2].Actor != "alice" || got[2].Target != "group-2" || got[2].Context != "prod" {
		t.Fatalf("entry read back wrong: %+v %+v", got[2], d)
	}
	if !got[0].When().Equal(clock) {
		t.Fatalf("time %s, want %s", got[0].Time, clock)
	}
	rep, err := l.Verify()
	if err != nil || !rep.OK || rep.Entries != 3 || rep.Head != written[2].Hash {
		t.Fatalf("verify of an untouched log: %+v %v", rep, err)
	}
}

func TestActorDefaultsToOSUser(t *testing.T) {
	t.Setenv("USER", "oncall-bob")
	l := newLog(t)
	e, err := l.Append(context.Background(), Entry{Action: "offsets.reset", Target: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Actor != "oncall-bob" {
		t.Fatalf("actor %q, want $USER", e.Actor)
	}
}

func TestMissingFileIsEmptyValidLog(t *testing.T) {
	l := newLog(t)
	got, err := l.List()
	if err != nil || len(got) != 0 {
		t.Fatalf("list of a missing file: %v %v", got, err)
	}
	rep, err := l.Verify()
	if err != nil || !rep.OK || rep.Entries != 0 {
		t.Fatalf("verify of a missing file: %+v %v", rep, err)
	}
}

func rewrite(t *testing.T, l *Log, f func(lines []string) []string) {
	t.Helper()
	b, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	lines = f(lines)
	if err := os.WriteFile(l.Path(), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	cases := []struct {
		name     string
		tamper   func([]string) []string
		wantLine int
		wantWhy  string
	}{
		{"edited byte", func(ls []string) []string {
			ls[1] = strings.Replace(ls[1], `"t/0":1`, `"t/0":7`, 1)
			return ls
		}, 2, "hash mismatch"},
		{"edited actor", func(ls []string) []string {
			ls[2] = strings.Replace(ls[2], `"alice"`, `"mallory"`, 1)
			return ls
		}, 3, "hash mismatch"},
		{"deleted middle line", func(ls []string) []string {
			return append(ls[:1:1], ls[2:]...)
		}, 2, "removed or reordered"},
		{"deleted first line", func(ls []string) []string { return ls[1:] }, 1, "does not start the chain"},
		{"reordered", func(ls []string) []string {
			ls[1], ls[2] = ls[2], ls[1]
			return ls
		}, 2, "removed or reordered"},
		{"garbage line", func(ls []string) []string {
			ls[3] = "{not json"
			return ls
		}, 4, "not a valid entry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLog(t)
			appendN(t, l, 4)
			rewrite(t, l, tc.tamper)
			rep, err := l.Verify()
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.Bad == nil {
				t.Fatalf("tampering not detected: %+v", rep)
			}
			if rep.Bad.Line != tc.wantLine || !strings.Contains(rep.Bad.Reason, tc.wantWhy) {
				t.Fatalf("first bad = %s, want line %d containing %q", rep.Bad, tc.wantLine, tc.wantWhy)
			}
		})
	}
}

func TestEditedByteAnywhereIsDetected(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	orig, _ := os.ReadFile(l.Path())
	// Flip each byte of the second line in turn (except the newline): every
	// single-byte edit must be caught, either as bad JSON or a hash mismatch.
	start := bytes.IndexByte(orig, '\n') + 1
	for i := start; i < len(orig)-1; i++ {
		b := append([]byte(nil), orig...)
		b[i] ^= 0x01
		if err := os.WriteFile(l.Path(), b, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := l.Verify()
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK {
			t.Fatalf("flipping byte %d (%q) went undetected", i, orig[i])
		}
	}
}

func TestAppendRefusesToChainOntoDamagedTail(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	rewrite(t, l, func(ls []string) []string {
		ls[1] = strings.Replace(ls[1], `"alice"`, `"mallory"`, 1)
		return ls
	})
	_, err := l.Append(context.Background(), Entry{Action: "offsets.reset", Target: "g"})
	if err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("append onto a tampered tail: %v", err)
	}
	// A torn write (no trailing newline) is refused too.
	b, _ := os.ReadFile(l.Path())
	os.WriteFile(l.Path(), b[:len(b)-5], 0o600)
	if _, err := l.Append(context.Background(), Entry{Action: "offsets.reset"}); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("append onto a torn tail: %v", err)
	}
	rep, _ := l.Verify()
	if rep.OK || rep.Bad.Line != 2 {
		t.Fatalf("verify of a torn tail: %+v", rep)
	}
}

func TestConcurrentAppendersInOneProcess(t *testing.T) {
	l := newLog(t)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine opens its own Log, as separate commands would.
			l2, _ := Open(l.Path())
			for i := 0; i < 20; i++ {
				if _, err := l2.Append(context.Background(), Entry{Action: "test.append", Target: strconv.Itoa(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rep, err := l.Verify()
	if err != nil || !rep.OK || rep.Entries != 160 {
		t.Fatalf("after concurrent appends: %+v %v", rep, err)
	}
}

// TestHelperAppender is run as a child process by
// TestConcurrentAppendersInTwoProcesses; it does nothing in a normal run.
func TestHelperAppender(t *testing.T) {
	path := os.Getenv("BERTH_AUDIT_HELPER_FILE")
	if path == "" {
		t.Skip("helper process only")
	}
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := l.Append(context.Background(), Entry{Action: "test.append", Target: os.Getenv("BERTH_AUDIT_HELPER_NAME")}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentAppendersInTwoProcesses(t *testing.T) {
	l := newLog(t)
	var cmds []*exec.Cmd
	for _, name := range []string{"p1", "p2"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAppender$", "-test.count=1")
		cmd.Env = append(os.Environ(), "BERTH_AUDIT_HELPER_FILE="+l.Path(), "BERTH_AUDIT_HELPER_NAME="+name)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(out.String())
			}
		})
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	rep, err := l.Verify()
	if err != nil || !rep.OK || rep.Entries != 100 {
		t.Fatalf("after two processes appended: %+v %v", rep, err)
	}
	got, _ := l.List()
	by := map[string]int{}
	for _, e := range got {
		by[e.Target]++
	}
	if by["p1"] != 50 || by["p2"] != 50 {
		t.Fatalf("entries per process: %v", by)
	}
}

type recordingSink struct {
	got  []Entry
	fail error
}

func (s *recordingSink) Mirror(_ context.Context, e Entry) error {
	s.got = append(s.got, e)
	return s.fail
}

func TestSinkMirrorsAndFailureKeepsLocalEntry(t *testing.T) {
	s := &recordingSink{}
	l := newLog(t, WithSink(s))
	e, err := l.Append(context.Background(), Entry{Action: "offsets.reset", Target: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.got) != 1 || s.got[0].Hash != e.Hash {
		t.Fatalf("sink saw %+v", s.got)
	}
	s.fail = errors.New("topic unavailable")
	_, err = l.Append(context.Background(), Entry{Action: "offsets.reset", Target: "g"})
	var se *SinkError
	if !errors.As(err, &se) || se.Entry.Seq != 2 {
		t.Fatalf("sink failure: %v", err)
	}
	if rep, _ := l.Verify(); !rep.OK || rep.Entries != 2 {
		t.Fatalf("local entry lost after sink failure: %+v", rep)
	}
}

func TestAppendNeedsAction(t *testing.T) {
	l := newLog(t)
	if _, err := l.Append(context.Background(), Entry{Target: "g"}); err == nil {
		t.Fatal("entry without action accepted")
	}
	if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused entry created the file: %v", err)
	}
}

// BenchmarkAppend measures a chained, locked, fsynced append onto a log of
// 1000 entries; BenchmarkAppendBaselineRawWrite is the floor it is compared
// with in the same run: one O_APPEND write and fsync of a line of the same
// size, with no lock, no tail read and no hashing.
func BenchmarkAppend(b *testing.B) {
	l, _ := Open(filepath.Join(b.TempDir(), "audit.log"))
	for i := 0; i < 1000; i++ {
		l.Append(context.Background(), Entry{Action: "bench", Target: "g"})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(context.Background(), Entry{Action: "bench", Target: "g", Details: map[string]int{"i": i}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendBaselineRawWrite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "raw.log")
	line := []byte(strings.Repeat("x", 330) + "\n")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkVerify10k walks a chain of 10,000 entries.
func BenchmarkVerify10k(b *testing.B) {
	l, _ := Open(filepath.Join(b.TempDir(), "audit.log"))
	f, _ := os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	prev := Genesis
	for i := 1; i <= 10000; i++ {
		h := hashed{Seq: int64(i), Time: "2026-11-29T09:00:00Z", Actor: "a", Action: "bench", Target: "g", Prev: prev,
			Details: json.RawMessage(`{"group":"g","partitions":[{"topic":"orders","partition":0,"before":5,"after":0}]}`)}
		sum, _ := computeHash(h)
		enc, _ := json.Marshal(line{hashed: h, Hash: sum})
		f.Write(append(enc, '\n'))
		prev = sum
	}
	f.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := l.Verify()
		if err != nil || !rep.OK || rep.Entries != 10000 {
			b.Fatalf("%+v %v", rep, err)
		}
	}
}
