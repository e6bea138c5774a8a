package rabbitmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// browseIDs browses q whole and returns the message ids read, in order.
func browseIDs(t *testing.T, c *Client, q string, limit int) ([]string, BrowseResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got []string
	res, err := c.BrowseEach(ctx, q, BrowseOptions{Limit: limit}, func(m Message) error {
		got = append(got, m.MessageID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, res
}

// A browse puts back what it read before it returns: a browse started
// right after it (`redrive show` after `redrive approve`) reads every
// message again, in order, on a classic and on a lazy queue. Read right
// after the channels close, the queue used to count 2,000 of 5,000 ready:
// it handles the closed channels after answering the count.
func TestBrowseRightAfterABrowseReadsEveryMessage(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	for _, mode := range []string{"classic", "lazy"} {
		t.Run(mode, func(t *testing.T) {
			q := uniq(t, "rebrowse")
			var args amqp.Table
			if mode == "lazy" {
				args = amqp.Table{"x-queue-mode": "lazy"}
			}
			declareQueue(t, conn, q, args)
			n := 10*browseSegment + 1234
			want := make([]string, n)
			msgs := make([]amqp.Publishing, n)
			for i := range msgs {
				want[i] = fmt.Sprintf("r%d", i)
				msgs[i] = amqp.Publishing{MessageId: want[i], Body: []byte(want[i]), DeliveryMode: amqp.Persistent}
			}
			publishConfirmed(t, conn, "", q, msgs...)
			c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
			for round := 1; round <= 3; round++ {
				got, res := browseIDs(t, c, q, n+1)
				if fmt.Sprint(got) != fmt.Sprint(want) || !res.Complete || res.Unseen != nil {
					t.Fatalf("browse %d read %d of %d (in order: %v, complete %v, unseen %v)", round, len(got), n, fmt.Sprint(got) == fmt.Sprint(want), res.Complete, res.Unseen)
				}
				if d := readyCount(t, conn, q); d != n {
					t.Fatalf("right after browse %d the queue counts %d ready, want %d", round, d, n)
				}
			}
		})
	}
}

// Messages another consumer holds unacknowledged cannot be seen by a
// browse: it says how many and by how many consumers (the management
// API's count), or, without the management API, that some are held. A
// browse right after it reads the same, the browse's own messages back.
func TestBrowseNamesWhatOtherConsumersHold(t *testing.T) {
	t.Parallel()
	conn := needRabbit(t)
	needManagement(t)
	q := uniq(t, "held")
	declareQueue(t, conn, q, nil)
	const n, held = 30, 4
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{MessageId: fmt.Sprintf("h%d", i)}
	}
	publishConfirmed(t, conn, "", q, msgs...)
	other, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Qos(held, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := other.Consume(q, "other", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < held; i++ {
		<-ds
	}
	c := testClient(t, Options{AMQPURL: amqpURL(), ManagementURL: mgmtURL()})
	for round := 1; round <= 2; round++ {
		got, res := browseIDs(t, c, q, n+1)
		if len(got) != n-held || got[0] != fmt.Sprintf("h%d", held) || !res.Complete {
			t.Fatalf("browse %d read %v (complete %v), want h%d..h%d", round, got, res.Complete, held, n-1)
		}
		if u := res.Unseen; u == nil || u.Consumers != 1 || u.Messages != held {
			t.Fatalf("browse %d: unseen %+v, want %d messages held by 1 consumer", round, u, held)
		}
		if want := "4 message(s) could not be seen: held unacknowledged by 1 other consumer(s)"; res.Unseen.String() != want {
			t.Fatalf("unseen says %q, want %q", res.Unseen, want)
		}
	}
	reduced := testClient(t, Options{AMQPURL: amqpURL()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := reduced.Browse(ctx, q, BrowseOptions{Limit: n + 1, QueueType: "classic"})
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Unseen; res.Read != n-held || u == nil || u.Consumers != 1 || u.Messages != -1 {
		t.Fatalf("reduced mode: read %d, unseen %+v; want %d read and 1 consumer holding an unknown number", res.Read, u, n-held)
	}
}
