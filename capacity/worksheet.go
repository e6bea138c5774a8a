package capacity

import (
	"fmt"
	"math"
	"strings"
)

// Units. The seed's worksheet quotes binary units (MiB, GiB, TiB) and, for
// the daily volume, decimal terabytes beside them; so does this package.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
	TiB = 1 << 40
	TB  = 1e12
	day = 86400.0 // seconds
)

// Output names one computed figure.
type Output int

// The outputs, in worksheet order. Their JSON names are the issue's
// snake_case names with the unit in the name.
const (
	IngestMiBPerS Output = iota
	IngestTBPerDay
	IngestTiBPerDay
	RetentionLogicalTiB
	RetentionReplicatedTiB
	PeakMiBPerS
	PeakGrossGiB
	PeakAboveBaselineGiB
	DeliveriesPerS
	PeakDeliveriesPerS
	ConsumersPerGroup
	ConsumersTotal
	PeakConsumersPerGroup
	PeakConsumersTotal
	EgressMiBPerS
	PeakEgressMiBPerS
	PartitionCapPerS
	MinPartitionsForPeak
	PeakBacklogEvents
	DrainSeconds
	HotPartitionPerS
	HotPartitionMultiple
	OtherPartitionPerS
	LagSecondsForEvents
	LagEventsForDuration
	NumOutputs
)

// Outputs lists every output in worksheet order.
func Outputs() []Output {
	os := make([]Output, NumOutputs)
	for i := range os {
		os[i] = Output(i)
	}
	return os
}

type outputDef struct {
	json  string
	label string
	deps  []Field
	// value computes the figure from valid inputs; a non-empty na says the
	// figure does not apply to these inputs (and why).
	value func(in Inputs) (v float64, na string)
}

// bytesPerEvent is the size an event occupies on disk and on the wire:
// compression divides it.
func bytesPerEvent(in Inputs) float64 {
	if in.Compression > 0 {
		return in.EventSize / in.Compression
	}
	return in.EventSize
}

// headroom is the factor applied to what is provisioned.
func headroom(in Inputs) float64 { return 1 + in.HeadroomPct/100 }

// copiesRead is how many times the leader sends each appended byte: once to
// every consumer group, and once to each follower replicating it (RF-1).
func copiesRead(in Inputs) float64 { return float64(in.Groups + in.ReplicationFactor - 1) }

// partitionCap is the most one group can consume: one active consumer per
// partition, each at the consumer rate.
func partitionCap(in Inputs) float64 { return float64(in.Partitions) * in.ConsumerRate }

// ceilCount rounds a needed count up, ignoring floating-point dust: 60.000000000001
// consumers is 60, not 61.
func ceilCount(x float64) float64 {
	r := math.Round(x)
	if math.Abs(x-r) <= 1e-9*math.Max(1, math.Abs(x)) {
		return r
	}
	return math.Ceil(x)
}

func backlog(in Inputs) float64 {
	return math.Max(0, in.PeakRate-partitionCap(in)) * in.PeakDuration.Seconds()
}

func lagRate(in Inputs) float64 {
	if in.LagRate > 0 {
		return in.LagRate
	}
	return in.AvgRate
}

var (
	ingestDeps = []Field{AvgRate, EventSize, Compression}
	peakDeps   = []Field{PeakRate, EventSize, Compression}
	egressDeps = []Field{AvgRate, EventSize, Compression, Groups, ReplicationFactor}
)

func ok(v float64) (float64, string) { return v, "" }

