package redrive

import (
	"encoding/binary"
	"math/big"
	"strings"
	"testing"
	"time"
)

func be32(n int32) []byte         { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(n)); return b }
func be64(n int64) []byte         { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(n)); return b }
func h(k string, v []byte) Header { return Header{Key: k, Value: v} }
func hs(k, v string) Header       { return Header{Key: k, Value: []byte(v)} }

// springDLT returns the header set DeadLetterPublishingRecoverer writes.
func springDLT(topic string, partition int32, offset, ts int64) []Header {
	return []Header{
		hs("kafka_dlt-original-topic", topic),
		h("kafka_dlt-original-partition", be32(partition)),
		h("kafka_dlt-original-offset", be64(offset)),
		h("kafka_dlt-original-timestamp", be64(ts)),
		hs("kafka_dlt-original-timestamp-type", "CreateTime"),
		hs("kafka_dlt-original-consumer-group", "payments-capture"),
	}
}

func TestSpringDLTHeadersGiveOriginAndException(t *testing.T) {
	ts := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	hdrs := append(springDLT("payments", 3, 41234, ts.UnixMilli()),
		hs("kafka_dlt-exception-fqcn", "org.springframework.kafka.listener.ListenerExecutionFailedException"),
		hs("kafka_dlt-exception-cause-fqcn", "java.net.SocketTimeoutException"),
		hs("kafka_dlt-exception-message", "Listener failed; Read timed out after 3000 ms"),
		hs("kafka_dlt-exception-stacktrace", "java.net.SocketTimeoutException: Read timed out\n\tat ..."),
	)
	d := Parse(hdrs)
	if len(d.Conventions) != 1 || d.Conventions[0] != ConvSpringDLT {
		t.Fatalf("conventions %v, want [spring-dlt]", d.Conventions)
	}
	o := d.LastHop()
	if o == nil || o.Topic != "payments" || o.Partition != 3 || o.Offset != 41234 || !o.Timestamp.Equal(ts) || o.TimestampType != "CreateTime" || o.Group != "payments-capture" || !o.Located() {
		t.Fatalf("origin %+v", o)
	}
	if d.ExceptionName() != "java.net.SocketTimeoutException" || d.Exception != "org.springframework.kafka.listener.ListenerExecutionFailedException" {
		t.Fatalf("exception %q cause %q", d.Exception, d.Cause)
	}
	if !strings.Contains(d.Message, "Read timed out") || d.StackTrace == "" || len(d.Problems) != 0 || d.PriorRedrives() != 0 {
		t.Fatalf("diagnostics %+v", d)
	}
}

func TestSpringDLTRepeatedOriginsKeepFirstAndLastHop(t *testing.T) {
	// Dead-lettered from payments, redriven by Berth to payments-retry, failed again.
	hdrs := springDLT("payments", 1, 10, 1000)
	hdrs = append(hdrs, hs("kafka_dlt-exception-fqcn", "First"))
	hdrs = append(hdrs, hs(HeaderPlan, "abc"), hs(HeaderOrigin, "payments.DLT/1/7"), hs(HeaderAttempt, "1"))
	hdrs = append(hdrs, springDLT("payments-retry", 0, 99, 2000)...)
	hdrs = append(hdrs, hs("kafka_dlt-exception-fqcn", "Second"))
	d := Parse(hdrs)
	if len(d.Hops) != 2 {
		t.Fatalf("hops %d, want 2", len(d.Hops))
	}
	if f := d.FirstOrigin(); f.Topic != "payments" || f.Partition != 1 || f.Offset != 10 {
		t.Fatalf("first origin %+v", f)
	}
	if l := d.LastHop(); l.Topic != "payments-retry" || l.Partition != 0 || l.Offset != 99 || l.Timestamp.UnixMilli() != 2000 {
		t.Fatalf("last hop %+v", l)
	}
	if d.Exception != "Second" {
		t.Fatalf("exception %q, want the latest", d.Exception)
	}
	if d.RedriveAttempt != 1 || d.RedrivePlan != "abc" || d.RedriveOrigin != "payments.DLT/1/7" || d.PriorRedrives() != 1 {
		t.Fatalf("berth headers %+v", d)
	}
	if !contains(d.Conventions, ConvBerth) {
		t.Fatalf("conventions %v lack berth", d.Conventions)
	}
}

