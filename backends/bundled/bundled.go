// Package bundled runs Berth's bundled Kafka-protocol broker: a kfake cluster
// (github.com/twmb/franz-go/pkg/kfake) with on-disk persistence, the
// HarborCart seed topology, a recognisable cluster id and a simulated
// degraded mode (see degraded.go). It is what `berth broker` and `berth demo`
// run, and what integration tests start on random ports.
package bundled

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends/bundled/internal/kfake"
	"github.com/berth-dev/berth/internal/config"
)

// ClusterIDPrefix starts the cluster id of every bundled broker. `berth demo`
// only ever writes into a cluster whose id has this prefix, so it can never
// load a workload into someone's real Kafka.
const ClusterIDPrefix = "berth-bundled-"

// IsBundledClusterID reports whether id names a Berth bundled broker.
func IsBundledClusterID(id string) bool { return strings.HasPrefix(id, ClusterIDPrefix) }

// Seeds accepted by Options.Seed.
const (
	SeedHarborCart = "harborcart"
	SeedNone       = "none"
)

// Options configure Start. The zero value of each field means its default.
type Options struct {
	// Listen is host:port of the first broker; further brokers listen on the
	// following ports. Port 0 picks a random free port for every broker.
	Listen string
	// Brokers is the number of brokers (default 3).
	Brokers int
	// DataDir holds the persisted log and state (default
	// config.DataHome()/broker). It is locked while a broker runs.
	DataDir string
	// Fsync syncs every produced batch to disk before acknowledging it.
	Fsync bool
	// Seed is "harborcart" (default) or "none".
	Seed string
	// Logf receives the broker's own warnings: an open-file budget too
	// small for its partitions, running out of descriptors (default: none).
	Logf func(format string, args ...any)

	// fileBudget (benchmarks) overrides how many descriptors budgetFS may
	// keep open: 0 is the limit less the reserve, -1 is kfake's own files.
	fileBudget int
}

// DefaultDataDir is where the bundled broker keeps its data unless told otherwise.
func DefaultDataDir() string { return filepath.Join(config.DataHome(), "broker") }

// Broker is a running bundled broker.
type Broker struct {
	kc        *kfake.Cluster
	addrs     []string
	clusterID string
	dataDir   string
	lock      *os.File

	// internal is the broker's own client: it re-issues requests that the
	// degraded-mode hooks pass through to kfake's handlers (see degraded.go).
	internal *kgo.Client
	ctx      context.Context
	cancel   context.CancelFunc

	deg degradedState

	// files is the open-file budget at start; watch counts running out of
	// descriptors; partitions is the last partition count seen.
	files      FileBudget
	watch      *fileWatch
	partitions atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// withDefaults fills zero fields with their defaults.
func (o Options) withDefaults() Options {
	if o.Listen == "" {
		o.Listen = config.DefaultBootstrap
	}
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.Seed == "" {
		o.Seed = SeedHarborCart
	}
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir()
	}
	return o
}

// Validate reports the first bad option as an error naming it.
func (o Options) Validate() error {
	o = o.withDefaults()
	if o.Brokers < 1 || o.Brokers > 16 {
		return fmt.Errorf("brokers: %d is out of range (1-16)", o.Brokers)
	}
	if o.Seed != SeedHarborCart && o.Seed != SeedNone {
		return fmt.Errorf("seed: %q is not one of harborcart, none", o.Seed)
	}
	_, _, err := listenPorts(o.Listen, o.Brokers)
	return err
}

