// Package redrive decides which dead-lettered records may go back and why:
// it parses the diagnostics DLQ records carry (Spring Kafka, Spring retry
// topics, Spring Cloud Stream, Kafka Connect and Berth's own redrive
// headers), extracts event ids and idempotency keys, groups records into
// failure classes, and runs the redrive checks over data handed to it. It
// does no I/O: the backend reads records, the system of record is queried by
// redrive/sor, and the results are passed in.
package redrive

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header is one record header. Names may repeat; order is kept.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// Conventions a DLQ record's headers can follow.
const (
	ConvSpringDLT    = "spring-dlt"    // kafka_dlt-* (DeadLetterPublishingRecoverer)
	ConvSpringRetry  = "spring-retry"  // kafka_original-*, retry_topic-* (@RetryableTopic)
	ConvSpringStream = "spring-stream" // x-original-*, x-exception-* (Cloud Stream binder)
	ConvConnect      = "connect"       // __connect.errors.* (Kafka Connect DLQ)
	ConvBerth        = "berth"         // berth-redrive-* (a record Berth redrove)
)

// Berth's own redrive headers, stamped on every record Berth redrives (the
// executor writes them; the loop guard and re-failure detection read them).
const (
	HeaderPlan    = "berth-redrive-plan"    // the plan hash (hex SHA-256)
	HeaderOrigin  = "berth-redrive-origin"  // DLQ coordinates: topic/partition/offset
	HeaderAttempt = "berth-redrive-attempt" // decimal: how many times Berth has redriven it
)

// FormatOrigin is the value of HeaderOrigin for a DLQ record.
func FormatOrigin(dlq string, partition int32, offset int64) string {
	return fmt.Sprintf("%s/%d/%d", dlq, partition, offset)
}

// ParseOrigin splits a HeaderOrigin value; the topic may itself contain '/'.
func ParseOrigin(s string) (topic string, partition int32, offset int64, err error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return "", 0, 0, fmt.Errorf("%s: %q is not topic/partition/offset", HeaderOrigin, s)
	}
	j := strings.LastIndexByte(s[:i], '/')
	if j <= 0 {
		return "", 0, 0, fmt.Errorf("%s: %q is not topic/partition/offset", HeaderOrigin, s)
	}
	p, err1 := strconv.ParseInt(s[j+1:i], 10, 32)
	o, err2 := strconv.ParseInt(s[i+1:], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 {
		return "", 0, 0, fmt.Errorf("%s: %q is not topic/partition/offset", HeaderOrigin, s)
	}
	return s[:j], int32(p), o, nil
}

// Origin is where a record was consumed from before it was dead-lettered
// (one "hop"). Has* say which fields the headers carried and decoded.
type Origin struct {
	Topic         string    `json:"topic"`
	Partition     int32     `json:"partition"`
	Offset        int64     `json:"offset"`
	Timestamp     time.Time `json:"timestamp,omitempty"`
	TimestampType string    `json:"timestamp_type,omitempty"`
	Group         string    `json:"consumer_group,omitempty"`
	HasPartition  bool      `json:"-"`
	HasOffset     bool      `json:"-"`
}

// Known reports whether the origin names a topic.
func (o Origin) Known() bool { return o.Topic != "" }

// Located reports whether the origin gives the exact source record.
func (o Origin) Located() bool {
	return o.Topic != "" && o.HasPartition && o.HasOffset && o.Partition >= 0 && o.Offset >= 0
}

