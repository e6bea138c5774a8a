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

	amqp "github.com/rabbitmq/amqp091-go"
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
	_, errOut, code = runBerth(t, "records", "payments", "-p", "0", "--offset", "0", "--save-key", other, "--save-value", val, boot)
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

// `berth dlq show DLQ --event-id ID --save-value FILE` on RabbitMQ: a
// dead-lettered message's body, raw, as the viewer's S saves it; the DLQ
// keeps its messages. Kafka points to `berth records`, which saves a DLQ
// record by its coordinates.
func TestDLQShowSavesARabbitMessageBody(t *testing.T) {
	isolateConfig(t)
	body := []byte{0x00, 0x1b, '[', '2', 'J', 0xff}
	conn, _, _, dlq, _ := rmqDeadLettered(t, "cmd", true, func(string) []amqp.Publishing {
		return []amqp.Publishing{{MessageId: "job-0", Body: []byte(`{}`)}, {MessageId: "job-1", Body: body}}
	})
	dir := t.TempDir()
	cfg := rabbitConfig{Audit: filepath.Join(dir, "audit.log"), Store: filepath.Join(dir, "ledger.db")}.write(t)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runBerth(t, append(args, "--config", cfg)...)
	}
	file := filepath.Join(dir, "body.bin")
	out, errOut, code := run("dlq", "show", dlq, "--event-id", "job-1", "--save-value", file, "-o", "json")
	var got struct {
		DLQ      string `json:"dlq"`
		Position int    `json:"position"`
		EventID  string `json:"event_id"`
		Saved    []struct {
			Part  string `json:"part"`
			File  string `json:"file"`
			Bytes int    `json:"bytes"`
		} `json:"saved"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("save: exit %d %s%s", code, out, errOut)
	}
	if got.DLQ != dlq || got.Position != 1 || got.EventID != "job-1" || len(got.Saved) != 1 || got.Saved[0].Part != "value" || got.Saved[0].File != file || got.Saved[0].Bytes != len(body) {
		t.Errorf("save -o json does not say what was written:\n%s", out)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, body) {
		t.Errorf("saved %x (%v), want %x", b, err, body)
	}
	if _, errOut, code := run("dlq", "show", dlq, "--event-id", "job-0", "--save-value", file); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("save over an existing file: exit %d %q", code, errOut)
	}
	if _, errOut, code := run("dlq", "show", dlq, "--event-id", "job-9", "--save-value", filepath.Join(dir, "none")); code != 1 || !strings.Contains(errOut, "no message with event id job-9") || !strings.Contains(errOut, "nothing written") {
		t.Errorf("save of an unknown event id: exit %d %q", code, errOut)
	}
	// A file in a directory that does not exist: refused before the DLQ is
	// browsed (it was browsed, then the open failed, exit 1).
	if _, errOut, code := run("dlq", "show", dlq, "--event-id", "job-0", "--save-value", filepath.Join(dir, "missing", "x")); code != 2 || !strings.Contains(errOut, "--save-value") || strings.Contains(errOut, "read ") {
		t.Errorf("save into a missing directory: exit %d %q; want exit 2 before anything is read", code, errOut)
	}
	for _, args := range [][]string{{"--save-value", filepath.Join(dir, "x")}, {"--event-id", "job-0"}, {"--event-id", "job-0", "--save-key", filepath.Join(dir, "k")}} {
		if _, errOut, code := run(append([]string{"dlq", "show", dlq}, args...)...); code != 2 {
			t.Errorf("dlq show %v: exit %d %q; want a usage error", args, code, errOut)
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if q, err := ch.QueueDeclarePassive(dlq, false, false, false, false, nil); err != nil || q.Messages != 2 {
		t.Errorf("the DLQ holds %d message(s) after the saves (%v), want 2", q.Messages, err)
	}

	kc := kafkatest.Start(t, 1)
	if _, errOut, code := runBerth(t, "dlq", "show", "orders.DLT", "--event-id", "e", "--save-value", filepath.Join(dir, "k.bin"), "--bootstrap="+kc.Addrs[0]); code != 2 || !strings.Contains(errOut, "berth records") {
		t.Errorf("dlq show --save-value on Kafka: exit %d %q; want 2 pointing to berth records", code, errOut)
	}
}
