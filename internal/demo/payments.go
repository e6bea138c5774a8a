package demo

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite" // pure-Go SQLite driver ("sqlite")
)

// paymentEvent is the value of payments records. The idempotency key names
// the capture: a retried or redriven event for the same capture carries the
// same key, so the system of record can say whether it already happened.
type paymentEvent struct {
	EventID        string `json:"eventId"`
	IdempotencyKey string `json:"idempotencyKey"`
	Type           string `json:"type"` // payment.requested or payment.updated
	OrderID        string `json:"orderId"`
	AmountCents    int64  `json:"amountCents"`
	Currency       string `json:"currency"`
	Tenant         string `json:"tenant"`
	EventTime      string `json:"eventTime"`
}

// paymentsDB is the demo's payments system of record (SQLite).
type paymentsDB struct{ db *sql.DB }

const paymentsSchema = `create table if not exists payments(
	idempotency_key TEXT PRIMARY KEY,
	order_id TEXT,
	amount_cents INTEGER,
	status TEXT,
	captured_at TEXT)`

func openPayments(path string) (*paymentsDB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("payments db %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(paymentsSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("payments db %s: %w", path, err)
	}
	return &paymentsDB{db: db}, nil
}

func (p *paymentsDB) Close() error { return p.db.Close() }

// capture records captures in one transaction; a key already captured is
// left alone (the consumer is idempotent). It returns how many were new.
func (p *paymentsDB) capture(ctx context.Context, evs []paymentEvent) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `insert or ignore into payments(idempotency_key, order_id, amount_cents, status, captured_at) values (?, ?, ?, 'captured', ?)`)
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	var n int64
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, ev := range evs {
		res, err := stmt.ExecContext(ctx, ev.IdempotencyKey, ev.OrderID, ev.AmountCents, now)
		if err != nil {
			return 0, err
		}
		c, _ := res.RowsAffected()
		n += c
	}
	return n, tx.Commit()
}

func (d *Demo) producePayment(now time.Time) {
	var ev paymentEvent
	d.mu.Lock()
	// About 5% are follow-ups for a recent order (same key, same capture):
	// a redrive of the earlier event would land behind them.
	if len(d.recent) > 0 && rand.Float64() < 0.05 {
		orderID := d.recent[rand.IntN(len(d.recent))]
		d.mu.Unlock()
		ev = paymentEvent{Type: "payment.updated", OrderID: orderID, AmountCents: 1000 + rand.Int64N(50000)}
	} else {
		orderID := d.nextOrderID()
		if len(d.recent) < 64 {
			d.recent = append(d.recent, orderID)
		} else {
			d.recent[rand.IntN(len(d.recent))] = orderID
		}
		d.mu.Unlock()
		ev = paymentEvent{Type: "payment.requested", OrderID: orderID, AmountCents: 1000 + rand.Int64N(50000)}
		if rand.Float64() < 0.01 {
			ev.AmountCents = -rand.Int64N(5000) // fails validation every time
		}
	}
	ev.EventID = newEventID()
	ev.IdempotencyKey = "capture:" + ev.OrderID
	ev.Currency = "GBP"
	ev.Tenant = pickTenant()
	ev.EventTime = now.UTC().Format(time.RFC3339Nano)
	v, _ := json.Marshal(ev)
	d.send(d.producer, &kgo.Record{Topic: TopicPayments, Key: []byte("order:" + ev.OrderID), Value: v, Timestamp: now}, nil)
}

// payments-capture captures each payment in the system of record, then posts
// it to the ledger. Failures before the capture (validation; PSP timeouts)
// dead-letter with nothing applied; a ledger failure after the capture
// committed dead-letters a half-applied payment: redriving it would capture
// again unless the system of record is checked. Order of work per batch:
// SQLite transaction, dead letters, offset commit.
func (d *Demo) startPayments() error {
	cl, err := d.group(GroupPayments, TopicPayments, kgo.DisableAutoCommit())
	if err != nil {
		return err
	}
	d.spawn(func() {
		for d.ctx.Err() == nil {
			fs := cl.PollFetches(d.ctx)
			fs.EachError(func(t string, p int32, err error) { d.logErr(GroupPayments, err) })
			var captures []paymentEvent
			var dead []*kgo.Record
			half := 0
			fs.EachRecord(func(r *kgo.Record) {
				var ev paymentEvent
				switch {
				case json.Unmarshal(r.Value, &ev) != nil || ev.IdempotencyKey == "":
					dead = append(dead, deadLetter(r, TopicPaymentsDLT, GroupPayments,
						failure{"org.springframework.kafka.support.serializer.DeserializationException", "failed to deserialize payment event"}))
				case ev.AmountCents <= 0:
					dead = append(dead, deadLetter(r, TopicPaymentsDLT, GroupPayments, failAmount(ev.AmountCents)))
				case rand.Float64() < 0.02:
					dead = append(dead, deadLetter(r, TopicPaymentsDLT, GroupPayments, failPSPTimeout))
				default:
					captures = append(captures, ev)
					if rand.Float64() < 0.03 {
						half++
						dead = append(dead, deadLetter(r, TopicPaymentsDLT, GroupPayments, failLedger503))
					}
				}
			})
			for {
				n, err := d.payments.capture(d.ctx, captures)
				if err == nil {
					d.payCaptured.Add(n)
					break
				}
				d.logErr("payments db", err)
				select {
				case <-d.ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
			if !d.publishDead(dead) {
				return
			}
			d.payDLT.Add(int64(len(dead)))
			d.payHalf.Add(int64(half))
			d.commit(cl, fs, GroupPayments)
		}
	})
	return nil
}
