package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/internal/rabbittest"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

// rmqDeadLetters declares a DLQ (lazy when lazy), deleted after the test,
// holding n dead letters job-0..job-n-1 of a work queue.
func rmqDeadLetters(t *testing.T, n int, lazy bool) (*amqp.Connection, string) {
	t.Helper()
	conn := rabbittest.Need(t)
	rabbittest.NeedManagement(t)
	dlq := rabbittest.Uniq(t, "dlq")
	var args amqp.Table
	if lazy {
		args = amqp.Table{"x-queue-mode": "lazy"}
	}
	rabbittest.DeclareQueue(t, conn, dlq, args)
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": "work", "exchange": "", "routing-keys": []any{"work"}, "time": time.Now().Truncate(time.Second)}
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("job-%d", i), Body: []byte(`{"n":1}`), DeliveryMode: amqp.Persistent, Headers: amqp.Table{"x-death": []any{death}}}
	}
	rabbittest.PublishConfirmed(t, conn, "", dlq, msgs...)
	return conn, dlq
}

// rmqPlannedSix is a DLQ of 6 dead letters (rmqDeadLetters) and a plan
// of all of them in file, made under the config cfg.
func rmqPlannedSix(t *testing.T) (conn *amqp.Connection, dlq, file, cfg string) {
	t.Helper()
	isolateConfig(t)
	conn, dlq = rmqDeadLetters(t, 6, false)
	dir := t.TempDir()
	cfg = rabbitRedriveConfig(dir, "").write(t)
	file = filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", file, "--config", cfg); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	return conn, dlq, file, cfg
}

type rmqShown struct {
	Review struct {
		Complete   bool     `json:"complete"`
		Gone       []string `json:"gone"`
		NotVisible []string `json:"not_visible"`
		Unseen     string   `json:"unseen"`
		Keys       []string `json:"idempotency_keys"`
	} `json:"review"`
}

func rmqShow(t *testing.T, file, cfg string) (rmqShown, string) {
	t.Helper()
	// The timeout leaves the management API's statistics (every 5 s) the
	// time to count what other consumers hold.
	out, errOut, code := runBerth(t, "redrive", "show", file, "-o", "json", "--timeout", "60s", "--config", cfg)
	if code != 0 {
		t.Fatalf("show: exit %d %s", code, errOut)
	}
	var doc rmqShown
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("show: %v", err)
	}
	return doc, errOut
}

// `redrive show` right after the browse of `redrive plan` (or another
// show) finds every message of a DLQ of a few thousand, classic or lazy:
// each browse returns only once RabbitMQ has put back what it read. A
// review used to find the DLQ short of the messages still being put back
// and call the rest gone (9,999 of a lazy 100,000).
func TestRabbitRedriveShowRightAfterABrowseFindsEveryMessage(t *testing.T) {
	isolateConfig(t)
	const n = 5000
	for _, mode := range []string{"classic", "lazy"} {
		t.Run(mode, func(t *testing.T) {
			_, dlq := rmqDeadLetters(t, n, mode == "lazy")
			dir := t.TempDir()
			cfg := rabbitRedriveConfig(dir, "").write(t)
			file := filepath.Join(dir, "plan.json")
			if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--read", "5001", "--out", file, "--config", cfg); code != 0 {
				t.Fatalf("plan: exit %d %s", code, errOut)
			}
			for round := 1; round <= 2; round++ {
				doc, errOut := rmqShow(t, file, cfg)
				if r := doc.Review; !r.Complete || len(r.Gone) != 0 || len(r.NotVisible) != 0 || len(r.Keys) != n || r.Unseen != "" {
					t.Fatalf("show %d: complete %v, %d gone, %d not visible, %d keys, unseen %q; want all %d found\n%s", round, r.Complete, len(r.Gone), len(r.NotVisible), len(r.Keys), r.Unseen, n, errOut)
				}
			}
		})
	}
}

