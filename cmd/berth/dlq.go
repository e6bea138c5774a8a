package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	tuidlq "github.com/berth-dev/berth/tui/dlq"
	tuioffsets "github.com/berth-dev/berth/tui/offsets"
)

func init() { register(newDLQCmd) }

// consoleServices are what the console's pages get from the command line's
// wiring (tui.Options.Services), so that the console and the CLI call the
// same actions: the Kafka DLQ and plan pages use the same planner as the
// CLI and approve and execute plans as `berth redrive approve/execute` do;
// the RabbitMQ ones call actions.RabbitRedrive (dlq_console_rabbit.go).
func consoleServices() map[string]any {
	return map[string]any{
		tuidlq.ServiceName:      tuidlq.Opener(openConsoleDLQ),
		tuidlq.QueueServiceName: tuidlq.QueueOpener(openConsoleQueues),
		tuioffsets.ServiceName:  tuioffsets.ResetterOpener(openConsoleResetter),
	}
}

func openConsoleDLQ(c backends.Cluster, cfg *config.Config, contextName string) (tuidlq.Service, error) {
	k, ok := c.(*kafka.Cluster)
	if !ok {
		return nil, errors.New("dead-letter queues need a Kafka context")
	}
	// The demo's policies on its bundled broker, as the CLI resolves them.
	return newConsoleRedrive(k, demoAwareConfig(cfg, cfg.Contexts[contextName])), nil
}

func newDLQCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Dead-letter queues: list, failure classes, records",
		Long: `Inspect dead-letter queues. On Kafka: topics named *.DLT, *-dlt, *.dlq, *-dlq
or *.DLQ, plus the pairs declared under redrive.dlqs in the config. On
RabbitMQ: queues that receive dead letters (dead-letter exchange wiring),
plus redrive.dlqs; messages are read by a browse that never loses,
dead-letters or reorders one.

Records are parsed in every known convention (Spring kafka_dlt-* with every
hop, Spring retry topics, Spring Cloud Stream, Kafka Connect
__connect.errors.*, Berth's own berth-redrive-*) and grouped into failure
classes. Everything read from a record is sanitised before it is shown;
binary keys, values and headers are shown in hex.`,
		Args: noArgs,
	}
	cmd.AddCommand(newDLQListCmd(a), newDLQClassesCmd(a), newDLQShowCmd(a))
	return cmd
}

// planner connects to the context's cluster and returns a planner with the
// redrive policies that apply. On the bundled broker with no policies
// configured, the demo's policies apply when the demo's system of record is
// in the broker's data dir (so `berth dlq` and `berth redrive plan` work
// against `berth demo` out of the box).
func (a *app) planner(ctx context.Context, readLimit int) (*actions.Planner, func(), error) {
	c, err := a.kafkaClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	cl := kafka.NewCluster(c)
	cfg := a.cfg
	if a.ctx.Kind == "bundled" && len(cfg.Redrive.Policies) == 0 {
		dir := a.ctx.DataDir
		if dir == "" {
			dir = bundled.DefaultDataDir()
		}
		if _, err := os.Stat(demo.PaymentsDB(dir)); err == nil {
			copy := *cfg
			copy.Redrive.Policies = demo.RedrivePolicies(dir)
			cfg = &copy
		}
	}
	p := actions.NewPlanner(cl, cfg)
	p.ReadLimit = readLimit
	return p, cl.Close, nil
}

