package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/internal/savefile"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

func init() { register(newRedriveCmd) }

func newRedriveCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "Plan (and review) the redrive of dead-lettered records",
		Long: `Redrive plans select DLQ records explicitly, run the redrive checks (ledger,
system of record, ordering hazard, duplicates, loop guard) and record each
record's verdict. A plan is a JSON file whose SHA-256 over a canonical
encoding is its identity; it is also kept in the plan store so every
operator sees it: the cluster's ` + kafka.PlanTopic + ` topic for Kafka,
the redrive store (redrive.store_dsn) for RabbitMQ. The same commands work
on both; flags that only mean something for one backend say so.`,
		Args: noArgs,
	}
	cmd.AddCommand(newRedrivePlanCmd(a), newRedriveShowCmd(a))
	return cmd
}

type redrivePlanOptions struct {
	all          bool
	classes      []string
	offsets      string
	recordKey    string
	header       string
	since, until string
	target       string
	rate         int
	batch        int
	allowHazards bool
	sshKey       string
	out          string
	scanLimit    int64
	readLimit    int
	auditFile    string
}

// loadKey loads the SSH private key named by --key. Its errors already name
// --key; a key that cannot be used is a usage error (exit 2).
func loadKey(path string) (ssh.Signer, error) {
	s, err := approval.LoadSigner(path)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return s, nil
}

// checkSigning loads the author's key and checks the --out directory before
// any work, so that a plan command with a bad key or path fails at once,
// whichever backend it plans for. sign is nil without --key.
func (o redrivePlanOptions) checkSigning() (sign func(subj approval.Subject) (approval.Signature, error), err error) {
	if o.sshKey != "" {
		s, err := loadKey(o.sshKey)
		if err != nil {
			return nil, err
		}
		sign = func(subj approval.Subject) (approval.Signature, error) {
			return approval.Sign(subj, s, approval.RoleAuthor, time.Now())
		}
	}
	if dir := filepath.Dir(o.out); dir != "" && !isDir(dir) {
		return nil, usageErr("--out: directory %s does not exist", dir)
	}
	return sign, nil
}