// Messages another consumer holds unacknowledged cannot be read by a
// review: `redrive show` says how many and why in one line, and calls the
// records it did not find not visible, not gone.
func TestRabbitRedriveShowCallsHeldMessagesNotVisible(t *testing.T) {
	conn, dlq, file, cfg := rmqPlannedSix(t)
	holdTwo(t, conn, dlq)
	doc, errOut := rmqShow(t, file, cfg)
	r := doc.Review
	if len(r.Gone) != 0 || fmt.Sprint(r.NotVisible) != "[job-0 job-1]" || len(r.Keys) != 6 {
		t.Fatalf("review: gone %v, not visible %v, %d keys; want job-0 and job-1 not visible, none gone\n%s", r.Gone, r.NotVisible, len(r.Keys), errOut)
	}
	if want := "2 message(s) could not be seen: held unacknowledged by 1 other consumer(s); the 2 record(s) not found are not visible, not gone"; !strings.HasSuffix(r.Unseen, want) {
		t.Fatalf("unseen %q, want it to end %q", r.Unseen, want)
	}
	out, _, code := runBerth(t, "redrive", "show", file, "--timeout", "60s", "--config", cfg)
	if code != 0 || strings.Contains(out, "GONE") || !strings.Contains(out, "NOT VISIBLE") || strings.Count(out, "could not be seen") != 1 {
		t.Fatalf("show (exit %d) says:\n%s\nwant NOT VISIBLE, no GONE, and one line saying what could not be seen", code, out)
	}
}

// Another Berth's consumers (consumer tag berth-*) are named as a
// Berth's, not as other consumers: a review started while a Berth run
// goes on, or right after one was killed (the DLQ counts the killed
// run's consumers until it has handled their channels' close, which takes
// a while when they held many messages), used to call them "other
// consumer(s)".
func TestRabbitRedriveShowNamesAnotherBerthsConsumers(t *testing.T) {
	conn, dlq, file, cfg := rmqPlannedSix(t)
	berth := "1 consumer(s) of a Berth (consumer tag berth-*: another Berth run still going, or one stopped whose messages RabbitMQ has yet to put back)"
	holdTwoAs(t, conn, dlq, "berth-redrive-3")
	doc, errOut := rmqShow(t, file, cfg)
	if want := "2 message(s) could not be seen: held unacknowledged by " + berth + "; the 2 record(s) not found are not visible, not gone"; !strings.HasSuffix(doc.Review.Unseen, want) ||
		fmt.Sprint(doc.Review.NotVisible) != "[job-0 job-1]" {
		t.Errorf("review: unseen %q, not visible %v; want it to end %q, job-0 and job-1 not visible\n%s", doc.Review.Unseen, doc.Review.NotVisible, want, errOut)
	}
	holdTwo(t, conn, dlq)
	doc, errOut = rmqShow(t, file, cfg)
	if want := "4 message(s) could not be seen: held unacknowledged by 1 other consumer(s) and " + berth; !strings.Contains(doc.Review.Unseen, want) {
		t.Errorf("review: unseen %q, want %q\n%s", doc.Review.Unseen, want, errOut)
	}
}

// The console reads a DLQ as the command line does: a page that browses it
// right after another did reads the same messages, and the messages
// another consumer holds are said in one line, and called not visible, not
// gone, on the plan's page.
func TestConsoleRabbitNamesWhatOtherConsumersHold(t *testing.T) {
	isolateConfig(t)
	conn, dlq := rmqDeadLetters(t, 6, false)
	rc := newRabbitConsole(t, "", false)
	file := filepath.Join(t.TempDir(), "plan.json")
	out, errOut, code := rc.berth(t, "redrive", "plan", dlq, "--all", "--out", file, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	var made struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(out), &made); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		d := drive(t, rc.env, tuidlq.NewQueueClassesPage(rc.env, dlq))
		mustContain(t, d.until("1 class(es)"), "6 message(s) read")
	}
	holdTwo(t, conn, dlq)
	d := drive(t, rc.env, tuidlq.NewQueueClassesPage(rc.env, dlq))
	mustContain(t, d.until("1 class(es)"), "4 message(s) read", "note: 2 message(s) could not be seen: held unacknowledged by 1 other consumer(s)")
	d = drive(t, rc.env, tuidlq.NewQueuePlansPage(rc.env))
	d.until(made.Hash[:12])
	d.press(keyEnterMsg, never)
	v := d.until("not visible")
	mustContain(t, v, "2 message(s) not visible", "job-0, job-1", "note: the review of")
	if strings.Contains(v, "changed or gone") {
		t.Fatalf("the plan's page calls held messages gone:\n%s", v)
	}
}

