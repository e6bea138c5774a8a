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
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
)

// A plan file given to approve, sign or execute is imported into the plan
// store by one action per backend: an edited file, another backend's plan
// and another cluster's plan are refused with nothing stored; a read-only
// context checks it and stores nothing; a good one is stored once.
func TestImportPlanFileIntoTheKafkaPlanStore(t *testing.T) {
	_, c, k := seededDLQ(t, 3)
	ctx := context.Background()
	info, err := k.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := kafka.NewPlanStore(c)
	kr := &actions.KafkaRedrive{Planner: actions.NewPlanner(k, &config.Config{}), Store: actions.KafkaStore(store)}
	made := func(cluster string) (redrive.File, []byte) {
		f := planFor(t, k, "orig.DLT", 3)
		f.Plan.Cluster = cluster
		f = redrive.NewFile(f.Plan)
		raw, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return f, raw
	}
	notStored := func(hash string) {
		t.Helper()
		if _, err := store.Plan(ctx, hash); !errors.Is(err, backends.ErrNoPlan) {
			t.Fatalf("plan %s: %v, want it not stored", hash[:12], err)
		}
	}

	other, raw := made("another-cluster")
	_, err = kr.ImportFile(ctx, "other.json", bytes.NewReader(raw), true)
	if !errors.Is(err, actions.ErrClusterMismatch) || !strings.Contains(err.Error(), `made on cluster "another-cluster", this is cluster "`+info.ID+`"`) || !strings.HasSuffix(err.Error(), "nothing stored or sent") {
		t.Fatalf("another cluster's plan: %v", err)
	}
	notStored(other.Hash)

	f, raw := made(info.ID)
	edited := bytes.Replace(raw, []byte(`"batch":7`), []byte(`"batch":8`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatal("the test's edit changed nothing")
	}
	if _, err := kr.ImportFile(ctx, "edited.json", bytes.NewReader(edited), true); !errors.Is(err, actions.ErrPlanEdited) || !strings.HasPrefix(err.Error(), "edited.json: ") || !strings.Contains(err.Error(), "does not match its hash") {
		t.Fatalf("edited plan: %v", err)
	}
	notStored(f.Hash)

	rabbit, err := redrive.QueuePlan{Cluster: info.ID, Vhost: "/", DLQ: "q.dlq", QueueType: "classic", CreatedAt: time.Now()}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.ImportFile(ctx, "rabbit.json", bytes.NewReader(rabbit), true); !errors.Is(err, actions.ErrOtherBackend) ||
		err.Error() != "refused: plan rabbit.json is a RabbitMQ plan and this is a Kafka context: a plan runs only on the backend it was made on; nothing stored or sent" {
		t.Fatalf("a RabbitMQ plan: %v", err)
	}

	ro := *kr
	ro.ReadOnly = true
	if got, err := ro.ImportFile(ctx, "plan.json", bytes.NewReader(raw), true); err != nil || got.Hash != f.Hash {
		t.Fatalf("read-only import: %v", err)
	}
	notStored(f.Hash)
	if _, err := kr.ImportFile(ctx, "plan.json", bytes.NewReader(raw), false); err != nil {
		t.Fatalf("a check without storing: %v", err)
	}
	notStored(f.Hash)

	got, err := kr.ImportFile(ctx, "plan.json", bytes.NewReader(raw), true)
	if err != nil || got.Hash != f.Hash {
		t.Fatalf("import: %v", err)
	}
	if s, err := store.Plan(ctx, f.Hash[:12]); err != nil || s.Hash != f.Hash {
		t.Fatalf("stored plan: %v", err)
	}

	// The console's plans go through the same import: a plan whose
	// content no longer hashes to its hash is not stored.
	bad := other
	bad.Plan.Cluster = info.ID
	if _, err := kr.Import(ctx, bad); !errors.Is(err, actions.ErrPlanEdited) {
		t.Fatalf("console plan edited in memory: %v", err)
	}
	notStored(bad.Hash)
	if err := (actions.PlannerConsole{P: kr.Planner}).Store(ctx, other); !errors.Is(err, actions.ErrClusterMismatch) {
		t.Fatalf("console store of another cluster's plan: %v", err)
	}

	// `redrive show` of a file: the review is derived from the records on
	// the plan's own cluster only (the same coordinates here hold other
	// records).
	if _, err := kr.DeriveReview(ctx, &other); !errors.Is(err, actions.ErrClusterMismatch) || !strings.Contains(err.Error(), "show it attached to its own cluster") {
		t.Fatalf("review of another cluster's plan: %v", err)
	}
	if r, err := kr.DeriveReview(ctx, &f); err != nil || len(r.Keys) != 3 || len(r.Gone) != 0 || len(r.Changed) != 0 {
		t.Fatalf("review of this cluster's plan: %+v %v; want 3 keys, nothing changed or gone", r, err)
	}
}

func TestImportPlanFileIntoTheRabbitMQStore(t *testing.T) {
	url := os.Getenv("BERTH_TEST_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	ctx := context.Background()
	cl, err := rabbitmq.Dial(ctx, rabbitmq.Options{AMQPURL: url, ManagementURL: os.Getenv("BERTH_TEST_MANAGEMENT_URL"), Timeout: 5 * time.Second})
	if err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") != "" {
			t.Fatalf("RabbitMQ unreachable: %v", err)
		}
		t.Skipf("RabbitMQ unreachable: %v", err)
	}
	defer cl.Close()
	l, err := rabbitmq.OpenLedger(ctx, filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rr := &actions.RabbitRedrive{Config: &config.Config{}}
	made := func(cluster string) (redrive.QueuePlan, []byte) {
		p := redrive.QueuePlan{Cluster: cluster, Vhost: "/", DLQ: "q.dlq", QueueType: "classic", Rate: 100, CreatedAt: time.Now()}
		raw, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return p, raw
	}
	notStored := func(hash string) {
		t.Helper()
		if _, err := l.Plan(ctx, hash); !errors.Is(err, backends.ErrNoPlan) {
			t.Fatalf("plan %s: %v, want it not stored", hash[:12], err)
		}
	}
	here := cl.ClusterName()
	other, raw := made(here + "-elsewhere")
	_, err = rr.ImportFile(ctx, cl, l, "other.json", bytes.NewReader(raw), true)
	if !errors.Is(err, actions.ErrClusterMismatch) || !strings.Contains(err.Error(), `this is cluster "`+here+`": a plan runs only where it was made; nothing stored or sent`) {
		t.Fatalf("another cluster's plan: %v", err)
	}
	notStored(other.Hash())

	p, raw := made(here)
	edited := bytes.Replace(raw, []byte(`"rate":100`), []byte(`"rate":101`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatal("the test's edit changed nothing")
	}
	if _, err := rr.ImportFile(ctx, cl, l, "edited.json", bytes.NewReader(edited), true); !errors.Is(err, rabbitmq.ErrPlanEdited) || !strings.HasPrefix(err.Error(), "plan edited.json: ") {
		t.Fatalf("edited plan: %v", err)
	}
	notStored(p.Hash())

	kafkaPlan, err := redrive.NewFile(redrive.Plan{Version: redrive.PlanVersion, Cluster: here, DLQ: "orig.DLT", CreatedAt: time.Now()}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rr.ImportFile(ctx, cl, l, "kafka.json", bytes.NewReader(kafkaPlan), true); !errors.Is(err, actions.ErrOtherBackend) ||
		err.Error() != "refused: plan kafka.json is a Kafka plan and this is a RabbitMQ context: a plan runs only on the backend it was made on; nothing stored or sent" {
		t.Fatalf("a Kafka plan: %v", err)
	}

	ro := *rr
	ro.ReadOnly = true
	if _, err := ro.ImportFile(ctx, cl, l, "plan.json", bytes.NewReader(raw), true); err != nil {
		t.Fatalf("read-only import: %v", err)
	}
	notStored(p.Hash())
	if _, err := rr.ImportFile(ctx, cl, l, "plan.json", bytes.NewReader(raw), true); err != nil {
		t.Fatalf("import: %v", err)
	}
	if s, err := l.Plan(ctx, p.Hash()[:12]); err != nil || s.Hash() != p.Hash() {
		t.Fatalf("stored plan: %v", err)
	}
	// `redrive show`: no review of another cluster's plan is derived here.
	if _, err := rr.DeriveReview(ctx, cl, nil, &other, false); !errors.Is(err, actions.ErrClusterMismatch) || !strings.Contains(err.Error(), "show it attached to its own cluster") {
		t.Fatalf("review of another cluster's plan: %v", err)
	}
}
