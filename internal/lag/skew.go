package lag

import "sort"

// TopicSkewOf judges one topic's produce-rate skew: max / median over its
// partitions with known rates, naming partitions at HotRatio x the median or
// more (any producing partition when the median is 0). Topics producing less
// than MinHotRate in total, or with fewer than two partitions, have no hot
// partitions: there is nothing to compare or nothing worth flagging.
func TopicSkewOf(topic string, rates []PartitionRate, cfg Config) TopicSkew {
	cfg = cfg.WithDefaults()
	t := TopicSkew{Topic: topic, Partitions: len(rates), Hot: []HotPartition{}}
	var known []float64
	for _, r := range rates {
		if r.Known {
			known = append(known, r.Rate)
			t.TotalRate += r.Rate
			if r.Rate > t.MaxRate {
				t.MaxRate = r.Rate
			}
		}
	}
	if len(known) == 0 {
		return t
	}
	t.MedianRate = medianF(known)
	if t.MedianRate > 0 {
		t.Ratio = t.MaxRate / t.MedianRate
	} else if t.MaxRate > 0 {
		t.Unbounded = true
	}
	if len(known) < 2 || t.TotalRate < cfg.MinHotRate {
		return t
	}
	for _, r := range rates {
		if !r.Known || r.Rate <= 0 || r.Rate < cfg.HotRatio*t.MedianRate {
			continue
		}
		h := HotPartition{Topic: topic, Partition: r.Partition, Leader: r.Leader, Rate: r.Rate, Share: r.Rate / t.TotalRate}
		if t.MedianRate > 0 {
			h.Ratio = r.Rate / t.MedianRate
		}
		t.Hot = append(t.Hot, h)
	}
	sort.Slice(t.Hot, func(i, j int) bool { return t.Hot[i].Rate > t.Hot[j].Rate })
	return t
}

// BrokerShares counts, per broker, the partitions it leads and the produce
// traffic those partitions take (writes land on leaders), as shares of the
// cluster's. Brokers leading nothing are listed with zeros.
func BrokerShares(brokers []int32, rates []PartitionRate) []BrokerShare {
	idx := map[int32]int{}
	out := make([]BrokerShare, 0, len(brokers))
	for _, b := range brokers {
		if _, ok := idx[b]; !ok {
			idx[b] = len(out)
			out = append(out, BrokerShare{Broker: b})
		}
	}
	var leaders int
	var total float64
	for _, r := range rates {
		if r.Leader < 0 {
			continue
		}
		i, ok := idx[r.Leader]
		if !ok {
			i = len(out)
			idx[r.Leader] = i
			out = append(out, BrokerShare{Broker: r.Leader})
		}
		out[i].Leaders++
		leaders++
		if r.Known {
			out[i].ProduceRate += r.Rate
			total += r.Rate
		}
	}
	for i := range out {
		if leaders > 0 {
			out[i].LeaderShare = float64(out[i].Leaders) / float64(leaders)
		}
		if total > 0 {
			out[i].ProduceShare = out[i].ProduceRate / total
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Broker < out[j].Broker })
	return out
}

func medianF(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
