package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/internal/output"
)

func init() { register(newHealthCmd) }

func newHealthCmd(a *app) *cobra.Command {
	var sample time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "ISR problems, hot partitions and groups in breach of their SLO",
		Long: `List partitions that are under-replicated, at min ISR, under min ISR (acks=all
writes are rejected) or offline, leader elections seen between the two
samples, hot partitions (produce rate at 3x or more of their topic's median),
each broker's share of leadership and produce traffic, and consumer groups
whose oldest unprocessed record is older than their SLO.

Rates need two samples: health takes them --sample apart (default 5s).
On a RabbitMQ context it lists queues in breach or not OK.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runHealth(cmd, sample) },
	}
	cmd.Flags().DurationVar(&sample, "sample", 5*time.Second, "time between the two samples (0: one sample, no rates)")
	return cmd
}

type healthJSON struct {
	Context       string             `json:"context"`
	Observed      time.Time          `json:"observed"`
	WindowSeconds float64            `json:"window_seconds"`
	ISR           isrJSON            `json:"isr"`
	Hot           []lag.HotPartition `json:"hot_partitions"`
	Skewed        []lag.TopicSkew    `json:"skewed_topics"`
	Brokers       []lag.BrokerShare  `json:"brokers"`
	Breaches      []breachJSON       `json:"breaches"`
	Queues        []monitor.QueueLag `json:"queues,omitempty"`
	Warnings      []string           `json:"warnings"`
}

type isrJSON struct {
	UnderReplicated int                   `json:"under_replicated"`
	AtMinISR        int                   `json:"at_min_isr"`
	UnderMinISR     int                   `json:"under_min_isr"`
	Offline         int                   `json:"offline"`
	Elections       int                   `json:"elections"`
	WritesBlocked   int                   `json:"writes_blocked"`
	Partitions      []lag.PartitionHealth `json:"partitions"`
}

type breachJSON struct {
	Group         string  `json:"group"`
	Status        string  `json:"status"`
	MaxAgeSeconds float64 `json:"max_age_seconds"`
	SLOSeconds    float64 `json:"slo_seconds"`
	Topic         string  `json:"topic"`
	Partition     int32   `json:"partition"`
	Inactive      bool    `json:"inactive"`
}

func (a *app) runHealth(cmd *cobra.Command, sample time.Duration) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	if sample < 0 {
		return usageErr("--sample: must not be negative")
	}
	ctx, stop := signalContext(cmd)
	defer stop()
	if a.ctx.Kind == "rabbitmq" {
		return a.runQueueHealth(ctx, f)
	}
	run, err := a.newLagRun(ctx, nil)
	if err != nil {
		return err
	}
	defer run.cluster.Close()
	a.sayingSampling(sample)
	s, err := run.sampleTwice(a, ctx, sample)
	if err != nil {
		return err
	}
	h := s.Health
	doc := healthJSON{
		Context: a.ctxName, Observed: s.Observed.UTC(), WindowSeconds: roundTo(s.Window.Seconds(), 3),
		ISR: isrJSON{
			UnderReplicated: h.UnderReplicated, AtMinISR: h.AtMinISR, UnderMinISR: h.UnderMinISR,
			Offline: h.Offline, Elections: h.Elections, Partitions: h.ISR,
		},
		Hot: h.Hot, Skewed: h.Skewed, Brokers: h.Brokers, Breaches: []breachJSON{}, Warnings: s.Warnings,
	}
	for _, p := range h.ISR {
		if p.WritesBlocked {
			doc.ISR.WritesBlocked++
		}
	}
	for _, b := range h.Breaches {
		doc.Breaches = append(doc.Breaches, breachJSON{Group: b.Group, Status: b.Status.String(),
			MaxAgeSeconds: roundTo(b.MaxAge.Seconds(), 3), SLOSeconds: b.SLO.Seconds(), Topic: b.Topic, Partition: b.Partition, Inactive: b.Inactive})
	}
	if doc.ISR.Partitions == nil {
		doc.ISR.Partitions = []lag.PartitionHealth{}
	}
	if doc.Hot == nil {
		doc.Hot = []lag.HotPartition{}
	}
	if doc.Skewed == nil {
		doc.Skewed = []lag.TopicSkew{}
	}
	if doc.Brokers == nil {
		doc.Brokers = []lag.BrokerShare{}
	}
	if doc.Warnings == nil {
		doc.Warnings = []string{}
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, doc)
	}
	return writeHealthTables(a, doc)
}

func writeHealthTables(a *app, d healthJSON) error {
	w := a.stdout
	i := d.ISR
	fmt.Fprintf(w, "ISR: %d offline, %d under min ISR, %d at min ISR, %d under-replicated, %d leader election(s)\n",
		i.Offline, i.UnderMinISR, i.AtMinISR, i.UnderReplicated, i.Elections)
	if i.WritesBlocked > 0 {
		fmt.Fprintf(w, "!! acks=all writes are blocked on %d partition(s) (NOT_ENOUGH_REPLICAS or no leader)\n", i.WritesBlocked)
	}
	if len(i.Partitions) > 0 {
		g := output.Grid{Header: []string{"TOPIC", "PART", "CLASS", "LEADER", "EPOCH", "ISR", "REPLICAS", "MIN ISR", "ELECTIONS", "WRITES"}, Right: map[int]bool{1: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true}}
		for _, p := range i.Partitions {
			writes := "ok"
			if p.WritesBlocked {
				writes = "BLOCKED"
			}
			leader := fmt.Sprint(p.Leader)
			if p.Leader < 0 {
				leader = "none"
			}
			g.Add(p.Topic, fmt.Sprint(p.Partition), p.Class.String(), leader, fmt.Sprint(p.LeaderEpoch), fmt.Sprint(p.ISR), fmt.Sprint(p.Replicas), fmt.Sprint(p.MinISR), fmt.Sprint(p.Elections), writes)
		}
		if err := g.WriteTable(w); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if len(d.Hot) == 0 {
		if d.WindowSeconds == 0 {
			fmt.Fprintln(w, "Hot partitions: not judged (one sample has no rates)")
		} else {
			fmt.Fprintln(w, "Hot partitions: none")
		}
	} else {
		fmt.Fprintln(w, "Hot partitions:")
		g := output.Grid{Header: []string{"TOPIC", "PART", "LEADER", "PRODUCE/s", "x MEDIAN", "SHARE"}, Right: map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true}}
		for _, h := range d.Hot {
			ratio := "all"
			if h.Ratio > 0 {
				ratio = fmt.Sprintf("%.1f", h.Ratio)
			}
			g.Add(h.Topic, fmt.Sprint(h.Partition), fmt.Sprint(h.Leader), fmtRate(h.Rate), ratio, fmt.Sprintf("%.0f%%", h.Share*100))
		}
		if err := g.WriteTable(w); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Brokers:")
	g := output.Grid{Header: []string{"BROKER", "LEADERS", "LEADER SHARE", "PRODUCE/s", "PRODUCE SHARE"}, Right: map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true}}
	for _, b := range d.Brokers {
		g.Add(fmt.Sprint(b.Broker), fmt.Sprint(b.Leaders), fmt.Sprintf("%.0f%%", b.LeaderShare*100), fmtRate(b.ProduceRate), fmt.Sprintf("%.0f%%", b.ProduceShare*100))
	}
	if err := g.WriteTable(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var live, inactive []breachJSON
	for _, b := range d.Breaches {
		if b.Inactive {
			inactive = append(inactive, b)
		} else {
			live = append(live, b)
		}
	}
	breaches := func(title string, bs []breachJSON) error {
		fmt.Fprintln(w, title)
		g := output.Grid{Header: []string{"GROUP", "STATUS", "MAX AGE", "SLO", "AT"}, Right: map[int]bool{2: true, 3: true}}
		for _, b := range bs {
			g.Add(b.Group, b.Status, durations.Format(time.Duration(b.MaxAgeSeconds*float64(time.Second))), durations.Format(time.Duration(b.SLOSeconds*float64(time.Second))), fmt.Sprintf("%s[%d]", b.Topic, b.Partition))
		}
		return g.WriteTable(w)
	}
	if len(live) == 0 {
		fmt.Fprintln(w, "SLO breaches: none")
	} else if err := breaches("SLO breaches:", live); err != nil {
		return err
	}
	if len(inactive) > 0 {
		fmt.Fprintln(w)
		if err := breaches(inactiveTitle, inactive); err != nil {
			return err
		}
	}
	for _, warn := range d.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}

// runQueueHealth lists RabbitMQ queues that are in breach or not OK.
func (a *app) runQueueHealth(ctx context.Context, f output.Format) error {
	qctx, cancel := a.opCtx(ctx)
	defer cancel()
	rows, notes, err := a.QueueLagRows(qctx)
	if err != nil {
		return err
	}
	var bad []monitor.QueueLag
	for _, r := range rows {
		// A dead-letter queue that holds (or has no) dead letters is doing
		// its job; one receiving them now is news.
		quiet := r.Status == lag.QueueDLQHolding.String() || r.Status == lag.QueueDLQEmpty.String()
		if r.Breach || (r.Status != lag.QueueOK.String() && !quiet) {
			bad = append(bad, r)
		}
	}
	if f == output.JSON {
		if bad == nil {
			bad = []monitor.QueueLag{}
		}
		if notes == nil {
			notes = []string{}
		}
		return output.WriteJSON(a.stdout, map[string]any{"context": a.ctxName, "observed": time.Now().UTC(), "queues": bad, "warnings": notes})
	}
	if len(bad) == 0 {
		fmt.Fprintln(a.stdout, "queues: all OK")
	} else {
		g := output.Grid{Header: []string{"VHOST", "QUEUE", "STATUS", "READY", "CONSUMERS", "AGE", "BREACH"}, Right: map[int]bool{3: true, 4: true, 5: true}}
		for _, r := range bad {
			age := "?"
			if r.AgeSeconds != nil {
				age = durations.Format(time.Duration(*r.AgeSeconds * float64(time.Second)))
			}
			g.Add(r.Vhost, r.Queue, r.Status, optInt(r.Ready), optIntp(r.Consumers), age, strings.TrimSpace(map[bool]string{true: "BREACH"}[r.Breach]))
		}
		if err := g.WriteTable(a.stdout); err != nil {
			return err
		}
	}
	for _, n := range notes {
		fmt.Fprintf(a.stdout, "note: %s\n", n)
	}
	return nil
}
