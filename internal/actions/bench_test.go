package actions_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/redrive"
)

// BenchmarkExecutePlan executes a plan of 100,000 small records with every
// check on (ledger, system of record in the real PostgreSQL, batched; loop
// guard; duplicates; ordering scan over the original topic) against the
// bundled broker, and compares it with producing the same records plainly
// (no transaction, no checks) in the same run:
//
//	go test -run '^$' -bench ExecutePlan -benchtime 1x ./internal/actions/
//
// records/s is the executor's rate over the included records; ratio is the
// executor's time over the plain produce's.
func BenchmarkExecutePlan(b *testing.B) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	dsn := os.Getenv("BERTH_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatalf("PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	table := fmt.Sprintf("bench_payments_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "create table "+table+" (idempotency_key text primary key, status text)"); err != nil {
		b.Fatal(err)
	}
	defer conn.Exec(context.Background(), "drop table "+table)
	// One record in ten already took effect: the check must find those.
	rows := make([][]any, 0, n/10)
	for i := 0; i < n; i += 10 {
		rows = append(rows, []any{fmt.Sprintf("pay-%06d", i), "captured"})
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{table}, []string{"idempotency_key", "status"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}

	for i := 0; i < b.N; i++ {
		b.StopTimer()
		kc := kafkatest.Start(b, 1)
		kc.CreateTopic(b, "pay", 12, 1, nil)
		kc.CreateTopic(b, "pay.DLT", 12, 1, nil)
		kc.CreateTopic(b, "plain", 12, 1, nil)
		dead := make([]*kgo.Record, n)
		for j := range dead {
			p, o := make([]byte, 4), make([]byte, 8)
			binary.BigEndian.PutUint32(p, uint32(j%12))
			binary.BigEndian.PutUint64(o, uint64(1_000_000+j))
			dead[j] = &kgo.Record{Topic: "pay.DLT", Key: []byte(fmt.Sprintf("acct-%d", j%5000)),
				Value: []byte(fmt.Sprintf(`{"eventId":"evt-%06d","idempotencyKey":"pay-%06d","amountCents":%d}`, j, j, 100+j%900)),
				Headers: []kgo.RecordHeader{
					{Key: "kafka_dlt-original-topic", Value: []byte("pay")},
					{Key: "kafka_dlt-original-partition", Value: p},
					{Key: "kafka_dlt-original-offset", Value: o},
					{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")},
					{Key: "kafka_dlt-exception-message", Value: []byte("Read timed out")},
				}}
		}
		kc.Produce(b, dead...)
		c, err := kafka.Dial(ctx, kafka.Options{Bootstrap: kc.Addrs, Timeout: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		cfg := config.Default()
		cfg.Redrive.Policies = []config.RedrivePolicy{{
			Match: "pay.DLT", IdempotencyKey: "json:idempotencyKey", RequireIdempotencyKey: true, Review: "none",
			SystemOfRecord: &config.SystemOfRecord{Driver: "postgres", DSN: dsn, Query: "select 1 from " + table + " where idempotency_key = $1 and status = 'captured'"},
		}}
		k := kafka.NewCluster(c)
		pl := actions.NewPlanner(k, cfg)
		pl.ReadLimit = n
		loaded, err := pl.Load(ctx, "pay.DLT", n)
		if err != nil {
			b.Fatal(err)
		}
		classes := map[string]bool{}
		for _, r := range loaded.Records {
			classes[r.Class] = true
		}
		var cls []string
		for c := range classes {
			cls = append(cls, c)
		}
		f, err := pl.Plan(ctx, actions.PlanRequest{DLQ: "pay.DLT", Classes: cls, Rate: 1 << 30, BatchSize: 1000, Author: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		tot := f.Plan.Totals()
		if tot.Included != n-n/10 || tot.ByReason[redrive.ReasonEffectCommitted] != n/10 {
			b.Fatalf("plan totals %+v", tot)
		}
		tr, err := k.NewRedriveTransport(ctx, f.Hash)
		if err != nil {
			b.Fatal(err)
		}
		pol, _ := pl.PolicyFor("pay.DLT")

		b.StartTimer()
		start := time.Now()
		res, err := actions.Execute(ctx, f, actions.Options{Cluster: f.Plan.Cluster, Policy: pol.Snapshot(), HasPolicy: true, Recheck: pl.Check, Reader: tr, Publisher: tr})
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil || res.Sent != tot.Included {
			b.Fatalf("execute: sent %d of %d: %v", res.Sent, tot.Included, err)
		}
		// Baseline: the same number of records produced plainly.
		plain := make([]*kgo.Record, res.Sent)
		for j := range plain {
			plain[j] = &kgo.Record{Topic: "plain", Key: dead[j].Key, Value: dead[j].Value}
		}
		pstart := time.Now()
		if err := c.Kgo().ProduceSync(ctx, plain...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		pelapsed := time.Since(pstart)
		b.ReportMetric(float64(res.Sent)/elapsed.Seconds(), "records/s")
		b.ReportMetric(float64(res.Sent)/pelapsed.Seconds(), "plain-records/s")
		b.ReportMetric(elapsed.Seconds()/pelapsed.Seconds(), "ratio")
		tr.Close()
		c.Close()
	}
}
