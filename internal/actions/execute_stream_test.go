package actions

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/berth-dev/berth/redrive"
)

// fakeDLQ is a DLQ in memory: it answers reads by coordinates and records
// what is published, batch by batch.
type fakeDLQ struct {
	recs    map[redrive.Coord]redrive.Record
	reads   int
	batches [][]Outgoing
}

func (d *fakeDLQ) Read(_ context.Context, _ string, coords []redrive.Coord) (map[redrive.Coord]redrive.Record, error) {
	d.reads++
	out := map[redrive.Coord]redrive.Record{}
	for _, c := range coords {
		if r, ok := d.recs[c]; ok {
			out[c] = r
		}
	}
	return out, nil
}

func (d *fakeDLQ) Publish(_ context.Context, b []Outgoing) ([]redrive.LedgerEntry, error) {
	d.batches = append(d.batches, append([]Outgoing(nil), b...))
	out := make([]redrive.LedgerEntry, len(b))
	for i, o := range b {
		out[i] = o.Ledger
	}
	return out, nil
}

func (d *fakeDLQ) Close() error { return nil }

// deadLetter is a record Spring dead-lettered from orders[partition]@offset.
func deadLetter(dlqPart int32, dlqOff int64, key, eventID string, partition int32, offset int64) redrive.Record {
	p, o := make([]byte, 4), make([]byte, 8)
	binary.BigEndian.PutUint32(p, uint32(partition))
	binary.BigEndian.PutUint64(o, uint64(offset))
	return redrive.Record{Topic: "orders.DLT", Partition: dlqPart, Offset: dlqOff, Key: []byte(key),
		Value: []byte(`{"eventId":"` + eventID + `"}`), Headers: []redrive.Header{
			{Key: "kafka_dlt-original-topic", Value: []byte("orders")},
			{Key: "kafka_dlt-original-partition", Value: p},
			{Key: "kafka_dlt-original-offset", Value: o},
		}}
}

// streamPlan plans recs (all included, targets derived from them) and
// returns the plan and the DLQ holding them.
func streamPlan(recs ...redrive.Record) (redrive.File, *fakeDLQ) {
	d := &fakeDLQ{recs: map[redrive.Coord]redrive.Record{}}
	p := redrive.Plan{Version: redrive.PlanVersion, Cluster: "c1", DLQ: "orders.DLT", Selection: redrive.Selection{All: true},
		Policy: redrive.PolicySnapshot{Review: "none", EventID: "json:eventId", IdempotencyKey: "json:eventId"}, BatchSize: 2}
	x, _ := redrive.ExtractorsOf(p.Policy)
	for _, r := range recs {
		d.recs[redrive.Coord{Partition: r.Partition, Offset: r.Offset}] = r
		p.Records = append(p.Records, redrive.NewPlanRecord(redrive.ParseRecord(r, x), ""))
	}
	return redrive.NewFile(p), d
}

func streamOptions(d *fakeDLQ, chunk int) Options {
	return Options{Cluster: "c1", Reader: d, Publisher: d, Chunk: chunk,
		Recheck: func(_ context.Context, _ redrive.Plan, cs []redrive.Candidate, _ redrive.PolicySnapshot) ([]redrive.Verdict, error) {
			vs := make([]redrive.Verdict, len(cs))
			for i := range vs {
				vs[i].Included = true
			}
			return vs, nil
		}}
}

// TestExecuteRefusesATamperedTargetInALaterChunkBeforeSendingAnything: a
// plan whose last record is given a target the record does not name is
// refused whole, although its records are re-read and sent a chunk at a
// time and the tampered one sits in the last chunk.
func TestExecuteRefusesATamperedTargetInALaterChunkBeforeSendingAnything(t *testing.T) {
	var recs []redrive.Record
	for i := 0; i < 6; i++ {
		recs = append(recs, deadLetter(0, int64(i), fmt.Sprint("k", i), fmt.Sprint("e", i), 0, int64(100+i)))
	}
	f, d := streamPlan(recs...)
	f.Plan.Records[5].Target = "shipment-jobs"
	f = redrive.NewFile(f.Plan) // signed as tampered: the hash matches
	_, err := Execute(context.Background(), f, streamOptions(d, 2))
	if !errors.Is(err, ErrTargetChanged) {
		t.Fatalf("want a target refusal, got %v", err)
	}
	if len(d.batches) != 0 {
		t.Fatalf("%d batches sent before the refusal", len(d.batches))
	}
}