func newRedrivePlanCmd(a *app) *cobra.Command {
	var o redrivePlanOptions
	var ro rmqPlanOptions
	cmd := &cobra.Command{
		Use:   "plan DLQ --out FILE",
		Short: "Select DLQ records, run the checks, write a plan",
		Long: `Make a redrive plan for DLQ. Nothing is sent: the plan is written to --out,
stored in the cluster's plan store, and executed later (after any review the
policy requires).

Selection is always explicit: --all (every record), --class (repeatable;
ids from berth dlq classes), --offsets P:O,..., or the filters --record-key,
--header NAME=VALUE, --since, --until (RFC 3339); classes and offsets are
united, filters narrow. With no selector the command refuses; a selection
that reaches past the --read records read is refused too, never planned
from a part.

Every selected record is checked, in order:
  already_redriven         the redrive ledger has it (by DLQ coordinates or event id)
  missing_idempotency_key  the policy requires a key (or must look one up) and it has none
                           (or an ambiguous one: a repeated header or JSON key)
  effect_committed         the policy's system-of-record query finds its key
  check_failed             a check could not run (system of record unreachable or
                           erroring, ordering scan cut short, no target): the plan is blocked
  loop_limit               already redriven max_redrives times (default 3)
  duplicate                its event id is also earlier in the selection
  ordering_hazard          a newer record with the same key follows its origin on the
                           original partition (included with --allow-ordering-hazards)

--key signs the plan hash as its author (SSHSIG, namespace berth-redrive).
A blocked plan is still written, for review, and the command exits 1.

JSON: hash, file, dlq, target, author, author_key, stored, blocked,
blocked_reason, records [{partition, offset, event_id, included, reason,
detail, class, target, newer_offset}], totals {selected, included, excluded,
by_reason, by_class}.

RabbitMQ: select with --all, --class, --event-id, --reason or
--original-queue (offsets, keys and times are Kafka's); --read messages are browsed
(default 1,000); --batch-size is the publish window awaiting confirms
(default 500; at most 10,000 on both backends); ordering hazards are checked inside the DLQ by the policy's
ordering_key; --to-queue sends each message to the queue it died in. Records
carry position, original_queue, death_reason, exchange, routing_key,
ordering_key and hazard_position instead of partition/offset/target.`,
		Args: exactArgs("DLQ"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.isRabbit() {
				return a.rmqRedrivePlan(cmd, args[0], o, ro)
			}
			if err := onlyFor(cmd, "RabbitMQ", rabbitOnlyPlanFlags); err != nil {
				return err
			}
			return a.runRedrivePlan(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.all, "all", false, "select every record in the DLQ (must be said explicitly)")
	f.StringArrayVar(&o.classes, "class", nil, "select the records of a failure class id (repeatable)")
	f.StringVar(&o.offsets, "offsets", "", "select records by DLQ coordinates PARTITION:OFFSET,...")
	f.StringVar(&o.recordKey, "record-key", "", "select (or narrow to) records with this key")
	f.StringVar(&o.header, "header", "", "select (or narrow to) records with header NAME=VALUE")
	f.StringVar(&o.since, "since", "", "select (or narrow to) records dead-lettered at or after this time (RFC 3339)")
	f.StringVar(&o.until, "until", "", "select (or narrow to) records dead-lettered before this time (RFC 3339)")
	f.StringVar(&o.target, "target", "", "topic to redrive to (default: each record's original topic)")
	f.IntVar(&o.rate, "rate", actions.DefaultRate, "records per second when executed")
	f.IntVar(&o.batch, "batch-size", actions.DefaultBatchSize, "records per transaction when executed (at most 10,000)")
	f.BoolVar(&o.allowHazards, "allow-ordering-hazards", false, "include records a newer same-key record follows (still reported)")
	f.StringVar(&o.sshKey, "key", "", "SSH private key to sign the plan as its author")
	f.StringVar(&o.out, "out", "", "plan file to write (required)")
	f.Int64Var(&o.scanLimit, "scan-limit", kafka.DefaultScanLimit, "records the ordering scan reads per original partition")
	f.IntVar(&o.readLimit, "read", kafka.DefaultReadLimit, "DLQ records read, oldest first (RabbitMQ: messages browsed, default 1000)")
	addAuditFlag(cmd, &o.auditFile)
	ro.add(cmd)
	return cmd
}

// parseOffsets parses P:O,P:O.
func parseOffsets(s string) ([]redrive.Coord, error) {
	var out []redrive.Coord
	seen := map[redrive.Coord]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ps, os, ok := strings.Cut(part, ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("--offsets: %q is not PARTITION:OFFSET", part)
		}
		c := redrive.Coord{Partition: int32(p), Offset: o}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--offsets: no PARTITION:OFFSET given")
	}
	return out, nil
}

func parseTimeFlag(name, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, fmt.Errorf("--%s: %q is not an RFC 3339 time (2026-11-29T08:00:00Z)", name, v)
	}
	return &t, nil
}

// redrivePlanSummary is the headless result of making (or showing) a plan.
type redrivePlanSummary struct {
	Hash string `json:"hash"`
	File string `json:"file,omitempty"`
	DLQ  string `json:"dlq"`
	planFacts
	Records []redrivePlanRow `json:"records"`
	Totals  redrive.Totals   `json:"totals"`
	// Review is what a reviewer signs, derived from the records: counts
	// per target and the included records' idempotency keys.
	Review *planReview `json:"review,omitempty"`
}

// planReview is actions.Summary with every string sanitised for output.
type planReview struct {
	Cluster string                `json:"cluster"`
	Targets []actions.TargetCount `json:"targets"`
	Keys    []string              `json:"idempotency_keys"`
	// Changed and Gone are records whose content no longer matches the
	// plan's digest, or that left the DLQ: execute skips them.
	Changed []redrive.Coord `json:"changed"`
	Gone    []redrive.Coord `json:"gone"`
}

