package main

import (
	"bufio"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRedriveSoakKill9 is the crash-safety soak at scale: a 20,000-record
// plan is executed by the berth binary and killed with SIGKILL at 100
// random points (after a random number of batches, plus a random delay so
// that many kills land inside an open transaction), resuming each time.
// Every tenth kill, and at the end, the target is read read_committed: no
// event is ever there twice, per-key order holds, the ledger agrees with
// the copies; at the end every event is there exactly once.
//
// It takes minutes under -race, so it runs when BERTH_TEST_SOAK=1 (.ci/run
// sets it):
//
//	BERTH_TEST_SOAK=1 go test -run TestRedriveSoakKill9 -v ./cmd/berth/
func TestRedriveSoakKill9(t *testing.T) {
	if os.Getenv("BERTH_TEST_SOAK") == "" {
		t.Skip("the SIGKILL soak runs with BERTH_TEST_SOAK=1 (.ci/run sets it)")
	}
	const n, kills, batch = 20000, 100, 20
	bin := buildBerth(t)
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	// Paced at 4,000 records/s (a batch every 5 ms): unpaced, a resumed run
	// now sends so fast that the kill points, counted in batches and
	// milliseconds, cover the plan before the 100th kill.
	plan := f.plan(t, "--batch-size", "20", "--rate", "4000", "--read", "20000")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	killed, runs := 0, 0
	start := time.Now()
	for killed < kills {
		runs++
		cmd := exec.Command(bin, "--config", f.config, "redrive", "execute", plan[:16], "--yes", "--no-verify")
		cmd.Env = os.Environ()
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after 0..9 batches of this run, 0-15 ms into the next one.
		after := rng.IntN(10)
		delay := time.Duration(rng.IntN(15000)) * time.Microsecond
		lines := bufio.NewScanner(stderr)
		seen, fired := 0, false
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "progress ") {
				if seen == after {
					time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
					fired = true
					break
				}
				seen++
			}
		}
		for lines.Scan() {
		}
		err = cmd.Wait()
		if fired && err != nil {
			killed++
			if killed%10 == 0 {
				done := f.state(t, plan)
				t.Logf("%d kills in %d runs: %d of %d events in the target, none twice", killed, runs, done, n)
				if done == n {
					t.Fatalf("the plan finished after %d kills; the soak needs %d across it", killed, kills)
				}
			}
			continue
		}
		if err == nil && f.state(t, plan) == n {
			t.Fatalf("the plan finished after %d kills; the soak needs %d across it", killed, kills)
		}
	}
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", plan[:16], "--yes", "--no-verify", "-o", "json"); code != 0 {
		t.Fatalf("final run: exit %d: %s", code, errOut)
	}
	if done := f.state(t, plan); done != n {
		t.Fatalf("after %d kills and a final run, %d of %d events are in the target", killed, done, n)
	}
	t.Logf("%d kills in %d runs, then a final run: all %d events exactly once, in per-key order, the ledger agreeing (%s)", killed, runs+1, n, time.Since(start).Round(time.Second))
}
