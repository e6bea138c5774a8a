package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
	"github.com/berth-dev/berth/redrive/sor"
)

// RabbitMQ dead letters and redrive: `berth queues dlq list|classes|show`
// and `berth queues redrive plan|execute|status`. The Kafka `berth dlq` and
// `berth redrive` commands cover Kafka contexts; these are their RabbitMQ
// counterparts with the same JSON shapes where the meaning is the same.

// addQueueSubcommands hangs the dlq and redrive trees under `berth queues`.
func addQueueSubcommands(a *app, queues *cobra.Command) {
	dlq := &cobra.Command{Use: "dlq", Short: "RabbitMQ dead-letter queues: list, classes, messages", Args: noArgs}
	dlq.AddCommand(a.newQDLQList(), a.newQDLQClasses(), a.newQDLQShow())
	rd := &cobra.Command{Use: "redrive", Short: "Plan and execute RabbitMQ redrives (ledger, confirms, dry run first)", Args: noArgs}
	rd.AddCommand(a.newQRedrivePlan(), a.newQRedriveApprove(), a.newQRedriveExecute(), a.newQRedriveStatus())
	queues.AddCommand(dlq, rd)
}

// browseFlags are shared by the commands that read a DLQ.
type browseFlags struct {
	limit  int
	typ    string
	accept bool
}

func (b *browseFlags) add(c *cobra.Command) {
	c.Flags().IntVar(&b.limit, "limit", 1000, "most messages to read")
	c.Flags().StringVar(&b.typ, "queue-type", "", "the DLQ's type when there is no management API (classic|quorum|stream)")
	c.Flags().BoolVar(&b.accept, "accept-requeue-side-effects", false, "quorum DLQs: accept that reading moves each message to the back and adds 1 to its delivery count")
}

func (a *app) extractorsFor(dlq string) rabbitmq.Extractors {
	pol, _ := a.cfg.RedrivePolicyFor(dlq)
	return rabbitmq.Extractors{IdempotencyKey: pol.IdempotencyKey, ErrorHeader: pol.ErrorHeader}
}

func (a *app) browse(ctx context.Context, cl *rabbitmq.Client, dlq string, b browseFlags) (rabbitmq.BrowseResult, error) {
	if b.limit <= 0 {
		return rabbitmq.BrowseResult{}, usageErr("--limit: must be positive")
	}
	switch b.typ {
	case "", "classic", "quorum", "stream":
	default:
		return rabbitmq.BrowseResult{}, usageErr("--queue-type: %q is not classic, quorum or stream", b.typ)
	}
	return cl.Browse(ctx, dlq, rabbitmq.BrowseOptions{Limit: b.limit, QueueType: b.typ, AcceptQuorumSideEffects: b.accept, Extractors: a.extractorsFor(dlq)})
}

type qdlqRow struct {
	DLQ     string   `json:"dlq"`
	Vhost   string   `json:"vhost"`
	Type    string   `json:"type"`
	Found   string   `json:"found"`
	Sources []string `json:"sources"`
	Depth   *int64   `json:"depth"`
	// DepthSource is "management" (ready + unacked) or "passive_declare"
	// (ready only: the management API had no statistics yet, or is absent).
	DepthSource string `json:"depth_source,omitempty"`
	// HeadAgeSeconds is from the head message's publisher timestamp (not
	// its death time), null when RabbitMQ does not report one.
	HeadAgeSeconds *float64 `json:"head_publisher_age_seconds"`
}

func (a *app) newQDLQList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Dead-letter queues found from dead-letter wiring, plus configured ones",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			dlqs, err := cl.DLQs(ctx, a.cfg.Redrive.DLQs)
			if err != nil {
				return err
			}
			rows := []qdlqRow{}
			for _, d := range dlqs {
				r := qdlqRow{DLQ: d.Name, Vhost: d.Vhost, Type: d.Type, Found: d.Found, Sources: d.Sources}
				if r.Sources == nil {
					r.Sources = []string{}
				}
				if d.Queue != nil {
					if n, ok := d.Queue.Total(); ok {
						r.Depth, r.DepthSource = &n, "management"
					}
					if ts := d.Queue.HeadPublisherTimestamp; ts != nil {
						s := time.Since(*ts).Seconds()
						r.HeadAgeSeconds = &s
					}
				}
				if r.Depth == nil && d.Vhost == cl.Vhost() {
					if n, err := cl.ReadyCount(ctx, d.Name); err == nil {
						r.Depth, r.DepthSource = &n, "passive_declare"
					}
				}
				rows = append(rows, r)
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, rows)
			}
			g := output.Grid{Header: []string{"VHOST", "DLQ", "TYPE", "DEPTH", "HEAD AGE (publisher ts)", "FOUND", "SOURCES"}, Right: map[int]bool{3: true, 4: true}}
			for _, r := range rows {
				age := "?"
				if r.HeadAgeSeconds != nil {
					age = fmtSeconds(*r.HeadAgeSeconds)
				}
				g.Add(r.Vhost, r.DLQ, orQ(r.Type), optInt(r.Depth), age, r.Found, strings.Join(r.Sources, ","))
			}
			return g.WriteTable(a.stdout)
		},
	}
}

