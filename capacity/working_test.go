package capacity

import (
	"strings"
	"testing"
)

func findLine(t *testing.T, secs []Section, o Output) (Section, Line) {
	t.Helper()
	for _, s := range secs {
		for _, l := range s.Lines {
			if l.Output == o {
				return s, l
			}
		}
	}
	t.Fatalf("no line for %s", o.JSON())
	return Section{}, Line{}
}

// TestSections_HarborCart checks the worksheet reads like the seed's: the
// printed figure and the arithmetic behind it, for every step.
func TestSections_HarborCart(t *testing.T) {
	secs := Compute(HarborCart).Sections()
	if len(secs) != 9 {
		t.Fatalf("%d sections, want 9", len(secs))
	}
	for _, tc := range []struct {
		o       Output
		value   string
		working string
	}{
		{IngestMiBPerS, "19.53 MiB/s", "20,000 events/s × 1 KiB = 20,480,000 B/s"},
		{IngestTBPerDay, "1.769 TB/day", "× 86,400 s ÷ 10¹²"},
		{IngestTiBPerDay, "1.609 TiB/day", "÷ 2⁴⁰"},
		{RetentionLogicalTiB, "4.83 TiB", "1.609 TiB/day × 3 d"},
		{RetentionReplicatedTiB, "14.48 TiB", "4.83 TiB × RF 3"},
		{PeakMiBPerS, "97.66 MiB/s", "100,000 events/s × 1 KiB"},
		{PeakGrossGiB, "57.22 GiB", "97.66 MiB/s × 10m (600 s)"},
		{PeakAboveBaselineGiB, "45.78 GiB", "(100,000 − 20,000) events/s × 1 KiB × 600 s"},
		{DeliveriesPerS, "60,000/s", "3 groups × 20,000"},
		{PeakDeliveriesPerS, "300,000/s", "3 groups × 100,000"},
		{ConsumersPerGroup, "10 per group", "⌈20,000 ÷ 2,000⌉"},
		{ConsumersTotal, "30 total", "10 × 3 groups"},
		{PeakConsumersPerGroup, "50 per group", "⌈100,000 ÷ 2,000⌉"},
		{PeakConsumersTotal, "150 total", "50 × 3 groups"},
		{EgressMiBPerS, "97.66 MiB/s", "19.53 MiB/s × (3 groups + 2 follower copies)"},
		{PeakEgressMiBPerS, "488.28 MiB/s", "97.66 MiB/s × (3 groups + 2 follower copies)"},
		{PartitionCapPerS, "48,000/s", "24 partitions × 2,000 events/s"},
		{MinPartitionsForPeak, "≥50 partitions", "⌈100,000 ÷ 2,000⌉"},
		{PeakBacklogEvents, "31,200,000 events", "(100,000 − 48,000) events/s × 600 s"},
		{DrainSeconds, "1,114 s (18m 34s)", "31,200,000 ÷ (48,000 − 20,000) events/s"},
		{HotPartitionPerS, "6,000/s", "30% × 20,000 events/s"},
		{HotPartitionMultiple, "7.2×", "6,000 ÷ (20,000 ÷ 24 = 833/s uniform)"},
		{OtherPartitionPerS, "≈609/s each", "(20,000 − 6,000) ÷ 23"},
	} {
		_, l := findLine(t, secs, tc.o)
		if l.Value != tc.value || !strings.Contains(l.Working, tc.working) {
			t.Errorf("%s: %q | %q; want %q | …%q…", tc.o.JSON(), l.Value, l.Working, tc.value, tc.working)
		}
	}
	s6, _ := findLine(t, secs, EgressMiBPerS)
	for _, want := range []string{"each group reads every byte once", "RF−1 followers", "peak is 5× average", "335.94 MiB/s"} {
		if !strings.Contains(s6.Note, want) {
			t.Errorf("network note %q lacks %q", s6.Note, want)
		}
	}
	s8, _ := findLine(t, secs, HotPartitionPerS)
	if !strings.HasPrefix(s8.Note, "uniform load is 833/s per partition (0.81 MiB/s); ") {
		t.Errorf("hot-key note %q", s8.Note)
	}
	s5, _ := findLine(t, secs, PeakConsumersPerGroup)
	if s5.Note != "only 24 of them can be active in a group: one consumer per partition (see 7)" {
		t.Errorf("consumers note %q", s5.Note)
	}
	s7, _ := findLine(t, secs, PartitionCapPerS)
	if !strings.Contains(s7.Note, "the peak needs ≥50 partitions, faster consumers, or an accepted lag") {
		t.Errorf("constraint note %q", s7.Note)
	}
}

