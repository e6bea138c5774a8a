package bundled

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Running out of file descriptors is reported as such: with an open-file
// limit of 256, a broker holding 200 partitions says at start that the limit
// leaves room for 64, and when producing to all of them exhausts the
// descriptors its log says so (before, kfake answered UNKNOWN_SERVER_ERROR
// and logged nothing). The broker runs in a child process so the lowered
// limit touches nothing else.
func TestRunningOutOfFilesIsLoggedAndReported(t *testing.T) {
	if os.Getenv("BERTH_TEST_FILES_CHILD") == "1" {
		outOfFilesChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunningOutOfFilesIsLoggedAndReported$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "BERTH_TEST_FILES_CHILD=1", "BERTH_TEST_FILES_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{
		"BUDGET limit=256 max=64 partitions=200 short=true",
		"LOG bundled broker: 200 partitions need up to 528 open files once all take writes, but the open-file limit is 256 (room for 64)",
		"LOG bundled broker: out of file descriptors (open-file limit 256, 200 partitions",
		"EXHAUSTED yes",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}

func outOfFilesChild(t *testing.T) {
	lim := syscall.Rlimit{Cur: 256, Max: 256}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := os.Getenv("BERTH_TEST_FILES_DIR")
	b, err := Start(ctx, Options{Listen: "127.0.0.1:0", Brokers: 1, DataDir: dir, Seed: SeedNone, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.RecordRetries(1), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 200, 1, nil, "wide"); err != nil {
		t.Fatal(err)
	}
	// The start-up warning is logged by Start; with the topic created
	// after, log what the operator would see on the next start.
	f, err := b.FileBudget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("BUDGET limit=%d max=%d partitions=%d short=%v\n", f.Limit, f.MaxPartitions(), f.Partitions, f.Short())
	logf("%s", f.Warning())
	var recs []*kgo.Record
	for p := int32(0); p < 200; p++ {
		recs = append(recs, &kgo.Record{Topic: "wide", Partition: p, Value: []byte("x")})
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	cl.ProduceSync(pctx, recs...) // some fail: that is the point
	pcancel()
	f, _ = b.FileBudget(ctx)
	if f.Exhausted > 0 {
		fmt.Println("EXHAUSTED yes")
	}
	mu.Lock()
	for _, l := range logs {
		fmt.Println("LOG " + l)
	}
	mu.Unlock()
}