type qClassRow struct {
	Class         string    `json:"class"`
	Count         int       `json:"count"`
	OriginalQueue string    `json:"original_queue"`
	Reason        string    `json:"reason"`
	Error         string    `json:"error_pattern"`
	Transient     bool      `json:"transient"`
	Verdict       string    `json:"verdict"`
	FirstSeen     time.Time `json:"first_seen"`
	LastSeen      time.Time `json:"last_seen"`
}

type qClassesResult struct {
	DLQ      string `json:"dlq"`
	Method   string `json:"method"`
	Complete bool   `json:"complete"`
	Read     int    `json:"read"`
	// OldestAgeSeconds is now minus the earliest death time read.
	OldestAgeSeconds *float64    `json:"oldest_age_seconds"`
	SideEffects      []string    `json:"side_effects,omitempty"`
	Classes          []qClassRow `json:"classes"`
}

func (a *app) newQDLQClasses() *cobra.Command {
	var b browseFlags
	c := &cobra.Command{
		Use:   "classes DLQ",
		Short: "Failure classes of a DLQ: original queue, death reason, error pattern",
		Args:  exactArgs("DLQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			res, err := a.browse(ctx, cl, args[0], b)
			if err != nil {
				return err
			}
			out := qClassesResult{DLQ: args[0], Method: res.Method, Complete: res.Complete, Read: len(res.Messages), SideEffects: res.SideEffects, Classes: []qClassRow{}}
			if t := rabbitmq.OldestDeath(res.Messages); t != nil {
				s := time.Since(*t).Seconds()
				out.OldestAgeSeconds = &s
			}
			for _, k := range rabbitmq.Classes(res.Messages, redrive.DefaultRules) {
				out.Classes = append(out.Classes, qClassRow{Class: k.ID, Count: k.Count, OriginalQueue: k.OriginalTopic, Reason: k.Exception, Error: k.Pattern, Transient: k.Transient, Verdict: k.Verdict, FirstSeen: k.FirstSeen, LastSeen: k.LastSeen})
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, out)
			}
			g := output.Grid{Header: []string{"CLASS", "COUNT", "ORIGINAL QUEUE", "REASON", "ERROR", "VERDICT", "LAST SEEN"}, Right: map[int]bool{1: true}}
			for _, r := range out.Classes {
				g.Add(r.Class, fmt.Sprint(r.Count), r.OriginalQueue, r.Reason, r.Error, r.Verdict, r.LastSeen.Format(time.RFC3339))
			}
			if err := g.WriteTable(a.stdout); err != nil {
				return err
			}
			a.browseNotes(res)
			return nil
		},
	}
	b.add(c)
	return c
}

func (a *app) browseNotes(res rabbitmq.BrowseResult) {
	fmt.Fprintf(a.stderr, "read %d message(s) by %s", len(res.Messages), res.Method)
	if !res.Complete {
		fmt.Fprint(a.stderr, " (more remain: raise --limit)")
	}
	fmt.Fprintln(a.stderr)
	for _, s := range res.SideEffects {
		fmt.Fprintln(a.stderr, "side effect: "+s)
	}
}

