package rabbitmq

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

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
	p, err := ReadPlan(s.Plan)
	if err == nil {
		var c *Client
		if c, err = Dial(ctx, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL(), Timeout: 5 * time.Second}); err == nil {
			var l *Ledger
			if l, err = OpenLedger(ctx, s.Ledger); err == nil {
				_, err = c.Execute(ctx, p, l, ExecOptions{Admission: noPolicy{}, Window: s.Window, Rate: s.Rate})
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
		publishConfirmed(t, conn, "", dlq, msgs[start:min(start+1000, n)]...)
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
	conn := needRabbit(t)
	needManagement(t)
	if testing.Short() {
		t.Skip("subprocess test")
	}
	dlq, work := uniq(t, "dlq"), uniq(t, "work")
	declareQueue(t, conn, dlq, nil)
	declareQueue(t, conn, work, nil)
	const n, window = 3000, 50
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

	res, err := c.Execute(context.Background(), p, l, ExecOptions{Admission: noPolicy{}, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resume: %+v (kills %d)", res, kills)
	if len(res.Failed) != 0 || len(res.NotFound) != 0 {
		t.Fatalf("resume: failed %v not found %v", res.Failed, res.NotFound)
	}
	eventually(t, 10*time.Second, "the DLQ to be empty", func() bool { return readyCount(t, conn, dlq) == 0 })
	got := drain(t, conn, work)
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
		if states[id] != StateConfirmed {
			t.Fatalf("ledger says %q for %s, want confirmed", states[id], id)
		}
	}
	t.Logf("%d messages, %d kills, %d duplicates (at-least-once; message_id dedupes)", n, kills, dups)
}
