package rabbitmq

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/redrive"
)

func TestContentDigestPinsEverythingButTheDeliveryCount(t *testing.T) {
	base := func() amqp.Delivery {
		return amqp.Delivery{MessageId: "m1", ContentType: "application/json", Timestamp: time.Unix(1_700_000_000, 0),
			Headers: amqp.Table{"n": int32(7), "x-delivery-count": int64(0), "x-death": []any{amqp.Table{"queue": "work", "count": int64(1)}}},
			Body:    []byte(`{"eventId":"e1"}`)}
	}
	want := ContentDigest(base())
	same := base()
	same.Headers["x-delivery-count"] = int64(3) // a quorum queue's redelivery
	same.Redelivered = true
	if got := ContentDigest(same); got != want {
		t.Errorf("a redelivery changed the digest")
	}
	changes := map[string]func(d *amqp.Delivery){
		"body":                 func(d *amqp.Delivery) { d.Body = []byte(`{"eventId":"e1" }`) },
		"header value":         func(d *amqp.Delivery) { d.Headers["n"] = int32(8) },
		"header type":          func(d *amqp.Delivery) { d.Headers["n"] = int64(7) },
		"header added":         func(d *amqp.Delivery) { d.Headers["extra"] = "" },
		"x-death":              func(d *amqp.Delivery) { d.Headers["x-death"] = []any{amqp.Table{"queue": "work", "count": int64(2)}} },
		"property":             func(d *amqp.Delivery) { d.ContentType = "text/plain" },
		"timestamp":            func(d *amqp.Delivery) { d.Timestamp = d.Timestamp.Add(time.Second) },
		"body moved to header": func(d *amqp.Delivery) { d.Body = nil; d.Headers["b"] = []byte(`{"eventId":"e1"}`) },
	}
	for name, change := range changes {
		d := base()
		change(&d)
		if ContentDigest(d) == want {
			t.Errorf("%s: changed without changing the digest", name)
		}
	}
}

// An edited plan file is refused with a typed error the CLI audits as a
// refusal (it matched the error's text before).
func TestReadPlanRefusesAnEditedFileWithATypedError(t *testing.T) {
	m := Message{Position: 0, EventID: "m0", Digest: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", Death: DeathInfo{Deaths: []Death{{Queue: "q", Reason: "rejected", RoutingKeys: []string{"q"}}}}}
	p, err := redrive.MakeQueuePlan([]redrive.QueueMessage{m.Facts()}, redrive.QueueSelection{All: true}, redrive.PolicySnapshot{}, redrive.QueueCheckInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster = "rabbit@test"
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := WritePlan(path, p); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlan(path); err != nil {
		t.Fatalf("an intact plan: %v", err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"0:m0"`, `"0:m9"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlan(path); !errors.Is(err, ErrPlanEdited) {
		t.Fatalf("an edited plan: %v, want ErrPlanEdited", err)
	}
}

// A plan made by one Berth is executed by another: the digest of the same
// content must never change between versions (a change would skip every
// message of the plans already approved as payload_changed). Pinned here
// for a message carrying every AMQP field type amqp091 decodes.
func TestContentDigestIsStableAcrossVersions(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	d := amqp.Delivery{ContentType: "application/json", ContentEncoding: "gzip", CorrelationId: "c1", ReplyTo: "r", Expiration: "60000",
		MessageId: "m1", Type: "payment", UserId: "guest", AppId: "svc", DeliveryMode: 2, Priority: 3, Timestamp: at,
		Headers: amqp.Table{"nil": nil, "t": true, "f": false, "b": int8(-1), "B": uint8(2), "s": int16(-3), "u": uint16(4), "I": int32(-5),
			"i": uint32(6), "l": int64(-7), "float": float32(1.5), "double": 2.25, "dec": amqp.Decimal{Scale: 2, Value: 1234}, "str": "v",
			"bytes": []byte{0, 1}, "time": at, "x-delivery-count": int64(9),
			"x-death": []any{amqp.Table{"queue": "work", "count": int64(1), "routing-keys": []any{"work"}, "time": at}}},
		Body: []byte(`{"eventId":"e1"}`)}
	const want = "wkQrease1dQRQw2ELFyzt1BG0YzFrUovefHefpK3oYU"
	if got := ContentDigest(d); got != want {
		t.Errorf("ContentDigest = %s, want %s (the digest of unchanged content changed)", got, want)
	}
}
