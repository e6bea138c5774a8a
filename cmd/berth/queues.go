package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/internal/output"
)

// RabbitMQ queue commands: `berth queues` and `berth describe queue NAME`.

func init() {
	register(func(a *app) *cobra.Command {
		c := &cobra.Command{
			Use:   "queues",
			Short: "RabbitMQ queues: depth, consumers, rates, head age and status",
			Args:  noArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return a.runQueues(cmd) },
		}
		addQueueSubcommands(a, c)
		return c
	})
	registerDescribe(func(a *app) *cobra.Command {
		var vhost string
		c := &cobra.Command{
			Use:   "queue NAME",
			Short: "One RabbitMQ queue: statistics, age, status and wiring",
			Args:  exactArgs("NAME"),
			RunE:  func(cmd *cobra.Command, args []string) error { return a.runDescribeQueue(cmd, vhost, args[0]) },
		}
		c.Flags().StringVar(&vhost, "vhost", "", "the queue's vhost (default: the AMQP URL's, else /)")
		return c
	})
}

// rabbitClient attaches to the current context's RabbitMQ server.
func (a *app) rabbitClient(ctx context.Context) (*rabbitmq.Client, error) {
	o, err := a.rabbitOptions()
	if err != nil {
		return nil, err
	}
	cl, err := rabbitmq.Dial(ctx, o)
	if err != nil {
		return nil, err
	}
	a.guardRabbit(cl)
	return cl, nil
}

// rabbitOptions are the current RabbitMQ context's connection options.
func (a *app) rabbitOptions() (rabbitmq.Options, error) {
	if a.ctx.Kind != "rabbitmq" {
		return rabbitmq.Options{}, fmt.Errorf("context %s is a %s context; this command needs RabbitMQ (--amqp URL or a rabbitmq context)", a.ctxName, a.ctx.Kind)
	}
	pass, err := config.Password(a.ctx.PasswordEnv, a.ctx.PasswordFile)
	if err != nil {
		return rabbitmq.Options{}, fmt.Errorf("contexts.%s.%w", a.ctxName, err)
	}
	var tc = a.ctx.TLS
	t, err := tlsConfig(tc)
	if err != nil {
		return rabbitmq.Options{}, fmt.Errorf("contexts.%s.%w", a.ctxName, err)
	}
	return rabbitmq.Options{
		AMQPURL: a.ctx.AMQPURL, ManagementURL: a.ctx.ManagementURL,
		Username: a.ctx.Username, Password: pass,
		Vhosts: a.ctx.Vhosts, Queues: a.ctx.Queues,
		TLS: t, Timeout: a.timeout, ReadOnly: a.readOnly,
	}, nil
}

// queueRow is one queue in `berth queues -o json` and `berth describe queue`.
type queueRow struct {
	Name                string     `json:"queue"`
	Vhost               string     `json:"vhost"`
	Type                string     `json:"type"`
	State               string     `json:"state,omitempty"`
	Ready               *int64     `json:"ready"`
	Unacked             *int64     `json:"unacked"`
	Consumers           *int       `json:"consumers"`
	ConsumerUtilisation *float64   `json:"consumer_utilisation"`
	PublishRate         *float64   `json:"publish_rate"`
	DeliverRate         *float64   `json:"deliver_rate"`
	AckRate             *float64   `json:"ack_rate"`
	HeadTimestamp       *time.Time `json:"head_publisher_timestamp"`
	AgeSeconds          *float64   `json:"age_seconds"`
	AgeSource           string     `json:"age_source"`
	EstimatedWait       *float64   `json:"estimated_wait_seconds"`
	ETASeconds          *float64   `json:"eta_seconds"`
	Status              string     `json:"status"`
	Reason              string     `json:"reason"`
	SLOSeconds          float64    `json:"slo_seconds"`
	Breach              bool       `json:"breach"`
	ClockSkew           bool       `json:"clock_skew,omitempty"`

	Wiring    backends.QueueWiring `json:"wiring"`
	Stream    *backends.StreamInfo `json:"stream,omitempty"`
	Arguments map[string]string    `json:"arguments,omitempty"`
	Policy    string               `json:"policy,omitempty"`
	Source    string               `json:"source"`
}