// reviewOf sanitises s in place (it is the caller's own, fresh from
// actions.Summarise): a million-record plan's keys are not copied.
func reviewOf(s actions.Summary) *planReview {
	r := &planReview{Targets: s.Targets, Keys: s.Keys, Changed: s.Changed, Gone: s.Gone}
	for i := range r.Targets {
		r.Targets[i].Target = sanitize.Text(r.Targets[i].Target)
	}
	for i, k := range r.Keys {
		r.Keys[i] = sanitize.Text(k)
	}
	return r
}

// planFacts are the fields every backend's plan summary shares, under the
// same JSON names.
type planFacts struct {
	Target        string                 `json:"target"`
	Author        string                 `json:"author"`
	AuthorKey     string                 `json:"author_key,omitempty"`
	Approvals     []string               `json:"approvals"`
	Stored        bool                   `json:"stored"`
	StoreNote     string                 `json:"store_note,omitempty"`
	Blocked       bool                   `json:"blocked"`
	BlockedReason string                 `json:"blocked_reason,omitempty"`
	CreatedAt     time.Time              `json:"created_at"`
	Policy        redrive.PolicySnapshot `json:"policy"`
	// Warnings name each permanent class the plan includes, judged from
	// the records read (actions: warnings.go); empty when none, or when the
	// records were not read.
	Warnings []string `json:"warnings"`
}

// warningsOf is a review's warnings sanitised for output (they quote the
// records' exception messages).
func warningsOf(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = sanitize.Text(w)
	}
	return out
}

// writeWarnings writes a plan's warnings as text, one line each.
func writeWarnings(w io.Writer, ws []string) {
	for _, x := range ws {
		fmt.Fprintf(w, "WARNING: %s\n", x)
	}
}

type redrivePlanRow struct {
	Partition   int32          `json:"partition"`
	Offset      int64          `json:"offset"`
	EventID     string         `json:"event_id"`
	Included    bool           `json:"included"`
	Reason      redrive.Reason `json:"reason"`
	Detail      string         `json:"detail,omitempty"`
	Class       string         `json:"class"`
	Target      string         `json:"target"`
	NewerOffset *int64         `json:"newer_offset,omitempty"`
}

// planSummaryOf is what plan, show and execute print about a plan, every
// record listed.
func planSummaryOf(f redrive.File) redrivePlanSummary {
	s := planHeadOf(f)
	s.Records = planRowsOf(f.Plan.Records)
	return s
}

// planHeadOf is planSummaryOf without the records: JSON output streams them
// (writePlanJSON), a million rows built at once being what the plan
// command's memory would otherwise peak on.
func planHeadOf(f redrive.File) redrivePlanSummary {
	s := redrivePlanSummary{
		Hash: f.Hash, DLQ: sanitize.Text(f.Plan.DLQ), Totals: f.Plan.Totals(), Records: []redrivePlanRow{},
		planFacts: planFacts{Target: sanitize.Text(f.Plan.Target), Author: sanitize.Text(f.Plan.Author),
			CreatedAt: f.Plan.CreatedAt, Policy: f.Plan.Policy, Approvals: []string{}, Warnings: []string{}},
	}
	if s.Target == "" {
		s.Target = "(original topics)"
	}
	if au := f.Author(); au != nil {
		s.AuthorKey = au.Fingerprint
	}
	for _, ap := range f.Approvals() {
		s.Approvals = append(s.Approvals, ap.Fingerprint)
	}
	s.Blocked, s.BlockedReason = f.Plan.Blocked()
	s.BlockedReason = sanitize.Text(s.BlockedReason)
	return s
}

// planRowsOf lists a plan's records as output shows them.
func planRowsOf(recs []redrive.PlanRecord) []redrivePlanRow {
	rows := make([]redrivePlanRow, 0, len(recs))
	for _, r := range recs {
		rows = append(rows, planRowOf(r))
	}
	return rows
}

// planRowOf is one record of a plan as output shows it (sanitised).
func planRowOf(r redrive.PlanRecord) redrivePlanRow {
	return redrivePlanRow{
		Partition: r.Partition, Offset: r.Offset, EventID: sanitize.Text(r.EventID), Included: r.Included,
		Reason: r.Reason, Detail: sanitize.Text(r.Detail), Class: r.Class, Target: sanitize.Text(r.Target), NewerOffset: r.NewerOffset,
	}
}

