package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

// tear appends b (no newline) to the log file, as a write cut short does.
func tear(t *testing.T, l *Log, b []byte) {
	t.Helper()
	f, err := os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A torn last line refuses Append and names the way out; SetAsideTorn
// turns it into a chained entry that keeps the fragment's bytes, after
// which the chain verifies and appends go on.
func TestSetAsideTornKeepsTheFragmentInTheChain(t *testing.T) {
	sink := &recordingSink{}
	l := newLog(t, WithSink(sink))
	written := appendN(t, l, 3)
	whole := readFile(t, l.Path())
	frag := []byte(`{"seq":4,"time":"2026-11-29T09:00:00Z","actor":"alice","action":"redrive.batch.se`)
	tear(t, l, frag)

	_, err := l.Append(context.Background(), Entry{Action: "offsets.reset"})
	if err == nil || !strings.Contains(err.Error(), "the last entry is incomplete") || !strings.Contains(err.Error(), "run `berth audit repair` to set it aside, recorded in the log") {
		t.Fatalf("append onto a torn tail: %v", err)
	}
	if rep, _ := l.Verify(); rep.OK || rep.Bad.Line != 4 || !strings.Contains(rep.Bad.Reason, "berth audit repair") {
		t.Fatalf("verify of a torn tail: %+v %+v", rep, rep.Bad)
	}

	e, err := l.SetAsideTorn(context.Background(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 4 || e.Prev != written[2].Hash || e.Action != TornAction || e.Actor != CurrentUser() || e.Context != "prod" || e.Target != l.Path() {
		t.Fatalf("entry: %+v", e)
	}
	var d TornDetails
	if err := e.Decode(&d); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(frag)
	if d.Bytes != len(frag) || d.SHA256 != hex.EncodeToString(sum[:]) || !bytes.Equal(d.Fragment, frag) {
		t.Fatalf("details: %+v", d)
	}
	// The fragment is the new line's (base64 in its JSON); the entries
	// before it are untouched.
	after := readFile(t, l.Path())
	if !bytes.HasPrefix(after, whole) || bytes.Contains(after, frag) || after[len(after)-1] != '\n' || bytes.Count(after[len(whole):], []byte("\n")) != 1 {
		t.Fatalf("file after the repair:\n%s", after)
	}
	if len(sink.got) != 4 || sink.got[3].Hash != e.Hash {
		t.Fatalf("the repair entry was not mirrored: %d entries mirrored", len(sink.got))
	}
	// Read back from the file, the fragment is recoverable from the entry.
	list, err := l.List()
	if err != nil || len(list) != 4 {
		t.Fatalf("list: %d entries, %v", len(list), err)
	}
	d = TornDetails{}
	if err := list[3].Decode(&d); err != nil || !bytes.Equal(d.Fragment, frag) {
		t.Fatalf("fragment read back: %q %v", d.Fragment, err)
	}
	if rep, err := l.Verify(); err != nil || !rep.OK || rep.Entries != 4 || rep.Head != e.Hash {
		t.Fatalf("verify after the repair: %+v %v", rep, err)
	}
	next, err := l.Append(context.Background(), Entry{Action: "offsets.reset"})
	if err != nil || next.Seq != 5 || next.Prev != e.Hash {
		t.Fatalf("append after the repair: %+v %v", next, err)
	}
	if _, err := l.SetAsideTorn(context.Background(), ""); !errors.Is(err, ErrNothingTorn) {
		t.Fatalf("second repair of a whole log: %v", err)
	}
}

// A log that is nothing but a torn line (the first append cut short)
// starts its chain with the repair entry.
func TestSetAsideTornOfAFirstEntry(t *testing.T) {
	l := newLog(t)
	tear(t, l, []byte(`{"seq":1,"ti`))
	e, err := l.SetAsideTorn(context.Background(), "")
	if err != nil || e.Seq != 1 || e.Prev != Genesis {
		t.Fatalf("%+v %v", e, err)
	}
	if rep, err := l.Verify(); err != nil || !rep.OK || rep.Entries != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// Nothing torn: a missing log (ErrNoLog), an empty one (ErrEmptyLog) and
// one ending with a complete entry (ErrNothingTorn) are each told apart,
// all ErrNothingTorn, and nothing is created or changed.
func TestSetAsideTornWithNothingTorn(t *testing.T) {
	l := newLog(t)
	if _, err := l.SetAsideTorn(context.Background(), ""); err != ErrNoLog || !errors.Is(err, ErrNothingTorn) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the repair created the file: %v", err)
	}
	if err := os.WriteFile(l.Path(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SetAsideTorn(context.Background(), ""); err != ErrEmptyLog || !errors.Is(err, ErrNothingTorn) {
		t.Fatalf("empty file: %v", err)
	}
	if b := readFile(t, l.Path()); len(b) != 0 {
		t.Fatalf("the repair wrote %q to an empty log", b)
	}
	appendN(t, l, 2)
	before := readFile(t, l.Path())
	if _, err := l.SetAsideTorn(context.Background(), ""); err != ErrNothingTorn {
		t.Fatalf("whole log: %v", err)
	}
	if !bytes.Equal(readFile(t, l.Path()), before) {
		t.Fatal("the file changed")
	}
}

// A torn line after an edited entry is not a torn write alone: refused,
// the file left as it is for `berth audit verify` to name.
func TestSetAsideTornRefusesADamagedEntryBeforeIt(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	rewrite(t, l, func(ls []string) []string {
		ls[1] = strings.Replace(ls[1], `"alice"`, `"mallory"`, 1)
		return ls
	})
	tear(t, l, []byte(`{"seq":3,`))
	before := readFile(t, l.Path())
	_, err := l.SetAsideTorn(context.Background(), "")
	if err == nil || errors.Is(err, ErrNothingTorn) || !strings.Contains(err.Error(), "not a torn write: before the incomplete line, the last entry is damaged: hash mismatch") ||
		!strings.Contains(err.Error(), "nothing changed (run `berth audit verify`)") {
		t.Fatalf("repair after an edited entry: %v", err)
	}
	if !bytes.Equal(readFile(t, l.Path()), before) {
		t.Fatal("the file changed")
	}
}

// A crash between writing the repair entry and cutting the file leaves
// that entry complete, then leftover bytes without a newline: a second
// repair sets those aside too, and the chain holds.
func TestSetAsideTornAgainAfterACrashMidRepair(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	tear(t, l, []byte(`{"seq":3,"time":"2026`))
	first, err := l.SetAsideTorn(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	leftover := []byte(`-11-29T09:00:00Z","actor":"al`)
	tear(t, l, leftover)
	second, err := l.SetAsideTorn(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var d TornDetails
	if err := second.Decode(&d); err != nil || second.Seq != 4 || second.Prev != first.Hash || !bytes.Equal(d.Fragment, leftover) {
		t.Fatalf("second repair: %+v %+v %v", second, d, err)
	}
	if rep, err := l.Verify(); err != nil || !rep.OK || rep.Entries != 4 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// A tail over MaxTorn is refused in one line naming its size; nothing is
// cut.
func TestSetAsideTornRefusesAnOversizeFragment(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 1)
	tear(t, l, bytes.Repeat([]byte("x"), MaxTorn+1))
	before, err := os.Stat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.SetAsideTorn(context.Background(), "")
	if err == nil || !strings.Contains(err.Error(), "the incomplete last line is 16777217 bytes, more than the 16 MiB") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("oversize fragment: %v", err)
	}
	after, err := os.Stat(l.Path())
	if err != nil || after.Size() != before.Size() {
		t.Fatalf("size %d, was %d (%v)", after.Size(), before.Size(), err)
	}
}

// A sink that fails after the repair was written: a *SinkError, the
// local entry in place, as with Append.
func TestSetAsideTornSinkFailureKeepsTheLocalEntry(t *testing.T) {
	sink := &recordingSink{fail: errors.New("broker down")}
	l := newLog(t, WithSink(sink))
	tear(t, l, []byte(`{"se`))
	e, err := l.SetAsideTorn(context.Background(), "")
	var se *SinkError
	if !errors.As(err, &se) || se.Entry.Hash != e.Hash || e.Seq != 1 {
		t.Fatalf("%+v %v", e, err)
	}
	if rep, err := l.Verify(); err != nil || !rep.OK || rep.Entries != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
