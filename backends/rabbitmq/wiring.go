package rabbitmq

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/berth-dev/berth/backends"
)

// Wiring resolves a queue's dead-lettering and limits from its x-arguments
// and its effective policy definition, the way RabbitMQ 3.10 does: for the
// dead-letter exchange, routing key and overflow the argument wins; for the
// numeric limits (TTL, lengths, delivery limit) the lower of the two applies.
func Wiring(args, policy map[string]any) backends.QueueWiring {
	w := backends.QueueWiring{From: map[string]string{}}
	str := func(field, arg, pol string) *string {
		if v, ok := args[arg].(string); ok {
			w.From[field] = "argument"
			return &v
		}
		if v, ok := policy[pol].(string); ok {
			w.From[field] = "policy"
			return &v
		}
		return nil
	}
	num := func(field, arg, pol string) *int64 {
		a, aok := asInt(args[arg])
		p, pok := asInt(policy[pol])
		switch {
		case aok && pok:
			if p < a {
				w.From[field] = "policy"
				return &p
			}
			w.From[field] = "argument"
			return &a
		case aok:
			w.From[field] = "argument"
			return &a
		case pok:
			w.From[field] = "policy"
			return &p
		}
		return nil
	}
	w.DeadLetterExchange = str("dead_letter_exchange", "x-dead-letter-exchange", "dead-letter-exchange")
	w.DeadLetterRoutingKey = str("dead_letter_routing_key", "x-dead-letter-routing-key", "dead-letter-routing-key")
	w.Overflow = str("overflow", "x-overflow", "overflow")
	w.DeliveryLimit = num("delivery_limit", "x-delivery-limit", "delivery-limit")
	w.MessageTTLMs = num("message_ttl_ms", "x-message-ttl", "message-ttl")
	w.MaxLength = num("max_length", "x-max-length", "max-length")
	w.MaxLengthBytes = num("max_length_bytes", "x-max-length-bytes", "max-length-bytes")
	if len(w.From) == 0 {
		w.From = nil
	}
	return w
}

// asInt reads an integer from a decoded JSON or AMQP table value.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n == math.Trunc(n) {
			return int64(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}
