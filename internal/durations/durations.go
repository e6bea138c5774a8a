// Package durations is the one way Berth shows a duration to a person: ages,
// SLOs, ETAs, retention, "refreshed 12s ago", in the console and in every
// command's table, so the same age reads the same everywhere.
//
// Durations a user types back (config view, the capacity worksheet's input
// fields) are written by config.FormatDuration and
// capacity.FormatDurationInput instead: those must round-trip through their
// parsers, which this compact form does not.
package durations

import (
	"math"
	"strconv"
	"time"
)

// Format renders d with its two largest units, the smaller one zero-padded
// so a column of them lines up: "0s", "250ms", "45s", "7m05s", "2h05m",
// "3d04h"; "-" before a negative one. A duration under a second is rounded
// to the millisecond, so a small age does not read as none; longer ones to
// the second, and the smaller unit is then cut, not rounded ("2h05m" for
// 2h05m59s). It does not use fmt: console tables call it for every cell of
// 10,000-row pages on each refresh.
func Format(d time.Duration) string {
	var b [32]byte
	out := b[:0]
	if d < 0 {
		out = append(out, '-')
		if d == math.MinInt64 { // -d would overflow back to itself
			d = math.MaxInt64
		} else {
			d = -d
		}
	}
	if d >= time.Millisecond/2 && d < time.Second-time.Millisecond/2 {
		ms := (d + time.Millisecond/2) / time.Millisecond
		out = strconv.AppendInt(out, int64(ms), 10)
		return string(append(out, 'm', 's'))
	}
	s := int64(d / time.Second)
	if d%time.Second >= time.Second/2 {
		s++
	}
	two := func(n int64) {
		out = append(out, byte('0'+n/10), byte('0'+n%10))
	}
	switch {
	case s < 60:
		out = strconv.AppendInt(out, s, 10)
		out = append(out, 's')
	case s < 3600:
		out = strconv.AppendInt(out, s/60, 10)
		out = append(out, 'm')
		two(s % 60)
		out = append(out, 's')
	case s < 86400:
		out = strconv.AppendInt(out, s/3600, 10)
		out = append(out, 'h')
		two((s % 3600) / 60)
		out = append(out, 'm')
	default:
		out = strconv.AppendInt(out, s/86400, 10)
		out = append(out, 'd')
		two((s % 86400) / 3600)
		out = append(out, 'h')
	}
	return string(out)
}
