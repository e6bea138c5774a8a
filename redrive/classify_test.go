package redrive

import (
	"testing"
	"time"
)

func TestNormaliseGroupsMessagesThatDifferOnlyInIds(t *testing.T) {
	cases := [][2]string{
		{"payment 4f1c2a9e-1b2c-4d5e-8f90-123456789abc declined after 3 tries", "payment <uuid> declined after <n> tries"},
		{"order ord-88123 not found (trace 9f86d081884c7d65)", "order <id> not found (trace <hex>)"},
		{"Read timed out after 3000 ms", "Read timed out after <n> ms"},
		{"  lots   of\n space ", "lots of space"},
	}
	for _, c := range cases {
		if got := Normalise(c[0]); got != c[1] {
			t.Errorf("Normalise(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	a := Normalise("order ord-1 failed: 502 from psp, id 0a1b2c3d4e")
	b := Normalise("order ord-77 failed: 503 from psp, id 99ffee1122")
	if a != b {
		t.Fatalf("%q != %q", a, b)
	}
}

func TestDefaultRulesJudgeTransientAndPermanent(t *testing.T) {
	cases := []struct{ exc, msg, want string }{
		{"java.net.SocketTimeoutException", "Read timed out", VerdictTransient},
		{"java.net.ConnectException", "Connection refused", VerdictTransient},
		{"com.harborcart.PspException", "PSP returned HTTP 503 Service Unavailable", VerdictTransient},
		{"org.springframework.kafka.support.serializer.DeserializationException", "failed to deserialize; nested exception", VerdictPermanent},
		{"javax.validation.ConstraintViolationException", "amount must be positive", VerdictPermanent},
		{"com.harborcart.PspException", "PSP returned status 422", VerdictPermanent},
		{"com.harborcart.Whatever", "the moon is full", VerdictUnknown},
	}
	for _, c := range cases {
		if got, _ := DefaultRules.Judge(c.exc, c.msg); got != c.want {
			t.Errorf("Judge(%s, %q) = %s, want %s", c.exc, c.msg, got, c.want)
		}
	}
	custom := MustRules(nil, []string{`(?i)moon`})
	if got, _ := custom.Judge("x", "the moon is full"); got != VerdictTransient {
		t.Fatalf("custom rule: %s", got)
	}
	if _, err := CompileRules([]string{"("}, nil); err == nil {
		t.Fatal("a bad pattern compiled")
	}
}

func parsedRec(p int32, off int64, ts time.Time, topic, exc, msg, value string) Parsed {
	hdrs := append(springDLT(topic, 0, off, ts.UnixMilli()), hs("kafka_dlt-exception-cause-fqcn", exc), hs("kafka_dlt-exception-message", msg))
	return ParseRecord(Record{Topic: topic + ".DLT", Partition: p, Offset: off, Timestamp: ts, Value: []byte(value), Headers: hdrs}, DefaultExtractors())
}

func TestClassifyCountsAndTimesPerClass(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	recs := []Parsed{
		parsedRec(0, 1, t0.Add(2*time.Minute), "payments", "java.net.SocketTimeoutException", "Read timed out after 3000 ms", `{"eventId":"e1"}`),
		parsedRec(0, 2, t0, "payments", "java.net.SocketTimeoutException", "Read timed out after 5000 ms", `{"eventId":"e2"}`),
		parsedRec(0, 3, t0.Add(time.Minute), "payments", "com.x.ValidationException", "amount -5 is invalid", `{"eventId":"e3"}`),
		parsedRec(0, 4, t0.Add(time.Minute), "shipments", "java.net.SocketTimeoutException", "Read timed out after 3000 ms", `{"eventId":"e4"}`),
		ParseRecord(Record{Topic: "x.DLT", Offset: 5, Timestamp: t0, Value: []byte("raw")}, DefaultExtractors()),
	}
	cs := Classify(recs, DefaultRules)
	if len(cs) != 4 {
		t.Fatalf("%d classes, want 4: %+v", len(cs), cs)
	}
	top := cs[0]
	if top.Count != 2 || top.OriginalTopic != "payments" || !top.Transient || !top.FirstSeen.Equal(t0) || !top.LastSeen.Equal(t0.Add(2*time.Minute)) || top.Pattern != "Read timed out after <n> ms" {
		t.Fatalf("top class %+v", top)
	}
	if recs[0].Class != top.ID || recs[1].Class != top.ID || recs[3].Class == top.ID {
		t.Fatal("records do not carry their class id")
	}
	for _, c := range cs {
		if c.OriginalTopic == "payments" && c.Exception == "com.x.ValidationException" && (c.Transient || c.Verdict != VerdictPermanent) {
			t.Fatalf("validation class %+v", c)
		}
		if c.OriginalTopic == "" && (c.Count != 1 || c.Verdict != VerdictUnknown) {
			t.Fatalf("unknown-convention class %+v", c)
		}
	}
	// Ids are stable across runs.
	if ClassOf("payments", "java.net.SocketTimeoutException", "Read timed out after <n> ms").ID != top.ID {
		t.Fatal("class id is not stable")
	}
}

// A payload that parsers read differently yields no key: a repeated JSON
// key on the field's path (Go and most parsers take the last, others the
// first or refuse) or content after the document. A redrive checking the
// system of record for one key while the consumer charges under the other
// would pay twice.
func TestFieldExtractionRefusesAmbiguousPayloads(t *testing.T) {
	f, err := ParseField("json:payment.key")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		value, want string
	}{
		{`{"payment":{"key":"k-1"}}`, "k-1"},
		{` {"payment" : {"amount": 5, "key": "k-1"}, "other": [1, {"key": 2}]} `, "k-1"},
		// Repeated keys elsewhere change nothing on the path.
		{`{"note":"a","note":"b","payment":{"key":"k-1"}}`, "k-1"},
		{`{"payment":{"key":"k-1","key":"k-2"}}`, ""},
		{`{"payment":{"key":"k-1"},"payment":{"key":"k-2"}}`, ""},
		{`{"payment":{"key":"k-1"},"payment":5}`, ""},
		{`{"payment":{"key":"k-1"}}{"payment":{"key":"k-2"}}`, ""},
		{`{"payment":{"key":"k-1"}} trailing`, ""},
		{`{"payment":{"key":"k-1"}`, ""},
		{`{"payment":{"key":"k-1", }}`, ""},
		{`{"payment":{"key":null}}`, ""},
		{`{"payment":{"key":{"id":1}}}`, ""},
		{`{"payment":{"key":12.50}}`, "12.50"},
	} {
		if got, ok := f.Extract(nil, []byte(c.value)); got != c.want || ok != (c.want != "") {
			t.Errorf("%s: got %q %v, want %q", c.value, got, ok, c.want)
		}
	}
	// Both fields of one policy read in one pass, each judged alone.
	x := Extractors{EventID: Field{Kind: "json", Name: "eventId"}, IdempotencyKey: Field{Kind: "json", Name: "payment.key"}}
	if ev, key := x.extract(nil, []byte(`{"eventId":"e-1","payment":{"key":"k-1","key":"k-2"}}`)); ev != "e-1" || key != "" {
		t.Errorf("extract: event id %q, key %q; want e-1 and no key", ev, key)
	}
	if ev, key := x.extract(nil, []byte(`{"eventId":"e-1","payment":{"key":"k-1"}} x`)); ev != "" || key != "" {
		t.Errorf("extract after trailing content: event id %q, key %q; want neither", ev, key)
	}
}

func TestFieldExtraction(t *testing.T) {
	value := []byte(`{"eventId":"ev-1","idempotencyKey":"pay-77","n":12345678901234567890,"payment":{"id":"p-9"},"flag":true}`)
	hdrs := []Header{hs("Idempotency-Key", "old"), hs("Idempotency-Key", "new"), hs("Tenant", "t-1"), hs("Tenant", "t-1")}
	cases := []struct {
		spec, want string
		ok         bool
	}{
		{"", "ev-1", true},
		{"json:idempotencyKey", "pay-77", true},
		{"json:n", "12345678901234567890", true},
		{"json:payment.id", "p-9", true},
		{"json:flag", "", false},
		{"json:missing", "", false},
		// Repeated with different values: which one a consumer reads
		// depends on its client, so none is taken.
		{"header:Idempotency-Key", "", false},
		{"header:Tenant", "t-1", true},
		{"header:absent", "", false},
	}
	for _, c := range cases {
		f, err := ParseField(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := f.Extract(hdrs, value); got != c.want || ok != c.ok {
			t.Errorf("%s: got %q %v, want %q %v", c.spec, got, ok, c.want, c.ok)
		}
	}
	if f, _ := ParseField(""); true {
		if _, ok := f.Extract(nil, []byte("not json")); ok {
			t.Error("non-JSON payload yielded an event id")
		}
	}
	for _, bad := range []string{"eventId", "xml:a", "json:", "header"} {
		if _, err := ParseField(bad); err == nil {
			t.Errorf("ParseField(%q) accepted", bad)
		}
	}
}
