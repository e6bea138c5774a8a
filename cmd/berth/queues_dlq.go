package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/internal/savefile"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

// RabbitMQ dead letters and redrive. `berth dlq list|classes|show` and
// `berth redrive plan|show|approve|execute|status` dispatch here on a
// rabbitmq context (dlq.go, redrive.go, redrive_exec.go), with the same
// flags where they mean the same thing and the same JSON field names where
// the meaning is the same. `berth queues dlq` and `berth queues redrive`
// (their first home) remain as hidden pointers to the shared commands.

// isRabbit reports whether the current context is RabbitMQ.
func (a *app) isRabbit() bool { return a.ctx.Kind == "rabbitmq" }

// onlyFor refuses flags that have no meaning for the current backend,
// naming the flag and what to use instead.
func onlyFor(cmd *cobra.Command, backend string, why map[string]string) error {
	names := make([]string, 0, len(why))
	for n := range why {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && f.Changed {
			return usageErr("--%s: %s only (%s)", n, backend, why[n])
		}
	}
	return nil
}

// addQueueSubcommands hangs hidden pointers under `berth queues`: the
// dead-letter and redrive commands are `berth dlq` and `berth redrive` for
// every backend.
func addQueueSubcommands(a *app, queues *cobra.Command) {
	for _, name := range []string{"dlq", "redrive"} {
		name := name
		queues.AddCommand(&cobra.Command{
			Use: name, Hidden: true, DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error {
				return usageErr("berth queues %s is now berth %s (same commands and flags for RabbitMQ and Kafka)", name, name)
			},
		})
	}
}

// browseFlags are the RabbitMQ-only flags of the commands that read a DLQ.
type browseFlags struct {
	typ    string
	accept bool
}

func (b *browseFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&b.typ, "queue-type", "", "RabbitMQ: the DLQ's type when there is no management API (classic|quorum|stream)")
	c.Flags().BoolVar(&b.accept, "accept-requeue-side-effects", false, "RabbitMQ quorum DLQs: accept that reading moves each message to the back and adds 1 to its delivery count")
}

// kafkaRejectsBrowse refuses the RabbitMQ browse flags on a Kafka context.
func kafkaRejectsBrowse(cmd *cobra.Command) error {
	return onlyFor(cmd, "RabbitMQ", map[string]string{
		"queue-type":                  "Kafka topics have no queue type",
		"accept-requeue-side-effects": "reading a Kafka topic has no side effect",
	})
}

// rabbitReadLimit is the browse bound: the flag when given, else 1,000
// (Kafka's default of 10,000 would hold a classic queue up for seconds).
func rabbitReadLimit(cmd *cobra.Command, flag string, v int) (int, error) {
	if !cmd.Flags().Changed(flag) {
		return rabbitDefaultRead, nil
	}
	if v < 1 {
		return 0, usageErr("--%s: must be at least 1", flag)
	}
	return v, nil
}

const rabbitDefaultRead = 1000

func (a *app) extractorsFor(dlq string) rabbitmq.Extractors {
	return a.rabbitRedrive().Extractors(dlq)
}

// check refuses a --queue-type that is not a queue type.
func (b browseFlags) check() error {
	switch b.typ {
	case "", "classic", "quorum", "stream":
		return nil
	}
	return usageErr("--queue-type: %q is not classic, quorum or stream", b.typ)
}

func (a *app) browse(ctx context.Context, cl *rabbitmq.Client, dlq string, limit int, b browseFlags) (rabbitmq.BrowseResult, error) {
	return a.browseEach(ctx, cl, dlq, limit, b, nil)
}

// browseEach is browse handing each message to each instead of keeping
// them in the result (Browse when each is nil).
func (a *app) browseEach(ctx context.Context, cl *rabbitmq.Client, dlq string, limit int, b browseFlags, each func(rabbitmq.Message) error) (rabbitmq.BrowseResult, error) {
	if err := b.check(); err != nil {
		return rabbitmq.BrowseResult{}, err
	}
	if b.accept && a.readOnly {
		// Browsing a quorum queue returns each message, which raises its
		// delivery count (and can dead-letter it at the delivery limit):
		// a write, refused like any other.
		return rabbitmq.BrowseResult{}, a.readOnlyErr(fmt.Errorf("%w: --accept-requeue-side-effects raises delivery counts on the server", errReadOnly))
	}
	if each == nil {
		return a.rabbitRedrive().Browse(ctx, cl, dlq, limit, b.typ, b.accept)
	}
	return a.rabbitRedrive().BrowseEach(ctx, cl, dlq, limit, b.typ, b.accept, each)
}

// browseDLQ is the set-up every RabbitMQ DLQ browse from the command line
// shares (dlq classes, dlq show, dlq show --save-value): the read limit
// from flag (n unless given), a client within the command's timeout, and
// the browse. release closes the client and ends ctx, which stays usable for
// the caller's further look-ups (the ledger) until then. With each, the
// messages go to it one by one and the result holds none.
func (a *app) browseDLQ(cmd *cobra.Command, dlq, flag string, n int, b browseFlags, each func(rabbitmq.Message) error) (ctx context.Context, res rabbitmq.BrowseResult, release func(), err error) {
	if n, err = rabbitReadLimit(cmd, flag, n); err != nil {
		return nil, res, nil, err
	}
	ctx, cancel := a.opCtx(cmd.Context())
	cl, err := a.rabbitClient(ctx)
	if err != nil {
		cancel()
		return nil, res, nil, err
	}
	release = func() { cl.Close(); cancel() }
	if res, err = a.browseEach(ctx, cl, dlq, n, b, each); err != nil {
		release()
		return nil, res, nil, err
	}
	return ctx, res, release, nil
}

func (a *app) browseNotes(res rabbitmq.BrowseResult) {
	fmt.Fprintf(a.stderr, "read %d message(s) by %s", res.Read, res.Method)
	if !res.Complete {
		fmt.Fprint(a.stderr, " (more remain: raise --read/--limit)")
	}
	fmt.Fprintln(a.stderr)
	for _, s := range res.SideEffects {
		fmt.Fprintln(a.stderr, "side effect: "+s)
	}
	if res.Unseen != nil {
		fmt.Fprintln(a.stderr, "note: "+res.Unseen.String())
	}
}

// ---- berth dlq list ----

type qdlqRow struct {
	DLQ   string `json:"dlq"`
	Vhost string `json:"vhost"`
	Type  string `json:"type"`
	// Found is "wiring" (dead-letter exchange bindings) or "config".
	Found string `json:"found"`
	// OriginalQueues dead-letter into this DLQ (Kafka: original_topics).
	OriginalQueues []string `json:"original_queues"`
	Depth          *int64   `json:"depth"`
	// DepthSource is "management" (ready + unacked) or "passive_declare"
	// (ready only: the management API had no statistics yet, or is absent).
	DepthSource string `json:"depth_source,omitempty"`
	// HeadAgeSeconds is from the head message's publisher timestamp (not
	// its death time), null when RabbitMQ does not report one.
	HeadAgeSeconds *float64 `json:"head_publisher_age_seconds"`
}

func (a *app) rmqDLQList(cmd *cobra.Command) error {
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
	rows, err := a.rmqDLQRows(ctx, cl)
	if err != nil {
		return err
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.stdout, "no dead-letter queues (none is wired as a dead-letter target, and redrive.dlqs names none)")
		return nil
	}
	g := output.Grid{Header: []string{"VHOST", "DLQ", "TYPE", "DEPTH", "HEAD AGE (publisher ts)", "FOUND", "ORIGINAL QUEUES"}, Right: map[int]bool{3: true, 4: true}}
	for _, r := range rows {
		age := "?"
		if r.HeadAgeSeconds != nil {
			age = fmtSeconds(*r.HeadAgeSeconds)
		}
		g.Add(r.Vhost, r.DLQ, orQ(r.Type), optInt(r.Depth), age, r.Found, strings.Join(r.OriginalQueues, ","))
	}
	return g.WriteTable(a.stdout)
}

