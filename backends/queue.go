package backends

import "time"

// Queue types are RabbitMQ's queue types.
const (
	QueueClassic = "classic"
	QueueQuorum  = "quorum"
	QueueStream  = "stream"
)

// Queue is one RabbitMQ queue as observed. Every statistic is a pointer:
// nil means RabbitMQ has not produced it (the management API emits stats
// every few seconds and omits keys until then, and reduced mode has no
// statistics at all). Unknown is never shown as zero.
type Queue struct {
	Name  string `json:"name"`
	Vhost string `json:"vhost"`
	// Type is classic, quorum or stream ("" when unknown: reduced mode).
	Type       string `json:"type"`
	State      string `json:"state,omitempty"`
	Node       string `json:"node,omitempty"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Exclusive  bool   `json:"exclusive"`

	Messages  *int64 `json:"messages"`
	Ready     *int64 `json:"ready"`
	Unacked   *int64 `json:"unacked"`
	Consumers *int   `json:"consumers"`
	// ConsumerUtilisation is the fraction of time the queue could deliver
	// to consumers immediately (0..1).
	ConsumerUtilisation *float64 `json:"consumer_utilisation"`

	// Rates are messages per second as the management API smooths them.
	// DeliverRate counts every delivery (deliver_get); AckRate acks;
	// NoAckRate deliveries to auto-ack consumers and gets (they leave the
	// queue without an ack).
	PublishRate *float64 `json:"publish_rate"`
	DeliverRate *float64 `json:"deliver_rate"`
	AckRate     *float64 `json:"ack_rate"`
	NoAckRate   *float64 `json:"no_ack_rate"`
	// RedeliverRate is the rate of redeliveries (requeues, crashed consumers).
	RedeliverRate *float64 `json:"redeliver_rate"`

	// HeadPublisherTimestamp is the AMQP `timestamp` property of the head
	// message, set by the publisher (its clock, its choice): RabbitMQ reports
	// it for classic queues only, and only when the head message carries one.
	HeadPublisherTimestamp *time.Time `json:"head_publisher_timestamp"`

	Wiring QueueWiring `json:"wiring"`
	// Stream is set for stream queues.
	Stream *StreamInfo `json:"stream,omitempty"`

	// Arguments are the queue's declared x-arguments, as strings.
	Arguments map[string]string `json:"arguments,omitempty"`
	Policy    string            `json:"policy,omitempty"`
	// OperatorPolicy is the operator policy applied, if any.
	OperatorPolicy string `json:"operator_policy,omitempty"`
	// Source is where the row came from: "management" (the HTTP API) or
	// "passive_declare" (reduced mode: ready count and consumers only).
	Source string `json:"source"`
}

// Total is ready + unacked when both are known (else Messages).
func (q Queue) Total() (int64, bool) {
	if q.Ready != nil && q.Unacked != nil {
		return *q.Ready + *q.Unacked, true
	}
	if q.Messages != nil {
		return *q.Messages, true
	}
	return 0, false
}

// DrainRate is the rate at which messages leave the queue: acks plus
// no-ack deliveries. Known only when the ack rate is known.
func (q Queue) DrainRate() (float64, bool) {
	if q.AckRate == nil {
		return 0, false
	}
	r := *q.AckRate
	if q.NoAckRate != nil {
		r += *q.NoAckRate
	}
	return r, true
}

// QueueWiring is where a queue's messages go when they die, and the limits
// that make them die. Each field is nil when not configured; From names
// where each configured value came from ("argument", "policy",
// "operator_policy").
type QueueWiring struct {
	DeadLetterExchange   *string `json:"dead_letter_exchange"`
	DeadLetterRoutingKey *string `json:"dead_letter_routing_key"`
	// DeliveryLimit is the quorum queue delivery limit (redeliveries before
	// the message is dead-lettered or dropped).
	DeliveryLimit  *int64            `json:"delivery_limit"`
	MessageTTLMs   *int64            `json:"message_ttl_ms"`
	MaxLength      *int64            `json:"max_length"`
	MaxLengthBytes *int64            `json:"max_length_bytes"`
	Overflow       *string           `json:"overflow"`
	From           map[string]string `json:"from,omitempty"`
}

// StreamInfo is what Berth knows of a stream's extent.
type StreamInfo struct {
	// Messages is the management API's count, offset-based and approximate.
	Messages *int64 `json:"messages"`
	// FirstTimestamp and LastTimestamp are the publisher timestamp
	// properties of the first and last readable messages (nil when those
	// messages carry none, or when they were not read).
	FirstTimestamp *time.Time `json:"first_publisher_timestamp"`
	LastTimestamp  *time.Time `json:"last_publisher_timestamp"`
	FirstOffset    *int64     `json:"first_offset"`
	LastOffset     *int64     `json:"last_offset"`
	// MaxAge and MaxLengthBytes are the retention settings (x-max-age,
	// x-max-length-bytes), "" / nil when unset.
	MaxAge         string `json:"max_age,omitempty"`
	MaxLengthBytes *int64 `json:"max_length_bytes"`
}

// QueueInventory is one listing of queues and what it could not see.
type QueueInventory struct {
	Queues []Queue `json:"queues"`
	// Mode is "management" or "reduced" (no management API: passive
	// declares of configured queues).
	Mode string `json:"mode"`
	// Missing says what reduced mode cannot show.
	Missing []string `json:"missing,omitempty"`
	// Warnings are partial failures (a configured queue that does not exist).
	Warnings []string `json:"warnings,omitempty"`
}
