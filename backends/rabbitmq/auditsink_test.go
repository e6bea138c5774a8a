package rabbitmq

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/audit"
)

// Finding 7 of issue 13: RabbitMQ audit entries were mirrored nowhere, so
// cutting the local log's tail was undetectable. Every entry now goes to
// the server's audit stream, and the mirror shows a cut tail.
func TestAuditStreamMirrorsEntriesAndShowsACutTail(t *testing.T) {
	t.Parallel()
	needRabbit(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.log")
	source := uniq(t, "source") + ":" + path
	sink := NewAuditSink(Options{AMQPURL: amqpURL()}, source)
	t.Cleanup(sink.Close)
	log, err := audit.Open(path, audit.WithSink(sink))
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"redrive.plan", "redrive.approved", "redrive.execute.started", "redrive.execute.completed"} {
		if _, err := log.Append(ctx, audit.Entry{Action: action, Context: "rmq", Target: "plan"}); err != nil {
			t.Fatalf("append %s: %v", action, err)
		}
	}
	c := testClient(t, Options{AMQPURL: amqpURL()})
	mirrored, err := c.MirroredAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(mirrored[source]); n != 4 {
		t.Fatalf("the stream holds %d entries of this log, want 4", n)
	}
	local, err := log.List()
	if err != nil {
		t.Fatal(err)
	}
	if rep := audit.VerifyMirror(source, mirrored[source], local); !rep.OK || rep.Entries != 4 {
		t.Fatalf("intact log: %+v", rep)
	}

	// Cut the last entry off the file: the file's own chain is still
	// intact, the mirror is not.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimRight(string(b), "\n"), "\n")
	if err := os.WriteFile(path, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	cut, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := cut.Verify(); err != nil || !rep.OK {
		t.Fatalf("the cut file's own chain should still verify: %+v %v", rep, err)
	}
	local, err = cut.List()
	if err != nil {
		t.Fatal(err)
	}
	rep := audit.VerifyMirror(source, mirrored[source], local)
	if rep.OK || !strings.Contains(rep.Problem, "not in the local file") {
		t.Fatalf("cut tail not detected: %+v", rep)
	}
}

// Reading the mirror of a server where nothing was mirrored yet is not an
// error; a source that never mirrored has no entries.
func TestMirroredAuditOfAnUnknownSourceIsEmpty(t *testing.T) {
	t.Parallel()
	needRabbit(t)
	c := testClient(t, Options{AMQPURL: amqpURL()})
	m, err := c.MirroredAudit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := m[uniq(t, "nobody")]; len(got) != 0 {
		t.Fatalf("entries for a source that never mirrored: %d", len(got))
	}
}
