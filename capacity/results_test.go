package capacity

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestResults_JSONNames pins the JSON field names the issue lists, and that
// values are unrounded (only binary noise around a short decimal goes).
func TestResults_JSONNames(t *testing.T) {
	r, ok := Compute(HarborCart).Results()
	if !ok {
		t.Fatal("HarborCart invalid")
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ingest_mib_per_s", "ingest_tb_per_day", "ingest_tib_per_day", "retention_logical_tib",
		"retention_replicated_tib", "peak_mib_per_s", "peak_gross_gib", "peak_above_baseline_gib", "deliveries_per_s",
		"peak_deliveries_per_s", "consumers_per_group", "consumers_total", "peak_consumers_per_group", "peak_consumers_total",
		"egress_mib_per_s", "peak_egress_mib_per_s", "partition_cap_per_s", "min_partitions_for_peak", "peak_backlog_events",
		"drain_seconds", "hot_partition_per_s", "hot_partition_multiple", "other_partition_per_s"} {
		if _, ok := m[name]; !ok {
			t.Errorf("JSON lacks %s", name)
		}
	}
	for _, o := range Outputs() {
		if o == LagSecondsForEvents || o == LagEventsForDuration {
			continue
		}
		want, _ := Compute(HarborCart).Value(o)
		if got, ok := m[o.JSON()].(float64); !ok || got != significant(want) || math.Abs(got-want) > 1e-14*math.Abs(want) {
			t.Errorf("%s = %v, want unrounded %v", o.JSON(), m[o.JSON()], want)
		}
	}
	if _, ok := m["lag_seconds_for_events"]; ok {
		t.Error("lag conversion present though no lag was given")
	}
}

func TestResults_NullWhenNotApplicable(t *testing.T) {
	r, _ := Compute(with(func(in *Inputs) { in.Partitions = 1 })).Results()
	if r.OtherPartitionPerS != nil || r.DrainSeconds != nil {
		t.Errorf("one partition: others %v drain %v, want null", r.OtherPartitionPerS, r.DrainSeconds)
	}
	if _, ok := Compute(with(func(in *Inputs) { in.Partitions = 0 })).Results(); ok {
		t.Error("results from invalid inputs")
	}
}

func TestMeasurement_Prefill(t *testing.T) {
	m := Measurement{Topic: "orders", Window: 10 * time.Second, AvgRate: 1234.5, PeakRate: 2000,
		EventSize: 100.25, Sampled: 40, Partitions: 6, ReplicationFactor: 1, Retention: 7 * 24 * time.Hour, Groups: 2}
	form := DefaultForm()
	filled := m.Prefill(&form)
	want := []Field{AvgRate, PeakRate, EventSize, Partitions, ReplicationFactor, Retention, Groups}
	if !slices.Equal(filled, want) {
		t.Fatalf("filled %v, want %v", filled, want)
	}
	in, bad := form.Inputs()
	if len(bad) != 0 {
		t.Fatalf("prefilled form invalid: %v", bad)
	}
	if in.AvgRate != 1234.5 || in.PeakRate != 2000 || in.EventSize != 100.25 || in.Partitions != 6 ||
		in.ReplicationFactor != 1 || in.Retention != 7*24*time.Hour || in.Groups != 2 {
		t.Errorf("inputs %+v", in)
	}
	// unmeasured fields keep what was typed
	if in.ConsumerRate != HarborCart.ConsumerRate || in.PeakDuration != HarborCart.PeakDuration {
		t.Errorf("unmeasured fields changed: %+v", in)
	}
	if got := m.Source(); got != "orders, measured over 10s" {
		t.Errorf("Source() = %q", got)
	}
	// nothing sampled, unlimited retention: those fields stay as typed
	form = DefaultForm()
	filled = Measurement{AvgRate: 5, PeakRate: 5}.Prefill(&form)
	if slices.Contains(filled, EventSize) || slices.Contains(filled, Retention) || form[EventSize] != "1KiB" {
		t.Errorf("filled %v, form %v", filled, form)
	}
}

// TestMeasurement_PrefillRounds: measured rates and sizes are shown to two
// decimals (four significant digits below 1), never rounded to zero.
func TestMeasurement_PrefillRounds(t *testing.T) {
	form := DefaultForm()
	Measurement{AvgRate: 299.82615587767316, PeakRate: 300.2274856683933, EventSize: 162.9454365079365, Sampled: 9}.Prefill(&form)
	if form[AvgRate] != "299.83" || form[PeakRate] != "300.23" || form[EventSize] != "162.95B" {
		t.Errorf("form %q %q %q", form[AvgRate], form[PeakRate], form[EventSize])
	}
	Measurement{AvgRate: 0.0012345678, PeakRate: 0.002}.Prefill(&form)
	if form[AvgRate] != "0.001235" {
		t.Errorf("slow topic rate %q", form[AvgRate])
	}
}

// Figures computed from decimal inputs print as decimals: 3 events/s × 0.1
// is 0.3 deliveries, not 0.30000000000000004; and a rate or size too small
// to mean anything is refused with the field named instead of filling the
// worksheet with noise.
func TestResults_NoFloatNoiseAndNoAbsurdlySmallInputs(t *testing.T) {
	r, ok := Compute(with(func(in *Inputs) {
		in.AvgRate, in.PeakRate, in.Groups, in.HotKeyShare, in.ConsumerRate, in.Partitions = 0.1, 0.3, 3, 0.1, 0.7, 3
	})).Results()
	if !ok {
		t.Fatal("inputs invalid")
	}
	b, _ := json.Marshal(r)
	for _, noise := range []string{"00000000", "99999999"} {
		if strings.Contains(string(b), noise) {
			t.Fatalf("float noise in %s", b)
		}
	}
	for _, tc := range []struct {
		f    Field
		text string
	}{
		{AvgRate, "0.0000001"}, {PeakRate, "0.0005"}, {ConsumerRate, "0.0000003"}, {EventSize, "0.001B"}, {LagRate, "0.00001"},
	} {
		_, err := tc.f.Parse(tc.text)
		if err == nil || !strings.Contains(err.Error(), "absurdly small") {
			t.Errorf("--%s %s: %v, want 'absurdly small'", tc.f.Flag(), tc.text, err)
		}
	}
	if _, err := AvgRate.Parse("0.001"); err != nil {
		t.Errorf("the smallest allowed rate is refused: %v", err)
	}
}
