package capacity

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Results are the worksheet's figures for `berth capacity -o json`:
// unrounded but without binary noise (see significant), the unit in each
// name. A figure that does not apply to the inputs is null (drain_seconds
// when the backlog never drains, other_partition_per_s with one partition,
// the lag conversions when no lag was given).
type Results struct {
	IngestMiBPerS          float64  `json:"ingest_mib_per_s"`
	IngestTBPerDay         float64  `json:"ingest_tb_per_day"`
	IngestTiBPerDay        float64  `json:"ingest_tib_per_day"`
	RetentionLogicalTiB    float64  `json:"retention_logical_tib"`
	RetentionReplicatedTiB float64  `json:"retention_replicated_tib"`
	PeakMiBPerS            float64  `json:"peak_mib_per_s"`
	PeakGrossGiB           float64  `json:"peak_gross_gib"`
	PeakAboveBaselineGiB   float64  `json:"peak_above_baseline_gib"`
	DeliveriesPerS         float64  `json:"deliveries_per_s"`
	PeakDeliveriesPerS     float64  `json:"peak_deliveries_per_s"`
	ConsumersPerGroup      float64  `json:"consumers_per_group"`
	ConsumersTotal         float64  `json:"consumers_total"`
	PeakConsumersPerGroup  float64  `json:"peak_consumers_per_group"`
	PeakConsumersTotal     float64  `json:"peak_consumers_total"`
	EgressMiBPerS          float64  `json:"egress_mib_per_s"`
	PeakEgressMiBPerS      float64  `json:"peak_egress_mib_per_s"`
	PartitionCapPerS       float64  `json:"partition_cap_per_s"`
	MinPartitionsForPeak   float64  `json:"min_partitions_for_peak"`
	PeakBacklogEvents      float64  `json:"peak_backlog_events"`
	DrainSeconds           *float64 `json:"drain_seconds"`
	HotPartitionPerS       float64  `json:"hot_partition_per_s"`
	HotPartitionMultiple   float64  `json:"hot_partition_multiple"`
	OtherPartitionPerS     *float64 `json:"other_partition_per_s"`
	LagSecondsForEvents    *float64 `json:"lag_seconds_for_events,omitempty"`
	LagEventsForDuration   *float64 `json:"lag_events_for_duration,omitempty"`
	// CapReached is true when the peak exceeds the partition cap (a backlog
	// builds during the peak).
	CapReached bool `json:"cap_reached"`
}

// Results returns the figures; ok is false when an input is invalid (see Err).
func (w Worksheet) Results() (Results, bool) {
	if !w.Valid() {
		return Results{}, false
	}
	v := func(o Output) float64 { x, _ := w.Value(o); return significant(x) }
	opt := func(o Output) *float64 {
		if x, ok := w.Value(o); ok {
			x = significant(x)
			return &x
		}
		return nil
	}
	return Results{
		IngestMiBPerS:          v(IngestMiBPerS),
		IngestTBPerDay:         v(IngestTBPerDay),
		IngestTiBPerDay:        v(IngestTiBPerDay),
		RetentionLogicalTiB:    v(RetentionLogicalTiB),
		RetentionReplicatedTiB: v(RetentionReplicatedTiB),
		PeakMiBPerS:            v(PeakMiBPerS),
		PeakGrossGiB:           v(PeakGrossGiB),
		PeakAboveBaselineGiB:   v(PeakAboveBaselineGiB),
		DeliveriesPerS:         v(DeliveriesPerS),
		PeakDeliveriesPerS:     v(PeakDeliveriesPerS),
		ConsumersPerGroup:      v(ConsumersPerGroup),
		ConsumersTotal:         v(ConsumersTotal),
		PeakConsumersPerGroup:  v(PeakConsumersPerGroup),
		PeakConsumersTotal:     v(PeakConsumersTotal),
		EgressMiBPerS:          v(EgressMiBPerS),
		PeakEgressMiBPerS:      v(PeakEgressMiBPerS),
		PartitionCapPerS:       v(PartitionCapPerS),
		MinPartitionsForPeak:   v(MinPartitionsForPeak),
		PeakBacklogEvents:      v(PeakBacklogEvents),
		DrainSeconds:           opt(DrainSeconds),
		HotPartitionPerS:       v(HotPartitionPerS),
		HotPartitionMultiple:   v(HotPartitionMultiple),
		OtherPartitionPerS:     opt(OtherPartitionPerS),
		LagSecondsForEvents:    opt(LagSecondsForEvents),
		LagEventsForDuration:   opt(LagEventsForDuration),
		CapReached:             w.CapReached(),
	}, true
}

// Measurement is what live prefill observed for a topic (or, with Topic
// empty, for every topic together). Plain data: the backend fills it, the
// worksheet reads it.
type Measurement struct {
	Topic  string        // "" for all topics
	Window time.Duration // how long the produce rate was observed
	// AvgRate is the produce rate averaged over the window; PeakRate the
	// highest rate seen in any one-second interval of it (events/s).
	AvgRate, PeakRate float64
	// EventSize is the mean size of the sampled records (bytes: key +
	// value + headers); Sampled how many records were read for it.
	EventSize float64
	Sampled   int
	// Partitions, ReplicationFactor, Retention (0 when unlimited) and the
	// number of consumer groups with offsets committed on the topic.
	Partitions        int
	ReplicationFactor int
	Retention         time.Duration
	Groups            int
}

// Prefill writes the measured figures into the form (rates and sizes to
// two decimals, or four significant digits below 1) and returns the fields
// it filled. Figures that could not be measured (no records sampled,
// unlimited retention) are left as typed.
func (m Measurement) Prefill(f *Form) []Field {
	var filled []Field
	set := func(fd Field, v float64) {
		f[fd] = fd.Format(v)
		filled = append(filled, fd)
	}
	avg, peak := roundMeasured(m.AvgRate), roundMeasured(m.PeakRate)
	set(AvgRate, avg)
	set(PeakRate, max(peak, avg))
	if m.Sampled > 0 {
		set(EventSize, roundMeasured(m.EventSize))
	}
	if m.Partitions > 0 {
		set(Partitions, float64(m.Partitions))
	}
	if m.ReplicationFactor > 0 {
		set(ReplicationFactor, float64(m.ReplicationFactor))
	}
	if m.Retention > 0 {
		set(Retention, m.Retention.Seconds())
	}
	set(Groups, float64(m.Groups))
	return filled
}

// Source describes where the measurement came from ("orders, measured
// over 10s"; without a rate window just "orders, measured"), for marking
// prefilled fields.
func (m Measurement) Source() string {
	t := m.Topic
	if t == "" {
		t = "all topics"
	}
	if m.Window <= 0 {
		return t + ", measured" // rate not sampled: a point-in-time reading
	}
	return t + ", measured over " + FormatDurationInput(m.Window.Round(time.Second))
}

// significant removes binary floating-point noise from a figure: when the
// value is within 15 significant digits of a short decimal (12 digits or
// fewer), the short decimal is returned (0.1 × 3 is 0.3, not
// 0.30000000000000004); any other value is returned whole, unrounded.
func significant(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	s := strconv.FormatFloat(x, 'g', 15, 64)
	mantissa, _, _ := strings.Cut(s, "e")
	digits := strings.TrimLeft(strings.NewReplacer(".", "", "-", "").Replace(mantissa), "0")
	if len(digits) > 12 {
		return x
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return x
	}
	return r
}