// Diagnostics is what a DLQ record's headers say about it.
type Diagnostics struct {
	// Conventions found, in a fixed order.
	Conventions []string `json:"conventions"`
	// Hops are every origin recorded, oldest first: Spring appends a new set
	// of kafka_dlt-original-* headers each time a record is dead-lettered.
	Hops []Origin `json:"hops,omitempty"`
	// Exception is the exception class; Cause the root cause's class.
	Exception string `json:"exception,omitempty"`
	Cause     string `json:"cause,omitempty"`
	Message   string `json:"message,omitempty"`
	// KeyException is set when the key failed to deserialise.
	KeyException string `json:"key_exception,omitempty"`
	// StackTrace is kept for display (callers truncate); never forwarded.
	StackTrace string `json:"-"`
	// Attempts is the delivery attempt count the headers report (Spring
	// retry topics, Cloud Stream); 0 when none is given.
	Attempts int `json:"attempts,omitempty"`
	// Connect context.
	Connector string `json:"connector,omitempty"`
	Task      string `json:"task,omitempty"`
	Stage     string `json:"stage,omitempty"`
	// Berth's redrive headers from a previous redrive (last occurrence).
	RedrivePlan    string `json:"redrive_plan,omitempty"`
	RedriveOrigin  string `json:"redrive_origin,omitempty"`
	RedriveAttempt int    `json:"redrive_attempt,omitempty"`
	// Problems lists headers present but undecodable, each naming the header
	// and showing the raw bytes in hex: values are never coerced.
	Problems []string `json:"problems,omitempty"`
}

// FirstOrigin is the very first place the record failed (nil when unknown).
func (d Diagnostics) FirstOrigin() *Origin {
	if len(d.Hops) == 0 {
		return nil
	}
	o := d.Hops[0]
	return &o
}

// LastHop is the most recent place the record failed (nil when unknown):
// the default redrive target.
func (d Diagnostics) LastHop() *Origin {
	if len(d.Hops) == 0 {
		return nil
	}
	o := d.Hops[len(d.Hops)-1]
	return &o
}

// PriorRedrives is how many times the record has been redriven before: the
// larger of Berth's attempt header and the number of extra Spring origin
// sets (a record that was redriven and failed again carries two).
func (d Diagnostics) PriorRedrives() int {
	n := d.RedriveAttempt
	if h := len(d.Hops) - 1; h > n {
		n = h
	}
	return n
}

// Known reports whether any convention was recognised.
func (d Diagnostics) Known() bool { return len(d.Conventions) > 0 }

// headerSet is the set of names one convention uses for one origin.
type headerSet struct {
	conv                                               string
	topic, partition, offset, timestamp, tsType, group string
	exception, cause, message, stack, keyException     string
	numbersAsText                                      bool // Connect writes decimal strings
	tolerantNumbers                                    bool // Cloud Stream: binary if 4/8 bytes, else decimal
	connector, task, stage                             string
}

var conventions = []headerSet{
	{
		conv: ConvSpringDLT, topic: "kafka_dlt-original-topic", partition: "kafka_dlt-original-partition",
		offset: "kafka_dlt-original-offset", timestamp: "kafka_dlt-original-timestamp",
		tsType: "kafka_dlt-original-timestamp-type", group: "kafka_dlt-original-consumer-group",
		exception: "kafka_dlt-exception-fqcn", cause: "kafka_dlt-exception-cause-fqcn",
		message: "kafka_dlt-exception-message", stack: "kafka_dlt-exception-stacktrace",
		keyException: "kafka_dlt-key-exception-fqcn",
	},
	{
		conv: ConvSpringRetry, topic: "kafka_original-topic", partition: "kafka_original-partition",
		offset: "kafka_original-offset", timestamp: "kafka_original-timestamp",
		tsType:    "kafka_original-timestamp-type",
		exception: "kafka_exception-fqcn", cause: "kafka_exception-cause-fqcn",
		message: "kafka_exception-message", stack: "kafka_exception-stacktrace",
		keyException: "kafka_key-exception-fqcn",
	},
	{
		conv: ConvSpringStream, topic: "x-original-topic", partition: "x-original-partition",
		offset: "x-original-offset", timestamp: "x-original-timestamp",
		tsType:    "x-original-timestamp-type",
		exception: "x-exception-fqcn", message: "x-exception-message", stack: "x-exception-stacktrace",
		tolerantNumbers: true,
	},
	{
		conv: ConvConnect, topic: "__connect.errors.topic", partition: "__connect.errors.partition",
		offset:    "__connect.errors.offset",
		exception: "__connect.errors.exception.class.name", message: "__connect.errors.exception.message",
		stack: "__connect.errors.exception.stacktrace", numbersAsText: true,
		connector: "__connect.errors.connector.name", task: "__connect.errors.task.id", stage: "__connect.errors.stage",
	},
}

