package demo

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Spring for Apache Kafka's DeadLetterPublishingRecoverer header names
// (see /work/shared/reference/redrive.md §1.1).
const (
	hdrOrigTopic     = "kafka_dlt-original-topic"
	hdrOrigPartition = "kafka_dlt-original-partition" // 4-byte big-endian int
	hdrOrigOffset    = "kafka_dlt-original-offset"    // 8-byte big-endian long
	hdrOrigTimestamp = "kafka_dlt-original-timestamp" // 8-byte big-endian long, epoch ms
	hdrOrigTSType    = "kafka_dlt-original-timestamp-type"
	hdrOrigGroup     = "kafka_dlt-original-consumer-group"
	hdrExcFQCN       = "kafka_dlt-exception-fqcn"
	hdrExcCauseFQCN  = "kafka_dlt-exception-cause-fqcn"
	hdrExcMessage    = "kafka_dlt-exception-message"
	hdrExcStacktrace = "kafka_dlt-exception-stacktrace"

	// Spring wraps every listener failure in this exception; the cause
	// header carries the real class.
	listenerFailed = "org.springframework.kafka.listener.ListenerExecutionFailedException"
)

// failure is why a record is dead-lettered.
type failure struct {
	cause   string // exception class
	message string
}

// Failure classes of the workload: transient ones (timeouts, 5xx) succeed
// when redriven, permanent ones (validation) fail again.
var (
	failCarrierTimeout = failure{"java.net.SocketTimeoutException", "Read timed out after 30000 ms calling carrier API"}
	failPSPTimeout     = failure{"com.harborcart.payments.PspTimeoutException", "PSP request timed out after 10000 ms"}
	failLedger503      = failure{"com.harborcart.ledger.LedgerClientException", "ledger service returned HTTP 503 Service Unavailable"}
)

func failPostcode(postcode string) failure {
	return failure{"jakarta.validation.ConstraintViolationException", "postcode '" + postcode + "' is not valid for country GB"}
}

func failAmount(cents int64) failure {
	return failure{"jakarta.validation.ConstraintViolationException", "amountCents must be positive, got " + strconv.FormatInt(cents, 10)}
}

// deadLetter builds the DLT copy of r the way Spring's recoverer does: same
// key, value and partition; the record's earlier headers kept (so a record
// dead-lettered twice carries two kafka_dlt-original-* sets, first origin
// first) except previous exception headers, which are replaced.
func deadLetter(r *kgo.Record, dlt, group string, f failure) *kgo.Record {
	var hs []kgo.RecordHeader
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, "kafka_dlt-exception-") {
			hs = append(hs, h)
		}
	}
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(r.Partition))
	var off, ts [8]byte
	binary.BigEndian.PutUint64(off[:], uint64(r.Offset))
	binary.BigEndian.PutUint64(ts[:], uint64(r.Timestamp.UnixMilli()))
	msg := "Listener failed; " + f.message
	hs = append(hs,
		kgo.RecordHeader{Key: hdrOrigTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: hdrOrigPartition, Value: p[:]},
		kgo.RecordHeader{Key: hdrOrigOffset, Value: off[:]},
		kgo.RecordHeader{Key: hdrOrigTimestamp, Value: ts[:]},
		kgo.RecordHeader{Key: hdrOrigTSType, Value: []byte("CreateTime")},
		kgo.RecordHeader{Key: hdrOrigGroup, Value: []byte(group)},
		kgo.RecordHeader{Key: hdrExcFQCN, Value: []byte(listenerFailed)},
		kgo.RecordHeader{Key: hdrExcCauseFQCN, Value: []byte(f.cause)},
		kgo.RecordHeader{Key: hdrExcMessage, Value: []byte(msg)},
		kgo.RecordHeader{Key: hdrExcStacktrace, Value: []byte(listenerFailed + ": " + msg + "\n\tat com.harborcart.Listener.onMessage(Listener.java:42)\nCaused by: " + f.cause + ": " + f.message + "\n")},
	)
	return &kgo.Record{Topic: dlt, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: time.Now()}
}

