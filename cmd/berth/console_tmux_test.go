package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// tmuxTerm is the berth binary in a real terminal: tmux on a private
// socket, so keys go through the terminal and bubbletea's own input parser
// (a send-keys string arrives as one burst, as a paste or a laggy link
// delivers it), and the window can be resized.
type tmuxTerm struct {
	t    *testing.T
	sock string
}

var tmuxSeq atomic.Int64

// startTmux runs berth with args at w x h, isolated from the user's config
// (a private HOME and XDG dirs) and with NO_COLOR.
func startTmux(t *testing.T, w, h int, args ...string) *tmuxTerm {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("tmux is required")
		}
		t.Skip("tmux not installed")
	}
	bin := buildBerth(t)
	dir := t.TempDir()
	tt := &tmuxTerm{t: t, sock: fmt.Sprintf("berth-console-a-%d-%d", os.Getpid(), tmuxSeq.Add(1))}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	tt.run("new-session", "-d", "-s", "b", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h),
		fmt.Sprintf("env -i PATH=%q HOME=%q TERM=xterm-256color NO_COLOR=1 XDG_CONFIG_HOME=%q XDG_DATA_HOME=%q %q %s; echo '[berth exited]'; sleep 60",
			os.Getenv("PATH"), dir, filepath.Join(dir, "config"), filepath.Join(dir, "data"), bin, strings.Join(quoted, " ")))
	t.Cleanup(func() { exec.Command("tmux", "-L", tt.sock, "kill-server").Run() })
	return tt
}

func (tt *tmuxTerm) run(args ...string) string {
	tt.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tt.sock}, args...)...).CombinedOutput()
	if err != nil {
		tt.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (tt *tmuxTerm) screen() string { return tt.run("capture-pane", "-p", "-t", "b") }

// keys sends tmux key names and strings in one send-keys: one burst.
func (tt *tmuxTerm) keys(keys ...string) {
	tt.run(append([]string{"send-keys", "-t", "b"}, keys...)...)
}

func (tt *tmuxTerm) resize(w, h int) {
	tt.run("resize-window", "-t", "b", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h))
}

// waitFor polls the screen until ok holds (screenWait at most), and
// returns it.
func (tt *tmuxTerm) waitFor(what string, ok func(screen string) bool) string {
	tt.t.Helper()
	deadline := time.Now().Add(screenWait)
	for {
		s := tt.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) || strings.Contains(s, "[berth exited]") {
			tt.t.Fatalf("waiting for %s; the screen:\n%s", what, s)
		}
		time.Sleep(50 * time.Millisecond) // polling the screen, not synchronising
	}
}

func (tt *tmuxTerm) waitText(what, text string) string {
	tt.t.Helper()
	return tt.waitFor(what, func(s string) bool { return strings.Contains(s, text) })
}

// The demo in a real terminal, as a user drives it: a ":topic orders"+Enter
// burst opens the topic; a broker taken down from the brokers page (after a
// y) stays listed on the next visit and comes back with x; the overview
// counts it; the attach line shows at start; the footer teaches ":" and,
// once the window is wide enough, names the pages behind it.
func TestConsoleDemoInTmux(t *testing.T) {
	tt := startTmux(t, 80, 24, "demo", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	first := tt.waitText("the overview", "Groups, worst age first")
	if !strings.Contains(strings.Join(strings.Fields(first), " "), "another terminal: export BERTH_CONFIG=") {
		t.Errorf("the attach line is not on the first screen:\n%s", first)
	}
	if !strings.Contains(first, ": pages ? help") {
		t.Errorf("the footer does not teach ':' at 80 columns:\n%s", first)
	}

	// One burst, as tmux send-keys delivers it.
	tt.keys(":topic orders", "Enter")
	s := tt.waitText("the orders topic", "berth › orders ")
	if !strings.Contains(s, "24 partitions") {
		t.Fatalf("not the orders topic page:\n%s", s)
	}
	tt.keys("Escape")
	tt.waitText("the overview after esc", "berth › overview ")

	downRow := regexp.MustCompile(`(?m)^▸ +1 .*DOWN \(sim\)`)
	tt.keys("b")
	tt.waitText("the brokers page", "berth › brokers")
	tt.keys("j")
	tt.keys("x")
	tt.waitText("the question", "take broker 1 down (simulated)?")
	tt.keys("y")
	tt.waitFor("broker 1 down", downRow.MatchString)
	tt.keys("o")
	tt.waitText("the overview's count", "2/3 brokers up (1 down, simulated)")
	tt.keys("b")
	tt.waitText("the brokers page again", "berth › brokers")
	tt.keys("j")
	tt.waitFor("broker 1 listed down on a new visit", downRow.MatchString)
	tt.keys("x")
	tt.waitText("the question", "bring broker 1 back up?")
	tt.keys("y")
	// Wait for the answer before the next key: a y read together with the
	// o after it is a burst, and a burst never confirms (it would cancel).
	upRow := regexp.MustCompile(`(?m)^▸ +1 .*(broker|controller)`)
	tt.waitFor("broker 1 listed up", upRow.MatchString)
	tt.keys("o")
	tt.waitText("all brokers up", "3/3 brokers up")

	tt.resize(220, 60)
	tt.waitText("the wide footer", ": dlq plans capacity … ? help")
	tt.keys("q")
	tt.waitText("berth to quit", "[berth exited]")
}