func (a *app) newQDLQShow() *cobra.Command {
	var b browseFlags
	var class string
	c := &cobra.Command{
		Use:   "show DLQ",
		Short: "Messages of a DLQ with their x-death history (nothing is removed)",
		Args:  exactArgs("DLQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			res, err := a.browse(ctx, cl, args[0], b)
			if err != nil {
				return err
			}
			if class != "" {
				var keep []rabbitmq.Message
				for _, m := range res.Messages {
					if m.Class == class {
						keep = append(keep, m)
					}
				}
				res.Messages = keep
			}
			if res.Messages == nil {
				res.Messages = []rabbitmq.Message{}
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, res)
			}
			for _, m := range res.Messages {
				fmt.Fprintf(a.stdout, "#%d event %s (%s) class %s redelivered=%v\n", m.Position, sanitize.Text(m.EventID), m.EventIDSource, m.Class, m.Redelivered)
				for i, d := range m.Death.Deaths {
					at := "?"
					if d.Time != nil {
						at = d.Time.Format(time.RFC3339)
					}
					fmt.Fprintf(a.stdout, "  death[%d] %s x%d in %s via %q %v at %s\n", i, sanitize.Text(d.Reason), d.Count, sanitize.Text(d.Queue), sanitize.Text(d.Exchange), sanitize.Text(strings.Join(d.RoutingKeys, ",")), at)
				}
				if m.Death.DeliveryCount != nil {
					fmt.Fprintf(a.stdout, "  x-delivery-count %d\n", *m.Death.DeliveryCount)
				}
				for _, k := range sortedKeys(m.Headers) {
					if strings.HasPrefix(k, "x-death") {
						continue
					}
					fmt.Fprintf(a.stdout, "  %s: %s\n", sanitize.Text(k), sanitize.Text(m.Headers[k]))
				}
				fmt.Fprintf(a.stdout, "  body: %s\n", sanitize.Payload(m.Body))
			}
			a.browseNotes(res)
			return nil
		},
	}
	b.add(c)
	c.Flags().StringVar(&class, "class", "", "only messages of this class")
	return c
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ledger opens the RabbitMQ redrive ledger: redrive.store_dsn, else an
// SQLite file in the data directory.
func (a *app) ledger(ctx context.Context) (*rabbitmq.Ledger, error) {
	dsn := a.cfg.Redrive.StoreDSN
	if dsn == "" {
		dsn = filepath.Join(config.DataHome(), "rabbitmq-redrive.db")
		if err := os.MkdirAll(filepath.Dir(dsn), 0o700); err != nil {
			return nil, fmt.Errorf("ledger: %v", err)
		}
	}
	return rabbitmq.OpenLedger(ctx, dsn)
}

func policySnapshot(p config.RedrivePolicy, matched bool) redrive.PolicySnapshot {
	s := redrive.PolicySnapshot{IdempotencyKey: p.IdempotencyKey, RequireIdempotencyKey: p.RequireIdempotencyKey, Review: p.Review, Approvals: p.Approvals, MaxRedrives: p.MaxRedrives}
	if matched {
		s.Match = p.Match
	}
	if s.IdempotencyKey == "" {
		s.IdempotencyKey = redrive.DefaultEventID
	}
	if s.Review == "" {
		s.Review = "none"
	}
	if p.SystemOfRecord != nil {
		s.SystemOfRecord = sor.Describe(*p.SystemOfRecord)
	}
	return s
}

type qPlanSummary struct {
	Plan    string                `json:"plan"`
	File    string                `json:"file"`
	DLQ     string                `json:"dlq"`
	Records []rabbitmq.PlanRecord `json:"records"`
	Totals  map[string]int        `json:"totals"`
}