// rmqDLQRows lists the DLQs with depth and head age (reading no message),
// for `berth dlq list` and the console's :dlq.
func (a *app) rmqDLQRows(ctx context.Context, cl *rabbitmq.Client) ([]qdlqRow, error) {
	dlqs, err := cl.DLQs(ctx, a.cfg.Redrive.DLQs)
	if err != nil {
		return nil, err
	}
	rows := []qdlqRow{}
	for _, d := range dlqs {
		r := qdlqRow{DLQ: d.Name, Vhost: d.Vhost, Type: d.Type, Found: d.Found, OriginalQueues: d.Sources}
		if r.OriginalQueues == nil {
			r.OriginalQueues = []string{}
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
	return rows, nil
}

// ---- berth dlq classes ----

type qClassRow struct {
	Class         string    `json:"class"`
	Count         int       `json:"count"`
	OriginalQueue string    `json:"original_queue"`
	Reason        string    `json:"reason"`
	Pattern       string    `json:"pattern"`
	Transient     bool      `json:"transient"`
	Verdict       string    `json:"verdict"`
	FirstSeen     time.Time `json:"first_seen"`
	LastSeen      time.Time `json:"last_seen"`
}

func (a *app) rmqDLQClasses(cmd *cobra.Command, dlq string, limit int, b browseFlags) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	// Judged by the configured rules, then the defaults (as for Kafka).
	rules, err := a.rabbitRedrive().Rules()
	if err != nil {
		return err
	}
	// Counted as read: the messages are not kept.
	tally := rabbitmq.NewClassTally(rules)
	_, res, release, err := a.browseDLQ(cmd, dlq, "limit", limit, b, func(m rabbitmq.Message) error {
		tally.Add(m)
		return nil
	})
	if err != nil {
		return err
	}
	defer release()
	rows := []qClassRow{}
	for _, k := range tally.Classes() {
		rows = append(rows, qClassRow{Class: k.ID, Count: k.Count, OriginalQueue: sanitize.Text(k.OriginalTopic), Reason: sanitize.Text(k.Exception),
			Pattern: sanitize.Text(k.Pattern), Transient: k.Transient, Verdict: k.Verdict, FirstSeen: k.FirstSeen, LastSeen: k.LastSeen})
	}
	a.browseNotes(res)
	if t := tally.OldestDeath(); t != nil {
		fmt.Fprintf(a.stderr, "oldest death %s (%s ago)\n", t.UTC().Format(time.RFC3339), durations.Format(time.Since(*t)))
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, rows)
	}
	g := output.Grid{Header: []string{"CLASS", "COUNT", "VERDICT", "ORIGINAL QUEUE", "REASON", "FIRST SEEN", "LAST SEEN", "ERROR PATTERN"}, Right: map[int]bool{1: true}}
	for _, r := range rows {
		g.Add(r.Class, fmt.Sprint(r.Count), r.Verdict, r.OriginalQueue, r.Reason, r.FirstSeen.UTC().Format(time.DateTime), r.LastSeen.UTC().Format(time.DateTime), clip(r.Pattern, 80))
	}
	return g.WriteTable(a.stdout)
}

// ---- berth dlq show ----

// qMessageView is a DLQ message fit to print, with Kafka's record field
// names where they mean the same (event_id, class, headers, value...).
type qMessageView struct {
	Position           int                `json:"position"`
	PublisherTimestamp *time.Time         `json:"publisher_timestamp"`
	MessageID          string             `json:"message_id,omitempty"`
	CorrelationID      string             `json:"correlation_id,omitempty"`
	ContentType        string             `json:"content_type,omitempty"`
	EventID            string             `json:"event_id"`
	EventIDSource      string             `json:"event_id_source"`
	IdempotencyKey     string             `json:"idempotency_key"`
	OrderingKey        string             `json:"ordering_key,omitempty"`
	Class              string             `json:"class"`
	OriginalQueue      string             `json:"original_queue"`
	Reason             string             `json:"reason"`
	Error              string             `json:"error,omitempty"`
	Death              rabbitmq.DeathInfo `json:"death"`
	Redelivered        bool               `json:"redelivered"`
	PriorRedrives      int                `json:"prior_redrives"`
	Redriven           bool               `json:"redriven_or_settled"`
	Headers            []headerView       `json:"headers"`
	Value              string             `json:"value,omitempty"`
	ValueHex           string             `json:"value_hex,omitempty"`
	Binary             bool               `json:"value_binary"`
	ValueBytes         int                `json:"value_bytes"`
}

func viewMessage(m rabbitmq.Message, done bool) qMessageView {
	v := qMessageView{
		Position: m.Position, PublisherTimestamp: m.Timestamp, MessageID: sanitize.Text(m.MessageID), CorrelationID: sanitize.Text(m.CorrelationID),
		ContentType: sanitize.Text(m.ContentType), EventID: sanitize.Text(m.EventID), EventIDSource: m.EventIDSource,
		IdempotencyKey: sanitize.Text(m.IdempotencyKey), OrderingKey: sanitize.Text(m.OrderingKey), Class: m.Class,
		OriginalQueue: sanitize.Text(m.Death.OriginalQueue()), Reason: sanitize.Text(m.Death.Reason()), Error: clip(sanitize.Text(m.ErrorHeader), maxHeaderText),
		Death: m.Death, Redelivered: m.Redelivered, PriorRedrives: m.PriorRedrives, Redriven: done,
		Headers: []headerView{}, ValueBytes: len(m.Body),
	}
	for _, k := range sortedKeys(m.Headers) {
		if strings.HasPrefix(k, "x-death") {
			continue // shown parsed in death
		}
		val := []byte(m.Headers[k])
		hv := headerView{Key: sanitize.Text(k)}
		if sanitize.IsBinary(val) {
			hv.Binary, hv.ValueHex = true, hex.EncodeToString(val)
		} else {
			hv.Value = clip(sanitize.Bytes(val), maxHeaderText)
		}
		v.Headers = append(v.Headers, hv)
	}
	if sanitize.IsBinary(m.Body) {
		v.Binary, v.ValueHex = true, hex.EncodeToString(m.Body)
	} else {
		v.Value = sanitize.Bytes(m.Body)
	}
	return v
}