// writePlanJSON writes exactly what output.WriteJSON writes for s with
// recs as its records, encoding one record (and one review key) at a time
// instead of the whole document in one buffer (hundreds of MiB at a
// million records).
func writePlanJSON(w io.Writer, s redrivePlanSummary, recs []redrive.PlanRecord) error {
	s.Records = []redrivePlanRow{}
	var keys []string
	if s.Review != nil {
		r := *s.Review
		keys, r.Keys = r.Keys, []string{}
		s.Review = &r
	}
	var head bytes.Buffer
	if err := output.WriteJSON(&head, s); err != nil {
		return err
	}
	doc := head.Bytes()
	// Each list is the only field with its name at its indentation (the
	// records at the top level, the keys in the review); a string value
	// cannot hold a raw newline. Records come first in the document.
	lists := []struct {
		empty, indent string
		n             int
		item          func(i int) ([]byte, error)
	}{
		{"\n  \"records\": []", "  ", len(recs), func(i int) ([]byte, error) { return json.MarshalIndent(planRowOf(recs[i]), "    ", "  ") }},
		{"\n    \"idempotency_keys\": []", "    ", len(keys), func(i int) ([]byte, error) { return json.Marshal(keys[i]) }},
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, l := range lists {
		at := bytes.Index(doc, []byte(l.empty))
		if at < 0 && l.n > 0 {
			return fmt.Errorf("plan JSON: no %q to write %d items in", l.empty[1:], l.n)
		}
		if l.n == 0 {
			continue
		}
		bw.Write(doc[:at+len(l.empty)-1]) // through the '['
		for i := 0; i < l.n; i++ {
			item, err := l.item(i)
			if err != nil {
				return err
			}
			bw.WriteString("\n  " + l.indent)
			bw.Write(item)
			if i < l.n-1 {
				bw.WriteByte(',')
			}
		}
		bw.WriteString("\n" + l.indent + "]")
		doc = doc[at+len(l.empty):]
	}
	bw.Write(doc)
	return bw.Flush()
}

func (a *app) runRedrivePlan(cmd *cobra.Command, dlq string, o redrivePlanOptions) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	if o.out == "" {
		return usageErr("--out: a plan file is required")
	}
	req := actions.PlanRequest{DLQ: dlq, All: o.all, Classes: o.classes, Key: o.recordKey, Header: o.header, Target: o.target,
		Rate: o.rate, BatchSize: o.batch, AllowHazards: o.allowHazards}
	if o.offsets != "" {
		if req.Offsets, err = parseOffsets(o.offsets); err != nil {
			return usageErr("%v", err)
		}
	}
	if req.Since, err = parseTimeFlag("since", o.since); err != nil {
		return usageErr("%v", err)
	}
	if req.Until, err = parseTimeFlag("until", o.until); err != nil {
		return usageErr("%v", err)
	}
	if o.rate < 1 {
		return usageErr("--rate: must be at least 1 record per second")
	}
	if o.batch < 1 {
		return usageErr("--batch-size: must be at least 1")
	}
	if err := redrive.CheckBatch(o.batch); err != nil {
		return usageErr("--batch-size: %v", err)
	}
	if o.scanLimit < 1 {
		return usageErr("--scan-limit: must be at least 1")
	}
	if o.readLimit < 1 {
		return usageErr("--read: must be at least 1")
	}
	if req.Header != "" {
		if n, _, ok := strings.Cut(req.Header, "="); !ok || n == "" {
			return usageErr("--header: %q is not NAME=VALUE", req.Header)
		}
	}
	if (redrive.Selection{All: req.All, Classes: req.Classes, Offsets: req.Offsets, Key: req.Key, Header: req.Header, Since: req.Since, Until: req.Until}).Empty() {
		return usageErr("%v", actions.ErrNoSelector)
	}
	sign, err := o.checkSigning()
	if err != nil {
		return err
	}

	// A plan reads up to --read records from the DLQ and the ordering scan
	// up to --scan-limit: both grow the time it may take (workBudget).
	ctx, cancel := context.WithTimeout(cmd.Context(), workBudget(a.timeout, work{int64(o.readLimit), planReadPerSecond}, work{o.scanLimit, scanPerSecond}))
	defer cancel()
	p, closeFn, err := a.planner(ctx, o.readLimit)
	if err != nil {
		return err
	}
	defer closeFn()
	p.ScanLimit = o.scanLimit
	p.Progress = scanProgressPrinter(a.stderr)
	file, review, err := p.PlanReviewed(ctx, req)
	if err != nil {
		if errors.Is(err, actions.ErrBadRequest) {
			return usageErr("%v", err)
		}
		return err
	}
	if sign != nil {
		sig, err := sign(approval.Subject{PlanHash: file.Hash, Cluster: file.Plan.Cluster})
		if err != nil {
			return err
		}
		file.Signatures = append(file.Signatures, sig)
	}
	// Recorded (audited, then stored) before the file is written: a plan
	// the audit log cannot record is refused, nothing stored or written,
	// as approve and execute refuse.
	k := &actions.KafkaRedrive{Planner: p, Store: p.Store, ReadOnly: a.readOnly, Context: a.ctxName,
		OpenAudit: func() (*audit.Log, func(), error) {
			l, err := a.openAudit(o.auditFile)
			return l, func() {}, err
		}}
	rec, err := k.RecordPlan(ctx, file, o.out)
	if err != nil {
		return err
	}
	// Written as it is encoded: a million-record plan file is ~65 MB.
	if _, err := savefile.WriteFunc(o.out, file.Write, true); err != nil {
		return fmt.Errorf("--out: %v", err)
	}
	sum := planHeadOf(file)
	sum.File = o.out
	sum.Review = reviewOf(review)
	sum.Review.Cluster = sanitize.Text(file.Plan.Cluster)
	sum.Warnings = warningsOf(review.Warnings)
	sum.Stored, sum.StoreNote = rec.Stored, rec.StoreNote
	if f == output.JSON {
		if err := writePlanJSON(a.stdout, sum, file.Plan.Records); err != nil {
			return err
		}
	} else {
		writePlanText(a.stdout, sum, file.Plan.Records)
	}
	if sum.Blocked {
		return &exitError{code: 1, err: fmt.Errorf("plan %s is blocked: %s", file.Hash[:12], sum.BlockedReason)}
	}
	return nil
}

