package main

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
)

// `berth lag -o json` and `-o jsonl` are written as they go: the document's
// head, each group's roll-up, then every partition row, each encoded on its
// own into a buffered writer. 10,000 partitions x 50 groups are 500,000
// rows; building them as one document (twice: values, then indented bytes)
// held 1.3 GiB and took 5x the offsets-only floor. Rows are encoded by hand
// into one reused buffer, byte for byte what encoding/json writes for
// partLagJSON (TestLagRowEncodingMatchesEncodingJSON), with each distinct
// name (topic, owner, status) encoded once.

// lagEncoder encodes lag rows; one per document (its caches are per run).
type lagEncoder struct {
	w     *bufio.Writer
	buf   []byte
	names map[lag.Name][]byte
	texts map[string][]byte
}

func newLagEncoder(w io.Writer) *lagEncoder {
	return &lagEncoder{w: bufio.NewWriterSize(w, 64<<10), names: map[lag.Name][]byte{}, texts: map[string][]byte{}}
}

// str returns s encoded as a JSON string (quoted and escaped).
func (e *lagEncoder) str(s string) []byte {
	if b, ok := e.texts[s]; ok {
		return b
	}
	b, _ := json.Marshal(s) // a string always encodes
	e.texts[s] = b
	return b
}

func (e *lagEncoder) name(n lag.Name) []byte {
	if b, ok := e.names[n]; ok {
		return b
	}
	b, _ := json.Marshal(n.String())
	e.names[n] = b
	return b
}

// appendRow appends one partition row as a JSON object, with extra (already
// encoded `"key":value,` pairs) first.
func (e *lagEncoder) appendRow(b []byte, extra []byte, group []byte, r *lag.PartitionLag) []byte {
	b = append(b, '{')
	b = append(b, extra...)
	b = append(b, `"group":`...)
	b = append(b, group...)
	b = append(b, `,"topic":`...)
	b = append(b, e.name(r.Topic)...)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, `,"committed":`...)
	if r.Committed == lag.NoCommit {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, r.Committed, 10)
	}
	b = append(b, `,"log_start":`...)
	b = strconv.AppendInt(b, r.LogStart, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, r.End, 10)
	b = append(b, `,"lag":`...)
	b = strconv.AppendInt(b, r.Lag, 10)
	b = append(b, `,"lost":`...)
	b = strconv.AppendInt(b, r.Lost, 10)
	b = append(b, `,"age_seconds":`...)
	b = appendSecs(b, r.AgeKnown, r.Age)
	b = append(b, `,"timestamp_type":`...)
	b = append(b, e.str(r.TimestampType.String())...)
	b = append(b, `,"age_approximate":`...)
	b = strconv.AppendBool(b, r.AgeApprox)
	b = append(b, `,"clock_skew":`...)
	b = strconv.AppendBool(b, r.ClockSkew)
	b = append(b, `,"status":`...)
	b = append(b, e.str(r.Status.String())...)
	b = append(b, `,"produce_rate":`...)
	b = appendRate(b, r.RatesKnown, r.ProduceRate)
	b = append(b, `,"consume_rate":`...)
	b = appendRate(b, r.RatesKnown, r.ConsumeRate)
	b = append(b, `,"eta_seconds":`...)
	b = appendSecs(b, r.ETAKnown, r.ETA)
	b = append(b, `,"falling_behind":`...)
	b = strconv.AppendBool(b, r.FallingBehind)
	b = append(b, `,"time_to_loss_seconds":`...)
	b = appendSecs(b, r.TimeToLossKnown, r.TimeToLoss)
	b = append(b, `,"retention_risk":`...)
	b = strconv.AppendBool(b, r.RetentionRisk)
	b = append(b, `,"owner":`...)
	b = append(b, e.name(r.Owner)...)
	b = append(b, `,"breach":`...)
	b = strconv.AppendBool(b, r.Breach)
	b = append(b, `,"compacted":`...)
	b = strconv.AppendBool(b, r.Compacted)
	if r.Err != 0 {
		b = append(b, `,"error":`...)
		b = append(b, e.name(r.Err)...)
	}
	if r.EventRule {
		if r.EventAgeKnown {
			b = append(b, `,"event_age_seconds":`...)
			b = appendSecs(b, true, r.EventAge)
		}
		if r.EventClockError {
			b = append(b, `,"event_clock_error":true`...)
		}
		if msg := eventTimeError(*r); msg != "" {
			b = append(b, `,"event_time_error":`...)
			b = append(b, e.str(msg)...)
		}
	}
	return append(b, '}')
}

func appendSecs(b []byte, known bool, d time.Duration) []byte {
	if !known {
		return append(b, "null"...)
	}
	return appendFloat(b, roundTo(d.Seconds(), 3))
}

func appendRate(b []byte, known bool, v float64) []byte {
	if !known {
		return append(b, "null"...)
	}
	return appendFloat(b, roundTo(v, 3))
}

