package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/internal/config"
)

func init() { register(newBrokerCmd) }

// brokerFlags are the flags `berth broker` and `berth demo` share.
type brokerFlags struct {
	opts     bundled.Options
	down     []int
	topology bool // --brokers, --fsync and --seed were added
}

func (f *brokerFlags) add(cmd *cobra.Command, withTopology bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.opts.Listen, "listen", config.DefaultBootstrap, "host:port of the first broker; further brokers use the following ports (port 0: random ports)")
	fl.StringVar(&f.opts.DataDir, "data-dir", bundled.DefaultDataDir(), "directory the broker persists topics, records and offsets to")
	fl.IntSliceVar(&f.down, "down-broker", nil, "simulate broker ID being down (repeatable): shrunk ISR, offline replicas, moved leaders")
	f.topology = withTopology
	if withTopology {
		fl.IntVar(&f.opts.Brokers, "brokers", 3, "number of brokers")
		fl.BoolVar(&f.opts.Fsync, "fsync", false, "fsync every produced batch before acknowledging it")
		fl.StringVar(&f.opts.Seed, "seed", bundled.SeedHarborCart, "topics to create on a fresh data dir: harborcart|none")
	}
}

// validate checks the flags before anything starts (usage errors exit 2).
func (f *brokerFlags) validate() error {
	if f.topology && f.opts.Brokers < 1 {
		return usageErr("--brokers: %d is out of range (1-16)", f.opts.Brokers)
	}
	if err := f.opts.Validate(); err != nil {
		return usageErr("--%v", err)
	}
	n := f.opts.Brokers
	if n == 0 {
		n = 3
	}
	for _, id := range f.down {
		if id < 0 || id >= n {
			return usageErr("--down-broker: %d is not a broker id (0-%d)", id, n-1)
		}
	}
	return nil
}

// applyDown marks the --down-broker brokers down.
func (f *brokerFlags) applyDown(b *bundled.Broker) error {
	for _, id := range f.down {
		if err := b.SetDown(int32(id), true); err != nil {
			return err
		}
	}
	return nil
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func newBrokerCmd(a *app) *cobra.Command {
	var f brokerFlags
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run the bundled Kafka-protocol broker in the foreground",
		Long: `Run the bundled broker (kfake) in the foreground until SIGINT or SIGTERM.

Topics, records and committed offsets persist in --data-dir and come back on
restart. A fresh data dir is seeded with the HarborCart topics (--seed).
--down-broker simulates a lost broker: metadata reports shrunk ISRs, offline
replicas and moved leaders (nothing is really replicated by the bundled broker).`,
		Args:        noArgs,
		Annotations: map[string]string{"config": "none"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			errOut := cmd.ErrOrStderr()
			f.opts.Logf = func(format string, args ...any) {
				fmt.Fprintf(errOut, "berth: "+format+"\n", args...)
			}
			b, err := bundled.Start(ctx, f.opts)
			if err != nil {
				return err
			}
			defer b.Close()
			if err := f.applyDown(b); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "bundled broker %s (data dir %s)\n", b.ClusterID(), b.DataDir())
			for i, addr := range b.Addrs() {
				state := ""
				for _, d := range b.Down() {
					if int(d) == i {
						state = " (simulated down)"
					}
				}
				fmt.Fprintf(out, "broker %d listening on %s%s\n", i, addr, state)
			}
			fmt.Fprintf(out, "bootstrap: %s\n", strings.Join(b.Addrs(), ","))
			if fb, err := b.FileBudget(ctx); err == nil && fb.Limit > 0 {
				raised := ""
				if fb.Raised > 0 {
					raised = fmt.Sprintf(" (raised from %d)", fb.Raised)
				}
				fmt.Fprintf(out, "open files: limit %d%s, files of %d partitions kept open (more are reopened on demand); %d partitions\n", fb.Limit, raised, fb.MaxPartitions(), fb.Partitions)
			}
			<-ctx.Done()
			fmt.Fprintln(out, "stopping: persisting state")
			return b.Close()
		},
	}
	f.add(cmd, true)
	return cmd
}
