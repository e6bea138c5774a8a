package tui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/tui/styles"
)

// fmtAge is durations.Format, or "?" when the age could not be read.
func fmtAge(d time.Duration, known bool) string {
	if !known {
		return "?"
	}
	return durations.Format(d)
}

// fmtRate formats records per second: "-" until two samples exist.
func fmtRate(r float64, known bool) string {
	if !known {
		return "-"
	}
	switch {
	case r >= 10000:
		return fmt.Sprintf("%.0fk/s", r/1000)
	case r >= 100:
		return fmt.Sprintf("%.0f/s", r)
	}
	return fmt.Sprintf("%.1f/s", r)
}

// fmtOffset formats an offset; a missing commit reads "-".
func fmtOffset(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

// fmtIDs joins broker ids: "1,2,3".
func fmtIDs(ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(id)))
	}
	return b.String()
}

// statusLevel maps a lag status to a colour level.
func statusLevel(s lag.Status) styles.Level {
	switch s {
	case lag.OK:
		return styles.Normal
	case lag.JUDGING:
		return styles.Dim // not a verdict yet: the next refresh gives one
	case lag.LAGGING, lag.REWIND:
		return styles.Warn
	}
	return styles.Bad
}

// isrLevel maps an ISR class to a colour level.
func isrLevel(c lag.ISRClass) styles.Level {
	switch c {
	case lag.Healthy:
		return styles.Normal
	case lag.UnderReplicated, lag.AtMinISR:
		return styles.Warn
	}
	return styles.Bad
}

// isrText is how an ISR class reads in a cell.
func isrText(h lag.PartitionHealth) string {
	switch h.Class {
	case lag.UnderReplicated:
		return "under-replicated"
	case lag.AtMinISR:
		return "at min ISR"
	case lag.UnderMinISR:
		return "UNDER MIN ISR: acks=all writes blocked"
	case lag.Offline:
		return "OFFLINE: no leader"
	}
	return "ok"
}

// isrShort is isrText for a narrow cell.
func isrShort(h lag.PartitionHealth) string {
	switch h.Class {
	case lag.UnderReplicated:
		return "under-replicated"
	case lag.AtMinISR:
		return "at min ISR"
	case lag.UnderMinISR:
		return "UNDER MIN ISR"
	case lag.Offline:
		return "OFFLINE"
	}
	return "ok"
}

// num is a float sort key.
func num[T int | int32 | int64 | float64](v T) float64 { return float64(v) }

// unknown is the sort key of a value that is not known.
var unknown = math.NaN()

// durKey is a sort key for a duration that may be unknown.
func durKey(d time.Duration, known bool) float64 {
	if !known {
		return unknown
	}
	return d.Seconds()
}
