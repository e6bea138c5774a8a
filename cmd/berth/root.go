package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/output"
)

// app is the state every command shares: the effective configuration, the
// chosen context and the global flags. It is built in the root command's
// PersistentPreRunE, so subcommands find it ready.
type app struct {
	stdout, stderr io.Writer

	// closers run when the command ends (connections opened lazily).
	closers []func()
	// sinks are the audit mirrors opened, shared with the app's copies
	// (the console's pages audit from several goroutines).
	sinks *auditSinks

	v          *viper.Viper
	configPath string // the file in use ("" when none exists)
	cfg        *config.Config
	ctxName    string
	ctx        config.Context
	timeout    time.Duration
	readOnly   bool
	// readOnlyReason says why, when the cluster (not the context or
	// --read-only) made the command read-only.
	readOnlyReason string
	output         string
	outputSetting  string // "--output" or "BERTH_OUTPUT": where a bad value came from
	warnedPlain    bool   // the SASL PLAIN without TLS warning was printed
}

func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, v: viper.New(), sinks: &auditSinks{m: map[string]audit.Sink{}}}
}

// commands holds constructors registered by each command's file, so adding a
// command touches only its own file.
var commands []func(*app) *cobra.Command

func register(f func(*app) *cobra.Command) { commands = append(commands, f) }

// subcommands holds constructors for commands that live under a parent
// registered by another file (e.g. "redrive approve" beside "redrive plan").
var subcommands []struct {
	parent string
	make   func(*app) *cobra.Command
}

// registerUnder adds a subcommand to the top-level command named parent.
func registerUnder(parent string, f func(*app) *cobra.Command) {
	subcommands = append(subcommands, struct {
		parent string
		make   func(*app) *cobra.Command
	}{parent, f})
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "Terminal operations console for Kafka and RabbitMQ",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.closers = append(a.closers, applyHeapBudget(cmd))
			if cmd.Annotations["config"] == "none" {
				return nil
			}
			return a.load(cmd)
		},
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (default $XDG_CONFIG_HOME/berth/config.yaml)")
	pf.StringP("context", "c", "", "context to use instead of the current one")
	pf.String("bootstrap", "", "ad-hoc Kafka cluster host:port[,host:port] (no config needed)")
	pf.String("amqp", "", "ad-hoc RabbitMQ AMQP URL (no config needed)")
	pf.String("management", "", "ad-hoc RabbitMQ management API URL")
	pf.Duration("timeout", 10*time.Second, "timeout for each cluster operation")
	pf.Bool("read-only", false, "refuse every action that changes the cluster")
	pf.StringP("output", "o", "table", "output format: table|json")
	for _, name := range []string{"config", "context", "bootstrap", "amqp", "management", "timeout", "read-only", "output"} {
		_ = a.v.BindPFlag(name, pf.Lookup(name))
	}
	a.v.SetEnvPrefix("BERTH")
	a.v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	a.v.AutomaticEnv()
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	for _, f := range commands {
		root.AddCommand(f(a))
	}
	root.SetHelpCommand(newHelpCommand(a, root))
	for _, sc := range subcommands {
		parent := findCommand(root, sc.parent)
		if parent == nil {
			parent = &cobra.Command{Use: sc.parent}
			root.AddCommand(parent)
		}
		parent.AddCommand(sc.make(a))
	}
	rejectUnknownSubcommands(root)
	// The console is the default action. Without it, bare `berth` prints
	// help; either way an unknown command is a usage error (exit 2), not
	// cobra's help page with exit 0.
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErr("unknown command %q (see berth --help)", args[0])
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if tuiRun != nil {
			return tuiRun(a, cmd)
		}
		return cmd.Help()
	}
	return root
}

// tuiRun opens the interactive console; set by the console's file.
var tuiRun func(a *app, cmd *cobra.Command) error

// defaultConfigPath is where the config file lives unless --config says otherwise.
func defaultConfigPath() string { return filepath.Join(config.ConfigHome(), "config.yaml") }