// Parse reads every known convention from headers. It never fails: a record
// in no known convention yields empty Diagnostics, and an undecodable value
// is reported in Problems with its bytes in hex.
func Parse(headers []Header) Diagnostics {
	var d Diagnostics
	all := map[string][][]byte{}
	for _, h := range headers {
		all[h.Key] = append(all[h.Key], h.Value)
	}
	for _, set := range conventions {
		if !set.present(all) {
			continue
		}
		d.Conventions = append(d.Conventions, set.conv)
		set.parse(all, &d)
	}
	if vs := all["retry_topic-attempts"]; len(vs) > 0 {
		if !contains(d.Conventions, ConvSpringRetry) {
			d.Conventions = append(d.Conventions, ConvSpringRetry)
		}
		v := vs[len(vs)-1]
		switch len(v) {
		case 1:
			d.Attempts = int(v[0])
		case 4:
			d.Attempts = int(int32(binary.BigEndian.Uint32(v)))
		default:
			d.problem("retry_topic-attempts", v, "expected 1 or 4 bytes")
		}
	}
	if vs := all["retry_topic-original-timestamp"]; len(vs) > 0 && len(d.Hops) > 0 && d.Hops[0].Timestamp.IsZero() {
		if ms, ok := bigInteger(vs[len(vs)-1]); ok {
			d.Hops[0].Timestamp = time.UnixMilli(ms).UTC()
		} else {
			d.problem("retry_topic-original-timestamp", vs[len(vs)-1], "expected a 1-8 byte big-endian integer")
		}
	}
	if d.Attempts == 0 {
		if vs := all["kafka_deliveryAttempt"]; len(vs) > 0 {
			if v := vs[len(vs)-1]; len(v) == 4 {
				d.Attempts = int(int32(binary.BigEndian.Uint32(v)))
			} else {
				d.problem("kafka_deliveryAttempt", v, "expected 4 bytes")
			}
		}
	}
	if vs := all[HeaderPlan]; len(vs) > 0 {
		d.Conventions = append(d.Conventions, ConvBerth)
		d.RedrivePlan = string(vs[len(vs)-1])
	}
	if vs := all[HeaderOrigin]; len(vs) > 0 {
		if !contains(d.Conventions, ConvBerth) {
			d.Conventions = append(d.Conventions, ConvBerth)
		}
		d.RedriveOrigin = string(vs[len(vs)-1])
		if _, _, _, err := ParseOrigin(d.RedriveOrigin); err != nil {
			d.problem(HeaderOrigin, vs[len(vs)-1], "expected topic/partition/offset")
		}
	}
	if vs := all[HeaderAttempt]; len(vs) > 0 {
		if !contains(d.Conventions, ConvBerth) {
			d.Conventions = append(d.Conventions, ConvBerth)
		}
		// Every occurrence counts: the highest attempt seen is how often it
		// was redriven (a DLPR that appends headers keeps the older ones).
		for _, v := range vs {
			n, err := strconv.Atoi(strings.TrimSpace(string(v)))
			if err != nil || n < 0 {
				d.problem(HeaderAttempt, v, "expected a non-negative decimal number")
				continue
			}
			if n > d.RedriveAttempt {
				d.RedriveAttempt = n
			}
		}
	}
	return d
}

func (s headerSet) present(all map[string][][]byte) bool {
	for _, name := range []string{s.topic, s.partition, s.offset, s.exception, s.message} {
		if name != "" && len(all[name]) > 0 {
			return true
		}
	}
	return false
}

