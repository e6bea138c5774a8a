package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/redrive"
)

// `redrive verify` is execute's verification on its own, headless: after
// `execute --no-verify` it reads back every copy (exit 0, the same
// verification object as execute's JSON), and lists a copy that fails
// again into the DLQ while it watches. RabbitMQ says in one line why it
// cannot.
func TestRedriveVerifyReadsBackAndWatchesLater(t *testing.T) {
	const n = 6
	f := newRedriveFixture(t, n, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	plan := f.plan(t)
	if _, errOut, code := runBerth(t, "--config", f.config, "redrive", "execute", plan[:12], "--yes", "--no-verify"); code != 0 {
		t.Fatalf("execute: exit %d %s", code, errOut)
	}
	out, errOut, code := runBerth(t, "--config", f.config, "redrive", "verify", plan[:12], "--watch", "0", "-o", "json")
	var v struct {
		Backend      string `json:"backend"`
		Plan         string `json:"plan"`
		Verification struct {
			OK       bool `json:"ok"`
			Refailed int  `json:"refailed"`
			Kafka    struct {
				Checked    int   `json:"checked"`
				Mismatches []any `json:"mismatches"`
			} `json:"kafka"`
		} `json:"verification"`
		Problems []string `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("verify: exit %d %v\n%s%s", code, err, out, errOut)
	}
	if v.Backend != "kafka" || v.Plan != plan || !v.Verification.OK || v.Verification.Kafka.Checked != n || len(v.Verification.Kafka.Mismatches) != 0 || v.Problems == nil || len(v.Problems) != 0 {
		t.Fatalf("verify after execute --no-verify:\n%s", out)
	}
	if got := auditActions(t, f.audit); !strings.Contains(got, "redrive.verified") {
		t.Fatalf("verify not audited: %s", got)
	}

	// A copy failing again while it watches: produced until verify ends
	// (the watch reads from the DLQ's end at its start).
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kc.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, errOut, code = runBerth(t, "--config", f.config, "redrive", "verify", plan[:12], "--watch", "3s")
	}()
	for produced := false; ; {
		select {
		case <-done:
			if !produced {
				t.Fatal("verify ended before a re-failure could be produced")
			}
			// Listed, but exit 0 as for execute: the copies were sent.
			if code != 0 || strings.Contains(out, "re-failed 0 ") || !strings.Contains(out, "re-failed: ledger-events.DLT/0/0 landed again") {
				t.Fatalf("verify with a re-failure: exit %d; want 0 with the re-failed copies listed\n%s%s", code, out, errOut)
			}
			goto rabbit
		default:
		}
		rec := &kgo.Record{Topic: "ledger-events.DLT", Value: []byte(`{"eventId":"evt-0000"}`), Headers: []kgo.RecordHeader{
			{Key: redrive.HeaderPlan, Value: []byte(plan)}, {Key: redrive.HeaderOrigin, Value: []byte("ledger-events.DLT/0/0")},
		}}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced = true
	}
rabbit:
	_, errOut, code = runBerth(t, "--amqp", testAMQPURL(), "--management", testManagementURL(), "redrive", "verify", plan[:12])
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") > 0 || !strings.Contains(errOut, "RabbitMQ verifies by the DLQ's depth during execute") {
		t.Fatalf("verify on RabbitMQ: exit %d %q; want one line saying why not", code, errOut)
	}
}
