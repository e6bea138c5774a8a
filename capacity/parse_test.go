package capacity

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  string
	}{
		{"1KiB", 1024, ""},
		{"1 KiB", 1024, ""},
		{"1kib", 1024, ""},
		{"1.5KiB", 1536, ""},
		{"1MiB", 1 << 20, ""},
		{"1KB", 1000, ""},
		{"2MB", 2e6, ""},
		{"512B", 512, ""},
		{"512", 512, ""},
		{"1,000B", 1000, ""},
		{"", 0, "is empty"},
		{"1K", 0, "unknown unit"},
		{"1Kb2", 0, "not a number"},
		{"KiB", 0, "needs a number"},
		{"-1KiB", 0, "must not be negative"},
		{"1e3B", 0, "not a number"},
		{"0x10", 0, "not a number"},
		{"inf", 0, "unknown unit"},
		{"NaN", 0, "unknown unit"},
		{"1..5KiB", 0, "not a number"},
	} {
		got, err := ParseSize(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSize(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"3d", 72 * time.Hour, ""},
		{"72h", 72 * time.Hour, ""},
		{"10m", 10 * time.Minute, ""},
		{"90s", 90 * time.Second, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"1h 30m", 90 * time.Minute, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"3 d", 72 * time.Hour, ""},
		{"0m", 0, ""},
		{"10", 0, "needs a unit"},
		{"10w", 0, "unknown unit"},
		{"-1h", 0, "must not be negative"},
		{"", 0, "is empty"},
		{"h", 0, "not a duration"},
		{"99999999d", 0, "too large"},
	} {
		got, err := ParseDuration(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseDuration(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseNumbers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(string) (float64, error)
		in    string
		want  float64
		err   string
	}{
		{"rate", ParseRate, "20000", 20000, ""},
		{"rate", ParseRate, "20,000", 20000, ""},
		{"rate", ParseRate, "20_000", 20000, ""},
		{"rate", ParseRate, "20000/s", 20000, ""},
		{"rate", ParseRate, "0.5", 0.5, ""},
		{"rate", ParseRate, ".5", 0.5, ""},
		{"rate", ParseRate, "2,00", 0, "not a number"},
		{"rate", ParseRate, "20,0000", 0, "not a number"},
		{"rate", ParseRate, "_20", 0, "not a number"},
		{"rate", ParseRate, "2e4", 0, "not a number"},
		{"rate", ParseRate, "Inf", 0, "not a number"},
		{"rate", ParseRate, "5.", 0, "not a number"},
		{"rate", ParseRate, "-5", 0, "must not be negative"},
		{"rate", ParseRate, strings.Repeat("9", 400), 0, "too large"},
		{"share", ParseShare, "0.3", 0.3, ""},
		{"share", ParseShare, "30%", 0.3, ""},
		{"percent", ParsePercent, "20%", 20, ""},
		{"percent", ParsePercent, "20", 20, ""},
		{"ratio", ParseRatio, "2", 2, ""},
		{"ratio", ParseRatio, "2x", 2, ""},
		{"ratio", ParseRatio, "2:1", 2, ""},
		{"count", ParseCount, "24", 24, ""},
		{"count", ParseCount, "1,000", 1000, ""},
		{"count", ParseCount, "2.5", 0, "not a whole number"},
	} {
		got, err := tc.parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s(%q) = %v, %v; want error containing %q", tc.name, tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s(%q) = %v, %v; want %v", tc.name, tc.in, got, err, tc.want)
		}
	}
}

