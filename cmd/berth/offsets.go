package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/offsets"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui"
)

var _ actions.ResetBackend = (*kafka.Resets)(nil)

// openConsoleResetter is the console's reset dialog's action (tui/offsets,
// R on a group; consoleServices): the same action as `berth offsets reset`
// on the console's connection, audit file and group policies.
func openConsoleResetter(c backends.Cluster, env tui.PageEnv) (*actions.Resetter, error) {
	k, ok := c.(*kafka.Cluster)
	if !ok {
		return nil, errors.New("offset resets need a Kafka context")
	}
	path := auditPathFor("", env.Config)
	log, err := audit.Open(path, audit.WithSink(consoleAuditSink(env.Context, path, k.Client().Options())))
	if err != nil {
		return nil, err
	}
	return &actions.Resetter{
		Backend:  kafka.ResetsOn(k),
		Audit:    log,
		Context:  env.Context,
		ReadOnly: env.ReadOnly,
		Effects: func(g string) bool {
			// The demo's payments-* effects policy applies on its broker,
			// as in the CLI.
			p, _ := demoAwareConfig(env.Config, env.Config.Contexts[env.Context]).GroupPolicyFor(g)
			return p.Effects
		},
	}, nil
}

// `berth offsets reset GROUP <mode> [scope] [--execute]`: the headless
// offset reset. A dry run by default; the plan it prints is exactly what
// --execute commits, after re-reading the group (see internal/actions.Resetter).

type resetFlags struct {
	toEarliest, toLatest, toCurrent bool
	toOffset, shiftBy               int64
	toDatetime, byDuration          string
	fromGroup, fromFile             string
	allTopics                       bool
	topics                          []string
	execute, confirmEffects         bool
	planIn, planOut                 string
	auditFile                       string
}

func init() {
	register(func(a *app) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "offsets",
			Short: "Consumer-group offsets: reset with a dry run, guards and an audit trail",
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return usageErr("%s: name a subcommand: reset", cmd.CommandPath())
			},
		}
		var fl resetFlags
		reset := &cobra.Command{
			Use:   "reset GROUP (--to-earliest|--to-latest|--to-current|--to-offset N|--shift-by ±N|--to-datetime T|--by-duration D|--from-group G|--from-file F) (--all-topics|--topic T[:P,P])... [--execute]",
			Short: "Reset a consumer group's committed offsets (dry run unless --execute)",
			Long: `Reset a consumer group's committed offsets with the semantics of Kafka's
kafka-consumer-groups --reset-offsets. Without --execute it only prints the
plan: per partition the current and new offset, the change, and the records
replayed or skipped with the time span they cover. --execute commits exactly
those offsets after re-reading the group: it is refused while the group has
members, in read-only contexts, when the group's offsets changed since the
plan was computed, and for effect-producing groups without
--confirm-replay-effects. Every executed reset is written to the audit log.`,
			Args: exactArgs("GROUP"),
			RunE: func(cmd *cobra.Command, args []string) error { return a.runOffsetsReset(cmd, args[0], fl) },
		}
		f := reset.Flags()
		f.BoolVar(&fl.toEarliest, "to-earliest", false, "reset to the log start offset")
		f.BoolVar(&fl.toLatest, "to-latest", false, "reset to the log end offset")
		f.BoolVar(&fl.toCurrent, "to-current", false, "reset to the current committed offset (log end where none)")
		f.Int64Var(&fl.toOffset, "to-offset", 0, "reset to offset N (clamped to the log)")
		f.Int64Var(&fl.shiftBy, "shift-by", 0, "move the committed offset by ±N (clamped; needs a committed offset)")
		f.StringVar(&fl.toDatetime, "to-datetime", "", "reset to the first record at or after an RFC 3339 time (no zone means UTC)")
		f.StringVar(&fl.byDuration, "by-duration", "", "reset to the first record at or after this long ago (15m, 2h, PT15M)")
		f.StringVar(&fl.fromGroup, "from-group", "", "copy another group's committed offsets")
		f.StringVar(&fl.fromFile, "from-file", "", "reset to offsets from a CSV file of topic,partition,offset lines")
		f.BoolVar(&fl.allTopics, "all-topics", false, "every partition the group has committed offsets for")
		f.StringArrayVar(&fl.topics, "topic", nil, "topic T, or T:0,3,5 for some partitions (repeatable)")
		f.BoolVar(&fl.execute, "execute", false, "apply the plan (default: dry run only)")
		f.BoolVar(&fl.confirmEffects, "confirm-replay-effects", false, "allow replaying records of an effect-producing group (config groups[].effects)")
		f.StringVar(&fl.planIn, "plan", "", "with --execute: execute a plan saved by --dry-run-out (refused if the group changed since)")
		f.StringVar(&fl.planOut, "dry-run-out", "", "save the dry run's plan to this file for a later --execute --plan")
		addAuditFlag(reset, &fl.auditFile)
		cmd.AddCommand(reset)
		return cmd
	})
}

