package audit

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Line is an entry in the exact encoding the log file holds (and a mirror
// stores): its hash can be checked without the file.
func (e Entry) Line() ([]byte, error) {
	d, err := compactJSON(e.DetailsJSON())
	if err != nil {
		return nil, err
	}
	return json.Marshal(line{hashed: hashed{Seq: e.Seq, Time: e.Time, Actor: e.Actor, Action: e.Action, Context: e.Context, Target: e.Target, Details: d, Prev: e.Prev}, Hash: e.Hash})
}

// ParseLine reads an entry from its file/mirror encoding and checks that
// its content matches its hash.
func ParseLine(b []byte) (Entry, error) {
	ln, err := parseLine(b)
	if err != nil {
		return Entry{}, err
	}
	return toEntry(ln), nil
}

// MirrorReport is the outcome of checking one log's mirrored copy.
type MirrorReport struct {
	Source  string `json:"source"`
	Entries int    `json:"entries"`
	Head    string `json:"head"`
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
}

// VerifyMirror checks a mirrored sequence of one log's entries (in the
// order mirrored): each entry's content matches its hash, sequence numbers
// only go up, and consecutive entries chain. The first mirrored entry may
// start mid-chain (mirroring began after the log did) and the sequence may
// skip entries mirrored to another cluster. When local is given (that same log's entries
// from its file), every mirrored entry must be in the file with the same
// hash, which catches entries removed from the end of the file — something
// the file's own chain cannot show.
func VerifyMirror(source string, mirrored [][]byte, local []Entry) MirrorReport {
	rep := MirrorReport{Source: source, OK: true, Head: Genesis}
	bySeq := map[int64]string{}
	for _, e := range local {
		bySeq[e.Seq] = e.Hash
	}
	prev, prevSeq := "", int64(0)
	for i, b := range mirrored {
		e, err := ParseLine(b)
		fail := func(format string, a ...any) MirrorReport {
			rep.OK = false
			rep.Problem = fmt.Sprintf("mirrored entry %d: %s", i+1, fmt.Sprintf(format, a...))
			return rep
		}
		if err != nil {
			return fail("%v", err)
		}
		// A jump in the sequence is entries this log mirrored to another
		// cluster (one log serves every context) or whose mirroring failed
		// (a warning when they were written); the file holds them. Adjacent
		// entries must chain, and the order must never go back.
		if i > 0 && (e.Seq <= prevSeq || (e.Seq == prevSeq+1 && e.Prev != prev)) {
			return fail("entry %d does not follow entry %d in the mirror (reordered, repeated or altered)", e.Seq, prevSeq)
		}
		if local != nil {
			h, ok := bySeq[e.Seq]
			switch {
			case !ok:
				return fail("entry %d is in the mirror but not in the local file (removed from the file?)", e.Seq)
			case h != e.Hash:
				return fail("entry %d differs between the mirror and the local file", e.Seq)
			}
		}
		prev, prevSeq = e.Hash, e.Seq
		rep.Entries++
		rep.Head = e.Hash
	}
	return rep
}

// Sources lists the sources of a mirror read back (each local log's
// entries keyed by its source), in order.
func Sources(mirrored map[string][][]byte) []string {
	out := make([]string, 0, len(mirrored))
	for s := range mirrored {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
