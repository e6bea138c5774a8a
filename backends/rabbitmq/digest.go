package rabbitmq

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"sort"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A message's content digest is what a plan approves and what execution
// checks before it sends: a message_id alone names a message, it does not
// pin it (anyone who can publish to the DLQ can reuse an approved id with
// another body). The digest covers the body, every property and every
// header except x-delivery-count, which a quorum queue changes on each
// delivery (browsing a quorum DLQ changes it). Header values are encoded
// with their AMQP type, so a number that turns into a string is a change.

const digestDomain = "berth-amqp-content/v1\n"

// volatileHeaders are changed by the broker while a message waits in a
// queue, without anyone changing the message.
var volatileHeaders = map[string]bool{"x-delivery-count": true}

// ContentDigest is the base64url (unpadded) SHA-256 of a delivery's
// content: body, properties and headers (x-delivery-count excepted).
func ContentDigest(d amqp.Delivery) string {
	h := sha256.New()
	h.Write([]byte(digestDomain))
	for _, s := range []string{d.ContentType, d.ContentEncoding, d.CorrelationId, d.ReplyTo, d.Expiration, d.MessageId, d.Type, d.UserId, d.AppId} {
		putBytes(h, []byte(s))
	}
	h.Write([]byte{d.DeliveryMode, d.Priority})
	putInt(h, timeValue(d.Timestamp))
	headers := amqp.Table{}
	for k, v := range d.Headers {
		if !volatileHeaders[k] {
			headers[k] = v
		}
	}
	putValue(h, headers)
	putBytes(h, d.Body)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// timeValue is an AMQP timestamp (whole seconds), 0 when unset.
func timeValue(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func putBytes(h hash.Hash, b []byte) {
	putInt(h, int64(len(b)))
	h.Write(b)
}

func putInt(h hash.Hash, n int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

// putValue writes a header value as a type tag and its value (tables with
// their keys sorted), so two encodings are equal only for equal values.
func putValue(h hash.Hash, v any) {
	tag := func(c byte) { h.Write([]byte{c}) }
	switch x := v.(type) {
	case nil:
		tag('V')
	case bool:
		tag('t')
		if x {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	case int8:
		tag('b')
		putInt(h, int64(x))
	case uint8:
		tag('B')
		putInt(h, int64(x))
	case int16:
		tag('s')
		putInt(h, int64(x))
	case uint16:
		tag('u')
		putInt(h, int64(x))
	case int32:
		tag('I')
		putInt(h, int64(x))
	case uint32:
		tag('i')
		putInt(h, int64(x))
	case int64:
		tag('l')
		putInt(h, x)
	case int:
		tag('l')
		putInt(h, int64(x))
	case float32:
		tag('f')
		putInt(h, int64(math.Float32bits(x)))
	case float64:
		tag('d')
		putInt(h, int64(math.Float64bits(x)))
	case amqp.Decimal:
		tag('D')
		putInt(h, int64(x.Scale))
		putInt(h, int64(x.Value))
	case string:
		tag('S')
		putBytes(h, []byte(x))
	case []byte:
		tag('x')
		putBytes(h, x)
	case time.Time:
		tag('T')
		putInt(h, timeValue(x))
	case amqp.Table:
		tag('F')
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		putInt(h, int64(len(keys)))
		for _, k := range keys {
			putBytes(h, []byte(k))
			putValue(h, x[k])
		}
	case []any:
		tag('A')
		putInt(h, int64(len(x)))
		for _, e := range x {
			putValue(h, e)
		}
	default:
		// amqp091 decodes no other type; anything else is still pinned.
		tag('?')
		putBytes(h, []byte(fmt.Sprintf("%T %v", v, v)))
	}
}
