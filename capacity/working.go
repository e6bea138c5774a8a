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
	s := newSheet(w)
	return []Section{s.ingest(), s.retention(), s.peak(), s.deliveries(), s.consumers(), s.network(), s.binding(), s.hotKey(), s.lag()}
}

// sheet is what every section's working is written from: the worksheet,
// its inputs, and the phrases several sections share.
type sheet struct {
	w        Worksheet
	in       Inputs
	size     string  // the event size ("1 KiB")
	comp     string  // " ÷ N compression", or ""
	hr       string  // " × N headroom", or ""
	bps      float64 // average ingest in bytes/s
	peakSecs float64
}

func newSheet(w Worksheet) sheet {
	in := w.Inputs
	s := sheet{w: w, in: in, size: FormatSize(in.EventSize), bps: in.AvgRate * bytesPerEvent(in), peakSecs: in.PeakDuration.Seconds()}
	if in.Compression > 0 && in.Compression != 1 {
		s.comp = " ÷ " + num(in.Compression) + " compression"
	}
	if in.HeadroomPct > 0 {
		s.hr = " × " + num(headroom(in)) + " headroom"
	}
	return s
}

func (s sheet) v(o Output) float64 { x, _ := s.w.Value(o); return x }

func (s sheet) has(os ...Output) bool {
	for _, o := range os {
		if _, ok := s.w.Value(o); !ok {
			return false
		}
	}
	return true
}

func (s sheet) line(o Output, working string) Line {
	if x, ok := s.w.Value(o); ok {
		return Line{Output: o, State: Available, Value: FormatValue(o, x), Working: working}
	}
	return Line{Output: o, State: s.w.State(o), Working: s.w.Why(o)}
}

func rate(r float64) string { return num(r) + " events/s" }

// need is the working of a consumer or partition count: ⌈rate × headroom ÷
// consumer rate⌉.
func (s sheet) need(r float64) string {
	if s.hr != "" {
		return "⌈" + num(r) + s.hr + " ÷ " + num(s.in.ConsumerRate) + "⌉"
	}
	return "⌈" + num(r) + " ÷ " + num(s.in.ConsumerRate) + "⌉"
}

// 1 · Average ingest
func (s sheet) ingest() Section {
	in, bps := s.in, s.bps
	return Section{Number: 1, Title: "Average ingest", Lines: []Line{
		s.line(IngestMiBPerS, rate(in.AvgRate)+" × "+s.size+s.comp+" = "+groupThousands(bps, 0)+" B/s ÷ 2²⁰"),
		s.line(IngestTBPerDay, groupThousands(bps, 0)+" B/s × 86,400 s ÷ 10¹²"),
		s.line(IngestTiBPerDay, groupThousands(bps, 0)+" B/s × 86,400 s ÷ 2⁴⁰"),
	}}
}

// 2 · Retention × RF
func (s sheet) retention() Section {
	in := s.in
	s2 := Section{Number: 2, Title: "Retention × RF", Lines: []Line{
		s.line(RetentionLogicalTiB, FormatValue(IngestTiBPerDay, s.v(IngestTiBPerDay))+" × "+num(in.Retention.Hours()/24)+" d"),
		s.line(RetentionReplicatedTiB, FormatValue(RetentionLogicalTiB, s.v(RetentionLogicalTiB))+" × RF "+fmt.Sprint(in.ReplicationFactor)+s.hr),
	}}
	if s.has(RetentionReplicatedTiB) {
		s2.Note = "payload only: excl. indexes, skew"
		if s.hr == "" {
			s2.Note += ", headroom"
		}
	}
	return s2
}

