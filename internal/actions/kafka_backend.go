package actions

import (
	"context"
	"time"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/config"
)

// The Kafka backend fitted to KafkaCluster and KafkaPlanStore: the one
// place in this package that names *kafka.Cluster and *kafka.PlanStore, so
// that the planner, the checks and the runs see only the interfaces and a
// test or another backend can stand in for them.

// NewPlanner returns a planner on a connected cluster, with the cluster's
// plan store.
func NewPlanner(cl *kafka.Cluster, cfg *config.Config) *Planner {
	return &Planner{Cluster: kafkaCluster{cl}, Store: KafkaStore(kafka.NewPlanStore(cl.Client())), Config: cfg, Now: time.Now}
}

// kafkaCluster is a *kafka.Cluster as a KafkaCluster.
type kafkaCluster struct{ *kafka.Cluster }

func (c kafkaCluster) OpenPublisher(ctx context.Context, planHash string) (Publisher, error) {
	tr, err := c.NewRedriveTransport(ctx, planHash)
	if err != nil {
		// A nil *RedriveTransport in a Publisher would not be nil.
		return nil, err
	}
	return tr, nil
}

// kafkaStore is a *kafka.PlanStore as a KafkaPlanStore.
type kafkaStore struct{ *kafka.PlanStore }

func (s kafkaStore) Pinned() KafkaPlanStore { return kafkaStore{s.PlanStore.Pinned()} }

// KafkaStore is s as the actions use it.
func KafkaStore(s *kafka.PlanStore) KafkaPlanStore { return kafkaStore{s} }

var (
	_ KafkaCluster   = kafkaCluster{}
	_ KafkaPlanStore = kafkaStore{}
)
