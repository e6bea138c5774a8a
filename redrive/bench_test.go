package redrive

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkOrderingScanObserve measures the ordering check's per-record cost
// on one original partition: 5,000 candidates, 50,000 records scanned.
// "indexed" is OrderingScan (a key index); "linear-baseline" compares each
// record with every candidate, as a naive scan would. Compare ns/op.
func BenchmarkOrderingScanObserve(b *testing.B) {
	const nCands, nRecs = 5000, 50000
	cs := make([]Candidate, nCands)
	active := make([]bool, nCands)
	for i := range cs {
		cs[i] = Candidate{Coord: Coord{0, int64(i)}, Key: []byte(fmt.Sprintf("order-%d", i)),
			Origin: Origin{Topic: "payments", Partition: 0, Offset: int64(i * 10), HasPartition: true, HasOffset: true}}
		active[i] = true
	}
	keys := make([][]byte, nRecs)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("order-%d", i%(nCands*3)))
	}
	b.Run("indexed", func(b *testing.B) {
		for n := 0; n < b.N; n++ {
			s := NewOrderingScan(cs, active)
			for i, k := range keys {
				s.Observe("payments", 0, int64(i), k)
			}
			s.Finish("payments", 0, true, nRecs, nil)
			s.Verdicts(false)
		}
		b.ReportMetric(float64(nRecs*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("linear-baseline", func(b *testing.B) {
		for n := 0; n < b.N; n++ {
			newer := map[int]int64{}
			for off, k := range keys {
				for i, c := range cs {
					if int64(off) > c.Origin.Offset && bytes.Equal(k, c.Key) {
						if _, ok := newer[i]; !ok {
							newer[i] = int64(off)
						}
					}
				}
			}
		}
		b.ReportMetric(float64(nRecs*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkParseRecord measures parsing a Spring DLT record (headers, event
// id, idempotency key, class).
func BenchmarkParseRecord(b *testing.B) {
	r := Record{Topic: "payments.DLT", Value: []byte(`{"eventId":"4f1c2a9e-1b2c-4d5e-8f90-123456789abc","idempotencyKey":"capture:1795941997147","amountCents":34093}`),
		Headers: append(springDLT("payments", 3, 41234, 1764403200000),
			hs("kafka_dlt-exception-cause-fqcn", "com.harborcart.ledger.LedgerClientException"),
			hs("kafka_dlt-exception-message", "Listener failed; ledger service returned HTTP 503 Service Unavailable for order 1795941997147"))}
	x := DefaultExtractors()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ParseRecord(r, x)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
