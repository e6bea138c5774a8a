package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/output"
)

// app is the state every command shares: the effective configuration, the
// chosen context and the global flags. It is built in the root command's
// PersistentPreRunE, so subcommands find it ready.
type app struct {
	stdout, stderr io.Writer

	v          *viper.Viper
	configPath string // the file in use ("" when none exists)
	cfg        *config.Config
	ctxName    string
	ctx        config.Context
	timeout    time.Duration
	readOnly   bool
	output     string
}

func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, v: viper.New()}
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
	for _, sc := range subcommands {
		parent := findCommand(root, sc.parent)
		if parent == nil {
			parent = &cobra.Command{Use: sc.parent}
			root.AddCommand(parent)
		}
		parent.AddCommand(sc.make(a))
	}
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
// resolves the context. Errors name the file and the line or field.
func (a *app) load(cmd *cobra.Command) error {
	path := a.v.GetString("config")
	explicit := path != ""
	if !explicit {
		path = defaultConfigPath()
	}
	cfg := config.Default()
	if _, err := os.Stat(path); err == nil {
		fv := viper.New()
		fv.SetConfigFile(path)
		fv.SetConfigType("yaml")
		if err := fv.ReadInConfig(); err != nil {
			return fmt.Errorf("%s: %s", path, yamlError(err))
		}
		cfg = &config.Config{}
		if err := fv.UnmarshalExact(cfg); err != nil {
			return fmt.Errorf("%s: %s", path, oneLine(err.Error()))
		}
		cfg.Source = path
		a.configPath = path
	} else if explicit {
		return fmt.Errorf("%s: config file not found", path)
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s: %w", displayPath(cfg.Source), err)
	}

	a.timeout = a.v.GetDuration("timeout")
	if a.timeout <= 0 {
		return usageErr("--timeout: must be positive")
	}
	a.output = a.v.GetString("output")

	name := cfg.CurrentContext
	if c := a.v.GetString("context"); c != "" {
		if _, ok := cfg.Contexts[c]; !ok {
			return fmt.Errorf("%s: unknown context %q (have: %s)", displayPath(cfg.Source), c, strings.Join(cfg.ContextNames(), ", "))
		}
		name = c
	}
	ctx := cfg.Contexts[name]
	if b := a.v.GetString("bootstrap"); b != "" {
		name, ctx = "adhoc", config.Context{Kind: "kafka", Bootstrap: splitList(b)}
	}
	if amqp, mgmt := a.v.GetString("amqp"), a.v.GetString("management"); amqp != "" || mgmt != "" {
		name, ctx = "adhoc", config.Context{Kind: "rabbitmq", AMQPURL: amqp, ManagementURL: mgmt}
	}
	a.cfg, a.ctxName, a.ctx = cfg, name, ctx
	a.readOnly = ctx.ReadOnly || a.v.GetBool("read-only")
	return nil
}

// format validates -o against what the command supports.
func (a *app) format(allowed ...output.Format) (output.Format, error) {
	f, err := output.Parse(a.output, allowed...)
	if err != nil {
		return "", usageErr("%v", err)
	}
	return f, nil
}

// errReadOnly is returned by every action refused in a read-only context.
var errReadOnly = errors.New("refused: the context is read-only")

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

// yamlError shortens viper's parse errors to the YAML message, which names
// the line ("yaml: line 3: mapping values are not allowed in this context").
func yamlError(err error) string {
	msg := oneLine(err.Error())
	if i := strings.Index(msg, "yaml: "); i >= 0 {
		return msg[i:]
	}
	return msg
}

func findCommand(root *cobra.Command, name string) *cobra.Command {
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}
