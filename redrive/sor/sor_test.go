package sor

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/internal/config"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// PostgresDSN returns the test database, skipping when it is unreachable
// unless BERTH_TEST_REQUIRE_SERVICES is set.
func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("BERTH_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(c, dsn)
	if err != nil {
		if os.Getenv("BERTH_TEST_REQUIRE_SERVICES") != "" {
			t.Fatalf("PostgreSQL unreachable: %v", err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	conn.Close(c)
	return dsn
}

// paymentsTable creates a uniquely named payments table, dropped when the
// test ends, holding captured and pending payments.
func paymentsTable(t *testing.T, dsn string, captured, pending []string) string {
	t.Helper()
	name := fmt.Sprintf("payments_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx(t), "create table "+name+" (idempotency_key text primary key, status text not null)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			c.Exec(context.Background(), "drop table if exists "+name)
			c.Close(context.Background())
		}
	})
	for _, k := range captured {
		conn.Exec(ctx(t), "insert into "+name+" values ($1, 'captured')", k)
	}
	for _, k := range pending {
		conn.Exec(ctx(t), "insert into "+name+" values ($1, 'pending')", k)
	}
	return name
}

func TestPostgresLooksUpManyKeysInBatches(t *testing.T) {
	dsn := postgresDSN(t)
	var captured []string
	for i := 0; i < BatchSize+20; i++ { // more than one batch
		captured = append(captured, fmt.Sprintf("pay-%04d", i))
	}
	table := paymentsTable(t, dsn, captured, []string{"pay-pending"})
	for _, q := range []string{
		"select 1 from " + table + " where idempotency_key = $1 and status = 'captured'",
		"select 1 from " + table + " where idempotency_key = ? and status = 'captured'", // SQLite style works too
	} {
		l, err := Open(ctx(t), config.SystemOfRecord{Driver: "postgres", DSN: dsn, Query: q})
		if err != nil {
			t.Fatal(err)
		}
		keys := append([]string{"pay-pending", "pay-unknown"}, captured...)
		got, err := l.Committed(ctx(t), keys)
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(keys) || got["pay-pending"] || got["pay-unknown"] || !got["pay-0000"] || !got[captured[len(captured)-1]] {
			t.Fatalf("answers wrong for %q: %d answers, pending=%v unknown=%v", q, len(got), got["pay-pending"], got["pay-unknown"])
		}
	}
}

func TestPostgresDSNFromEnvironment(t *testing.T) {
	dsn := postgresDSN(t)
	table := paymentsTable(t, dsn, []string{"k1"}, nil)
	t.Setenv("BERTH_SOR_TEST_DSN", dsn)
	l, err := Open(ctx(t), config.SystemOfRecord{Driver: "postgres", DSNEnv: "BERTH_SOR_TEST_DSN", Query: "select 1 from " + table + " where idempotency_key = $1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := l.Committed(ctx(t), []string{"k1"}); err != nil || !got["k1"] {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := Open(ctx(t), config.SystemOfRecord{Driver: "postgres", DSNEnv: "BERTH_SOR_UNSET_VAR", Query: "select 1"}); err == nil || !strings.Contains(err.Error(), "BERTH_SOR_UNSET_VAR") {
		t.Fatalf("unset env: %v", err)
	}
}

func TestPostgresFailuresAreErrorsNotAnswers(t *testing.T) {
	dsn := postgresDSN(t)
	// A query against a table that does not exist errors.
	l, err := Open(ctx(t), config.SystemOfRecord{Driver: "postgres", DSN: dsn, Query: "select 1 from no_such_table_berth where idempotency_key = $1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := l.Committed(ctx(t), []string{"k"}); err == nil {
		t.Fatalf("a failing query answered %v", got)
	}
}

func TestUnreachablePostgresFailsQuicklyWithoutThePassword(t *testing.T) {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := Open(c, config.SystemOfRecord{Driver: "postgres", DSN: "postgres://berth:s3cret@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", Query: "select 1 where $1 = ''"})
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("error %q must say unreachable, name the address and hide the password", err)
	}
}

func sqliteDB(t *testing.T, captured, pending []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payments.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`create table payments(idempotency_key text primary key, order_id text, amount_cents integer, status text, captured_at text)`); err != nil {
		t.Fatal(err)
	}
	for _, k := range captured {
		db.Exec(`insert into payments values (?, 'o', 100, 'captured', '2026-11-29T08:00:00Z')`, k)
	}
	for _, k := range pending {
		db.Exec(`insert into payments values (?, 'o', 100, 'pending', null)`, k)
	}
	return path
}

func TestSQLiteLooksUpKeysInOneTransaction(t *testing.T) {
	path := sqliteDB(t, []string{"a", "b"}, []string{"c"})
	for _, q := range []string{
		"select 1 from payments where idempotency_key = ? and status = 'captured'",
		"select 1 from payments where idempotency_key = $1 and status = 'captured'",
	} {
		l, err := Open(ctx(t), config.SystemOfRecord{Driver: "sqlite", DSN: path, Query: q})
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Committed(ctx(t), []string{"a", "b", "c", "d"})
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !got["a"] || !got["b"] || got["c"] || got["d"] || len(got) != 4 {
			t.Fatalf("%q: %v", q, got)
		}
	}
}

func TestSQLiteMissingFileOrBadQueryIsAnError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.db")
	if _, err := Open(ctx(t), config.SystemOfRecord{Driver: "sqlite", DSN: missing, Query: "select 1 where ? = ''"}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("opening a missing system of record created it")
	}
	path := sqliteDB(t, nil, nil)
	l, err := Open(ctx(t), config.SystemOfRecord{Driver: "sqlite", DSN: path, Query: "select 1 from nothing_here where k = ?"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := l.Committed(ctx(t), []string{"a"}); err == nil {
		t.Fatalf("bad query answered %v", got)
	}
}

func TestPlaceholders(t *testing.T) {
	cases := [][3]string{
		{"select 1 from t where k = ?", "postgres", "select 1 from t where k = $1"},
		{"select '?' from t where k = ? and \"a?\" = 1", "postgres", "select '?' from t where k = $1 and \"a?\" = 1"},
		{"select 1 from t where k = $1", "postgres", "select 1 from t where k = $1"},
		{"select 1 from t where k = ?", "sqlite", "select 1 from t where k = ?"},
	}
	for _, c := range cases {
		if got := Placeholders(c[0], c[1]); got != c[2] {
			t.Errorf("Placeholders(%q, %s) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
	if d := Describe(config.SystemOfRecord{Driver: "postgres", DSN: "postgres://u:pw@h:5432/db"}); strings.Contains(d, "pw") {
		t.Fatalf("Describe leaks: %s", d)
	}
}