type dlqListRow struct {
	redrive.DLQ
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

func newDLQListCmd(a *app) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List DLQs with depth, oldest pending age, classes and original topics",
		Long: `List the dead-letter topics. For each: records held, depth (records not yet
redriven or settled, per the redrive ledger in the cluster), the age of the
oldest pending record, the number of failure classes and the original topics
its records came from. At most --limit records are read per DLQ (oldest
first); when a DLQ holds more, classes and originals describe those read
("sampled").

JSON fields: dlq, declared_original, records, depth, oldest_at,
oldest_age_seconds, classes, original_topics, sampled.

On a RabbitMQ context: the queues that receive dead letters (from
dead-letter exchange wiring, plus redrive.dlqs), with depth, the head
message's publisher-timestamp age and the original queues; nothing is read
from the queues (--limit does not apply). JSON fields: dlq, vhost, type,
found, original_queues, depth, depth_source, head_publisher_age_seconds.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.isRabbit() {
				return a.rmqDLQList(cmd)
			}
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usageErr("--limit: must be at least 1")
			}
			ctx, cancel := a.opCtx(cmd.Context())
			defer cancel()
			p, closeFn, err := a.planner(ctx, limit)
			if err != nil {
				return err
			}
			defer closeFn()
			list, err := p.List(ctx)
			if err != nil {
				return err
			}
			rows := make([]dlqListRow, len(list))
			for i, d := range list {
				rows[i] = dlqListRow{DLQ: d, OldestAgeSeconds: d.OldestAge.Seconds()}
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, rows)
			}
			g := output.Grid{Header: []string{"DLQ", "DEPTH", "RECORDS", "OLDEST", "CLASSES", "ORIGINAL TOPICS"}, Right: map[int]bool{1: true, 2: true, 4: true}}
			for _, r := range rows {
				age := "-"
				if r.OldestAt != nil {
					age = durations.Format(r.OldestAge)
				}
				classes := strconv.Itoa(r.Classes)
				if r.Sampled {
					classes += "+"
				}
				g.Add(r.Name, strconv.FormatInt(r.Depth, 10), strconv.FormatInt(r.Records, 10), age, classes, strings.Join(r.Originals, ","))
			}
			if len(rows) == 0 {
				fmt.Fprintln(a.stdout, "no dead-letter topics (names *.DLT, *-dlt, *.dlq, *-dlq, *.DLQ, or redrive.dlqs in the config)")
				return nil
			}
			return g.WriteTable(a.stdout)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", kafka.DefaultReadLimit, "records read per DLQ, oldest first")
	return cmd
}

type classRow struct {
	Class         string    `json:"class"`
	Count         int       `json:"count"`
	OriginalTopic string    `json:"original_topic"`
	Exception     string    `json:"exception"`
	Pattern       string    `json:"pattern"`
	Transient     bool      `json:"transient"`
	Verdict       string    `json:"verdict"`
	FirstSeen     time.Time `json:"first_seen"`
	LastSeen      time.Time `json:"last_seen"`
}

func newDLQClassesCmd(a *app) *cobra.Command {
	var limit int
	var b browseFlags
	cmd := &cobra.Command{
		Use:   "classes DLQ",
		Short: "Failure classes of a DLQ's pending records",
		Long: `Group a DLQ's pending records (not yet redriven or settled) by original
topic, exception class and normalised message (numbers, ids and UUIDs
replaced), with count, first and last seen, and a transient/permanent verdict
(defaults: timeouts, connection errors and 5xx are transient; validation,
deserialisation and 4xx permanent; redrive.classes in the config adds rules).
The class id (c-...) is what berth dlq show --class and berth redrive plan
--class take.

JSON fields: class, count, original_topic, exception, pattern, transient,
verdict, first_seen, last_seen.

On a RabbitMQ context classes are original queue, death reason and the
policy's error_header text; --limit messages are browsed (default 1,000)
without losing, dead-lettering or reordering any (quorum DLQs need
--accept-requeue-side-effects). JSON fields: class, count, original_queue,
reason, pattern, transient, verdict, first_seen, last_seen.`,
		Args: exactArgs("DLQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.isRabbit() {
				return a.rmqDLQClasses(cmd, args[0], limit, b)
			}
			if err := kafkaRejectsBrowse(cmd); err != nil {
				return err
			}
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usageErr("--limit: must be at least 1")
			}
			ctx, cancel := a.opCtx(cmd.Context())
			defer cancel()
			p, closeFn, err := a.planner(ctx, limit)
			if err != nil {
				return err
			}
			defer closeFn()
			l, err := p.Classes(ctx, args[0], limit)
			if err != nil {
				return err
			}
			rows := make([]classRow, 0, len(l.Classes))
			for _, c := range l.Classes {
				rows = append(rows, classRow{Class: c.ID, Count: c.Count, OriginalTopic: sanitize.Text(c.OriginalTopic), Exception: sanitize.Text(c.Exception),
					Pattern: sanitize.Text(c.Pattern), Transient: c.Transient, Verdict: c.Verdict, FirstSeen: c.FirstSeen, LastSeen: c.LastSeen})
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, rows)
			}
			if !l.Complete {
				fmt.Fprintf(a.stderr, "berth: %s holds %d records; classes describe the first %d (raise --limit)\n", sanitize.Text(args[0]), l.Total, l.Read)
			}
			g := output.Grid{Header: []string{"CLASS", "COUNT", "VERDICT", "ORIGINAL TOPIC", "EXCEPTION", "FIRST SEEN", "LAST SEEN", "MESSAGE PATTERN"}, Right: map[int]bool{1: true}}
			for _, r := range rows {
				g.Add(r.Class, strconv.Itoa(r.Count), r.Verdict, r.OriginalTopic, javaSimpleName(r.Exception), r.FirstSeen.UTC().Format(time.DateTime), r.LastSeen.UTC().Format(time.DateTime), clip(r.Pattern, 80))
			}
			return g.WriteTable(a.stdout)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", kafka.DefaultReadLimit, "records read, oldest first (RabbitMQ: messages browsed, default 1000)")
	b.add(cmd)
	return cmd
}

// recordView is a DLQ record fit to print: every string sanitised, binary
// shown as hex.
type recordView struct {
	Partition      int32        `json:"partition"`
	Offset         int64        `json:"offset"`
	Timestamp      time.Time    `json:"timestamp"`
	Key            *string      `json:"key"`
	KeyHex         string       `json:"key_hex,omitempty"`
	EventID        string       `json:"event_id"`
	IdempotencyKey string       `json:"idempotency_key"`
	Class          string       `json:"class"`
	Conventions    []string     `json:"conventions"`
	FirstOrigin    *originView  `json:"first_origin"`
	LastHop        *originView  `json:"last_hop"`
	Hops           int          `json:"hops"`
	Exception      string       `json:"exception"`
	Cause          string       `json:"cause,omitempty"`
	Message        string       `json:"message"`
	Attempts       int          `json:"attempts"`
	PriorRedrives  int          `json:"prior_redrives"`
	Redriven       bool         `json:"redriven_or_settled"`
	Problems       []string     `json:"problems,omitempty"`
	Headers        []headerView `json:"headers"`
	Value          string       `json:"value,omitempty"`
	ValueHex       string       `json:"value_hex,omitempty"`
	Binary         bool         `json:"value_binary"`
	ValueBytes     int          `json:"value_bytes"`
}

type originView struct {
	Topic     string     `json:"topic"`
	Partition *int32     `json:"partition"`
	Offset    *int64     `json:"offset"`
	Timestamp *time.Time `json:"timestamp,omitempty"`
	Group     string     `json:"consumer_group,omitempty"`
}

type headerView struct {
	Key      string `json:"key"`
	Value    string `json:"value,omitempty"`
	ValueHex string `json:"value_hex,omitempty"`
	Binary   bool   `json:"binary"`
}

func viewOrigin(o *redrive.Origin) *originView {
	if o == nil {
		return nil
	}
	v := &originView{Topic: sanitize.Text(o.Topic), Group: sanitize.Text(o.Group)}
	if o.HasPartition {
		p := o.Partition
		v.Partition = &p
	}
	if o.HasOffset {
		off := o.Offset
		v.Offset = &off
	}
	if !o.Timestamp.IsZero() {
		ts := o.Timestamp
		v.Timestamp = &ts
	}
	return v
}

// stackHeaders are shown truncated: stack traces are long and may carry
// data nobody should scroll past by accident.
const maxHeaderText = 400

func viewRecord(p redrive.Parsed, done bool) recordView {
	v := recordView{
		Partition: p.Partition, Offset: p.Offset, Timestamp: p.Timestamp,
		EventID: sanitize.Text(p.EventID), IdempotencyKey: sanitize.Text(p.IdempotencyKey), Class: p.Class,
		Conventions: p.Diag.Conventions, FirstOrigin: viewOrigin(p.Diag.FirstOrigin()), LastHop: viewOrigin(p.Diag.LastHop()),
		Hops: len(p.Diag.Hops), Exception: sanitize.Text(p.Diag.Exception), Cause: sanitize.Text(p.Diag.Cause),
		Message: sanitize.Text(p.Diag.Message), Attempts: p.Diag.Attempts, PriorRedrives: p.Diag.PriorRedrives(),
		Redriven: done, ValueBytes: len(p.Value), Headers: []headerView{},
	}
	if v.Conventions == nil {
		v.Conventions = []string{}
	}
	for _, pr := range p.Diag.Problems {
		v.Problems = append(v.Problems, sanitize.Text(pr))
	}
	v.Key, v.KeyHex = keyView(p.KeyNull, p.Key)
	for _, h := range p.Headers {
		v.Headers = append(v.Headers, headerViewOf(h.Key, h.Value, maxHeaderText))
	}
	v.Value, v.ValueHex, v.Binary = bytesView(p.Value)
	return v
}

// keyView is a key in JSON: nil for a null key, hex for a binary one, else
// the sanitised text.
func keyView(null bool, k []byte) (*string, string) {
	switch {
	case null:
		return nil, ""
	case sanitize.IsBinary(k):
		return nil, hex.EncodeToString(k)
	}
	s := sanitize.Bytes(k)
	return &s, ""
}

// headerViewOf is one header in JSON; text longer than clipAt (0: no
// limit) is cut with a mark.
func headerViewOf(key string, value []byte, clipAt int) headerView {
	hv := headerView{Key: sanitize.Text(key)}
	hv.Value, hv.ValueHex, hv.Binary = bytesView(value)
	if clipAt > 0 && !hv.Binary {
		hv.Value = clip(hv.Value, clipAt)
	}
	return hv
}

// bytesView is a value in JSON: hex when binary, else the sanitised text.
func bytesView(b []byte) (text, hexText string, binary bool) {
	if sanitize.IsBinary(b) {
		return "", hex.EncodeToString(b), true
	}
	return sanitize.Bytes(b), "", false
}

func newDLQShowCmd(a *app) *cobra.Command {
	var (
		classes []string
		limit   int
		read    int
		b       browseFlags
		eventID string
		save    recordSave
	)
	cmd := &cobra.Command{
		Use:   "show DLQ",
		Short: "Show a DLQ's records: origin, failure, headers and payload (sanitised)",
		Long: `Show a DLQ's records oldest first (at most --limit), optionally only those of
the given --class ids. Each record: coordinates, key, event id, idempotency
key, class, conventions, first origin and last hop, exception and message,
attempt count, prior redrives, whether the ledger has it as redriven or
settled, every header and the payload. Control characters and escape
sequences are escaped; binary keys, headers and payloads are shown in hex
(a hex dump in the table view). Stack-trace headers are cut at 400
characters.

JSON: an array of records with fields partition, offset, timestamp, key (null
for a null key) or key_hex, event_id, idempotency_key, class, conventions,
first_origin, last_hop, hops, exception, cause, message, attempts,
prior_redrives, redriven_or_settled, problems, headers [{key, value |
value_hex, binary}], value or value_hex, value_binary, value_bytes.

On a RabbitMQ context messages are browsed (--read, default 1,000) and shown
with their parsed x-death history. JSON: position, publisher_timestamp,
message_id, event_id, event_id_source, idempotency_key, ordering_key, class,
original_queue, reason, error, death, redelivered, prior_redrives,
redriven_or_settled, headers, value or value_hex, value_binary, value_bytes.

--event-id ID --save-value FILE writes that message's body, its raw bytes,
to FILE instead of showing (the record viewer's S; RabbitMQ: on Kafka,
berth records DLQ -p P --offset O --save-value FILE saves a DLQ record). An
existing file is refused unless --overwrite; a pipe is written in place.
JSON: dlq, position, event_id, saved [{part, file, bytes}].`,
		Args: exactArgs("DLQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := save.checkShow(eventID); err != nil {
				return err
			}
			if save.asked() {
				if !a.isRabbit() {
					return usageErr("dlq show --save-value: RabbitMQ only; on Kafka save a DLQ record by its coordinates: berth records %s -p P --offset O --save-value FILE", sanitize.Text(args[0]))
				}
				return a.rmqSaveMessage(cmd, args[0], eventID, save, read, b)
			}
			if a.isRabbit() {
				return a.rmqDLQShow(cmd, args[0], classes, limit, read, b)
			}
			if err := kafkaRejectsBrowse(cmd); err != nil {
				return err
			}
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usageErr("--limit: must be at least 1")
			}
			if read < 1 {
				return usageErr("--read: must be at least 1")
			}
			ctx, cancel := a.opCtx(cmd.Context())
			defer cancel()
			p, closeFn, err := a.planner(ctx, read)
			if err != nil {
				return err
			}
			defer closeFn()
			l, err := p.Show(ctx, args[0], read, classes, limit)
			if err != nil {
				return err
			}
			for _, c := range classes {
				if !l.Known[c] {
					return usageErr("--class %s: no such class in %s (see berth dlq classes %s)", c, sanitize.Text(args[0]), sanitize.Text(args[0]))
				}
			}
			views := []recordView{}
			for _, r := range l.Records {
				views = append(views, viewRecord(r, l.Ledger.Done(r.Coord())))
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, views)
			}
			for i, v := range views {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				writeRecordText(a.stdout, sanitize.Text(args[0]), v, l.Records)
			}
			if len(views) == 0 {
				fmt.Fprintln(a.stdout, "no records")
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&classes, "class", nil, "only records of this class id (repeatable)")
	cmd.Flags().IntVar(&limit, "limit", 20, "records shown")
	cmd.Flags().IntVar(&read, "read", kafka.DefaultReadLimit, "records read, oldest first (RabbitMQ: messages browsed, default 1000)")
	cmd.Flags().StringVar(&eventID, "event-id", "", "RabbitMQ: with --save-value, the message to save (the oldest with this event id)")
	cmd.Flags().StringVar(&save.value, "save-value", "", "RabbitMQ: write the --event-id message's body, its raw bytes, to FILE instead of showing")
	cmd.Flags().BoolVar(&save.overwrite, "overwrite", false, "with --save-value: replace an existing file")
	b.add(cmd)
	return cmd
}

func writeRecordText(w io.Writer, dlq string, v recordView, recs []redrive.Parsed) {
	key := "(null)"
	switch {
	case v.Key != nil:
		key = *v.Key
	case v.KeyHex != "":
		key = "hex:" + v.KeyHex
	}
	state := "pending"
	if v.Redriven {
		state = "redriven/settled"
	}
	fmt.Fprintf(w, "%s %d:%d  %s  key=%s  %s\n", dlq, v.Partition, v.Offset, v.Timestamp.UTC().Format(time.RFC3339), key, state)
	fmt.Fprintf(w, "  class %s  event %s  idempotency key %s\n", v.Class, dashIfEmpty(v.EventID), dashIfEmpty(v.IdempotencyKey))
	if v.LastHop != nil {
		fmt.Fprintf(w, "  origin %s (last hop %s; %d hop(s))\n", hopText(v.FirstOrigin), hopText(v.LastHop), v.Hops)
	} else {
		fmt.Fprintln(w, "  origin unknown (no known DLQ convention)")
	}
	if v.Exception != "" || v.Cause != "" || v.Message != "" {
		fmt.Fprintf(w, "  failure %s: %s\n", javaSimpleName(firstSet(v.Cause, v.Exception)), clip(v.Message, 200))
	}
	fmt.Fprintf(w, "  attempts %d  prior redrives %d  conventions %s\n", v.Attempts, v.PriorRedrives, strings.Join(v.Conventions, ","))
	for _, p := range v.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	fmt.Fprintln(w, "  headers:")
	for _, h := range v.Headers {
		if h.Binary {
			fmt.Fprintf(w, "    %s = hex:%s\n", h.Key, h.ValueHex)
		} else {
			fmt.Fprintf(w, "    %s = %s\n", h.Key, clip(h.Value, 160))
		}
	}
	fmt.Fprintf(w, "  payload (%d bytes):\n", v.ValueBytes)
	var raw []byte
	for _, r := range recs {
		if r.Partition == v.Partition && r.Offset == v.Offset {
			raw = r.Value
		}
	}
	for _, line := range strings.Split(strings.TrimRight(sanitize.Payload(raw), "\n"), "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
}

func hopText(o *originView) string {
	if o == nil {
		return "-"
	}
	s := o.Topic
	if o.Partition != nil {
		s += fmt.Sprintf("[%d]", *o.Partition)
	}
	if o.Offset != nil {
		s += fmt.Sprintf("@%d", *o.Offset)
	}
	return s
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstSet(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// shortClass drops a Java package: com.example.FooException -> FooException.
func javaSimpleName(s string) string {
	if i := strings.LastIndexByte(s, '.'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
