package actions

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
)

// A RabbitMQ run asks, before it reads the DLQ, whether what the broker
// says about it lets it run: these are the refusals an operator sees
// (their text is the command's error), judged from the facts alone.
func TestRabbitRunnableRefusesWhatCannotRunSafely(t *testing.T) {
	limit := int64(5)
	quorum := backends.Queue{Type: backends.QueueQuorum}
	limited := quorum
	limited.Wiring.DeliveryLimit = &limit
	cases := []struct {
		name    string
		dlq     backends.Queue
		accept  bool
		refused string // "" when it may run
	}{
		{"classic", backends.Queue{Type: backends.QueueClassic}, false, ""},
		{"auto-delete", backends.Queue{Type: backends.QueueClassic, AutoDelete: true}, false, `DLQ "orders.dlq" is auto-delete: RabbitMQ deletes it`},
		{"quorum without acceptance", quorum, false, "make the plan with --accept-requeue-side-effects to allow it"},
		{"quorum accepted", quorum, true, ""},
		{"quorum with a delivery limit, even accepted", limited, true, "quorum queue with delivery limit 5"},
		{"stream", backends.Queue{Type: backends.QueueStream}, true, `"orders.dlq" is a stream`},
		{"type unknown", backends.Queue{}, true, "DLQ type unknown (no management API and none in the plan)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := redrive.QueuePlan{DLQ: "orders.dlq", AcceptQuorumSideEffects: tc.accept}
			err := (&rabbitAdmission{p: p}).Runnable(p, tc.dlq)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("err %v; want one saying %q", err, tc.refused)
			}
			var r *rabbitmq.RefusedError
			if tc.dlq.Type != "" && !errors.As(err, &r) {
				t.Errorf("%v is not a *rabbitmq.RefusedError (the CLI reports it as a refusal)", err)
			}
		})
	}
}

// A plan edited after its checks ran (and signed again by its author)
// cannot send a message anywhere its dead-lettering does not say: the
// admission compares the signed target with what the consumed message
// derives to under the plan's target mode and skips a difference as
// derived_mismatch, naming both; the rest of the chunk is checked and sent.
func TestRabbitAdmissionSkipsASignedTargetTheMessageDoesNotDeriveTo(t *testing.T) {
	msg := func(id string) redrive.QueueMessage {
		return redrive.QueueMessage{EventID: id, Position: len(id), OriginalQueue: "orders", Exchange: "orders.x", RoutingKey: "created", Routed: true}
	}
	row := func(id, x, k string) redrive.QueueRecord {
		return redrive.QueueRecord{EventID: id, Verdict: redrive.Verdict{Included: true}}.WithOrigin(redrive.QueueOrigin{Exchange: x, RoutingKey: k})
	}
	cases := []struct {
		name   string
		target string
		rec    redrive.QueueRecord
		m      redrive.QueueMessage
		detail string // "" when admitted
	}{
		{"exchange target as signed", redrive.QueueTargetExchange, row("e", "orders.x", "created"), msg("e"), ""},
		{"edited routing key", redrive.QueueTargetExchange, row("e", "orders.x", "refund"), msg("e"),
			`the plan sends it to exchange "orders.x" key "refund"; the message's dead-lettering says exchange "orders.x" key "created"`},
		{"edited to another queue", redrive.QueueTargetExchange, row("e", "", "elsewhere"), msg("e"), `key "elsewhere"`},
		{"queue target as signed", redrive.QueueTargetQueue, row("e", "", "orders"), msg("e"), ""},
		{"queue target edited", redrive.QueueTargetQueue, row("e", "", "payments"), msg("e"),
			`the plan sends it to exchange "" key "payments"; the message's dead-lettering says exchange "" key "orders"`},
		{"message names no target", redrive.QueueTargetExchange, row("e", "orders.x", "created"),
			redrive.QueueMessage{EventID: "e", OriginalQueue: "orders"}, `says exchange "" key ""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := redrive.QueuePlan{DLQ: "orders.dlq", Target: tc.target, Records: []redrive.QueueRecord{tc.rec, row("ok", "orders.x", "created")}}
			if tc.target == redrive.QueueTargetQueue {
				p.Records[1] = row("ok", "", "orders")
			}
			rr := &RabbitRedrive{Config: &config.Config{}}
			a := rr.admission(p, nil)
			out, err := a.Admit(context.Background(), []redrive.QueueMessage{tc.m, msg("ok")})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := out["ok"]; ok && !v.Included {
				t.Errorf("the matching message was excluded: %+v", v)
			}
			v, excluded := out["e"]
			switch {
			case tc.detail == "" && excluded && !v.Included:
				t.Errorf("excluded %+v; want it sent", v)
			case tc.detail != "" && (!excluded || v.Reason != ReasonDerivedChanged || !strings.Contains(v.Detail, tc.detail)):
				t.Errorf("verdict %+v (excluded %v); want %s saying %q", v, excluded, ReasonDerivedChanged, tc.detail)
			}
		})
	}
}
