package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/internal/sanitize"
)

func init() { register(newDemoCmd) }

// demoBrokers is the demo's own bundled broker, whose brokers can be marked
// down (or back up), simulating a broker loss (see
// backends/bundled/degraded.go). It is set while `berth demo` runs its
// broker in-process and nil otherwise (no demo, or the demo attached to a
// `berth broker` in another process). The console offers it when non-nil.
var demoBrokers *bundled.Broker

// demoStatusEvery is how often --headless prints a status line.
const demoStatusEvery = 5 * time.Second

func newDemoCmd(a *app) *cobra.Command {
	var (
		f        brokerFlags
		rate     int
		headless bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the HarborCart demo workload against the bundled broker",
		Long: `Run the HarborCart workload against the bundled broker until stopped.

The demo starts the bundled broker in-process on --listen, or attaches to a
Berth bundled broker already listening there (recognised by its cluster id).
It never writes into any other cluster. It opens the console, or with
--headless prints one status line every few seconds until SIGINT/SIGTERM.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if a.v.GetString("bootstrap") != "" || a.v.GetString("amqp") != "" {
				return usageErr("--bootstrap/--amqp: the demo only runs against the bundled broker; choose its address with --listen")
			}
			if rate < 1 || rate > 100000 {
				return usageErr("--rate: %d is out of range (1-100000 events per second)", rate)
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			out := cmd.OutOrStdout()

			bootstrap, closeBroker, err := demoBroker(ctx, out, &f)
			if err != nil {
				return err
			}
			defer closeBroker()

			dataDir := f.opts.DataDir
			if a.cfg != nil {
				if demo.ApplyConfig(a.cfg, dataDir) {
					fmt.Fprintf(out, "demo: redrive policies for payments.DLT and shipment-jobs.DLT apply (system of record %s)\n", demo.PaymentsDB(dataDir))
				}
				// In memory only: the console and the commands it runs attach
				// to the demo's broker; the user's config file is untouched.
				bc := config.Context{Kind: "bundled", Bootstrap: bootstrap, DataDir: dataDir,
					ReadOnly: a.cfg.Contexts[config.DefaultContextName].ReadOnly}
				a.cfg.Contexts[config.DefaultContextName] = bc
				a.cfg.CurrentContext = config.DefaultContextName
				a.ctxName, a.ctx = config.DefaultContextName, bc
			}

			interactive := !headless && tuiRun != nil
			logf := func(string, ...any) {}
			if !interactive {
				logf = rateLimitedLog(cmd.ErrOrStderr(), 10*time.Second)
			}
			d, err := demo.Start(ctx, demo.Options{Bootstrap: bootstrap, DataDir: dataDir, Rate: rate, Logf: logf})
			if err != nil {
				return err
			}
			defer d.Close()
			fmt.Fprintf(out, "demo: producing %d orders/s; groups %s, %s, %s, %s, %s\n", rate,
				demo.GroupEmail, demo.GroupSales, demo.GroupFraud, demo.GroupShipments, demo.GroupPayments)

			if interactive {
				// The console (console.go) with the demo's broker switch on
				// its brokers page when the broker runs in this process.
				co := consoleOptions{}
				if demoBrokers != nil {
					co.brokers = demoBrokers
				}
				return a.runConsole(co)
			}
			tick := time.NewTicker(demoStatusEvery)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					fmt.Fprintln(out, "demo: stopping")
					return nil
				case <-tick.C:
					line := d.Status(ctx).Line()
					if down := demoDown(); len(down) > 0 {
						line += fmt.Sprintf(" | brokers %v simulated down", down)
					}
					fmt.Fprintln(out, line)
				}
			}
		},
	}
	f.add(cmd, false)
	cmd.Flags().IntVar(&rate, "rate", 200, "orders produced per second")
	cmd.Flags().BoolVar(&headless, "headless", false, "print a status line every few seconds instead of opening the console")
	return cmd
}

// demoBroker attaches to the Berth bundled broker on --listen, or starts one
// in-process when nothing answers there. Anything else answering on the
// address is refused: the demo writes, and must never write into a real
// cluster. It returns the bootstrap addresses and how to release the broker.
func demoBroker(ctx context.Context, out io.Writer, f *brokerFlags) ([]string, func(), error) {
	listen := f.opts.Listen
	if id, err := bundled.Probe(ctx, listen, 2*time.Second); err == nil {
		if !bundled.IsBundledClusterID(id) {
			return nil, nil, fmt.Errorf("%s answers as cluster %q, not a Berth bundled broker: the demo writes records and only runs against its own broker (choose a free address with --listen)", listen, sanitize.Text(id))
		}
		if len(f.down) > 0 {
			return nil, nil, usageErr("--down-broker: the bundled broker on %s runs in another process; start it with `berth broker --down-broker ID`", listen)
		}
		fmt.Fprintf(out, "demo: attached to bundled broker %s on %s\n", id, listen)
		return []string{listen}, func() {}, nil
	}
	b, err := bundled.Start(ctx, f.opts)
	if err != nil {
		return nil, nil, err
	}
	if err := f.applyDown(b); err != nil {
		b.Close()
		return nil, nil, err
	}
	fmt.Fprintf(out, "demo: started bundled broker %s (data dir %s)\n", b.ClusterID(), b.DataDir())
	for i, addr := range b.Addrs() {
		fmt.Fprintf(out, "broker %d listening on %s\n", i, addr)
	}
	if down := b.Down(); len(down) > 0 {
		fmt.Fprintf(out, "demo: simulating brokers %v down\n", down)
	}
	demoBrokers = b
	demoDown = b.Down
	return b.Addrs(), func() {
		demoBrokers = nil
		demoDown = func() []int32 { return nil }
		b.Close()
	}, nil
}

// demoDown lists the demo's own brokers simulated down (none when attached).
var demoDown = func() []int32 { return nil }

// rateLimitedLog writes at most one workload error per interval, so a
// degraded cluster does not flood the terminal.
func rateLimitedLog(w io.Writer, every time.Duration) func(string, ...any) {
	var mu sync.Mutex
	var last time.Time
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < every {
			return
		}
		last = time.Now()
		fmt.Fprintln(w, "berth: demo: "+oneLine(strings.TrimSpace(fmt.Sprintf(format, args...))))
	}
}
