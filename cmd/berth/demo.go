package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

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
			if a.readOnly || (a.cfg != nil && a.cfg.Contexts[config.DefaultContextName].ReadOnly) {
				// The demo is a workload: it creates topics, produces
				// orders and runs consumer groups. Nothing of it is
				// read-only; watching a running demo is the console's job.
				return usageErr("--read-only: the demo writes to the broker (topics, orders, consumer groups); to watch a running demo read-only, run `berth --read-only` in another terminal")
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			out := cmd.OutOrStdout()

			bootstrap, closeBroker, err := demoBroker(ctx, out, &f, cmd.Flags().Changed("data-dir"))
			if err != nil {
				return err
			}
			defer closeBroker()

			dataDir := f.opts.DataDir
			attach := ""
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
				// Another terminal (an approver, a second console) needs
				// the same context and policies: a config file with just
				// those, and the one line that uses it.
				path, err := writeAttachConfig(a.cfg, bc, dataDir)
				if err != nil {
					return err
				}
				attach = "export BERTH_CONFIG=" + shellQuote(path)
				fmt.Fprintf(out, "demo: another terminal attaches with the demo's context and policies after:\n  %s\n", attach)
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
				co := consoleOptions{notice: attachNotice(attach)}
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
//
// When --data-dir was given (explicitDir), the broker found on --listen must
// be the one keeping its data there: the demo's system of record and
// approvers' keys live in that directory, next to the broker's log.
func demoBroker(ctx context.Context, out io.Writer, f *brokerFlags, explicitDir bool) ([]string, func(), error) {
	listen := f.opts.Listen
	if id, err := bundled.Probe(ctx, listen, 2*time.Second); err == nil {
		if !bundled.IsBundledClusterID(id) {
			return nil, nil, fmt.Errorf("%s answers as cluster %q, not a Berth bundled broker: the demo writes records and only runs against its own broker (choose a free address with --listen)", listen, sanitize.Text(id))
		}
		if explicitDir {
			kept, err := bundled.PersistedClusterID(f.opts.DataDir)
			if err != nil {
				return nil, nil, err
			}
			if kept != id {
				holds := "no broker data"
				if kept != "" {
					holds = "the data of cluster " + sanitize.Text(kept)
				}
				return nil, nil, usageErr("--data-dir: %s holds %s, but the bundled broker on %s is cluster %s; give that broker's data dir, or a free --listen to start the demo's own broker on %s",
					sanitize.Text(f.opts.DataDir), holds, listen, sanitize.Text(id), sanitize.Text(f.opts.DataDir))
			}
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

// attachConfigName is the config file the demo writes into its data dir.
const attachConfigName = "berth-demo.yaml"

// writeAttachConfig writes, into the demo's data dir, a config file holding
// only the demo's context (as the current one) and the settings in effect
// (policies, lag, audit file), so `export BERTH_CONFIG=FILE` in another
// terminal attaches with the same context and policies. Other contexts of
// the user's file are left out. It returns the file's path.
func writeAttachConfig(cfg *config.Config, bc config.Context, dataDir string) (string, error) {
	c := *cfg
	c.CurrentContext = config.DefaultContextName
	c.Contexts = map[string]config.Context{config.DefaultContextName: bc}
	var buf bytes.Buffer
	buf.WriteString("# Written by `berth demo` for other terminals: export BERTH_CONFIG=<this file>.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(config.View(&c, true)); err != nil {
		return "", fmt.Errorf("demo config: %w", err)
	}
	path := filepath.Join(dataDir, attachConfigName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return "", fmt.Errorf("demo config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("demo config: %w", err)
	}
	return path, nil
}

// attachNotice is what the console shows once at start: the printed line
// is hidden behind the full-screen console.
func attachNotice(attach string) string {
	if attach == "" {
		return ""
	}
	return "another terminal: " + attach
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == ',' || r == '@' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
