package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// Column widths follow the content, in the real binary in a real terminal
// (tmux) resized from 220 to 120 to 80 columns: long group names that
// differ only at the end stay distinguishable (the middle is elided, the
// ending kept), and numeric and status headers are never cut (no "COUN▼").
func TestConsoleColumnsKeepNameEndingsAndWholeHeaders(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("tmux is required")
		}
		t.Skip("tmux not installed")
	}
	bin := buildBerth(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 1, 1, nil)
	kc.ProduceTo(t, "orders", 0, 20, time.Now().Add(-time.Minute), time.Second)
	blue := "settlement-reconciliation-worker-eu-west-1-blue"
	green := "settlement-reconciliation-worker-eu-west-1-green"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, g := range []string{blue, green} {
		var offs kadm.Offsets
		offs.AddOffset("orders", 0, int64(5+i), -1)
		if _, err := kc.Admin.CommitOffsets(ctx, g, offs); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	sock := fmt.Sprintf("berth-widths-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-L", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", "w", "-x", "220", "-y", "30",
		fmt.Sprintf("env -i PATH=%q HOME=%q TERM=xterm-256color NO_COLOR=1 XDG_CONFIG_HOME=%q XDG_DATA_HOME=%q %q --bootstrap %s; sleep 60",
			os.Getenv("PATH"), dir, filepath.Join(dir, "config"), filepath.Join(dir, "data"), bin, kc.Addrs[0]))
	t.Cleanup(func() { exec.Command("tmux", "-L", sock, "kill-server").Run() })
	screen := func() string { return tmux("capture-pane", "-p", "-t", "w") }
	waitScreen := func(what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			s := screen()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; the screen:\n%s", what, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	row := func(s, ending string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, ending+" ") && strings.Contains(l, "settlement") {
				return l
			}
		}
		return ""
	}
	header := regexp.MustCompile(`GROUP\s+STATUS\s+MAX AGE▼\s+LAG\s`)
	both := func(s string) bool { return row(s, "-blue") != "" && row(s, "-green") != "" && header.MatchString(s) }
	// drawnAt says whether s is a frame the console drew for width
	// columns: its status line fills the width and ends with "? help". A
	// frame drawn for the previous width, which tmux shows cut or wrapped
	// until the console redraws, is not one (whatever its age line says).
	drawnAt := func(s string, width int) bool {
		for _, l := range strings.Split(s, "\n") {
			if t := strings.TrimRight(l, " "); strings.HasSuffix(t, "? help") {
				return utf8.RuneCountInString(t) == width-1
			}
		}
		return false
	}

	waitScreen("the overview's groups", func(s string) bool { return strings.Contains(s, "Groups, worst age first") })
	tmux("send-keys", "-t", "w", "c")
	s := waitScreen("both groups whole at 220 columns", func(s string) bool { return drawnAt(s, 220) && both(s) && strings.Contains(s, blue+" ") })
	if !strings.Contains(s, green+" ") || !strings.Contains(s, "WORST PARTITION") || !strings.Contains(s, "MEMBERS") {
		t.Fatalf("at 220 columns the names and headers should be whole:\n%s", s)
	}

	for _, w := range []int{120, 80} {
		width := strconv.Itoa(w)
		tmux("resize-window", "-t", "w", "-x", width, "-y", "30")
		s = waitScreen("both groups, elided in the middle, drawn for "+width+" columns", func(s string) bool {
			return drawnAt(s, w) && both(s) && !strings.Contains(s, blue+" ") && strings.Contains(row(s, "-blue"), "…")
		})
		b, g := row(s, "-blue"), row(s, "-green")
		if b == g || !strings.HasPrefix(strings.TrimLeft(b, "▸ "), "settlement-") {
			t.Fatalf("at %s columns the two groups read the same or lost their start:\n%s", width, s)
		}
		if hdr := strings.Split(s, "\n")[1]; strings.Contains(hdr, "…") || !strings.Contains(hdr, "MAX AGE▼") || !strings.Contains(hdr, " LAG") {
			t.Fatalf("a header is cut at %s columns:\n%s", width, s)
		}
	}
}
