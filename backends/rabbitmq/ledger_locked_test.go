package rabbitmq

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The console opens the SQLite store for each step (its plans page's
// refresh, a status) while a run it started records chunks through a
// handle of its own, and a `berth redrive` in another terminal may do the
// same: opening and writing from several handles at once waits for the
// others, never fails with "database is locked".
func TestSQLiteStoreOpenedAndWrittenConcurrently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := filepath.Join(t.TempDir(), "store.db")
	const workers, rounds = 4, 30
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				err := func() error {
					l, err := OpenLedger(ctx, dsn)
					if err != nil {
						return fmt.Errorf("open: %w", err)
					}
					defer l.Close()
					plan := fmt.Sprintf("plan-%d", w)
					var es []LedgerEntry
					for i := 0; i < 50; i++ {
						es = append(es, LedgerEntry{Plan: plan, EventID: fmt.Sprintf("ev-%d-%d", r, i), Vhost: "/", DLQ: "d", Exchange: "x", RoutingKey: "k", State: StateIntent})
					}
					if err := l.Record(ctx, es); err != nil {
						return fmt.Errorf("record: %w", err)
					}
					if _, err := l.PlanStates(ctx, plan); err != nil {
						return fmt.Errorf("states: %w", err)
					}
					return nil
				}()
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n < 5 {
			t.Error(err)
		}
		n++
	}
	if n > 0 {
		t.Fatalf("%d of %d steps failed", n, workers*rounds)
	}
}