var outputs = [NumOutputs]outputDef{
	IngestMiBPerS: {"ingest_mib_per_s", "average ingest", ingestDeps,
		func(in Inputs) (float64, string) { return ok(in.AvgRate * bytesPerEvent(in) / MiB) }},
	IngestTBPerDay: {"ingest_tb_per_day", "ingest/day (TB)", ingestDeps,
		func(in Inputs) (float64, string) { return ok(in.AvgRate * bytesPerEvent(in) * day / TB) }},
	IngestTiBPerDay: {"ingest_tib_per_day", "ingest/day (TiB)", ingestDeps,
		func(in Inputs) (float64, string) { return ok(in.AvgRate * bytesPerEvent(in) * day / TiB) }},
	RetentionLogicalTiB: {"retention_logical_tib", "retained, logical", append(ingestDeps[:3:3], Retention),
		func(in Inputs) (float64, string) {
			return ok(in.AvgRate * bytesPerEvent(in) * in.Retention.Seconds() / TiB)
		}},
	RetentionReplicatedTiB: {"retention_replicated_tib", "retained × RF", append(ingestDeps[:3:3], Retention, ReplicationFactor, Headroom),
		func(in Inputs) (float64, string) {
			return ok(in.AvgRate * bytesPerEvent(in) * in.Retention.Seconds() / TiB * float64(in.ReplicationFactor) * headroom(in))
		}},
	PeakMiBPerS: {"peak_mib_per_s", "peak ingest", peakDeps,
		func(in Inputs) (float64, string) { return ok(in.PeakRate * bytesPerEvent(in) / MiB) }},
	PeakGrossGiB: {"peak_gross_gib", "peak volume, gross", append(peakDeps[:3:3], PeakDuration),
		func(in Inputs) (float64, string) {
			return ok(in.PeakRate * bytesPerEvent(in) * in.PeakDuration.Seconds() / GiB)
		}},
	PeakAboveBaselineGiB: {"peak_above_baseline_gib", "peak above baseline", append(peakDeps[:3:3], PeakDuration, AvgRate),
		func(in Inputs) (float64, string) {
			return ok((in.PeakRate - in.AvgRate) * bytesPerEvent(in) * in.PeakDuration.Seconds() / GiB)
		}},
	DeliveriesPerS: {"deliveries_per_s", "deliveries", []Field{Groups, AvgRate},
		func(in Inputs) (float64, string) { return ok(float64(in.Groups) * in.AvgRate) }},
	PeakDeliveriesPerS: {"peak_deliveries_per_s", "deliveries at peak", []Field{Groups, PeakRate},
		func(in Inputs) (float64, string) { return ok(float64(in.Groups) * in.PeakRate) }},
	ConsumersPerGroup: {"consumers_per_group", "consumers/group", []Field{AvgRate, ConsumerRate, Headroom},
		func(in Inputs) (float64, string) { return ok(ceilCount(in.AvgRate * headroom(in) / in.ConsumerRate)) }},
	ConsumersTotal: {"consumers_total", "consumers total", []Field{AvgRate, ConsumerRate, Headroom, Groups},
		func(in Inputs) (float64, string) {
			return ok(ceilCount(in.AvgRate*headroom(in)/in.ConsumerRate) * float64(in.Groups))
		}},
	PeakConsumersPerGroup: {"peak_consumers_per_group", "consumers/group, peak", []Field{PeakRate, ConsumerRate, Headroom},
		func(in Inputs) (float64, string) { return ok(ceilCount(in.PeakRate * headroom(in) / in.ConsumerRate)) }},
	PeakConsumersTotal: {"peak_consumers_total", "consumers total, peak", []Field{PeakRate, ConsumerRate, Headroom, Groups},
		func(in Inputs) (float64, string) {
			return ok(ceilCount(in.PeakRate*headroom(in)/in.ConsumerRate) * float64(in.Groups))
		}},
	EgressMiBPerS: {"egress_mib_per_s", "broker egress", egressDeps,
		func(in Inputs) (float64, string) { return ok(in.AvgRate * bytesPerEvent(in) / MiB * copiesRead(in)) }},
	PeakEgressMiBPerS: {"peak_egress_mib_per_s", "broker egress at peak", []Field{PeakRate, EventSize, Compression, Groups, ReplicationFactor},
		func(in Inputs) (float64, string) { return ok(in.PeakRate * bytesPerEvent(in) / MiB * copiesRead(in)) }},
	PartitionCapPerS: {"partition_cap_per_s", "cap per group", []Field{Partitions, ConsumerRate},
		func(in Inputs) (float64, string) { return ok(partitionCap(in)) }},
	MinPartitionsForPeak: {"min_partitions_for_peak", "partitions for peak", []Field{PeakRate, ConsumerRate, Headroom},
		func(in Inputs) (float64, string) { return ok(ceilCount(in.PeakRate * headroom(in) / in.ConsumerRate)) }},
	PeakBacklogEvents: {"peak_backlog_events", "backlog after peak", []Field{PeakRate, Partitions, ConsumerRate, PeakDuration},
		func(in Inputs) (float64, string) { return ok(backlog(in)) }},
	DrainSeconds: {"drain_seconds", "time to drain", []Field{PeakRate, Partitions, ConsumerRate, PeakDuration, AvgRate},
		func(in Inputs) (float64, string) {
			b := backlog(in)
			if b == 0 {
				return 0, ""
			}
			spare := partitionCap(in) - in.AvgRate
			if spare <= 0 {
				return 0, fmt.Sprintf("never drains: the cap %s/s is not above the average %s/s",
					groupThousands(partitionCap(in), 0), groupThousands(in.AvgRate, 0))
			}
			return ok(b / spare)
		}},
	HotPartitionPerS: {"hot_partition_per_s", "hot partition", []Field{HotKeyShare, AvgRate, Partitions},
		func(in Inputs) (float64, string) {
			if in.Partitions == 1 {
				return ok(in.AvgRate) // the only partition carries everything
			}
			return ok(in.HotKeyShare * in.AvgRate)
		}},
	HotPartitionMultiple: {"hot_partition_multiple", "hot ÷ uniform", []Field{HotKeyShare, AvgRate, Partitions},
		func(in Inputs) (float64, string) {
			if in.Partitions == 1 {
				return ok(1)
			}
			// hot ÷ (avg ÷ P), which is share × P; computed this way round
			// so 30% of 24 prints as 7.2, not 7.199999999999999.
			return ok(in.HotKeyShare * in.AvgRate * float64(in.Partitions) / in.AvgRate)
		}},
	OtherPartitionPerS: {"other_partition_per_s", "each other partition", []Field{HotKeyShare, AvgRate, Partitions},
		func(in Inputs) (float64, string) {
			if in.Partitions == 1 {
				return 0, "no other partitions: the topic has one"
			}
			return ok((1 - in.HotKeyShare) * in.AvgRate / float64(in.Partitions-1))
		}},
	LagSecondsForEvents: {"lag_seconds_for_events", "lag in time", []Field{LagEvents, LagRate, AvgRate},
		func(in Inputs) (float64, string) {
			if in.LagEvents == 0 {
				return 0, "no lag in events given"
			}
			return ok(in.LagEvents / lagRate(in))
		}},
	LagEventsForDuration: {"lag_events_for_duration", "lag in events", []Field{LagDuration, LagRate, AvgRate},
		func(in Inputs) (float64, string) {
			if in.LagDuration == 0 {
				return 0, "no lag in time given"
			}
			return ok(in.LagDuration.Seconds() * lagRate(in))
		}},
}

