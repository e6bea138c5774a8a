// Package golden is test support: it compares a rendered view with its
// golden file under the repository's testdata/golden/, and rewrites the
// file instead when the tests run with -update:
//
//	go test ./tui/... -run Golden -update
//
// Every golden in the repository goes through Assert, so there is one
// layout (testdata/golden/DIR/NAME.golden) and one flag. The flag is the
// one charmbracelet/x/exp/golden registers (teatest imports it, and a
// second "update" flag in the same test binary would panic); this package
// imports it so the flag exists in every test binary that uses Assert.
// No production code imports this package.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/aymanbagabas/go-udiff"
	"github.com/charmbracelet/x/ansi"
	_ "github.com/charmbracelet/x/exp/golden" // registers -update
)

// Updating reports whether the tests run with -update.
func Updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// Assert compares view, colour stripped, with testdata/golden/DIR/NAME.golden
// at the repository root (dir is usually the package's path, e.g.
// "tui/dlq"). With -update it writes the file instead. A mismatch fails
// with a unified diff.
func Assert(t testing.TB, dir, name, view string) {
	t.Helper()
	got := ansi.Strip(view) + "\n"
	path := filepath.Join(root(t), "testdata", "golden", filepath.FromSlash(dir), name+".golden")
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
		return
	}
	if got != string(want) {
		t.Fatalf("%s/%s differs from %s (run with -update if the change is intended):\n%s",
			dir, name, path, udiff.Unified("golden", "view", string(want), got))
	}
}

// root is the directory holding go.mod, found from the test's working
// directory (its package directory).
func root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("golden: no go.mod above the test's directory")
		}
		dir = parent
	}
}
