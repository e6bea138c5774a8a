package demo

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/internal/config"
)

// poll calls cond until it returns true or the deadline passes.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
	}
}

func header(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

func TestWorkload(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := bundled.Start(ctx, bundled.Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, err := Start(ctx, Options{Bootstrap: b.Addrs(), DataDir: dir, Rate: 400})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	committed := func(group string) map[int32]int64 {
		out := map[int32]int64{}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return out
		}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == TopicOrders && o.Err == nil {
				out[o.Partition] = o.At
			}
		})
		return out
	}

	t.Run("fraud-monitor stuck on one partition", func(t *testing.T) {
		var stuck *Stuck
		poll(t, 15*time.Second, "fraud-monitor hits the poison record", func() bool {
			stuck = d.Status(ctx).FraudStuck
			return stuck != nil
		})
		if stuck.Partition != PoisonPartition {
			t.Fatalf("stuck on partition %d, want %d", stuck.Partition, PoisonPartition)
		}
		var before map[int32]int64
		poll(t, 10*time.Second, "fraud-monitor commits up to the poison record", func() bool {
			before = committed(GroupFraud)
			return before[PoisonPartition] == stuck.Offset && len(before) == 24
		})
		poll(t, 15*time.Second, "fraud-monitor advances on the other 23 partitions", func() bool {
			now := committed(GroupFraud)
			if now[PoisonPartition] != stuck.Offset {
				t.Fatalf("poison partition committed %d, moved off the poison at %d", now[PoisonPartition], stuck.Offset)
			}
			advanced := 0
			for p, o := range now {
				if p != PoisonPartition && o > before[p] {
					advanced++
				}
			}
			return advanced == 23
		})
		ends, err := adm.ListEndOffsets(ctx, TopicOrders)
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := ends.Lookup(TopicOrders, PoisonPartition); e.Offset <= stuck.Offset+1 {
			t.Errorf("no records behind the poison record (end %d, poison %d)", e.Offset, stuck.Offset)
		}
	})

	t.Run("sales-analytics falls behind, email-notifier keeps up", func(t *testing.T) {
		lag := func(g string) int64 {
			l, err := adm.Lag(ctx, g)
			gl, ok := l[g]
			if err != nil || !ok || gl.Error() != nil {
				return -1
			}
			return gl.Lag.Total()
		}
		var first int64
		poll(t, 10*time.Second, "sales-analytics has lag", func() bool { first = lag(GroupSales); return first > 0 })
		// At 60% of 400/s the lag grows by about 160 records a second.
		poll(t, 15*time.Second, "sales-analytics lag grows", func() bool { return lag(GroupSales) > first+400 })
		// email-notifier commits once a second: keeping up means its lag
		// comes back within about a second of production (400 records).
		poll(t, 10*time.Second, "email-notifier keeps up", func() bool { l := lag(GroupEmail); return l >= 0 && l <= 400 })
		if l := lag(GroupSales); l < first+400 {
			t.Errorf("sales-analytics caught up (lag %d)", l)
		}
	})

	t.Run("orders-by-tenant has one hot partition", func(t *testing.T) {
		var counts []int64
		poll(t, 10*time.Second, "orders-by-tenant traffic", func() bool {
			ends, err := adm.ListEndOffsets(ctx, TopicOrdersByTenant)
			if err != nil {
				return false
			}
			counts = counts[:0]
			var total int64
			ends.Each(func(o kadm.ListedOffset) { counts = append(counts, o.Offset); total += o.Offset })
			return total > 600
		})
		slices.Sort(counts)
		hot, median := counts[len(counts)-1], counts[len(counts)/2]
		if median == 0 || hot < 4*median {
			t.Errorf("hot partition %d records vs median %d: want a clearly hot partition", hot, median)
		}
	})

	t.Run("dead letters carry Spring headers and half-applied payments are captured", func(t *testing.T) {
		dlt, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics(TopicPaymentsDLT, TopicShipmentDLT),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer dlt.Close()
		db, err := sql.Open("sqlite", PaymentsDB(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		captured := func(key string) bool {
			var one int
			return db.QueryRowContext(ctx, strings.ReplaceAll(CapturedQuery, "?", "'"+key+"'")).Scan(&one) == nil
		}
		seen := map[string]bool{}
		deadline := time.Now().Add(2 * time.Minute)
		for !(seen["shipment transient"] && seen["shipment permanent"] && seen["payment after capture"] && seen["payment before capture"]) {
			if time.Now().After(deadline) {
				t.Fatalf("dead-letter kinds seen within 2 minutes: %v", seen)
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := dlt.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				topic := string(header(r, "kafka_dlt-original-topic"))
				part, off, ts := header(r, "kafka_dlt-original-partition"), header(r, "kafka_dlt-original-offset"), header(r, "kafka_dlt-original-timestamp")
				if len(part) != 4 || len(off) != 8 || len(ts) != 8 {
					t.Fatalf("%s record with header lengths partition %d offset %d timestamp %d", r.Topic, len(part), len(off), len(ts))
				}
				if int32(binary.BigEndian.Uint32(part)) != r.Partition || topic+".DLT" != r.Topic {
					t.Fatalf("%s/%d dead letter names origin %s/%d", r.Topic, r.Partition, topic, binary.BigEndian.Uint32(part))
				}
				if string(header(r, "kafka_dlt-exception-fqcn")) == "" || string(header(r, "kafka_dlt-exception-message")) == "" {
					t.Fatalf("dead letter without exception headers")
				}
				var ev struct{ EventID, IdempotencyKey string }
				if err := json.Unmarshal(r.Value, &ev); err != nil || ev.EventID == "" {
					t.Fatalf("dead letter without eventId: %s", r.Value)
				}
				msg := string(header(r, "kafka_dlt-exception-message"))
				switch {
				case r.Topic == TopicShipmentDLT && strings.Contains(msg, "timed out"):
					seen["shipment transient"] = true
				case r.Topic == TopicShipmentDLT && strings.Contains(msg, "postcode"):
					seen["shipment permanent"] = true
				case r.Topic == TopicPaymentsDLT && strings.Contains(msg, "ledger"):
					if !captured(ev.IdempotencyKey) {
						t.Fatalf("payment %s dead-lettered after capture has no captured row", ev.IdempotencyKey)
					}
					seen["payment after capture"] = true
				case r.Topic == TopicPaymentsDLT && strings.Contains(msg, "PSP"):
					// Unless a later follow-up event captured it, a
					// payment that failed before capture has no row.
					if !captured(ev.IdempotencyKey) {
						seen["payment before capture"] = true
					}
				}
			})
		}
		if d.Status(ctx).PaymentsCaptured == 0 {
			t.Errorf("no payments captured")
		}
	})

	line := d.Status(ctx).Line()
	for _, want := range []string{"orders", "sales-analytics=", "fraud-monitor stuck at orders/7@", "payments.DLT"} {
		if !strings.Contains(line, want) {
			t.Errorf("status line lacks %q: %s", want, line)
		}
	}
}

