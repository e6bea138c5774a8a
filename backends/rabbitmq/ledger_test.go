package rabbitmq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/redrive"
)

func postgresDSN() string {
	if v := os.Getenv("BERTH_TEST_POSTGRES_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// eachLedgerStore runs test against a ledger in SQLite (a file of the
// test's own) and one in PostgreSQL (skipped when it is unreachable,
// unless BERTH_TEST_REQUIRE_SERVICES is set), each with a context bounded
// by timeout.
func eachLedgerStore(t *testing.T, timeout time.Duration, test func(t *testing.T, ctx context.Context, l *Ledger)) {
	stores := map[string]string{
		"sqlite":   filepath.Join(t.TempDir(), "l.db"),
		"postgres": postgresDSN(),
	}
	for name, dsn := range stores {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			l, err := OpenLedger(ctx, dsn)
			if err != nil {
				if name == "postgres" && os.Getenv("BERTH_TEST_REQUIRE_SERVICES") == "" {
					t.Skipf("PostgreSQL unreachable: %v", err)
				}
				t.Fatal(err)
			}
			defer l.Close()
			test(t, ctx, l)
		})
	}
}

// The ledger behaves the same in PostgreSQL and SQLite: intent, then
// confirmed; a confirmed event is never downgraded by a late write.
func TestLedgerStores(t *testing.T) {
	eachLedgerStore(t, 2*time.Minute, func(t *testing.T, ctx context.Context, l *Ledger) {
		plan := uniq(t, "plan")
		e := func(id, st string) LedgerEntry {
			return LedgerEntry{Plan: plan, EventID: id, Vhost: "/", DLQ: "d-" + plan, Exchange: "x", RoutingKey: "k", State: st}
		}
		var intents []LedgerEntry
		for i := 0; i < 450; i++ { // a chunk larger than a window
			intents = append(intents, e(fmt.Sprintf("ev-%04d", i), StateIntent))
		}
		if err := l.Record(ctx, intents); err != nil {
			t.Fatal(err)
		}
		if err := l.Record(ctx, []LedgerEntry{e(intents[0].EventID, StateConfirmed), e(intents[1].EventID, StateFailed)}); err != nil {
			t.Fatal(err)
		}
		// A late intent must not undo a confirmation.
		if err := l.Record(ctx, []LedgerEntry{e(intents[0].EventID, StateIntent)}); err != nil {
			t.Fatal(err)
		}
		st, err := l.PlanStates(ctx, plan)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 450 || st[intents[0].EventID] != StateConfirmed || st[intents[1].EventID] != StateFailed || st[intents[2].EventID] != StateIntent {
			t.Fatalf("%d states; %q %q %q", len(st), st[intents[0].EventID], st[intents[1].EventID], st[intents[2].EventID])
		}
	})
}

func TestLedgerErrorsHideThePassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := OpenLedger(ctx, "postgres://berth:hunter2-secret@127.0.0.1:1/none?connect_timeout=2")
	if err == nil {
		t.Fatal("opened a ledger on a closed port")
	}
	if strings.Contains(err.Error(), "hunter2-secret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// The checks ask the ledger about the plan's events only: ConfirmedAmong
// returns the confirmed entries of the ids asked (across chunks of ids),
// never an intent, and not the asking plan's own.
func TestLedgerConfirmedAmongReadsOnlyTheAskedEvents(t *testing.T) {
	eachLedgerStore(t, 30*time.Second, func(t *testing.T, ctx context.Context, l *Ledger) {
		other, mine, pfx := uniq(t, "other"), uniq(t, "mine"), uniq(t, "ev")
		var entries []LedgerEntry
		for i := 0; i < 1200; i++ {
			entries = append(entries, LedgerEntry{Plan: other, EventID: fmt.Sprintf("%s-%d", pfx, i), Vhost: "/", DLQ: "d", State: StateConfirmed})
		}
		entries = append(entries,
			LedgerEntry{Plan: other, EventID: pfx + "-intent", Vhost: "/", DLQ: "d", State: StateIntent},
			LedgerEntry{Plan: mine, EventID: pfx + "-mine", Vhost: "/", DLQ: "d", State: StateConfirmed})
		if err := l.Record(ctx, entries); err != nil {
			t.Fatal(err)
		}
		ask := []string{pfx + "-3", pfx + "-intent", pfx + "-mine", pfx + "-absent"}
		for i := 0; i < 600; i++ { // past one chunk of ids
			ask = append(ask, fmt.Sprintf("%s-none-%d", pfx, i))
		}
		ask = append(ask, pfx+"-1199")
		got, err := l.ConfirmedAmong(ctx, ask, mine)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[pfx+"-3"].Plan != other || got[pfx+"-1199"].State != StateConfirmed {
			t.Fatalf("got %d entries %v; want exactly %s-3 and %s-1199", len(got), got, pfx, pfx)
		}
		if all, err := l.ConfirmedAmong(ctx, []string{pfx + "-mine"}, ""); err != nil || len(all) != 1 {
			t.Fatalf("without an excepted plan: %v %v", all, err)
		}
	})
}

// A hash prefix two stored plans share is refused in the words Kafka's
// plan store uses (backends.AmbiguousPlan); one more digit finds the plan.
func TestAmbiguousPlanPrefixAsksForMoreDigits(t *testing.T) {
	ctx := context.Background()
	l, err := OpenLedger(ctx, filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m := redrive.QueueMessage{EventID: "ev-0", Digest: redrive.Digest{}, OriginalQueue: "q", DeathReason: "rejected", Exchange: "x", RoutingKey: "k", Routed: true}
	p, err := redrive.MakeQueuePlan([]redrive.QueueMessage{m}, redrive.QueueSelection{All: true}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster, p.Vhost, p.DLQ = "c", "/", "q.dlq"
	if err := l.PutPlan(ctx, p); err != nil {
		t.Fatal(err)
	}
	good := p.Hash()
	// A row under a hash sharing the good plan's first 8 digits only.
	twin := good[:8] + strings.Repeat("0", 56)
	if twin[8] == good[8] {
		twin = good[:8] + strings.Repeat("1", 56)
	}
	if _, err := l.db.ExecContext(ctx, `INSERT INTO berth_rabbitmq_plans (hash, vhost, dlq, created_at, body) VALUES ($1, '/', 'q.dlq', '2026-11-30T10:00:00Z', '{}')`, twin); err != nil {
		t.Fatal(err)
	}
	_, err = l.Plan(ctx, good[:8])
	if want := "plan " + good[:8] + ": ambiguous, 2 plans match: give more digits"; err == nil || err.Error() != want || !errors.Is(err, backends.ErrAmbiguousPlan) {
		t.Fatalf("shared prefix: %v; want %q", err, want)
	}
	if got, err := l.Plan(ctx, good[:9]); err != nil || got.Hash() != good {
		t.Fatalf("one more digit: %v", err)
	}
}

// A plan larger than a piece of the plan store is stored in pieces, cut
// between characters (event ids of two-, three- and four-byte characters
// straddle every boundary), and read back whole, in both stores; an
// earlier Berth's plan stored whole in one row is still read.
func TestPlanStoredInPieces(t *testing.T) {
	var msgs []redrive.QueueMessage
	for i := 0; len(msgs)*60 < 2*planChunk+planChunk/2; i++ {
		id := strings.Repeat([]string{"é", "€", "😀", "a"}[i%4], 1+i%5) + fmt.Sprint(i)
		msgs = append(msgs, redrive.QueueMessage{Position: i, EventID: id, Digest: redrive.Digest{byte(i)}, OriginalQueue: "q", DeathReason: "rejected", Exchange: "x", RoutingKey: "k", Routed: true})
	}
	p, err := redrive.MakeQueuePlan(msgs, redrive.QueueSelection{All: true}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster, p.Vhost, p.DLQ = "c", "/", fmt.Sprintf("q.dlq.%d", time.Now().UnixNano())
	raw, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 2*planChunk {
		t.Fatalf("the plan is %d bytes: too small to need pieces", len(raw))
	}
	eachLedgerStore(t, 2*time.Minute, func(t *testing.T, ctx context.Context, l *Ledger) {
		if err := l.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := l.PutPlan(ctx, p); err != nil {
			t.Fatalf("storing it again: %v", err)
		}
		var pieces int
		if err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM berth_rabbitmq_plan_chunks WHERE hash = $1`, p.Hash()).Scan(&pieces); err != nil || pieces < 3 {
			t.Fatalf("%d pieces (%v); want 3 or more", pieces, err)
		}
		got, err := l.Plan(ctx, p.Hash()[:16])
		if err != nil {
			t.Fatal(err)
		}
		back, err := got.Encode()
		if err != nil || !bytes.Equal(back, raw) {
			t.Fatalf("read back differs (%v)", err)
		}
		if ok, err := l.HasPlan(ctx, p.Hash()); !ok || err != nil {
			t.Fatalf("HasPlan %v %v", ok, err)
		}
		// Stored whole by an earlier Berth: read from its body.
		old := p
		old.DLQ += ".old"
		whole, err := old.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.db.ExecContext(ctx, `INSERT INTO berth_rabbitmq_plans (hash, vhost, dlq, created_at, body) VALUES ($1, '/', $2, '2026-11-30T10:00:00Z', $3)`, old.Hash(), old.DLQ, string(whole)); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Plan(ctx, old.Hash()); err != nil || got.DLQ != old.DLQ {
			t.Fatalf("a plan stored whole: %v", err)
		}
	})
}
