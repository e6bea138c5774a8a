package capacity

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The parsers below read what a planner types. They are deliberately
// narrower than strconv: no exponents, hex, "inf" or "nan", because a stray
// "e" or "0x" in a capacity figure is a typo, not a number, and a worksheet
// must never carry NaN or Inf into its arithmetic.

var (
	errEmpty    = errors.New("is empty")
	errNegative = errors.New("must not be negative")
)

// parseDecimal reads a plain decimal number: digits with an optional
// fraction, the integer part optionally grouped with commas ("20,000") or
// underscores ("20_000"). A leading minus is recognised only to report
// "must not be negative" instead of "not a number".
func parseDecimal(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errEmpty
	}
	neg := false
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		s = s[1:]
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	digits, ok := ungroup(intPart)
	if !ok || (digits == "" && (!hasDot || frac == "")) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	for _, r := range frac {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	if hasDot && frac == "" {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	clean := digits
	if clean == "" {
		clean = "0"
	}
	if hasDot {
		clean += "." + frac
	}
	v, err := strconv.ParseFloat(clean, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if neg && v != 0 {
		return 0, errNegative
	}
	return v, nil
}

// ungroup removes thousands separators from an integer part, accepting
// either commas in groups of three ("1,234,567") or underscores between
// digits ("1_234_567"), and rejecting anything else.
func ungroup(s string) (string, bool) {
	if s == "" {
		return "", true
	}
	if strings.Contains(s, ",") {
		groups := strings.Split(s, ",")
		if len(groups[0]) < 1 || len(groups[0]) > 3 {
			return "", false
		}
		for _, g := range groups[1:] {
			if len(g) != 3 {
				return "", false
			}
		}
		s = strings.Join(groups, "")
	} else if strings.Contains(s, "_") {
		if s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
			return "", false
		}
		s = strings.ReplaceAll(s, "_", "")
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return "", false
		}
	}
	return s, true
}

// splitUnit splits "1.5 KiB" into the number and the unit.
func splitUnit(s string) (num, unit string) {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 {
		c := s[i-1]
		if (c >= '0' && c <= '9') || c == '.' || c == ' ' || c == ',' || c == '_' {
			break
		}
		i--
	}
	return strings.TrimSpace(s[:i]), s[i:]
}

// sizeUnits are the byte units a size accepts: binary (KiB = 1024 B) and
// decimal (KB = 1000 B), as the seed's worksheet uses both.
var sizeUnits = map[string]float64{
	"b":   1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	"kb": 1e3, "mb": 1e6, "gb": 1e9,
}

// ParseSize reads a byte size: "1KiB", "1.5 MiB", "512B", "1000" (bytes),
// "1KB" (1000 bytes). Units are case-insensitive.
func ParseSize(s string) (float64, error) {
	num, unit := splitUnit(s)
	if strings.TrimSpace(s) == "" {
		return 0, errEmpty
	}
	mult := 1.0
	if unit != "" {
		m, ok := sizeUnits[strings.ToLower(unit)]
		if !ok {
			return 0, fmt.Errorf("unknown unit %q (use B, KiB, MiB, GiB, KB, MB or GB)", unit)
		}
		mult = m
	}
	if num == "" {
		return 0, fmt.Errorf("%q needs a number before the unit", strings.TrimSpace(s))
	}
	v, err := parseDecimal(num)
	if err != nil {
		return 0, err
	}
	v *= mult
	if math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return v, nil
}

var durationUnits = map[string]time.Duration{
	"d": 24 * time.Hour, "h": time.Hour, "m": time.Minute, "s": time.Second,
}

// maxDuration keeps durations far from time.Duration's overflow at about
// 292 years; validation enforces tighter, field-specific limits.
const maxDuration = 200 * 365 * 24 * time.Hour

// ParseDuration reads a duration in days, hours, minutes and seconds:
// "3d", "72h", "10m", "1d12h", "1.5h", "90s". A bare number has no unit and
// is refused: "10" could be seconds or minutes.
func ParseDuration(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, errEmpty
	}
	if rest[0] == '-' {
		return 0, errNegative
	}
	var total float64 // seconds
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		for i < len(rest) && rest[i] == ' ' {
			i++
		}
		j := i
		for j < len(rest) && (rest[j] < '0' || rest[j] > '9') && rest[j] != '.' && rest[j] != ' ' {
			j++
		}
		num, unit := strings.TrimSpace(rest[:i]), rest[i:j]
		if num == "" {
			return 0, fmt.Errorf("%q is not a duration (e.g. 3d, 72h, 10m)", s)
		}
		if unit == "" {
			return 0, fmt.Errorf("%q needs a unit (d, h, m or s)", s)
		}
		d, ok := durationUnits[strings.ToLower(unit)]
		if !ok {
			return 0, fmt.Errorf("unknown unit %q in %q (use d, h, m or s)", unit, s)
		}
		v, err := parseDecimal(num)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (e.g. 3d, 72h, 10m)", s)
		}
		total += v * d.Seconds()
		if total > maxDuration.Seconds() {
			return 0, fmt.Errorf("%q is too large", s)
		}
		rest = strings.TrimLeft(rest[j:], " ")
	}
	return time.Duration(math.Round(total * 1e9)), nil
}

// ParseRate reads events per second: "20000", "20,000", "20000/s".
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(t, "/s")
	return parseDecimal(t)
}

// ParseShare reads a fraction as "0.3" or "30%"; the result is a fraction.
func ParseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := parseDecimal(p)
		return v / 100, err
	}
	return parseDecimal(t)
}

// ParsePercent reads a percentage as "20" or "20%"; the result is in percent.
func ParsePercent(s string) (float64, error) {
	return parseDecimal(strings.TrimSuffix(strings.TrimSpace(s), "%"))
}

// ParseRatio reads a compression ratio as "2", "2x" or "2:1".
func ParseRatio(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "x"), "×")
	t = strings.TrimSuffix(t, ":1")
	return parseDecimal(t)
}

// ParseCount reads a whole number ("24", "1,000").
func ParseCount(s string) (float64, error) {
	v, err := parseDecimal(s)
	if err != nil {
		return 0, err
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%s is not a whole number", strings.TrimSpace(s))
	}
	return v, nil
}