func (a *app) rmqDLQShow(cmd *cobra.Command, dlq string, classes []string, limit, read int, b browseFlags) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	if limit < 1 {
		return usageErr("--limit: must be at least 1")
	}
	want := map[string]bool{}
	for _, c := range classes {
		want[c] = true
	}
	// Read as a stream: only the first --limit messages shown are kept
	// (and the classes seen, to name a --class that matched none).
	known := map[string]bool{}
	var shown []rabbitmq.Message
	ctx, res, release, err := a.browseDLQ(cmd, dlq, "read", read, b, func(m rabbitmq.Message) error {
		known[m.Class] = true
		if len(shown) < limit && (len(want) == 0 || want[m.Class]) {
			shown = append(shown, m)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer release()
	for _, c := range classes {
		if !known[c] {
			return usageErr("--class %s: no such class among the %d messages read from %s (see berth dlq classes %s)", c, res.Read, sanitize.Text(dlq), sanitize.Text(dlq))
		}
	}
	l, err := a.ledger(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	done, err := l.RedrivenAmong(ctx, shown)
	if err != nil {
		return err
	}
	views := []qMessageView{}
	for _, m := range shown {
		_, d := done[m.EventID]
		views = append(views, viewMessage(m, d))
	}
	a.browseNotes(res)
	if f == output.JSON {
		return output.WriteJSON(a.stdout, views)
	}
	for i, m := range views {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		state := "pending"
		if m.Redriven {
			state = "redriven"
		}
		fmt.Fprintf(a.stdout, "%s #%d  event %s (%s)  class %s  %s  redelivered=%v\n", sanitize.Text(dlq), m.Position, m.EventID, m.EventIDSource, m.Class, state, m.Redelivered)
		for i, d := range m.Death.Deaths {
			at := "?"
			if d.Time != nil {
				at = d.Time.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(a.stdout, "  death[%d] %s x%d in %s via %q %v at %s\n", i, sanitize.Text(d.Reason), d.Count, sanitize.Text(d.Queue), sanitize.Text(d.Exchange), sanitize.Text(strings.Join(d.RoutingKeys, ",")), at)
		}
		if m.Death.DeliveryCount != nil {
			fmt.Fprintf(a.stdout, "  x-delivery-count %d\n", *m.Death.DeliveryCount)
		}
		fmt.Fprintf(a.stdout, "  idempotency key %s  prior redrives %d\n", dashIfEmpty(m.IdempotencyKey), m.PriorRedrives)
		for _, h := range m.Headers {
			if h.Binary {
				fmt.Fprintf(a.stdout, "  %s = hex:%s\n", h.Key, h.ValueHex)
			} else {
				fmt.Fprintf(a.stdout, "  %s = %s\n", h.Key, clip(h.Value, 160))
			}
		}
		fmt.Fprintf(a.stdout, "  payload (%d bytes):\n", m.ValueBytes)
		body := m.Value
		if m.Binary {
			body = "hex:" + m.ValueHex
		}
		for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
			fmt.Fprintf(a.stdout, "    %s\n", line)
		}
	}
	if len(views) == 0 {
		fmt.Fprintln(a.stdout, "no messages")
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- the store: ledger, signatures and plans ----

// ledger opens the RabbitMQ redrive store: redrive.store_dsn, else an
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

// rmqOpenPlan opens the redrive store and loads the plan ref names (see
// rmqLoadPlan); the caller closes the ledger when err is nil. With store,
// a plan file is imported (actions.RabbitRedrive.ImportFile: checked
// against the cluster, then stored so other operators find it by hash, as
// approve and execute do for Kafka) over cl, or over a connection of its
// own when cl is nil.
func (a *app) rmqOpenPlan(ctx context.Context, ref string, store bool, cl *rabbitmq.Client) (*rabbitmq.Ledger, redrive.QueuePlan, string, error) {
	l, err := a.ledger(ctx)
	if err != nil {
		return nil, redrive.QueuePlan{}, "", err
	}
	p, where, err := a.rmqLoadPlan(ctx, l, ref, store, cl)
	if err != nil {
		l.Close()
		return nil, p, where, err
	}
	return l, p, where, nil
}

// rmqLoadPlan reads a plan file, imported into l with store (see
// rmqOpenPlan; given cl without store, checked as an import but not
// stored: a dry run), or finds one in the store by a hash prefix.
func (a *app) rmqLoadPlan(ctx context.Context, l *rabbitmq.Ledger, ref string, store bool, cl *rabbitmq.Client) (redrive.QueuePlan, string, error) {
	if isPlanFile(ref) {
		fh, err := openPlanFile(ref, maxQueuePlanFile)
		if err != nil {
			return redrive.QueuePlan{}, ref, fmt.Errorf("plan %s: %w", ref, err)
		}
		defer fh.Close()
		// Read a row at a time; a read error is said as it is, not as a
		// malformed plan.
		raw := &firstReadError{r: fh}
		readErr := func(p redrive.QueuePlan, err error) (redrive.QueuePlan, string, error) {
			if raw.err != nil {
				return redrive.QueuePlan{}, ref, fmt.Errorf("plan %s: %w", ref, raw.err)
			}
			return p, ref, err
		}
		if !store && cl == nil {
			// show and status: read, never stored.
			return readErr(actions.DecodeQueuePlanFile(ref, raw))
		}
		if cl == nil {
			if cl, err = a.rabbitClient(ctx); err != nil {
				return redrive.QueuePlan{}, ref, err
			}
			defer cl.Close()
		}
		return readErr(a.rabbitRedrive().ImportFile(ctx, cl, l, ref, raw, store))
	}
	if !isHexPrefix(ref) {
		return redrive.QueuePlan{}, "", notAPlanRef(ref)
	}
	p, err := l.Plan(ctx, ref)
	return p, "", err
}

// ---- berth redrive plan / show ----

// qPlanSummary is a RabbitMQ plan as `redrive plan` and `redrive show`
// print it: Kafka's field names where they mean the same.
type qPlanSummary struct {
	Hash      string `json:"hash"`
	File      string `json:"file,omitempty"`
	DLQ       string `json:"dlq"`
	Vhost     string `json:"vhost"`
	QueueType string `json:"queue_type"`
	planFacts
	Records qPlanRows      `json:"records"`
	Totals  redrive.Totals `json:"totals"`
	// Review is what a reviewer signs, derived from the messages: counts
	// per target and the included messages' idempotency keys.
	Review *qPlanReview `json:"review,omitempty"`
}

// qPlanReview is actions.RabbitSummary sanitised for output, with Kafka's
// review field names; changed and gone name event ids.
type qPlanReview struct {
	Cluster string                `json:"cluster"`
	Targets []actions.TargetCount `json:"targets"`
	Keys    []string              `json:"idempotency_keys"`
	Changed []string              `json:"changed"`
	Gone    []string              `json:"gone"`
	// NotVisible were not found while other consumers held messages of
	// the DLQ unacknowledged (a browse cannot see those): not called gone.
	NotVisible []string `json:"not_visible"`
	// AlreadySent counts the messages not found that this plan sent (the
	// ledger has them confirmed): neither gone nor not visible.
	AlreadySent int `json:"already_sent"`
	// Unseen says in one line what the review could not see and why.
	Unseen string `json:"unseen,omitempty"`
	// Complete is false when the DLQ holds more than was read: a message
	// not found may lie past it.
	Complete bool `json:"complete"`
	// Warnings (sanitised) go to the summary's top-level warnings
	// (setReview), as on Kafka.
	Warnings []string `json:"-"`
}

// setReview sets a plan summary's review and the warnings derived with it
// (none when the messages were not read).
func (s *qPlanSummary) setReview(r *qPlanReview) {
	s.Review = r
	if r != nil {
		s.Warnings = r.Warnings
	}
}

func rabbitReviewOf(s actions.RabbitSummary, cluster string) *qPlanReview {
	r := &qPlanReview{Cluster: sanitize.Text(cluster), Targets: s.Targets, Keys: make([]string, len(s.Keys)), Changed: make([]string, len(s.Changed)), Gone: make([]string, len(s.Gone)), NotVisible: []string{}, Complete: true}
	for i := range r.Targets {
		r.Targets[i].Target = sanitize.Text(r.Targets[i].Target)
	}
	for i, k := range s.Keys {
		r.Keys[i] = sanitize.Text(k)
	}
	for i, k := range s.Changed {
		r.Changed[i] = sanitize.Text(k)
	}
	for i, k := range s.Gone {
		r.Gone[i] = sanitize.Text(k)
	}
	return r
}

// rmqDerive fills what a reviewer sees of a stored or file plan from its
// messages as they are now (actions.RabbitRedrive.Derive: one browse of
// the DLQ) and returns the review. A plan of another cluster is refused:
// the messages this one holds say nothing about it. A DLQ that cannot be
// read without side effects (quorum) is not read to review: the review is
// nil and stderr says why.
func (a *app) rmqDerive(ctx context.Context, l *rabbitmq.Ledger, p *redrive.QueuePlan) (*qPlanReview, error) {
	cl, err := a.rabbitClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return a.rmqDeriveWith(ctx, cl, l, p)
}

// rmqDeriveWith is rmqDerive over an open client. With the redrive store
// l (nil: none), the messages the plan already sent are counted as such,
// not called gone.
func (a *app) rmqDeriveWith(ctx context.Context, cl *rabbitmq.Client, l *rabbitmq.Ledger, p *redrive.QueuePlan) (*qPlanReview, error) {
	var led actions.RabbitLedger
	if l != nil {
		led = l
	}
	// Refused for another cluster's plan (actions.ErrClusterMismatch).
	rv, err := a.rabbitRedrive().DeriveReview(ctx, cl, led, p, false)
	var refused *rabbitmq.RefusedError
	if errors.As(err, &refused) {
		fmt.Fprintf(a.stderr, "note: the review is not derived from the messages: %s\n", sanitize.Text(refused.Why))
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := rabbitReviewOf(actions.SummariseRabbit(*p, rv.Changed, rv.Gone), p.Cluster)
	r.Complete, r.Warnings, r.Unseen, r.AlreadySent = rv.Complete, warningsOf(rv.Warnings), sanitize.Text(rv.Unseen), rv.AlreadySent
	for _, id := range rv.NotVisible {
		r.NotVisible = append(r.NotVisible, sanitize.Text(id))
	}
	return r, nil
}

type qPlanRow struct {
	Position       int            `json:"position"`
	EventID        string         `json:"event_id"`
	Included       bool           `json:"included"`
	Reason         redrive.Reason `json:"reason"`
	Detail         string         `json:"detail,omitempty"`
	Class          string         `json:"class"`
	OriginalQueue  string         `json:"original_queue"`
	DeathReason    string         `json:"death_reason"`
	Exchange       string         `json:"exchange"`
	RoutingKey     string         `json:"routing_key"`
	OrderingKey    string         `json:"ordering_key,omitempty"`
	HazardPosition *int           `json:"hazard_position,omitempty"`
}

func (a *app) rmqPlanSummary(ctx context.Context, l *rabbitmq.Ledger, p redrive.QueuePlan) qPlanSummary {
	s := qPlanSummary{Hash: p.Hash(), DLQ: sanitize.Text(p.DLQ), Vhost: sanitize.Text(p.Vhost), QueueType: p.QueueType,
		Totals:    p.Totals(),
		planFacts: planFacts{Target: p.Target, Author: sanitize.Text(p.Author), CreatedAt: p.CreatedAt, Policy: p.Policy, Approvals: []string{}, Warnings: []string{}}}
	if l != nil {
		if au, aps, err := l.Signatures(ctx, s.Hash); err == nil {
			if au != nil {
				s.AuthorKey = au.Fingerprint
			}
			for _, ap := range aps {
				s.Approvals = append(s.Approvals, ap.Fingerprint)
			}
		}
	}
	s.Blocked, s.BlockedReason = p.Blocked()
	s.BlockedReason = sanitize.Text(s.BlockedReason)
	s.Records = qPlanRows{recs: p.Records}
	return s
}

// qPlanRows are a plan's records as output shows them: each row is made
// (and sanitised) when it is written, so a million-record plan is not held
// a second time as rows, nor its JSON as one buffer (writeQJSON).
type qPlanRows struct {
	recs []redrive.QueueRecord
	// mark makes MarshalJSON write rowsMark, where writeQJSON streams the
	// rows.
	mark bool
}

// rowsMark stands for the rows in the JSON writeQJSON writes around them.
const rowsMark = `"\u0000berth-rows\u0000"`

func (rs qPlanRows) len() int { return len(rs.recs) }

func (rs qPlanRows) row(i int) qPlanRow {
	r := rs.recs[i]
	return qPlanRow{Position: r.Position, EventID: sanitize.Text(r.EventID), Included: r.Included, Reason: r.Reason,
		Detail: sanitize.Text(r.Detail), Class: r.Class(), OriginalQueue: sanitize.Text(r.OriginalQueue()), DeathReason: sanitize.Text(r.DeathReason()),
		Exchange: sanitize.Text(r.Exchange()), RoutingKey: sanitize.Text(r.RoutingKey()), OrderingKey: sanitize.Text(r.OrderingKey), HazardPosition: r.HazardPosition}
}

// MarshalJSON writes every row (or rowsMark for writeQJSON).
func (rs qPlanRows) MarshalJSON() ([]byte, error) {
	if rs.mark {
		return []byte(rowsMark), nil
	}
	rows := make([]qPlanRow, rs.len())
	for i := range rows {
		rows[i] = rs.row(i)
	}
	return json.Marshal(rows)
}

// keysMark stands for a review's idempotency keys in the JSON writeQJSON
// writes around them (a string no key can be: keys are sanitised).
const keysMark = "\x00berth-keys\x00"

// writeQJSON writes v as output.WriteJSON does (indented by two spaces),
// byte for byte, with the rows of *rows, and the idempotency keys of
// review (when not nil), written one at a time where v holds them: the
// rest of v is small and encoded whole. (A million-message review's keys
// are ~35 MB of JSON, held two or three times over while indented.)
func writeQJSON(w io.Writer, v any, rows *qPlanRows, review *qPlanReview) error {
	all := *rows
	rows.mark = true
	var keys []string
	if review != nil && len(review.Keys) > 0 {
		keys = review.Keys
		review.Keys = []string{keysMark}
	}
	head, err := json.MarshalIndent(v, "", "  ")
	*rows = all
	if keys != nil {
		review.Keys = keys
	}
	if err != nil {
		return err
	}
	// Where each streamed part goes, and how it is written at the indent
	// of the line it stands on.
	type part struct {
		at, n int
		write func(bw *bufio.Writer, indent string) error
	}
	at := bytes.Index(head, []byte(rowsMark))
	if at < 0 {
		return errors.New("output: the plan's rows are missing from its JSON")
	}
	parts := []part{{at, len(rowsMark), func(bw *bufio.Writer, indent string) error {
		if all.len() == 0 {
			bw.WriteString("[]")
			return nil
		}
		bw.WriteString("[")
		for i := 0; i < all.len(); i++ {
			b, err := json.MarshalIndent(all.row(i), indent+"  ", "  ")
			if err != nil {
				return err
			}
			if i > 0 {
				bw.WriteString(",")
			}
			bw.WriteString("\n" + indent + "  ")
			bw.Write(b)
		}
		bw.WriteString("\n" + indent + "]")
		return nil
	}}}
	if keys != nil {
		// The one key written stands for all of them, each on its line.
		mark, _ := json.Marshal(keysMark)
		at := bytes.Index(head, mark)
		if at < 0 {
			return errors.New("output: the review's keys are missing from its JSON")
		}
		parts = append(parts, part{at, len(mark), func(bw *bufio.Writer, indent string) error {
			for i, k := range keys {
				b, err := json.Marshal(k)
				if err != nil {
					return err
				}
				if i > 0 {
					bw.WriteString(",\n" + indent)
				}
				bw.Write(b)
			}
			return nil
		}})
		if parts[1].at < parts[0].at {
			parts[0], parts[1] = parts[1], parts[0]
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	from := 0
	for _, pt := range parts {
		line := head[bytes.LastIndexByte(head[:pt.at], '\n')+1 : pt.at]
		indent := string(line[:len(line)-len(bytes.TrimLeft(line, " "))])
		bw.Write(head[from:pt.at])
		if err := pt.write(bw, indent); err != nil {
			return err
		}
		from = pt.at + pt.n
	}
	bw.Write(head[from:])
	bw.WriteString("\n")
	return bw.Flush()
}

func (a *app) writeQPlanText(s qPlanSummary) { writeQPlan(a.stdout, s) }

// writeQPlan writes a RabbitMQ plan as `redrive show` prints it: every
// record's event, class, target and verdict, then the totals.
func writeQPlan(w io.Writer, s qPlanSummary) {
	fmt.Fprintf(w, "plan %s\n", s.Hash)
	if s.File != "" {
		fmt.Fprintf(w, "file %s\n", sanitize.Text(s.File))
	}
	fmt.Fprintf(w, "dlq %s (vhost %s, %s) -> %s  author %s", s.DLQ, s.Vhost, orQ(s.QueueType), s.Target, s.Author)
	if s.AuthorKey != "" {
		fmt.Fprintf(w, " (signed %s)", s.AuthorKey)
	}
	fmt.Fprintln(w)
	// A row at a time, twice (widths, then text): a million messages as
	// cells would take hundreds of MiB on top of the plan.
	_ = output.Rows{Header: []string{"POS", "EVENT", "CLASS", "TARGET", "VERDICT", "DETAIL"}, Right: map[int]bool{0: true}, N: s.Records.len(),
		Row: func(i int) []string {
			r := s.Records.row(i)
			verdict := "include"
			if !r.Included {
				verdict = string(r.Reason)
			}
			return []string{strconv.Itoa(r.Position), dashIfEmpty(r.EventID), dashIfEmpty(r.Class), fmt.Sprintf("%q %s", r.Exchange, r.RoutingKey), verdict, clip(r.Detail, 90)}
		}}.WriteTable(w)
	t := s.Totals
	fmt.Fprintf(w, "selected %d, included %d, excluded %d", t.Selected, t.Included, t.Excluded)
	var reasons []string
	for _, r := range redrive.Reasons {
		if n := t.ByReason[r]; n > 0 {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		}
	}
	if len(reasons) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(reasons, ", "))
	}
	fmt.Fprintln(w)
	switch {
	case s.Stored:
		fmt.Fprintln(w, "stored in the redrive store (redrive.store_dsn)")
	case s.StoreNote != "":
		fmt.Fprintln(w, sanitize.Text(s.StoreNote))
	}
	if s.Blocked {
		fmt.Fprintf(w, "BLOCKED: %s\n", s.BlockedReason)
	}
	if r := s.Review; r != nil {
		writeReviewCounts(w, "messages", r.Targets, r.Keys)
		if len(r.Changed) > 0 {
			fmt.Fprintf(w, "CHANGED since the plan was made (execute skips them): %s\n", idList(r.Changed))
		}
		if r.AlreadySent > 0 {
			fmt.Fprintf(w, "ALREADY SENT by this plan (the ledger has them confirmed; no longer in the DLQ): %d message(s)\n", r.AlreadySent)
		}
		if len(r.Gone) > 0 {
			fmt.Fprintf(w, "GONE from the DLQ (execute skips them): %s\n", idList(r.Gone))
		}
		if len(r.NotVisible) > 0 {
			fmt.Fprintf(w, "NOT VISIBLE (not found while other consumers held messages of the DLQ; execute sends only those back in the DLQ when it runs): %s\n", idList(r.NotVisible))
		}
		if r.Unseen != "" {
			fmt.Fprintf(w, "note: %s\n", r.Unseen)
		}
		if !r.Complete {
			fmt.Fprintln(w, "note: the DLQ holds more messages than were read; a message not found may lie past them")
		}
	}
	writeWarnings(w, s.Warnings)
}

// idList lists event ids for a line of text: the first reviewKeysShown,
// then how many more there are (a DLQ redriven since the plan was made
// leaves a million gone: all of them are in -o json).
func idList(ids []string) string {
	more := max(len(ids)-reviewKeysShown, 0)
	list := strings.Join(ids[:len(ids)-more], ",")
	if more > 0 {
		list += fmt.Sprintf(" ... and %d more (all with -o json)", more)
	}
	return list
}

// rmqPlanOptions are the RabbitMQ-only selectors and settings of
// `berth redrive plan` (the shared ones are in redrivePlanOptions).
type rmqPlanOptions struct {
	sel     redrive.QueueSelection
	toQueue bool
	browse  browseFlags
}

func (o *rmqPlanOptions) add(c *cobra.Command) {
	f := c.Flags()
	f.StringSliceVar(&o.sel.EventIDs, "event-id", nil, "RabbitMQ: select these event ids")
	f.StringSliceVar(&o.sel.Reasons, "reason", nil, "RabbitMQ: select by death reason (rejected, expired, maxlen, delivery_limit)")
	f.StringSliceVar(&o.sel.OriginalQueues, "original-queue", nil, "RabbitMQ: select by the queue they died in")
	f.BoolVar(&o.toQueue, "to-queue", false, "RabbitMQ: send each message to the queue it died in (default exchange) instead of its original exchange and routing key")
	o.browse.add(c)
}

var rabbitOnlyPlanFlags = map[string]string{
	"event-id": "select Kafka records by --offsets", "reason": "Kafka records have no death reason",
	"original-queue": "Kafka: select by --class", "to-queue": "Kafka: --target",
	"queue-type": "Kafka topics have no queue type", "accept-requeue-side-effects": "reading a Kafka topic has no side effect",
}

var kafkaOnlyPlanFlags = map[string]string{
	"offsets": "queues have no offsets: select by --event-id", "record-key": "RabbitMQ: select by --event-id or --class",
	"header": "RabbitMQ: select by --event-id, --class, --reason or --original-queue", "since": "RabbitMQ: select by --event-id or --class",
	"until": "RabbitMQ: select by --event-id or --class", "target": "RabbitMQ: --to-queue, or each message's original exchange",
	"scan-limit": "RabbitMQ plans check ordering inside the DLQ, by the policy's ordering_key",
}

func (a *app) rmqRedrivePlan(cmd *cobra.Command, dlq string, o redrivePlanOptions, ro rmqPlanOptions) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	if err := onlyFor(cmd, "Kafka", kafkaOnlyPlanFlags); err != nil {
		return err
	}
	if o.out == "" {
		return usageErr("--out: a plan file is required")
	}
	sel := ro.sel
	sel.Classes, sel.All = o.classes, o.all
	if sel.Empty() {
		return usageErr("selection: give --class, --event-id, --reason, --original-queue or --all (a plan never means everything implicitly)")
	}
	if err := checkDeathReasons(sel.Reasons); err != nil {
		return err
	}
	if o.rate < 1 {
		return usageErr("--rate: must be at least 1 message per second")
	}
	window := 500 // pipelined confirms: the batch is the publish window
	if cmd.Flags().Changed("batch-size") {
		if o.batch < 1 {
			return usageErr("--batch-size: must be at least 1")
		}
		if err := redrive.CheckBatch(o.batch); err != nil {
			return usageErr("--batch-size: %v", err)
		}
		window = o.batch
	}
	read, err := rabbitReadLimit(cmd, "read", o.readLimit)
	if err != nil {
		return err
	}
	signer, err := o.checkSigning()
	if err != nil {
		return err
	}
	// A plan reads up to --read messages: ten times --timeout, or more
	// for a big --read (workBudget).
	ctx, cancel := context.WithTimeout(cmd.Context(), max(10*a.timeout, workBudget(a.timeout, work{int64(read), fetchPerSecond})))
	defer cancel()
	cl, err := a.rabbitClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	l, err := a.ledger(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := ro.browse.check(); err != nil {
		return err
	}
	rr := a.rabbitRedrive()
	p, res, warnings, err := rr.PlanReviewed(ctx, cl, l, actions.RabbitPlanInput{DLQ: dlq, Sel: sel, Read: read, QueueType: ro.browse.typ, Accept: ro.browse.accept,
		AllowHazards: o.allowHazards, Rate: o.rate, Window: window, ToQueue: ro.toQueue, Author: audit.CurrentUser()})
	if res.Method != "" {
		a.browseNotes(res)
	}
	if err != nil {
		return err
	}
	var sig *approval.Signature
	if signer != nil {
		s, err := signer(p.Subject())
		if err != nil {
			return fmt.Errorf("signing the plan: %v", err)
		}
		sig = &s
	}
	// Recorded (audited, then stored) before the file is written: a plan
	// the audit log cannot record is refused, nothing stored or written.
	sum, err := a.rmqRecordPlan(ctx, rr, l, p, sig, o.out, o.auditFile)
	if err != nil {
		return err
	}
	// The file carries the author's signature, as a Kafka plan file does:
	// an approver using another redrive store imports it with the plan.
	// Written as it is encoded: a million-message plan file is ~95 MB.
	var sigs []approval.Signature
	if sig != nil {
		sigs = append(sigs, *sig)
	}
	if _, err := savefile.WriteFunc(o.out, func(w io.Writer) error { return p.EncodeSignedTo(w, sigs) }, true); err != nil {
		return fmt.Errorf("--out %s: %v", o.out, err)
	}
	sum.Review = rabbitReviewOf(actions.SummariseRabbit(p, nil, nil), p.Cluster)
	sum.Warnings = warningsOf(warnings)
	if f == output.JSON {
		if err := writeQJSON(a.stdout, &sum, &sum.Records, sum.Review); err != nil {
			return err
		}
	} else {
		a.writeQPlanText(sum)
	}
	if sum.Blocked {
		return &exitError{code: 1, err: fmt.Errorf("plan %s is blocked: %s", redrive.ShortHash(sum.Hash), sum.BlockedReason)}
	}
	return nil
}

func (a *app) rmqRedriveShow(cmd *cobra.Command, ref string) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	ctx, cancel := a.opCtx(cmd.Context())
	defer cancel()
	l, p, where, err := a.rmqOpenPlan(ctx, ref, false, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	wctx, wcancel := a.workCtx(cmd.Context(), len(p.Records))
	defer wcancel()
	review, err := a.rmqDerive(wctx, l, &p)
	if err != nil {
		return err
	}
	sum := a.rmqPlanSummary(wctx, l, p)
	sum.File = where
	sum.setReview(review)
	if stored, err := l.HasPlan(wctx, sum.Hash); err == nil {
		sum.Stored = stored
	}
	if f == output.JSON {
		return writeQJSON(a.stdout, &sum, &sum.Records, sum.Review)
	}
	a.writeQPlanText(sum)
	return nil
}

// ---- berth redrive approve ----

func (a *app) rmqRedriveApprove(cmd *cobra.Command, ref, keyFile, sigFile, auditFile string, yes bool) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	ctx, cancel := a.opCtx(cmd.Context())
	defer cancel()
	l, p, _, err := a.rmqOpenPlan(ctx, ref, true, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	hash := p.Hash()
	now := time.Now()
	var sig approval.Signature
	if keyFile != "" {
		signer, err := loadKey(keyFile)
		if err != nil {
			return err
		}
		if sig, err = approval.Sign(p.Subject(), signer, approval.RoleApproval, now); err != nil {
			return err
		}
	} else {
		raw, err := readSignatureFile(sigFile)
		if err != nil {
			return fmt.Errorf("--signature: %v", err)
		}
		if sig, err = approval.FromArmored(hash, raw, approval.RoleApproval, now); err != nil {
			return err
		}
	}
	cl, err := a.rabbitClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	// A plan of another cluster has no review here: Approve refuses it
	// (nothing asked, nothing stored). Reading the messages again grows
	// with the plan (workCtx).
	wctx, wcancel := a.workCtx(cmd.Context(), len(p.Records))
	defer wcancel()
	review, err := a.rmqDeriveWith(wctx, cl, l, &p)
	if err != nil && !errors.Is(err, actions.ErrClusterMismatch) {
		return err
	}
	warnings := []string{}
	if err == nil && !yes && isTerminal(os.Stdin) && isTerminal(a.stderr) {
		// On a terminal the approver sees what they sign (each message's
		// target and verdict, the totals) and types the hash's first 8
		// hex digits, as on Kafka; --yes signs without asking.
		sum := a.rmqPlanSummary(wctx, l, p)
		sum.setReview(review)
		writeQPlan(a.stderr, sum)
		// The approver reads for as long as they need (not bounded by
		// --timeout); approve catches no signal, so ctrl+c ends it.
		if err := confirmPlanHash(cmd.Context(), os.Stdin, a.stderr, "approve", hash, "nothing signed"); err != nil {
			return err
		}
		// The approver reads for as long as they need: the writes that
		// follow get a --timeout of their own.
		ctx, cancel = a.opCtx(cmd.Context())
		defer cancel()
		warnings = sum.Warnings
	} else if review != nil {
		// No review shown: the warnings derived from the messages are
		// still said.
		warnings = review.Warnings
	}
	principal, dec, n, err := a.rabbitRedrive().Approve(ctx, cl, l, p, sig, auditFile)
	if err != nil {
		return err
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, map[string]any{"plan": hash, "dlq": p.DLQ, "signer": principal, "fingerprint": sig.Fingerprint, "decision": dec,
			"summary": map[string]any{"totals": p.Totals(), "policy": p.Policy, "author": a.rabbitRedrive().VerifiedAuthor(ctx, l, p), "created_at": p.CreatedAt, "required": n}, "warnings": warnings})
	}
	writeWarnings(a.stdout, warnings)
	state := "not yet approved: " + dec.Reason
	if dec.Approved {
		state = "approved by " + strings.Join(dec.Approvers, ", ")
	}
	fmt.Fprintf(a.stdout, "signed plan %s as %s (%s); the plan is %s\n", redrive.ShortHash(hash), orUnknown(principal), sig.Fingerprint, state)
	return nil
}

// ---- berth redrive execute ----

func (a *app) rmqRedriveExecute(cmd *cobra.Command, ref string, yes, noVerify bool, watch time.Duration, keyFile, auditFile string) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	actor, err := executor(keyFile)
	if err != nil {
		return err
	}
	sigCtx, stop := signalContext(cmd)
	defer stop()
	setup, cancel := a.opCtx(sigCtx)
	defer cancel()
	dctx, dcancel := a.opCtx(sigCtx)
	cl, err := a.rabbitClient(dctx)
	dcancel()
	if err != nil {
		return err
	}
	defer cl.Close()
	// A dry run stores nothing, as on Kafka: a plan file is stored once it
	// is to be sent.
	l, p, _, err := a.rmqOpenPlan(setup, ref, yes, cl)
	if errors.Is(err, rabbitmq.ErrPlanEdited) {
		refusal := actions.Refuse(actions.ErrPlanEdited, "%v", err)
		a.rabbitRedrive().AuditOrWarn(setup, auditFile, "redrive.refused", ref, map[string]any{"plan": ref, "reason": refusal.Error()})
		return refusal
	}
	if err != nil {
		return err
	}
	defer l.Close()
	hash := p.Hash()
	rr := a.rabbitRedrive()
	// A dry run reads the plan's messages again to show what every check
	// says of them now; a run checks each message as it consumes it.
	var dec approval.Decision
	var skip map[string]redrive.Verdict
	// The checks before a run and a dry run's re-read grow with the plan.
	wctx, wcancel := a.workCtx(sigCtx, len(p.Records))
	defer wcancel()
	if yes {
		dec, skip, err = rr.Preflight(wctx, l, p, actor, auditFile, true)
	} else {
		dec, skip, err = rr.DryRun(wctx, cl, l, &p, actor, auditFile, true)
	}
	if err != nil {
		return err
	}
	totals := p.Totals()
	if !yes {
		// Nothing is sent without --yes. On a terminal the dry run is shown
		// and typing the plan hash's first 8 hex digits sends; without one
		// (a script) the dry run is the answer, exit 0.
		out := map[string]any{"dry_run": true, "plan": hash, "dlq": p.DLQ, "totals": totals, "would_send": actions.RabbitWouldSend(p, skip), "approvers": dec.Approvers, "skipped": actions.RabbitSkips(p, skip)}
		ask := isTerminal(os.Stdin) && isTerminal(a.stderr) && f != output.JSON
		switch {
		case f == output.JSON:
			return output.WriteJSON(a.stdout, out)
		case !ask:
			fmt.Fprintf(a.stdout, "dry run: plan %s would redrive %d message(s) from %s (selected %d, excluded %d, skipped now %d); run again with --yes to send\n",
				redrive.ShortHash(hash), totals.Included-len(skip), sanitize.Text(p.DLQ), totals.Selected, totals.Excluded, len(skip))
			return nil
		}
		fmt.Fprintf(a.stderr, "dry run: plan %s would redrive %d message(s) from %s (selected %d, excluded %d, skipped now %d)\n",
			redrive.ShortHash(hash), totals.Included-len(skip), sanitize.Text(p.DLQ), totals.Selected, totals.Excluded, len(skip))
		if err := confirmPlanHash(sigCtx, os.Stdin, a.stderr, "send", hash, "nothing sent"); err != nil {
			return err
		}
		// However long the operator took, storing the plan gets a
		// --timeout of its own.
		store, cancel := a.opCtx(sigCtx)
		defer cancel()
		if _, _, err := a.rmqLoadPlan(store, l, ref, true, cl); err != nil {
			return err
		}
	}
	// Progress lines as on Kafka: at the start, after each chunk, and when
	// the run pauses or resumes (the last counts, marked paused). Chunks
	// settle on one goroutine and the pause is read on another: mu orders
	// their lines.
	var (
		mu     sync.Mutex
		last   actions.RabbitResult
		paused bool
	)
	start := time.Now()
	progress := func() {
		writeProgress(a.stderr, actions.RabbitProgress(hash, totals.Included, p.Rate, last, time.Since(start), paused))
	}
	pause, stopPause := usrPause(func(now bool) {
		mu.Lock()
		defer mu.Unlock()
		paused = now
		progress()
	})
	defer stopPause()
	res, err := rr.Run(sigCtx, cl, l, p, dec, skip, actor, auditFile, actions.RabbitExecOptions{
		Verify: !noVerify, Pause: pause,
		Notice: func(note string) { fmt.Fprintln(a.stderr, sanitize.Text(note)) },
		Progress: func(r actions.RabbitResult) {
			mu.Lock()
			defer mu.Unlock()
			last = r
			progress()
		},
	}, func() bool { return sigCtx.Err() != nil })
	if actions.IsRefusal(err) {
		return err
	}
	cancelled := sigCtx.Err() != nil
	if !cancelled {
		o := rabbitExecuteOutput(hash, p.DLQ, res, false, nil)
		if unsent := o.failedUnsent(err); unsent != nil {
			return unsent
		}
	}
	// The re-failure watch: only when --watch is given (RabbitMQ has no
	// default watch: finding re-failures browses the DLQ once, at its end).
	var werr error
	if v := res.Verification; v != nil && err == nil && !cancelled && cmd.Flags().Changed("watch") && watch > 0 {
		// As on Kafka: say what it watches, for how long at most, how to
		// leave it, and report how long it really watched.
		stopWatch, how := a.stopOnEnter()
		fmt.Fprintf(a.stderr, "watching %s for re-failures of plan %s, at most %s (%s; what was sent stays sent)\n", sanitize.Text(p.DLQ), redrive.ShortHash(hash), watch, how)
		began := time.Now()
		select {
		case <-sigCtx.Done():
		case <-stopWatch:
		case <-time.After(watch):
		}
		v.Watched = min(time.Since(began), watch).Round(time.Millisecond).String()
		wctx, wcancel := a.opCtx(context.WithoutCancel(sigCtx))
		var back []rabbitmq.Refailure
		var complete bool
		back, complete, werr = cl.Refailures(wctx, p, rabbitDefaultRead, a.extractorsFor(p.DLQ))
		wcancel()
		switch {
		case werr != nil:
			fmt.Fprintf(a.stderr, "warning: re-failure watch: %v\n", werr)
		case !complete:
			fmt.Fprintf(a.stderr, "note: the re-failure watch read the first %d messages of %s only\n", rabbitDefaultRead, sanitize.Text(p.DLQ))
		}
		v.Refailed = back
	}
	rr.AuditVerified(sigCtx, auditFile, p, res.Verification, werr)
	out := rabbitExecuteOutput(hash, p.DLQ, res, cancelled, dec.Approvers)
	out.judge()
	if !cancelled {
		out.stoppedBy(err)
	}
	fmt.Fprintf(a.stderr, "redrive %s: sent %d, skipped %d, failed %d in %s\n", redrive.ShortHash(hash), res.Sent, len(out.Skipped), len(out.Failed), time.Since(start).Round(time.Millisecond))
	if f == output.JSON {
		if werr := output.WriteJSON(a.stdout, out); werr != nil {
			return werr
		}
	} else {
		writeExecuteText(a.stdout, out)
	}
	if err != nil && !cancelled {
		return err
	}
	if cancelled {
		// Interrupted (SIGINT/SIGTERM): unsent messages are back in the DLQ
		// and the stop is audited; the exit says it did not finish.
		return &exitError{code: 1, err: fmt.Errorf("interrupted: plan %s sent %d of %d; the rest stay in %s (run the same command to send them)",
			redrive.ShortHash(hash), res.Sent+res.AlreadySent, totals.Included, sanitize.Text(p.DLQ))}
	}
	return out.exit()
}

// ---- berth redrive status ----

type qStatusRow struct {
	statusRow
	Vhost  string `json:"vhost"`
	Intent int    `json:"intent"`
	Failed int    `json:"failed"`
}

func (a *app) rmqRedriveStatus(cmd *cobra.Command, args []string) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	ctx, cancel := a.opCtx(cmd.Context())
	defer cancel()
	l, err := a.ledger(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	var plans []redrive.QueuePlan
	if len(args) == 1 {
		p, _, err := a.rmqLoadPlan(ctx, l, args[0], false, nil)
		if err != nil {
			return err
		}
		plans = []redrive.QueuePlan{p}
	} else {
		var bad []error
		if plans, bad, err = l.Plans(ctx); err != nil {
			return err
		}
		for _, e := range bad {
			fmt.Fprintf(a.stderr, "berth: warning: skipped %v\n", sanitize.Text(e.Error()))
		}
	}
	rows := []qStatusRow{}
	rr := a.rabbitRedrive()
	for _, p := range plans {
		rows = append(rows, statusRowOf(rr.Status(ctx, l, p)))
	}
	// One plan: what an approver signs, derived from its messages now.
	var sum qPlanSummary
	if len(args) == 1 {
		p := plans[0]
		wctx, wcancel := a.workCtx(cmd.Context(), len(p.Records))
		defer wcancel()
		review, err := a.rmqDerive(wctx, l, &p)
		if err != nil {
			return err
		}
		sum = a.rmqPlanSummary(ctx, l, p)
		sum.setReview(review)
		sum.Stored = true
		// The verified signer, as the row says: the plan names no author.
		sum.Author = rows[0].Author
	}
	if f == output.JSON {
		if len(args) == 1 {
			out := struct {
				qStatusRow
				Summary qPlanSummary `json:"summary"`
			}{rows[0], sum}
			return writeQJSON(a.stdout, &out, &out.Summary.Records, out.Summary.Review)
		}
		return output.WriteJSON(a.stdout, rows)
	}
	g := output.Grid{Header: []string{"PLAN", "VHOST", "DLQ", "AUTHOR", "AGE", "RECORDS", "REDRIVEN", "INTENT", "FAILED", "APPROVALS", "STATE"}, Right: map[int]bool{5: true, 6: true, 7: true, 8: true}}
	for _, r := range rows {
		g.Add(redrive.ShortHash(r.Plan), r.Vhost, sanitize.Text(r.DLQ), r.Author, durations.Format(time.Since(r.Created)), fmt.Sprint(r.Included), fmt.Sprint(r.Redriven),
			fmt.Sprint(r.Intent), fmt.Sprint(r.Failed), fmt.Sprintf("%d/%d", r.Approvals, r.Required), r.State)
	}
	if err := g.WriteTable(a.stdout); err != nil {
		return err
	}
	if len(args) == 1 {
		fmt.Fprintln(a.stdout)
		writeQPlan(a.stdout, sum)
	}
	return nil
}

// rabbitRedrive is the RabbitMQ redrive actions for this context: its
// policies, read-only state and audit log; warnings go to stderr.
func (a *app) rabbitRedrive() *actions.RabbitRedrive {
	return &actions.RabbitRedrive{Config: a.cfg, ReadOnly: a.readOnly, Context: a.ctxName, OpenAudit: a.openAudit, Warn: a.stderr}
}

// checkDeathReasons refuses a --reason RabbitMQ never writes in x-death
// (a typo would otherwise browse the DLQ, then match nothing).
func checkDeathReasons(reasons []string) error {
	known := []string{rabbitmq.ReasonRejected, rabbitmq.ReasonExpired, rabbitmq.ReasonMaxLen, rabbitmq.ReasonDeliveryLimit}
	for _, r := range reasons {
		if !slices.Contains(known, r) {
			return usageErr("--reason: %q is not a death reason (%s)", r, strings.Join(known, ", "))
		}
	}
	return nil
}

// rmqRecordPlan stores and audits a plan just made (actions) and returns
// it as `redrive plan` prints it.
func (a *app) rmqRecordPlan(ctx context.Context, rr *actions.RabbitRedrive, l *rabbitmq.Ledger, p redrive.QueuePlan, sig *approval.Signature, file, auditFile string) (qPlanSummary, error) {
	rec, err := rr.RecordPlan(ctx, l, p, sig, file, auditFile)
	sum := a.rmqPlanSummary(ctx, nil, p)
	sum.File, sum.AuthorKey, sum.Stored, sum.StoreNote = file, rec.AuthorKey, rec.Stored, rec.StoreNote
	return sum, err
}

// statusRowOf is a plan's status as `redrive status` prints it.
func statusRowOf(s actions.RabbitStatus) qStatusRow {
	approvers := s.Approvers
	if approvers == nil {
		approvers = []string{}
	}
	return qStatusRow{statusRow: statusRow{Plan: s.Plan, DLQ: s.DLQ, Author: s.Author, Approvers: approvers, Created: s.Created, Included: s.Included, Excluded: s.Excluded,
		Redriven: s.Redriven, Approvals: s.Approvals, Required: s.Required, Approved: s.Approved, Reason: s.Reason, State: s.State},
		Vhost: s.Vhost, Intent: s.Intent, Failed: s.Failed}
}

// maxQueuePlanFile bounds a RabbitMQ plan file: about 95 bytes a
// message, so 2.8 million messages. The file is read a row at a time, but
// a JSON string is held whole as it is read: the bound keeps a file that
// is one endless string from running the process out of memory.
const maxQueuePlanFile = 256 << 20

// openPlanFile opens a JSON document given by path (a plan file) to be
// read as a stream of at most max bytes, refusing what cannot be one
// before reading it: a device such as /dev/zero or a binary file (its
// first byte is not '{') was read until the process ran out of memory and
// crashed with a stack trace. The caller closes it.
func openPlanFile(path string, max int64) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > max {
		f.Close()
		return nil, fmt.Errorf("larger than %d MiB: not a plan file", max>>20)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		b, err := br.ReadByte()
		if err != nil {
			f.Close()
			return nil, errors.New("not a Berth plan: empty")
		}
		if b == ' ' || b == '\t' || b == '\n' || b == '\r' {
			continue
		}
		if b != '{' {
			f.Close()
			return nil, fmt.Errorf("not a Berth plan: it begins with %q, not '{'", b)
		}
		_ = br.UnreadByte()
		break
	}
	size := int64(0)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return &boundedFile{r: br, left: max, f: f, size: size}, nil
}

// boundedFile is a plan file read through its buffer, refused once it
// goes past its bound (a pipe or device has no size to check first).
type boundedFile struct {
	r    io.Reader
	left int64
	f    *os.File
	size int64
}

func (b *boundedFile) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("larger than %d MiB: not a plan file", maxQueuePlanFile>>20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// Size is the file's size when it is a regular file (0 otherwise): a plan
// file's records are then allocated once.
func (b *boundedFile) Size() int64 { return b.size }

func (b *boundedFile) Close() error { return b.f.Close() }

// readSignatureFile reads an armored SSH signature (--signature), at most
// 64 KiB (one is under 1 KiB): a device such as /dev/zero was read until
// the process ran out of memory.
func readSignatureFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	defer f.Close()
	const max = 64 << 10
	raw, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > max {
		return nil, fmt.Errorf("%s is larger than 64 KiB: not an SSH signature", path)
	}
	return raw, nil
}

// confirmPlanHash asks, on a terminal, for the first 8 hex digits of the
// plan hash before verb; anything else refuses (actions.ErrNotConfirmed).
func confirmPlanHash(ctx context.Context, in io.Reader, prompt io.Writer, verb, hash, nothing string) error {
	fmt.Fprintf(prompt, "to %s, type the first 8 hex digits of plan %s's hash: ", verb, redrive.ShortHash(hash))
	line, err := promptLine(ctx, in, prompt, nothing)
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != hash[:8] {
		return actions.Refuse(actions.ErrNotConfirmed, "not confirmed: %s", nothing)
	}
	return nil
}

// promptLine reads the answer to a prompt, or gives up when ctx ends:
// ctrl+c at a prompt of a command that catches SIGINT (execute, to stop a
// run cleanly) cancels ctx, but a read of the terminal returns only at
// Enter, so the command sat at its prompt with ctrl+c ignored. The
// reader is left to the process's exit.
func promptLine(ctx context.Context, in io.Reader, prompt io.Writer, nothing string) (string, error) {
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(in).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		return line, nil
	case <-ctx.Done():
		fmt.Fprintln(prompt)
		return "", &exitError{code: 1, err: fmt.Errorf("interrupted at the prompt: %s", nothing)}
	}
}

// usrPause is the run's pause between chunks, as on Kafka: SIGUSR1 pauses
// before the next chunk (nothing more is published; what was read stays
// unacked, in place) until SIGUSR2; ctrl+c while paused stops the run.
// changed is told when the run pauses (true) and resumes (false).
func usrPause(changed func(paused bool)) (pause func(ctx context.Context) bool, stop func()) {
	usr := make(chan os.Signal, 4)
	signal.Notify(usr, syscall.SIGUSR1, syscall.SIGUSR2)
	pause = func(ctx context.Context) bool {
		paused := false
		for {
			if !paused {
				select {
				case s := <-usr:
					paused = s == syscall.SIGUSR1
				default:
					return true
				}
				if paused {
					changed(true)
				}
				continue
			}
			select {
			case s := <-usr:
				if s == syscall.SIGUSR2 {
					paused = false
					changed(false)
				}
			case <-ctx.Done():
				return false
			}
		}
	}
	return pause, func() { signal.Stop(usr) }
}