// TestExecuteKeepsSameKeyOrderAcrossChunks: records are sent in the order
// they were first consumed, whatever their DLQ order and however the plan
// is cut into chunks; an event id met again in a later chunk goes once.
func TestExecuteKeepsSameKeyOrderAcrossChunks(t *testing.T) {
	// DLQ order is the reverse of the original order for key k.
	f, d := streamPlan(
		deadLetter(0, 0, "k", "e3", 1, 30),
		deadLetter(0, 1, "k", "e2", 1, 20),
		deadLetter(1, 0, "k", "e1", 1, 10),
		deadLetter(1, 1, "j", "e9", 0, 5),
		deadLetter(1, 2, "j", "e1", 2, 7), // e1 again, on another partition
	)
	for _, chunk := range []int{1, 2, 3, 100} {
		d.batches = nil
		res, err := Execute(context.Background(), f, streamOptions(d, chunk))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range d.batches {
			for _, o := range b {
				got = append(got, o.Ledger.EventID)
			}
		}
		if fmt.Sprint(got) != "[e9 e1 e2 e3]" {
			t.Fatalf("chunk %d: sent %v, want [e9 e1 e2 e3] (original order)", chunk, got)
		}
		if res.Sent != 4 || len(res.Skipped) != 1 || res.Skipped[0].Reason != redrive.ReasonDuplicate || res.Skipped[0].Offset != 2 {
			t.Fatalf("chunk %d: sent %d, skipped %+v", chunk, res.Sent, res.Skipped)
		}
		if want := (len(f.Plan.Records) + chunk - 1) / chunk; chunk < len(f.Plan.Records) && d.reads < 2*want {
			t.Fatalf("chunk %d: %d reads, want the plan re-read in chunks (two passes of %d)", chunk, d.reads, want)
		}
		d.reads = 0
	}
}

// TestChunksKeepAnOriginalPartitionTogether: a chunk never splits the
// plan's records of one original partition when they fit in one chunk (the
// ordering check then sees them all), and cuts a partition bigger than a
// chunk.
func TestChunksKeepAnOriginalPartitionTogether(t *testing.T) {
	var ord order
	ord.topics = []string{"orders"}
	add := func(p int32, n int) {
		for i := 0; i < n; i++ {
			ord.keys = append(ord.keys, sendKey{idx: len(ord.keys), topic: 0, partition: p, offset: int64(i)})
		}
	}
	add(0, 3)
	add(1, 3)
	add(2, 9)
	add(3, 1)
	var sizes []int
	for _, c := range chunksOf(ord, 4) {
		sizes = append(sizes, len(c))
	}
	if fmt.Sprint(sizes) != "[3 3 4 4 2]" {
		t.Fatalf("chunk sizes %v, want [3 3 4 4 2]", sizes)
	}
}

// A resumed run: the records an earlier run sent (the ledger says so) are
// not sent again, and are counted, not listed, so that resuming a
// million-record plan does not hold an entry for each; the outcome (what
// `redrive execute` prints and audits) counts them as already sent either
// way, and the console, which shows each record, still gets them listed;
// the progress counts them as already sent either way (the console's bar
// and the CLI's line agree).
func TestExecuteCountsAlreadySentRecordsWithoutListingThem(t *testing.T) {
	var recs []redrive.Record
	for i := 0; i < 7; i++ {
		recs = append(recs, deadLetter(0, int64(i), fmt.Sprint("k", i), fmt.Sprint("e", i), 0, int64(100+i)))
	}
	f, d := streamPlan(recs...)
	o := streamOptions(d, 3)
	o.Recheck = func(_ context.Context, _ redrive.Plan, cs []redrive.Candidate, _ redrive.PolicySnapshot) ([]redrive.Verdict, error) {
		vs := make([]redrive.Verdict, len(cs))
		for i, c := range cs {
			vs[i].Included = c.Coord.Offset >= 5 // 0-4 were sent before
			if !vs[i].Included {
				vs[i] = redrive.Verdict{Reason: redrive.ReasonAlreadyRedriven, Detail: "redriven by plan p at t"}
			}
		}
		return vs, nil
	}
	var last Progress
	o.Progress = func(p Progress) { last = p }
	for _, perRecord := range []bool{false, true} {
		o.PerRecord = perRecord
		res, err := Execute(context.Background(), f, o)
		if err != nil {
			t.Fatal(err)
		}
		listed, counted := 5, 0
		if !perRecord {
			listed, counted = 0, 5
		}
		if res.Sent != 2 || len(res.Skipped) != listed || res.AlreadySent != counted {
			t.Fatalf("per record %v: sent %d, %d listed, %d counted; want 2 sent, %d listed, %d counted", perRecord, res.Sent, len(res.Skipped), res.AlreadySent, listed, counted)
		}
		if out := KafkaOutcome(f, res); out.AlreadySent != 5 || len(out.Skipped) != 0 || out.Sent != 2 {
			t.Fatalf("per record %v: outcome %+v; want 2 sent, 5 already sent, none skipped", perRecord, out)
		}
		if last.Counts() != "7/7 (100%) sent 2 already sent 5 skipped 0 failed 0" {
			t.Fatalf("per record %v: progress %q; want all 7 records, 5 already sent as the outcome says", perRecord, last.Counts())
		}
	}
}

