// Package demo is the HarborCart workload `berth demo` runs against the
// bundled broker: an orders producer and three consumer groups that keep up,
// fall behind and get stuck; a tenant-skewed producer; and two consumers that
// dead-letter with Spring-Kafka headers, one of them recording payment
// captures in an SQLite system of record so that some dead letters are
// half-applied. Every part is light: a few ticks a second, batched produce.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/durations"
)

// Topics and groups of the workload.
const (
	TopicOrders         = "orders"
	TopicOrdersByTenant = "orders-by-tenant"
	TopicShipments      = "shipment-jobs"
	TopicShipmentDLT    = "shipment-jobs.DLT"
	TopicPayments       = "payments"
	TopicPaymentsDLT    = "payments.DLT"

	GroupEmail     = "email-notifier"
	GroupSales     = "sales-analytics"
	GroupFraud     = "fraud-monitor"
	GroupShipments = "shipment-workers"
	GroupPayments  = "payments-capture"

	// PoisonPartition is the orders partition that receives the record
	// fraud-monitor cannot process.
	PoisonPartition int32 = 7
	// HotTenant is the tenant with 30% of orders-by-tenant's traffic.
	HotTenant = "harbor-retail"
)

// Options configure the workload.
type Options struct {
	Bootstrap []string
	// DataDir holds payments.db and allowed_signers (the broker's data dir).
	DataDir string
	// Rate is orders per second (default 200). orders-by-tenant gets a
	// quarter of it, shipment-jobs and payments a tenth each.
	Rate int
	// SalesFraction is sales-analytics' speed relative to the producer
	// (default 0.6: its lag and age grow steadily).
	SalesFraction float64
	// Logf receives workload errors (default: dropped).
	Logf func(format string, args ...any)
}

// Demo is a running workload.
type Demo struct {
	o      Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	producer *kgo.Client // keyed records, default partitioner
	manual   *kgo.Client // explicit partitions: the poison record, dead letters
	admin    *kadm.Client
	payments *paymentsDB
	clients  []*kgo.Client

	seq      atomic.Int64 // order ids
	started  time.Time
	produced atomic.Int64 // orders records acknowledged
	prodErrs atomic.Int64 // records of any topic that failed to produce

	shipDLT     atomic.Int64
	payCaptured atomic.Int64
	payDLT      atomic.Int64
	payHalf     atomic.Int64

	mu     sync.Mutex
	stuck  *Stuck
	recent []string // recent payment order ids, for follow-up events
}

// Stuck says where fraud-monitor is stuck.
type Stuck struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Since     time.Time `json:"since"` // the poison record's timestamp
}

// Start begins the workload; it runs until Close.
func Start(ctx context.Context, o Options) (*Demo, error) {
	if len(o.Bootstrap) == 0 {
		return nil, errors.New("demo: no bootstrap address")
	}
	if o.Rate == 0 {
		o.Rate = 200
	}
	if o.Rate < 1 || o.Rate > 100000 {
		return nil, fmt.Errorf("rate: %d is out of range (1-100000 per second)", o.Rate)
	}
	if o.SalesFraction == 0 {
		o.SalesFraction = 0.6
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if err := ensureAllowedSigners(o.DataDir); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	d := &Demo{o: o, started: time.Now()}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.seq.Store(time.Now().UnixMilli())

	var err error
	if d.payments, err = openPayments(PaymentsDB(o.DataDir)); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	fail := func(err error) (*Demo, error) { d.Close(); return nil, fmt.Errorf("demo: %w", err) }
	if d.producer, err = d.client("berth-demo-producer", kgo.ProducerLinger(20*time.Millisecond), kgo.MaxBufferedRecords(20000),
		// A write refused for a while (a degraded cluster below min ISR)
		// counts as failed instead of waiting forever.
		kgo.RecordDeliveryTimeout(10*time.Second)); err != nil {
		return fail(err)
	}
	if d.manual, err = d.client("berth-demo-deadletter", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond)); err != nil {
		return fail(err)
	}
	d.admin = kadm.NewClient(d.producer)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.producer.Ping(pctx); err != nil {
		return fail(fmt.Errorf("%s unreachable: %w", strings.Join(o.Bootstrap, ","), err))
	}
	for _, run := range []func() error{d.startEmail, d.startSales, d.startFraud, d.startShipments, d.startPayments} {
		if err := run(); err != nil {
			return fail(err)
		}
	}
	d.spawn(d.produceLoop)
	return d, nil
}

