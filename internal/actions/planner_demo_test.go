package actions

import (
	"context"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

// TestChecksFindTheDemosHalfAppliedPayments runs the HarborCart demo on a
// bundled broker until some payments reach payments.DLT after their capture
// committed, then plans every payments.DLT class with the demo's policies:
// those payments must be excluded as effect_committed, the rest included or
// blocked for their own reasons — the checks find the demo's real work.
func TestChecksFindTheDemosHalfAppliedPayments(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	for _, st := range bundled.HarborCartTopics() {
		kc.CreateTopic(t, st.Name, st.Partitions, 1, nil)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := demo.Start(ctx, demo.Options{Bootstrap: kc.Addrs, DataDir: dir, Rate: 2000})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		if s := d.Status(ctx); s.PaymentsHalf >= 2 && s.PaymentsDLT >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo produced no half-applied payments in time: %+v", d.Status(ctx))
		}
		time.Sleep(100 * time.Millisecond) // polling the demo's counters, not synchronising
	}
	d.Close()

	c, err := kafka.Dial(ctx, kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	defer cl.Close()
	cfg := config.Default()
	demo.ApplyConfig(cfg, dir)
	p := NewPlanner(cl, cfg)
	l, err := p.Load(ctx, demo.TopicPaymentsDLT, 0)
	if err != nil {
		t.Fatal(err)
	}
	var classes []string
	for _, c := range l.Classes {
		classes = append(classes, c.ID)
	}
	f, err := p.Plan(ctx, PlanRequest{DLQ: demo.TopicPaymentsDLT, Classes: classes})
	if err != nil {
		t.Fatal(err)
	}
	tot := f.Plan.Totals()
	if tot.ByReason[redrive.ReasonEffectCommitted] < 2 {
		t.Fatalf("no effect_committed among %d payments.DLT records: %+v", tot.Selected, tot.ByReason)
	}
	if tot.ByReason[redrive.ReasonCheckFailed] != 0 {
		t.Fatalf("checks failed against the demo: %+v", f.Plan.Records)
	}
	if f.Plan.Policy.Review != "required" || !f.Plan.Policy.RequireIdempotencyKey {
		t.Fatalf("demo policy not applied: %+v", f.Plan.Policy)
	}
}
