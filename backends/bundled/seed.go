package bundled

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// SeedTopic is one topic of a seed topology.
type SeedTopic struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// threeDaysMs is HarborCart's orders retention: the recovery objective is a
// long weekend (seeds, Decision 7).
const threeDaysMs = 3 * 24 * 60 * 60 * 1000

// HarborCartTopics is the seeded topology, from the seeds' HarborCart
// reference policies. Every topic gets replication factor 3 (or the number
// of brokers, when fewer); orders requires two in-sync copies per write.
// DLTs have as many partitions as their source: Spring's dead-letter
// publisher keeps a record's partition.
func HarborCartTopics() []SeedTopic {
	return []SeedTopic{
		{Name: "orders", Partitions: 24, Configs: map[string]string{
			"min.insync.replicas": "2",
			"retention.ms":        strconv.Itoa(threeDaysMs),
			"cleanup.policy":      "delete",
		}},
		{Name: "orders.dlq", Partitions: 3},
		{Name: "shipment-jobs", Partitions: 6},
		{Name: "shipment-jobs.DLT", Partitions: 6},
		{Name: "payments", Partitions: 12},
		{Name: "payments.DLT", Partitions: 12},
		{Name: "orders-by-tenant", Partitions: 24},
		{Name: "customer-profile", Partitions: 6, Configs: map[string]string{
			"cleanup.policy": "compact",
		}},
	}
}

// seededMarker records in the data dir that the seed ran, so a restart never
// re-creates a topic the user deleted on purpose.
const seededMarker = "berth-seeded"

// seedOnce creates the HarborCart topics the first time a data dir is used.
// A seed interrupted half-way completes on the next start: only the marker
// says it is done.
func (b *Broker) seedOnce() error {
	marker := filepath.Join(b.dataDir, seededMarker)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	// Replication is 3, or the broker count when fewer: a topic cannot
	// require more in-sync copies than it has, or a healthy cluster reads as
	// under min ISR.
	rf := min(3, len(b.addrs))
	for _, t := range HarborCartTopics() {
		if b.kc.TopicInfo(t.Name) != nil {
			continue
		}
		if v, ok := t.Configs["min.insync.replicas"]; ok {
			if n, err := strconv.Atoi(v); err == nil && n > rf {
				t.Configs["min.insync.replicas"] = strconv.Itoa(rf)
			}
		}
		if err := b.kc.CreateTopic(t.Name, t.Partitions, t.Configs); err != nil {
			return fmt.Errorf("seed topic %s: %w", t.Name, err)
		}
	}
	if err := os.WriteFile(marker, []byte("harborcart\n"), 0o600); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}