// client makes a kgo client for the demo's brokers.
func (d *Demo) client(id string, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(d.o.Bootstrap...),
		kgo.ClientID(id),
		kgo.FetchMaxBytes(1 << 20),
		kgo.MetadataMinAge(time.Second),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	d.clients = append(d.clients, cl)
	return cl, nil
}

// group makes a consumer-group client for topic.
func (d *Demo) group(group, topic string, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(time.Second),
	}
	return d.client("berth-demo-"+group, append(base, opts...)...)
}

func (d *Demo) spawn(f func()) {
	d.wg.Add(1)
	go func() { defer d.wg.Done(); f() }()
}

// Close stops the workload, committing what consumers processed.
func (d *Demo) Close() error {
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
	for i := len(d.clients) - 1; i >= 0; i-- {
		d.clients[i].Close() // group members leave and commit
	}
	d.clients = nil
	if d.payments != nil {
		err := d.payments.Close()
		d.payments = nil
		return err
	}
	return nil
}

// Status is a snapshot of the workload.
type Status struct {
	Uptime           time.Duration    `json:"uptime"`
	OrdersProduced   int64            `json:"orders_produced"`
	ProduceErrors    int64            `json:"produce_errors"`
	Unacknowledged   int64            `json:"unacknowledged"` // records waiting for the broker`
	Lag              map[string]int64 `json:"lag"`            // per group, in records
	FraudStuck       *Stuck           `json:"fraud_stuck,omitempty"`
	ShipmentsDLT     int64            `json:"shipments_dead_lettered"`
	PaymentsCaptured int64            `json:"payments_captured"`
	PaymentsDLT      int64            `json:"payments_dead_lettered"`
	PaymentsHalf     int64            `json:"payments_dead_lettered_after_capture"`
}

// Status reads the counters and the groups' lag from the broker.
func (d *Demo) Status(ctx context.Context) Status {
	s := Status{
		Uptime:           time.Since(d.started).Round(time.Second),
		OrdersProduced:   d.produced.Load(),
		ProduceErrors:    d.prodErrs.Load(),
		Unacknowledged:   d.producer.BufferedProduceRecords(),
		Lag:              map[string]int64{},
		ShipmentsDLT:     d.shipDLT.Load(),
		PaymentsCaptured: d.payCaptured.Load(),
		PaymentsDLT:      d.payDLT.Load(),
		PaymentsHalf:     d.payHalf.Load(),
	}
	d.mu.Lock()
	if d.stuck != nil {
		st := *d.stuck
		s.FraudStuck = &st
	}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lags, err := d.admin.Lag(ctx, GroupEmail, GroupSales, GroupFraud, GroupShipments, GroupPayments)
	if err == nil {
		for g, l := range lags {
			if l.Error() == nil {
				s.Lag[g] = l.Lag.Total()
			}
		}
	}
	return s
}

// Line renders the status as one line for --headless.
func (s Status) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "demo %s: orders %d produced", s.Uptime, s.OrdersProduced)
	if s.ProduceErrors > 0 {
		fmt.Fprintf(&b, " (%d failed)", s.ProduceErrors)
	}
	if s.Unacknowledged > 0 {
		fmt.Fprintf(&b, " (%d awaiting acks)", s.Unacknowledged)
	}
	groups := make([]string, 0, len(s.Lag))
	for g := range s.Lag {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	b.WriteString(" | lag")
	for _, g := range groups {
		fmt.Fprintf(&b, " %s=%d", g, s.Lag[g])
	}
	if s.FraudStuck != nil {
		fmt.Fprintf(&b, " | fraud-monitor stuck at orders/%d@%d for %s", s.FraudStuck.Partition, s.FraudStuck.Offset,
			durations.Format(time.Since(s.FraudStuck.Since)))
	}
	fmt.Fprintf(&b, " | shipment-jobs.DLT +%d | payments captured %d, payments.DLT +%d (%d after capture)",
		s.ShipmentsDLT, s.PaymentsCaptured, s.PaymentsDLT, s.PaymentsHalf)
	return b.String()
}

// newEventID returns a random UUID (version 4) string.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
