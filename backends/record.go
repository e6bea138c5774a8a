package backends

import (
	"context"
	"time"
)

// Record is one record read from a partition, raw: keys, values and headers
// are untrusted bytes that whoever shows them sanitises.
type Record struct {
	Topic         string        `json:"topic"`
	Partition     int32         `json:"partition"`
	Offset        int64         `json:"offset"`
	Timestamp     time.Time     `json:"timestamp"`
	TimestampType TimestampType `json:"timestamp_type"`
	// KeyNull is set for a null key (as opposed to an empty one).
	KeyNull bool     `json:"key_null"`
	Key     []byte   `json:"key"`
	Headers []Header `json:"headers"`
	Value   []byte   `json:"value"`
}

// Header is one record header.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// RecordRange is what a read from one partition returned, with the
// partition's bounds at the time of the read so that a reader can tell
// "nothing after this offset yet" from "deleted by retention".
type RecordRange struct {
	Records []Record
	// LogStart is the partition's first offset still in the log; End is
	// the offset the next record will get (the last stable offset, so a
	// read never waits on an open transaction).
	LogStart, End int64
}

// RecordReader is implemented by backends that can read a partition's
// records from an offset: the console's record viewer ("what is the record
// behind this stall?") and `berth records`. At most limit data records are
// returned, oldest first, starting at the first record at or after from
// (transaction markers and compacted gaps are skipped).
type RecordReader interface {
	ReadRecords(ctx context.Context, topic string, partition int32, from int64, limit int) (RecordRange, error)
}

// RecordAt asks for the first data record at or after Offset on a
// partition whose end (high watermark) is End.
type RecordAt struct {
	OffsetQuery
	End int64
}

// FirstRecordReader is implemented by backends that read the first data
// record at or after many positions at once (the lag monitor's event-time
// probe): one read for all, not one consumer per position. Answers are in
// query order; Found is false where no data record was found near the
// position (the caller may fall back to RecordReader).
type FirstRecordReader interface {
	FirstRecords(ctx context.Context, queries []RecordAt) ([]FirstRecord, error)
}

// FirstRecord is one answer of FirstRecords.
type FirstRecord struct {
	Found  bool
	Record Record
}
