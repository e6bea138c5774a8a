package actions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// A redrive store (PostgreSQL) may be shared by several RabbitMQ clusters:
// an approval of a plan made on another cluster is refused against the
// real broker with Kafka's one-line refusal, nothing is stored and the
// refusal is audited; the same approval of this cluster's plan is stored.
func TestRabbitApproveRefusesAnotherClustersPlan(t *testing.T) {
	url := os.Getenv("BERTH_TEST_AMQP_URL")
	if url == "" {
		t.Skip("BERTH_TEST_AMQP_URL unset")
	}
	ctx := context.Background()
	cl, err := rabbitmq.Dial(ctx, rabbitmq.Options{AMQPURL: url, ManagementURL: os.Getenv("BERTH_TEST_MANAGEMENT_URL"), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("RabbitMQ unreachable: %v", err)
	}
	defer cl.Close()
	dir := t.TempDir()
	l, err := rabbitmq.OpenLedger(ctx, filepath.Join(dir, "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bobKey, bobPub := key(t, dir, "bob")
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, []byte("bob "+bobPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auditFile := filepath.Join(dir, "audit.log")
	r := &RabbitRedrive{
		Config:    &config.Config{Redrive: config.RedriveConfig{Policies: []config.RedrivePolicy{{Match: "q.dlq", Review: "required", Approvals: 1, AllowedSigners: signers}}}},
		OpenAudit: func(string) (*audit.Log, error) { return audit.Open(auditFile) },
	}
	bob, err := approval.LoadSigner(bobKey)
	if err != nil {
		t.Fatal(err)
	}
	// stored puts a plan made on cluster in the store and signs it as bob.
	stored := func(cluster string) (redrive.QueuePlan, approval.Signature) {
		t.Helper()
		p := redrive.QueuePlan{Cluster: cluster, Vhost: "/", DLQ: "q.dlq", QueueType: "classic", Rate: 100, CreatedAt: time.Now(), Author: "alice",
			Policy: redrive.PolicySnapshot{Review: "required", Approvals: 1}}
		if err := l.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
		sig, err := approval.Sign(p.Subject(), bob, approval.RoleApproval, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p, sig
	}
	here := cl.ClusterName()
	other, sig := stored(here + "-elsewhere")
	_, _, _, err = r.Approve(ctx, cl, l, other, sig, auditFile)
	want := fmt.Sprintf("refused: plan %s was made on cluster %q, this is cluster %q; nothing stored", other.Hash()[:12], here+"-elsewhere", here)
	if !errors.Is(err, ErrClusterMismatch) || err.Error() != want {
		t.Fatalf("approve another cluster's plan: %v\nwant %s", err, want)
	}
	if _, approvals, err := l.Signatures(ctx, other.Hash()); err != nil || len(approvals) != 0 {
		t.Fatalf("the refused approval was stored: %d approval(s), %v", len(approvals), err)
	}
	entries, err := audit.Open(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	list, err := entries.List()
	if err != nil || len(list) != 1 || list[0].Action != "redrive.refused" || list[0].Target != other.Hash() || !strings.Contains(string(list[0].DetailsJSON()), "was made on cluster") {
		t.Fatalf("audit log: %v %+v; want one redrive.refused naming the cluster", err, list)
	}

	mine, sig := stored(here)
	if principal, _, _, err := r.Approve(ctx, cl, l, mine, sig, auditFile); err != nil || principal != "bob" {
		t.Fatalf("approve this cluster's plan: %q %v", principal, err)
	}
	if _, approvals, err := l.Signatures(ctx, mine.Hash()); err != nil || len(approvals) != 1 {
		t.Fatalf("this cluster's plan: %d approval(s) stored, %v; want bob's", len(approvals), err)
	}
}
