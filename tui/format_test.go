package tui

import (
	"testing"
	"time"
)

func TestFmtDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                       "0s",
		1400 * time.Millisecond:                 "1s",
		45 * time.Second:                        "45s",
		12*time.Minute + 5*time.Second:          "12m05s",
		3*time.Hour + 12*time.Minute:            "3h12m",
		50*time.Hour + 59*time.Minute:           "2d02h",
		-90 * time.Second:                       "-1m30s",
		72*time.Hour - 7*time.Minute:            "2d23h",
		59*time.Minute + 59*time.Second:         "59m59s",
		59*time.Minute + 59500*time.Millisecond: "1h00m",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%s) = %q, want %q", d, got, want)
		}
	}
}