func (s headerSet) parse(all map[string][][]byte, d *Diagnostics) {
	// Origins: the i-th occurrence of each original-* header belongs to the
	// i-th hop. The topic header (or, failing that, the longest of the
	// others) decides how many hops there are.
	n := 0
	for _, name := range []string{s.topic, s.partition, s.offset, s.timestamp} {
		if name != "" && len(all[name]) > n {
			n = len(all[name])
		}
	}
	hops := make([]Origin, n)
	for i := range hops {
		hops[i].Partition, hops[i].Offset = -1, -1
		if v, ok := nth(all[s.topic], i); ok {
			hops[i].Topic = string(v)
		}
		if v, ok := nth(all[s.partition], i); ok {
			if p, ok := s.int32(v); ok {
				hops[i].Partition, hops[i].HasPartition = p, p >= 0
			} else {
				d.problem(s.partition, v, s.expect(4))
			}
		}
		if v, ok := nth(all[s.offset], i); ok {
			if o, ok := s.int64(v); ok {
				hops[i].Offset, hops[i].HasOffset = o, o >= 0
			} else {
				d.problem(s.offset, v, s.expect(8))
			}
		}
		if v, ok := nth(all[s.timestamp], i); ok {
			if ms, ok := s.int64(v); ok {
				hops[i].Timestamp = time.UnixMilli(ms).UTC()
			} else {
				d.problem(s.timestamp, v, s.expect(8))
			}
		}
		if v, ok := nth(all[s.tsType], i); ok {
			hops[i].TimestampType = string(v)
		}
		if v, ok := nth(all[s.group], i); ok {
			hops[i].Group = string(v)
		}
	}
	// Connect writes "" / -1 for unknown values; keep only hops that say something.
	for _, h := range hops {
		if h.Topic != "" || h.HasPartition || h.HasOffset {
			d.Hops = append(d.Hops, h)
		}
	}
	// Exceptions: the latest occurrence (Spring replaces them by default;
	// when it keeps them, the last is the most recent failure).
	if d.Exception == "" {
		d.Exception = last(all[s.exception])
	}
	if d.Cause == "" {
		d.Cause = last(all[s.cause])
	}
	if d.Message == "" {
		d.Message = last(all[s.message])
	}
	if d.StackTrace == "" {
		d.StackTrace = last(all[s.stack])
	}
	if d.KeyException == "" {
		d.KeyException = last(all[s.keyException])
	}
	if s.connector != "" {
		d.Connector, d.Task, d.Stage = last(all[s.connector]), last(all[s.task]), last(all[s.stage])
	}
}

func (s headerSet) expect(n int) string {
	if s.numbersAsText {
		return "expected a decimal number"
	}
	if s.tolerantNumbers {
		return fmt.Sprintf("expected %d big-endian bytes or a decimal number", n)
	}
	return fmt.Sprintf("expected %d big-endian bytes", n)
}

func (s headerSet) int32(v []byte) (int32, bool) {
	if !s.numbersAsText && len(v) == 4 {
		return int32(binary.BigEndian.Uint32(v)), true
	}
	if s.numbersAsText || s.tolerantNumbers {
		n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 32)
		return int32(n), err == nil
	}
	return 0, false
}

func (s headerSet) int64(v []byte) (int64, bool) {
	if !s.numbersAsText && len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v)), true
	}
	if s.numbersAsText || s.tolerantNumbers {
		n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// bigInteger decodes Java's BigInteger.toByteArray(): minimal-length
// two's-complement big-endian, 1 to 8 bytes here.
func bigInteger(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 8 {
		return 0, false
	}
	var n int64
	if v[0]&0x80 != 0 {
		n = -1
	}
	for _, b := range v {
		n = n<<8 | int64(b)
	}
	return n, true
}

func (d *Diagnostics) problem(name string, v []byte, why string) {
	const max = 32
	raw := v
	more := ""
	if len(raw) > max {
		raw, more = raw[:max], "..."
	}
	d.Problems = append(d.Problems, fmt.Sprintf("%s: %d bytes (%s%s), %s", name, len(v), hex.EncodeToString(raw), more, why))
}

func nth(vs [][]byte, i int) ([]byte, bool) {
	if i < len(vs) {
		return vs[i], true
	}
	return nil, false
}

func last(vs [][]byte) string {
	if len(vs) == 0 {
		return ""
	}
	return string(vs[len(vs)-1])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// DiagnosticPrefixes are the header name prefixes that describe a failure,
// not the message: the executor strips them when redriving (a stack trace
// must never travel on), and keeps every other header.
var DiagnosticPrefixes = []string{
	"kafka_dlt-", "kafka_original-", "kafka_exception-", "kafka_key-exception-",
	"retry_topic-", "x-original-", "x-exception-", "__connect.errors.",
	"springDeserializerException",
}

// IsDiagnostic reports whether a header is DLQ diagnostics (see DiagnosticPrefixes).
func IsDiagnostic(name string) bool {
	for _, p := range DiagnosticPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