// consoleSinks holds one audit-topic mirror per context for the console's
// lifetime (the dialog builds a Resetter per request; a sink per request
// would leave a connection behind each time).
var consoleSinks struct {
	sync.Mutex
	m map[string]*kafka.AuditSink
}

func consoleAuditSink(ctxName, path string, opts kafka.Options) *kafka.AuditSink {
	consoleSinks.Lock()
	defer consoleSinks.Unlock()
	if consoleSinks.m == nil {
		consoleSinks.m = map[string]*kafka.AuditSink{}
	}
	key := ctxName + "\x00" + path
	if s, ok := consoleSinks.m[key]; ok {
		return s
	}
	s := kafka.NewAuditSink(opts, auditSource(path))
	consoleSinks.m[key] = s
	return s
}

// modeFlags maps each mode to its flag name, in the order they are offered.
var modeFlags = []offsets.Mode{offsets.ToEarliest, offsets.ToLatest, offsets.ToCurrent, offsets.ToOffset,
	offsets.ShiftBy, offsets.ToDatetime, offsets.ByDuration, offsets.FromGroup, offsets.FromFile}

// request turns the flags into a reset request; every problem is a usage
// error naming the flag.
func (fl resetFlags) request(cmd *cobra.Command, group string) (actions.ResetRequest, error) {
	req := actions.ResetRequest{Group: group}
	var given []string
	for _, m := range modeFlags {
		if cmd.Flags().Changed(string(m)) {
			given = append(given, "--"+string(m))
		}
	}
	if fl.planIn != "" {
		if len(given) > 0 || fl.allTopics || len(fl.topics) > 0 {
			return req, usageErr("--plan: the saved plan carries its own mode and scope; drop %s", strings.Join(append(given, scopeFlags(fl)...), " "))
		}
		if !fl.execute {
			return req, usageErr("--plan: executes a saved dry run; add --execute")
		}
		return req, nil
	}
	switch len(given) {
	case 0:
		return req, usageErr("no reset mode: give one of --to-earliest, --to-latest, --to-current, --to-offset N, --shift-by N, --to-datetime T, --by-duration D, --from-group G, --from-file F")
	case 1:
	default:
		return req, usageErr("give one reset mode, not %s", strings.Join(given, " and "))
	}
	if fl.execute && fl.planOut != "" {
		return req, usageErr("--dry-run-out: saves a dry run; it does not go with --execute")
	}
	spec := offsets.Spec{Mode: offsets.Mode(strings.TrimPrefix(given[0], "--"))}
	switch spec.Mode {
	case offsets.ToOffset:
		if fl.toOffset < 0 {
			return req, usageErr("--to-offset: %d is negative", fl.toOffset)
		}
		spec.Offset = fl.toOffset
	case offsets.ShiftBy:
		if fl.shiftBy == 0 {
			return req, usageErr("--shift-by: 0 changes nothing (use a signed count, e.g. --shift-by -100)")
		}
		spec.Shift = fl.shiftBy
	case offsets.ToDatetime:
		t, err := offsets.ParseDatetime(fl.toDatetime)
		if err != nil {
			return req, usageErr("%v", err)
		}
		spec.Time = t
	case offsets.ByDuration:
		d, err := offsets.ParseDuration(fl.byDuration)
		if err != nil {
			return req, usageErr("%v", err)
		}
		spec.Duration = d
	case offsets.FromGroup:
		if strings.TrimSpace(fl.fromGroup) == "" {
			return req, usageErr("--from-group: empty group name")
		}
		if fl.fromGroup == group {
			return req, usageErr("--from-group %s: that is the group being reset", group)
		}
		spec.Group = fl.fromGroup
	case offsets.FromFile:
		fh, err := os.Open(fl.fromFile)
		if err != nil {
			return req, usageErr("--from-file: cannot read %s: %v", fl.fromFile, errors.Unwrap(err))
		}
		defer fh.Close()
		rows, err := offsets.ParseCSV(fl.fromFile, fh)
		if err != nil {
			return req, usageErr("--from-file %v", err)
		}
		spec.File, spec.FileName = rows, fl.fromFile
	}
	req.Spec = spec
	if fl.allTopics && len(fl.topics) > 0 {
		return req, usageErr("--all-topics and --topic: give one or the other")
	}
	req.Scope.AllTopics = fl.allTopics
	for _, t := range fl.topics {
		ts, err := offsets.ParseTopicScope(t)
		if err != nil {
			return req, usageErr("%v", err)
		}
		req.Scope.Topics = append(req.Scope.Topics, ts)
	}
	if req.Scope.Empty() && spec.Mode != offsets.FromFile && spec.Mode != offsets.FromGroup {
		return req, usageErr("no scope: give --all-topics or --topic T[:P,P...]")
	}
	return req, nil
}