// TestField_Parse checks the range rules each field enforces, with the
// message a planner reads next to the field.
func TestField_Parse(t *testing.T) {
	for _, tc := range []struct {
		f    Field
		in   string
		want float64
		err  string
	}{
		{AvgRate, "20000", 20000, ""},
		{AvgRate, "0", 0, "must be greater than 0"},
		{AvgRate, "", 0, "is empty"},
		{AvgRate, "abc", 0, "not a number"},
		{AvgRate, "2,000,000,000", 0, "absurdly large"},
		{ConsumerRate, "0", 0, "must be greater than 0"},
		{Partitions, "0", 0, "must be at least 1"},
		{Partitions, "1.5", 0, "not a whole number"},
		{Partitions, "1", 1, ""},
		{ReplicationFactor, "0", 0, "must be at least 1"},
		{ReplicationFactor, "1", 1, ""},
		{Groups, "0", 0, ""},
		{EventSize, "0B", 0, "must be greater than 0"},
		{EventSize, "2GiB", 0, "absurdly large"},
		{Retention, "0d", 0, "must be greater than 0"},
		{Retention, "3d", 3 * day, ""},
		{PeakDuration, "0m", 0, ""},
		{PeakDuration, "400d", 0, "absurdly large"},
		{HotKeyShare, "1.5", 0, "absurdly large"},
		{HotKeyShare, "30%", 0.3, ""},
		{Compression, "", 0, ""},
		{Compression, "0.5", 0, "must be at least 1"},
		{Headroom, "20%", 20, ""},
		{Headroom, "", 0, ""},
		{LagRate, "", 0, ""},
		{LagRate, "0", 0, "must be greater than 0"}, // typed, not blank: a rate of 0 is not "not given"
		{Compression, "0", 0, "must be at least 1"},
		{Headroom, "0", 0, ""},
		{LagEvents, "0", 0, ""},
		{LagEvents, "1,200,000", 1.2e6, ""},
	} {
		got, err := tc.f.Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s.Parse(%q) = %v, %v; want error containing %q", tc.f.Flag(), tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s.Parse(%q) = %v, %v; want %v", tc.f.Flag(), tc.in, got, err, tc.want)
		}
	}
}

// TestDefaultForm is the HarborCart load: the CLI and the form start there.
func TestDefaultForm(t *testing.T) {
	in, bad := DefaultForm().Inputs()
	if len(bad) != 0 {
		t.Fatalf("default form invalid: %v", bad)
	}
	if in != HarborCart {
		t.Fatalf("default form = %+v, want HarborCart %+v", in, HarborCart)
	}
}

func TestFieldError_NamesFlag(t *testing.T) {
	form := DefaultForm()
	form[PeakRate] = "10000"
	err := form.Worksheet().Err()
	if err == nil || err.Error() != "--peak-rate: 10,000/s is below the average rate 20,000/s; a peak is at least the average" {
		t.Fatalf("err = %v", err)
	}
}

// FuzzFieldParse: whatever is typed into any field, parsing never panics,
// an accepted value is finite and in range, the canonical text of an
// accepted value parses back to the same value, and the worksheet built
// from the form has no NaN or Inf anywhere.
func FuzzFieldParse(f *testing.F) {
	for _, s := range []string{"20000", "1KiB", "3d", "1d12h", "0.3", "30%", "2:1", "1,000", "20_000", "-1", "", "1e9", "inf", "0x10", "1..2", "9999999999999999999999", "1.5 MiB", "10m"} {
		for fd := range NumFields {
			f.Add(uint8(fd), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, s string) {
		fd := Field(int(which) % int(NumFields))
		v, err := fd.Parse(s)
		if err == nil {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("%s.Parse(%q) = %v", fd.Flag(), s, v)
			}
			if v != 0 || !fd.Optional() {
				text := fd.Format(v)
				back, err := fd.Parse(text)
				if err != nil || math.Abs(back-v) > 1e-9*math.Max(1, v) {
					t.Fatalf("%s: %q -> %v -> %q -> %v, %v", fd.Flag(), s, v, text, back, err)
				}
			}
		} else if err.Error() == "" {
			t.Fatalf("%s.Parse(%q): empty error", fd.Flag(), s)
		}
		form := DefaultForm()
		form[fd] = s
		w := form.Worksheet()
		for _, o := range Outputs() {
			if x, ok := w.Value(o); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
				t.Fatalf("%s=%q: %s = %v", fd.Flag(), s, o.JSON(), x)
			}
		}
		for _, sec := range w.Sections() {
			for _, l := range sec.Lines {
				if strings.Contains(l.Value+l.Working, "NaN") || strings.Contains(l.Value+l.Working, "Inf") {
					t.Fatalf("%s=%q: %q %q", fd.Flag(), s, l.Value, l.Working)
				}
			}
		}
	})
}
