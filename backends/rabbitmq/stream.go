package rabbitmq

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
)

// streamExtent reads the first message and the last chunk of a stream to
// fill its first and last offsets and publisher timestamps. Reading a
// stream is non-destructive (consumers never remove messages); basic.get
// and nack are never sent: on a stream they close the whole connection.
func (c *Client) streamExtent(ctx context.Context, q *backends.Queue) error {
	first, err := c.streamRead(ctx, q.Name, "first", 1)
	if err != nil {
		return err
	}
	if len(first) == 0 {
		return nil
	}
	last, err := c.streamRead(ctx, q.Name, "last", 1000)
	if err != nil {
		return err
	}
	si := q.Stream
	if si == nil {
		si = &backends.StreamInfo{}
		q.Stream = si
	}
	set := func(d amqp.Delivery, off **int64, ts **time.Time) {
		if n, ok := asInt(d.Headers["x-stream-offset"]); ok {
			*off = &n
		}
		if !d.Timestamp.IsZero() {
			t := d.Timestamp.UTC()
			*ts = &t
		}
	}
	set(first[0], &si.FirstOffset, &si.FirstTimestamp)
	if len(last) > 0 {
		set(last[len(last)-1], &si.LastOffset, &si.LastTimestamp)
	}
	return nil
}

// streamRead consumes from offset spec and returns what arrives until the
// flow pauses (the stream's tail) or max messages; bounded by ctx.
func (c *Client) streamRead(ctx context.Context, name string, offset any, max int) ([]amqp.Delivery, error) {
	var out []amqp.Delivery
	_, err := c.streamEach(ctx, name, offset, max, func(d amqp.Delivery) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// streamEach is streamRead handing each delivery to each as it arrives (an
// error from each stops it); it returns how many arrived.
func (c *Client) streamEach(ctx context.Context, name string, offset any, max int, each func(amqp.Delivery) error) (int, error) {
	ch, err := c.channel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	if err := ch.Qos(max, 0, false); err != nil {
		return 0, c.amqpErr(err)
	}
	ds, err := ch.Consume(name, "", false, false, false, false, amqp.Table{"x-stream-offset": offset})
	if err != nil {
		return 0, c.amqpErr(err)
	}
	n := 0
	// The tail is reached when nothing more arrives for a moment: a stream
	// consumer waits for new messages forever otherwise.
	idle := time.NewTimer(300 * time.Millisecond)
	defer idle.Stop()
	for n < max {
		select {
		case d, ok := <-ds:
			if !ok {
				return n, nil
			}
			n++
			if err := each(d); err != nil {
				return n, err
			}
			idle.Reset(100 * time.Millisecond)
		case <-idle.C:
			return n, nil
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	return n, nil
}
