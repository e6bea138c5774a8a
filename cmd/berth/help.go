package main

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// The manual lives in the binary, one Markdown file a topic, so the reader
// finds it where they already are (`berth help lag`), as with `git help`.
// The README links to the same files.
//
//go:embed help/*.md
var manual embed.FS

// helpTopics lists the manual's topics with their titles (each file's
// first heading), sorted by name.
func helpTopics() []struct{ name, title string } {
	entries, _ := fs.ReadDir(manual, "help")
	var out []struct{ name, title string }
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".md")
		body, _ := manual.ReadFile("help/" + e.Name())
		title, _, _ := strings.Cut(string(body), "\n")
		out = append(out, struct{ name, title string }{name, strings.TrimPrefix(title, "# ")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// helpTopic returns the text of one topic, or false.
func helpTopic(name string) (string, bool) {
	b, err := manual.ReadFile("help/" + name + ".md")
	return string(b), err == nil && !strings.ContainsAny(name, "/.")
}

// newHelpCommand replaces cobra's help command: `berth help TOPIC` prints
// the manual's topic; a command name that is not a topic falls back to the
// command's usage, as cobra's own help does (`berth help describe`).
func newHelpCommand(a *app, root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:         "help [TOPIC | COMMAND]",
		Short:       "The manual: berth help lists the topics, berth help TOPIC prints one",
		Annotations: map[string]string{"config": "none"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprintln(a.stdout, "The manual, by topic (berth help TOPIC):")
				fmt.Fprintln(a.stdout)
				for _, t := range helpTopics() {
					fmt.Fprintf(a.stdout, "  %-12s %s\n", t.name, t.title)
				}
				fmt.Fprintln(a.stdout)
				fmt.Fprintln(a.stdout, "Flags of a command: berth COMMAND --help. Commands: berth --help.")
				return nil
			}
			if text, ok := helpTopic(args[0]); ok && len(args) == 1 {
				_, err := fmt.Fprint(a.stdout, text)
				return err
			}
			target, _, err := root.Find(args)
			if err != nil || target == root {
				return usageErr("no help topic or command %q (berth help lists the topics)", strings.Join(args, " "))
			}
			return target.Help()
		},
	}
}