// 3 · Peak
func (s sheet) peak() Section {
	in := s.in
	s3 := Section{Number: 3, Title: "Peak", Lines: []Line{
		s.line(PeakMiBPerS, rate(in.PeakRate)+" × "+s.size+s.comp),
		s.line(PeakGrossGiB, FormatValue(PeakMiBPerS, s.v(PeakMiBPerS))+" × "+FormatDurationInput(in.PeakDuration)+" ("+num(s.peakSecs)+" s)"),
		s.line(PeakAboveBaselineGiB, "("+num(in.PeakRate)+" − "+num(in.AvgRate)+") events/s × "+s.size+s.comp+" × "+num(s.peakSecs)+" s"),
	}}
	if s.has(PeakGrossGiB, PeakAboveBaselineGiB) {
		s3.Note = "gross and incremental peak volume are different numbers; quote both"
	}
	return s3
}

// 4 · Group deliveries
func (s sheet) deliveries() Section {
	in := s.in
	s4 := Section{Number: 4, Title: "Group deliveries", Lines: []Line{
		s.line(DeliveriesPerS, fmt.Sprintf("%s × %s", plural(in.Groups, "group"), num(in.AvgRate))),
		s.line(PeakDeliveriesPerS, fmt.Sprintf("%s × %s", plural(in.Groups, "group"), num(in.PeakRate))),
	}}
	if s.has(PeakDeliveriesPerS) {
		s4.Note = "logical reads, not extra appends"
	}
	return s4
}

// 5 · Consumers
func (s sheet) consumers() Section {
	in := s.in
	s5 := Section{Number: 5, Title: "Consumers at " + rate(in.ConsumerRate) + " each", Lines: []Line{
		s.line(ConsumersPerGroup, s.need(in.AvgRate)),
		s.line(ConsumersTotal, fmt.Sprintf("%s × %s", groupThousands(s.v(ConsumersPerGroup), 0), plural(in.Groups, "group"))),
		s.line(PeakConsumersPerGroup, s.need(in.PeakRate)),
		s.line(PeakConsumersTotal, fmt.Sprintf("%s × %s", groupThousands(s.v(PeakConsumersPerGroup), 0), plural(in.Groups, "group"))),
	}}
	if s.has(PeakConsumersPerGroup) && s.w.Errors[Partitions] == nil && s.v(PeakConsumersPerGroup) > float64(in.Partitions) {
		s5.Note = fmt.Sprintf("only %s of them can be active in a group: one consumer per partition (see 7)", groupThousands(float64(in.Partitions), 0))
	}
	return s5
}

// 6 · Broker network
func (s sheet) network() Section {
	in := s.in
	copies := fmt.Sprintf("(%s + %s)", plural(in.Groups, "group"), plural(in.ReplicationFactor-1, "follower copy"))
	s6 := Section{Number: 6, Title: "Broker network", Lines: []Line{
		s.line(EgressMiBPerS, FormatValue(IngestMiBPerS, s.v(IngestMiBPerS))+" × "+copies),
		s.line(PeakEgressMiBPerS, FormatValue(PeakMiBPerS, s.v(PeakMiBPerS))+" × "+copies),
	}}
	if s.has(EgressMiBPerS, PeakEgressMiBPerS) {
		s6.Note = "leader egress: each group reads every byte once and each of the RF−1 followers fetches it once; " +
			fmt.Sprintf("peak is %s× average; before protocol overhead", num(math.Round(s.v(PeakEgressMiBPerS)/s.v(EgressMiBPerS)*100)/100))
		if s.comp == "" {
			s6.Note += " and compression"
		}
		if capped, ok := s.w.cappedPeakEgress(); ok {
			s6.Note += fmt.Sprintf("; if each group is held to the partition cap of %s/s, peak egress is %s",
				groupThousands(partitionCap(in), 0), FormatValue(PeakEgressMiBPerS, capped))
		}
	}
	return s6
}

