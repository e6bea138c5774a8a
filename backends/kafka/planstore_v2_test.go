package kafka

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

func testCore(t *testing.T, dlq string, rows int, created time.Time) redrive.SignedPlan {
	t.Helper()
	c := redrive.Core{Format: redrive.PlanFormat, Backend: redrive.BackendKafka, Cluster: "c1", DLQ: dlq,
		CreatedAt: redrive.FormatCreatedAt(created), Rate: 100, Batch: 100, Targets: []string{"payments"}}
	for i := 0; i < rows; i++ {
		v := []byte(`{"eventId":"evt-` + strconv.Itoa(i) + `"}`)
		c.Rows = append(c.Rows, redrive.Row{Loc: strconv.Itoa(i%3) + ":" + strconv.Itoa(i), Digest: redrive.ContentDigest(nil, true, v, nil, nil)})
	}
	p, err := redrive.NewSignedPlan(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSignedPlansOfAnySizeAreStoredAndListedBesideBadRecords: a v2 plan of
// 30,000 rows (several chunks) round-trips; a bad record is listed as one
// entry with its offset and never hides the good plans; v1 plans in the
// same store do not show up as problems.
func TestSignedPlansOfAnySizeAreStoredAndListedBesideBadRecords(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	store := NewPlanStore(dialCluster(t, kc).Client())
	t0 := time.Now()
	big := testCore(t, "payments.DLT", 30000, t0)
	small := testCore(t, "shipments.DLT", 3, t0.Add(-time.Minute))
	for _, p := range []redrive.SignedPlan{big, small} {
		if err := store.PutSigned(tctx(t), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.PutPlan(tctx(t), redrive.NewFile(testPlan("old.DLT", t0))); err != nil {
		t.Fatal(err)
	}
	kc.Produce(t, &kgo.Record{Topic: PlanTopic, Key: []byte("plan/0badc0de0badc0de"), Value: []byte("{")})

	got, err := store.GetSigned(tctx(t), big.Hash[:8])
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != big.Hash || len(got.Plan.Rows) != 30000 || got.Plan.Rows[29999] != big.Plan.Rows[29999] {
		t.Fatalf("read back %d rows", len(got.Plan.Rows))
	}
	ix, err := store.index(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ix.plans[big.Hash].sp.Manifest.Chunks); n < 2 {
		t.Fatalf("a 30,000-row plan in %d chunk(s)", n)
	}
	l, err := store.ListSigned(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 3 || l[0].Plan.Hash != big.Hash || l[1].Plan.Hash != small.Hash || l[2].Err == nil || l[2].Offset == 0 {
		t.Fatalf("listing: %+v", l)
	}
	if _, err := store.GetSigned(tctx(t), "0badc0de"); err == nil {
		t.Fatal("a bad record loads as a plan")
	}
	// Altered content under a good plan's hash is refused.
	tampered := small
	tampered.Plan.Rate = 5000
	if err := store.PutSigned(tctx(t), tampered); !errors.Is(err, redrive.ErrHashMismatch) {
		t.Fatalf("altered plan stored: %v", err)
	}
}