func TestSections_CapNeverReached(t *testing.T) {
	secs := Compute(with(func(in *Inputs) { in.Partitions = 60 })).Sections()
	s, l := findLine(t, secs, PeakBacklogEvents)
	if l.Value != "0 events" || !strings.Contains(l.Working, "cap 120,000/s ≥ peak 100,000/s: the cap is never reached") {
		t.Errorf("backlog line %q | %q", l.Value, l.Working)
	}
	if !strings.Contains(s.Note, "never reached") {
		t.Errorf("note %q", s.Note)
	}
}

func TestSections_NeverDrains(t *testing.T) {
	secs := Compute(with(func(in *Inputs) { in.Partitions = 5 })).Sections()
	s, l := findLine(t, secs, DrainSeconds)
	if l.Value != "" || l.State != NotApplicable || !strings.Contains(l.Working, "never drains: the cap 10,000/s is not above the average 20,000/s") {
		t.Errorf("drain line %+v", l)
	}
	if !strings.Contains(s.Note, "lag grows even outside the peak") {
		t.Errorf("note %q", s.Note)
	}
}

// TestSections_InvalidField: an invalid event size empties exactly the
// byte figures, each saying which input it needs, and leaves the counts.
func TestSections_InvalidField(t *testing.T) {
	form := DefaultForm()
	form[EventSize] = "1 parsec"
	secs := form.Worksheet().Sections()
	for _, o := range byteOutputs {
		_, l := findLine(t, secs, o)
		if l.Value != "" || l.State != Invalid || l.Working != "needs a valid event size" {
			t.Errorf("%s: %+v", o.JSON(), l)
		}
	}
	for _, o := range []Output{ConsumersPerGroup, PartitionCapPerS, HotPartitionMultiple, DrainSeconds} {
		if _, l := findLine(t, secs, o); l.Value == "" {
			t.Errorf("%s blanked by the event size: %+v", o.JSON(), l)
		}
	}
	// notes that quote unavailable figures are dropped
	s6, _ := findLine(t, secs, EgressMiBPerS)
	if s6.Note != "" {
		t.Errorf("network note shown without figures: %q", s6.Note)
	}
}

func TestFormatDuration(t *testing.T) {
	for s, want := range map[float64]string{0.25: "0.25 s", 59: "59s", 1114.29: "18m 34s", 3600: "1h", 90061: "1d 1h"} {
		if got := FormatDuration(s); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", s, got, want)
		}
	}
}

// TestFormatValue_Small: byte figures scale to a unit where they read
// (no "0.000037 GiB"), keep the worksheet's unit from 0.1 up (the seed's
// "0.81 MiB/s"), step up at 1024, and never use an exponent.
func TestFormatValue_Small(t *testing.T) {
	for _, tc := range []struct {
		o    Output
		v    float64
		want string
	}{
		{IngestMiBPerS, 0.046592, "47.71 KiB/s"},
		{IngestMiBPerS, 0.8138, "0.81 MiB/s"},
		{IngestTBPerDay, 0.0042211, "4.221 GB/day"},
		{PeakAboveBaselineGiB, 0.0000366, "38.38 KiB"},
		{PeakGrossGiB, 0.0000000005, "1 B"},
		{RetentionReplicatedTiB, 0, "0.00 TiB"},
		{PeakBacklogEvents, 0.5, "0.5 events"},
		{IngestMiBPerS, 19.53125, "19.53 MiB/s"},
		{PeakEgressMiBPerS, 1234.5, "1.21 GiB/s"},
		{IngestTBPerDay, 1500, "1.500 PB/day"},
		{HotPartitionMultiple, 0.24, "0.24×"},
		{MinPartitionsForPeak, 1, "≥1 partition"},
		{MinPartitionsForPeak, 50, "≥50 partitions"},
	} {
		if got := FormatValue(tc.o, tc.v); got != tc.want {
			t.Errorf("FormatValue(%s, %v) = %q, want %q", tc.o.JSON(), tc.v, got, tc.want)
		}
	}
}

// TestSections_ZeroLengthPeak: a peak above the cap that lasts no time
// builds no backlog, and the worksheet must not claim the cap is never
// reached.
func TestSections_ZeroLengthPeak(t *testing.T) {
	secs := Compute(with(func(in *Inputs) { in.PeakDuration = 0 })).Sections()
	s, l := findLine(t, secs, PeakBacklogEvents)
	if l.Value != "0 events" || strings.Contains(l.Working, "never reached") || !strings.Contains(l.Working, "no backlog") {
		t.Errorf("backlog line %q | %q", l.Value, l.Working)
	}
	if strings.Contains(s.Note, "never reached") || !strings.Contains(s.Note, "below the peak of 100,000/s") {
		t.Errorf("note %q", s.Note)
	}
}