// scanProgressPrinter prints the ordering scan's progress on stderr at most
// every 10%.
func scanProgressPrinter(w io.Writer) func(kafka.ScanProgress) {
	last := int64(-1)
	return func(p kafka.ScanProgress) {
		if p.Total == 0 {
			return
		}
		step := p.Read * 10 / p.Total
		if step == last {
			return
		}
		last = step
		fmt.Fprintf(w, "ordering scan: %d/%d records (%d%%)\n", p.Read, p.Total, p.Read*100/p.Total)
	}
}

// writeFileAtomic writes a plan (or a config note) to path, replacing a
// file whole; a device or pipe is written in place (savefile.Write).
func writeFileAtomic(path string, data []byte) error {
	_, err := savefile.Write(path, data, true)
	return err
}

// writePlanText writes s as text with recs as its records (s.Records is
// not read: the text, like the JSON, is written from the plan's own
// records without building a row list).
func writePlanText(w io.Writer, s redrivePlanSummary, recs []redrive.PlanRecord) {
	fmt.Fprintf(w, "plan %s\n", s.Hash)
	if s.File != "" {
		fmt.Fprintf(w, "file %s\n", sanitize.Text(s.File))
	}
	fmt.Fprintf(w, "dlq %s -> %s  author %s", s.DLQ, s.Target, s.Author)
	if s.AuthorKey != "" {
		fmt.Fprintf(w, " (signed %s)", s.AuthorKey)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "policy review=%s approvals=%d max_redrives=%d require_key=%v", s.Policy.Review, s.Policy.Approvals, s.Policy.MaxRedrives, s.Policy.RequireIdempotencyKey)
	if s.Policy.SystemOfRecord != "" {
		fmt.Fprintf(w, " system_of_record=%s", sanitize.Text(s.Policy.SystemOfRecord))
	}
	fmt.Fprintln(w)
	// A row at a time, twice (widths, then text): a million records as
	// cells would take hundreds of MiB on top of the plan.
	output.Rows{Header: []string{"PARTITION", "OFFSET", "EVENT", "CLASS", "VERDICT", "DETAIL"}, Right: map[int]bool{0: true, 1: true},
		N: len(recs), Row: func(i int) []string { return planTextRow(recs[i]) }}.WriteTable(w)
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
	var classes []string
	for c := range t.ByClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		cc := t.ByClass[c]
		fmt.Fprintf(w, "class %s: %d selected, %d included\n", c, cc.Selected, cc.Included)
	}
	switch {
	case s.Stored:
		fmt.Fprintf(w, "stored in %s\n", kafka.PlanTopic)
	case s.StoreNote != "":
		fmt.Fprintf(w, "%s\n", sanitize.Text(s.StoreNote))
	}
	if s.Blocked {
		fmt.Fprintf(w, "BLOCKED: %s\n", s.BlockedReason)
	}
	if r := s.Review; r != nil {
		writeReviewText(w, r)
	}
	writeWarnings(w, s.Warnings)
}

