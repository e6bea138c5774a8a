package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// orderEvent is the value of orders and orders-by-tenant records.
type orderEvent struct {
	EventID   string `json:"eventId"`
	OrderID   string `json:"orderId"`
	Tenant    string `json:"tenant"`
	EventTime string `json:"eventTime"`
}

// otherTenants share the 70% of traffic harbor-retail leaves; enough of them
// that their keys spread evenly over 24 partitions.
var otherTenants = func() []string {
	ts := make([]string, 240)
	for i := range ts {
		ts[i] = fmt.Sprintf("tenant-%03d", i+1)
	}
	return ts
}()

// pickTenant returns harbor-retail 30% of the time. Keyed by tenant, its
// partition gets 30% of the traffic: about 7x a partition's even share of 24.
func pickTenant() string {
	if rand.Float64() < 0.30 {
		return HotTenant
	}
	return otherTenants[rand.IntN(len(otherTenants))]
}

// rateAcc turns a per-second rate into whole records per tick.
type rateAcc struct {
	perSec float64
	acc    float64
}

func (r *rateAcc) take(elapsed time.Duration) int {
	r.acc += r.perSec * elapsed.Seconds()
	n := int(r.acc)
	r.acc -= float64(n)
	return n
}

// produceLoop writes every topic's records at its rate, ten ticks a second.
func (d *Demo) produceLoop() {
	rate := float64(d.o.Rate)
	orders := rateAcc{perSec: rate}
	tenants := rateAcc{perSec: rate / 4}
	ships := rateAcc{perSec: rate / 10}
	pays := rateAcc{perSec: rate / 10}

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	poisonAt := last.Add(time.Second)
	poisoned := false
	for {
		select {
		case <-d.ctx.Done():
			return
		case now := <-tick.C:
			elapsed := now.Sub(last)
			last = now
			for i := orders.take(elapsed); i > 0; i-- {
				d.produceOrder(now)
			}
			for i := tenants.take(elapsed); i > 0; i-- {
				d.produceTenantOrder(now)
			}
			for i := ships.take(elapsed); i > 0; i-- {
				d.produceShipment(now)
			}
			for i := pays.take(elapsed); i > 0; i-- {
				d.producePayment(now)
			}
			if !poisoned && now.After(poisonAt) {
				poisoned = true
				d.producePoison(now)
			}
		}
	}
}

// send produces without blocking the loop: when the client's buffer is full
// (a degraded cluster refusing writes), the record is counted as failed.
func (d *Demo) send(cl *kgo.Client, r *kgo.Record, ok func()) {
	cl.TryProduce(d.ctx, r, func(_ *kgo.Record, err error) {
		if err != nil {
			if d.ctx.Err() == nil {
				d.prodErrs.Add(1)
			}
			return
		}
		if ok != nil {
			ok()
		}
	})
}

func (d *Demo) nextOrderID() string { return strconv.FormatInt(d.seq.Add(1), 10) }

func (d *Demo) produceOrder(now time.Time) {
	id := d.nextOrderID()
	v, _ := json.Marshal(orderEvent{EventID: newEventID(), OrderID: id, Tenant: pickTenant(), EventTime: now.UTC().Format(time.RFC3339Nano)})
	d.send(d.producer, &kgo.Record{Topic: TopicOrders, Key: []byte("order:" + id), Value: v, Timestamp: now},
		func() { d.produced.Add(1) })
}

func (d *Demo) produceTenantOrder(now time.Time) {
	tenant := pickTenant()
	v, _ := json.Marshal(orderEvent{EventID: newEventID(), OrderID: d.nextOrderID(), Tenant: tenant, EventTime: now.UTC().Format(time.RFC3339Nano)})
	d.send(d.producer, &kgo.Record{Topic: TopicOrdersByTenant, Key: []byte(tenant), Value: v, Timestamp: now}, nil)
}

// producePoison writes the record fraud-monitor cannot process: an order
// whose eventTime is not a time (a producer bug shipped to one partition).
func (d *Demo) producePoison(now time.Time) {
	id := d.nextOrderID()
	v, _ := json.Marshal(orderEvent{EventID: newEventID(), OrderID: id, Tenant: HotTenant, EventTime: "2026-11-31T25:61:00Z"})
	d.send(d.manual, &kgo.Record{Topic: TopicOrders, Partition: PoisonPartition, Key: []byte("order:" + id), Value: v, Timestamp: now}, nil)
}

// email-notifier keeps up: it handles every order as it arrives.
func (d *Demo) startEmail() error {
	cl, err := d.group(GroupEmail, TopicOrders)
	if err != nil {
		return err
	}
	d.spawn(func() {
		for d.ctx.Err() == nil {
			fs := cl.PollFetches(d.ctx)
			fs.EachError(func(t string, p int32, err error) { d.logErr(GroupEmail, err) })
		}
	})
	return nil
}

// sales-analytics processes at SalesFraction of the producer's rate, so its
// lag and age grow steadily.
func (d *Demo) startSales() error {
	cl, err := d.group(GroupSales, TopicOrders, kgo.MaxConcurrentFetches(1))
	if err != nil {
		return err
	}
	budget := rateAcc{perSec: float64(d.o.Rate) * d.o.SalesFraction}
	d.spawn(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		allowance := 0
		for {
			select {
			case <-d.ctx.Done():
				return
			case now := <-tick.C:
				allowance += budget.take(now.Sub(last))
				last = now
				if max := int(budget.perSec) + 1; allowance > max {
					allowance = max // no catching up in bursts after a pause
				}
				if allowance == 0 {
					continue
				}
				// Autocommit commits what was polled: exactly what was processed.
				ctx, cancel := context.WithTimeout(d.ctx, 100*time.Millisecond)
				fs := cl.PollRecords(ctx, allowance)
				cancel()
				allowance -= fs.NumRecords()
			}
		}
	})
	return nil
}

// fraud-monitor validates every order. The poison record fails validation
// every time, so the monitor stops on its partition (paused, never committed
// past it) while it keeps up on the other 23.
func (d *Demo) startFraud() error {
	cl, err := d.group(GroupFraud, TopicOrders, kgo.AutoCommitMarks())
	if err != nil {
		return err
	}
	d.spawn(func() {
		stuck := map[int32]bool{}
		for d.ctx.Err() == nil {
			fs := cl.PollFetches(d.ctx)
			fs.EachError(func(t string, p int32, err error) { d.logErr(GroupFraud, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if stuck[r.Partition] {
					return
				}
				if err := validateOrder(r.Value); err != nil {
					stuck[r.Partition] = true
					cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
					d.mu.Lock()
					d.stuck = &Stuck{Partition: r.Partition, Offset: r.Offset, Since: r.Timestamp}
					d.mu.Unlock()
					return
				}
				cl.MarkCommitRecords(r)
			})
		}
	})
	return nil
}

// validateOrder is fraud-monitor's strict parse.
func validateOrder(v []byte) error {
	var ev orderEvent
	if err := json.Unmarshal(v, &ev); err != nil {
		return err
	}
	if ev.EventID == "" || ev.OrderID == "" {
		return fmt.Errorf("missing eventId or orderId")
	}
	if _, err := time.Parse(time.RFC3339Nano, ev.EventTime); err != nil {
		return fmt.Errorf("eventTime %q: %w", ev.EventTime, err)
	}
	return nil
}

func (d *Demo) logErr(who string, err error) {
	if d.ctx.Err() == nil && err != nil && err != context.Canceled {
		d.o.Logf("%s: %v", who, err)
	}
}
