package capacity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// printed renders v the way the seed prints the figure, so the test reads
// like the seed's worksheet.
func printed(v float64, decimals int) string { return groupThousands(v, decimals) }

// TestWorksheet_HarborCart pins every figure the seed's worksheet prints
// for the HarborCart planning load (D9, Decision 7, Decision 10), at the
// precision the seed prints it.
func TestWorksheet_HarborCart(t *testing.T) {
	w := Compute(HarborCart)
	if !w.Valid() {
		t.Fatalf("HarborCart inputs invalid: %v", w.Err())
	}
	for _, tc := range []struct {
		o        Output
		decimals int
		want     string
	}{
		{IngestMiBPerS, 2, "19.53"},
		{IngestTBPerDay, 3, "1.769"},
		{IngestTiBPerDay, 3, "1.609"},
		{RetentionLogicalTiB, 2, "4.83"},
		{RetentionReplicatedTiB, 2, "14.48"},
		{PeakMiBPerS, 2, "97.66"},
		{PeakGrossGiB, 2, "57.22"},
		{PeakAboveBaselineGiB, 2, "45.78"},
		{DeliveriesPerS, 0, "60,000"},
		{PeakDeliveriesPerS, 0, "300,000"},
		{ConsumersPerGroup, 0, "10"},
		{ConsumersTotal, 0, "30"},
		{PeakConsumersPerGroup, 0, "50"},
		{PeakConsumersTotal, 0, "150"},
		{EgressMiBPerS, 2, "97.66"},
		{PeakEgressMiBPerS, 2, "488.28"},
		{PartitionCapPerS, 0, "48,000"},
		{MinPartitionsForPeak, 0, "50"},
		{PeakBacklogEvents, 0, "31,200,000"},
		{DrainSeconds, 0, "1,114"},
		{HotPartitionPerS, 0, "6,000"},
		{HotPartitionMultiple, 1, "7.2"},
		{OtherPartitionPerS, 0, "609"},
	} {
		t.Run(tc.o.JSON(), func(t *testing.T) {
			v, ok := w.Value(tc.o)
			if !ok {
				t.Fatalf("unavailable: %s", w.Why(tc.o))
			}
			if got := printed(v, tc.decimals); got != tc.want {
				t.Errorf("%s = %v, prints %s; the seed prints %s", tc.o.JSON(), v, got, tc.want)
			}
		})
	}
}

