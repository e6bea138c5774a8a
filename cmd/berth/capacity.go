package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/capacity"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	tuicapacity "github.com/berth-dev/berth/tui/capacity"
)

// berth capacity: the capacity worksheet, headless. It needs no cluster
// (the config is not even read) unless --from-topic / --from-all-topics
// asks for live prefill.

func init() {
	register(newCapacityCmd)
	tuicapacity.Measure = measureForConsole
}

// measureForConsole is the console's :capacity prefill: the same
// measurement as --from-topic, on the console's attached cluster.
func measureForConsole(ctx context.Context, c backends.Cluster, topic string, window time.Duration) (capacity.Measurement, error) {
	kc, ok := c.(interface{ Client() *kafka.Client })
	if !ok {
		return capacity.Measurement{}, fmt.Errorf("prefill needs a Kafka cluster")
	}
	load, err := kc.Client().MeasureLoad(ctx, topic, kafka.LoadOptions{Window: window})
	if err != nil {
		return capacity.Measurement{}, err
	}
	return measurementOf(topic, load), nil
}

// measurementOf turns the backend's observation into the worksheet's.
func measurementOf(topic string, load kafka.TopicLoad) capacity.Measurement {
	m := capacity.Measurement{
		Topic: topic, Window: load.Window,
		AvgRate: load.AvgRate, PeakRate: load.PeakRate,
		EventSize: load.RecordBytes, Sampled: load.RecordsSampled,
		Partitions: load.Partitions, ReplicationFactor: load.ReplicationFactor,
		Groups: load.Groups,
	}
	if load.RetentionMs > 0 {
		m.Retention = time.Duration(load.RetentionMs) * time.Millisecond
	}
	return m
}

type capacityFlags struct {
	fromTopic string
	allTopics bool
	measure   time.Duration
	sample    int
}

func newCapacityCmd(a *app) *cobra.Command {
	var f capacityFlags
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Capacity worksheet: ingest, retention, peak, consumers, egress, partitions, hot keys",
		Long: `Work out what a load needs: ingest and retained bytes, peak volume, group
deliveries, consumers, broker egress (consumer reads plus follower
replication), the partition cap and the backlog it causes, the hot-key
partition, and lag in events or seconds. Every figure shows its arithmetic.

Defaults are the HarborCart planning load (20,000 events/s, 100,000 at peak
for 10 minutes, 1 KiB, 3 days, RF 3, 3 groups, 2,000 events/s per consumer,
24 partitions). --from-topic T (or --from-all-topics) prefills from the
cluster: the produce rate measured over --measure, the mean record size of
recent records, partitions, replication factor, retention and groups. Any
flag given explicitly overrides the measured value.

-o markdown prints tables to paste into a design document.`,
		Args:        noArgs,
		Annotations: map[string]string{"config": "none"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runCapacity(cmd, f)
		},
	}
	fl := cmd.Flags()
	for _, fd := range capacity.Fields() {
		help := fd.Help()
		if u := fd.Unit(); u != "" && u != ":1" && u != "%" && !strings.Contains(help, "(") {
			help += " (" + u + ")"
		}
		fl.String(fd.Flag(), fd.Default(), help)
	}
	fl.StringVar(&f.fromTopic, "from-topic", "", "prefill from this topic on the current context's Kafka cluster")
	fl.BoolVar(&f.allTopics, "from-all-topics", false, "prefill from every non-internal topic together")
	fl.DurationVar(&f.measure, "measure", 10*time.Second, "how long to watch the produce rate when prefilling (0: do not measure the rate)")
	fl.IntVar(&f.sample, "sample", 1000, "recent records read to measure the record size when prefilling")
	return cmd
}

// capacityJSON is the -o json document: the result fields at the
// top level, plus the inputs used and, when prefilled, what was measured.
type capacityJSON struct {
	Inputs   capacityInputsJSON    `json:"inputs"`
	Measured *capacityMeasuredJSON `json:"measured,omitempty"`
	capacity.Results
}

