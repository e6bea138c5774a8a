package capacity

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Inputs are the worksheet's load figures. Rates are events per second,
// sizes bytes. Zero in an optional field means "not given": no compression,
// no headroom, no lag conversion, and the lag rate falls back to AvgRate.
type Inputs struct {
	AvgRate           float64       // average produce rate, events/s
	PeakRate          float64       // peak produce rate, events/s
	PeakDuration      time.Duration // how long the peak lasts
	EventSize         float64       // average event size, bytes
	Retention         time.Duration // time-based retention
	ReplicationFactor int           // copies of each partition
	Groups            int           // consumer groups reading the topic
	ConsumerRate      float64       // events/s one consumer handles
	Partitions        int           // partitions in the topic
	HotKeyShare       float64       // fraction of traffic carried by the hottest key (0..1)
	Compression       float64       // compression ratio (2 = halves bytes); 0 = none
	HeadroomPct       float64       // percent added to what you provision; 0 = none
	LagEvents         float64       // a lag to convert to seconds; 0 = none
	LagDuration       time.Duration // a lag to convert to events; 0 = none
	LagRate           float64       // the rate for lag conversion; 0 = AvgRate
}

// HarborCart is the seed's illustrative planning load (decision D9): the
// defaults of the CLI and the TUI form.
var HarborCart = Inputs{
	AvgRate:           20000,
	PeakRate:          100000,
	PeakDuration:      10 * time.Minute,
	EventSize:         1024,
	Retention:         72 * time.Hour,
	ReplicationFactor: 3,
	Groups:            3,
	ConsumerRate:      2000,
	Partitions:        24,
	HotKeyShare:       0.3,
}

// Field names one input.
type Field int

// The inputs, in form order.
const (
	AvgRate Field = iota
	PeakRate
	PeakDuration
	EventSize
	Retention
	ReplicationFactor
	Groups
	ConsumerRate
	Partitions
	HotKeyShare
	Compression
	Headroom
	LagEvents
	LagDuration
	LagRate
	NumFields
)

// Fields lists every input in form order.
func Fields() []Field {
	fs := make([]Field, NumFields)
	for i := range fs {
		fs[i] = Field(i)
	}
	return fs
}

type fieldDef struct {
	flag     string // CLI flag, without dashes
	label    string // form label
	unit     string // shown beside the value
	def      string // default text ("" for optional fields left blank)
	optional bool   // blank means "not given"
	help     string
	parse    func(string) (float64, error)
	format   func(float64) string
	min, max float64 // inclusive range of valid values
	minOpen  bool    // min itself is invalid (must be > min)
	// tiny is the smallest meaningful positive value: below it a figure
	// is a typo (0.0000001 events/s, a thousandth of a byte), and the
	// worksheet would print nothing but float noise from it.
	tiny    float64
	integer bool
	get     func(*Inputs) float64
	set     func(*Inputs, float64)
}

func secs(d time.Duration) float64      { return d.Seconds() }
func dur(s float64) time.Duration       { return time.Duration(math.Round(s * 1e9)) }
func fmtRateInput(v float64) string     { return trimFloat(v) }
func fmtDurationInput(v float64) string { return FormatDurationInput(dur(v)) }
func fmtCountInput(v float64) string    { return trimFloat(v) }
func fmtPercentInput(v float64) string  { return trimFloat(v) + "%" }
func fmtRatioInput(v float64) string    { return trimFloat(v) }
func fmtShareInput(v float64) string    { return trimFloat(v) }
func parseDurationSecs(s string) (float64, error) {
	d, err := ParseDuration(s)
	return secs(d), err
}

const (
	minRate = 0.001 // events/s: one event in about 17 minutes
	maxRate = 1e9   // events/s: far above any single topic
	maxDays = 36500 // 100 years
)

