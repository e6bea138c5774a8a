package actions_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/rabbittest"
	"github.com/berth-dev/berth/redrive"
)

// TestRabbitPlanMakesRoomForItsRecordsOnce: a RabbitMQ plan's records (160
// bytes each) get their room once, for the DLQ's ready messages, before
// the browse. Grown by appending instead, a million records were copied a
// dozen times, old and new arrays held at once, and the plan took 610 MiB
// of peak RSS for about 250 MB live, over the 512 MiB a million-message
// plan must fit.
func TestRabbitPlanMakesRoomForItsRecordsOnce(t *testing.T) {
	conn := rabbittest.Need(t)
	ctx := context.Background()
	tp := rabbittest.NewTopology(t, conn, nil, nil)
	const n = 3000
	rabbittest.PublishConfirmed(t, conn, "", tp.DLQ, rabbittest.WorkMessages(n)...)
	cl, err := rabbitmq.Dial(ctx, rabbitmq.Options{AMQPURL: rabbittest.AMQPURL(), ManagementURL: rabbittest.ManagementURL(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	l, err := rabbitmq.OpenLedger(ctx, filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rr := &actions.RabbitRedrive{Config: &config.Config{}}
	p, _, err := rr.MakePlan(ctx, cl, l, actions.RabbitPlanInput{DLQ: tp.DLQ, Sel: redrive.QueueSelection{All: true}, Read: 10 * n, Rate: 100, Window: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != n || cap(p.Records) != n {
		t.Fatalf("a plan of a DLQ of %d messages has %d records in room for %d; want them in room made for %d at once", n, len(p.Records), cap(p.Records), n)
	}
}