// load reads the config file (if any), applies environment and flags, and
// resolves the context. Errors name the file and the line or field, or the
// flag or environment variable at fault.
//
// Precedence, highest first: flags, BERTH_* environment variables, the
// config file, built-in defaults. --bootstrap with no --context is an
// ad-hoc plaintext Kafka cluster; with --context it replaces that context's
// bootstrap servers and keeps its TLS/SASL settings.
func (a *app) load(cmd *cobra.Command) error {
	path := a.v.GetString("config")
	explicit := path != ""
	if !explicit {
		path = defaultConfigPath()
	}
	cfg := config.Default()
	if _, err := os.Stat(path); err == nil || explicit {
		if cfg, err = config.Load(path); err != nil {
			return err
		}
		a.configPath = path
	}
	cfg.ApplyDefaults()
	chosen := a.v.GetString("context")
	// A current_context naming a context no longer in the file must not lock
	// the user out: --context still picks another, and `config use-context`
	// (the repair) and `config view` still run.
	check := cfg
	if _, ok := cfg.Contexts[cfg.CurrentContext]; !ok && (chosen != "" || cmd.Annotations["context"] == "optional") {
		c := *cfg
		c.CurrentContext = ""
		check = &c
	}
	if err := check.Validate(); err != nil {
		return fmt.Errorf("%s: %w", displayPath(cfg.Source), err)
	}

	var err error
	if a.timeout, err = a.durationSetting(cmd, "timeout"); err != nil {
		return err
	}
	if a.timeout <= 0 {
		return usageErr("%s: must be positive", settingName(cmd, "timeout"))
	}
	if a.timeout < minTimeout {
		return usageErr("%s: %s is too short (at least %s)", settingName(cmd, "timeout"), a.timeout, minTimeout)
	}
	a.output = a.v.GetString("output")
	a.outputSetting = settingName(cmd, "output")
	readOnly, err := a.boolSetting(cmd, "read-only")
	if err != nil {
		return err
	}

	name := cfg.CurrentContext
	if chosen != "" {
		if _, ok := cfg.Contexts[chosen]; !ok {
			return fmt.Errorf("%s: unknown context %q (have: %s)", displayPath(cfg.Source), chosen, strings.Join(cfg.ContextNames(), ", "))
		}
		name = chosen
	}
	ctx, ok := cfg.Contexts[name]
	b := a.v.GetString("bootstrap")
	switch {
	case b != "" && chosen != "" && (ctx.Kind == "kafka" || ctx.Kind == "bundled"):
		ctx.Bootstrap = splitList(b)
	case b != "":
		name, ctx, ok = "adhoc", config.Context{Kind: "kafka", Bootstrap: splitList(b)}, true
	}
	if amqp, mgmt := a.v.GetString("amqp"), a.v.GetString("management"); amqp != "" || mgmt != "" {
		name, ctx, ok = "adhoc", config.Context{Kind: "rabbitmq", AMQPURL: amqp, ManagementURL: mgmt}, true
	}
	if !ok && cmd.Annotations["context"] != "optional" {
		return fmt.Errorf("%s: no current context: set current_context, run `berth config use-context NAME` or pass --context (have: %s)",
			displayPath(cfg.Source), strings.Join(cfg.ContextNames(), ", "))
	}
	if !ok {
		name = "" // `berth config ...` works before a context is chosen
	}
	a.cfg, a.ctxName, a.ctx = cfg, name, ctx
	a.readOnly = ctx.ReadOnly || readOnly
	return nil
}

// minTimeout is the shortest --timeout the Kafka client accepts for a
// request (franz-go refuses a request timeout overhead under 100ms).
const minTimeout = 100 * time.Millisecond

// settingName names where a global setting's value came from, for errors:
// the flag when given, else its BERTH_* variable when set.
func settingName(cmd *cobra.Command, flag string) string {
	if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
		return "--" + flag
	}
	if env, ok := os.LookupEnv(envName(flag)); ok && env != "" {
		return envName(flag)
	}
	return "--" + flag
}

// envName is the environment variable that sets a global flag.
func envName(flag string) string {
	return "BERTH_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// durationSetting reads a duration flag, checking the environment variable
// strictly: viper turns an unparsable value into 0 without a word.
func (a *app) durationSetting(cmd *cobra.Command, flag string) (time.Duration, error) {
	if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
		return a.v.GetDuration(flag), nil
	}
	if env, ok := os.LookupEnv(envName(flag)); ok && env != "" {
		d, err := time.ParseDuration(env)
		if err != nil {
			return 0, usageErr("%s: %q is not a duration (e.g. 5s, 1m)", envName(flag), env)
		}
		return d, nil
	}
	return a.v.GetDuration(flag), nil
}

// boolSetting reads a bool flag, checking the environment variable
// strictly: a mistyped BERTH_READ_ONLY must not silently mean false.
func (a *app) boolSetting(cmd *cobra.Command, flag string) (bool, error) {
	if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
		return a.v.GetBool(flag), nil
	}
	if env, ok := os.LookupEnv(envName(flag)); ok && env != "" {
		b, err := strconv.ParseBool(env)
		if err != nil {
			return false, usageErr("%s: %q is not true or false", envName(flag), env)
		}
		return b, nil
	}
	return a.v.GetBool(flag), nil
}

// format validates -o against what the command supports.
func (a *app) format(allowed ...output.Format) (output.Format, error) {
	f, err := output.Parse(a.output, allowed...)
	if err != nil {
		msg := err.Error()
		if a.outputSetting != "" {
			msg = strings.Replace(msg, "--output", a.outputSetting, 1)
		}
		return "", usageErr("%s", msg)
	}
	return f, nil
}

// errReadOnly is returned by every action the CLI refuses itself in a
// read-only context: a refusal wrapping actions.ErrReadOnly, the one value
// every read-only refusal matches.
var errReadOnly = actions.Refuse(actions.ErrReadOnly, "the context is read-only")

func displayPath(p string) string {
	if p == "" {
		return "config"
	}
	return p
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// rejectUnknownSubcommands makes a command group below c (dlq, redrive,
// offsets, …) given an unknown subcommand a usage error (exit 2) naming
// it, as at the top level, where cobra would print the group's help and
// exit 0: a mistyped `berth redrive aprove` in a script must not pass.
// Alone, a group still prints its help.
func rejectUnknownSubcommands(c *cobra.Command) {
	for _, g := range c.Commands() {
		if g.HasSubCommands() && !g.Runnable() {
			g.Args = cobra.ArbitraryArgs
			g.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 && args[0] != "help" {
					return usageErr("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
				}
				return cmd.Help() // alone, or `berth redrive help`
			}
			if g.Annotations == nil {
				g.Annotations = map[string]string{}
			}
			g.Annotations["config"] = "none" // a usage error needs no config
		}
		rejectUnknownSubcommands(g)
	}
}

func findCommand(root *cobra.Command, name string) *cobra.Command {
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// onClose registers cleanup to run when the command finishes.
func (a *app) onClose(f func()) { a.closers = append(a.closers, f) }

// close runs the registered cleanups, newest first.
func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}
