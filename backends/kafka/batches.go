package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends"
)

// The timestamp reader needs, of every data record it fetches, two numbers:
// its offset and its timestamp. kgo.ProcessFetchPartition decodes whole
// records (keys, values, headers, a kgo.Record each), which on a cold
// refresh of 10,000s of partitions was most of the reader's CPU and garbage.
// batchTimestamps walks v2 record batches and reads only each record's
// length, timestamp delta and offset delta, with the same read_committed
// rules as kgo: control batches are not data, and a transactional batch is
// dropped when the response lists its producer's transaction as aborted
// from an offset at or below the batch's first offset (each abort marker
// closes one such transaction).

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// errOldFormat says the response holds pre-v2 message sets: the caller
// decodes them with kgo instead.
var errOldFormat = errors.New("message format older than v2")

// batchTimestamps appends to dst the data records at or after from in rp's
// complete v2 batches (a trailing truncated batch is left to walkBatches).
func batchTimestamps(rp *kmsg.FetchResponseTopicPartition, from int64, dec kgo.Decompressor, dst []recTS) ([]recTS, error) {
	be := binary.BigEndian
	var aborts map[int64][]int64 // producer id -> aborted first offsets, ascending
	if len(rp.AbortedTransactions) > 0 {
		aborts = make(map[int64][]int64, len(rp.AbortedTransactions))
		for _, a := range rp.AbortedTransactions {
			aborts[a.ProducerID] = append(aborts[a.ProducerID], a.FirstOffset)
		}
		for pid := range aborts {
			slices.Sort(aborts[pid])
		}
	}
	b := rp.RecordBatches
	for len(b) >= 61 {
		size := 12 + int(int32(be.Uint32(b[8:])))
		if b[16] != 2 {
			return dst, errOldFormat
		}
		if size < 61 {
			return dst, fmt.Errorf("record batch at offset %d: length %d too small", int64(be.Uint64(b)), size)
		}
		if size > len(b) {
			break // truncated at the partition byte limit
		}
		batch := b[:size]
		b = b[size:]
		h := readBatchHeader(batch)
		if crc32.Checksum(batch[21:], crc32c) != be.Uint32(batch[17:]) {
			return dst, fmt.Errorf("record batch at offset %d: CRC mismatch", h.base)
		}
		aborted := false
		if h.txn() && aborts != nil {
			if pa := aborts[h.producerID]; len(pa) > 0 && h.base >= pa[0] {
				aborted = true
			}
		}
		if h.end <= from && !(h.control() && aborted) {
			// Wholly below the position. An abort marker down here still
			// counts: it closes a transaction, so the producer's next one
			// is judged against its own first offset.
			continue
		}
		records := batch[61:]
		count := int(int32(be.Uint32(batch[57:])))
		if codec := kgo.CompressionCodecType(h.attrs & 0x07); codec != kgo.CodecNone {
			var err error
			if records, err = dec.Decompress(records, codec); err != nil {
				return dst, fmt.Errorf("record batch at offset %d: %w", h.base, err)
			}
		}
		if h.control() {
			// One marker record: key = version int16, type int16 (0 abort).
			if aborted {
				if key, ok := controlKey(records); ok && len(key) >= 4 && key[2] == 0 && key[3] == 0 {
					if pa := aborts[h.producerID]; len(pa) > 1 {
						aborts[h.producerID] = pa[1:]
					} else {
						delete(aborts, h.producerID)
					}
				}
			}
			continue
		}
		if aborted {
			continue
		}
		typ := backends.CreateTime
		if h.logAppend() {
			typ = backends.LogAppendTime
		}
		for range count {
			length, n := binary.Varint(records)
			if n <= 0 || length < 0 || int(length) > len(records)-n {
				return dst, fmt.Errorf("record batch at offset %d: truncated record", h.base)
			}
			rec := records[n : n+int(length)]
			records = records[n+int(length):]
			if len(rec) < 1 {
				return dst, fmt.Errorf("record batch at offset %d: empty record", h.base)
			}
			tsDelta, n1 := binary.Varint(rec[1:])
			if n1 <= 0 {
				return dst, fmt.Errorf("record batch at offset %d: bad timestamp delta", h.base)
			}
			offDelta, n2 := binary.Varint(rec[1+n1:])
			if n2 <= 0 {
				return dst, fmt.Errorf("record batch at offset %d: bad offset delta", h.base)
			}
			off := h.base + offDelta
			if off < from {
				continue
			}
			ms := h.firstTS + tsDelta
			if typ == backends.LogAppendTime {
				ms = h.maxTS // the broker stamps the batch, not each record
			}
			dst = append(dst, recTS{off: off, ms: ms, typ: typ})
		}
	}
	return dst, nil
}

// controlKey returns the key of the first record in a control batch's
// records section.
func controlKey(records []byte) ([]byte, bool) {
	length, n := binary.Varint(records)
	if n <= 0 || length < 0 || int(length) > len(records)-n {
		return nil, false
	}
	rec := records[n : n+int(length)]
	if len(rec) < 1 {
		return nil, false
	}
	rec = rec[1:] // attributes
	for range 2 { // timestamp delta, offset delta
		_, m := binary.Varint(rec)
		if m <= 0 {
			return nil, false
		}
		rec = rec[m:]
	}
	klen, m := binary.Varint(rec)
	if m <= 0 || klen < 0 || int(klen) > len(rec)-m {
		return nil, false
	}
	return rec[m : m+int(klen)], true
}