type capacityInputsJSON struct {
	AvgRatePerS       float64  `json:"avg_rate_per_s"`
	PeakRatePerS      float64  `json:"peak_rate_per_s"`
	PeakDurationS     float64  `json:"peak_duration_s"`
	EventSizeBytes    float64  `json:"event_size_bytes"`
	RetentionS        float64  `json:"retention_s"`
	ReplicationFactor int      `json:"replication_factor"`
	Groups            int      `json:"groups"`
	ConsumerRatePerS  float64  `json:"consumer_rate_per_s"`
	Partitions        int      `json:"partitions"`
	HotKeyShare       float64  `json:"hot_key_share"`
	CompressionRatio  float64  `json:"compression_ratio"`
	HeadroomPct       float64  `json:"headroom_pct"`
	LagEvents         *float64 `json:"lag_events,omitempty"`
	LagDurationS      *float64 `json:"lag_duration_s,omitempty"`
	LagRatePerS       *float64 `json:"lag_rate_per_s,omitempty"`
}

type capacityMeasuredJSON struct {
	Topic          string   `json:"topic,omitempty"` // absent: all topics
	Topics         []string `json:"topics"`
	WindowS        float64  `json:"window_s"`
	RecordsSampled int      `json:"records_sampled"`
	// Fields are the inputs (by flag name) that carry measured values; a
	// flag given explicitly is not among them.
	Fields []string `json:"fields"`
}

func (a *app) runCapacity(cmd *cobra.Command, f capacityFlags) error {
	a.output = a.v.GetString("output")
	format, err := a.format(output.Table, output.JSON, output.Markdown)
	if err != nil {
		return err
	}
	if f.fromTopic != "" && f.allTopics {
		return usageErr("--from-topic and --from-all-topics: choose one")
	}
	if f.measure < 0 {
		return usageErr("--measure: must not be negative")
	}
	if f.sample < 1 {
		return usageErr("--sample: must be at least 1")
	}
	if f.fromTopic == "" && !f.allTopics {
		for _, name := range []string{"measure", "sample"} {
			if cmd.Flags().Changed(name) {
				return usageErr("--%s: only with --from-topic or --from-all-topics (nothing is measured otherwise)", name)
			}
		}
	}
	form := capacity.DefaultForm()
	source := [capacity.NumFields]string{}
	for _, fd := range capacity.Fields() {
		source[fd] = "default"
		if fd.Optional() {
			source[fd] = "not given"
		}
	}
	var measured *capacityMeasuredJSON
	if f.fromTopic != "" || f.allTopics {
		m, load, err := a.measureCapacity(cmd, f)
		if err != nil {
			return err
		}
		measured = &capacityMeasuredJSON{Topic: f.fromTopic, Topics: load.Topics, WindowS: load.Window.Seconds(), RecordsSampled: load.RecordsSampled, Fields: []string{}}
		for _, fd := range m.Prefill(&form) {
			if fd == capacity.AvgRate || fd == capacity.PeakRate {
				if f.measure == 0 {
					continue // the rate was not measured
				}
			}
			if !cmd.Flags().Changed(fd.Flag()) {
				source[fd] = "measured: " + m.Source()
				measured.Fields = append(measured.Fields, fd.Flag())
			}
		}
		if f.measure == 0 {
			// Keep the typed (or default) rates.
			form[capacity.AvgRate] = capacity.DefaultForm()[capacity.AvgRate]
			form[capacity.PeakRate] = capacity.DefaultForm()[capacity.PeakRate]
		}
	}
	for _, fd := range capacity.Fields() {
		if cmd.Flags().Changed(fd.Flag()) {
			form[fd], _ = cmd.Flags().GetString(fd.Flag())
			source[fd] = "flag"
		}
	}
	w := form.Worksheet()
	if err := w.Err(); err != nil {
		fe := err.(*capacity.FieldError)
		if strings.HasPrefix(source[fe.Field], "measured") {
			// Not the user's typing: a failure, not a usage error.
			return fmt.Errorf("%v (%s); set --%s to override", err, strings.TrimPrefix(source[fe.Field], "measured: "), fe.Field.Flag())
		}
		return usageErr("%v", err)
	}
	switch format {
	case output.JSON:
		res, _ := w.Results()
		return output.WriteJSON(a.stdout, capacityJSON{Inputs: inputsJSON(w.Inputs), Measured: measured, Results: res})
	case output.Markdown:
		return writeCapacity(a.stdout, w, form, source, true)
	default:
		return writeCapacity(a.stdout, w, form, source, false)
	}
}

