// Package sor asks a system of record whether a record's effect already
// committed: a policy's SQL query, parameterised by the idempotency key, run
// against PostgreSQL (pgx, many keys per round trip in a batch) or an
// embedded SQLite file (modernc.org/sqlite, all keys in one read
// transaction). A row means "committed". Any failure — unreachable,
// missing file, bad query — is an error, which the checks turn into a
// blocked record: an unanswered question is never read as "not applied".
package sor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/berth-dev/berth/internal/config"
)

// BatchSize is how many keys go in one PostgreSQL round trip.
const BatchSize = 500

// Lookup answers, for each key, whether the system of record holds it.
type Lookup interface {
	// Committed returns an answer for every key, or an error.
	Committed(ctx context.Context, keys []string) (map[string]bool, error)
	Close() error
}

// Open connects to the system of record described by s. The DSN comes from
// s.DSN or the environment variable s.DSNEnv; errors never quote it.
func Open(ctx context.Context, s config.SystemOfRecord) (Lookup, error) {
	dsn := s.DSN
	if s.DSNEnv != "" {
		v, ok := os.LookupEnv(s.DSNEnv)
		if !ok || v == "" {
			return nil, fmt.Errorf("system_of_record.dsn_env: environment variable %s is not set", s.DSNEnv)
		}
		dsn = v
	}
	if dsn == "" {
		return nil, errors.New("system_of_record.dsn: empty")
	}
	if strings.TrimSpace(s.Query) == "" {
		return nil, errors.New("system_of_record.query: empty")
	}
	switch s.Driver {
	case "postgres":
		return openPostgres(ctx, dsn, s.Query)
	case "sqlite":
		return openSQLite(ctx, dsn, s.Query)
	}
	return nil, fmt.Errorf("system_of_record.driver: %q is not postgres or sqlite", s.Driver)
}

// Describe names the system of record without its secrets (for plans and
// errors): "postgres 127.0.0.1:5432/test" or "sqlite /path/payments.db".
func Describe(s config.SystemOfRecord) string {
	if s.DSNEnv != "" {
		return s.Driver + " $" + s.DSNEnv
	}
	return s.Driver + " " + config.RedactURL(s.DSN)
}

// Placeholders rewrites the query's parameter for the driver, so a policy
// may write either $1 (PostgreSQL's style) or ? (SQLite's) for the key: for
// PostgreSQL every ? outside quotes becomes $1; for SQLite $1 is already a
// valid parameter (SQLite numbers $NNN parameters by position). Text in
// single or double quotes is left alone.
func Placeholders(query, driver string) string {
	if driver != "postgres" {
		return query
	}
	var b strings.Builder
	var quote rune
	for _, r := range query {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '?':
			b.WriteString("$1")
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

type postgres struct {
	conn  *pgx.Conn
	query string
	where string
}

func openPostgres(ctx context.Context, dsn, query string) (Lookup, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("system of record (postgres): bad dsn: %s", config.RedactError(err.Error(), dsn))
	}
	where := fmt.Sprintf("postgres %s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("system of record %s: unreachable: %s", where, config.RedactError(err.Error(), dsn))
	}
	return &postgres{conn: conn, query: Placeholders(query, "postgres"), where: where}, nil
}

// Committed sends the query once per key in batches of BatchSize: one round
// trip per batch.
func (p *postgres) Committed(ctx context.Context, keys []string) (map[string]bool, error) {
	out := make(map[string]bool, len(keys))
	for start := 0; start < len(keys); start += BatchSize {
		end := min(start+BatchSize, len(keys))
		b := &pgx.Batch{}
		for _, k := range keys[start:end] {
			b.Queue(p.query, k)
		}
		br := p.conn.SendBatch(ctx, b)
		for _, k := range keys[start:end] {
			rows, err := br.Query()
			if err != nil {
				br.Close()
				return nil, fmt.Errorf("system of record %s: query for key %s: %v", p.where, k, err)
			}
			found := rows.Next()
			rows.Close()
			if err := rows.Err(); err != nil {
				br.Close()
				return nil, fmt.Errorf("system of record %s: query for key %s: %v", p.where, k, err)
			}
			out[k] = found
		}
		if err := br.Close(); err != nil {
			return nil, fmt.Errorf("system of record %s: %v", p.where, err)
		}
	}
	return out, nil
}

func (p *postgres) Close() error { return p.conn.Close(context.Background()) }

type sqlite struct {
	db    *sql.DB
	query string
	where string
}

// openSQLite opens the file read-only: a missing file is an error (never an
// empty new database that answers "not applied" for everything).
func openSQLite(ctx context.Context, dsn, query string) (Lookup, error) {
	path := strings.TrimPrefix(dsn, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	where := "sqlite " + path
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("system of record %s: %v", where, errors.Unwrap(err))
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("system of record %s: %v", where, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("system of record %s: %v", where, err)
	}
	return &sqlite{db: db, query: query, where: where}, nil
}

// Committed runs the query for every key inside one read transaction, so
// all answers come from one consistent snapshot.
func (s *sqlite) Committed(ctx context.Context, keys []string) (map[string]bool, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("system of record %s: %v", s.where, err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, s.query)
	if err != nil {
		return nil, fmt.Errorf("system of record %s: query: %v", s.where, err)
	}
	defer stmt.Close()
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		rows, err := stmt.QueryContext(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("system of record %s: query for key %s: %v", s.where, k, err)
		}
		found := rows.Next()
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("system of record %s: query for key %s: %v", s.where, k, err)
		}
		out[k] = found
	}
	return out, nil
}

func (s *sqlite) Close() error { return s.db.Close() }