func (a *app) newQRedrivePlan() *cobra.Command {
	var b browseFlags
	var sel rabbitmq.Selection
	var out string
	var rate, window int
	var keyFile string
	var toQueue bool
	c := &cobra.Command{
		Use:   "plan DLQ --out FILE",
		Short: "Select dead letters and check them into a redrive plan (nothing is sent)",
		Args:  exactArgs("DLQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			if out == "" {
				return usageErr("--out: required (the plan file to write)")
			}
			if sel.Empty() {
				return usageErr("selection: give --class, --event-id, --reason, --original-queue or --all")
			}
			if rate < 0 || window < 0 {
				return usageErr("--rate and --window must not be negative")
			}
			dlq := args[0]
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*a.timeout)
			defer cancel()
			cl, err := a.rabbitClient(ctx)
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := a.browse(ctx, cl, dlq, b)
			if err != nil {
				return err
			}
			if !res.Complete {
				fmt.Fprintf(a.stderr, "note: only the first %d messages were read (raise --limit to plan over more)\n", len(res.Messages))
			}
			l, err := a.ledger(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			in := rabbitmq.CheckInput{}
			if in.Redriven, err = l.Redriven(ctx, cl.Vhost(), dlq); err != nil {
				return err
			}
			pol, matched := a.cfg.RedrivePolicyFor(dlq)
			if pol.SystemOfRecord != nil {
				in.HasSOR = true
				var keys []string
				for _, m := range res.Messages {
					if m.IdempotencyKey != "" && sel.Matches(m) {
						keys = append(keys, m.IdempotencyKey)
					}
				}
				look, err := sor.Open(ctx, *pol.SystemOfRecord)
				if err == nil {
					in.Committed, err = look.Committed(ctx, keys)
					look.Close()
				}
				in.SORErr = err
			}
			p, err := rabbitmq.MakePlan(res.Messages, sel, policySnapshot(pol, matched), in, time.Now())
			if err != nil {
				return usageErr("%v", err)
			}
			p.Server, p.Vhost, p.DLQ, p.QueueType = cl.AMQPAddr(), cl.Vhost(), dlq, res.Type
			p.Rate, p.Window, p.AcceptQuorumSideEffects = rate, window, b.accept
			if toQueue {
				p.ToQueues()
			}
			p.Author = audit.CurrentUser()
			var signer ssh.Signer
			if keyFile != "" {
				if signer, err = approval.LoadSigner(keyFile); err != nil {
					return usageErr("--key: %v", err)
				}
			}
			if err := rabbitmq.WritePlan(out, p); err != nil {
				return fmt.Errorf("--out %s: %v", out, err)
			}
			if signer != nil {
				sig, err := approval.Sign(p.Hash(), signer, approval.RoleAuthor, time.Now())
				if err == nil {
					err = l.AddSignature(ctx, sig)
				}
				if err != nil {
					return fmt.Errorf("signing the plan: %v", err)
				}
			}
			a.auditRMQ(ctx, "redrive.plan", p.Hash(), map[string]any{"dlq": dlq, "vhost": p.Vhost, "totals": p.Totals(), "file": out})
			sum := qPlanSummary{Plan: p.Hash(), File: out, DLQ: dlq, Records: p.Records, Totals: p.Totals()}
			if sum.Records == nil {
				sum.Records = []rabbitmq.PlanRecord{}
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, sum)
			}
			g := output.Grid{Header: []string{"POS", "EVENT", "CLASS", "TARGET", "INCLUDED", "REASON"}}
			for _, r := range p.Records {
				g.Add(fmt.Sprint(r.Position), r.EventID, r.Class, fmt.Sprintf("%q %s", r.Exchange, r.RoutingKey), fmt.Sprint(r.Included), string(r.Verdict.Reason))
			}
			if err := g.WriteTable(a.stdout); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "plan %s written to %s: %v\n", p.Hash(), out, p.Totals())
			return nil
		},
	}
	b.add(c)
	c.Flags().StringSliceVar(&sel.Classes, "class", nil, "select messages of these classes")
	c.Flags().StringSliceVar(&sel.EventIDs, "event-id", nil, "select these event ids")
	c.Flags().StringSliceVar(&sel.Reasons, "reason", nil, "select by death reason (rejected, expired, maxlen, delivery_limit)")
	c.Flags().StringSliceVar(&sel.OriginalQueues, "original-queue", nil, "select by the queue they died in")
	c.Flags().BoolVar(&sel.All, "all", false, "select every message read (must be said explicitly)")
	c.Flags().StringVar(&out, "out", "", "plan file to write")
	c.Flags().IntVar(&rate, "rate", 0, "messages per second when executing (0: unlimited)")
	c.Flags().IntVar(&window, "window", 500, "publishes awaiting confirms at once")
	c.Flags().StringVar(&keyFile, "key", "", "SSH private key to sign the plan as its author")
	c.Flags().BoolVar(&toQueue, "to-queue", false, "send each message to the queue it died in (default exchange) instead of its original exchange and routing key")
	return c
}