// queuesResult is `berth queues -o json`.
type queuesResult struct {
	Mode     string     `json:"mode"`
	Missing  []string   `json:"missing,omitempty"`
	Warnings []string   `json:"warnings,omitempty"`
	Queues   []queueRow `json:"queues"`
}

// QueueView is a queue with its computed status (rabbitmq.QueueStatus).
type QueueView = rabbitmq.QueueStatus

// queueViews reads the inventory and evaluates every queue against its SLO
// (config groups: policies match queue names too).
func (a *app) queueViews(ctx context.Context) ([]QueueView, backends.QueueInventory, error) {
	cl, err := a.rabbitClient(ctx)
	if err != nil {
		return nil, backends.QueueInventory{}, err
	}
	defer cl.Close()
	snap, err := cl.Snapshot(ctx, func(name string) time.Duration {
		_, slo := a.cfg.GroupPolicyFor(name)
		return slo
	})
	if err != nil {
		return nil, backends.QueueInventory{}, err
	}
	inv := backends.QueueInventory{Mode: snap.Mode, Missing: snap.Missing, Warnings: snap.Warnings}
	// Dead-letter queues hold failures by design: judged as such, never
	// STALLED or in breach for holding messages.
	dlqs, err := cl.DLQs(ctx, a.cfg.Redrive.DLQs)
	if err != nil {
		inv.Warnings = append(inv.Warnings, "DLQ discovery: "+err.Error())
	}
	isDLQ := map[string]bool{}
	for _, d := range dlqs {
		isDLQ[d.Vhost+"\x00"+d.Name] = true
	}
	for i, v := range snap.Queues {
		if isDLQ[v.Queue.Vhost+"\x00"+v.Queue.Name] {
			snap.Queues[i].Lag = lag.EvaluateDeadLetterQueue(v.Queue, snap.Observed)
		}
	}
	return snap.Queues, inv, nil
}

// QueueLagRows is the RabbitMQ side of `berth lag` / `berth health`: one
// monitor.QueueLag per queue, plus notes on what reduced mode cannot see.
func (a *app) QueueLagRows(ctx context.Context) ([]monitor.QueueLag, []string, error) {
	views, inv, err := a.queueViews(ctx)
	if err != nil {
		return nil, nil, err
	}
	notes := append(append([]string(nil), inv.Missing...), inv.Warnings...)
	rows := make([]monitor.QueueLag, len(views))
	for i, v := range views {
		q, l := v.Queue, v.Lag
		r := monitor.QueueLag{
			Queue: q.Name, Vhost: q.Vhost, Type: q.Type,
			// nil until RabbitMQ has produced the statistic: unknown, not 0
			Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers,
			AgeSeconds: l.AgeSeconds(), AgeSource: l.AgeSource,
			Status: l.Status.String(), SLOSeconds: l.SLO.Seconds(), Breach: l.Breach,
			Extra: map[string]any{
				"stats_known":            q.Ready != nil && q.Unacked != nil && q.Consumers != nil,
				"consumer_utilisation":   q.ConsumerUtilisation,
				"publish_rate":           q.PublishRate,
				"ack_rate":               q.AckRate,
				"eta_seconds":            l.ETASeconds(),
				"estimated_wait_seconds": l.EstimatedWaitSeconds(),
				"reason":                 l.Reason,
			},
		}
		rows[i] = r
	}
	return rows, notes, nil
}