// Start runs a bundled broker and returns once every broker answers.
func Start(ctx context.Context, o Options) (*Broker, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	host, ports, _ := listenPorts(o.Listen, o.Brokers)
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", o.DataDir, errors.Unwrap(err))
	}
	lock, err := lockDir(o.DataDir)
	if err != nil {
		return nil, err
	}

	opts := []kfake.Opt{
		kfake.Ports(ports...),
		kfake.DataDir(o.DataDir),
		// A fresh data dir gets a new id; a reloaded one keeps the id
		// persisted in its meta.json (kfake overrides this option on load).
		kfake.ClusterID(ClusterIDPrefix + randomHex(8)),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			// kfake always asks for 127.0.0.1:PORT; honour --listen's host.
			_, port, _ := net.SplitHostPort(addr)
			ln, err := net.Listen(network, net.JoinHostPort(host, port))
			if err != nil {
				return nil, fmt.Errorf("listen %s: %w", net.JoinHostPort(host, port), unwrapSyscall(err))
			}
			return ln, nil
		}),
	}
	if o.Fsync {
		opts = append(opts, kfake.SyncWrites())
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	b := &Broker{dataDir: o.DataDir, lock: lock}
	b.files.Limit, b.files.Raised, b.files.Hard = raiseFileLimit()
	b.watch = &fileWatch{logf: logf, budget: func() FileBudget {
		f := b.files
		f.Partitions = int(b.partitions.Load())
		return f
	}}
	opts = append(opts, kfake.WithLogger(b.watch))
	switch {
	case o.fileBudget > 0:
		opts = append(opts, kfake.WithFS(newBudgetFS(o.fileBudget)))
	case o.fileBudget == 0 && b.files.Limit > 2*reservedFiles:
		// Partition files beyond the budget are closed when idle and
		// reopened on demand (budgetfs.go).
		opts = append(opts, kfake.WithFS(newBudgetFS(int(b.files.Limit-reservedFiles))))
	}
	kc, err := kfake.NewCluster(opts...)
	if err != nil {
		lock.Close()
		if isOutOfFiles(err.Error()) {
			return nil, fmt.Errorf("bundled broker: out of file descriptors while loading %s (open-file limit %d): %w", o.DataDir, b.files.Limit, err)
		}
		return nil, fmt.Errorf("bundled broker: %w", err)
	}
	b.kc, b.addrs = kc, kc.ListenAddrs()
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.deg.init()
	b.internal, err = kgo.NewClient(
		kgo.SeedBrokers(b.addrs...),
		kgo.ClientID("berth-bundled-internal"),
		kgo.DialTimeout(5*time.Second),
	)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("bundled broker: %w", err)
	}
	b.installHooks()

	id, err := b.fetchClusterID(ctx)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("bundled broker: %w", err)
	}
	b.clusterID = id
	if o.Seed == SeedHarborCart {
		if err := b.seedOnce(); err != nil {
			b.Close()
			return nil, err
		}
	}
	if f, err := b.FileBudget(ctx); err == nil && f.Short() {
		logf("%s", f.Warning())
	}
	return b, nil
}

// Addrs are the brokers' host:port addresses, broker 0 first.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// ClusterID is the cluster id (ClusterIDPrefix + random, persisted in the data dir).
func (b *Broker) ClusterID() string { return b.clusterID }

// DataDir is the directory the broker persists to.
func (b *Broker) DataDir() string { return b.dataDir }

// Kfake exposes the underlying cluster for tests that need kfake's own hooks.
func (b *Broker) Kfake() *kfake.Cluster { return b.kc }

// Close persists state and stops the broker. Safe to call more than once.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		if b.cancel != nil {
			b.cancel() // unblocks any passed-through request in flight
		}
		// Wait out a SetDown in progress: kfake's admin calls block
		// forever once the cluster has stopped.
		b.deg.setMu.Lock()
		defer b.deg.setMu.Unlock()
		if b.internal != nil {
			b.internal.Close()
		}
		b.kc.Close()
		if b.lock != nil {
			b.lock.Close()
		}
	})
	return b.closeErr
}

// fetchClusterID asks the cluster for its id (the persisted one on reload).
func (b *Broker) fetchClusterID(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // no topics: just the cluster
	resp, err := req.RequestWith(ctx, b.internal)
	if err != nil {
		return "", err
	}
	if resp.ClusterID == nil {
		return "", errors.New("metadata carries no cluster id")
	}
	return *resp.ClusterID, nil
}

// Probe asks whatever listens on addr for its cluster id. It fails quickly
// (within timeout) when nothing answers.
func Probe(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(timeout), kgo.RetryTimeout(timeout), kgo.RequestRetries(1))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return "", fmt.Errorf("%s: no broker", addr)
	}
	kresp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", addr, err)
	}
	resp := kresp.(*kmsg.MetadataResponse)
	if resp.ClusterID == nil {
		return "", nil
	}
	return *resp.ClusterID, nil
}

// listenPorts splits host:port and returns the ports for n brokers: port,
// port+1, ... or all zero (random) when port is 0.
func listenPorts(listen string, n int) (string, []int, error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", nil, fmt.Errorf("listen: %q is not host:port", listen)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", nil, fmt.Errorf("listen: %q has no valid port", listen)
	}
	ports := make([]int, n)
	if port != 0 {
		if port+n-1 > 65535 {
			return "", nil, fmt.Errorf("listen: ports %d-%d run past 65535", port, port+n-1)
		}
		for i := range ports {
			ports[i] = port + i
		}
	}
	return host, ports, nil
}

// lockDir takes an exclusive lock on dir so two brokers never share a log.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "berth.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, errors.Unwrap(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s is in use by another bundled broker", dir)
	}
	return f, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// unwrapSyscall keeps "address already in use" rather than Go's nested op text.
func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// PersistedClusterID is the cluster id a bundled broker keeps in dir ("" when
// dir holds no broker data yet). A broker writes it when it starts, so it
// tells which data dir a running broker uses: the one whose id it answers
// with.
func PersistedClusterID(dir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, errors.Unwrap(err))
	}
	var meta struct {
		ClusterID string `json:"cluster_id"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return "", fmt.Errorf("data dir %s: meta.json: %v", dir, err)
	}
	return meta.ClusterID, nil
}