func (a *app) newQRedriveApprove() *cobra.Command {
	var keyFile string
	c := &cobra.Command{
		Use:   "approve PLAN --key FILE",
		Short: "Approve a RabbitMQ plan with an SSH signature over its hash",
		Args:  exactArgs("PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return usageErr("--key: required (the approver's SSH private key)")
			}
			p, err := rabbitmq.ReadPlan(args[0])
			if err != nil {
				return err
			}
			signer, err := approval.LoadSigner(keyFile)
			if err != nil {
				return usageErr("--key: %v", err)
			}
			ctx, cancel := a.opCtx(cmd.Context())
			defer cancel()
			l, err := a.ledger(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			sig, err := approval.Sign(p.Hash(), signer, approval.RoleApproval, time.Now())
			if err != nil {
				return err
			}
			if err := l.AddSignature(ctx, sig); err != nil {
				return err
			}
			a.auditRMQ(ctx, "redrive.approve", p.Hash(), map[string]any{"dlq": p.DLQ, "fingerprint": sig.Fingerprint})
			fmt.Fprintf(a.stdout, "approved plan %s with %s\n", p.Hash(), sig.Fingerprint)
			return nil
		},
	}
	c.Flags().StringVar(&keyFile, "key", "", "the approver's SSH private key")
	return c
}

// approvalDecision applies the two-person rule to a plan whose policy (as
// planned, or as configured now: the stricter) requires review.
func (a *app) approvalDecision(ctx context.Context, l *rabbitmq.Ledger, p rabbitmq.Plan) (approval.Decision, bool, error) {
	pol, _ := a.cfg.RedrivePolicyFor(p.DLQ)
	required := p.Policy.Review == "required" || pol.Review == "required"
	if !required {
		return approval.Decision{Approved: true}, false, nil
	}
	n := max(p.Policy.Approvals, pol.Approvals, 1)
	if pol.AllowedSigners == "" {
		return approval.Decision{Required: n, Reason: "the policy requires review but names no allowed_signers"}, true, nil
	}
	signers, err := approval.LoadAllowedSigners(pol.AllowedSigners)
	if err != nil {
		return approval.Decision{}, true, err
	}
	author, approvals, err := l.Signatures(ctx, p.Hash())
	if err != nil {
		return approval.Decision{}, true, err
	}
	return approval.Evaluate(p.Hash(), author, approvals, signers, n, time.Now()), true, nil
}

func (a *app) newQRedriveExecute() *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:   "execute PLAN",
		Short: "Redrive a plan: dry run unless --yes; refused in read-only contexts",
		Args:  exactArgs("PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			p, err := rabbitmq.ReadPlan(args[0])
			if err != nil {
				return err
			}
			if a.readOnly {
				a.auditRMQ(cmd.Context(), "redrive.refused", p.Hash(), map[string]any{"reason": "read-only"})
				return errReadOnly
			}
			if age := time.Since(p.CreatedAt); age > a.cfg.Redrive.PlanMaxAge {
				return fmt.Errorf("refused: plan %s is %s old (redrive.plan_max_age %s): make a new one", p.Hash()[:12], age.Round(time.Minute), a.cfg.Redrive.PlanMaxAge)
			}
			{
				ctx, cancel := a.opCtx(cmd.Context())
				l, err := a.ledger(ctx)
				if err != nil {
					cancel()
					return err
				}
				d, required, err := a.approvalDecision(ctx, l, p)
				l.Close()
				cancel()
				if err != nil {
					return err
				}
				if required && !d.Approved {
					why := d.Reason
					if len(d.Refused) > 0 {
						why += " (" + strings.Join(d.Refused, "; ") + ")"
					}
					a.auditRMQ(cmd.Context(), "redrive.refused", p.Hash(), map[string]any{"reason": "not approved", "decision": d})
					return fmt.Errorf("refused: plan %s is not approved: %s", p.Hash()[:12], why)
				}
			}
			totals := p.Totals()
			if !yes {
				if f == output.JSON {
					return output.WriteJSON(a.stdout, map[string]any{"dry_run": true, "plan": p.Hash(), "dlq": p.DLQ, "totals": totals})
				}
				fmt.Fprintf(a.stdout, "dry run: plan %s would redrive %d message(s) from %s (%v); run again with --yes to send\n", p.Hash(), totals["included"], p.DLQ, totals)
				return nil
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			dctx, dcancel := a.opCtx(ctx)
			cl, err := a.rabbitClient(dctx)
			dcancel()
			if err != nil {
				return err
			}
			defer cl.Close()
			if cl.AMQPAddr() != p.Server {
				return fmt.Errorf("refused: plan %s was made on %s, this context is %s", p.Hash()[:12], p.Server, cl.AMQPAddr())
			}
			l, err := a.ledger(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			pol, _ := a.cfg.RedrivePolicyFor(p.DLQ)
			a.auditRMQ(ctx, "redrive.execute", p.Hash(), map[string]any{"dlq": p.DLQ, "totals": totals, "phase": "start"})
			start := time.Now()
			res, err := cl.Execute(ctx, p, l, rabbitmq.ExecOptions{StopOnFailure: pol.StopOnFailure, Progress: func(r rabbitmq.Result) {
				fmt.Fprintf(a.stderr, "progress: sent %d, already sent %d, failed %d of %d (%.0f msg/s)\n", r.Sent, r.AlreadySent, len(r.Failed), totals["included"], float64(r.Sent)/time.Since(start).Seconds())
			}})
			a.auditRMQ(ctx, "redrive.execute", p.Hash(), map[string]any{"dlq": p.DLQ, "phase": "end", "sent": res.Sent, "already_sent": res.AlreadySent, "failed": len(res.Failed), "not_found": len(res.NotFound), "error": errString(err)})
			if f == output.JSON {
				if werr := output.WriteJSON(a.stdout, res); werr != nil {
					return werr
				}
			} else {
				fmt.Fprintf(a.stdout, "plan %s: sent %d (resent %d), already sent %d, excluded %d, failed %d, not found %d, passed over %d\n", p.Hash()[:12], res.Sent, res.Resent, res.AlreadySent, res.Excluded, len(res.Failed), len(res.NotFound), res.Passed)
				for _, fl := range res.Failed {
					fmt.Fprintf(a.stdout, "  failed %s -> %q %s: %s\n", sanitize.Text(fl.EventID), sanitize.Text(fl.Exchange), sanitize.Text(fl.RoutingKey), sanitize.Text(fl.Error))
				}
				if res.Stopped != "" {
					fmt.Fprintln(a.stdout, "stopped: "+res.Stopped)
				}
			}
			if err != nil {
				return err
			}
			if len(res.Failed) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d message(s) failed and stay in %s", len(res.Failed), p.DLQ), silent: false}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "send (without it, a dry run)")
	return c
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (a *app) newQRedriveStatus() *cobra.Command {
	return &cobra.Command{
		Use:   "status [PLAN]",
		Short: "Ledger of RabbitMQ redrives: counts by state per plan",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx(cmd.Context())
			defer cancel()
			plan := ""
			if len(args) == 1 {
				plan = args[0]
				if p, err := rabbitmq.ReadPlan(args[0]); err == nil {
					plan = p.Hash()
				}
			}
			l, err := a.ledger(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			es, err := l.Entries(ctx, plan)
			if err != nil {
				return err
			}
			type row struct {
				Plan      string `json:"plan"`
				DLQ       string `json:"dlq"`
				Vhost     string `json:"vhost"`
				Intent    int    `json:"intent"`
				Confirmed int    `json:"confirmed"`
				Failed    int    `json:"failed"`
			}
			by := map[string]*row{}
			var order []string
			for _, e := range es {
				r, ok := by[e.Plan]
				if !ok {
					r = &row{Plan: e.Plan, DLQ: e.DLQ, Vhost: e.Vhost}
					by[e.Plan] = r
					order = append(order, e.Plan)
				}
				switch e.State {
				case rabbitmq.StateIntent:
					r.Intent++
				case rabbitmq.StateConfirmed:
					r.Confirmed++
				case rabbitmq.StateFailed:
					r.Failed++
				}
			}
			rows := []row{}
			for _, p := range order {
				rows = append(rows, *by[p])
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, rows)
			}
			g := output.Grid{Header: []string{"PLAN", "VHOST", "DLQ", "CONFIRMED", "INTENT (may need resend)", "FAILED"}, Right: map[int]bool{3: true, 4: true, 5: true}}
			for _, r := range rows {
				g.Add(r.Plan[:min(12, len(r.Plan))], r.Vhost, r.DLQ, fmt.Sprint(r.Confirmed), fmt.Sprint(r.Intent), fmt.Sprint(r.Failed))
			}
			return g.WriteTable(a.stdout)
		},
	}
}

// auditRMQ appends to the audit log; a failure to audit is reported, not hidden.
func (a *app) auditRMQ(ctx context.Context, action, target string, details map[string]any) {
	log, err := audit.Open(a.auditPath(""))
	if err == nil {
		_, err = log.Append(ctx, audit.Entry{Action: action, Context: a.ctxName, Target: target, Details: details})
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "warning: audit log: %v\n", err)
	}
}
