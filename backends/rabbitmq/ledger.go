package rabbitmq

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// Ledger records RabbitMQ redrives: an intent row before a message is
// published, its completion after the publisher confirm. A DLQ message is
// acked only after its completion row is written, so after a crash:
//   - confirmed: the message reached its target; the DLQ copy is a leftover
//     (acked without a second publish);
//   - intent: it may or may not have arrived; it is sent again (consumers
//     deduplicate by message_id, which is the event id);
//   - no row: it was never sent.
//
// It lives in PostgreSQL or an SQLite file (redrive.store_dsn), shared by
// every operator attached to the same store.
type Ledger struct {
	db     *sql.DB
	driver string
}

// Ledger states.
const (
	StateIntent    = "intent"
	StateConfirmed = "confirmed"
	StateFailed    = "failed"
)

// OpenLedger opens (and creates the table of) the ledger at dsn:
// postgres:// or postgresql:// URLs, else an SQLite file path ("sqlite:"
// prefix optional). Errors never quote the DSN's password.
func OpenLedger(ctx context.Context, dsn string) (*Ledger, error) {
	if dsn == "" {
		return nil, errors.New("redrive.store_dsn: required for RabbitMQ redrive (a postgres:// URL or an SQLite file)")
	}
	driver, src := "sqlite", sqliteDSN(strings.TrimPrefix(dsn, "sqlite:"))
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		driver, src = "pgx", dsn
	}
	db, err := sql.Open(driver, src)
	if err != nil {
		return nil, fmt.Errorf("redrive.store_dsn %s: %s", config.RedactURL(dsn), config.RedactError(err.Error(), dsn))
	}
	l := &Ledger{db: db, driver: driver}
	if driver == "sqlite" {
		// One writer per handle; WAL lets readers (status) run alongside.
		db.SetMaxOpenConns(1)
	}
	err = createSchema(ctx, db)
	// Two handles opening a new store file at once can each hold a read
	// lock while asking for the write lock that turns the file to WAL and
	// creates the tables: SQLite answers one of them "database is locked"
	// at once (its busy timeout does not apply where waiting could
	// deadlock) and expects the step to be tried again. Only that answer,
	// only at open, and within the command's context.
	for attempt := 1; driver == "sqlite" && isSQLiteBusy(err) && attempt <= 50 && ctx.Err() == nil; attempt++ {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
		err = createSchema(ctx, db)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("redrive.store_dsn %s: %s", config.RedactURL(dsn), config.RedactError(err.Error(), dsn))
	}
	return l, nil
}

