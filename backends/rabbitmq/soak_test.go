package rabbitmq

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/berth-dev/berth/redrive"
)

// TestRedriveSoakKill9 is RabbitMQ's crash-safety soak at scale: a
// 20,000-message plan executed in a child process killed with SIGKILL at
// 100 random points spread over it, resumed each time. Nothing is lost, and
// the duplicates (counted) stay within the documented at-least-once window:
// at a kill, at most the messages in flight (4 publish windows:
// inflightWindows) can have been published without their confirm being
// recorded.
//
// It runs when BERTH_TEST_SOAK=1 (.ci/run sets it):
//
//	BERTH_TEST_SOAK=1 go test -run TestRedriveSoakKill9 -v ./backends/rabbitmq/
func TestRedriveSoakKill9(t *testing.T) {
	if os.Getenv("BERTH_TEST_SOAK") == "" {
		t.Skip("the SIGKILL soak runs with BERTH_TEST_SOAK=1 (.ci/run sets it)")
	}
	conn := needRabbit(t)
	needManagement(t)
	dlq, work := uniq(t, "dlq"), uniq(t, "work")
	declareQueue(t, conn, dlq, nil)
	declareQueue(t, conn, work, nil)
	n, kills := soakSize()
	const window = 50
	// The child is paced (4,000 messages/s) so that the kills, each landing
	// a poll after its point, spread over the whole plan: unpaced it ran
	// far enough past each point to finish the plan before the 100th.
	want := fillDLQ(t, conn, dlq, work, n)

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	l, err := OpenLedger(context.Background(), ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := planFor(t, c, dlq, redrive.QueueSelection{All: true}, l)
	planPath := filepath.Join(dir, "plan.json")
	if err := WritePlan(planPath, p); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(childSpec{Plan: planPath, Ledger: ledgerPath, Window: window, Rate: 4000})
	exe, _ := os.Executable()

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 17))
	killed, runs := 0, 0
	start := time.Now()
	for killed < kills {
		// Kill somewhere in the next n/(4 kills) messages (plus however far
		// the child gets before the kill lands): spread over the plan.
		done := confirmedCount(t, ledgerPath, p.Hash())
		if done >= n-window {
			t.Fatalf("the plan finished after %d kills; the soak needs %d across it", killed, kills)
		}
		at := done + 1 + rng.IntN(max(1, n/(4*kills)))
		runs++
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "BERTH_RMQ_CHILD="+string(spec))
		var childErr bytes.Buffer
		cmd.Stderr = &childErr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(60 * time.Second)
		ended := false
	wait:
		for confirmedCount(t, ledgerPath, p.Hash()) < at {
			select {
			case err := <-exited:
				// It ran out of messages before the kill point (those a
				// killed run held unacked come back only once the broker
				// notices the dead connection): not a kill.
				ended = true
				if err != nil {
					t.Logf("run %d ended on its own: %v %s", runs, err, childErr.String())
				}
				break wait
			case <-time.After(20 * time.Millisecond): // poll the ledger file (gently: the child writes it)
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("child never reached %d confirmed", at)
			}
		}
		if !ended {
			_ = cmd.Process.Kill() // SIGKILL: no cleanup runs
			<-exited
			killed++
			if killed%10 == 0 {
				t.Logf("%d kills in %d runs, %d confirmed, %s", killed, runs, confirmedCount(t, ledgerPath, p.Hash()), time.Since(start).Round(time.Second))
			}
		}
	}
	res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 0 || len(res.NotFound) != 0 {
		t.Fatalf("resume: failed %v not found %v", res.Failed, res.NotFound)
	}
	eventually(t, 30*time.Second, "the DLQ to be empty", func() bool { return readyCount(t, conn, dlq) == 0 })
	got := drain(t, conn, work)
	distinct := map[string]int{}
	for _, d := range got {
		distinct[d.MessageId]++
	}
	lost := 0
	for _, id := range want {
		if distinct[id] == 0 {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d messages lost after %d kills", lost, n, killed)
	}
	dups := len(got) - len(distinct)
	if bound := killed * 4 * window; dups > bound {
		t.Fatalf("%d duplicates after %d kills: more than the at-least-once window allows (%d = kills x 4 windows of %d)", dups, killed, bound, window)
	}
	t.Logf("%d messages, %d kills in %d runs: none lost, %d duplicates (bound %d), %s", n, killed, runs, dups, killed*4*window, time.Since(start).Round(time.Second))
}

// soakSize is the soak's size: 20,000 messages and 100 kills, or
// BERTH_TEST_SOAK_RABBIT_RECORDS and BERTH_TEST_SOAK_RABBIT_KILLS when set.
// .ci/run runs the default (35 s on the development machine at load 3).
func soakSize() (records, kills int) {
	records, kills = 20000, 100
	if v, err := strconv.Atoi(os.Getenv("BERTH_TEST_SOAK_RABBIT_RECORDS")); err == nil && v > 0 {
		records = v
	}
	if v, err := strconv.Atoi(os.Getenv("BERTH_TEST_SOAK_RABBIT_KILLS")); err == nil && v > 0 {
		kills = v
	}
	return records, kills
}
