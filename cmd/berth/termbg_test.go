package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCommandsDoNotQueryTheTerminal: a berth command on a terminal writes
// no background-colour query (OSC 11) to it. bubbletea v1 made that query
// when initialised, in every command, and a terminal that does not answer
// it (this test's: script(1)'s pseudo-terminal, nobody reading) held each
// command for termenv's 5 s timeout; only the console asks now.
func TestCommandsDoNotQueryTheTerminal(t *testing.T) {
	bin := buildBerth(t)
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script(1) (util-linux) is needed to give the command a terminal: %v", err)
	}
	cmd := exec.Command(script, "-qc", bin+" version", "/dev/null")
	cmd.Env = append(cmd.Environ(), "TERM=xterm-256color")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("berth version on a terminal: %v: %q", err, out)
	}
	if !strings.Contains(string(out), "berth ") {
		t.Fatalf("berth version printed %q", out)
	}
	if strings.Contains(string(out), "\x1b]11;?") {
		t.Fatalf("berth version asked the terminal for its background: %q", out)
	}
}
