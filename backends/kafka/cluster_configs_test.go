package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// DescribeConfigs goes to one broker: when that broker does not answer, the
// topics and their offsets are still listed (configs missing, the topic's
// error saying why) rather than the whole answer failing — otherwise one
// sick broker fails `berth topics` whenever it is the one asked.
func TestTopicsAnswerWithoutConfigs(t *testing.T) {
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 9, 3, map[string]string{"min.insync.replicas": "1"})
	cl := dialCluster(t, kc)
	kc.ControlKey(int16(kmsg.DescribeConfigs), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		return nil, nil, true // never answers
	})
	// The silent broker holds the call to this deadline; the others must
	// answer within it, also under -race on a loaded CI machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	topics, err := cl.Topics(ctx)
	if err != nil {
		t.Fatalf("Topics failed on configs alone: %v", err)
	}
	// The broker asked for the configs may hold its other answers too (kfake
	// answers a connection in order); the other brokers' partitions answer.
	answered := 0
	for _, p := range topics[0].Partitions {
		if p.HighWatermark == 0 {
			answered++
		}
	}
	if len(topics) != 1 || len(topics[0].Partitions) != 9 || answered == 0 {
		t.Fatalf("topics %+v", topics)
	}
	if len(topics[0].Configs) != 0 || !strings.Contains(topics[0].Err, "configs") {
		t.Fatalf("configs %v, error %q: want none, and an error saying the configs were not read", topics[0].Configs, topics[0].Err)
	}
}
