package sor

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/internal/config"
)

// BenchmarkPostgresLookups compares the batched lookup (BatchSize keys per
// round trip) with the baseline of one round trip per key, for 2,000 keys
// against the real PostgreSQL. Compare ns/op of the two sub-benchmarks.
func BenchmarkPostgresLookups(b *testing.B) {
	dsn := benchDSN(b)
	name := fmt.Sprintf("payments_bench_%d", b.N)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	conn.Exec(context.Background(), "drop table if exists "+name)
	if _, err := conn.Exec(context.Background(), "create table "+name+" (idempotency_key text primary key, status text)"); err != nil {
		b.Fatal(err)
	}
	defer conn.Exec(context.Background(), "drop table "+name)
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprintf("pay-%05d", i)
	}
	conn.Exec(context.Background(), "insert into "+name+" select 'pay-' || lpad(g::text, 5, '0'), 'captured' from generate_series(0, 1999, 2) g")
	query := "select 1 from " + name + " where idempotency_key = $1 and status = 'captured'"

	b.Run("batched", func(b *testing.B) {
		l, err := Open(context.Background(), config.SystemOfRecord{Driver: "postgres", DSN: dsn, Query: query})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got, err := l.Committed(context.Background(), keys)
			if err != nil || len(got) != len(keys) || !got["pay-00000"] || got["pay-00001"] {
				b.Fatalf("%d answers, %v", len(got), err)
			}
		}
		b.ReportMetric(float64(len(keys)*b.N)/b.Elapsed().Seconds(), "keys/s")
	})
	b.Run("one-round-trip-per-key", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			found := 0
			for _, k := range keys {
				var one int
				err := conn.QueryRow(context.Background(), query, k).Scan(&one)
				if err == nil {
					found++
				} else if err != pgx.ErrNoRows {
					b.Fatal(err)
				}
			}
			if found != 1000 {
				b.Fatalf("found %d", found)
			}
		}
		b.ReportMetric(float64(len(keys)*b.N)/b.Elapsed().Seconds(), "keys/s")
	})
}

func benchDSN(b *testing.B) string {
	dsn := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	if v := os.Getenv("BERTH_TEST_POSTGRES_DSN"); v != "" {
		dsn = v
	}
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Skipf("PostgreSQL unreachable: %v", err)
	}
	c.Close(context.Background())
	return dsn
}
