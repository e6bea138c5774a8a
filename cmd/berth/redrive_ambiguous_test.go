package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ambiguousPayloads are DLQ payloads whose idempotency key (json:idem) one
// client reads one way and another client another: a repeated key (Go and
// most parsers take the last, some the first, some refuse) or a second
// document after the first. Only "clear" has one key.
var ambiguousPayloads = []struct{ name, body string }{
	{"clear", `{"eventId":"%s-clear","idem":"pay-1"}`},
	{"repeated", `{"eventId":"%s-repeated","idem":"pay-2","idem":"pay-3"}`},
	{"trailing", `{"eventId":"%s-trailing","idem":"pay-4"} {"idem":"pay-5"}`},
}

// A payment whose key can be read two ways is never redriven on a guess,
// on either backend, through the commands a user runs: the plan excludes it
// (missing_idempotency_key, saying why) and execute sends the clear one
// only.
func TestRedriveExcludesAmbiguousIdempotencyKeysOnBothBackends(t *testing.T) {
	policy := func(match, more string) string {
		return fmt.Sprintf("    - match: %q\n      idempotency_key: json:idem\n      require_idempotency_key: true\n      review: none\n", match) + more
	}
	check := func(t *testing.T, config, dlq, prefix string, idOf func(name string) string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "plan.json")
		out, errOut, code := runBerth(t, "--config", config, "redrive", "plan", dlq, "--all", "--out", file, "-o", "json")
		if code != 0 {
			t.Fatalf("redrive plan: exit %d %s", code, errOut)
		}
		var p rmqPlanOut
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		got := map[string]string{}
		for _, r := range p.Records {
			if !strings.HasPrefix(r.EventID, prefix) {
				continue
			}
			v := "included"
			if !r.Included {
				v = r.Reason
				if !strings.Contains(r.Detail, "ambiguous") {
					t.Errorf("%s excluded without saying a key may be ambiguous: %q", r.EventID, r.Detail)
				}
			}
			got[r.EventID] = v
		}
		want := map[string]string{idOf("clear"): "included", idOf("repeated"): "missing_idempotency_key", idOf("trailing"): "missing_idempotency_key"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("verdicts\n got %v\nwant %v\n%s", got, want, out)
		}
		out, errOut, code = runBerth(t, "--config", config, "redrive", "execute", p.Hash[:12], "--yes", "--watch", "0", "-o", "json")
		var res struct {
			Sent int `json:"sent"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Sent != 1 {
			t.Fatalf("execute: exit %d, want 1 sent: %s%s", code, out, errOut)
		}
	}

	t.Run("kafka", func(t *testing.T) {
		// The event id from a header, so that the record whose payload is
		// two documents (no JSON field read from it at all) is still named.
		f := newRedriveFixture(t, 1, policy("ledger-events.DLT", "      event_id: header:event-id\n"))
		var recs []*kgo.Record
		for i, pl := range ambiguousPayloads {
			p, off := make([]byte, 4), make([]byte, 8)
			binary.BigEndian.PutUint64(off, uint64(100+i))
			recs = append(recs, &kgo.Record{Topic: "ledger-events.DLT", Key: []byte("acct-" + pl.name), Value: []byte(fmt.Sprintf(pl.body, "amb")), Headers: []kgo.RecordHeader{
				{Key: "event-id", Value: []byte("amb-" + pl.name)},
				{Key: "kafka_dlt-original-topic", Value: []byte("ledger-events")},
				{Key: "kafka_dlt-original-partition", Value: p},
				{Key: "kafka_dlt-original-offset", Value: off},
				{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")},
				{Key: "kafka_dlt-exception-message", Value: []byte("Read timed out")},
			}})
		}
		f.kc.Produce(t, recs...)
		check(t, f.config, "ledger-events.DLT", "amb-", func(name string) string { return "amb-" + name })
	})

	t.Run("rabbitmq", func(t *testing.T) {
		isolateConfig(t)
		_, _, _, dlq, sfx := rmqDeadLettered(t, "amb", false, func(sfx string) []amqp.Publishing {
			var out []amqp.Publishing
			for _, pl := range ambiguousPayloads {
				out = append(out, amqp.Publishing{MessageId: sfx + "-" + pl.name, ContentType: "application/json", Body: []byte(fmt.Sprintf(pl.body, sfx))})
			}
			return out
		})
		dir := t.TempDir()
		config := rabbitConfig{Audit: filepath.Join(dir, "audit.log"), Store: filepath.Join(dir, "ledger.db"), Policies: policy("berth.test.amb.dlq.*", "")}.write(t)
		check(t, config, dlq, sfx, func(name string) string { return sfx + "-" + name })
	})
}