func TestApplyConfig(t *testing.T) {
	cfg := config.Default()
	if !ApplyConfig(cfg, "/data") {
		t.Fatal("ApplyConfig changed nothing on a config without policies")
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("demo policies do not validate: %v", err)
	}
	p, ok := cfg.RedrivePolicyFor("payments.DLT")
	if !ok || !p.RequireIdempotencyKey || p.IdempotencyKey != "json:idempotencyKey" || p.Review != "required" ||
		p.Approvals != 1 || p.SystemOfRecord == nil || p.SystemOfRecord.Driver != "sqlite" || p.SystemOfRecord.DSN != "/data/payments.db" {
		t.Errorf("payments.DLT policy = %+v", p)
	}
	if s, ok := cfg.RedrivePolicyFor("shipment-jobs.DLT"); !ok || s.Review != "none" || s.SystemOfRecord != nil {
		t.Errorf("shipment-jobs.DLT policy = %+v", s)
	}
	if g, _ := cfg.GroupPolicyFor(GroupPayments); !g.Effects {
		t.Errorf("payments group policy lacks effects")
	}

	// A user's own redrive policies are left alone.
	own := config.Default()
	own.Redrive.Policies = []config.RedrivePolicy{{Match: "x.DLT"}}
	ApplyConfig(own, "/data")
	if len(own.Redrive.Policies) != 1 || own.Redrive.Policies[0].Match != "x.DLT" {
		t.Errorf("user policies replaced: %+v", own.Redrive.Policies)
	}
}

func TestValidateOrder(t *testing.T) {
	good, _ := json.Marshal(orderEvent{EventID: "e", OrderID: "1", Tenant: "t", EventTime: time.Now().Format(time.RFC3339Nano)})
	if err := validateOrder(good); err != nil {
		t.Errorf("good order rejected: %v", err)
	}
	bad, _ := json.Marshal(orderEvent{EventID: "e", OrderID: "1", Tenant: "t", EventTime: "2026-11-31T25:61:00Z"})
	if validateOrder(bad) == nil {
		t.Errorf("poison order accepted")
	}
}
