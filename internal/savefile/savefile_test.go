package savefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What is at the path decides what Write does: a new file is created
// 0600, an existing one kept unless replace (then replaced whole, no
// temporary left beside it), a directory refused.
func TestWriteNeverTurnsWhatIsThereIntoSomethingElse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "payload.bin")
	for _, replace := range []bool{false, true} {
		os.Remove(file)
		abs, err := Write(file, []byte("one"), replace)
		if err != nil || abs != file {
			t.Fatalf("new file (replace %v): %q %v", replace, abs, err)
		}
		if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("new file (replace %v): mode %v %v, want 0600", replace, st.Mode(), err)
		}
	}
	if _, err := Write(file, []byte("two"), false); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), file) {
		t.Errorf("existing file without replace: %v; want ErrExists naming it", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "one" {
		t.Errorf("existing file changed without replace: %q", b)
	}
	if _, err := Write(file, []byte("two"), true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "two" {
		t.Errorf("replace: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files beside it after a replace: %v", ents)
	}
	for _, replace := range []bool{false, true} {
		if _, err := Write(dir, []byte("x"), replace); err == nil || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("a directory (replace %v): %v", replace, err)
		}
	}
}