var defs = [NumFields]fieldDef{
	AvgRate: {flag: "avg-rate", label: "average rate", unit: "events/s", def: "20000",
		help: "average produce rate", parse: ParseRate, format: fmtRateInput,
		min: 0, minOpen: true, tiny: minRate, max: maxRate,
		get: func(in *Inputs) float64 { return in.AvgRate }, set: func(in *Inputs, v float64) { in.AvgRate = v }},
	PeakRate: {flag: "peak-rate", label: "peak rate", unit: "events/s", def: "100000",
		help: "peak produce rate (at least the average)", parse: ParseRate, format: fmtRateInput,
		min: 0, minOpen: true, tiny: minRate, max: maxRate,
		get: func(in *Inputs) float64 { return in.PeakRate }, set: func(in *Inputs, v float64) { in.PeakRate = v }},
	PeakDuration: {flag: "peak-duration", label: "peak duration", unit: "", def: "10m",
		help: "how long the peak lasts (d, h, m, s)", parse: parseDurationSecs, format: fmtDurationInput,
		min: 0, max: 365 * 86400,
		get: func(in *Inputs) float64 { return secs(in.PeakDuration) }, set: func(in *Inputs, v float64) { in.PeakDuration = dur(v) }},
	EventSize: {flag: "event-size", label: "event size", unit: "", def: "1KiB",
		help: "average event size (B, KiB, MiB, KB, MB)", parse: ParseSize, format: func(v float64) string { return FormatSizeInput(v) },
		min: 0, minOpen: true, tiny: 1, max: 1 << 30,
		get: func(in *Inputs) float64 { return in.EventSize }, set: func(in *Inputs, v float64) { in.EventSize = v }},
	Retention: {flag: "retention", label: "retention", unit: "", def: "3d",
		help: "time-based retention (d, h, m)", parse: parseDurationSecs, format: fmtDurationInput,
		min: 0, minOpen: true, tiny: 1, max: maxDays * 86400,
		get: func(in *Inputs) float64 { return secs(in.Retention) }, set: func(in *Inputs, v float64) { in.Retention = dur(v) }},
	ReplicationFactor: {flag: "replication-factor", label: "replication factor", unit: "copies", def: "3",
		help: "copies of each partition", parse: ParseCount, format: fmtCountInput,
		min: 1, max: 32, integer: true,
		get: func(in *Inputs) float64 { return float64(in.ReplicationFactor) }, set: func(in *Inputs, v float64) { in.ReplicationFactor = int(v) }},
	Groups: {flag: "groups", label: "consumer groups", unit: "groups", def: "3",
		help: "consumer groups reading the topic", parse: ParseCount, format: fmtCountInput,
		min: 0, max: 10000, integer: true,
		get: func(in *Inputs) float64 { return float64(in.Groups) }, set: func(in *Inputs, v float64) { in.Groups = int(v) }},
	ConsumerRate: {flag: "consumer-rate", label: "one consumer", unit: "events/s", def: "2000",
		help: "events/s one consumer can handle", parse: ParseRate, format: fmtRateInput,
		min: 0, minOpen: true, tiny: minRate, max: maxRate,
		get: func(in *Inputs) float64 { return in.ConsumerRate }, set: func(in *Inputs, v float64) { in.ConsumerRate = v }},
	Partitions: {flag: "partitions", label: "partitions", unit: "", def: "24",
		help: "partitions in the topic", parse: ParseCount, format: fmtCountInput,
		min: 1, max: 1000000, integer: true,
		get: func(in *Inputs) float64 { return float64(in.Partitions) }, set: func(in *Inputs, v float64) { in.Partitions = int(v) }},
	HotKeyShare: {flag: "hot-key-share", label: "hot-key share", unit: "", def: "0.3",
		help: "share of traffic on the hottest key (0.3 or 30%)", parse: ParseShare, format: fmtShareInput,
		min: 0, max: 1,
		get: func(in *Inputs) float64 { return in.HotKeyShare }, set: func(in *Inputs, v float64) { in.HotKeyShare = v }},
	Compression: {flag: "compression", label: "compression", unit: ":1", optional: true,
		help: "compression ratio, e.g. 2 halves every byte figure (optional)", parse: ParseRatio, format: fmtRatioInput,
		min: 1, max: 100,
		get: func(in *Inputs) float64 { return in.Compression }, set: func(in *Inputs, v float64) { in.Compression = v }},
	Headroom: {flag: "headroom", label: "headroom", unit: "%", optional: true,
		help: "percent added to provisioned disk, consumers and partitions (optional)", parse: ParsePercent, format: fmtPercentInput,
		min: 0, max: 1000,
		get: func(in *Inputs) float64 { return in.HeadroomPct }, set: func(in *Inputs, v float64) { in.HeadroomPct = v }},
	LagEvents: {flag: "lag-events", label: "lag (events)", unit: "events", optional: true,
		help: "a lag in events to express in seconds (optional)", parse: ParseCount, format: fmtCountInput,
		min: 0, max: 1e15, integer: true,
		get: func(in *Inputs) float64 { return in.LagEvents }, set: func(in *Inputs, v float64) { in.LagEvents = v }},
	LagDuration: {flag: "lag-duration", label: "lag (time)", unit: "", optional: true,
		help: "a lag in time to express in events (optional)", parse: parseDurationSecs, format: fmtDurationInput,
		min: 0, max: maxDays * 86400,
		get: func(in *Inputs) float64 { return secs(in.LagDuration) }, set: func(in *Inputs, v float64) { in.LagDuration = dur(v) }},
	LagRate: {flag: "lag-rate", label: "lag rate", unit: "events/s", optional: true,
		help: "rate for lag conversion (optional; default the average rate)", parse: ParseRate, format: fmtRateInput,
		min: 0, minOpen: true, tiny: minRate, max: maxRate,
		get: func(in *Inputs) float64 { return in.LagRate }, set: func(in *Inputs, v float64) { in.LagRate = v }},
}