// createSchema creates the ledger's table and indexes when missing (the
// first statement on a new connection also applies sqliteSettings).
func createSchema(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS berth_rabbitmq_ledger (
		plan        TEXT NOT NULL,
		event_id    TEXT NOT NULL,
		vhost       TEXT NOT NULL,
		dlq         TEXT NOT NULL,
		exchange    TEXT NOT NULL,
		routing_key TEXT NOT NULL,
		state       TEXT NOT NULL,
		detail      TEXT NOT NULL DEFAULT '',
		updated_at  TEXT NOT NULL,
		PRIMARY KEY (plan, event_id))`)
	if err == nil {
		_, err = db.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS berth_rabbitmq_ledger_dlq ON berth_rabbitmq_ledger (vhost, dlq, event_id)`)
	}
	if err == nil {
		// ConfirmedAmong looks events up by id across every DLQ and plan.
		_, err = db.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS berth_rabbitmq_ledger_event ON berth_rabbitmq_ledger (event_id, state)`)
	}
	return err
}

// isSQLiteBusy reports SQLite's SQLITE_BUSY (5, with any extended code).
func isSQLiteBusy(err error) bool {
	var e interface{ Code() int }
	return errors.As(err, &e) && e.Code()&0xff == 5
}

// sqliteDSN is path with the settings every connection to the store
// needs, applied by the driver as it opens each one (in this order: the
// busy timeout first), not by statements on whichever connection the pool
// hands out first. Several handles share the file (the console opens the
// store for each step while the run it started records chunks through its
// own, and another terminal may run `berth redrive`): with the journal
// mode set before the busy timeout, an open that met another handle's
// lock failed at once with "database is locked". Write transactions begin
// IMMEDIATE: a deferred one that had read would fail the same way, without
// waiting, when another handle committed before it wrote.
func sqliteDSN(path string) string {
	if strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		// A URI or a path with its own parameters: the driver reads
		// them; ours are added to them.
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		return path + sep + sqliteSettings
	}
	return path + "?" + sqliteSettings
}

// sqliteSettings are the store's per-connection settings (sqliteDSN).
// A handle waits up to 30 s for another's write (each commit is synced to
// disk): on a loaded machine 5 s was once not enough for four handles
// writing at once, and a redrive's ledger write that gave up would stop
// the run; a wait beyond the command's --timeout is still cut by it.
const sqliteSettings = "_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"

// Close closes the store.
func (l *Ledger) Close() error { return l.db.Close() }

// LedgerEntry is one ledger row.
type LedgerEntry struct {
	Plan       string    `json:"plan"`
	EventID    string    `json:"event_id"`
	Vhost      string    `json:"vhost"`
	DLQ        string    `json:"dlq"`
	Exchange   string    `json:"exchange"`
	RoutingKey string    `json:"routing_key"`
	State      string    `json:"state"`
	Detail     string    `json:"detail,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// PlanStates returns every event's state in a plan.
func (l *Ledger) PlanStates(ctx context.Context, plan string) (map[string]string, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT event_id, state FROM berth_rabbitmq_ledger WHERE plan = $1`, plan)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		// The state's own constant: a run resumed over a million events
		// holds one copy of each state, not a million.
		for _, known := range []string{StateIntent, StateConfirmed, StateFailed} {
			if st == known {
				st = known
			}
		}
		out[id] = st
	}
	return out, rows.Err()
}

// PlanStateCounts counts a plan's events per state (what status shows,
// without holding a row per event).
func (l *Ledger) PlanStateCounts(ctx context.Context, plan string) (map[string]int, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT state, count(*) FROM berth_rabbitmq_ledger WHERE plan = $1 GROUP BY state`, plan)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		out[st] = n
	}
	return out, rows.Err()
}