func scopeFlags(fl resetFlags) []string {
	var out []string
	if fl.allTopics {
		out = append(out, "--all-topics")
	}
	for _, t := range fl.topics {
		out = append(out, "--topic "+t)
	}
	return out
}

// resetOutput is the JSON of `berth offsets reset`.
type resetOutput struct {
	Group      string        `json:"group"`
	Context    string        `json:"context"`
	Mode       string        `json:"mode"`
	GroupState string        `json:"group_state"`
	Members    []string      `json:"members"`
	Effects    bool          `json:"effects"`
	Executed   bool          `json:"executed"`
	Verified   bool          `json:"verified"`
	AuditSeq   int64         `json:"audit_seq,omitempty"`
	Refused    string        `json:"refused,omitempty"`
	Digest     string        `json:"plan_digest"`
	PlanFile   string        `json:"plan_file,omitempty"`
	Partitions []offsets.Row `json:"partitions"`
	Warnings   []string      `json:"warnings"`
}

func (a *app) runOffsetsReset(cmd *cobra.Command, group string, fl resetFlags) error {
	f, err := a.format(output.Table, output.JSON)
	if err != nil {
		return err
	}
	req, err := fl.request(cmd, group)
	if err != nil {
		return err
	}
	var saved *offsets.Plan
	if fl.planIn != "" {
		b, err := os.ReadFile(fl.planIn)
		if err != nil {
			return fmt.Errorf("--plan: cannot read %s: %v", fl.planIn, errors.Unwrap(err))
		}
		p, err := offsets.ParsePlan(fl.planIn, b)
		if err != nil {
			return err
		}
		if p.Group != group {
			return fmt.Errorf("--plan %s: the plan is for group %s, not %s", fl.planIn, sanitize.Text(p.Group), group)
		}
		saved = &p
	}

	// SIGINT/SIGTERM cancel the context instead of killing the process, so
	// an interrupted execute still records its outcome in the audit log
	// (the commit itself is one request: applied whole or not at all).
	sigCtx, stop := signalContext(cmd)
	defer stop()
	ctx, cancel := a.opCtx(sigCtx)
	defer cancel()
	cl, err := a.kafkaClient(ctx)
	if err != nil {
		return err
	}
	backend := kafka.NewResets(cl)
	defer backend.Close()
	r := &actions.Resetter{
		Backend:  backend,
		Context:  a.ctxName,
		ReadOnly: a.readOnly,
		Effects: func(g string) bool {
			// The demo's payments-* effects policy applies on its broker.
			p, _ := a.redriveConfig().GroupPolicyFor(g)
			return p.Effects
		},
	}

	var plan offsets.Plan
	if saved != nil {
		plan = *saved
	} else if plan, err = r.Plan(ctx, req); err != nil {
		return sanitizeErr(err)
	}
	out := resetOutput{Group: plan.Group, Context: plan.Context, Mode: strings.TrimSpace(plan.Spec.String() + " " + plan.Scope.String()),
		GroupState: plan.GroupState, Members: memberList(plan), Effects: plan.Effects, Digest: plan.Digest,
		Partitions: plan.Partitions, Warnings: append([]string{}, plan.Warnings...)}

	if fl.planOut != "" {
		if err := writePlan(fl.planOut, plan); err != nil {
			return err
		}
		out.PlanFile = fl.planOut
	}

	var execErr error
	if fl.execute {
		// A read-only context refuses before the audit log is even opened
		// (Execute checks ReadOnly first).
		var log *audit.Log
		var err error
		if !a.readOnly {
			log, err = a.openAudit(fl.auditFile)
		}
		if err != nil {
			execErr = fmt.Errorf("refused: %w", err)
		} else {
			r.Audit = log
			// A fresh deadline: the dry run may have used most of the first.
			ectx, ecancel := a.opCtx(sigCtx)
			defer ecancel()
			res, err := r.Execute(ectx, plan, actions.ResetOptions{ConfirmReplayEffects: fl.confirmEffects})
			out.Executed, out.Verified, out.AuditSeq = res.Executed, res.Verified, res.AuditSeq
			if res.Warning != "" {
				out.Warnings = append(out.Warnings, res.Warning)
			}
			execErr = err
		}
		if errors.Is(execErr, actions.ErrReadOnly) {
			execErr = a.readOnlyErr(execErr)
		}
		if execErr != nil {
			out.Refused = sanitize.Text(execErr.Error())
		}
	}

	if f == output.JSON {
		if err := output.WriteJSON(a.stdout, out); err != nil {
			return err
		}
	} else if err := writeResetTable(a.stdout, out, fl); err != nil {
		return err
	}
	if execErr != nil {
		return sanitizeErr(execErr)
	}
	return nil
}