// Flag is the field's CLI flag name without dashes ("avg-rate").
func (f Field) Flag() string { return defs[f].flag }

// Label is the field's name on the form ("average rate").
func (f Field) Label() string { return defs[f].label }

// Unit is shown beside the value ("events/s"); sizes and durations carry
// their unit in the text.
func (f Field) Unit() string { return defs[f].unit }

// Default is the field's default text; blank for optional fields.
func (f Field) Default() string { return defs[f].def }

// Optional fields may be left blank.
func (f Field) Optional() bool { return defs[f].optional }

// Help is a one-line description for flags and the form.
func (f Field) Help() string { return defs[f].help }

func (f Field) String() string { return defs[f].flag }

// Get reads the field from in (durations in seconds).
func (f Field) Get(in Inputs) float64 { return defs[f].get(&in) }

// Set writes v (durations in seconds) into in.
func (f Field) Set(in *Inputs, v float64) { defs[f].set(in, v) }

// Format renders v (durations in seconds) as text the field parses back.
func (f Field) Format(v float64) string { return defs[f].format(v) }

// Parse reads the field's text and checks its range. Blank text in an
// optional field is (0, nil): not given.
func (f Field) Parse(s string) (float64, error) {
	d := defs[f]
	if strings.TrimSpace(s) == "" && d.optional {
		return 0, nil
	}
	v, err := d.parse(s)
	if err != nil {
		return 0, err
	}
	// Only blank text means "not given": a typed 0 is a value, and out of
	// range where the field needs more (a rate of 0, a ratio below 1).
	if v == 0 && d.optional && d.minOpen {
		return 0, errors.New("must be greater than 0")
	}
	if v == 0 && d.optional && d.min > 0 {
		return 0, fmt.Errorf("must be at least %s", f.Format(d.min))
	}
	return v, f.check(v)
}

func (f Field) check(v float64) error {
	d := defs[f]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errors.New("is not a finite number")
	}
	if v < 0 {
		return errNegative
	}
	if d.optional && v == 0 {
		return nil
	}
	if d.integer && v != math.Trunc(v) {
		return fmt.Errorf("%s is not a whole number", trimFloat(v))
	}
	if d.minOpen && v <= d.min {
		return errors.New("must be greater than 0")
	}
	if v < d.tiny {
		return fmt.Errorf("is absurdly small (at least %s)", f.Format(d.tiny))
	}
	if v < d.min {
		return fmt.Errorf("must be at least %s", f.Format(d.min))
	}
	if v > d.max {
		return fmt.Errorf("is absurdly large (at most %s)", f.Format(d.max))
	}
	return nil
}

// FieldError is an invalid input: which field, and why.
type FieldError struct {
	Field Field
	Err   error
}

func (e *FieldError) Error() string { return "--" + e.Field.Flag() + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks every field's range and the relations between fields
// (a peak is at least the average). It returns one error per bad field.
func (in Inputs) Validate() map[Field]error {
	bad := map[Field]error{}
	for _, f := range Fields() {
		if err := f.check(f.Get(in)); err != nil {
			bad[f] = err
		}
	}
	if bad[AvgRate] == nil && bad[PeakRate] == nil && in.PeakRate < in.AvgRate {
		bad[PeakRate] = fmt.Errorf("%s/s is below the average rate %s/s; a peak is at least the average",
			groupThousands(in.PeakRate, 0), groupThousands(in.AvgRate, 0))
	}
	return bad
}

// Form is the worksheet as typed: one text per field.
type Form [NumFields]string

// DefaultForm is the HarborCart planning load with optional fields blank.
func DefaultForm() Form {
	var f Form
	for _, fd := range Fields() {
		f[fd] = fd.Default()
	}
	return f
}

// Inputs parses every field. Fields that fail keep their zero value in the
// returned Inputs and are listed in the error map; Compute ignores them.
func (f Form) Inputs() (Inputs, map[Field]error) {
	var in Inputs
	bad := map[Field]error{}
	for _, fd := range Fields() {
		v, err := fd.Parse(f[fd])
		if err != nil {
			bad[fd] = err
			continue
		}
		fd.Set(&in, v)
	}
	for fd, err := range in.Validate() {
		if _, ok := bad[fd]; !ok {
			bad[fd] = err
		}
	}
	return in, bad
}

// Worksheet parses the form and computes every output it can.
func (f Form) Worksheet() Worksheet {
	in, bad := f.Inputs()
	return compute(in, bad)
}