// JSON is the output's field name in `berth capacity -o json`.
func (o Output) JSON() string { return outputs[o].json }

// Label is the output's short name on the worksheet.
func (o Output) Label() string { return outputs[o].label }

// Deps are the inputs the output is computed from.
func (o Output) Deps() []Field { return outputs[o].deps }

func (o Output) String() string { return outputs[o].json }

// State says whether a figure could be computed.
type State uint8

const (
	// Available: the value is valid.
	Available State = iota
	// Invalid: an input it depends on is invalid.
	Invalid
	// NotApplicable: the inputs are valid but the figure does not exist for
	// them (no drain when the backlog never drains, no "other partitions"
	// with one partition, no lag conversion when no lag was given).
	NotApplicable
)

type result struct {
	v     float64
	state State
	why   string
}

// Worksheet is a computed worksheet: the inputs, the fields that were
// invalid, and every figure that could be computed from the valid ones.
type Worksheet struct {
	Inputs Inputs
	// Errors holds one error per invalid field.
	Errors map[Field]error
	res    [NumOutputs]result
}

// Compute validates in and works out every figure whose inputs are valid.
func Compute(in Inputs) Worksheet { return compute(in, nil) }

// compute works out the figures; bad lists fields already known to be
// invalid (parse failures), whose values in `in` are ignored.
func compute(in Inputs, bad map[Field]error) Worksheet {
	errs := map[Field]error{}
	for f, err := range bad {
		errs[f] = err
	}
	for f, err := range in.Validate() {
		if _, seen := errs[f]; !seen {
			errs[f] = err
		}
	}
	w := Worksheet{Inputs: in, Errors: errs}
	for _, o := range Outputs() {
		w.res[o] = computeOne(o, in, errs)
	}
	return w
}

func computeOne(o Output, in Inputs, errs map[Field]error) result {
	switch {
	case o == LagSecondsForEvents && in.LagEvents == 0 && errs[LagEvents] == nil:
		return result{state: NotApplicable, why: "no lag in events given"}
	case o == LagEventsForDuration && in.LagDuration == 0 && errs[LagDuration] == nil:
		return result{state: NotApplicable, why: "no lag in time given"}
	}
	var missing []string
	for _, f := range outputs[o].deps {
		if f == AvgRate && (o == LagSecondsForEvents || o == LagEventsForDuration) && in.LagRate > 0 && errs[LagRate] == nil {
			continue // the lag rate was given: the average does not matter
		}
		if errs[f] != nil {
			missing = append(missing, f.Label())
		}
	}
	if len(missing) > 0 {
		return result{state: Invalid, why: "needs a valid " + strings.Join(missing, ", ")}
	}
	v, na := outputs[o].value(in)
	if na != "" {
		return result{state: NotApplicable, why: na}
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		// Unreachable with validated inputs; kept so no NaN or Inf can reach
		// a screen or a JSON encoder whatever the inputs.
		return result{state: Invalid, why: "out of range"}
	}
	return result{v: v}
}

// Value returns the figure and whether it is available.
func (w Worksheet) Value(o Output) (float64, bool) {
	r := w.res[o]
	return r.v, r.state == Available
}

// State says whether the figure is available, invalid or not applicable.
func (w Worksheet) State(o Output) State { return w.res[o].state }

// Why explains an unavailable figure ("needs a valid average rate").
func (w Worksheet) Why(o Output) string { return w.res[o].why }

// Valid reports whether every input is valid.
func (w Worksheet) Valid() bool { return len(w.Errors) == 0 }

// Err returns the first invalid field in form order as a *FieldError, or nil.
func (w Worksheet) Err() error {
	for _, f := range Fields() {
		if err := w.Errors[f]; err != nil {
			return &FieldError{Field: f, Err: err}
		}
	}
	return nil
}

// CapReached reports whether the peak exceeds the partition cap (the
// binding constraint applies, and a backlog builds for as long as the peak
// lasts); false when either figure is unavailable.
func (w Worksheet) CapReached() bool {
	c, ok := w.Value(PartitionCapPerS)
	return ok && w.Errors[PeakRate] == nil && w.Inputs.PeakRate > c
}