func rowOf(v QueueView) queueRow {
	q, l := v.Queue, v.Lag
	return queueRow{
		Name: q.Name, Vhost: q.Vhost, Type: q.Type, State: q.State,
		Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers,
		ConsumerUtilisation: q.ConsumerUtilisation,
		PublishRate:         q.PublishRate, DeliverRate: q.DeliverRate, AckRate: q.AckRate,
		HeadTimestamp: q.HeadPublisherTimestamp,
		AgeSeconds:    l.AgeSeconds(), AgeSource: l.AgeSource,
		EstimatedWait: l.EstimatedWaitSeconds(), ETASeconds: l.ETASeconds(),
		Status: l.Status.String(), Reason: l.Reason,
		SLOSeconds: l.SLO.Seconds(), Breach: l.Breach, ClockSkew: l.ClockSkew,
		Wiring: q.Wiring, Stream: q.Stream, Arguments: q.Arguments, Policy: q.Policy,
		Source: q.Source,
	}
}

func (a *app) runQueues(cmd *cobra.Command) error {
	f, err := a.format(output.Table, output.JSON, output.Markdown)
	if err != nil {
		return err
	}
	ctx, cancel := a.opCtx(cmd.Context())
	defer cancel()
	views, inv, err := a.queueViews(ctx)
	if err != nil {
		return err
	}
	res := queuesResult{Mode: inv.Mode, Missing: inv.Missing, Warnings: inv.Warnings, Queues: []queueRow{}}
	for _, v := range views {
		res.Queues = append(res.Queues, rowOf(v))
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, res)
	}
	g := output.Grid{
		Header: []string{"VHOST", "QUEUE", "TYPE", "READY", "UNACKED", "CONSUMERS", "UTIL", "PUB/S", "ACK/S", "AGE", "AGE SOURCE", "STATUS", "ETA"},
		Right:  map[int]bool{3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true, 12: true},
	}
	for _, r := range res.Queues {
		age := "?"
		if r.AgeSeconds != nil {
			age = fmtSeconds(*r.AgeSeconds)
			if r.Breach {
				age += "!"
			}
		}
		src := r.AgeSource
		if src == lag.AgeEstimate {
			src = "estimate (depth/drain)"
		} else if src == lag.AgePublisherTimestamp {
			src = "publisher timestamp"
		} else if src == lag.AgeUnknown {
			src = "unknown (head timestamp not reported)"
		}
		eta := ""
		if r.ETASeconds != nil {
			eta = fmtSeconds(*r.ETASeconds)
		}
		g.Add(r.Vhost, r.Name, orQ(r.Type), optInt(r.Ready), optInt(r.Unacked), optIntp(r.Consumers),
			optPct(r.ConsumerUtilisation), optRate(r.PublishRate), optRate(r.AckRate), age, src, r.Status, eta)
	}
	if f == output.Markdown {
		err = g.WriteMarkdown(a.stdout)
	} else {
		err = g.WriteTable(a.stdout)
	}
	writeNotes(a.stderr, inv)
	return err
}

// writeNotes says on stderr what the listing could not see.
func writeNotes(w io.Writer, inv backends.QueueInventory) {
	if inv.Mode == rabbitmq.ModeReduced {
		fmt.Fprintln(w, "reduced mode (no management API): ready counts and consumers from passive declares only")
	}
	for _, m := range inv.Missing {
		fmt.Fprintln(w, "  missing: "+config.RedactError(m))
	}
	for _, m := range inv.Warnings {
		fmt.Fprintln(w, "warning: "+m)
	}
}

