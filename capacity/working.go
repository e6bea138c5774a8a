package capacity

import (
	"fmt"
	"math"
	"strings"
)

// Line is one figure on the worksheet with its working shown.
type Line struct {
	Output Output
	State  State
	// Value is the figure with its unit ("19.53 MiB/s"); empty unless
	// State is Available.
	Value string
	// Working is the arithmetic that produced it ("20,000 events/s × 1 KiB"),
	// or, when unavailable, why ("needs a valid event size").
	Working string
}

// Section is one numbered step of the worksheet, as in the seed.
type Section struct {
	Number int
	Title  string
	Lines  []Line
	// Note qualifies the section ("excl. indexes, skew, headroom"); empty
	// when there is nothing to add or the figures are unavailable.
	Note string
}

// Sections lays the worksheet out as the seed does: nine numbered steps,
// each figure with its arithmetic.
func (w Worksheet) Sections() []Section {
	in := w.Inputs
	v := func(o Output) float64 { x, _ := w.Value(o); return x }
	has := func(os ...Output) bool {
		for _, o := range os {
			if _, ok := w.Value(o); !ok {
				return false
			}
		}
		return true
	}
	line := func(o Output, working string) Line {
		if x, ok := w.Value(o); ok {
			return Line{Output: o, State: Available, Value: FormatValue(o, x), Working: working}
		}
		return Line{Output: o, State: w.State(o), Working: w.Why(o)}
	}
	size := FormatSize(in.EventSize)
	comp := ""
	if in.Compression > 0 && in.Compression != 1 {
		comp = " ÷ " + num(in.Compression) + " compression"
	}
	hr := ""
	if in.HeadroomPct > 0 {
		hr = " × " + num(headroom(in)) + " headroom"
	}
	bps := in.AvgRate * bytesPerEvent(in)
	rate := func(r float64) string { return num(r) + " events/s" }
	peakSecs := in.PeakDuration.Seconds()
	followers := in.ReplicationFactor - 1

	var out []Section

	// 1 · Average ingest
	out = append(out, Section{Number: 1, Title: "Average ingest", Lines: []Line{
		line(IngestMiBPerS, rate(in.AvgRate)+" × "+size+comp+" = "+groupThousands(bps, 0)+" B/s ÷ 2²⁰"),
		line(IngestTBPerDay, groupThousands(bps, 0)+" B/s × 86,400 s ÷ 10¹²"),
		line(IngestTiBPerDay, groupThousands(bps, 0)+" B/s × 86,400 s ÷ 2⁴⁰"),
	}})

	// 2 · Retention × RF
	s2 := Section{Number: 2, Title: "Retention × RF", Lines: []Line{
		line(RetentionLogicalTiB, FormatValue(IngestTiBPerDay, v(IngestTiBPerDay))+" × "+num(in.Retention.Hours()/24)+" d"),
		line(RetentionReplicatedTiB, FormatValue(RetentionLogicalTiB, v(RetentionLogicalTiB))+" × RF "+fmt.Sprint(in.ReplicationFactor)+hr),
	}}
	if has(RetentionReplicatedTiB) {
		s2.Note = "payload only: excl. indexes, skew"
		if hr == "" {
			s2.Note += ", headroom"
		}
	}
	out = append(out, s2)

	// 3 · Peak
	s3 := Section{Number: 3, Title: "Peak", Lines: []Line{
		line(PeakMiBPerS, rate(in.PeakRate)+" × "+size+comp),
		line(PeakGrossGiB, FormatValue(PeakMiBPerS, v(PeakMiBPerS))+" × "+FormatDurationInput(in.PeakDuration)+" ("+num(peakSecs)+" s)"),
		line(PeakAboveBaselineGiB, "("+num(in.PeakRate)+" − "+num(in.AvgRate)+") events/s × "+size+comp+" × "+num(peakSecs)+" s"),
	}}
	if has(PeakGrossGiB, PeakAboveBaselineGiB) {
		s3.Note = "gross and incremental peak volume are different numbers; quote both"
	}
	out = append(out, s3)

	// 4 · Group deliveries
	s4 := Section{Number: 4, Title: "Group deliveries", Lines: []Line{
		line(DeliveriesPerS, fmt.Sprintf("%s × %s", plural(in.Groups, "group"), num(in.AvgRate))),
		line(PeakDeliveriesPerS, fmt.Sprintf("%s × %s", plural(in.Groups, "group"), num(in.PeakRate))),
	}}
	if has(PeakDeliveriesPerS) {
		s4.Note = "logical reads, not extra appends"
	}
	out = append(out, s4)

	// 5 · Consumers
	need := func(r float64) string {
		if hr != "" {
			return "⌈" + num(r) + hr + " ÷ " + num(in.ConsumerRate) + "⌉"
		}
		return "⌈" + num(r) + " ÷ " + num(in.ConsumerRate) + "⌉"
	}
	s5 := Section{Number: 5, Title: "Consumers at " + rate(in.ConsumerRate) + " each", Lines: []Line{
		line(ConsumersPerGroup, need(in.AvgRate)),
		line(ConsumersTotal, fmt.Sprintf("%s × %s", groupThousands(v(ConsumersPerGroup), 0), plural(in.Groups, "group"))),
		line(PeakConsumersPerGroup, need(in.PeakRate)),
		line(PeakConsumersTotal, fmt.Sprintf("%s × %s", groupThousands(v(PeakConsumersPerGroup), 0), plural(in.Groups, "group"))),
	}}
	if has(PeakConsumersPerGroup) && w.Errors[Partitions] == nil && v(PeakConsumersPerGroup) > float64(in.Partitions) {
		s5.Note = fmt.Sprintf("only %s of them can be active in a group: one consumer per partition (see 7)", groupThousands(float64(in.Partitions), 0))
	}
	out = append(out, s5)

	// 6 · Broker network
	copies := fmt.Sprintf("(%s + %s)", plural(in.Groups, "group"), plural(followers, "follower copy"))
	s6 := Section{Number: 6, Title: "Broker network", Lines: []Line{
		line(EgressMiBPerS, FormatValue(IngestMiBPerS, v(IngestMiBPerS))+" × "+copies),
		line(PeakEgressMiBPerS, FormatValue(PeakMiBPerS, v(PeakMiBPerS))+" × "+copies),
	}}
	if has(EgressMiBPerS, PeakEgressMiBPerS) {
		s6.Note = "leader egress: each group reads every byte once and each of the RF−1 followers fetches it once; " +
			fmt.Sprintf("peak is %s× average; before protocol overhead", num(math.Round(v(PeakEgressMiBPerS)/v(EgressMiBPerS)*100)/100))
		if comp == "" {
			s6.Note += " and compression"
		}
		if capped, ok := w.cappedPeakEgress(); ok {
			s6.Note += fmt.Sprintf("; if each group is held to the partition cap of %s/s, peak egress is %s",
				groupThousands(partitionCap(in), 0), FormatValue(PeakEgressMiBPerS, capped))
		}
	}
	out = append(out, s6)

	// 7 · The binding constraint
	capS := groupThousands(partitionCap(in), 0)
	s7 := Section{Number: 7, Title: "Binding constraint", Lines: []Line{
		line(PartitionCapPerS, fmt.Sprintf("%s × %s (one active consumer per partition)", plural(in.Partitions, "partition"), rate(in.ConsumerRate))),
		line(MinPartitionsForPeak, need(in.PeakRate)),
	}}
	switch {
	case has(PeakBacklogEvents) && !w.CapReached():
		s7.Lines = append(s7.Lines,
			line(PeakBacklogEvents, "cap "+capS+"/s ≥ peak "+num(in.PeakRate)+"/s: the cap is never reached"),
			line(DrainSeconds, "nothing to drain"))
		s7.Note = fmt.Sprintf("%s cap a group at %s/s, at or above the peak: the cap is never reached", plural(in.Partitions, "partition"), capS)
	case has(PeakBacklogEvents) && in.PeakDuration == 0:
		s7.Lines = append(s7.Lines,
			line(PeakBacklogEvents, "the peak lasts 0 s: no backlog builds"),
			line(DrainSeconds, "nothing to drain"))
		s7.Note = fmt.Sprintf("%s cap a group at %s/s, below the peak of %s/s: a backlog builds for as long as a peak lasts",
			plural(in.Partitions, "partition"), capS, num(in.PeakRate))
	default:
		s7.Lines = append(s7.Lines,
			line(PeakBacklogEvents, "("+num(in.PeakRate)+" − "+capS+") events/s × "+num(peakSecs)+" s"),
			line(DrainSeconds, groupThousands(v(PeakBacklogEvents), 0)+" ÷ ("+capS+" − "+num(in.AvgRate)+") events/s"))
		if has(PeakBacklogEvents, MinPartitionsForPeak) {
			s7.Note = fmt.Sprintf("%s cap a group at %s/s; the peak needs ≥%s partitions, faster consumers, or an accepted lag",
				plural(in.Partitions, "partition"), capS, groupThousands(v(MinPartitionsForPeak), 0))
			if w.Errors[AvgRate] == nil && partitionCap(in) < in.AvgRate {
				s7.Note += "; the cap is below the average rate, so lag grows even outside the peak"
			}
		}
	}
	out = append(out, s7)

	// 8 · Hot key
	uniform := in.AvgRate / float64(max(in.Partitions, 1))
	s8 := Section{Number: 8, Title: "Hot key", Lines: []Line{
		line(HotPartitionPerS, num(in.HotKeyShare*100)+"% × "+rate(in.AvgRate)),
		line(HotPartitionMultiple, groupThousands(v(HotPartitionPerS), 0)+" ÷ ("+num(in.AvgRate)+" ÷ "+fmt.Sprint(in.Partitions)+" = "+groupThousands(uniform, 0)+"/s uniform)"),
		line(OtherPartitionPerS, "("+num(in.AvgRate)+" − "+groupThousands(v(HotPartitionPerS), 0)+") ÷ "+fmt.Sprint(in.Partitions-1)),
	}}
	if in.Partitions == 1 && has(HotPartitionPerS) {
		s8.Lines[0].Working = "one partition carries all " + rate(in.AvgRate)
		s8.Lines[1].Working = "one partition: no skew is possible"
	}
	if has(HotPartitionPerS) && in.Partitions > 1 {
		s8.Note = "one partition has one active owner per group: its consumer saturates while the others have spare capacity"
		if has(IngestMiBPerS) {
			// The seed's per-partition figure: 833/s is about 0.81 MiB/s.
			s8.Note = fmt.Sprintf("uniform load is %s/s per partition (%s); ", groupThousands(uniform, 0),
				FormatValue(IngestMiBPerS, v(IngestMiBPerS)/float64(in.Partitions))) + s8.Note
		}
	}
	out = append(out, s8)

	// 9 · Lag conversion
	lr := rate(lagRate(in))
	out = append(out, Section{Number: 9, Title: "Lag in events and seconds", Lines: []Line{
		line(LagSecondsForEvents, groupThousands(in.LagEvents, 0)+" events ÷ "+lr),
		line(LagEventsForDuration, FormatDurationInput(in.LagDuration)+" ("+num(in.LagDuration.Seconds())+" s) × "+lr),
	}})
	return out
}

// cappedPeakEgress is the peak egress when every group reads at no more than
// the partition cap; ok is false when the cap is not binding or unknown.
func (w Worksheet) cappedPeakEgress() (float64, bool) {
	in := w.Inputs
	if !w.CapReached() {
		return 0, false
	}
	if _, ok := w.Value(PartitionCapPerS); !ok {
		return 0, false
	}
	b := bytesPerEvent(in)
	reads := math.Min(in.PeakRate, partitionCap(in)) * b * float64(in.Groups)
	repl := in.PeakRate * b * float64(in.ReplicationFactor-1)
	return (reads + repl) / MiB, true
}

// plural is "1 partition", "24 partitions", "2 follower copies".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