// shipmentJob is the value of shipment-jobs records.
type shipmentJob struct {
	EventID    string `json:"eventId"`
	ShipmentID string `json:"shipmentId"`
	OrderID    string `json:"orderId"`
	Carrier    string `json:"carrier"`
	Postcode   string `json:"postcode"`
	EventTime  string `json:"eventTime"`
}

var carriers = []string{"royal-mail", "dpd", "evri", "dhl"}
var postcodes = []string{"SW1A 1AA", "M1 1AE", "B33 8TH", "CR2 6XH", "DN55 1PT", "LS1 4AP"}

func (d *Demo) produceShipment(now time.Time) {
	id := d.nextOrderID()
	pc := postcodes[rand.IntN(len(postcodes))]
	if rand.Float64() < 0.02 {
		pc = "ZZ" + strconv.Itoa(rand.IntN(99)) + " 9QQX" // fails validation every time
	}
	v, _ := json.Marshal(shipmentJob{EventID: newEventID(), ShipmentID: "shp-" + id, OrderID: id,
		Carrier: carriers[rand.IntN(len(carriers))], Postcode: pc, EventTime: now.UTC().Format(time.RFC3339Nano)})
	d.send(d.producer, &kgo.Record{Topic: TopicShipments, Key: []byte("shipment:shp-" + id), Value: v, Timestamp: now}, nil)
}

// validPostcode is the worker's check: UK postcodes in the demo's set.
func validPostcode(pc string) bool { return !strings.HasPrefix(pc, "ZZ") }

// shipment-workers books each job with its carrier. Invalid postcodes are
// permanent failures; about 2% of bookings time out (transient). Both are
// dead-lettered into shipment-jobs.DLT, then the offsets are committed.
func (d *Demo) startShipments() error {
	cl, err := d.group(GroupShipments, TopicShipments, kgo.DisableAutoCommit())
	if err != nil {
		return err
	}
	d.spawn(func() {
		for d.ctx.Err() == nil {
			fs := cl.PollFetches(d.ctx)
			fs.EachError(func(t string, p int32, err error) { d.logErr(GroupShipments, err) })
			var dead []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) {
				var job shipmentJob
				switch {
				case json.Unmarshal(r.Value, &job) != nil:
					dead = append(dead, deadLetter(r, TopicShipmentDLT, GroupShipments,
						failure{"org.springframework.kafka.support.serializer.DeserializationException", "failed to deserialize shipment job"}))
				case !validPostcode(job.Postcode):
					dead = append(dead, deadLetter(r, TopicShipmentDLT, GroupShipments, failPostcode(job.Postcode)))
				case rand.Float64() < 0.02:
					dead = append(dead, deadLetter(r, TopicShipmentDLT, GroupShipments, failCarrierTimeout))
				}
			})
			if !d.publishDead(dead) {
				return
			}
			d.shipDLT.Add(int64(len(dead)))
			d.commit(cl, fs, GroupShipments)
		}
	})
	return nil
}

// publishDead writes dead letters, retrying until they are stored: a
// consumer must not commit past a record whose dead letter was lost. It
// returns false only when the demo is stopping.
func (d *Demo) publishDead(recs []*kgo.Record) bool {
	for len(recs) > 0 {
		res := d.manual.ProduceSync(d.ctx, recs...)
		var retry []*kgo.Record
		for _, pr := range res {
			if pr.Err != nil {
				retry = append(retry, pr.Record)
			}
		}
		if d.ctx.Err() != nil {
			return false
		}
		if len(retry) > 0 {
			d.logErr("dead letter", res.FirstErr())
			select {
			case <-d.ctx.Done():
				return false
			case <-time.After(time.Second):
			}
		}
		recs = retry
	}
	return true
}

// commit commits the offsets of everything in fs.
func (d *Demo) commit(cl *kgo.Client, fs kgo.Fetches, who string) {
	if fs.NumRecords() == 0 {
		return
	}
	recs := fs.Records()
	if err := cl.CommitRecords(d.ctx, recs...); err != nil {
		d.logErr(who, err)
	}
}