// sanitizeErr keeps names read from the cluster (member and client ids,
// topic names) from carrying terminal escapes into the error line.
func sanitizeErr(err error) error {
	if err == nil {
		return nil
	}
	var ex *exitError
	if errors.As(err, &ex) {
		return err
	}
	return &sanitizedError{msg: sanitize.Text(err.Error()), err: err}
}

// sanitizedError prints the escaped text but keeps the cause, so callers
// still match actions.ErrReadOnly and the other refusals with errors.Is.
type sanitizedError struct {
	msg string
	err error
}

func (e *sanitizedError) Error() string { return e.msg }
func (e *sanitizedError) Unwrap() error { return e.err }

func memberList(p offsets.Plan) []string {
	out := []string{}
	for _, m := range p.Members {
		out = append(out, strings.TrimSpace(m.ClientID+" "+m.ID+" "+m.Host))
	}
	return out
}

func writePlan(path string, p offsets.Plan) error {
	b, err := jsonIndent(p)
	if err != nil {
		return err
	}
	// Written whole to a temporary file and renamed: an interrupted write
	// never leaves half a plan to execute.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("--dry-run-out: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--dry-run-out: %w", err)
	}
	return nil
}

func jsonIndent(v any) ([]byte, error) {
	var b strings.Builder
	if err := output.WriteJSON(&b, v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func writeResetTable(w io.Writer, out resetOutput, fl resetFlags) error {
	state := out.GroupState
	if state == "" {
		state = "unknown"
	}
	fmt.Fprintf(w, "Group %s (%s, %d member(s)) on context %s: %s\n\n", sanitize.Text(out.Group), sanitize.Text(state),
		len(out.Members), sanitize.Text(out.Context), sanitize.Text(out.Mode))
	g := output.Grid{Header: []string{"TOPIC", "PARTITION", "CURRENT", "NEW", "CHANGE", "IMPACT", "CLAMPED"},
		Right: map[int]bool{1: true, 2: true, 3: true, 4: true}}
	for _, r := range out.Partitions {
		cur, change, clamp := r.CurrentText(), r.ChangeText(), r.ClampText()
		g.Add(r.Topic, fmt.Sprint(r.Partition), cur, fmt.Sprint(r.Target), change, r.Impact(), clamp)
	}
	if err := g.WriteTable(w); err != nil {
		return err
	}
	var replay, skip int64
	for _, r := range out.Partitions {
		replay += r.ReplayRecords
		skip += r.SkipRecords
	}
	fmt.Fprintf(w, "\nTotal: replay %d record(s), skip %d record(s).\n", replay, skip)
	for _, warn := range out.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", sanitize.Text(warn))
	}
	switch {
	case out.Executed:
		v := "verified: the committed offsets read back match the plan"
		if !out.Verified {
			v = "NOT verified: see the warning above"
		}
		fmt.Fprintf(w, "Executed: offsets committed (%s); audit entry %d.\n", v, out.AuditSeq)
	case out.Refused != "":
		fmt.Fprintln(w, "Not executed: nothing committed.")
	default:
		fmt.Fprintln(w, "Dry run: nothing committed. Add --execute to apply exactly these offsets.")
		if out.PlanFile != "" {
			fmt.Fprintf(w, "Plan saved to %s (digest %s). Execute it with: berth offsets reset %s --execute --plan %s\n",
				sanitize.Text(out.PlanFile), shortDigest(out.Digest), sanitize.Text(out.Group), sanitize.Text(out.PlanFile))
		}
	}
	return nil
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
