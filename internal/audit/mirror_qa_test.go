package audit

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// One local log mirrors each entry to the cluster of the context it was
// made in: an operator who resets offsets on staging and then on prod leaves
// each cluster's mirror with gaps in the sequence. Those gaps are not
// tampering (the file has every entry); reordered, repeated, edited or
// unknown entries still are.
func TestVerifyMirrorAcceptsEntriesMirroredElsewhere(t *testing.T) {
	log, err := Open(filepath.Join(t.TempDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := log.Append(context.Background(), Entry{Action: "offsets.reset", Context: []string{"staging", "prod"}[i%2], Target: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	local, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	line := func(i int) []byte {
		b, err := local[i].Line()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	staging := [][]byte{line(0), line(2), line(4)}
	prod := [][]byte{line(1), line(3)}
	for name, m := range map[string][][]byte{"staging": staging, "prod": prod} {
		if rep := VerifyMirror("h:/audit.log", m, local); !rep.OK || rep.Entries != len(m) || rep.Head != local[len(local)-1-map[string]int{"staging": 0, "prod": 1}[name]].Hash {
			t.Errorf("%s mirror: %+v", name, rep)
		}
	}
	edited := []byte(strings.Replace(string(line(2)), `"staging"`, `"prod"`, 1))
	for name, m := range map[string][][]byte{
		"reordered": {line(2), line(0)},
		"repeated":  {line(0), line(0)},
		"edited":    {line(0), edited},
	} {
		if rep := VerifyMirror("h:/audit.log", m, local); rep.OK {
			t.Errorf("%s mirror passed: %+v", name, rep)
		}
	}
	if rep := VerifyMirror("h:/audit.log", staging, local[:2]); rep.OK {
		t.Errorf("entries cut from the file passed: %+v", rep)
	}
}
