package actions

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/rabbittest"
	"github.com/berth-dev/berth/redrive"
)

// TestMain doubles as the child process of the kill -9 test: with
// BERTH_RMQ_CHILD set it executes the plan it names and exits.
func TestMain(m *testing.M) {
	if spec := os.Getenv("BERTH_RMQ_CHILD"); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

type childSpec struct {
	Plan, Ledger string
	Window, Rate int
}

func runChild(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	ctx := context.Background()
	p, err := rabbitmq.ReadPlan(s.Plan)
	if err == nil {
		var c *rabbitmq.Client
		if c, err = rabbitmq.Dial(ctx, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL(), Timeout: 5 * time.Second}); err == nil {
			var l *rabbitmq.Ledger
			if l, err = rabbitmq.OpenLedger(ctx, s.Ledger); err == nil {
				_, err = executeRabbit(ctx, c, p, l, noPolicy{}, RabbitExecOptions{Window: s.Window, Rate: s.Rate})
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fillDLQ puts n dead letters straight into dlq, as if they had died in
// work (reached through the default exchange): ids ev-00000...
func fillDLQ(t testing.TB, conn *amqp.Connection, dlq, work string, n int) []string {
	t.Helper()
	msgs := deadLetters(work, n)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.MessageId)
	}
	for start := 0; start < n; start += 1000 {
		rabbittest.PublishConfirmed(t, conn, "", dlq, msgs[start:min(start+1000, n)]...)
	}
	return ids
}

// deadLetters are fillDLQ's messages: ev-00000... with x-death naming work.
func deadLetters(work string, n int) []amqp.Publishing {
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": work, "exchange": "", "routing-keys": []interface{}{work}, "time": time.Now().Truncate(time.Second)}
	var msgs []amqp.Publishing
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("ev-%05d", i)
		msgs = append(msgs, amqp.Publishing{
			MessageId: id, DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{"x-death": []interface{}{death}, "x-first-death-queue": work, "x-first-death-reason": "rejected", "x-first-death-exchange": ""},
			Body:    []byte(fmt.Sprintf(`{"eventId":%q,"amount":%d}`, id, i)),
		})
	}
	return msgs
}

func confirmedCount(t testing.TB, path, plan string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	// The child may hold the write lock: a failed read counts as 0.
	_ = db.QueryRow(`SELECT count(*) FROM berth_rabbitmq_ledger WHERE plan = $1 AND state = 'confirmed'`, plan).Scan(&n)
	return n
}

// Kill -9 the executing process at random points, resume each time, and
// end with every planned message in the target (duplicates allowed: this
// is at-least-once, bounded by the messages in flight at each kill), the
// DLQ empty and the ledger confirming every event.
func TestRedriveKilledMidPlanResumesWithoutLoss(t *testing.T) {
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	if testing.Short() {
		t.Skip("subprocess test")
	}
	dlq, work := rabbittest.Uniq(t, "dlq"), rabbittest.Uniq(t, "work")
	rabbittest.DeclareQueue(t, conn, dlq, nil)
	rabbittest.DeclareQueue(t, conn, work, nil)
	const n, window = 3000, 50
	want := fillDLQ(t, conn, dlq, work, n)

	c := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL()})
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	l, err := rabbitmq.OpenLedger(context.Background(), ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := queuePlanFor(t, c, dlq, redrive.QueueSelection{All: true}, l)
	planPath := filepath.Join(dir, "plan.json")
	if err := rabbitmq.WritePlan(planPath, p); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(childSpec{Plan: planPath, Ledger: ledgerPath, Window: window, Rate: 2500})
	exe, _ := os.Executable()

	points := []int{rand.IntN(800) + 1, rand.IntN(800) + 900, rand.IntN(800) + 1800}
	kills := 0
	for _, at := range points {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "BERTH_RMQ_CHILD="+string(spec))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(30 * time.Second)
	wait:
		for confirmedCount(t, ledgerPath, p.Hash()) < at {
			select {
			case err := <-exited:
				t.Logf("child finished before the kill point %d: %v", at, err)
				break wait
			default:
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("child never reached %d confirmed", at)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // SIGKILL: no cleanup runs
			<-exited
			kills++
		}
		t.Logf("killed at %d confirmed (kill point %d)", confirmedCount(t, ledgerPath, p.Hash()), at)
	}

	res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: window})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resume: %+v (kills %d)", res, kills)
	if len(res.Failed) != 0 || len(res.NotFound) != 0 {
		t.Fatalf("resume: failed %v not found %v", res.Failed, res.NotFound)
	}
	rabbittest.Eventually(t, 10*time.Second, "the DLQ to be empty", func() bool { return rabbittest.ReadyCount(t, conn, dlq) == 0 })
	got := rabbittest.Drain(t, conn, work)
	distinct := map[string]int{}
	for _, d := range got {
		distinct[d.MessageId]++
	}
	var missing []string
	for _, id := range want {
		if distinct[id] == 0 {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("%d messages lost, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	dups := len(got) - len(distinct)
	// At a kill, at most the chunk being published, the one queued, the one
	// awaiting its confirms and the one being recorded can be published and
	// not recorded as confirmed: 4 windows (inflightWindows, as the manual
	// says).
	if dups > kills*4*window {
		t.Errorf("%d duplicates after %d kills: more than the messages that can be in flight (%d per kill)", dups, kills, 4*window)
	}
	states, err := l.PlanStates(context.Background(), p.Hash())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range want {
		if states[id] != rabbitmq.StateConfirmed {
			t.Fatalf("ledger says %q for %s, want confirmed", states[id], id)
		}
	}
	t.Logf("%d messages, %d kills, %d duplicates (at-least-once; message_id dedupes)", n, kills, dups)
}

// TestRabbitRedriveSoakKill9 is RabbitMQ's crash-safety soak at scale: a
// 20,000-message plan executed in a child process killed with SIGKILL at
// 100 random points spread over it, resumed each time. Nothing is lost, and
// the duplicates (counted) stay within the documented at-least-once window:
// at a kill, at most the messages in flight (4 publish windows:
// inflightWindows) can have been published without their confirm being
// recorded.
//
// It runs when BERTH_TEST_SOAK=1 (.ci/run sets it):
//
//	BERTH_TEST_SOAK=1 go test -run TestRabbitRedriveSoakKill9 -v ./internal/actions/
func TestRabbitRedriveSoakKill9(t *testing.T) {
	if os.Getenv("BERTH_TEST_SOAK") == "" {
		t.Skip("the SIGKILL soak runs with BERTH_TEST_SOAK=1 (.ci/run sets it)")
	}
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	dlq, work := rabbittest.Uniq(t, "dlq"), rabbittest.Uniq(t, "work")
	rabbittest.DeclareQueue(t, conn, dlq, nil)
	rabbittest.DeclareQueue(t, conn, work, nil)
	n, kills := soakSize()
	const window = 50
	// The child is paced (4,000 messages/s) so that the kills, each landing
	// a poll after its point, spread over the whole plan: unpaced it ran
	// far enough past each point to finish the plan before the 100th.
	want := fillDLQ(t, conn, dlq, work, n)

	c := rabbitClient(t, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL()})
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	l, err := rabbitmq.OpenLedger(context.Background(), ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := queuePlanFor(t, c, dlq, redrive.QueueSelection{All: true}, l)
	planPath := filepath.Join(dir, "plan.json")
	if err := rabbitmq.WritePlan(planPath, p); err != nil {
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
	res, err := executeRabbit(context.Background(), c, p, l, noPolicy{}, RabbitExecOptions{Window: window})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 0 || len(res.NotFound) != 0 {
		t.Fatalf("resume: failed %v not found %v", res.Failed, res.NotFound)
	}
	rabbittest.Eventually(t, 30*time.Second, "the DLQ to be empty", func() bool { return rabbittest.ReadyCount(t, conn, dlq) == 0 })
	got := rabbittest.Drain(t, conn, work)
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