// holdTwo has another consumer take the DLQ's first two messages and hold
// them unacknowledged until the test ends, or until release (closing its
// channel) puts them back.
func holdTwo(t *testing.T, conn *amqp.Connection, dlq string) (release func()) {
	t.Helper()
	return holdTwoAs(t, conn, dlq, "other")
}

// holdTwoAs is holdTwo by a consumer with the given tag.
func holdTwoAs(t *testing.T, conn *amqp.Connection, dlq, tag string) (release func()) {
	t.Helper()
	other, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	release = func() { other.Close() }
	t.Cleanup(release)
	if err := other.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := other.Consume(dlq, tag, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-ds
	<-ds
	return release
}

// Messages another consumer holds unacknowledged cannot be consumed by a
// run either: `redrive execute` sends the rest and calls the plan's
// records it did not find not visible (reason not_visible, the review's
// word), not record_gone, in its text, JSON and audit entry; exit 1 says
// they were not sent, and the same command sends them once the other
// consumer lets them go.
func TestRabbitExecuteCallsHeldMessagesNotVisible(t *testing.T) {
	isolateConfig(t)
	conn, ch, work, dlq := rmqDLQ(t, 6)
	dir := t.TempDir()
	c := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      review: none\n", dlq))
	cfg := c.write(t)
	file := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--out", file, "--config", cfg); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	release := holdTwo(t, conn, dlq)
	type skip struct {
		Record, Reason, Detail string
	}
	var res struct {
		Sent        int      `json:"sent"`
		AlreadySent int      `json:"already_sent"`
		Skipped     []skip   `json:"skipped"`
		Problems    []string `json:"problems"`
	}
	out, errOut, code := runBerth(t, "redrive", "execute", file, "--yes", "-o", "json", "--config", cfg)
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("execute: %v\n%s%s", err, out, errOut)
	}
	want := "2 message(s) could not be seen: held unacknowledged by 1 other consumer(s)"
	if code != 1 || res.Sent != 4 || len(res.Skipped) != 2 {
		t.Fatalf("execute while another consumer holds two: exit %d, %d sent, skipped %+v; want exit 1, 4 sent, 2 skipped\n%s", code, res.Sent, res.Skipped, errOut)
	}
	for i, s := range res.Skipped {
		if s.Record != fmt.Sprintf("job-%d", i) || s.Reason != "not_visible" || !strings.Contains(s.Detail, want) || !strings.Contains(s.Detail, "run the plan again") {
			t.Errorf("skipped %+v; want job-%d not_visible, saying %q and to run the plan again", s, i, want)
		}
	}
	if len(res.Problems) != 1 || !strings.HasPrefix(res.Problems[0], "2 record(s) skipped: not_visible (") || !strings.Contains(res.Problems[0], "run the same command again") ||
		!strings.Contains(errOut, res.Problems[0]) {
		t.Errorf("problems %q, stderr %q; want one saying the 2 not visible were not sent and to run the same command again", res.Problems, errOut)
	}
	if r, _ := finishedDetails(t, c.Audit)["skipped_reasons"].(map[string]any); fmt.Sprint(r) != "map[not_visible:2]" {
		t.Errorf("redrive.execute.finished skipped_reasons %v; want not_visible 2", r)
	}
	// The last progress line counts them as the summary does, skipped:
	// every record settled, in the shape Kafka's share.
	lastProgress(t, errOut, "6/6 (100%) sent 4 already sent 0 skipped 2 failed 0, ")
	// Status says what is left, and its review calls none gone: the 4 sent
	// are counted as sent (the ledger says so; it named them not visible,
	// or gone with no other consumer), the 2 held not visible.
	out, errOut, code = runBerth(t, "redrive", "status", file, "-o", "json", "--timeout", "60s", "--config", cfg)
	var st struct {
		State   string `json:"state"`
		Summary struct {
			Review struct {
				Gone        []string `json:"gone"`
				NotVisible  []string `json:"not_visible"`
				AlreadySent int      `json:"already_sent"`
			} `json:"review"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.State != "partial (2 left)" ||
		fmt.Sprint(st.Summary.Review.NotVisible) != "[job-0 job-1]" || len(st.Summary.Review.Gone) != 0 || st.Summary.Review.AlreadySent != 4 {
		t.Errorf("status: exit %d %v state %q, review %+v; want partial (2 left), job-0 and job-1 not visible, 4 already sent\n%s%s", code, err, st.State, st.Summary.Review, out, errOut)
	}
	// The text says the same, and never that they are gone.
	release()
	hold := holdTwo(t, conn, dlq)
	out, _, code = runBerth(t, "redrive", "execute", file, "--yes", "--config", cfg)
	if code != 1 || strings.Contains(out, "record_gone") || strings.Count(out, "not_visible") != 3 || !strings.Contains(out, want) {
		t.Errorf("execute as text (exit %d):\n%s\nwant both rows not_visible saying %q, and its problem; never record_gone", code, out, want)
	}
	hold()
	out, errOut, code = runBerth(t, "redrive", "execute", file, "--yes", "-o", "json", "--config", cfg)
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Sent != 2 || res.AlreadySent != 4 || len(res.Skipped) != 0 {
		t.Errorf("execute once they are back: exit %d %v, %d sent, %d already sent, skipped %+v; want exit 0, the 2 sent\n%s", code, err, res.Sent, res.AlreadySent, res.Skipped, errOut)
	}
	// The 4 sent before are already sent, as in the summary.
	lastProgress(t, errOut, "6/6 (100%) sent 2 already sent 4 skipped 0 failed 0, ")
	if ids, _, _ := drainIDs(t, ch, work); len(ids) != 6 {
		t.Errorf("the work queue got %v, want the 6 messages once each", ids)
	}
	// Done: the review says every message was sent, none gone.
	out, errOut, code = runBerth(t, "redrive", "show", file, "--config", cfg)
	if code != 0 || !strings.Contains(out, "ALREADY SENT by this plan (the ledger has them confirmed; no longer in the DLQ): 6 message(s)") || strings.Contains(out, "GONE") {
		t.Errorf("show of the finished plan (exit %d):\n%s%s\nwant 6 already sent, none gone", code, out, errOut)
	}
}

// A DLQ deleted while execute runs: what was sent stays sent and is
// counted, and the run ends with the deleted DLQ named, the error among
// its problems and last on stderr, exit 1 (it said "the DLQ consumer was
// closed", its problems empty).
func TestRabbitExecuteOnADLQDeletedMidRun(t *testing.T) {
	isolateConfig(t)
	const n = 2500 // more than a run's segment holds (2,000): the rest is still in the DLQ
	conn, ch, work, dlq := rmqDLQ(t, n)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      review: none\n", dlq)).write(t)
	file := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--read", "5000", "--rate", "1000", "--batch-size", "10", "--out", file, "--config", cfg); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	done := startBerth(t, "redrive", "execute", file, "--yes", "-o", "json", "--config", cfg)
	rabbittest.Eventually(t, 30*time.Second, "the first messages redriven", func() bool {
		select {
		case r := <-done:
			t.Fatalf("execute ended first: exit %d\n%s%s", r.code, r.out, r.errOut)
		default:
		}
		return rmqReadyCount(t, conn, work) >= 10
	})
	if _, err := ch.QueueDelete(dlq, false, false, false); err != nil {
		t.Fatal(err)
	}
	r := <-done
	var res struct {
		Sent     int      `json:"sent"`
		Problems []string `json:"problems"`
	}
	gone := fmt.Sprintf("its DLQ %q no longer exists (deleted since the plan was made?)", dlq)
	if err := json.Unmarshal([]byte(r.out), &res); err != nil || r.code != 1 || res.Sent == 0 || res.Sent >= n ||
		len(res.Problems) == 0 || !strings.Contains(res.Problems[len(res.Problems)-1], "stopped by an error: ") || !strings.Contains(res.Problems[len(res.Problems)-1], gone) ||
		!strings.HasSuffix(r.errOut, gone+"\n") {
		t.Fatalf("execute with its DLQ deleted mid-run: exit %d %v, sent %d, problems %q; want exit 1, some sent, the error naming the DLQ among the problems and last\n%s", r.code, err, res.Sent, res.Problems, r.errOut)
	}
	if got := rmqReadyCount(t, conn, work); got != res.Sent {
		t.Errorf("the work queue holds %d, the run says %d sent", got, res.Sent)
	}
}

// Two operators run the same approved RabbitMQ plan at once (two
// terminals). The first run holds the DLQ's messages (its consumer's
// prefetch) and sends them; the second finds the DLQ empty. No message is
// sent twice, and the second run says the other run sent them (already
// sent), or that another Berth holds them (not_visible): never that they
// are gone ("consumed or purged elsewhere", exit 1, as it said).
func TestRabbitTwoRunsOfOnePlanAtOnce(t *testing.T) {
	bin := buildBerth(t)
	isolateConfig(t)
	const n = 300
	conn, ch, work, dlq := rmqDLQ(t, n)
	dir := t.TempDir()
	cfg := rabbitRedriveConfig(dir, fmt.Sprintf("    - match: %q\n      review: none\n", dlq)).write(t)
	file := filepath.Join(dir, "plan.json")
	if _, errOut, code := runBerth(t, "redrive", "plan", dlq, "--all", "--rate", "200", "--batch-size", "10", "--out", file, "--config", cfg); code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	start := func() (*strings.Builder, *strings.Builder, <-chan error) {
		return startBin(t, bin, "redrive", "execute", file, "--yes", "-o", "json", "--config", cfg)
	}
	_, aErr, aDone := start()
	rabbittest.Eventually(t, 30*time.Second, "the first messages redriven", func() bool {
		select {
		case err := <-aDone:
			t.Fatalf("the first run ended (%v) before the second began: %s", err, aErr)
		default:
		}
		return rmqReadyCount(t, conn, work) >= 10
	})
	bOut, bErr, bDone := start()
	errA, errB := <-aDone, <-bDone
	if errA != nil {
		t.Fatalf("the first run: %v\n%s", errA, aErr)
	}
	var b struct {
		Sent        int `json:"sent"`
		AlreadySent int `json:"already_sent"`
		Skipped     []struct {
			Reason string `json:"reason"`
		} `json:"skipped"`
		RabbitMQ struct {
			ByAnotherRun int `json:"by_another_run"`
		} `json:"rabbitmq"`
	}
	err := json.Unmarshal([]byte(bOut.String()), &b)
	notVisible := 0
	for _, s := range b.Skipped {
		if s.Reason == "not_visible" {
			notVisible++
		}
	}
	said := "were sent by another run of this plan going on at the same time (a second terminal?): counted already sent, not sent again"
	if err != nil || b.Sent != 0 || notVisible != len(b.Skipped) || b.AlreadySent+notVisible != n || b.RabbitMQ.ByAnotherRun == 0 ||
		!strings.Contains(bErr.String(), fmt.Sprintf("%d message(s) %s", b.RabbitMQ.ByAnotherRun, said)) || (errB == nil) != (notVisible == 0) {
		t.Fatalf("the second run (%v, %v): sent %d, already sent %d (%d by the other run), skipped %d (%d not visible)\n%s\nwant nothing sent, every message already sent by the other run or not visible, never gone, and a line saying so", errB, err, b.Sent, b.AlreadySent, b.RabbitMQ.ByAnotherRun, len(b.Skipped), notVisible, bErr)
	}
	ids, _, _ := drainIDs(t, ch, work)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("%s reached the work queue twice", id)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Errorf("the work queue got %d of %d messages", len(seen), n)
	}
	// The plan is done: the same command again sends nothing, exit 0.
	if _, errOut, code := runBerth(t, "redrive", "execute", file, "--yes", "--config", cfg); code != 0 {
		t.Errorf("the plan again: exit %d %s", code, errOut)
	}
}

// lastProgress checks that a run's last progress line (of the shape both
// backends share) has the counts want.
func lastProgress(t *testing.T, stderr, want string) {
	t.Helper()
	lines := progressLines(t, stderr)
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], ": "+want) {
		t.Errorf("the last progress line is not %q:\n%s", want, stderr)
	}
}