// appendFloat formats f as encoding/json does (shortest repr; exponent
// form only for very small or very large magnitudes).
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...) // never produced: rates and ages are finite
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 -> e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func (e *lagEncoder) write(p []byte) {
	_, _ = e.w.Write(p) // the error sticks in the bufio.Writer; Flush returns it
}

// writeLagJSON writes the -o json document: indented with one row a line,
// or (oneLine, for --watch) on a single line.
func writeLagJSON(w io.Writer, ctxName string, s monitor.Snapshot, oneLine bool) error {
	e := newLagEncoder(w)
	nl, in1, in2 := "\n", "\n  ", "\n    "
	if oneLine {
		nl, in1, in2 = "", "", ""
	}
	obs, err := json.Marshal(s.Observed.UTC())
	if err != nil {
		return err
	}
	e.write([]byte("{" + in1 + `"context": `))
	e.write(e.str(ctxName))
	e.write([]byte("," + in1 + `"observed": `))
	e.write(obs)
	e.write([]byte("," + in1 + `"window_seconds": `))
	e.write(appendFloat(nil, roundTo(s.Window.Seconds(), 3)))
	e.write([]byte("," + in1 + `"groups": [`))
	for i, g := range s.Groups {
		b, err := json.Marshal(groupJSON(g))
		if err != nil {
			return err
		}
		if i > 0 {
			e.write([]byte(","))
		}
		e.write([]byte(in2))
		e.write(b)
	}
	if len(s.Groups) > 0 {
		e.write([]byte(in1))
	}
	e.write([]byte("]," + in1 + `"partitions": [`))
	first := true
	for gi := range s.Groups {
		g := &s.Groups[gi]
		group := e.str(g.Group)
		for ri := range g.Partitions {
			e.buf = e.buf[:0]
			if !first {
				e.buf = append(e.buf, ',')
			}
			first = false
			e.buf = append(e.buf, in2...)
			e.buf = e.appendRow(e.buf, nil, group, &g.Partitions[ri])
			e.write(e.buf)
		}
	}
	if !first {
		e.write([]byte(in1))
	}
	warnings := s.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	wb, err := json.Marshal(warnings)
	if err != nil {
		return err
	}
	e.write([]byte("]," + in1 + `"warnings": `))
	e.write(wb)
	e.write([]byte(nl + "}\n"))
	return e.w.Flush()
}

// writeLagJSONL writes one object a line: each group's roll-up followed by
// its partition rows, then any warnings, every line carrying its kind and
// the refresh's time (a --watch stream stays one kind of line per record).
func writeLagJSONL(w io.Writer, ctxName string, s monitor.Snapshot) error {
	e := newLagEncoder(w)
	common, err := e.lineHead(ctxName, s.Observed)
	if err != nil {
		return err
	}
	for gi := range s.Groups {
		g := &s.Groups[gi]
		b, err := json.Marshal(groupJSON(*g))
		if err != nil {
			return err
		}
		e.write([]byte(`{"kind":"group",`))
		e.write(common)
		e.write(b[1:])
		e.write([]byte("\n"))
		group := e.str(g.Group)
		extra := append([]byte(`"kind":"partition",`), common...)
		for ri := range g.Partitions {
			e.buf = e.appendRow(e.buf[:0], extra, group, &g.Partitions[ri])
			e.buf = append(e.buf, '\n')
			e.write(e.buf)
		}
	}
	e.warningLines(common, s.Warnings)
	return e.w.Flush()
}

// lineHead is the `"context":..,"observed":..,` every jsonl line carries.
func (e *lagEncoder) lineHead(ctxName string, observed time.Time) ([]byte, error) {
	obs, err := json.Marshal(observed.UTC())
	if err != nil {
		return nil, err
	}
	b := append([]byte(`"context":`), e.str(ctxName)...)
	b = append(append(append(b, `,"observed":`...), obs...), ',')
	return b, nil
}

func (e *lagEncoder) warningLines(head []byte, warnings []string) {
	for _, warn := range warnings {
		e.write([]byte(`{"kind":"warning",`))
		e.write(head)
		e.write([]byte(`"message":`))
		e.write(e.str(warn))
		e.write([]byte("}\n"))
	}
}

// writeQueueJSONL is -o jsonl on a RabbitMQ context: one queue a line, then
// any notes.
func writeQueueJSONL(w io.Writer, ctxName string, observed time.Time, rows []monitor.QueueLag, notes []string) error {
	e := newLagEncoder(w)
	common, err := e.lineHead(ctxName, observed)
	if err != nil {
		return err
	}
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		e.write([]byte(`{"kind":"queue",`))
		e.write(common)
		e.write(b[1:])
		e.write([]byte("\n"))
	}
	e.warningLines(common, notes)
	return e.w.Flush()
}
