package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/redrive"
)

// scaleRig is an incident at scale, as a user meets it: a bundled broker
// running as its own process (`berth broker`), a payments topic whose
// records failed into payments.DLT with Spring's headers, a payments table
// in the real PostgreSQL as the system of record (one payment in ten
// already captured), a policy that requires an idempotency key, the system
// of record and one approval, and SSH keys for an author and an approver.
// Every step runs the berth binary.
type scaleRig struct {
	bin, addr, config, dir string
	author, approver       string
	n, captured            int
	table                  string
	pg                     *pgx.Conn
}

const (
	scaleTopic = "payments"
	scaleDLQ   = "payments.DLT"
	scaleParts = 12
)

func newScaleRig(t testing.TB, n int) *scaleRig {
	t.Helper()
	isolateConfig(t)
	dsn, conn := rmqPostgres(t)
	r := &scaleRig{bin: buildBerth(t), dir: t.TempDir(), n: n, pg: conn, table: fmt.Sprintf("scale_payments_%d", time.Now().UnixNano())}
	r.addr = startBrokerProcess(t, r.bin, filepath.Join(r.dir, "broker"))
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "create table "+r.table+" (idempotency_key text primary key, status text)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "drop table "+r.table) })
	var rows [][]any
	for i := 0; i < n; i += 10 {
		rows = append(rows, []any{paymentID(i), "captured"})
	}
	r.captured = len(rows)
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{r.table}, []string{"idempotency_key", "status"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	seedPaymentsDLQ(t, r.addr, n)

	var alicePub, bobPub string
	r.author, alicePub = sshKey(t, r.dir, "alice")
	r.approver, bobPub = sshKey(t, r.dir, "bob")
	signers := filepath.Join(r.dir, "allowed_signers")
	if err := os.WriteFile(signers, []byte("alice@hc "+alicePub+"\nbob@hc "+bobPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.config = writeConfig(t, fmt.Sprintf(`current_context: scale
contexts:
  scale:
    kind: kafka
    bootstrap: [%s]
audit:
  file: %s
redrive:
  policies:
    - match: "payments*.DLT"
      idempotency_key: json:idempotencyKey
      event_id: json:eventId
      require_idempotency_key: true
      system_of_record:
        driver: postgres
        dsn: %s
        query: select 1 from %s where idempotency_key = $1 and status = 'captured'
      review: required
      approvals: 1
      allowed_signers: %s
`, r.addr, filepath.Join(r.dir, "audit.log"), dsn, r.table, signers))
	return r
}

func paymentID(i int) string { return fmt.Sprintf("pay-%07d", i) }

// paymentValue is a payment event as a payments service would publish it.
func paymentValue(i int) []byte {
	return []byte(fmt.Sprintf(`{"eventId":"evt-%07d","idempotencyKey":"%s","paymentId":"%s","accountId":"acct-%05d","amountCents":%d,"currency":"EUR","merchant":"HarborCart","method":"card","attempt":1,"requestedAt":"2026-11-30T21:%02d:%02dZ"}`,
		i, paymentID(i), paymentID(i), i%20000, 100+i%99000, i/60%60, i%60))
}

// seedPaymentsDLQ writes n payments and, for each, the record Spring's
// DeadLetterPublishingRecoverer writes when the PSP call timed out: the
// same key and value, the original's coordinates and timestamp, the
// consumer group, the exception, its cause, message and a stack trace.
func seedPaymentsDLQ(t testing.TB, addr string, n int) {
	t.Helper()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(4<<20), kgo.MaxBufferedRecords(50000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{scaleTopic, scaleDLQ, "baseline"} {
		if _, err := adm.CreateTopic(ctx, scaleParts, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	const chunk = 20000
	stack := []byte(strings.Repeat("\tat com.harborcart.payments.PspClient.capture(PspClient.java:88)\n", 6))
	for from := 0; from < n; from += chunk {
		to := min(n, from+chunk)
		originals := make([]*kgo.Record, 0, to-from)
		for i := from; i < to; i++ {
			originals = append(originals, &kgo.Record{Topic: scaleTopic, Partition: int32(i % scaleParts), Key: []byte(paymentID(i)), Value: paymentValue(i)})
		}
		if err := cl.ProduceSync(ctx, originals...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		dead := make([]*kgo.Record, len(originals))
		for j, o := range originals {
			p, off, ts := make([]byte, 4), make([]byte, 8), make([]byte, 8)
			binary.BigEndian.PutUint32(p, uint32(o.Partition))
			binary.BigEndian.PutUint64(off, uint64(o.Offset))
			binary.BigEndian.PutUint64(ts, uint64(o.Timestamp.UnixMilli()))
			dead[j] = &kgo.Record{Topic: scaleDLQ, Partition: o.Partition, Key: o.Key, Value: o.Value, Headers: []kgo.RecordHeader{
				{Key: "kafka_dlt-original-topic", Value: []byte(scaleTopic)},
				{Key: "kafka_dlt-original-partition", Value: p},
				{Key: "kafka_dlt-original-offset", Value: off},
				{Key: "kafka_dlt-original-timestamp", Value: ts},
				{Key: "kafka_dlt-original-timestamp-type", Value: []byte("CreateTime")},
				{Key: "kafka_dlt-original-consumer-group", Value: []byte("payments-capture")},
				{Key: "kafka_dlt-exception-fqcn", Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
				{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte("java.net.SocketTimeoutException")},
				{Key: "kafka_dlt-exception-message", Value: []byte("Read timed out calling psp.example/v1/captures/" + string(o.Key))},
				{Key: "kafka_dlt-exception-stacktrace", Value: stack},
				{Key: "traceparent", Value: []byte(fmt.Sprintf("00-%032x-%016x-01", j+from, j+from))},
			}}
		}
		if err := cl.ProduceSync(ctx, dead...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// startBrokerProcess runs `berth broker` on random ports with one broker
// and no seed topics, and returns its address; it is stopped (SIGTERM) when
// the test ends.
func startBrokerProcess(t testing.TB, bin, dataDir string) string {
	t.Helper()
	cmd := exec.Command(bin, "broker", "--listen", "127.0.0.1:0", "--brokers", "1", "--seed", "none", "--data-dir", dataDir)
	cmd.Env = os.Environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "broker 0 listening on "); ok {
			go func() {
				for lines.Scan() {
				}
			}()
			return strings.TrimSpace(addr)
		}
	}
	t.Fatalf("berth broker did not say where it listens")
	return ""
}

// step is one run of the binary: what it printed, how long it took and
// its peak resident memory.
type step struct {
	stdout, stderr string
	code           int
	wall           time.Duration
	maxRSS         int64 // bytes
	// cpu is the command's user plus system CPU time: on a machine the
	// broker shares, what Berth itself costs, beside the wall time it waits.
	cpu time.Duration
}

func (r *scaleRig) run(t testing.TB, args ...string) step {
	t.Helper()
	args = append([]string{r.bin, "--config", r.config}, args...)
	// The peak RSS comes from GNU time, which forks the binary from a small
	// process: os/exec starts children with vfork, so their rusage would
	// count this test's memory (the messages it seeded) as theirs.
	rssFile := filepath.Join(r.dir, "rss")
	gnuTime, _ := exec.LookPath("time")
	if gnuTime != "" {
		args = append([]string{gnuTime, "-f", "%M %U %S", "-o", rssFile}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = os.Environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	s := step{stdout: out.String(), stderr: errOut.String(), wall: time.Since(start)}
	if gnuTime != "" {
		if raw, rerr := os.ReadFile(rssFile); rerr == nil {
			// The last line is the format's (a killed command's status
			// line comes before it).
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			if f := strings.Fields(lines[len(lines)-1]); len(f) == 3 {
				kib, _ := strconv.ParseInt(f[0], 10, 64)
				s.maxRSS = kib * 1024
				user, _ := strconv.ParseFloat(f[1], 64)
				sys, _ := strconv.ParseFloat(f[2], 64)
				s.cpu = time.Duration((user + sys) * float64(time.Second))
			}
		}
	} else if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.maxRSS = ru.Maxrss * 1024 // Linux reports KiB
		s.cpu = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	}
	if err != nil {
		s.code = cmd.ProcessState.ExitCode()
	}
	return s
}

func (s step) mib() float64 { return float64(s.maxRSS) / (1 << 20) }

// class returns the DLQ's one failure class.
func (r *scaleRig) class(t testing.TB) string {
	t.Helper()
	s := r.run(t, "dlq", "classes", scaleDLQ, "--limit", strconv.Itoa(r.n), "-o", "json")
	var classes []struct {
		Class string `json:"class"`
		Count int    `json:"count"`
	}
	if err := json.Unmarshal([]byte(s.stdout), &classes); s.code != 0 || err != nil || len(classes) != 1 || classes[0].Count != r.n {
		t.Fatalf("dlq classes: exit %d %v %s %s", s.code, err, s.stdout, s.stderr)
	}
	t.Logf("dlq classes:     %8.2fs  peak RSS %6.0f MiB", s.wall.Seconds(), s.mib())
	return classes[0].Class
}

// baseline produces the same n DLQ records plainly (no transaction, no
// checks) to a topic of the same shape, in the same run: what the broker
// and the machine can do at all.
func (r *scaleRig) baseline(t testing.TB) time.Duration {
	t.Helper()
	ctx := context.Background()
	src, err := kgo.NewClient(kgo.SeedBrokers(r.addr), kgo.ConsumeTopics(scaleDLQ), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var recs []*kgo.Record
	for len(recs) < r.n {
		fs := src.PollFetches(ctx)
		fs.EachRecord(func(rec *kgo.Record) {
			recs = append(recs, &kgo.Record{Topic: "baseline", Key: rec.Key, Value: rec.Value, Headers: rec.Headers})
		})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(r.n+1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// landed counts the copies of plan in the target (read committed) and
// fails on an event that is there twice.
func (r *scaleRig) landed(t testing.TB, plan string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr), kgo.ConsumeTopics(scaleTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, scaleTopic) // the LSO
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	next := map[int32]int64{}
	for {
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if next[o.Partition] < o.Offset {
				done = false
			}
		})
		if done {
			return len(seen)
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v", scaleTopic, ctx.Err())
		}
		fs.EachRecord(func(rec *kgo.Record) {
			next[rec.Partition] = rec.Offset + 1
			if rec.Attrs.IsControl() {
				return
			}
			for _, h := range rec.Headers {
				if h.Key == redrive.HeaderPlan && string(h.Value) == plan {
					if seen[string(rec.Key)] {
						t.Fatalf("payment %s is in %s twice", rec.Key, scaleTopic)
					}
					seen[string(rec.Key)] = true
				}
			}
		})
	}
}
