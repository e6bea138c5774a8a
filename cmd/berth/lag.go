package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/redrive"
)

func init() { register(newLagCmd) }

type lagOptions struct {
	groups       []string
	watch        bool
	interval     time.Duration
	sample       time.Duration
	failOnBreach bool
}

func newLagCmd(a *app) *cobra.Command {
	var o lagOptions
	cmd := &cobra.Command{
		Use:   "lag [GROUP...]",
		Short: "Consumer lag in seconds of age, with statuses, rates and ETA",
		Long: `Show each consumer group's lag per partition: offset lag, the age of the
oldest unprocessed record (read from the log), produce and consume rates, the
time to catch up, and a status (OK, JUDGING, LAGGING, STALLED, STOPPED,
REWIND, EXPIRED) that reads the same here, in --watch and in the console.
Groups roll up to their maximum age and total lag, and are judged against
their SLO (seconds of age, per group pattern in the config); abandoned
groups are listed apart. Topics in lag.event_time also get the age of the
oldest unprocessed event (event time) against the group's event_slo.
-o jsonl writes one object a line.

Statuses need movement, so a one-shot run (and the first line of --watch)
takes two samples --sample apart (default 5s, the usual auto-commit
interval); --sample 0 takes one sample: no rates, and an owned partition
with an old backlog reads JUDGING (whether it moves is unknown). The rules
are in 'berth help lag'. On a RabbitMQ context it lists queues.

Exit status: 0, or 3 with --fail-on-breach when any group (or queue) is over
its SLO; 1 on failure; 2 on bad usage.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.groups = args
			return a.runLag(cmd, o)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.watch, "watch", "w", false, "refresh until interrupted")
	f.DurationVar(&o.interval, "interval", 5*time.Second, "refresh interval with --watch")
	f.DurationVar(&o.sample, "sample", 5*time.Second, "time between the two samples of a one-shot run (0: one sample)")
	f.BoolVar(&o.failOnBreach, "fail-on-breach", false, "exit 3 when any group is over its SLO")
	return cmd
}

// lagRun is an attached monitor for lag and health.
type lagRun struct {
	cluster *kafka.Cluster
	mon     *monitor.Monitor
}

func (a *app) newLagRun(ctx context.Context, groups []string) (*lagRun, error) {
	dctx, cancel := a.opCtx(ctx)
	defer cancel()
	c, err := a.kafkaClient(dctx)
	if err != nil {
		return nil, err
	}
	cluster := kafka.NewCluster(c)
	mcfg := monitorConfig(a.cfg)
	mcfg.Groups = groups
	mon := monitor.New(cluster, kafka.NewTimestampReader(c), mcfg)
	return &lagRun{cluster: cluster, mon: mon}, nil
}

// monitorConfig is the monitor's configuration from the config file; the
// console and the CLI use it alike, so both judge the same data the same way.
func monitorConfig(cfg *config.Config) monitor.Config {
	declared := make([]string, 0, len(cfg.Redrive.DLQs))
	for _, d := range cfg.Redrive.DLQs {
		declared = append(declared, d.DLQ)
	}
	return monitor.Config{
		Lag: lag.Config{Window: cfg.Lag.Window, RetentionMargin: cfg.Lag.RetentionMargin, CommitInterval: cfg.Lag.CommitInterval},
		SLO: func(group string) time.Duration {
			_, slo := cfg.GroupPolicyFor(group)
			return slo
		},
		DeadLetter: monitor.DeadLetterTopics(declared),
		EventTime:  eventRules(cfg),
		EventSLO: func(group string) time.Duration {
			p, _ := cfg.GroupPolicyFor(group)
			return p.EventSLO
		},
	}
}

// eventRules are the config's lag.event_time rules (validated when the
// config loaded, so the fields parse).
func eventRules(cfg *config.Config) []monitor.EventRule {
	var rules []monitor.EventRule
	for _, r := range cfg.Lag.EventTime {
		f, err := redrive.ParseField(r.Field)
		if err != nil {
			continue // Config.Validate refused it already
		}
		rules = append(rules, monitor.EventRule{Match: r.Match, Field: f, Margin: r.ClockMargin})
	}
	return rules
}

func (r *lagRun) refresh(a *app, ctx context.Context) (monitor.Snapshot, error) {
	rctx, cancel := a.opCtx(ctx)
	defer cancel()
	return r.mon.Refresh(rctx)
}

// sampleTwice refreshes, waits d (unless 0) and refreshes again.
func (r *lagRun) sampleTwice(a *app, ctx context.Context, d time.Duration) (monitor.Snapshot, error) {
	s, err := r.refresh(a, ctx)
	if err != nil || d <= 0 {
		return s, err
	}
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(d):
	}
	return r.refresh(a, ctx)
}

// sayingSampling tells a person at a terminal why nothing prints yet; a
// pipe or a file gets only the result.
func (a *app) sayingSampling(d time.Duration) {
	if !isTerminal(a.stderr) {
		return
	}
	if d <= 0 {
		fmt.Fprintln(a.stderr, "sampling once (--sample 0: no rates; behind partitions read JUDGING)")
		return
	}
	fmt.Fprintf(a.stderr, "sampling twice, %s apart, to judge statuses (--sample 0 for one sample)\n", d)
	if ci := a.cfg.Lag.CommitInterval; d < ci {
		fmt.Fprintf(a.stderr, "note: --sample %s is shorter than lag.commit_interval (%s): behind partitions read JUDGING\n", d, ci)
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (o lagOptions) validate() error {
	if o.interval < 200*time.Millisecond {
		return usageErr("--interval: %s is too short (at least 200ms)", o.interval)
	}
	if o.sample < 0 {
		return usageErr("--sample: must not be negative")
	}
	return nil
}

func (a *app) runLag(cmd *cobra.Command, o lagOptions) error {
	f, err := a.format(output.Table, output.JSON, output.JSONL)
	if err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	ctx, stop := signalContext(cmd)
	defer stop()
	if a.ctx.Kind == "rabbitmq" {
		return a.runQueueLag(ctx, o, f)
	}
	run, err := a.newLagRun(ctx, o.groups)
	if err != nil {
		return err
	}
	defer run.cluster.Close()

	if !o.watch {
		a.sayingSampling(o.sample)
		s, err := run.sampleTwice(a, ctx, o.sample)
		if err != nil {
			return err
		}
		if err := missingGroups(s, o.groups); err != nil {
			return err
		}
		if err := a.writeLag(f, s, false); err != nil {
			return err
		}
		return breachErr(o.failOnBreach, s)
	}
	a.sayingSampling(o.sample)
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for first := true; ; first = false {
		// The first line samples twice like a one-shot run, so it prints
		// statuses the next lines will not take back.
		var s monitor.Snapshot
		if first {
			s, err = run.sampleTwice(a, ctx, o.sample)
		} else {
			s, err = run.refresh(a, ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		if first {
			if err := missingGroups(s, o.groups); err != nil {
				return err
			}
		}
		if err := a.writeLag(f, s, true); err != nil {
			return err
		}
		if err := breachErr(o.failOnBreach, s); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func missingGroups(s monitor.Snapshot, names []string) error {
	var missing []string
	for _, n := range names {
		if _, ok := s.Group(n); !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("group %s not found", strings.Join(missing, ", "))
	}
	return nil
}

func breachErr(enabled bool, s monitor.Snapshot) error {
	if !enabled || len(s.Health.Breaches) == 0 {
		return nil
	}
	var parts []string
	for _, b := range s.Health.Breaches {
		parts = append(parts, fmt.Sprintf("%s (max age %s > SLO %s)", b.Group, durations.Format(b.MaxAge), durations.Format(b.SLO)))
	}
	return &exitError{code: 3, err: fmt.Errorf("SLO breached: %s", strings.Join(parts, ", "))}
}

// partLagJSON is one partition row of `berth lag -o json`. The command
// encodes rows by hand (lag_json.go); this struct is their definition, and
// a test holds the two to the same bytes.
type partLagJSON struct {
	Group         string   `json:"group"`
	Topic         string   `json:"topic"`
	Partition     int32    `json:"partition"`
	Committed     *int64   `json:"committed"`
	LogStart      int64    `json:"log_start"`
	End           int64    `json:"end"`
	Lag           int64    `json:"lag"`
	Lost          int64    `json:"lost"`
	AgeSeconds    *float64 `json:"age_seconds"`
	TimestampType string   `json:"timestamp_type"`
	AgeApprox     bool     `json:"age_approximate"`
	ClockSkew     bool     `json:"clock_skew"`
	Status        string   `json:"status"`
	ProduceRate   *float64 `json:"produce_rate"`
	ConsumeRate   *float64 `json:"consume_rate"`
	ETASeconds    *float64 `json:"eta_seconds"`
	FallingBehind bool     `json:"falling_behind"`
	TimeToLoss    *float64 `json:"time_to_loss_seconds"`
	RetentionRisk bool     `json:"retention_risk"`
	Owner         string   `json:"owner"`
	Breach        bool     `json:"breach"`
	Compacted     bool     `json:"compacted"`
	Error         string   `json:"error,omitempty"`
	// Event time (topics with a lag.event_time rule only).
	EventAgeSeconds *float64 `json:"event_age_seconds,omitempty"`
	EventClockError bool     `json:"event_clock_error,omitempty"`
	EventTimeError  string   `json:"event_time_error,omitempty"`
}

type groupLagJSON struct {
	Group           string   `json:"group"`
	State           string   `json:"state"`
	Members         int      `json:"members"`
	IdleMembers     []string `json:"idle_members"`
	Status          string   `json:"status"`
	MaxAgeSeconds   *float64 `json:"max_age_seconds"`
	MaxAgeTopic     string   `json:"max_age_topic"`
	MaxAgePartition int32    `json:"max_age_partition"`
	AgesUnknown     int      `json:"ages_unknown"`
	TotalLag        int64    `json:"total_lag"`
	Lost            int64    `json:"lost"`
	ProduceRate     float64  `json:"produce_rate"`
	ConsumeRate     float64  `json:"consume_rate"`
	AgeSkew         float64  `json:"age_skew"`
	SLOSeconds      float64  `json:"slo_seconds"`
	Breach          bool     `json:"breach"`
	ClockSkew       bool     `json:"clock_skew"`
	RetentionRisk   bool     `json:"retention_risk"`
	Inactive        bool     `json:"inactive"`
	// Event time (lag.event_time topics): the oldest unprocessed event's
	// age, the group's event-time SLO (groups[].event_slo) and breach, and
	// how many lagging partitions had no readable event time or a clock
	// ahead of the margin.
	MaxEventAgeSeconds *float64       `json:"max_event_age_seconds"`
	EventSLOSeconds    float64        `json:"event_slo_seconds"`
	EventBreach        bool           `json:"event_breach"`
	EventTimesUnknown  int            `json:"event_times_unknown"`
	EventClockErrors   int            `json:"event_clock_errors"`
	Partitions         int            `json:"partitions"`
	ByStatus           map[string]int `json:"partitions_by_status"`
	Error              string         `json:"error,omitempty"`
}

func secs(d time.Duration) *float64 {
	v := roundTo(d.Seconds(), 3)
	return &v
}

func roundTo(v float64, places int) float64 {
	p := 1.0
	for i := 0; i < places; i++ {
		p *= 10
	}
	if v < 0 {
		return -float64(int64(-v*p+0.5)) / p
	}
	return float64(int64(v*p+0.5)) / p
}

func partJSON(group string, r lag.PartitionLag) partLagJSON {
	j := partLagJSON{
		Group: group, Topic: r.Topic.String(), Partition: r.Partition, LogStart: r.LogStart, End: r.End,
		Lag: r.Lag, Lost: r.Lost, TimestampType: r.TimestampType.String(), AgeApprox: r.AgeApprox,
		ClockSkew: r.ClockSkew, Status: r.Status.String(), FallingBehind: r.FallingBehind,
		RetentionRisk: r.RetentionRisk, Owner: r.Owner.String(), Breach: r.Breach, Compacted: r.Compacted,
		Error: r.Err.String(),
	}
	if r.Committed != lag.NoCommit {
		c := r.Committed
		j.Committed = &c
	}
	if r.AgeKnown {
		j.AgeSeconds = secs(r.Age)
	}
	if r.RatesKnown {
		p, c := roundTo(r.ProduceRate, 3), roundTo(r.ConsumeRate, 3)
		j.ProduceRate, j.ConsumeRate = &p, &c
	}
	if r.ETAKnown {
		j.ETASeconds = secs(r.ETA)
	}
	if r.TimeToLossKnown {
		j.TimeToLoss = secs(r.TimeToLoss)
	}
	if r.EventRule {
		if r.EventAgeKnown {
			j.EventAgeSeconds = secs(r.EventAge)
		}
		j.EventClockError = r.EventClockError
		j.EventTimeError = eventTimeError(r)
	}
	return j
}

// eventTimeError says why a lagging partition of an event-time topic has no
// event age ("missing", "unparsable", "unread"), "" when it has one.
func eventTimeError(r lag.PartitionLag) string {
	if r.EventAgeKnown || r.EventState <= lag.EventFound {
		return ""
	}
	return r.EventState.String()
}

func groupJSON(g monitor.Group) groupLagJSON {
	j := groupLagJSON{
		Group: g.Group, State: g.State, Members: g.MemberCount, IdleMembers: g.IdleMembers,
		Status: g.Status.String(), MaxAgeTopic: g.MaxAgeTopic, MaxAgePartition: g.MaxAgePartition,
		AgesUnknown: g.AgesUnknown, TotalLag: g.TotalLag, Lost: g.Lost,
		ProduceRate: roundTo(g.ProduceRate, 3), ConsumeRate: roundTo(g.ConsumeRate, 3),
		AgeSkew: roundTo(g.AgeSkew, 3), SLOSeconds: g.SLO.Seconds(), Breach: g.Breach,
		ClockSkew: g.ClockSkew, RetentionRisk: g.RetentionRisk, Inactive: g.Inactive, Partitions: len(g.Partitions),
		ByStatus: map[string]int{}, Error: g.Err,
	}
	if j.IdleMembers == nil {
		j.IdleMembers = []string{}
	}
	if g.MaxAgeKnown {
		j.MaxAgeSeconds = secs(g.MaxAge)
	}
	if g.MaxEventAgeKnown {
		j.MaxEventAgeSeconds = secs(g.MaxEventAge)
	}
	j.EventSLOSeconds, j.EventBreach = g.EventSLO.Seconds(), g.EventBreach
	j.EventTimesUnknown, j.EventClockErrors = g.EventUnknown, g.EventClockErrors
	for _, st := range lag.Statuses {
		if n := g.Counts[st]; n > 0 {
			j.ByStatus[st.String()] = n
		}
	}
	return j
}

func (a *app) writeLag(f output.Format, s monitor.Snapshot, watching bool) error {
	w := a.stdout
	switch f {
	case output.JSON:
		// With --watch, one document per line, so a watcher can be piped
		// to jq.
		return writeLagJSON(w, a.ctxName, s, watching)
	case output.JSONL:
		return writeLagJSONL(w, a.ctxName, s)
	}
	if watching {
		fmt.Fprintf(w, "--- %s  (window %s)\n", s.Observed.Format("15:04:05"), durations.Format(s.Window))
	}
	return writeLagTables(w, s)
}

func writeLagTables(w io.Writer, s monitor.Snapshot) error {
	if len(s.Groups) == 0 {
		_, err := fmt.Fprintln(w, "no consumer groups")
		return err
	}
	newGrid := func() output.Grid {
		return output.Grid{
			Header: []string{"GROUP", "STATUS", "MAX AGE", "AT", "LAG", "SLO", "BREACH", "MEMBERS", "PARTITIONS"},
			Right:  map[int]bool{2: true, 4: true, 5: true, 7: true},
		}
	}
	g, idle := newGrid(), newGrid()
	for _, grp := range s.Groups {
		grid := &g
		if grp.Inactive {
			grid = &idle
		}
		age := "?"
		if grp.MaxAgeKnown {
			age = durations.Format(grp.MaxAge)
		}
		at := ""
		if grp.MaxAgeKnown && grp.MaxAge > 0 {
			at = fmt.Sprintf("%s[%d]", grp.MaxAgeTopic, grp.MaxAgePartition)
		}
		breach := ""
		if grp.Breach {
			breach = "BREACH"
		}
		members := fmt.Sprint(grp.MemberCount)
		if n := len(grp.IdleMembers); n > 0 {
			members += fmt.Sprintf(" (%d idle)", n)
		}
		grid.Add(grp.Group, grp.Status.String(), age, at, fmt.Sprint(grp.TotalLag), durations.Format(grp.SLO), breach, members, statusCounts(grp.GroupLag))
	}
	// Live groups first; abandoned ones apart, after them, so an old
	// Empty group never sits above a live incident.
	if len(g.Rows) == 0 {
		fmt.Fprintln(w, "no active consumer groups")
	} else if err := g.WriteTable(w); err != nil {
		return err
	}
	if len(idle.Rows) > 0 {
		fmt.Fprintf(w, "\n%s\n", inactiveTitle)
		if err := idle.WriteTable(w); err != nil {
			return err
		}
	}
	p := output.Grid{
		Header: []string{"GROUP", "TOPIC", "PART", "COMMITTED", "END", "LAG", "AGE", "STATUS", "PRODUCE/s", "CONSUME/s", "ETA", "NOTE"},
		Right:  map[int]bool{2: true, 3: true, 4: true, 5: true, 6: true, 8: true, 9: true, 10: true},
	}
	hidden := 0
	for _, grp := range s.Groups {
		if grp.Inactive {
			continue // their rows would bury the live ones; -o json lists them
		}
		for _, r := range grp.Partitions {
			// The table is for problems: OK rows are counted, not listed
			// (a group can have thousands); -o json lists every row.
			if r.Status == lag.OK && !r.Breach && !r.RetentionRisk && !r.ClockSkew && r.Err == 0 {
				hidden++
				continue
			}
			committed := "-"
			if r.Committed != lag.NoCommit {
				committed = fmt.Sprint(r.Committed)
			}
			age := "?"
			if r.AgeKnown {
				age = durations.Format(r.Age)
				if r.AgeApprox {
					age = "~" + age
				}
			}
			prod, cons := "", ""
			if r.RatesKnown {
				prod, cons = fmtRate(r.ProduceRate), fmtRate(r.ConsumeRate)
			}
			eta := ""
			switch {
			case r.FallingBehind:
				eta = "falling behind"
			case r.ETAKnown && r.Lag > 0:
				eta = durations.Format(r.ETA)
			}
			p.Add(grp.Group, r.Topic.String(), fmt.Sprint(r.Partition), committed, fmt.Sprint(r.End), fmt.Sprint(r.Lag), age, r.Status.String(), prod, cons, eta, partNote(r))
		}
	}
	if len(p.Rows) > 0 {
		fmt.Fprintln(w)
		if err := p.WriteTable(w); err != nil {
			return err
		}
	}
	if hidden > 0 {
		fmt.Fprintf(w, "\n%d OK partition(s) not shown (-o json lists every partition)\n", hidden)
	}
	if len(idle.Rows) > 0 {
		fmt.Fprintf(w, "partitions of the %d inactive group(s) not shown (-o json lists them)\n", len(idle.Rows))
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}

// inactiveTitle heads the section of abandoned groups.
const inactiveTitle = "Inactive groups (no members, nothing consumed for over an hour):"

func statusCounts(g lag.GroupLag) string {
	var parts []string
	for i := len(lag.Statuses) - 1; i >= 0; i-- {
		st := lag.Statuses[i]
		if n := g.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	return strings.Join(parts, ", ")
}

func partNote(r lag.PartitionLag) string {
	var notes []string
	if r.Err != 0 {
		notes = append(notes, "offsets unknown: "+r.Err.String())
	}
	if r.Lost > 0 {
		notes = append(notes, fmt.Sprintf("%d lost to retention", r.Lost))
	}
	if r.ClockSkew {
		notes = append(notes, "clock skew (timestamp in the future)")
	}
	if r.RetentionRisk && r.TimeToLossKnown {
		notes = append(notes, "data loss in "+durations.Format(r.TimeToLoss))
	}
	if r.Owner == 0 && r.Lag > 0 {
		notes = append(notes, "no owner")
	}
	if r.Compacted {
		notes = append(notes, "compacted: lag is an upper bound")
	}
	if r.TimestampType == backends.LogAppendTime {
		notes = append(notes, "broker time")
	}
	switch {
	case r.EventRule && r.EventAgeKnown && r.Lag > 0:
		notes = append(notes, "event age "+durations.Format(r.EventAge))
	case eventTimeError(r) != "":
		notes = append(notes, "event time "+eventTimeError(r))
	}
	if r.EventClockError {
		notes = append(notes, "event time ahead of now (producer clock)")
	}
	return strings.Join(notes, "; ")
}

func fmtRate(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}

// runQueueLag is `berth lag` on a RabbitMQ context: one row per queue.
func (a *app) runQueueLag(ctx context.Context, o lagOptions, f output.Format) error {
	once := func() ([]monitor.QueueLag, []string, error) {
		qctx, cancel := a.opCtx(ctx)
		defer cancel()
		rows, notes, err := a.QueueLagRows(qctx)
		if err != nil {
			return nil, nil, err
		}
		if len(o.groups) > 0 {
			want := map[string]bool{}
			for _, g := range o.groups {
				want[g] = true
			}
			kept := rows[:0]
			for _, r := range rows {
				if want[r.Queue] {
					kept = append(kept, r)
					delete(want, r.Queue)
				}
			}
			if len(want) > 0 {
				var missing []string
				for n := range want {
					missing = append(missing, n)
				}
				sort.Strings(missing)
				return nil, nil, fmt.Errorf("queue %s not found", strings.Join(missing, ", "))
			}
			rows = kept
		}
		return rows, notes, nil
	}
	write := func(rows []monitor.QueueLag, notes []string) error {
		if f == output.JSONL {
			return writeQueueJSONL(a.stdout, a.ctxName, time.Now().UTC(), rows, notes)
		}
		if f == output.JSON {
			doc := map[string]any{"context": a.ctxName, "observed": time.Now().UTC(), "queues": rows, "warnings": notes}
			if rows == nil {
				doc["queues"] = []monitor.QueueLag{}
			}
			if notes == nil {
				doc["warnings"] = []string{}
			}
			return output.WriteJSON(a.stdout, doc)
		}
		g := output.Grid{Header: []string{"VHOST", "QUEUE", "TYPE", "READY", "UNACKED", "CONSUMERS", "AGE", "SOURCE", "STATUS", "SLO", "BREACH"}, Right: map[int]bool{3: true, 4: true, 5: true, 6: true, 9: true}}
		for _, r := range rows {
			age := "?"
			if r.AgeSeconds != nil {
				age = durations.Format(time.Duration(*r.AgeSeconds * float64(time.Second)))
			}
			breach := ""
			if r.Breach {
				breach = "BREACH"
			}
			g.Add(r.Vhost, r.Queue, r.Type, optInt(r.Ready), optInt(r.Unacked), optIntp(r.Consumers), age, r.AgeSource, r.Status, durations.Format(time.Duration(r.SLOSeconds*float64(time.Second))), breach)
		}
		if err := g.WriteTable(a.stdout); err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintf(a.stdout, "note: %s\n", n)
		}
		return nil
	}
	breach := func(rows []monitor.QueueLag) error {
		if !o.failOnBreach {
			return nil
		}
		var names []string
		for _, r := range rows {
			if r.Breach {
				names = append(names, r.Vhost+"/"+r.Queue)
			}
		}
		if len(names) == 0 {
			return nil
		}
		return &exitError{code: 3, err: fmt.Errorf("SLO breached: %s", strings.Join(names, ", "))}
	}
	for {
		rows, notes, err := once()
		if err != nil {
			if o.watch && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := write(rows, notes); err != nil {
			return err
		}
		if err := breach(rows); err != nil || !o.watch {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.interval):
		}
	}
}