// planTextRow is one record of a plan as its text table shows it
// (sanitised, the detail clipped).
func planTextRow(r redrive.PlanRecord) []string {
	verdict := "include"
	if !r.Included {
		verdict = string(r.Reason)
	}
	return []string{strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10), sanitize.Text(dashIfEmpty(r.EventID)),
		sanitize.Text(r.Class), sanitize.Text(verdict), sanitize.Text(clip(sanitize.Text(r.Detail), 90))}
}

// reviewKeysShown bounds the keys printed as text; -o json has them all.
const reviewKeysShown = 20

func writeReviewText(w io.Writer, r *planReview) {
	writeReviewCounts(w, "records", r.Targets, r.Keys)
	if len(r.Changed) > 0 {
		fmt.Fprintf(w, "CHANGED since the plan was made (execute skips them): %s\n", coordList(r.Changed))
	}
	if len(r.Gone) > 0 {
		fmt.Fprintf(w, "GONE from the DLQ (execute skips them): %s\n", coordList(r.Gone))
	}
}

// writeReviewCounts writes what a reviewer signs, on either backend: the
// counts per target and the included records' idempotency keys (what
// names them: "records", "messages").
// reviewKeyChars is how much of one idempotency key the text review
// shows: a key taken from a message's header or payload can be tens of
// kilobytes, and a 60 KB key was printed whole on one line of the review,
// twice for two messages.
const reviewKeyChars = 120

// shortKey is a key as the text review lists it: at most reviewKeyChars
// characters, and how much more there is (-o json gives it whole).
func shortKey(k string) string {
	r := []rune(k)
	if len(r) <= reviewKeyChars {
		return k
	}
	return fmt.Sprintf("%s…(+%d characters; -o json has it whole)", string(r[:reviewKeyChars]), len(r)-reviewKeyChars)
}

func writeReviewCounts(w io.Writer, what string, targets []actions.TargetCount, keys []string) {
	fmt.Fprintf(w, "review (derived from the %s as they are now):\n", what)
	g := output.Grid{Header: []string{"TARGET", "INCLUDED", "EXCLUDED"}, Right: map[int]bool{1: true, 2: true}}
	for _, t := range targets {
		g.Add(t.Target, strconv.Itoa(t.Included), strconv.Itoa(t.Excluded))
	}
	g.WriteTable(w)
	// Only the keys shown are copied (a million-key review is not).
	more := max(len(keys)-reviewKeysShown, 0)
	keys = append([]string(nil), keys[:len(keys)-more]...)
	for i := range keys {
		keys[i] = dashIfEmpty(shortKey(keys[i]))
	}
	list := strings.Join(keys, ", ")
	if len(keys) == 0 {
		list = "(none: nothing is included)"
	}
	fmt.Fprintf(w, "idempotency keys of the included %s: %s", what, list)
	if more > 0 {
		fmt.Fprintf(w, " ... and %d more (all with -o json)", more)
	}
	fmt.Fprintln(w)
}

func coordList(cs []redrive.Coord) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return strings.Join(out, ",")
}

func newRedriveShowCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show PLAN",
		Short: "Show a plan (a file, or a hash prefix in the cluster's plan store)",
		Long: `Show a redrive plan: its hash, author, policy, every record's verdict, and
counts by verdict and class. PLAN is a plan file, or at least 8 hex digits of
a plan hash stored in the cluster's plan store. A file whose content does not
match its hash is refused.

JSON: as berth redrive plan, plus approvals (signers' key fingerprints).`,
		Args: exactArgs("PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.isRabbit() {
				return a.rmqRedriveShow(cmd, args[0])
			}
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			file, where, err := a.loadPlan(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			// What a reviewer sees is derived from the records now, with
			// the plan's policy: the file says only which records. The
			// re-read grows with the plan (workCtx).
			ctx, cancel := a.workCtx(cmd.Context(), len(file.Plan.Records))
			defer cancel()
			s, err := a.redriveSession(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			// Refused for another cluster's plan (actions.ErrClusterMismatch).
			review, err := a.kafkaRedrive(s, "", "").DeriveReview(ctx, &file)
			if err != nil {
				return err
			}
			sum := planHeadOf(file)
			sum.File = where
			sum.Stored = where == ""
			sum.Review = reviewOf(review)
			sum.Review.Cluster = sanitize.Text(file.Plan.Cluster)
			sum.Warnings = warningsOf(review.Warnings)
			if f == output.JSON {
				return writePlanJSON(a.stdout, sum, file.Plan.Records)
			}
			writePlanText(a.stdout, sum, file.Plan.Records)
			return nil
		},
	}
	return cmd
}

// loadPlan reads a plan from a file, or by hash prefix from the plan store;
// where is the file ("" for the store).
func (a *app) loadPlan(parent context.Context, ref string) (redrive.File, string, error) {
	if f, err, derr := readPlanFile(ref); err == nil {
		if refused := actions.OtherBackendRefusal(ref, derr); refused != nil {
			return redrive.File{}, "", refused
		}
		if derr != nil {
			return redrive.File{}, "", fmt.Errorf("%s: %v", ref, derr)
		}
		return f, ref, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return redrive.File{}, "", fmt.Errorf("%s: %v", ref, errors.Unwrap(err))
	}
	if !isHexPrefix(ref) {
		return redrive.File{}, "", notAPlanRef(ref)
	}
	ctx, cancel := a.opCtx(parent)
	defer cancel()
	c, err := a.kafkaClient(ctx)
	if err != nil {
		return redrive.File{}, "", err
	}
	defer c.Close()
	f, err := kafka.NewPlanStore(c).Plan(ctx, ref)
	return f, "", err
}

// readPlanFile reads and decodes the plan file at path as it is read
// (redrive.DecodeFileFrom: a million-record file is ~65 MB, never held
// whole). readErr is what os.ReadFile would have returned (the file cannot
// be opened or read); err is the file's content refused.
func readPlanFile(path string) (f redrive.File, readErr, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return redrive.File{}, err, nil
	}
	defer fh.Close()
	r := &firstReadError{r: fh}
	f, err = redrive.DecodeFileFrom(r)
	if r.err != nil {
		return redrive.File{}, r.err, nil
	}
	return f, nil, err
}

// firstReadError keeps the first error reading r other than its end.
type firstReadError struct {
	r   io.Reader
	err error
}

// Size is the file's size when r is a regular file (0 otherwise): a plan
// file's records are then allocated once (redrive.DecodeFileFrom).
func (e *firstReadError) Size() int64 {
	if s, ok := e.r.(interface{ Size() int64 }); ok {
		return s.Size()
	}
	if f, ok := e.r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
	}
	return 0
}

func (e *firstReadError) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// notAPlanRef refuses a PLAN argument that names no file and is not a hash
// prefix: one usage error (exit 2) for every redrive command on both
// backends, before any plan store is asked.
func notAPlanRef(ref string) error {
	return usageErr("PLAN: %s is neither a plan file nor a plan hash (8+ hex digits)", ref)
}

func isHexPrefix(s string) bool {
	if len(s) < 8 || len(s) > 64 {
		return false
	}
	for _, r := range strings.ToLower(s) {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