// TestWorksheet_HarborCartExact checks the figures that are exact in binary
// arithmetic, and the egress model: consumer reads plus follower
// replication, (groups + RF - 1) x ingest.
func TestWorksheet_HarborCartExact(t *testing.T) {
	w := Compute(HarborCart)
	exact := map[Output]float64{
		IngestMiBPerS:      19.53125,        // 20,000 x 1,024 B / 2^20
		PeakMiBPerS:        97.65625,        // 100,000 x 1,024 B / 2^20
		EgressMiBPerS:      19.53125 * 5,    // 3 groups + 2 followers
		PeakEgressMiBPerS:  97.65625 * 5,    // = 488.28125
		PeakBacklogEvents:  52000 * 600,     // (100,000 - 48,000) x 600 s
		DrainSeconds:       31200000 / 28e3, // backlog / (48,000 - 20,000)
		OtherPartitionPerS: 14000.0 / 23,
	}
	for o, want := range exact {
		if got, _ := w.Value(o); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s = %v, want %v", o.JSON(), got, want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// with returns HarborCart changed by fn.
func with(fn func(*Inputs)) Inputs {
	in := HarborCart
	fn(&in)
	return in
}

// TestWorksheet_Edges covers the edge cases a planner meets: each case
// states the figures that change and how.
func TestWorksheet_Edges(t *testing.T) {
	type want struct {
		o     Output
		v     float64
		state State
	}
	for _, tc := range []struct {
		name    string
		in      Inputs
		bad     []Field // fields that must be reported invalid
		want    []want
		capHits bool
	}{
		{
			name: "peak below average is refused on the peak field",
			in:   with(func(in *Inputs) { in.PeakRate = 10000 }),
			bad:  []Field{PeakRate},
			want: []want{
				{PeakMiBPerS, 0, Invalid}, {PeakGrossGiB, 0, Invalid}, {PeakAboveBaselineGiB, 0, Invalid},
				{PeakConsumersPerGroup, 0, Invalid}, {MinPartitionsForPeak, 0, Invalid}, {DrainSeconds, 0, Invalid},
				// figures that do not use the peak stay available
				{IngestMiBPerS, 19.53125, Available}, {ConsumersPerGroup, 10, Available}, {PartitionCapPerS, 48000, Available},
				{HotPartitionPerS, 6000, Available},
			},
		},
		{
			name: "peak equal to average has no volume above baseline",
			in:   with(func(in *Inputs) { in.PeakRate = 20000 }),
			want: []want{{PeakAboveBaselineGiB, 0, Available}, {PeakBacklogEvents, 0, Available}, {DrainSeconds, 0, Available}},
		},
		{
			name: "cap above the peak: never reached, nothing to drain",
			in:   with(func(in *Inputs) { in.Partitions = 60 }),
			want: []want{{PartitionCapPerS, 120000, Available}, {PeakBacklogEvents, 0, Available}, {DrainSeconds, 0, Available},
				{MinPartitionsForPeak, 50, Available}},
		},
		{
			name: "cap exactly the peak is not reached",
			in:   with(func(in *Inputs) { in.Partitions = 50 }),
			want: []want{{PartitionCapPerS, 100000, Available}, {PeakBacklogEvents, 0, Available}},
		},
		{
			name:    "cap below the average never drains",
			in:      with(func(in *Inputs) { in.Partitions = 5 }),
			capHits: true,
			want: []want{{PartitionCapPerS, 10000, Available}, {PeakBacklogEvents, 90000 * 600, Available},
				{DrainSeconds, 0, NotApplicable}},
		},
		{
			name:    "one partition: the hot partition is the whole topic",
			in:      with(func(in *Inputs) { in.Partitions = 1 }),
			capHits: true,
			want: []want{{HotPartitionPerS, 20000, Available}, {HotPartitionMultiple, 1, Available},
				{OtherPartitionPerS, 0, NotApplicable}, {PartitionCapPerS, 2000, Available},
				{PeakBacklogEvents, 98000 * 600, Available}, {DrainSeconds, 0, NotApplicable}},
		},
		{
			name:    "RF 1: no replicas to store or to feed",
			in:      with(func(in *Inputs) { in.ReplicationFactor = 1 }),
			capHits: true,
			want: []want{{RetentionReplicatedTiB, 20000 * 1024 * 3 * day / TiB, Available},
				{EgressMiBPerS, 19.53125 * 3, Available}, {PeakEgressMiBPerS, 97.65625 * 3, Available}},
		},
		{
			name:    "no consumer groups: egress is replication only",
			in:      with(func(in *Inputs) { in.Groups = 0 }),
			capHits: true,
			want: []want{{DeliveriesPerS, 0, Available}, {ConsumersTotal, 0, Available},
				{EgressMiBPerS, 19.53125 * 2, Available}},
		},
		{
			name:    "compression 2:1 halves bytes, not counts",
			in:      with(func(in *Inputs) { in.Compression = 2 }),
			capHits: true,
			want: []want{{IngestMiBPerS, 19.53125 / 2, Available}, {PeakEgressMiBPerS, 488.28125 / 2, Available},
				{ConsumersPerGroup, 10, Available}, {PartitionCapPerS, 48000, Available}},
		},
		{
			name:    "headroom 10% raises what is provisioned, not the load",
			in:      with(func(in *Inputs) { in.HeadroomPct = 10 }),
			capHits: true,
			want: []want{
				{ConsumersPerGroup, 11, Available}, {ConsumersTotal, 33, Available},
				// 100,000 x 1.1 / 2,000 is 55.00000000000001 in floating point: that must not make it 56
				{PeakConsumersPerGroup, 55, Available}, {MinPartitionsForPeak, 55, Available},
				{RetentionReplicatedTiB, 20000 * 1024 * 3 * day / TiB * 3 * 1.1, Available},
				{RetentionLogicalTiB, 20000 * 1024 * 3 * day / TiB, Available},
				{IngestMiBPerS, 19.53125, Available}, {EgressMiBPerS, 19.53125 * 5, Available},
			},
		},
		{
			name:    "no peak duration: no peak volume, no backlog, though the peak is above the cap",
			in:      with(func(in *Inputs) { in.PeakDuration = 0 }),
			capHits: true,
			want:    []want{{PeakGrossGiB, 0, Available}, {PeakBacklogEvents, 0, Available}, {DrainSeconds, 0, Available}},
		},
		{
			name:    "lag converts at the average rate by default",
			in:      with(func(in *Inputs) { in.LagEvents = 1200000; in.LagDuration = 5 * time.Minute }),
			capHits: true,
			want:    []want{{LagSecondsForEvents, 60, Available}, {LagEventsForDuration, 6000000, Available}},
		},
		{
			name:    "lag converts at the given rate",
			in:      with(func(in *Inputs) { in.LagEvents = 1200000; in.LagDuration = 5 * time.Minute; in.LagRate = 1000 }),
			capHits: true,
			want:    []want{{LagSecondsForEvents, 1200, Available}, {LagEventsForDuration, 300000, Available}},
		},
		{
			name: "a small hot key is cooler than uniform",
			in:   with(func(in *Inputs) { in.HotKeyShare = 0.01 }),
			want: []want{{HotPartitionPerS, 200, Available}, {HotPartitionMultiple, 0.24, Available},
				{OtherPartitionPerS, 19800.0 / 23, Available}},
			capHits: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Compute(tc.in)
			for _, f := range tc.bad {
				if w.Errors[f] == nil {
					t.Errorf("field %s not reported invalid", f.Flag())
				}
			}
			if len(w.Errors) != len(tc.bad) {
				t.Errorf("invalid fields %v, want only %v", w.Errors, tc.bad)
			}
			for _, x := range tc.want {
				v, _ := w.Value(x.o)
				if st := w.State(x.o); st != x.state {
					t.Errorf("%s state %d (%s), want %d", x.o.JSON(), st, w.Why(x.o), x.state)
					continue
				}
				if x.state == Available && !near(v, x.v) {
					t.Errorf("%s = %v, want %v", x.o.JSON(), v, x.v)
				}
				if x.state != Available && w.Why(x.o) == "" {
					t.Errorf("%s unavailable without a reason", x.o.JSON())
				}
			}
			if len(tc.bad) == 0 && w.CapReached() != tc.capHits {
				t.Errorf("CapReached = %v, want %v", w.CapReached(), tc.capHits)
			}
		})
	}
}

// randomInputs draws valid inputs spanning several orders of magnitude.
func randomInputs(r *rand.Rand) Inputs {
	logU := func(lo, hi float64) float64 { return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))) }
	avg := math.Round(logU(1, 1e6))
	in := Inputs{
		AvgRate:           avg,
		PeakRate:          math.Round(avg * logU(1, 20)),
		PeakDuration:      time.Duration(r.IntN(7200)) * time.Second,
		EventSize:         math.Round(logU(1, 1<<20)),
		Retention:         time.Duration(1+r.IntN(30*24)) * time.Hour,
		ReplicationFactor: 1 + r.IntN(5),
		Groups:            r.IntN(20),
		ConsumerRate:      math.Round(logU(1, 1e5)),
		Partitions:        1 + r.IntN(500),
		HotKeyShare:       r.Float64(),
	}
	if r.IntN(2) == 0 {
		in.Compression = 1 + r.Float64()*9
	}
	if r.IntN(2) == 0 {
		in.HeadroomPct = float64(r.IntN(100))
	}
	if r.IntN(2) == 0 {
		in.LagEvents = float64(r.IntN(1e9))
		in.LagDuration = time.Duration(r.IntN(86400)) * time.Second
	}
	return in
}