func TestThreeSpringHopsCountTwoPriorRedrives(t *testing.T) {
	var hdrs []Header
	for i := 0; i < 3; i++ {
		hdrs = append(hdrs, springDLT("orders", 0, int64(i), 1)...)
	}
	if n := Parse(hdrs).PriorRedrives(); n != 2 {
		t.Fatalf("prior redrives %d, want 2", n)
	}
	// Berth's attempt header wins when higher; the highest occurrence counts.
	hdrs = append(hdrs, hs(HeaderAttempt, "4"), hs(HeaderAttempt, "3"))
	if n := Parse(hdrs).PriorRedrives(); n != 4 {
		t.Fatalf("prior redrives %d, want 4", n)
	}
}

func TestSpringRetryTopicHeaders(t *testing.T) {
	due := big.NewInt(1764403200123).Bytes() // 6 bytes, BigInteger.toByteArray for a positive value
	orig := big.NewInt(1764403100000).Bytes()
	hdrs := []Header{
		hs("kafka_original-topic", "shipment-jobs"),
		h("kafka_original-partition", be32(2)),
		h("kafka_original-offset", be64(77)),
		hs("kafka_exception-fqcn", "org.springframework.kafka.listener.ListenerExecutionFailedException"),
		hs("kafka_exception-cause-fqcn", "com.harborcart.ValidationException"),
		hs("kafka_exception-message", "field weight_grams is invalid: -5"),
		h("retry_topic-attempts", be32(4)),
		h("retry_topic-backoff-timestamp", due),
		h("retry_topic-original-timestamp", orig),
		hs("kafka_dlt-original-consumer-group", "shipper"), // the quirk: retry topics use the DLT name for the group
	}
	d := Parse(hdrs)
	if !contains(d.Conventions, ConvSpringRetry) {
		t.Fatalf("conventions %v", d.Conventions)
	}
	o := d.LastHop()
	if o == nil || o.Topic != "shipment-jobs" || o.Partition != 2 || o.Offset != 77 {
		t.Fatalf("origin %+v", o)
	}
	if o.Timestamp.UnixMilli() != 1764403100000 {
		t.Fatalf("original timestamp from BigInteger bytes: %v", o.Timestamp)
	}
	if d.Attempts != 4 || d.ExceptionName() != "com.harborcart.ValidationException" || len(d.Problems) != 0 {
		t.Fatalf("diagnostics %+v", d)
	}
	// Older Spring wrote the attempt count in one byte.
	d = Parse([]Header{h("retry_topic-attempts", []byte{3})})
	if d.Attempts != 3 {
		t.Fatalf("1-byte attempts %d", d.Attempts)
	}
}

func TestConnectHeadersAreDecimalText(t *testing.T) {
	hdrs := []Header{
		hs("__connect.errors.topic", "orders"),
		hs("__connect.errors.partition", "5"),
		hs("__connect.errors.offset", "123456789012"),
		hs("__connect.errors.connector.name", "jdbc-sink"),
		hs("__connect.errors.task.id", "0"),
		hs("__connect.errors.stage", "VALUE_CONVERTER"),
		hs("__connect.errors.class.name", "org.apache.kafka.connect.json.JsonConverter"),
		hs("__connect.errors.exception.class.name", "org.apache.kafka.connect.errors.DataException"),
		hs("__connect.errors.exception.message", "Converting byte[] to Kafka Connect data failed due to serialization error"),
	}
	d := Parse(hdrs)
	o := d.LastHop()
	if o == nil || o.Topic != "orders" || o.Partition != 5 || o.Offset != 123456789012 || !o.Located() {
		t.Fatalf("origin %+v", o)
	}
	if d.Connector != "jdbc-sink" || d.Stage != "VALUE_CONVERTER" || d.Exception != "org.apache.kafka.connect.errors.DataException" {
		t.Fatalf("diagnostics %+v", d)
	}
	// Unknown context is "" / "-1": no located origin.
	d = Parse([]Header{hs("__connect.errors.topic", ""), hs("__connect.errors.partition", "-1"), hs("__connect.errors.offset", "-1"), hs("__connect.errors.exception.message", "x")})
	if d.LastHop() != nil || !d.Known() {
		t.Fatalf("unknown connect origin gave %+v", d)
	}
}

func TestSpringCloudStreamAcceptsBinaryOrDecimal(t *testing.T) {
	d := Parse([]Header{hs("x-original-topic", "a"), h("x-original-partition", be32(1)), hs("x-original-offset", "42")})
	if o := d.LastHop(); o == nil || o.Partition != 1 || o.Offset != 42 {
		t.Fatalf("origin %+v problems %v", o, d.Problems)
	}
}

