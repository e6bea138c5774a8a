package rabbitmq

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestRedriveSoakKill9 is RabbitMQ's crash-safety soak at scale: a
// 20,000-message plan executed in a child process killed with SIGKILL at
// 100 random points spread over it, resumed each time. Nothing is lost, and
// the duplicates (counted) stay within the documented at-least-once window:
// at a kill, at most the messages in flight (4 publish windows) can have
// been published without their confirm being recorded.
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
	const n, kills, window = 20000, 100, 50
	want := fillDLQ(t, conn, dlq, work, n)

	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	l, err := OpenLedger(context.Background(), ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := planFor(t, c, dlq, Selection{All: true}, l)
	planPath := filepath.Join(dir, "plan.json")
	if err := WritePlan(planPath, p); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(childSpec{Plan: planPath, Ledger: ledgerPath, Window: window, Rate: 100000})
	exe, _ := os.Executable()

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 17))
	points := make([]int, kills)
	for i := range points {
		points[i] = 1 + rng.IntN(n-window*4)
	}
	slices.Sort(points)
	killed := 0
	start := time.Now()
	for _, at := range points {
		if confirmedCount(t, ledgerPath, p.Hash()) >= at {
			at = confirmedCount(t, ledgerPath, p.Hash()) + 1 + rng.IntN(window)
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "BERTH_RMQ_CHILD="+string(spec))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(60 * time.Second)
	wait:
		for confirmedCount(t, ledgerPath, p.Hash()) < at {
			select {
			case <-exited:
				break wait
			case <-time.After(2 * time.Millisecond): // poll the ledger file
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("child never reached %d confirmed", at)
			}
		}
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // SIGKILL: no cleanup runs
			<-exited
			killed++
		}
	}
	if killed < kills {
		t.Fatalf("only %d of %d runs were killed before finishing", killed, kills)
	}
	res, err := c.Execute(context.Background(), p, l, ExecOptions{Window: window})
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
	t.Logf("%d messages, %d kills: none lost, %d duplicates (bound %d), %s", n, killed, dups, killed*4*window, time.Since(start).Round(time.Second))
}
