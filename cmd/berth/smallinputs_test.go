package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The small input items: each is a usage error naming its flag, or input
// read as a user means it; nothing half-done, nothing echoed whole.
func TestSmallInputItems(t *testing.T) {
	kc, _ := resetCluster(t)

	// A time before 1970 is a usage error naming the flag (it was exit 1,
	// "no time given").
	_, errOut, code := resetRun(t, kc, "g", "--to-datetime", "0001-01-01T00:00:00Z", "--all-topics")
	if code != 2 || !strings.HasPrefix(errOut, "berth: --to-datetime:") || !strings.Contains(errOut, "before 1970") {
		t.Errorf("--to-datetime 0001: exit %d, stderr %q", code, errOut)
	}

	// A CSV written by a spreadsheet starts with a byte order mark: its
	// header is still a header.
	dir := t.TempDir()
	bom := filepath.Join(dir, "bom.csv")
	os.WriteFile(bom, []byte("\ufefftopic,partition,offset\norders,0,2\n"), 0o600)
	got, errOut, code := resetRun(t, kc, "g", "--from-file", bom)
	if code != 0 || len(got.Partitions) != 1 || got.Partitions[0].Target != 2 {
		t.Errorf("BOM header: exit %d, %+v, stderr %q", code, got.Partitions, errOut)
	}

	// A megabyte-long cell is not echoed: the error quotes its start and
	// says how long it is.
	huge := filepath.Join(dir, "huge.csv")
	os.WriteFile(huge, []byte("orders,0,"+strings.Repeat("9x", 512*1024)+"\n"), 0o600)
	_, errOut, code = resetRun(t, kc, "g", "--from-file", huge)
	if code != 2 || len(errOut) > 400 || !strings.Contains(errOut, "(1048576 bytes, first 64 shown)") {
		t.Errorf("1 MB value: exit %d, %d bytes of stderr: %.300q", code, len(errOut), errOut)
	}
	longTopic := filepath.Join(dir, "topic.csv")
	os.WriteFile(longTopic, []byte(strings.Repeat("t", 1<<20)+",0,1\n"), 0o600)
	_, errOut, code = resetRun(t, kc, "g", "--from-file", longTopic)
	if code != 2 || len(errOut) > 400 || !strings.Contains(errOut, "longer than Kafka allows") {
		t.Errorf("1 MB topic: exit %d, %d bytes of stderr: %.300q", code, len(errOut), errOut)
	}
	if c := committedOf(t, kc, "g"); c[0] != 5 || c[1] != 5 {
		t.Fatalf("a refused input changed offsets: %v", c)
	}

	// The capacity worksheet refuses rates and sizes too small to mean
	// anything, naming the flag.
	for _, args := range [][]string{{"--avg-rate", "0.0000001"}, {"--event-size", "0.001B"}} {
		_, errOut, code := runBerth(t, append([]string{"capacity"}, args...)...)
		if code != 2 || !strings.HasPrefix(errOut, "berth: "+args[0]+": is absurdly small") {
			t.Errorf("capacity %v: exit %d, stderr %q", args, code, errOut)
		}
	}
	out, errOut, code := runBerth(t, "capacity", "--avg-rate", "0.1", "--peak-rate", "0.3", "--hot-key-share", "0.1", "--partitions", "3", "-o", "json")
	if code != 0 || strings.Contains(out, "00000000") || strings.Contains(out, "99999999") {
		t.Errorf("capacity JSON: exit %d %s, float noise:\n%s", code, errOut, out)
	}
}
