package lag

import (
	"strconv"
	"strings"

	"github.com/berth-dev/berth/backends"
)

// MinISR reads min.insync.replicas from a topic's configs (1, Kafka's
// default, when absent or unreadable).
func MinISR(configs map[string]string) int {
	if v, ok := configs[backends.ConfigMinISR]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// ClassifyISR classifies a partition's replication health (first match wins:
// offline, under min ISR, at min ISR, under-replicated, healthy) and counts
// leader elections as the leader-epoch increase since the previous refresh
// (prevEpoch < 0: no previous observation).
func ClassifyISR(p backends.Partition, minISR int, prevEpoch int32) PartitionHealth {
	if minISR <= 0 {
		minISR = 1
	}
	h := PartitionHealth{
		Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		Replicas: len(p.Replicas), ISR: len(p.ISR), MinISR: minISR, Err: p.Err,
	}
	switch {
	case p.Leader < 0 || strings.HasPrefix(p.Err, "LEADER_NOT_AVAILABLE"):
		h.Class = Offline
	case h.ISR < minISR:
		h.Class = UnderMinISR
	case h.ISR == minISR && h.ISR < h.Replicas:
		h.Class = AtMinISR
	case h.ISR < h.Replicas:
		h.Class = UnderReplicated
	}
	h.WritesBlocked = h.Class == UnderMinISR || h.Class == Offline
	if prevEpoch >= 0 && p.LeaderEpoch > prevEpoch {
		h.Elections = int(p.LeaderEpoch - prevEpoch)
	}
	return h
}
