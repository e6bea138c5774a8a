package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every `--flag` the manual (cmd/berth/help/*.md) and README.md give to a
// command exists on that command, so the docs cannot drift from the
// binary: a command line in a code span or a code block (`berth redrive
// execute HASH --watch 30s`, or `redrive execute --watch` without the
// `berth`) names its command by its leading words, and every flag after
// them must be one the command (or the root) takes. A flag named alone in
// prose (`--watch`) must be taken by some command.
func TestManualFlagsExistOnTheirCommands(t *testing.T) {
	root := newRoot(newApp(io.Discard, io.Discard))
	files, err := filepath.Glob("help/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no help topics: %v", err)
	}
	files = append(files, "../../README.md")
	checked := 0
	var problems []string
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var last *cobra.Command // the command a block's following lines continue
		block := -1
		for _, line := range commandLines(string(raw)) {
			if line.block != block {
				block, last = line.block, nil
			}
			cmd, rest, ok := docCommand(root, line.text)
			switch {
			case ok:
				if line.block > 0 {
					last = cmd
				}
			case line.block == 0 && strings.HasPrefix(line.text, "--"):
				// A flag named alone in prose: some command must take it.
				for _, flag := range docFlags(line.text) {
					checked++
					if !anyHasFlag(root, flag) {
						problems = append(problems, file+":"+strconv.Itoa(line.no)+": no command has --"+flag+" (in: "+line.text+")")
					}
				}
				continue
			case last != nil:
				// A synopsis or an example continued over lines, or the
				// command's own output and messages: its flags.
				cmd, rest = last, line.text
			default:
				continue
			}
			for _, flag := range docFlags(rest) {
				checked++
				if !hasFlag(cmd, flag) {
					problems = append(problems, file+":"+strconv.Itoa(line.no)+": `"+cmd.CommandPath()+"` has no --"+flag+" (in: "+line.text+")")
				}
			}
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	// The parser must keep finding the manual's command lines; a change
	// that made it skip them all would pass silently otherwise.
	t.Logf("%d flags checked", checked)
	if checked < 300 {
		t.Errorf("only %d flags checked in the manual: the parser misses its command lines", checked)
	}
}

type docLine struct {
	no    int
	block int // the fenced block it is in (from 1), 0 for a code span
	text  string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// commandLines are the manual's code: every line of a fenced block and
// every inline code span, with its line number.
func commandLines(md string) []docLine {
	var out []docLine
	fenced, block := false, 0
	for i, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if fenced = !fenced; fenced {
				block++
			}
			continue
		}
		if fenced {
			out = append(out, docLine{i + 1, block, strings.TrimSpace(l)})
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
			out = append(out, docLine{i + 1, 0, m[1]})
		}
	}
	return out
}

// docCommand resolves a command line's leading words ("berth redrive
// execute", or "redrive execute") to the command; rest is what follows.
// ok is false when the line does not start with a Berth command.
func docCommand(root *cobra.Command, text string) (*cobra.Command, string, bool) {
	// Only the first command of a pipeline or a list is Berth's.
	if i := strings.IndexAny(text, "|;&>#"); i >= 0 {
		text = text[:i]
	}
	words := strings.Fields(text)
	if len(words) > 0 && words[0] == "$" {
		words = words[1:]
	}
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		words = words[1:] // an environment assignment: BERTH_X=1 berth …
	}
	switch {
	case len(words) > 0 && (words[0] == "berth" || strings.HasSuffix(words[0], "/berth")):
		words = words[1:]
	case len(words) < 2 || !strings.HasPrefix(words[1], "-") && sub(sub(root, words[0]), words[1]) == nil:
		// Without "berth", only "CMD SUB …" or "CMD --flag …" counts: a
		// lone word like `lag` in prose is a topic, not a command line.
		return nil, "", false
	case sub(root, words[0]) == nil:
		// "execute --yes": a subcommand named alone, when its name is
		// one command's only.
		c := uniqueCommand(root, words[0])
		if c == nil {
			return nil, "", false
		}
		return c, strings.Join(words[1:], " "), true
	}
	cmd := root
	for len(words) > 0 {
		w := words[0]
		if strings.HasPrefix(w, "-") {
			break
		}
		next := sub(cmd, w)
		if next == nil {
			break
		}
		cmd, words = next, words[1:]
	}
	return cmd, strings.Join(words, " "), true
}

// uniqueCommand is the one command below root named name (nil when none
// or several are).
func uniqueCommand(root *cobra.Command, name string) *cobra.Command {
	var found []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if s.Name() == name {
				found = append(found, s)
			}
			walk(s)
		}
	}
	walk(root)
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

func sub(c *cobra.Command, name string) *cobra.Command {
	if c == nil {
		return nil
	}
	for _, s := range c.Commands() {
		if s.Name() == name || s.HasAlias(name) {
			return s
		}
	}
	return nil
}

var longFlag = regexp.MustCompile(`(?:^|[\s\[(])--([a-z][a-z0-9-]*)`)

// docFlags are the long flags a command line gives.
func docFlags(rest string) []string {
	var out []string
	for _, m := range longFlag.FindAllStringSubmatch(rest, -1) {
		out = append(out, m[1])
	}
	return out
}

// anyHasFlag reports whether c or a command below it takes --name.
func anyHasFlag(c *cobra.Command, name string) bool {
	if hasFlag(c, name) {
		return true
	}
	for _, s := range c.Commands() {
		if anyHasFlag(s, name) {
			return true
		}
	}
	return false
}

func hasFlag(c *cobra.Command, name string) bool {
	if name == "help" || c.Flags().Lookup(name) != nil {
		return true
	}
	for x := c; x != nil; x = x.Parent() {
		if x.PersistentFlags().Lookup(name) != nil {
			return true
		}
	}
	return false
}

// A mistyped subcommand of a command group is a usage error naming it
// (exit 2), as a mistyped top-level command is, never the group's help
// with exit 0 that a script would take for success; the group alone still
// prints its help.
func TestUnknownSubcommandIsAUsageError(t *testing.T) {
	isolateConfig(t)
	root := newRoot(newApp(io.Discard, io.Discard))
	groups := 0
	for _, g := range root.Commands() {
		if !g.HasSubCommands() || g.Name() == "help" {
			continue
		}
		groups++
		_, errOut, code := runBerth(t, g.Name(), "no-such-step", "x")
		if code != 2 || !strings.Contains(errOut, `"no-such-step"`) {
			t.Errorf("berth %s no-such-step x: exit %d, stderr %q; want exit 2 naming it", g.Name(), code, errOut)
		}
		if g.Runnable() {
			continue // a command of its own as well (berth offsets GROUP)
		}
		for _, args := range [][]string{{g.Name()}, {g.Name(), "help"}} {
			out, _, code := runBerth(t, args...)
			if code != 0 || !strings.Contains(out, "Available Commands:") {
				t.Errorf("berth %s: exit %d, want its help:\n%s", strings.Join(args, " "), code, out)
			}
		}
	}
	if groups < 3 {
		t.Fatalf("only %d command groups found", groups)
	}
}