func TestMalformedValuesAreReportedNotCoerced(t *testing.T) {
	hdrs := []Header{
		hs("kafka_dlt-original-topic", "payments"),
		h("kafka_dlt-original-partition", []byte{0, 1, 2}),    // 3 bytes
		hs("kafka_dlt-original-offset", "12"),                 // text where 8 bytes belong
		h("kafka_dlt-original-timestamp", []byte{1, 2, 3, 4}), // 4 bytes
		hs("__connect.errors.topic", "t"),
		hs("__connect.errors.partition", "five"),
		h("retry_topic-attempts", []byte{0, 0}),
		hs(HeaderAttempt, "many"),
		hs(HeaderOrigin, "nonsense"),
	}
	d := Parse(hdrs)
	want := []string{
		"kafka_dlt-original-partition: 3 bytes (000102), expected 4 big-endian bytes",
		"kafka_dlt-original-offset: 2 bytes (3132), expected 8 big-endian bytes",
		"kafka_dlt-original-timestamp: 4 bytes (01020304), expected 8 big-endian bytes",
		"__connect.errors.partition: 4 bytes (66697665), expected a decimal number",
		"retry_topic-attempts: 2 bytes (0000), expected 1 or 4 bytes",
		"berth-redrive-attempt: 4 bytes (6d616e79), expected a non-negative decimal number",
		"berth-redrive-origin: 8 bytes (6e6f6e73656e7365), expected topic/partition/offset",
	}
	for _, w := range want {
		if !contains(d.Problems, w) {
			t.Errorf("missing problem %q in %q", w, d.Problems)
		}
	}
	o := d.FirstOrigin()
	if o == nil || o.Topic != "payments" || o.HasPartition || o.HasOffset || o.Located() {
		t.Fatalf("a malformed origin must not be located: %+v", o)
	}
}

func TestUnknownConventionYieldsNothing(t *testing.T) {
	d := Parse([]Header{hs("traceparent", "00-abc"), hs("content-type", "application/json")})
	if d.Known() || d.LastHop() != nil || len(d.Problems) != 0 || d.PriorRedrives() != 0 {
		t.Fatalf("got %+v", d)
	}
}

func TestOriginHeaderRoundTrip(t *testing.T) {
	s := FormatOrigin("team/a.DLT", 3, 99)
	topic, p, o, err := ParseOrigin(s)
	if err != nil || topic != "team/a.DLT" || p != 3 || o != 99 {
		t.Fatalf("%q -> %q %d %d %v", s, topic, p, o, err)
	}
	for _, bad := range []string{"", "a/1", "/1/2", "a/x/2", "a/1/-2"} {
		if _, _, _, err := ParseOrigin(bad); err == nil {
			t.Errorf("ParseOrigin(%q) accepted", bad)
		}
	}
}

func TestDiagnosticHeadersAreStrippedByPrefix(t *testing.T) {
	for _, n := range []string{"kafka_dlt-exception-stacktrace", "kafka_original-topic", "retry_topic-attempts", "__connect.errors.stage", "x-exception-message"} {
		if !IsDiagnostic(n) {
			t.Errorf("%s should be diagnostic", n)
		}
	}
	for _, n := range []string{"traceparent", HeaderPlan, "idempotency-key"} {
		if IsDiagnostic(n) {
			t.Errorf("%s must be kept", n)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("kafka_dlt-original-partition", []byte{0, 0, 0, 1}, "kafka_dlt-original-offset", []byte{1})
	f.Add("__connect.errors.offset", []byte("-1"), "retry_topic-original-timestamp", []byte{0x80})
	f.Add(HeaderAttempt, []byte("2"), HeaderOrigin, []byte("a/1/2"))
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2 []byte) {
		hdrs := []Header{{k1, v1}, {k2, v2}, {k1, v2}}
		d := Parse(hdrs)
		if d.PriorRedrives() < 0 {
			t.Fatalf("negative prior redrives")
		}
		for _, o := range d.Hops {
			if o.Located() && (o.Partition < 0 || o.Offset < 0) {
				t.Fatalf("located origin with negative coordinates %+v", o)
			}
		}
		_ = Normalise(string(v1))
		f, _ := ParseField("header:" + k1)
		f.Extract(hdrs, v2)
		ParseOrigin(string(v1))
	})
}
