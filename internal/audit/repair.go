package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// A torn write: a process killed while it appends (or a full disk) can
// leave the log's last line without its newline. Append refuses to chain
// onto it, because a line cut short looks exactly like a line someone cut
// to hide an entry. SetAsideTorn is the explicit way past: the fragment
// becomes a new entry of the chain, its bytes kept inside it, so nothing
// is dropped unrecorded.

// TornAction is the action of the entry SetAsideTorn writes.
const TornAction = "audit.torn_write"

// MaxTorn is the largest fragment SetAsideTorn sets aside. Entries are a
// few hundred bytes; a longer tail without a newline is not a cut-short
// entry, and it is refused rather than truncated.
const MaxTorn = 16 << 20

// ErrNothingTorn is SetAsideTorn's answer for a log that is not torn: one
// that ends with a complete entry is ErrNothingTorn itself; a missing or
// empty one is ErrNoLog or ErrEmptyLog, which are ErrNothingTorn too
// (errors.Is) but say why, so that a repair does not claim a complete
// entry the log does not have.
var (
	ErrNothingTorn       = errors.New("the log ends with a complete entry: nothing to repair")
	ErrNoLog       error = nothingTorn("the log does not exist (no audit entries yet): nothing to repair")
	ErrEmptyLog    error = nothingTorn("the log is empty: nothing to repair")
)

// nothingTorn is a reason a log is not torn other than a complete last
// entry; errors.Is matches it with ErrNothingTorn.
type nothingTorn string

func (e nothingTorn) Error() string        { return string(e) }
func (e nothingTorn) Is(target error) bool { return target == ErrNothingTorn }

// TornDetails are the details of a TornAction entry: the fragment set
// aside, whole (base64 in the JSON), with its length and SHA-256.
type TornDetails struct {
	Bytes    int    `json:"bytes"`
	SHA256   string `json:"sha256"`
	Fragment []byte `json:"fragment"`
}

// SetAsideTorn replaces the log's torn last line (the bytes after its last
// newline) with a TornAction entry holding them, chained onto the complete
// entries before it, and mirrors that entry to the sinks as Append does
// (a failing sink is a *SinkError after the local write). It refuses when
// the last complete entry is itself damaged (not a torn write) or the
// fragment is over MaxTorn; ErrNothingTorn (ErrNoLog, ErrEmptyLog) when
// the log is not torn, changing nothing and creating no file.
// berthContext is recorded as the entry's Context.
func (l *Log) SetAsideTorn(ctx context.Context, berthContext string) (Entry, error) {
	// Without O_APPEND: the new entry is written where the fragment starts
	// (and WriteAt refuses O_APPEND files).
	f, err := os.OpenFile(l.path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Entry{}, ErrNoLog
	}
	if err != nil {
		return Entry{}, fmt.Errorf("audit file %s: %w", l.path, err)
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return Entry{}, fmt.Errorf("audit file %s: lock: %w", l.path, err)
	}
	defer unlockFile(f)

	st, err := f.Stat()
	if err != nil {
		return Entry{}, fmt.Errorf("audit file %s: %w", l.path, err)
	}
	size := st.Size()
	if size == 0 {
		return Entry{}, ErrEmptyLog
	}
	start, torn, err := tornStart(f, size)
	if err != nil {
		return Entry{}, fmt.Errorf("audit file %s: %w", l.path, err)
	}
	if !torn {
		return Entry{}, ErrNothingTorn
	}
	if n := size - start; n > MaxTorn {
		return Entry{}, fmt.Errorf("audit file %s: the incomplete last line is %d bytes, more than the %d MiB a cut-short entry can be: not set aside, nothing changed (run `berth audit verify`)", l.path, n, MaxTorn>>20)
	}
	frag := make([]byte, size-start)
	if _, err := f.ReadAt(frag, start); err != nil {
		return Entry{}, fmt.Errorf("audit file %s: %w", l.path, err)
	}
	prev, seq, err := lastEntryBefore(f, start)
	if err != nil {
		return Entry{}, fmt.Errorf("audit file %s: not a torn write: before the incomplete line, %w; nothing changed (run `berth audit verify`)", l.path, err)
	}

	sum := sha256.Sum256(frag)
	details, err := json.Marshal(TornDetails{Bytes: len(frag), SHA256: hex.EncodeToString(sum[:]), Fragment: frag})
	if err != nil {
		return Entry{}, err
	}
	b, stored, err := seal(hashed{Seq: seq + 1, Time: l.now().UTC().Format(time.RFC3339Nano), Actor: CurrentUser(),
		Action: TornAction, Context: berthContext, Target: l.path, Details: details, Prev: prev})
	if err != nil {
		return Entry{}, err
	}
	// The new line overwrites the fragment it records, then the file is cut
	// at its end (a guard: the line holds the fragment in base64, so it is
	// always the longer). A crash in the middle leaves a line without its
	// newline again (part of the new entry over the fragment, or the whole
	// entry with bytes after it), which a second repair sets aside too.
	if _, err := f.WriteAt(b, start); err != nil {
		return Entry{}, fmt.Errorf("audit file %s: write: %w", l.path, err)
	}
	if err := f.Truncate(start + int64(len(b))); err != nil {
		return Entry{}, fmt.Errorf("audit file %s: truncate: %w", l.path, err)
	}
	if err := f.Sync(); err != nil {
		return Entry{}, fmt.Errorf("audit file %s: fsync: %w", l.path, err)
	}
	return l.mirror(ctx, stored)
}

// tornStart is where the torn last line of the file's first size bytes
// starts (just after the last newline, 0 when there is none); torn is
// false when the file is empty or ends with a newline.
func tornStart(f *os.File, size int64) (start int64, torn bool, err error) {
	if size == 0 {
		return 0, false, nil
	}
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	for end := size; end > 0; {
		n := min(int64(chunk), end)
		pos := end - n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return 0, false, err
		}
		if end == size && buf[n-1] == '\n' {
			return 0, false, nil
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return pos + int64(i) + 1, true, nil
		}
		end = pos
	}
	return 0, true, nil
}
