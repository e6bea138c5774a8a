package actions

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/redrive"
)

// An edited plan file is caught by one errors.Is test whichever backend's
// loader read it, and each loader keeps the message its users already see.
func TestEditedPlanMatchesErrPlanEditedThroughBothLoaders(t *testing.T) {
	// Kafka: the v2 plan file loader.
	core := redrive.Core{
		Format: redrive.PlanFormat, Backend: redrive.BackendKafka, Cluster: "cl-1", DLQ: "payments.DLT",
		CreatedAt: redrive.FormatCreatedAt(time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)),
		Policy:    redrive.PolicySnapshot{IdempotencyKey: "json:paymentId", Review: "required", Approvals: 1, MaxRedrives: 3},
		Rate:      100, Batch: 100,
		Targets: []string{"payments"},
		Rows:    []redrive.Row{{Loc: "0:1", Digest: redrive.Record{Key: []byte("k")}.Digest().String(), Target: 0}},
	}
	sp, err := redrive.NewSignedPlan(core)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), `"payments.DLT"`, `"payments.DLX"`, 1)
	if edited == string(raw) {
		t.Fatal("the Kafka edit did not apply")
	}
	_, kerr := redrive.DecodeSignedPlan([]byte(edited))
	if !errors.Is(kerr, ErrPlanEdited) || !errors.Is(kerr, rabbitmq.ErrPlanEdited) {
		t.Errorf("Kafka loader: %v does not match actions.ErrPlanEdited", kerr)
	}
	if !strings.Contains(kerr.Error(), "the plan's content does not match its hash (edited after it was made?)") {
		t.Errorf("Kafka message changed: %v", kerr)
	}

	// RabbitMQ: the plan file loader.
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := rabbitmq.WritePlan(path, redrive.QueuePlan{Cluster: "rabbit@test", Vhost: "/", DLQ: "orders.dlq"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	redited := strings.Replace(string(b), `"orders.dlq"`, `"orders.dlx"`, 1)
	if redited == string(b) {
		t.Fatal("the RabbitMQ edit did not apply")
	}
	if err := os.WriteFile(path, []byte(redited), 0o644); err != nil {
		t.Fatal(err)
	}
	_, rerr := rabbitmq.ReadPlan(path)
	if !errors.Is(rerr, ErrPlanEdited) || !errors.Is(rerr, redrive.ErrHashMismatch) {
		t.Errorf("RabbitMQ loader: %v does not match actions.ErrPlanEdited", rerr)
	}
	if !strings.Contains(rerr.Error(), "the plan's content does not match its hash (edited after it was made?)") {
		t.Errorf("RabbitMQ message changed: %v", rerr)
	}
	// A refusal over it reads as before and still matches.
	if got := Refuse(ErrPlanEdited, "x").Error(); got != "refused: x" || !errors.Is(Refuse(ErrPlanEdited, "x"), redrive.ErrHashMismatch) {
		t.Errorf("refusal %q", got)
	}
	if errors.Is(kerr, ErrPlanExpired) {
		t.Error("an edited plan matches an unrelated refusal")
	}
}