// measureCapacity connects (loading the config this command otherwise
// skips) and measures the topic or all topics.
func (a *app) measureCapacity(cmd *cobra.Command, f capacityFlags) (capacity.Measurement, kafka.TopicLoad, error) {
	if err := a.load(cmd); err != nil {
		return capacity.Measurement{}, kafka.TopicLoad{}, err
	}
	ctx, stop := signalContext(cmd)
	defer stop()
	// The window plus the usual per-operation budget for the reads around it.
	ctx, cancel := context.WithTimeout(ctx, f.measure+3*a.timeout)
	defer cancel()
	c, err := a.kafkaClient(ctx)
	if err != nil {
		return capacity.Measurement{}, kafka.TopicLoad{}, err
	}
	defer c.Close()
	if f.measure > 0 && a.output != string(output.JSON) {
		fmt.Fprintf(a.stderr, "measuring %s for %s…\n", describeTarget(f), f.measure)
	}
	load, err := c.MeasureLoad(ctx, f.fromTopic, kafka.LoadOptions{Window: f.measure, SampleRecords: f.sample})
	if err != nil {
		// Errors can quote names read from the cluster.
		return capacity.Measurement{}, kafka.TopicLoad{}, errors.New(sanitize.Text(err.Error()))
	}
	m := measurementOf(f.fromTopic, load)
	return m, load, nil
}

func describeTarget(f capacityFlags) string {
	if f.allTopics {
		return "all topics"
	}
	return "topic " + sanitize.Text(f.fromTopic)
}

func inputsJSON(in capacity.Inputs) capacityInputsJSON {
	j := capacityInputsJSON{
		AvgRatePerS: in.AvgRate, PeakRatePerS: in.PeakRate, PeakDurationS: in.PeakDuration.Seconds(),
		EventSizeBytes: in.EventSize, RetentionS: in.Retention.Seconds(), ReplicationFactor: in.ReplicationFactor,
		Groups: in.Groups, ConsumerRatePerS: in.ConsumerRate, Partitions: in.Partitions, HotKeyShare: in.HotKeyShare,
		CompressionRatio: max(in.Compression, 1), HeadroomPct: in.HeadroomPct,
	}
	opt := func(v float64) *float64 {
		if v == 0 {
			return nil
		}
		return &v
	}
	j.LagEvents, j.LagDurationS, j.LagRatePerS = opt(in.LagEvents), opt(in.LagDuration.Seconds()), opt(in.LagRate)
	return j
}

// writeCapacity prints the inputs with their source, then the worksheet's
// steps with the arithmetic, then the notes.
func writeCapacity(w io.Writer, ws capacity.Worksheet, form capacity.Form, source [capacity.NumFields]string, markdown bool) error {
	inputs := output.Grid{Header: []string{"INPUT", "VALUE", "SOURCE"}}
	for _, fd := range capacity.Fields() {
		if fd.Optional() && strings.TrimSpace(form[fd]) == "" {
			continue
		}
		val := strings.TrimSpace(form[fd])
		if u := fd.Unit(); u != "" {
			val += " " + u
		}
		inputs.Add(fd.Label(), val, source[fd])
	}
	figures := output.Grid{Header: []string{"STEP", "FIGURE", "VALUE", "WORKING"}, Right: map[int]bool{2: true}}
	var notes []string
	for _, s := range ws.Sections() {
		step := fmt.Sprintf("%d %s", s.Number, s.Title)
		for _, l := range s.Lines {
			if l.State == capacity.NotApplicable && (l.Output == capacity.LagSecondsForEvents || l.Output == capacity.LagEventsForDuration) {
				continue // no lag given: nothing to convert
			}
			value := l.Value
			if value == "" {
				value = "n/a"
			}
			figures.Add(step, l.Output.Label(), value, l.Working)
			step = ""
		}
		if s.Note != "" {
			notes = append(notes, fmt.Sprintf("%d %s: %s", s.Number, s.Title, s.Note))
		}
	}
	write := func(g *output.Grid) error {
		if markdown {
			return g.WriteMarkdown(w)
		}
		return g.WriteTable(w)
	}
	if markdown {
		fmt.Fprintln(w, "**Inputs**")
		fmt.Fprintln(w)
	}
	if err := write(&inputs); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if markdown {
		fmt.Fprintln(w, "**Worksheet**")
		fmt.Fprintln(w)
	}
	if err := write(&figures); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		if markdown {
			fmt.Fprintln(w, "**Notes**")
			fmt.Fprintln(w)
		} else {
			fmt.Fprintln(w, "NOTES")
		}
		for _, n := range notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
	return nil
}