func (a *app) runDescribeQueue(cmd *cobra.Command, vhost, name string) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	ctx, cancel := a.opCtx(cmd.Context())
	defer cancel()
	cl, err := a.rabbitClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	q, err := cl.Queue(ctx, vhost, name)
	if err != nil {
		return err
	}
	_, slo := a.cfg.GroupPolicyFor(q.Name)
	r := rowOf(QueueView{Queue: q, Lag: lag.EvaluateQueue(q, time.Now(), slo)})
	if f == output.JSON {
		return output.WriteJSON(a.stdout, r)
	}
	g := output.Grid{Header: []string{"FIELD", "VALUE"}}
	add := func(k, v string) { g.Add(k, v) }
	add("queue", r.Name)
	add("vhost", r.Vhost)
	add("type", orQ(r.Type))
	add("state", r.State)
	add("source", r.Source)
	add("ready", optInt(r.Ready))
	add("unacked", optInt(r.Unacked))
	add("consumers", optIntp(r.Consumers))
	add("consumer utilisation", optPct(r.ConsumerUtilisation))
	add("publish rate", optRate(r.PublishRate))
	add("deliver rate", optRate(r.DeliverRate))
	add("ack rate", optRate(r.AckRate))
	if r.HeadTimestamp != nil {
		add("head publisher timestamp", r.HeadTimestamp.Format(time.RFC3339))
	} else {
		add("head publisher timestamp", "? (not reported: quorum/stream queue, or the head message has no timestamp property)")
	}
	age := "?"
	if r.AgeSeconds != nil {
		age = fmtSeconds(*r.AgeSeconds) + " (" + r.AgeSource + ")"
	}
	add("age", age)
	if r.EstimatedWait != nil {
		add("estimated wait", fmtSeconds(*r.EstimatedWait)+" (estimate: ready / drain rate)")
	}
	add("status", r.Status+": "+r.Reason)
	if r.ETASeconds != nil {
		add("eta to drain", fmtSeconds(*r.ETASeconds))
	}
	add("slo", fmtSeconds(r.SLOSeconds)+map[bool]string{true: " (BREACHED)", false: ""}[r.Breach])
	w := r.Wiring
	add("dead-letter exchange", optStr(w.DeadLetterExchange, w.From["dead_letter_exchange"]))
	add("dead-letter routing key", optStr(w.DeadLetterRoutingKey, w.From["dead_letter_routing_key"]))
	add("delivery limit", optNum(w.DeliveryLimit, w.From["delivery_limit"]))
	add("message ttl (ms)", optNum(w.MessageTTLMs, w.From["message_ttl_ms"]))
	add("max length", optNum(w.MaxLength, w.From["max_length"]))
	add("max length bytes", optNum(w.MaxLengthBytes, w.From["max_length_bytes"]))
	add("overflow", optStr(w.Overflow, w.From["overflow"]))
	if r.Policy != "" {
		add("policy", r.Policy)
	}
	if s := r.Stream; s != nil {
		add("stream messages (approx.)", optInt(s.Messages))
		if s.MaxAge != "" {
			add("stream max age", s.MaxAge)
		}
		add("stream max length bytes", optInt(s.MaxLengthBytes))
		add("stream first offset", optInt(s.FirstOffset))
		add("stream last offset (last chunk)", optInt(s.LastOffset))
		add("stream first publisher timestamp", optTime(s.FirstTimestamp))
		add("stream last publisher timestamp", optTime(s.LastTimestamp))
		add("offset resets", "do not apply to streams: AMQP 0.9.1 consumers choose x-stream-offset themselves")
	}
	return g.WriteTable(a.stdout)
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func optInt(p *int64) string {
	if p == nil {
		return "?"
	}
	return strconv.FormatInt(*p, 10)
}

func optIntp(p *int) string {
	if p == nil {
		return "?"
	}
	return strconv.Itoa(*p)
}

func optPct(p *float64) string {
	if p == nil {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", *p*100)
}

func optRate(p *float64) string {
	if p == nil {
		return "?"
	}
	return strconv.FormatFloat(*p, 'f', 1, 64)
}

func optStr(p *string, from string) string {
	if p == nil {
		return "-"
	}
	v := *p
	if v == "" {
		v = `"" (default exchange)`
	}
	return v + " (" + from + ")"
}

func optNum(p *int64, from string) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10) + " (" + from + ")"
}

func optTime(p *time.Time) string {
	if p == nil {
		return "?"
	}
	return p.Format(time.RFC3339)
}

// fmtSeconds renders a duration in seconds compactly (12s, 4m05s, 3h02m).
func fmtSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
