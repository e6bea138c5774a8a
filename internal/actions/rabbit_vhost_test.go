package actions_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/rabbittest"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// TestRabbitPlanOfAnotherVhostIsRefusedAtEveryStep: a plan names its
// vhost; a connection to another vhost of the same cluster has a queue of
// the DLQ's name that is another queue. Its review must not be built from
// that queue, nor the plan imported, approved or dry-run there (execute
// refused it already); each says which vhosts differ.
func TestRabbitPlanOfAnotherVhostIsRefusedAtEveryStep(t *testing.T) {
	rabbittest.Need(t)
	ctx := context.Background()
	cl, err := rabbitmq.Dial(ctx, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dir := t.TempDir()
	l, err := rabbitmq.OpenLedger(ctx, filepath.Join(dir, "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	auditFile := filepath.Join(dir, "audit.log")
	rr := &actions.RabbitRedrive{Config: &config.Config{}, OpenAudit: func(string) (*audit.Log, error) { return audit.Open(auditFile) }}
	p := redrive.QueuePlan{Cluster: cl.ClusterName(), Vhost: "berth-elsewhere", DLQ: "q.dlq", QueueType: "classic", Rate: 100, CreatedAt: time.Now()}
	raw, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := `made in vhost "berth-elsewhere", this connection is to vhost "/"`
	refused := func(step string, err error) {
		t.Helper()
		if !errors.Is(err, actions.ErrClusterMismatch) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s of another vhost's plan: %v", step, err)
		}
	}
	_, err = rr.ImportFile(ctx, cl, l, "plan.json", bytes.NewReader(raw), true)
	refused("import", err)
	if _, err := l.Plan(ctx, p.Hash()); !errors.Is(err, backends.ErrNoPlan) {
		t.Fatalf("the refused plan was stored: %v", err)
	}
	_, err = rr.DeriveReview(ctx, cl, nil, &p, false)
	refused("review", err)
	_, _, _, err = rr.Approve(ctx, cl, l, p, approval.Signature{}, auditFile)
	refused("approve", err)
	_, _, err = rr.DryRun(ctx, cl, l, &p, "tester", auditFile, true)
	refused("dry run", err)
	logged, err := os.ReadFile(auditFile)
	if err != nil || !strings.Contains(string(logged), "redrive.refused") {
		t.Fatalf("the refused approval is not in the audit log (%v): %s", err, logged)
	}
}
