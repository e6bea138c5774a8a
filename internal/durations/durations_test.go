package durations

import (
	"math"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                              "0s",
		time.Nanosecond:                                "0s",
		600 * time.Microsecond:                         "1ms",
		250 * time.Millisecond:                         "250ms",
		999 * time.Millisecond:                         "999ms",
		999600 * time.Microsecond:                      "1s",
		1400 * time.Millisecond:                        "1s",
		1500 * time.Millisecond:                        "2s",
		45 * time.Second:                               "45s",
		12*time.Minute + 5*time.Second:                 "12m05s",
		2*time.Hour + 5*time.Minute:                    "2h05m",
		3*time.Hour + 12*time.Minute:                   "3h12m",
		50*time.Hour + 59*time.Minute:                  "2d02h",
		-90 * time.Second:                              "-1m30s",
		-300 * time.Millisecond:                        "-300ms",
		72*time.Hour - 7*time.Minute:                   "2d23h",
		59*time.Minute + 59*time.Second:                "59m59s",
		59*time.Minute + 59500*time.Millisecond:        "1h00m",
		23*time.Hour + 59*time.Minute + 30*time.Second: "23h59m",
		math.MaxInt64:                                  "106751d23h",
		math.MinInt64:                                  "-106751d23h",
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%d) = %q, want %q", int64(d), got, want)
		}
	}
}

func BenchmarkFormat(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		_ = Format(time.Duration(i%100000) * time.Second)
	}
}
