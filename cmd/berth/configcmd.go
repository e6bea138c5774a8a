package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/output"
)

func init() {
	register(func(a *app) *cobra.Command {
		cmd := &cobra.Command{Use: "config", Short: "Show or change the configuration"}
		cmd.AddCommand(&cobra.Command{
			Use:         "view",
			Short:       "Print the effective configuration, secrets masked",
			Args:        noArgs,
			Annotations: map[string]string{"context": "optional"},
			RunE: func(cmd *cobra.Command, _ []string) error {
				f, err := a.format(output.Table, output.JSON, output.Format("yaml"))
				if err != nil {
					return err
				}
				if f == output.JSON {
					return output.WriteJSON(a.stdout, a.configView(false))
				}
				enc := yaml.NewEncoder(a.stdout)
				enc.SetIndent(2)
				if err := enc.Encode(a.configView(true)); err != nil {
					return err
				}
				return enc.Close()
			},
		})
		cmd.AddCommand(&cobra.Command{
			Use:         "use-context NAME",
			Short:       "Make NAME the current context in the config file",
			Args:        exactArgs("NAME"),
			Annotations: map[string]string{"context": "optional"},
			RunE: func(cmd *cobra.Command, args []string) error {
				name := args[0]
				if _, ok := a.cfg.Contexts[name]; !ok {
					return fmt.Errorf("%s: unknown context %q (have: %s)", displayPath(a.configPath), name, joinNames(a.cfg.ContextNames()))
				}
				path := a.configPath
				if path == "" {
					path = defaultConfigPath()
				}
				if err := setCurrentContext(path, name); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "current context is now %s (%s)\n", name, path)
				return nil
			},
		})
		return cmd
	})
}

// configView is what `berth config view` prints: where the configuration
// came from, the effective settings after environment and flags (the
// context actually in use, with --bootstrap and --read-only applied), and
// the whole configuration. Secrets are masked (URL passwords, DSNs); SASL
// and RabbitMQ passwords are never loaded here at all, only the names of the
// variables or files that hold them. The table form is YAML with empty
// fields left out; JSON keeps every field so scripts can rely on it.
func (a *app) configView(omitEmpty bool) config.Ordered {
	red := a.cfg.Redacted()
	ctx := a.ctx
	ctx.AMQPURL = config.RedactURL(ctx.AMQPURL)
	ctx.ManagementURL = config.RedactURL(ctx.ManagementURL)
	ctx.ReadOnly = a.readOnly
	file := a.configPath
	if file == "" && omitEmpty {
		file = "none (built-in defaults; would be " + defaultConfigPath() + ")"
	}
	return config.Ordered{
		{Key: "file", Value: file},
		{Key: "active_context", Value: a.ctxName},
		{Key: "read_only", Value: a.readOnly},
		{Key: "timeout", Value: config.FormatDuration(a.timeout)},
		{Key: "context", Value: config.View(ctx, omitEmpty)},
		{Key: "config", Value: config.View(red, omitEmpty)},
	}
}

// setCurrentContext rewrites only current_context in the YAML file, keeping
// comments and layout, and replaces the file atomically.
func setCurrentContext(path, name string) error {
	var doc yaml.Node
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}\n")
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: top level is not a mapping", path)
	}
	root.Style = 0
	set := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "current_context" {
			root.Content[i+1].Value = name
			set = true
		}
	}
	if !set {
		root.Content = append(root.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: "current_context"},
			&yaml.Node{Kind: yaml.ScalarNode, Value: name})
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
