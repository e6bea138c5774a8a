package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// `berth records --save-value/--save-key` is the record viewer's S without
// the console: one record's raw bytes, exactly, to a file; an existing file
// only with --overwrite; a pipe written in place.
func TestRecordsSaveWritesOneRecordsRawBytes(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "payments", 1, 1, nil)
	first, second := []byte{0xde, 0xad, 0x1b, '[', '2', 'J', 0x00, 0xff}, []byte(`{"n":1}`)
	kc.Produce(t, &kgo.Record{Topic: "payments", Key: []byte("k\x1b0"), Value: first}, &kgo.Record{Topic: "payments", Value: second})
	boot := "--bootstrap=" + kc.Addrs[0]
	dir := t.TempDir()
	val, key := filepath.Join(dir, "value.bin"), filepath.Join(dir, "key.bin")
	read := func(file string) []byte {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	out, errOut, code := runBerth(t, "records", "payments", "-p", "0", "--offset", "0", "--save-value", val, "--save-key", key, "-o", "json", boot)
	var got struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Saved     []struct {
			Part  string `json:"part"`
			File  string `json:"file"`
			Bytes int    `json:"bytes"`
		} `json:"saved"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("save: exit %d %s%s", code, out, errOut)
	}
	if got.Topic != "payments" || got.Offset != 0 || len(got.Saved) != 2 || got.Saved[0].Part != "value" || got.Saved[0].File != val || got.Saved[0].Bytes != len(first) ||
		got.Saved[1].Part != "key" || got.Saved[1].File != key || got.Saved[1].Bytes != 3 {
		t.Errorf("save -o json does not say what was written:\n%s", out)
	}
	if !bytes.Equal(read(val), first) || string(read(key)) != "k\x1b0" {
		t.Errorf("saved bytes differ: value %x key %q", read(val), read(key))
	}

	// An existing file is kept unless --overwrite; nothing else is written.
	other := filepath.Join(dir, "other.bin")
	_, errOut, code = runBerth(t, "records", "payments", "-p", "0", "--offset", "1", "--save-key", other, "--save-value", val, boot)
	if code != 1 || !strings.Contains(errOut, val+" already exists") || !strings.Contains(errOut, "--overwrite") {
		t.Errorf("save over an existing file: exit %d %q; want 1 naming the file and --overwrite", code, errOut)
	}
	if !bytes.Equal(read(val), first) {
		t.Errorf("the existing file was changed without --overwrite")
	}
	// A null key is said, before anything is written.
	_, errOut, code = runBerth(t, "records", "payments", "-p", "0", "--offset", "1", "--save-value", other, "--save-key", filepath.Join(dir, "k2"), boot)
	if code != 1 || !strings.Contains(errOut, "null key") {
		t.Errorf("save of a null key: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(other); err == nil {
		t.Errorf("the value was written though the key could not be")
	}
	out, errOut, code = runBerth(t, "records", "payments", "-p", "0", "--offset", "1", "--save-value", val, "--overwrite", boot)
	if code != 0 || !bytes.Equal(read(val), second) || !strings.Contains(out, "wrote the value of payments[0] offset 1 (7 bytes) to "+val) {
		t.Errorf("--overwrite: exit %d %q %s; file %q", code, out, errOut, read(val))
	}

	// A pipe is written in place, and is still a pipe.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got2 := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got2 <- nil
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got2 <- b
	}()
	if _, errOut, code := runBerth(t, "records", "payments", "-p", "0", "--offset", "0", "--save-value", fifo, boot); code != 0 {
		t.Fatalf("save to a pipe: exit %d %s", code, errOut)
	}
	if b := <-got2; !bytes.Equal(b, first) {
		t.Errorf("the pipe's reader got %x, want %x", b, first)
	}
	if st, err := os.Stat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v %v", st.Mode(), err)
	}

	// Bad input: a usage error naming the flag; no record there: said.
	for _, args := range [][]string{{"--limit", "2", "--save-value", filepath.Join(dir, "x")}, {"--save-value", val, "--save-key", val}} {
		if _, errOut, code := runBerth(t, append([]string{"records", "payments", "-p", "0", "--offset", "0", boot}, args...)...); code != 2 || !strings.Contains(errOut, "--save-") {
			t.Errorf("records %v: exit %d %q; want 2 naming the flag", args, code, errOut)
		}
	}
	_, errOut, code = runBerth(t, "records", "payments", "-p", "0", "--offset", "9", "--save-value", filepath.Join(dir, "none"), boot)
	if code != 1 || !strings.Contains(errOut, "no record at or after offset 9") || !strings.Contains(errOut, "nothing written") {
		t.Errorf("save past the end: exit %d %q", code, errOut)
	}
}