// Entries lists a plan's rows (every plan when plan is "").
func (l *Ledger) Entries(ctx context.Context, plan string) ([]LedgerEntry, error) {
	q := `SELECT ` + entryColumns + ` FROM berth_rabbitmq_ledger`
	var args []any
	if plan != "" {
		q += ` WHERE plan = $1`
		args = append(args, plan)
	}
	rows, err := l.db.QueryContext(ctx, q+` ORDER BY updated_at, event_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return scanEntries(rows)
}

// entryColumns are a LedgerEntry's columns, in scanEntries' order.
const entryColumns = `plan, event_id, vhost, dlq, exchange, routing_key, state, detail, updated_at`

// scanEntries reads rows of entryColumns and closes them.
func scanEntries(rows *sql.Rows) ([]LedgerEntry, error) {
	defer rows.Close()
	var out []LedgerEntry
	for rows.Next() {
		var e LedgerEntry
		var at string
		if err := rows.Scan(&e.Plan, &e.EventID, &e.Vhost, &e.DLQ, &e.Exchange, &e.RoutingKey, &e.State, &e.Detail, &at); err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		e.UpdatedAt, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return out, nil
}

// Record writes entries in one transaction. A confirmed row is never
// downgraded (a late intent or failure for an event that already arrived
// changes nothing).
func (l *Ledger) Record(ctx context.Context, entries []LedgerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if l.driver == "sqlite" {
		tx, err := l.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		defer tx.Rollback()
		if err := recordEach(ctx, tx, entries, now); err != nil {
			return err
		}
		return commit(tx)
	}
	// PostgreSQL: one statement for the whole chunk, its columns as arrays,
	// which is a transaction of its own (no BEGIN and COMMIT around it: one
	// round trip, not three; a run records twice a chunk, and under load
	// every round trip waits to be scheduled). The text never changes, so
	// PostgreSQL parses and plans it once per connection; a multi-row
	// VALUES list with thousands of numbered parameters was parsed anew on
	// every chunk (a 500-entry chunk took 60 ms to record that way, 34 ms
	// this way, in the same scale run).
	cols := make([][]string, 8)
	for i := range cols {
		cols[i] = make([]string, len(entries))
	}
	for i, e := range entries {
		for c, v := range []string{e.Plan, e.EventID, e.Vhost, e.DLQ, e.Exchange, e.RoutingKey, e.State, e.Detail} {
			cols[c][i] = v
		}
	}
	if _, err := l.db.ExecContext(ctx, upsertArrays, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], now); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// upsertArrays is Record's PostgreSQL statement: one row per element of
// its arrays.
const upsertArrays = `INSERT INTO berth_rabbitmq_ledger
	(plan, event_id, vhost, dlq, exchange, routing_key, state, detail, updated_at)
	SELECT p, e, v, q, x, k, s, d, $9 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) AS t(p, e, v, q, x, k, s, d)
	ON CONFLICT (plan, event_id) DO UPDATE SET state = excluded.state, detail = excluded.detail, updated_at = excluded.updated_at
	WHERE berth_rabbitmq_ledger.state <> 'confirmed'`

const upsertOne = `INSERT INTO berth_rabbitmq_ledger
	(plan, event_id, vhost, dlq, exchange, routing_key, state, detail, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (plan, event_id) DO UPDATE SET state = excluded.state, detail = excluded.detail, updated_at = excluded.updated_at
	WHERE berth_rabbitmq_ledger.state <> 'confirmed'`

// recordEach writes entries with one prepared single-row statement. SQLite
// runs in-process, so there is no round trip to save, and a multi-row
// statement with thousands of numbered parameters costs SQLite time
// quadratic in their number to parse and bind (it was half of a redrive's
// CPU at a window of 500).
func recordEach(ctx context.Context, tx *sql.Tx, entries []LedgerEntry, now string) error {
	st, err := tx.PrepareContext(ctx, upsertOne)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	defer st.Close()
	for _, e := range entries {
		if _, err := st.ExecContext(ctx, e.Plan, e.EventID, e.Vhost, e.DLQ, e.Exchange, e.RoutingKey, e.State, e.Detail, now); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
	}
	return nil
}

func commit(tx *sql.Tx) error {
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// Signatures live beside plans in the same store, so an approver at another
// terminal sees and signs the same plan. They are never part of the plan's
// hashed content.
const signaturesTable = `CREATE TABLE IF NOT EXISTS berth_rabbitmq_signatures (
		plan        TEXT NOT NULL,
		role        TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		armored     TEXT NOT NULL,
		signed_at   TEXT NOT NULL,
		PRIMARY KEY (plan, role, fingerprint))`

// AddSignature stores a signature (author or approval) over a plan hash; the
// same key signing again replaces its earlier signature.
func (l *Ledger) AddSignature(ctx context.Context, s approval.Signature) error {
	if _, err := l.db.ExecContext(ctx, signaturesTable); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	_, err := l.db.ExecContext(ctx, `INSERT INTO berth_rabbitmq_signatures (plan, role, fingerprint, armored, signed_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (plan, role, fingerprint) DO UPDATE SET armored = excluded.armored, signed_at = excluded.signed_at`,
		s.PlanHash, string(s.Role), s.Fingerprint, s.Armored, s.SignedAt.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// Signatures returns a plan's author signature (nil when none) and approvals.
func (l *Ledger) Signatures(ctx context.Context, plan string) (*approval.Signature, []approval.Signature, error) {
	if _, err := l.db.ExecContext(ctx, signaturesTable); err != nil {
		return nil, nil, fmt.Errorf("ledger: %w", err)
	}
	rows, err := l.db.QueryContext(ctx, `SELECT role, fingerprint, armored, signed_at FROM berth_rabbitmq_signatures WHERE plan = $1 ORDER BY signed_at`, plan)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: %w", err)
	}
	defer rows.Close()
	var author *approval.Signature
	var approvals []approval.Signature
	for rows.Next() {
		var s approval.Signature
		var role, at string
		if err := rows.Scan(&role, &s.Fingerprint, &s.Armored, &at); err != nil {
			return nil, nil, fmt.Errorf("ledger: %w", err)
		}
		s.Role, s.PlanHash = approval.Role(role), plan
		s.SignedAt, _ = time.Parse(time.RFC3339Nano, at)
		if s.Role == approval.RoleAuthor {
			a := s
			author = &a
		} else {
			approvals = append(approvals, s)
		}
	}
	return author, approvals, rows.Err()
}

// RedrivenAmong says, for each of the given messages' event ids the
// ledger has confirmed (from any DLQ and plan: an event redriven from
// another DLQ was redriven all the same, as the Kafka ledger check matches
// event ids globally), where from and by which plan.
func (l *Ledger) RedrivenAmong(ctx context.Context, msgs []Message) (map[string]string, error) {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.EventID
	}
	return l.RedrivenAmongIDs(ctx, ids)
}

// RedrivenAmongIDs is RedrivenAmong by event id (a plan keeps ids, not
// messages).
func (l *Ledger) RedrivenAmongIDs(ctx context.Context, ids []string) (map[string]string, error) {
	done, err := l.ConfirmedAmong(ctx, ids, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(done))
	for id, e := range done {
		out[id] = fmt.Sprintf("redriven from %s (vhost %s) by plan %s", e.DLQ, e.Vhost, redrive.ShortHash(e.Plan))
	}
	return out, nil
}

// ConfirmedAmong returns the confirmed ledger entries of the given event
// ids only, from any DLQ and any plan but exceptPlan ("" for none); one per
// id (which, when several plans confirmed it, is unspecified). A look-up
// costs what the plan needs, not what the ledger ever held.
func (l *Ledger) ConfirmedAmong(ctx context.Context, ids []string, exceptPlan string) (map[string]LedgerEntry, error) {
	out := map[string]LedgerEntry{}
	const chunk = 500 // well under SQLite's and PostgreSQL's parameter limits
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		args := []any{StateConfirmed, exceptPlan}
		marks := make([]string, len(part))
		for i, id := range part {
			args = append(args, id)
			marks[i] = fmt.Sprintf("$%d", i+3)
		}
		rows, err := l.db.QueryContext(ctx, `SELECT `+entryColumns+` FROM berth_rabbitmq_ledger
			WHERE state = $1 AND plan <> $2 AND event_id IN (`+strings.Join(marks, ",")+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		es, err := scanEntries(rows)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			out[e.EventID] = e
		}
	}
	return out, nil
}

// Plans are stored beside the ledger too, so any operator using the same
// store finds a plan by a hash prefix (approve, execute, status), as Kafka
// plans are found in the cluster's plan store.
const plansTable = `CREATE TABLE IF NOT EXISTS berth_rabbitmq_plans (
		hash       TEXT PRIMARY KEY,
		vhost      TEXT NOT NULL,
		dlq        TEXT NOT NULL,
		created_at TEXT NOT NULL,
		body       TEXT NOT NULL)`

// planChunksTable holds a stored plan file in pieces of about planChunk
// bytes, in order: a million-message plan is ~95 MB, which as one value
// would be held whole (twice: as a string and in the driver's buffers)
// when it is written and when it is read. Such a plan's row in
// berth_rabbitmq_plans has an empty body; a body there (a plan stored by
// an earlier Berth) is the whole file.
const planChunksTable = `CREATE TABLE IF NOT EXISTS berth_rabbitmq_plan_chunks (
		hash TEXT NOT NULL,
		seq  INTEGER NOT NULL,
		body TEXT NOT NULL,
		PRIMARY KEY (hash, seq))`

// planChunk is the size of a stored plan's pieces.
const planChunk = 1 << 20

func (l *Ledger) planTables(ctx context.Context) error {
	for _, t := range []string{plansTable, planChunksTable} {
		if _, err := l.db.ExecContext(ctx, t); err != nil {
			return fmt.Errorf("plan store: %w", err)
		}
	}
	return nil
}

// PutPlan stores a plan under its hash (storing it again changes nothing),
// as its v2 plan file, written in pieces as it is encoded, in one
// transaction: a plan is stored whole or not at all.
func (l *Ledger) PutPlan(ctx context.Context, p redrive.QueuePlan) error {
	if err := l.planTables(ctx); err != nil {
		return err
	}
	hash := p.Hash()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("plan store: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO berth_rabbitmq_plans (hash, vhost, dlq, created_at, body) VALUES ($1, $2, $3, $4, '')
		ON CONFLICT (hash) DO NOTHING`, hash, p.Vhost, p.DLQ, p.CreatedAt.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("plan store: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return nil // stored already
	}
	w := &chunkWriter{put: func(seq int, body string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO berth_rabbitmq_plan_chunks (hash, seq, body) VALUES ($1, $2, $3)`, hash, seq, body)
		return err
	}}
	if err := p.EncodeTo(w); err != nil {
		return fmt.Errorf("plan store: %w", err)
	}
	if err := w.flush(true); err != nil {
		return fmt.Errorf("plan store: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("plan store: %w", err)
	}
	return nil
}

// chunkWriter cuts what is written to it into pieces of about planChunk
// bytes, each ending where a character does (a TEXT value must be valid
// UTF-8, and a plan file holds event ids as they are).
type chunkWriter struct {
	put func(seq int, body string) error
	buf []byte
	seq int
}

func (w *chunkWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	if len(w.buf) >= planChunk {
		if err := w.flush(false); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flush stores what is buffered up to its last whole character (all of it
// when last).
func (w *chunkWriter) flush(last bool) error {
	n := len(w.buf)
	if !last {
		// Back to the start of the last character when it is incomplete.
		for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
			if utf8.RuneStart(w.buf[i]) {
				if !utf8.FullRune(w.buf[i:]) {
					n = i
				}
				break
			}
		}
	}
	if n == 0 {
		return nil
	}
	if err := w.put(w.seq, string(w.buf[:n])); err != nil {
		return err
	}
	w.seq++
	w.buf = append(w.buf[:0], w.buf[n:]...)
	return nil
}

// ErrNoPlan is returned when no stored plan matches a hash prefix: the
// same value as Kafka's, worded by backends.NoPlan.
var ErrNoPlan = backends.ErrNoPlan

// Plan finds a stored plan by a hash prefix (8+ hex digits); its content is
// checked against its hash, as for a file. A stored plan that cannot be
// used (a v1 plan, an edited one) is an error naming it.
func (l *Ledger) Plan(ctx context.Context, prefix string) (redrive.QueuePlan, error) {
	stored, err := l.storedPlans(ctx, strings.ToLower(prefix))
	if err != nil {
		return redrive.QueuePlan{}, err
	}
	switch {
	case len(stored) > 1:
		return redrive.QueuePlan{}, backends.AmbiguousPlan(prefix, len(stored))
	case len(stored) == 0:
		return redrive.QueuePlan{}, backends.NoPlan(prefix, "table berth_rabbitmq_plans of the redrive store")
	}
	return l.decodeStored(ctx, stored[0])
}

// HasPlan reports whether the plan with this hash is stored, without
// reading it.
func (l *Ledger) HasPlan(ctx context.Context, hash string) (bool, error) {
	if err := l.planTables(ctx); err != nil {
		return false, err
	}
	var one int
	err := l.db.QueryRowContext(ctx, `SELECT 1 FROM berth_rabbitmq_plans WHERE hash = $1`, hash).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("plan store: %w", err)
	}
	return true, nil
}

// Plans lists every usable stored plan, oldest first, and why each other
// one was skipped: one bad row blocks only itself.
func (l *Ledger) Plans(ctx context.Context) ([]redrive.QueuePlan, []error, error) {
	stored, err := l.storedPlans(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	var out []redrive.QueuePlan
	var bad []error
	for _, sp := range stored {
		p, err := l.decodeStored(ctx, sp)
		var pe *planError
		switch {
		case errors.As(err, &pe):
			bad = append(bad, err)
		case err != nil:
			return nil, nil, err
		default:
			out = append(out, p)
		}
	}
	return out, bad, nil
}

// storedPlan is a plan's row: its body, or "" when it is stored in pieces.
type storedPlan struct{ hash, body string }

// storedPlans are the rows of the plans whose hash starts with prefix,
// oldest first, read before any plan is (SQLite has one connection).
func (l *Ledger) storedPlans(ctx context.Context, prefix string) ([]storedPlan, error) {
	if err := l.planTables(ctx); err != nil {
		return nil, err
	}
	rows, err := l.db.QueryContext(ctx, `SELECT hash, body FROM berth_rabbitmq_plans WHERE hash LIKE $1 ORDER BY created_at, hash`, prefix+"%")
	if err != nil {
		return nil, fmt.Errorf("plan store: %w", err)
	}
	defer rows.Close()
	var out []storedPlan
	for rows.Next() {
		var sp storedPlan
		if err := rows.Scan(&sp.hash, &sp.body); err != nil {
			return nil, fmt.Errorf("plan store: %w", err)
		}
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("plan store: %w", err)
	}
	return out, nil
}

// planError is a stored plan that cannot be used: it blocks only itself.
type planError struct{ err error }

func (e *planError) Error() string { return e.err.Error() }
func (e *planError) Unwrap() error { return e.err }

// decodeStored reads a stored plan, its pieces streamed from the store,
// and checks it against its hash.
func (l *Ledger) decodeStored(ctx context.Context, sp storedPlan) (redrive.QueuePlan, error) {
	var r io.Reader = strings.NewReader(sp.body)
	var chunks *chunkReader
	if sp.body == "" {
		// The plan's length first (read apart: SQLite has one connection),
		// so that its records are allocated once.
		var size sql.NullInt64
		if err := l.db.QueryRowContext(ctx, `SELECT sum(length(body)) FROM berth_rabbitmq_plan_chunks WHERE hash = $1`, sp.hash).Scan(&size); err != nil {
			return redrive.QueuePlan{}, fmt.Errorf("plan store: %w", err)
		}
		rows, err := l.db.QueryContext(ctx, `SELECT body FROM berth_rabbitmq_plan_chunks WHERE hash = $1 ORDER BY seq`, sp.hash)
		if err != nil {
			return redrive.QueuePlan{}, fmt.Errorf("plan store: %w", err)
		}
		defer rows.Close()
		chunks = &chunkReader{rows: rows, size: size.Int64}
		r = chunks
	}
	p, err := redrive.DecodeQueuePlanFrom(r)
	switch {
	case chunks != nil && chunks.err != nil:
		return redrive.QueuePlan{}, fmt.Errorf("plan store: plan %s: %w", redrive.ShortHash(sp.hash), chunks.err)
	case err != nil:
		return redrive.QueuePlan{}, &planError{fmt.Errorf("plan store: plan %s: %w", redrive.ShortHash(sp.hash), err)}
	case p.Hash() != sp.hash:
		return redrive.QueuePlan{}, &planError{fmt.Errorf("plan store: plan %s: %w", redrive.ShortHash(sp.hash), ErrPlanEdited)}
	}
	return p, nil
}

// chunkReader reads a plan's pieces in order, a row at a time.
type chunkReader struct {
	rows *sql.Rows
	cur  string
	err  error // the store's, not the plan's
	// size is the plan's length (in characters on PostgreSQL: near
	// enough for the records to be allocated once).
	size int64
}

// Size is the plan's length, so its records are allocated once.
func (c *chunkReader) Size() int64 { return c.size }

func (c *chunkReader) Read(b []byte) (int, error) {
	for c.cur == "" {
		if !c.rows.Next() {
			if err := c.rows.Err(); err != nil {
				c.err = err
				return 0, err
			}
			return 0, io.EOF
		}
		if err := c.rows.Scan(&c.cur); err != nil {
			c.err = err
			return 0, err
		}
	}
	n := copy(b, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}