// A chunk larger than readPart is read in parts in DLQ order (the
// decompressed batches of one part held at a time), and still sent whole,
// in the order the records were first consumed.
func TestExecuteReadsAChunkInPartsOfDLQOrder(t *testing.T) {
	n := 2*readPart + 7
	var recs []redrive.Record
	for i := 0; i < n; i++ {
		// DLQ order is the reverse of the original order.
		recs = append(recs, deadLetter(0, int64(i), fmt.Sprint("k", i), fmt.Sprint("e", i), 0, int64(n-i)))
	}
	f, d := streamPlan(recs...)
	reader := &partsReader{fakeDLQ: d}
	o := streamOptions(d, n)
	o.Reader = reader
	f.Plan.BatchSize = 1000
	f = redrive.NewFile(f.Plan)
	res, err := Execute(context.Background(), f, o)
	if err != nil || res.Sent != n {
		t.Fatalf("sent %d of %d: %v", res.Sent, n, err)
	}
	if reader.most > readPart {
		t.Fatalf("a read asked for %d records; want at most %d", reader.most, readPart)
	}
	if !reader.ordered {
		t.Fatal("a part was not a run of DLQ order")
	}
	if first := d.batches[0][0].Ledger.Offset; first != int64(n-1) {
		t.Fatalf("first sent is DLQ offset %d; want %d (first consumed)", first, n-1)
	}
}

// partsReader is a fakeDLQ noting the largest read and whether every read
// asked for its coordinates in DLQ order.
type partsReader struct {
	*fakeDLQ
	most    int
	ordered bool
	reads   int
}

func (r *partsReader) Read(ctx context.Context, dlq string, coords []redrive.Coord) (map[redrive.Coord]redrive.Record, error) {
	if r.reads == 0 {
		r.ordered = true
	}
	r.reads++
	r.most = max(r.most, len(coords))
	for i := 1; i < len(coords); i++ {
		if !coords[i-1].Before(coords[i]) {
			r.ordered = false
		}
	}
	return r.fakeDLQ.Read(ctx, dlq, coords)
}

// A Kafka run's progress counts the plan's included records, as a RabbitMQ
// run's does: the records the plan itself excluded are not the run's to
// settle, so the first line says 0 of the 4 included, not 2 of 6 with 2
// "skipped" before anything was sent.
func TestExecuteProgressCountsTheIncludedRecordsAsRabbitMQDoes(t *testing.T) {
	var recs []redrive.Record
	for i := 0; i < 6; i++ {
		recs = append(recs, deadLetter(0, int64(i), fmt.Sprint("k", i), fmt.Sprint("e", i), 0, int64(100+i)))
	}
	f, d := streamPlan(recs...)
	for _, i := range []int{1, 4} {
		f.Plan.Records[i].Verdict = redrive.Verdict{Reason: redrive.ReasonEffectCommitted, Detail: "captured"}
	}
	f = redrive.NewFile(f.Plan)
	o := streamOptions(d, 3)
	var lines []string
	o.Progress = func(p Progress) { lines = append(lines, p.Counts()) }
	res, err := Execute(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 4 || len(res.Skipped) != 2 {
		t.Fatalf("sent %d, skipped %d; want 4 sent and the 2 excluded listed", res.Sent, len(res.Skipped))
	}
	if len(lines) < 2 || lines[0] != "0/4 (0%) sent 0 already sent 0 skipped 0 failed 0" || lines[len(lines)-1] != "4/4 (100%) sent 4 already sent 0 skipped 0 failed 0" {
		t.Fatalf("progress %q; want 0/4 first and 4/4 last", lines)
	}
}