var byteOutputs = []Output{IngestMiBPerS, IngestTBPerDay, IngestTiBPerDay, RetentionLogicalTiB, RetentionReplicatedTiB,
	PeakMiBPerS, PeakGrossGiB, PeakAboveBaselineGiB, EgressMiBPerS, PeakEgressMiBPerS}

func isByteOutput(o Output) bool {
	for _, b := range byteOutputs {
		if b == o {
			return true
		}
	}
	return false
}

// TestWorksheet_Properties checks relations that hold for any valid load.
func TestWorksheet_Properties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		in := randomInputs(r)
		w := Compute(in)
		if !w.Valid() {
			t.Fatalf("case %d: generated invalid inputs %+v: %v", i, in, w.Err())
		}
		fail := func(format string, a ...any) {
			t.Helper()
			t.Fatalf("case %d %+v: %s", i, in, fmt.Sprintf(format, a...))
		}
		v := func(o Output) float64 { x, _ := w.Value(o); return x }

		// Every figure is finite and non-negative, or not applicable with a reason.
		for _, o := range Outputs() {
			x, ok := w.Value(o)
			switch {
			case ok && (math.IsNaN(x) || math.IsInf(x, 0) || x < 0):
				fail("%s = %v", o.JSON(), x)
			case !ok && w.State(o) != NotApplicable:
				fail("%s unavailable with valid inputs: %s", o.JSON(), w.Why(o))
			}
		}

		// Doubling the event size doubles every byte figure and leaves every count alone.
		big := in
		big.EventSize *= 2
		w2 := Compute(big)
		for _, o := range Outputs() {
			a, okA := w.Value(o)
			b, okB := w2.Value(o)
			if okA != okB {
				fail("%s availability changed with event size", o.JSON())
			}
			want := a
			if isByteOutput(o) {
				want = 2 * a
			}
			if !near(b, want) {
				fail("event size x2: %s = %v, want %v", o.JSON(), b, want)
			}
		}

		// Doubling the compression ratio halves every byte figure.
		cmp := in
		cmp.Compression = math.Max(in.Compression, 1) * 2
		w3 := Compute(cmp)
		for _, o := range byteOutputs {
			if b := w3.Value; !near(func() float64 { x, _ := b(o); return x }(), v(o)/2) {
				fail("compression x2: %s not halved", o.JSON())
			}
		}

		// Egress is (groups + RF - 1) copies of ingest, at average and at peak.
		copies := float64(in.Groups + in.ReplicationFactor - 1)
		if !near(v(EgressMiBPerS), v(IngestMiBPerS)*copies) || !near(v(PeakEgressMiBPerS), v(PeakMiBPerS)*copies) {
			fail("egress is not (groups + RF - 1) x ingest")
		}
		// Peak egress over average egress is the peak over the average rate.
		if v(EgressMiBPerS) > 0 && !near(v(PeakEgressMiBPerS)/v(EgressMiBPerS), in.PeakRate/in.AvgRate) {
			fail("egress ratio differs from rate ratio")
		}
		// TB/day and TiB/day are the same bytes in different units.
		if !near(v(IngestTBPerDay)*TB, v(IngestTiBPerDay)*TiB) {
			fail("TB and TiB per day disagree")
		}
		// Gross peak volume = baseline volume + volume above baseline.
		base := in.AvgRate * bytesPerEvent(in) * in.PeakDuration.Seconds() / GiB
		if !near(v(PeakGrossGiB), base+v(PeakAboveBaselineGiB)) {
			fail("gross != baseline + above baseline")
		}
		// Totals are per-group figures times the number of groups.
		if v(ConsumersTotal) != v(ConsumersPerGroup)*float64(in.Groups) || v(PeakConsumersTotal) != v(PeakConsumersPerGroup)*float64(in.Groups) {
			fail("consumer totals")
		}
		// Enough consumers: per group they cover the rate, and one fewer would not.
		need := in.AvgRate * headroom(in)
		if c := v(ConsumersPerGroup); c*in.ConsumerRate < need*(1-1e-9) || (c-1)*in.ConsumerRate >= need*(1+1e-9) {
			fail("consumers per group %v for rate %v at %v each", c, need, in.ConsumerRate)
		}
		// A backlog exists exactly when the peak exceeds the cap for a while.
		if (v(PeakBacklogEvents) > 0) != (in.PeakRate > v(PartitionCapPerS) && in.PeakDuration > 0) {
			fail("backlog %v with cap %v, peak %v", v(PeakBacklogEvents), v(PartitionCapPerS), in.PeakRate)
		}
		if w.CapReached() != (in.PeakRate > v(PartitionCapPerS)) {
			fail("CapReached %v with cap %v, peak %v", w.CapReached(), v(PartitionCapPerS), in.PeakRate)
		}
		// The hot partition and the others carry the whole average rate.
		if in.Partitions > 1 && !near(v(HotPartitionPerS)+float64(in.Partitions-1)*v(OtherPartitionPerS), in.AvgRate) {
			fail("hot + others != average")
		}
		// Lag round trip: N events take N/rate seconds, and that long holds N events.
		if in.LagEvents > 0 && !near(v(LagSecondsForEvents)*lagRate(in), in.LagEvents) {
			fail("lag round trip")
		}
	}
}

