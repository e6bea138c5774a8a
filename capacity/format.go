package capacity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// trimFloat renders v with as many digits as it needs and no exponent
// ("20000", "0.3", "1.5").
func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// groupThousands renders v with d decimals and comma-grouped thousands
// ("31,200,000", "19.53"). A non-zero value below 1 keeps at least two
// significant digits, so a small figure never reads as nothing.
func groupThousands(v float64, d int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—" // never printed for computed figures; defensive
	}
	fixed := d
	if v != 0 && math.Abs(v) < 1 {
		// Below 1, keep at least two significant digits ("0.047 MiB/s",
		// not "0.05"; the seed's "0.81 MiB/s"), without an exponent.
		d = max(d, sigDecimals(v, 2))
	}
	s := strconv.FormatFloat(v, 'f', d, 64)
	for d > fixed && strings.HasSuffix(s, "0") {
		s, d = s[:len(s)-1], d-1 // digits added for significance only
	}
	s = strings.TrimSuffix(s, ".")
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if hasFrac {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// num renders a figure with d decimals, dropping a fractional part of
// zeros for whole counts typed as inputs ("20,000", "0.5").
func num(v float64) string {
	if v == math.Trunc(v) {
		return groupThousands(v, 0)
	}
	s := groupThousands(v, 2)
	if strings.Contains(s, ".") && !strings.ContainsAny(s, "e") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// FormatSizeInput renders a byte count as text ParseSize reads back exactly:
// "1KiB" when it is a whole number of a binary unit, "1000B" otherwise.
func FormatSizeInput(b float64) string {
	for _, u := range []struct {
		name string
		n    float64
	}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if b >= u.n && math.Mod(b, u.n) == 0 {
			return trimFloat(b/u.n) + u.name
		}
	}
	return trimFloat(b) + "B"
}

// FormatSize renders a byte count for reading: "1 KiB", "1.5 KiB", "1,000 B".
func FormatSize(b float64) string {
	for _, u := range []struct {
		name string
		n    float64
	}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if b >= u.n {
			return num(math.Round(b/u.n*100)/100) + " " + u.name
		}
	}
	return num(math.Round(b*100)/100) + " B"
}

// FormatDurationInput renders a duration as text ParseDuration reads back:
// the largest unit it is a whole number of ("3d", "10m"), else seconds.
func FormatDurationInput(d time.Duration) string {
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	if d == 0 {
		return "0s"
	}
	return trimFloat(d.Seconds()) + "s"
}

// FormatDuration renders seconds for reading: "18m 34s", "3d", "1h 5m".
func FormatDuration(s float64) string {
	if s < 1 {
		return num(math.Round(s*1000)/1000) + " s"
	}
	total := int64(math.Round(s))
	parts := []string{}
	for _, u := range []struct {
		name string
		n    int64
	}{{"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}} {
		if q := total / u.n; q > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", q, u.name))
			total -= q * u.n
		}
		if len(parts) == 2 {
			break
		}
	}
	return strings.Join(parts, " ")
}

// FormatValue renders an output's value for reading, at the precision the
// seed's worksheet prints it, with its unit.
func FormatValue(o Output, v float64) string {
	switch o {
	case IngestMiBPerS, PeakMiBPerS, EgressMiBPerS, PeakEgressMiBPerS:
		return scaled(v, binaryUnits, 2, 2) + "/s"
	case IngestTBPerDay:
		return scaled(v, decimalUnits, 4, 3) + "/day"
	case IngestTiBPerDay:
		return scaled(v, binaryUnits, 4, 3) + "/day"
	case RetentionLogicalTiB, RetentionReplicatedTiB:
		return scaled(v, binaryUnits, 4, 2)
	case PeakGrossGiB, PeakAboveBaselineGiB:
		return scaled(v, binaryUnits, 3, 2)
	case DeliveriesPerS, PeakDeliveriesPerS, PartitionCapPerS, HotPartitionPerS:
		return groupThousands(v, 0) + "/s"
	case OtherPartitionPerS:
		return "≈" + groupThousands(v, 0) + "/s each"
	case ConsumersPerGroup, PeakConsumersPerGroup:
		return groupThousands(v, 0) + " per group"
	case ConsumersTotal, PeakConsumersTotal:
		return groupThousands(v, 0) + " total"
	case MinPartitionsForPeak:
		if v == 1 {
			return "≥1 partition"
		}
		return "≥" + groupThousands(v, 0) + " partitions"
	case PeakBacklogEvents, LagEventsForDuration:
		return groupThousands(v, 0) + " events"
	case DrainSeconds, LagSecondsForEvents:
		if v >= 60 {
			return groupThousands(v, 0) + " s (" + FormatDuration(v) + ")"
		}
		return num(math.Round(v*10)/10) + " s"
	case HotPartitionMultiple:
		return groupThousands(v, 1) + "×"
	}
	return num(v)
}

// Byte units, smallest first: binary (the worksheet's MiB, GiB, TiB) and
// decimal (its TB/day).
var (
	binaryUnits  = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	decimalUnits = []string{"B", "KB", "MB", "GB", "TB", "PB"}
)

// scaled renders v, a figure in units[u], in the unit that keeps it
// readable: the figure's own unit unless it is below 0.1 there (a small
// load read "0.000014 GiB") or reaches 1024 (1000 for decimal units); then
// the unit where it is at least 1 and below the next step. d decimals, none
// for bytes.
func scaled(v float64, units []string, u, d int) string {
	step := 1024.0
	if units[1] == "KB" {
		step = 1000
	}
	for u > 0 && v != 0 && math.Abs(v) < 0.1 {
		v, u = v*step, u-1
	}
	for u < len(units)-1 && math.Abs(v) >= step {
		v, u = v/step, u+1
	}
	if u == 0 {
		v, d = math.Round(v), 0 // whole bytes
	}
	return groupThousands(v, d) + " " + units[u]
}

// sigDecimals is how many decimals show n significant digits of v (v != 0).
func sigDecimals(v float64, n int) int {
	return max(0, n-1-int(math.Floor(math.Log10(math.Abs(v)))))
}

// roundMeasured keeps a measured figure readable in a form field: two
// decimals from 1 up, four significant digits below.
func roundMeasured(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	d := 2
	if math.Abs(v) < 1 {
		d = sigDecimals(v, 4)
	}
	p := math.Pow10(d)
	return math.Round(v*p) / p
}
