package bundled

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends/bundled/internal/kfake"
)

// The bundled broker persists through kfake (kfake.DataDir), which keeps a
// partition's active segment and index open from its first write on, and
// every sealed segment it has read: two or more descriptors per partition.
// At start the soft open-file limit is raised to the hard one, and kfake
// persists through budgetFS (budgetfs.go), which keeps at most the limit
// less a reserve open and reopens the rest on demand: 10,000 partitions
// run under a 1,024 limit, more slowly once their files no longer all stay
// open. Descriptors can still run out (connections, another process's
// limit): every "too many open files" kfake meets is counted and logged as
// such, instead of only answering the client UNKNOWN_SERVER_ERROR.

const (
	// filesPerPartition: the active segment and its index.
	filesPerPartition = 2
	// reservedFiles: listeners, client connections, state logs, the data
	// dir lock and the Go runtime.
	reservedFiles = 128
)

// FileBudget is the broker's open-file budget.
type FileBudget struct {
	// Limit is the soft RLIMIT_NOFILE in force (after raising it), Raised
	// what it was before when Berth raised it (0 otherwise), Hard the
	// ceiling.
	Limit, Raised, Hard uint64
	// Partitions is how many partitions the broker holds.
	Partitions int
	// Exhausted counts the times kfake could not open a file because the
	// process ran out of descriptors.
	Exhausted int64
}

// MaxPartitions is how many partitions' files stay open at once within the
// limit; beyond it they are closed when idle and reopened on demand.
func (f FileBudget) MaxPartitions() int {
	if f.Limit <= reservedFiles {
		return 0
	}
	return int((f.Limit - reservedFiles) / filesPerPartition)
}

// Short is true when the broker holds more partitions than keep their
// files open at once (they still work, reopening files on demand).
func (f FileBudget) Short() bool { return f.Limit > 0 && f.Partitions > f.MaxPartitions() }

// Warning is the one-line note for a short budget ("" when there is room).
func (f FileBudget) Warning() string {
	if !f.Short() {
		return ""
	}
	return fmt.Sprintf("bundled broker: %d partitions, more than the %d whose files stay open under the open-file limit %d: the others' files are reopened on demand (slower); for speed raise the limit (ulimit -n %d)",
		f.Partitions, f.MaxPartitions(), f.Limit, uint64(f.Partitions)*filesPerPartition+reservedFiles)
}

// raiseFileLimit lifts the soft open-file limit to the hard one (the Go
// runtime usually has already) and reports both.
func raiseFileLimit() (limit, raised, hard uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, 0
	}
	if rl.Cur < rl.Max {
		was := rl.Cur
		up := rl
		up.Cur = rl.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
			return up.Cur, was, up.Max
		}
	}
	return rl.Cur, 0, rl.Max
}

// fileWatch is kfake's logger: it notices descriptor exhaustion, counts it
// and logs it in words (at most once per logEvery), and passes kfake's
// errors on.
type fileWatch struct {
	logf      func(format string, args ...any)
	exhausted atomic.Int64
	mu        sync.Mutex
	lastLog   time.Time
	budget    func() FileBudget
}

const logEvery = 10 * time.Second

// Logf implements kfake.Logger.
func (w *fileWatch) Logf(level kfake.LogLevel, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if isOutOfFiles(msg) {
		n := w.exhausted.Add(1)
		w.mu.Lock()
		due := time.Since(w.lastLog) >= logEvery
		if due {
			w.lastLog = time.Now()
		}
		w.mu.Unlock()
		if due {
			b := w.budget()
			w.logf("bundled broker: out of file descriptors (open-file limit %d, %d partitions; %d failure(s) so far): %s; producers get UNKNOWN_SERVER_ERROR until files are free: raise the limit (ulimit -n) or use fewer partitions",
				b.Limit, b.Partitions, n, msg)
		}
		return
	}
	if level == kfake.LogLevelError {
		w.logf("bundled broker: %s", msg)
	}
}

func isOutOfFiles(msg string) bool {
	return strings.Contains(msg, syscall.EMFILE.Error()) || strings.Contains(msg, syscall.ENFILE.Error())
}

// FileBudget reports the broker's open-file budget now.
func (b *Broker) FileBudget(ctx context.Context) (FileBudget, error) {
	f := b.files
	f.Exhausted = b.watch.exhausted.Load()
	f.Partitions = int(b.partitions.Load())
	n, err := b.countPartitions(ctx)
	if err != nil {
		return f, err
	}
	f.Partitions = n
	return f, nil
}

// countPartitions counts every partition the broker holds and remembers it
// for the logger. It asks a broker directly: the client's metadata cache
// would answer an all-topics request with what it saw at start.
func (b *Broker) countPartitions(ctx context.Context) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	seeds := b.internal.SeedBrokers()
	if len(seeds) == 0 {
		return 0, fmt.Errorf("no broker to ask")
	}
	kresp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range kresp.(*kmsg.MetadataResponse).Topics {
		if t.ErrorCode == 0 {
			n += len(t.Partitions)
		}
	}
	b.partitions.Store(int64(n))
	return n, nil
}