// 7 · The binding constraint
func (s sheet) binding() Section {
	in, w := s.in, s.w
	capS := groupThousands(partitionCap(in), 0)
	s7 := Section{Number: 7, Title: "Binding constraint", Lines: []Line{
		s.line(PartitionCapPerS, fmt.Sprintf("%s × %s (one active consumer per partition)", plural(in.Partitions, "partition"), rate(in.ConsumerRate))),
		s.line(MinPartitionsForPeak, s.need(in.PeakRate)),
	}}
	switch {
	case s.has(PeakBacklogEvents) && !w.CapReached():
		s7.Lines = append(s7.Lines,
			s.line(PeakBacklogEvents, "cap "+capS+"/s ≥ peak "+num(in.PeakRate)+"/s: the cap is never reached"),
			s.line(DrainSeconds, "nothing to drain"))
		s7.Note = fmt.Sprintf("%s cap a group at %s/s, at or above the peak: the cap is never reached", plural(in.Partitions, "partition"), capS)
	case s.has(PeakBacklogEvents) && in.PeakDuration == 0:
		s7.Lines = append(s7.Lines,
			s.line(PeakBacklogEvents, "the peak lasts 0 s: no backlog builds"),
			s.line(DrainSeconds, "nothing to drain"))
		s7.Note = fmt.Sprintf("%s cap a group at %s/s, below the peak of %s/s: a backlog builds for as long as a peak lasts",
			plural(in.Partitions, "partition"), capS, num(in.PeakRate))
	default:
		s7.Lines = append(s7.Lines,
			s.line(PeakBacklogEvents, "("+num(in.PeakRate)+" − "+capS+") events/s × "+num(s.peakSecs)+" s"),
			s.line(DrainSeconds, groupThousands(s.v(PeakBacklogEvents), 0)+" ÷ ("+capS+" − "+num(in.AvgRate)+") events/s"))
		if s.has(PeakBacklogEvents, MinPartitionsForPeak) {
			s7.Note = fmt.Sprintf("%s cap a group at %s/s; the peak needs ≥%s partitions, faster consumers, or an accepted lag",
				plural(in.Partitions, "partition"), capS, groupThousands(s.v(MinPartitionsForPeak), 0))
			if w.Errors[AvgRate] == nil && partitionCap(in) < in.AvgRate {
				s7.Note += "; the cap is below the average rate, so lag grows even outside the peak"
			}
		}
	}
	return s7
}

// 8 · Hot key
func (s sheet) hotKey() Section {
	in := s.in
	uniform := in.AvgRate / float64(max(in.Partitions, 1))
	s8 := Section{Number: 8, Title: "Hot key", Lines: []Line{
		s.line(HotPartitionPerS, num(in.HotKeyShare*100)+"% × "+rate(in.AvgRate)),
		s.line(HotPartitionMultiple, groupThousands(s.v(HotPartitionPerS), 0)+" ÷ ("+num(in.AvgRate)+" ÷ "+fmt.Sprint(in.Partitions)+" = "+groupThousands(uniform, 0)+"/s uniform)"),
		s.line(OtherPartitionPerS, "("+num(in.AvgRate)+" − "+groupThousands(s.v(HotPartitionPerS), 0)+") ÷ "+fmt.Sprint(in.Partitions-1)),
	}}
	if in.Partitions == 1 && s.has(HotPartitionPerS) {
		s8.Lines[0].Working = "one partition carries all " + rate(in.AvgRate)
		s8.Lines[1].Working = "one partition: no skew is possible"
	}
	if s.has(HotPartitionPerS) && in.Partitions > 1 {
		s8.Note = "one partition has one active owner per group: its consumer saturates while the others have spare capacity"
		if s.has(IngestMiBPerS) {
			// The seed's per-partition figure: 833/s is about 0.81 MiB/s.
			s8.Note = fmt.Sprintf("uniform load is %s/s per partition (%s); ", groupThousands(uniform, 0),
				FormatValue(IngestMiBPerS, s.v(IngestMiBPerS)/float64(in.Partitions))) + s8.Note
		}
	}
	return s8
}

// 9 · Lag conversion
func (s sheet) lag() Section {
	in := s.in
	lr := rate(lagRate(in))
	return Section{Number: 9, Title: "Lag in events and seconds", Lines: []Line{
		s.line(LagSecondsForEvents, groupThousands(in.LagEvents, 0)+" events ÷ "+lr),
		s.line(LagEventsForDuration, FormatDurationInput(in.LagDuration)+" ("+num(in.LagDuration.Seconds())+" s) × "+lr),
	}}
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
