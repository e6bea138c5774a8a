package bundled

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/bundled/internal/kfake"
)

// 10,000 partitions run under a 1,024 open-file limit: a record produced
// to every partition is acknowledged, read back, and still there after a
// restart on the same data dir. (Before, kfake kept two files open per
// written partition and answered UNKNOWN_SERVER_ERROR near 450.) The broker
// runs in a child process so the lowered limit touches nothing else.
func TestTenThousandPartitionsUnderAThousandFiles(t *testing.T) {
	if os.Getenv("BERTH_TEST_FILES_CHILD") == "1" {
		tenThousandChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTenThousandPartitionsUnderAThousandFiles$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "BERTH_TEST_FILES_CHILD=1", "BERTH_TEST_FILES_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, tail(out))
	}
	for _, want := range []string{"LIMIT 1024", "PRODUCED 10000", "READ 10000", "AFTER RESTART 10000", "EXHAUSTED 0"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("child output lacks %q:\n%s", want, tail(out))
		}
	}
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

const widePartitions = 10000

func tenThousandChild(t *testing.T) {
	lim := syscall.Rlimit{Cur: 1024, Max: 1024}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := os.Getenv("BERTH_TEST_FILES_DIR")
	logf := func(format string, args ...any) { fmt.Printf("LOG "+format+"\n", args...) }
	b, err := Start(ctx, Options{Listen: "127.0.0.1:0", Brokers: 1, DataDir: dir, Seed: SeedNone, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LIMIT %d\n", b.files.Limit)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, widePartitions, 1, nil, "wide"); err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, widePartitions)
	for p := range recs {
		recs[p] = &kgo.Record{Topic: "wide", Partition: int32(p), Value: []byte(fmt.Sprint(p))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	fmt.Printf("PRODUCED %d\n", len(recs))
	fmt.Printf("READ %d\n", readAll(ctx, t, b.Addrs()))
	cl.Close()
	f, _ := b.FileBudget(ctx)
	fmt.Printf("EXHAUSTED %d\n", f.Exhausted)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b, err = Start(ctx, Options{Listen: "127.0.0.1:0", Brokers: 1, DataDir: dir, Seed: SeedNone, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fmt.Printf("AFTER RESTART %d\n", readAll(ctx, t, b.Addrs()))
}

// readAll consumes "wide" from the start and counts records whose value
// is their partition number.
func readAll(ctx context.Context, t *testing.T, addrs []string) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("wide"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[int32]bool{}
	for len(seen) < widePartitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == fmt.Sprint(r.Partition) {
				seen[r.Partition] = true
			}
		})
	}
	return len(seen)
}

// Running out of descriptors is logged in words with the limit and the
// partition count, at most every 10 s, and counted.
func TestOutOfFilesIsLoggedAndCounted(t *testing.T) {
	var logs []string
	w := &fileWatch{logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) },
		budget: func() FileBudget { return FileBudget{Limit: 1024, Partitions: 20000} }}
	for i := 0; i < 3; i++ {
		w.Logf(kfake.LogLevelWarn, "persist batch open %s-%d: %v", "orders", 612, &os.PathError{Op: "open", Path: "/d/0.dat", Err: syscall.EMFILE})
	}
	w.Logf(kfake.LogLevelWarn, "an ordinary warning")
	if w.exhausted.Load() != 3 || len(logs) != 1 ||
		!strings.HasPrefix(logs[0], "bundled broker: out of file descriptors (open-file limit 1024, 20000 partitions; 1 failure(s) so far): persist batch open orders-612: open /d/0.dat: too many open files") {
		t.Fatalf("exhausted %d, logs %q", w.exhausted.Load(), logs)
	}
}