// TestWorksheet_DependenciesComplete pins that a figure depends only on the
// inputs it declares: changing any other input leaves it unchanged. This is
// what lets the form blank exactly the figures an invalid field feeds, and
// never show a stale number.
func TestWorksheet_DependenciesComplete(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		a, b := randomInputs(r), randomInputs(r)
		for _, f := range Fields() {
			mixed := a
			f.Set(&mixed, f.Get(b))
			if mixed.PeakRate < mixed.AvgRate {
				continue // not a valid load
			}
			wa, wm := Compute(a), Compute(mixed)
			for _, o := range Outputs() {
				if dependsOn(o, f) {
					continue
				}
				x, okx := wa.Value(o)
				y, oky := wm.Value(o)
				if okx != oky || !near(x, y) {
					t.Fatalf("%s changed when %s (not a declared input) changed: %v -> %v", o.JSON(), f.Flag(), x, y)
				}
			}
		}
	}
}

func dependsOn(o Output, f Field) bool {
	for _, d := range o.Deps() {
		if d == f {
			return true
		}
	}
	return false
}

// TestForm_InvalidFieldBlanksOnlyDependents types garbage into each field in
// turn: that field reports an error, exactly the figures computed from it
// become unavailable with a reason naming it, and every other figure keeps
// its HarborCart value.
func TestForm_InvalidFieldBlanksOnlyDependents(t *testing.T) {
	good := DefaultForm()
	good[LagEvents] = "1000"
	good[LagDuration] = "1m"
	base := good.Worksheet()
	for _, f := range Fields() {
		for _, text := range []string{"abc", "-1", "0"} {
			form := good
			form[f] = text
			w := form.Worksheet()
			if f.Optional() && text == "0" {
				continue // zero means "not given" for optional fields
			}
			if text == "0" && (f == PeakDuration || f == Groups || f == HotKeyShare || f == Headroom || f == LagEvents || f == LagDuration) {
				continue // zero is a valid value there
			}
			if w.Errors[f] == nil {
				t.Errorf("%s=%q: no error", f.Flag(), text)
				continue
			}
			for _, o := range Outputs() {
				blanked := dependsOn(o, f)
				x, ok := w.Value(o)
				if blanked {
					if ok {
						t.Errorf("%s=%q: %s still shows %v", f.Flag(), text, o.JSON(), x)
					} else if !strings.Contains(w.Why(o), "needs a valid") {
						t.Errorf("%s=%q: %s unavailable without naming the input: %q", f.Flag(), text, o.JSON(), w.Why(o))
					}
					continue
				}
				y, _ := base.Value(o)
				if !ok || x != y {
					t.Errorf("%s=%q: unrelated %s changed: %v (ok %v) want %v", f.Flag(), text, o.JSON(), x, ok, y)
				}
			}
		}
	}
}

// TestCompute_NeverNaN feeds inputs no form would produce (NaN, Inf,
// negative) straight into Compute: the fields are reported and no figure
// is NaN or Inf.
func TestCompute_NeverNaN(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 0, 1e300} {
		for _, f := range Fields() {
			in := HarborCart
			f.Set(&in, bad)
			w := Compute(in)
			for _, o := range Outputs() {
				if x, ok := w.Value(o); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
					t.Fatalf("%s=%v: %s = %v", f.Flag(), bad, o.JSON(), x)
				}
			}
			for _, s := range w.Sections() {
				for _, l := range s.Lines {
					if strings.Contains(l.Value, "NaN") || strings.Contains(l.Value, "Inf") {
						t.Fatalf("%s=%v: line %q", f.Flag(), bad, l.Value)
					}
				}
			}
		}
	}
}
