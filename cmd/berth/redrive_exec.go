package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/berth-dev/berth/backends/bundled"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/demo"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

func init() {
	registerUnder("redrive", newRedriveApproveCmd)
	registerUnder("redrive", newRedriveExecuteCmd)
	registerUnder("redrive", newRedriveStatusCmd)
}

// redriveSession is a connection to the cluster with the plan store and the
// planner (policies, checks) for the current config.
type redriveSession struct {
	cl      *kafka.Client
	cluster *kafka.Cluster
	store   *kafka.PlanStore
	planner *actions.Planner
	// readOnly is the context's: a plan file is then checked, never stored.
	readOnly bool
}

func (a *app) redriveSession(ctx context.Context) (*redriveSession, error) {
	cl, err := a.kafkaClient(ctx)
	if err != nil {
		return nil, err
	}
	k := kafka.NewCluster(cl)
	return &redriveSession{cl: cl, cluster: k, store: kafka.NewPlanStore(cl), planner: actions.NewPlanner(k, a.redriveConfig()), readOnly: a.readOnly}, nil
}

func (s *redriveSession) Close() { s.cl.Close() }

// actions is the redrive actions on the session's cluster, as this
// invocation runs them (read-only, audit log, actor).
func (a *app) kafkaRedrive(s *redriveSession, auditFile, actor string) *actions.KafkaRedrive {
	return &actions.KafkaRedrive{
		Planner: s.planner, Store: actions.KafkaStore(s.store), ReadOnly: a.readOnly, Context: a.ctxName, Actor: actor,
		MaxAge: a.cfg.Redrive.PlanMaxAge,
		OpenAudit: func() (*audit.Log, func(), error) {
			l, err := a.openAudit(auditFile)
			return l, func() {}, err
		},
	}
}

// redriveConfig is the configuration whose policies govern plans and
// resets, resolved as `redrive plan` resolves it (a.planner in dlq.go): on
// the bundled broker, when the demo's system of record exists, the demo's
// policies apply where the config declares none — its payments redrive
// policy (review: required) and its payments-* effects group policy.
// Otherwise a demo payments plan would be approved and executed under no
// policy at all, and payments-capture reset with no replay guard.
func (a *app) redriveConfig() *config.Config { return demoAwareConfig(a.cfg, a.ctx) }

// demoAwareConfig is cfg with the demo's policies added (see redriveConfig)
// when ctx is a bundled context whose data dir holds the demo's payments
// system of record; cfg itself otherwise.
func demoAwareConfig(cfg *config.Config, ctx config.Context) *config.Config {
	if ctx.Kind == "bundled" {
		dir := ctx.DataDir
		if dir == "" {
			dir = bundled.DefaultDataDir()
		}
		if _, err := os.Stat(demo.PaymentsDB(dir)); err == nil {
			c := *cfg
			c.Groups = slices.Clone(cfg.Groups)
			if demo.ApplyConfig(&c, dir) {
				return &c
			}
		}
	}
	return cfg
}

// loadPlan finds a plan by hash prefix in the shared store, or reads a plan
// file (from `berth redrive plan --out`) and stores it so approvers at other
// terminals see it.
func (s *redriveSession) loadPlan(ctx context.Context, ref string) (redrive.File, error) {
	return s.readPlan(ctx, ref, true)
}

// isPlanFile says whether ref names a plan file rather than a stored plan.
func isPlanFile(ref string) bool {
	st, err := os.Stat(ref)
	return err == nil && !st.IsDir()
}

// readPlan is loadPlan that stores a plan file only when store is set (a
// dry run writes nothing). What a plan file must be to be stored (its hash,
// its backend, this cluster) is actions.KafkaRedrive.ImportFile's to say.
func (s *redriveSession) readPlan(ctx context.Context, ref string, store bool) (redrive.File, error) {
	if isPlanFile(ref) {
		fh, err := os.Open(ref)
		if err != nil {
			return redrive.File{}, err
		}
		defer fh.Close()
		// A read error is said as it is, not as a malformed plan.
		r := &firstReadError{r: fh}
		k := &actions.KafkaRedrive{Planner: s.planner, Store: actions.KafkaStore(s.store), ReadOnly: s.readOnly}
		f, err := k.ImportFile(ctx, ref, r, store)
		if r.err != nil {
			return redrive.File{}, r.err
		}
		return f, err
	}
	if !isHexPrefix(ref) {
		return redrive.File{}, notAPlanRef(ref)
	}
	return s.store.Plan(ctx, ref)
}

var errPlanEdited = actions.ErrPlanEdited

// auditRefused records a refusal that happens before a plan is loaded (so
// without its hash): target is the plan as the user named it. mirror says
// whether the entry also goes to the cluster's audit topic.
func (a *app) auditRefused(ctx context.Context, file, target string, refusal error, mirror bool) error {
	var log *audit.Log
	var err error
	if mirror {
		log, err = a.openAudit(file)
	} else {
		log, err = audit.Open(a.auditPath(file))
	}
	if err == nil {
		_, err = log.Append(ctx, audit.Entry{Action: "redrive.refused", Context: a.ctxName, Target: target,
			Details: map[string]any{"plan": target, "reason": refusal.Error()}})
	}
	var se *audit.SinkError
	if err != nil && !errors.As(err, &se) {
		return fmt.Errorf("%w (and the audit log: %v)", refusal, err)
	}
	return refusal
}

type approveOutput struct {
	Plan     string            `json:"plan"`
	DLQ      string            `json:"dlq"`
	Signer   string            `json:"signer"`
	Key      string            `json:"fingerprint"`
	Decision approval.Decision `json:"decision"`
	Summary  planSummary       `json:"summary"`
	// Warnings are the review's (planFacts.Warnings), derived from the
	// records as they are now.
	Warnings []string `json:"warnings"`
}

// planSummary is what an approver is signing: counts by verdict and by
// class, and every excluded record with its reason.
type planSummary struct {
	Totals   redrive.Totals         `json:"totals"`
	Excluded []actions.Skip         `json:"excluded"`
	Policy   redrive.PolicySnapshot `json:"policy"`
	Author   string                 `json:"author"`
	Created  time.Time              `json:"created_at"`
	Target   string                 `json:"target,omitempty"`
}

// author is the verified signer of the author's signature: a v2 plan file
// names no author of its own.
func summaryOf(f redrive.File, author string) planSummary {
	s := planSummary{Totals: f.Plan.Totals(), Excluded: []actions.Skip{}, Policy: f.Plan.Policy, Author: author, Created: f.Plan.CreatedAt, Target: f.Plan.Target}
	for _, r := range f.Plan.Records {
		if !r.Included {
			s.Excluded = append(s.Excluded, actions.Skip{Partition: r.Partition, Offset: r.Offset, EventID: r.EventID, Reason: r.Reason, Detail: r.Detail})
		}
	}
	return s
}

func newRedriveApproveCmd(a *app) *cobra.Command {
	var keyFile, sigFile, auditFile string
	var yes bool
	cmd := &cobra.Command{
		Use:   "approve PLAN",
		Short: "Approve a redrive plan with your SSH key (SSHSIG over the plan hash)",
		Long: `Approve a redrive plan. PLAN is a hash prefix (8+ hex digits) of a plan in
the cluster's shared plan store, or a plan file. The approval is an SSH
signature over the plan's hash (namespace berth-redrive), made with --key,
or made elsewhere with:
  printf 'berth-redrive-signature/v2\nrole approval\ncluster %s\nplan %s\n' CLUSTER HASH |
    ssh-keygen -Y sign -n berth-redrive -f KEY > approval.sig
(CLUSTER is the plan's cluster id, shown by berth redrive show)
and given with --signature. The author's own key never counts.`,
		Args: exactArgs("PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			if (keyFile == "") == (sigFile == "") {
				return usageErr("redrive approve: give exactly one of --key or --signature")
			}
			// An approval is written to the cluster's plan store: a
			// read-only context refuses it, as the console does.
			if a.readOnly {
				return fmt.Errorf("%w: an approval is written to the plan store", errReadOnly)
			}
			if a.isRabbit() {
				return a.rmqRedriveApprove(cmd, args[0], keyFile, sigFile, auditFile, yes)
			}
			ctx, cancel := a.opCtx(cmd.Context())
			defer cancel()
			s, err := a.redriveSession(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			pf, err := s.loadPlan(ctx, args[0])
			if err != nil {
				return err
			}
			now := time.Now()
			var sig approval.Signature
			if keyFile != "" {
				signer, err := loadKey(keyFile)
				if err != nil {
					return err
				}
				sig, err = approval.Sign(subjectOf(pf), signer, approval.RoleApproval, now)
				if err != nil {
					return err
				}
			} else {
				raw, err := readSignatureFile(sigFile)
				if err != nil {
					return fmt.Errorf("--signature: %v", err)
				}
				if sig, err = approval.FromArmored(pf.Hash, raw, approval.RoleApproval, now); err != nil {
					return err
				}
			}
			k := a.kafkaRedrive(s, auditFile, "")
			// Re-reading the records grows with the plan (workCtx), and
			// the approver reads the review for as long as they need: the
			// writes that follow get a --timeout of their own.
			wctx, wcancel := a.workCtx(cmd.Context(), len(pf.Plan.Records))
			defer wcancel()
			var warnings []string
			if !yes {
				// What is signed is what the records say now: re-read and
				// derived, never the plan's word for it.
				if warnings, err = a.confirmReview(wctx, k, &pf, "approve"); err != nil {
					return err
				}
			}
			if warnings == nil {
				// No review shown: the warnings are still said.
				if warnings, err = k.Warnings(wctx, pf); err != nil {
					return err
				}
			}
			warnings = warningsOf(warnings)
			ctx, cancel = a.opCtx(cmd.Context())
			defer cancel()
			res, err := k.Approve(ctx, pf, sig)
			if err != nil {
				return err
			}
			principal, dec := res.Principal, res.Decision
			out := approveOutput{Plan: pf.Hash, DLQ: pf.Plan.DLQ, Signer: principal, Key: sig.Fingerprint, Decision: dec, Summary: summaryOf(pf, k.VerifiedAuthor(pf)), Warnings: warnings}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, out)
			}
			writeSummary(a.stdout, out.Summary, pf)
			writeWarnings(a.stdout, warnings)
			state := "not yet approved: " + dec.Reason
			if dec.Approved {
				state = "approved by " + strings.Join(dec.Approvers, ", ")
			}
			fmt.Fprintf(a.stdout, "\nsigned plan %s as %s (%s); the plan is %s\n", redrive.ShortHash(pf.Hash), orUnknown(principal), sig.Fingerprint, state)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "your SSH private key (unencrypted OpenSSH format)")
	cmd.Flags().StringVar(&sigFile, "signature", "", "an SSH signature made with ssh-keygen -Y sign -n berth-redrive")
	cmd.Flags().BoolVar(&yes, "yes", false, "sign without showing the review and asking (as without a terminal)")
	addAuditFlag(cmd, &auditFile)
	return cmd
}

// verification is what execute checked after sending (actions.Verification).
type verification = actions.Verification

func newRedriveExecuteCmd(a *app) *cobra.Command {
	var keyFile, auditFile string
	var watch time.Duration
	var noVerify, yes bool
	cmd := &cobra.Command{
		Use:   "execute PLAN",
		Short: "Execute an approved redrive plan (transactional, resumable)",
		Long: `Execute a redrive plan. Each batch is produced to the target and its ledger
entries written in one Kafka transaction: interrupt it at any point (ctrl+c
finishes the batch in flight, kill -9 aborts it) and run the same command
again to resume. SIGUSR1 pauses and SIGUSR2 resumes between batches.
After sending, the copies are read back and compared, then the DLQ is
watched for records that fail again (--watch).

RabbitMQ: a dry run unless --yes (Kafka ignores --yes: its plan is the dry
run). Messages are published with mandatory and publisher confirms,
pipelined; the ledger records intent before and completion after, and a DLQ
message is acked only after its confirm: at-least-once, resumable (run the
same command again). Afterwards the DLQ's depth is checked to have fallen by
exactly the messages acked, with none returned (--no-verify skips it).`,
		Args: exactArgs("PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if watch < 0 {
				return usageErr("--watch: %s is negative (0 skips the re-failure watch)", watch)
			}
			if a.isRabbit() {
				return a.rmqRedriveExecute(cmd, args[0], yes, noVerify, watch, keyFile, auditFile)
			}
			// A mistyped PLAN is said before the cluster is dialled, as
			// RabbitMQ's execute and every other redrive command say it.
			if !isPlanFile(args[0]) && !isHexPrefix(args[0]) {
				return notAPlanRef(args[0])
			}
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			if a.readOnly && yes {
				// Refused before the cluster is touched (loading a plan file
				// would store it), but audited like every other refusal: in
				// the local log only, since the audit topic is in the cluster.
				// A dry run (no --yes) writes nothing and goes on.
				return a.auditRefused(cmd.Context(), auditFile, args[0], errReadOnly, false)
			}
			if !cmd.Flags().Changed("watch") {
				watch = a.cfg.Redrive.VerifyWatch
			}
			actor, err := executor(keyFile)
			if err != nil {
				return err
			}
			sigCtx, stop := signalContext(cmd)
			defer stop()
			setup, cancel := a.opCtx(sigCtx)
			defer cancel()
			s, err := a.redriveSession(setup)
			if err != nil {
				return err
			}
			defer s.Close()
			// A dry run first, always: the plan checked, its records re-read
			// and re-derived, what would be sent counted; nothing written.
			var pf redrive.File
			if !yes {
				pf, err = s.readPlan(setup, args[0], false)
			}
			if errors.Is(err, errPlanEdited) && !yes {
				return err
			}
			if err == nil && !yes {
				k := a.kafkaRedrive(s, auditFile, actor)
				res, err := k.Execute(sigCtx, pf, actions.ExecControl{DryRun: true})
				if err != nil {
					return err
				}
				if err := a.writeDryRun(f, pf, res); err != nil {
					return err
				}
				if a.readOnly || !isTerminal(os.Stdin) || !isTerminal(a.stderr) {
					return nil // the dry run is the answer: --yes sends
				}
				fmt.Fprintf(a.stderr, "to send, type the first 8 hex digits of plan %s: ", redrive.ShortHash(pf.Hash))
				line, err := promptLine(sigCtx, os.Stdin, a.stderr, "nothing sent")
				if err != nil {
					return err
				}
				if strings.TrimSpace(line) != pf.Hash[:8] {
					return actions.Refuse(actions.ErrNotConfirmed, "not confirmed: nothing sent")
				}
			}
			// A plan file is stored now (approvers at other terminals see
			// it); a stored plan the dry run read is not read again.
			// However long the operator took at the prompt, this gets a
			// --timeout of its own.
			if err == nil && (yes || isPlanFile(args[0])) {
				load, cancel := a.opCtx(sigCtx)
				defer cancel()
				pf, err = s.loadPlan(load, args[0])
			}
			if errors.Is(err, errPlanEdited) {
				actx, cancel := a.opCtx(sigCtx)
				defer cancel()
				return a.auditRefused(actx, auditFile, args[0], fmt.Errorf("refused: %w", err), true)
			}
			if err != nil {
				return err
			}
			control := make(chan actions.Control, 4)
			usr := make(chan os.Signal, 4)
			signal.Notify(usr, syscall.SIGUSR1, syscall.SIGUSR2)
			defer signal.Stop(usr)
			go func() {
				for sig := range usr {
					if sig == syscall.SIGUSR1 {
						control <- actions.Pause
					} else {
						control <- actions.Resume
					}
				}
			}()
			start := time.Now()
			res, err := a.kafkaRedrive(s, auditFile, actor).Execute(sigCtx, pf, actions.ExecControl{
				Control: control, Progress: func(p actions.Progress) { writeProgress(a.stderr, p) },
			})
			out := kafkaExecuteOutput(pf, res)
			if actions.IsRefusal(err) {
				return err
			}
			if unsent := out.failedUnsent(err); unsent != nil {
				return unsent
			}
			if err == nil && !noVerify && sigCtx.Err() == nil {
				v, verr := a.verifyRedrive(sigCtx, s, pf, res.SentValues, watch)
				out.kafkaVerified(v)
				if verr != nil {
					err = verr
				}
				details := map[string]any{"checked": v.Checked, "mismatches": len(v.Mismatches), "refailed": len(v.Refailed)}
				if verr != nil {
					details["error"] = verr.Error()
				}
				_ = a.auditRedrive(context.WithoutCancel(sigCtx), auditFile, "redrive.verified", pf, details)
			}
			stopped := ""
			if res.Cancelled {
				stopped = " (cancelled: run the same command to resume)"
			}
			fmt.Fprintf(a.stderr, "redrive %s: sent %d, skipped %d, failed %d in %s%s\n", redrive.ShortHash(pf.Hash), res.Sent, len(out.Skipped), len(out.Failed), time.Since(start).Round(time.Millisecond), stopped)
			out.judge()
			out.stoppedBy(err)
			if f == output.JSON {
				if werr := output.WriteJSON(a.stdout, out); werr != nil {
					return werr
				}
			} else {
				writeExecuteText(a.stdout, out)
			}
			if err != nil {
				return err
			}
			return out.exit()
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "your SSH key: records its fingerprint as the executor in the audit log")
	cmd.Flags().DurationVar(&watch, "watch", 0, "after sending, watch the DLQ this long for re-failures (default redrive.verify_watch; RabbitMQ: none unless given)")
	cmd.Flags().BoolVar(&noVerify, "no-verify", false, "skip the read-back and the re-failure watch (RabbitMQ: the DLQ depth check)")
	cmd.Flags().BoolVar(&yes, "yes", false, "send (without it: a dry run; on a terminal it then asks for the first 8 hex digits of the plan hash)")
	addAuditFlag(cmd, &auditFile)
	return cmd
}

// verifyRedrive runs actions.KafkaRedrive.VerifySent (sent: what this run
// sent) with the watch shown on stderr (and left early with enter on a
// terminal).
func (a *app) verifyRedrive(ctx context.Context, s *redriveSession, pf redrive.File, sent *actions.SentValues, watch time.Duration) (*verification, error) {
	return a.kafkaRedrive(s, "", "").VerifySent(ctx, pf, sent, watch, func(w kafka.Watch) (kafka.WatchResult, error) {
		return a.watchRefailures(ctx, s, w)
	})
}

// watchRefailures runs the re-failure watch and says so on stderr: what it
// watches, for whom and for how long at most, and how to leave it. On a
// terminal, enter leaves it early (ctrl+c too); leaving never touches what
// was sent, which is committed before the watch begins.
func (a *app) watchRefailures(ctx context.Context, s *redriveSession, w kafka.Watch) (kafka.WatchResult, error) {
	topics := map[string]bool{}
	for _, e := range w.Copies {
		topics[e.Target] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	stop, how := a.stopOnEnter()
	w.Stop = stop
	fmt.Fprintf(a.stderr, "watching %s for re-failures of plan %s until the consumers of %s pass its %d copies, at most %s (%s; what was sent stays sent)\n",
		sanitize.Text(w.DLQ), redrive.ShortHash(w.Plan), sanitize.Text(strings.Join(names, ", ")), max(w.Total, len(w.Copies)), w.Max, how)
	wr, err := s.cluster.WatchRefailuresUntil(ctx, w)
	why := map[string]string{
		kafka.WatchCaughtUp: "the consumers (" + strings.Join(wr.Groups, ", ") + ") passed every copy",
		kafka.WatchTimeout:  "watched the whole window",
		kafka.WatchStopped:  "stopped by you",
		kafka.WatchCanceled: "interrupted",
	}[wr.Ended]
	if wr.Ended == kafka.WatchTimeout && len(wr.Groups) == 0 {
		why += " (no consumer group has committed offsets on " + strings.Join(names, ", ") + ": nothing told it the copies were processed)"
	} else if wr.Ended == kafka.WatchTimeout {
		why += " (still behind the copies: " + strings.Join(wr.Behind, ", ") + ")"
	}
	fmt.Fprintf(a.stderr, "watch ended after %s: %s; %d re-failed\n", wr.Watched.Round(time.Millisecond), sanitize.Text(why), len(wr.Refailed))
	return wr, err
}

type statusRow struct {
	Plan string `json:"plan"`
	DLQ  string `json:"dlq"`
	// Author is the verified signer of the author's signature (as
	// allowed_signers names it today), "(unsigned)" or "(unverified)":
	// never what the plan says about itself.
	Author    string    `json:"author"`
	Approvers []string  `json:"approvers"`
	Created   time.Time `json:"created_at"`
	Included  int       `json:"included"`
	Excluded  int       `json:"excluded"`
	Redriven  int       `json:"redriven"`
	Approvals int       `json:"approvals"`
	Required  int       `json:"required"`
	Approved  bool      `json:"approved"`
	Reason    string    `json:"reason,omitempty"`
	State     string    `json:"state"`
}

func newRedriveStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status [PLAN]",
		Short: "List redrive plans with their approvals and progress",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErr("%s: expected at most one PLAN, got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.isRabbit() {
				return a.rmqRedriveStatus(cmd, args)
			}
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			ctx, cancel := a.opCtx(cmd.Context())
			defer cancel()
			s, err := a.redriveSession(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			var one redrive.File
			if len(args) == 1 {
				if !isHexPrefix(args[0]) {
					return notAPlanRef(args[0])
				}
				if one, err = s.store.Plan(ctx, args[0]); err != nil {
					return err
				}
				// What an approver signs (classes, event ids) is derived
				// from the records now, as show does: a v2 plan holds none.
				wctx, wcancel := a.workCtx(cmd.Context(), len(one.Plan.Records))
				defer wcancel()
				if _, err := a.kafkaRedrive(s, "", "").DeriveReview(wctx, &one); err != nil {
					return err
				}
			}
			done, err := s.store.RedrivenByPlan(ctx)
			if err != nil {
				return err
			}
			rows := []statusRow{}
			if len(args) == 1 {
				rows = append(rows, a.planStatus(s, one, done[one.Hash]))
			} else {
				// One plan held at a time: each is ~220 bytes a record.
				problems, err := s.store.Each(ctx, func(pf redrive.File) { rows = append(rows, a.planStatus(s, pf, done[pf.Hash])) })
				if err != nil {
					return err
				}
				// Newest first, as the store lists plans.
				sort.Slice(rows, func(i, j int) bool {
					if !rows[i].Created.Equal(rows[j].Created) {
						return rows[i].Created.After(rows[j].Created)
					}
					return rows[i].Plan < rows[j].Plan
				})
				// A record that is not a usable plan is skipped, never
				// allowed to hide the others; say where it is.
				for _, p := range problems {
					fmt.Fprintf(a.stderr, "berth: warning: skipped %s\n", sanitize.Text(p.String()))
				}
			}
			if f == output.JSON {
				if len(args) == 1 {
					return output.WriteJSON(a.stdout, struct {
						statusRow
						Summary planSummary `json:"summary"`
					}{rows[0], summaryOf(one, rows[0].Author)})
				}
				return output.WriteJSON(a.stdout, rows)
			}
			g := output.Grid{Header: []string{"PLAN", "DLQ", "AUTHOR", "AGE", "RECORDS", "REDRIVEN", "APPROVALS", "STATE"}, Right: map[int]bool{4: true, 5: true}}
			for _, r := range rows {
				g.Add(redrive.ShortHash(r.Plan), r.DLQ, r.Author, durations.Format(time.Since(r.Created)), fmt.Sprint(r.Included), fmt.Sprint(r.Redriven), fmt.Sprintf("%d/%d", r.Approvals, r.Required), r.State)
			}
			if err := g.WriteTable(a.stdout); err != nil {
				return err
			}
			if len(args) == 1 {
				fmt.Fprintln(a.stdout)
				writeSummary(a.stdout, summaryOf(one, rows[0].Author), one)
			}
			return nil
		},
	}
}

func (a *app) planStatus(s *redriveSession, pf redrive.File, redriven int) statusRow {
	t := pf.Plan.Totals()
	st := a.kafkaRedrive(s, "", "").Status(pf, redriven)
	return statusRow{Plan: pf.Hash, DLQ: pf.Plan.DLQ, Created: pf.Plan.CreatedAt, Included: t.Included, Excluded: t.Excluded, Redriven: redriven,
		Author: st.Author, Approvers: st.Approvers, Approvals: st.Approvals, Required: st.Required, Approved: st.Approved, Reason: st.Reason, State: st.State}
}

// subjectOf is what signatures over a Kafka plan are about.
func subjectOf(f redrive.File) approval.Subject {
	return approval.Subject{PlanHash: f.Hash, Cluster: f.Plan.Cluster}
}

func (a *app) auditRedrive(ctx context.Context, file, action string, pf redrive.File, details map[string]any) error {
	log, err := a.openAudit(file)
	if err != nil {
		return err
	}
	details["plan"] = pf.Hash
	details["dlq"] = pf.Plan.DLQ
	_, err = log.Append(ctx, audit.Entry{Action: action, Context: a.ctxName, Target: pf.Hash, Details: details})
	var se *audit.SinkError
	if errors.As(err, &se) {
		fmt.Fprintf(a.stderr, "berth: warning: %v\n", se)
		return nil
	}
	return err
}

func writeSummary(w io.Writer, s planSummary, f redrive.File) {
	fmt.Fprintf(w, "plan %s  dlq %s  author %s  made %s\n", redrive.ShortHash(f.Hash), f.Plan.DLQ, s.Author, f.Plan.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "records: %d selected, %d included, %d excluded\n", s.Totals.Selected, s.Totals.Included, s.Totals.Excluded)
	var reasons []string
	for r, n := range s.Totals.ByReason {
		if n > 0 {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		}
	}
	sort.Strings(reasons)
	if len(reasons) > 0 {
		fmt.Fprintf(w, "excluded by reason: %s\n", strings.Join(reasons, ", "))
	}
	g := output.Grid{Header: []string{"CLASS", "SELECTED", "INCLUDED"}, Right: map[int]bool{1: true, 2: true}}
	var classes []string
	for c := range s.Totals.ByClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		cc := s.Totals.ByClass[c]
		g.Add(c, fmt.Sprint(cc.Selected), fmt.Sprint(cc.Included))
	}
	_ = g.WriteTable(w)
	if len(s.Excluded) > 0 {
		fmt.Fprintln(w)
		x := output.Grid{Header: []string{"EXCLUDED", "EVENT", "REASON", "DETAIL"}}
		for _, e := range s.Excluded {
			x.Add(fmt.Sprintf("%d:%d", e.Partition, e.Offset), e.EventID, string(e.Reason), e.Detail)
		}
		_ = x.WriteTable(w)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "(no allowed_signers configured)"
	}
	return s
}

// executor is who runs a redrive, as the audit log names them: the OS
// user, and the key's fingerprint when --key is given.
func executor(keyFile string) (string, error) {
	actor := audit.CurrentUser()
	if keyFile != "" {
		signer, err := loadKey(keyFile)
		if err != nil {
			return "", err
		}
		actor += " (" + fingerprint(signer) + ")"
	}
	return actor, nil
}

func fingerprint(s interface{ PublicKey() ssh.PublicKey }) string {
	return ssh.FingerprintSHA256(s.PublicKey())
}

// confirmReview re-reads a plan's records, derives what a reviewer sees
// from them (targets, idempotency keys, classes) and, on a terminal, shows
// it and asks for the first 8 hex digits of the plan hash before going on.
// Without a terminal it goes on (scripts pass --key or --signature) and
// returns nil warnings: none were derived.
func (a *app) confirmReview(ctx context.Context, k *actions.KafkaRedrive, pf *redrive.File, verb string) ([]string, error) {
	if !isTerminal(os.Stdin) || !isTerminal(a.stderr) {
		return nil, nil
	}
	review, err := k.DeriveReview(ctx, pf)
	if err != nil {
		return nil, err
	}
	sum := planHeadOf(*pf)
	sum.Review = reviewOf(review)
	sum.Warnings = warningsOf(review.Warnings)
	writePlanText(a.stderr, sum, pf.Plan.Records)
	fmt.Fprintf(a.stderr, "\nto %s plan %s, type the first 8 hex digits of its hash: ", verb, redrive.ShortHash(pf.Hash))
	// The approver reads for as long as they need: the answer is not
	// bounded by ctx's --timeout (approve catches no signal, so ctrl+c
	// ends it).
	line, err := promptLine(context.WithoutCancel(ctx), os.Stdin, a.stderr, "nothing signed")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(line) != pf.Hash[:8] {
		return nil, actions.Refuse(actions.ErrNotConfirmed, "not confirmed: nothing signed")
	}
	return review.Warnings, nil
}

// dryRunOutput is what `redrive execute` without --yes prints.
type dryRunOutput struct {
	Plan      string         `json:"plan"`
	DLQ       string         `json:"dlq"`
	DryRun    bool           `json:"dry_run"`
	WouldSend map[string]int `json:"would_send"`
	// AlreadySent counts the records an earlier run sent (listed in the
	// ledger, not here): a resumed million-record plan lists none of them.
	AlreadySent int            `json:"already_sent"`
	Skipped     []actions.Skip `json:"skipped"`
	Approvers   []string       `json:"approvers"`
}

func (a *app) writeDryRun(f output.Format, pf redrive.File, res actions.Result) error {
	out := dryRunOutput{Plan: pf.Hash, DLQ: pf.Plan.DLQ, DryRun: true, WouldSend: res.WouldSend, AlreadySent: res.AlreadySent, Skipped: res.Skipped, Approvers: res.Approval.Approvers}
	if out.WouldSend == nil {
		out.WouldSend = map[string]int{}
	}
	if out.Approvers == nil {
		out.Approvers = []string{}
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, out)
	}
	n := 0
	var targets []string
	for t, c := range out.WouldSend {
		n += c
		targets = append(targets, fmt.Sprintf("%s %d", sanitize.Text(t), c))
	}
	sort.Strings(targets)
	fmt.Fprintf(a.stdout, "dry run of plan %s (dlq %s): would send %d (%s), already sent %d, skip %d; nothing sent (--yes sends)\n",
		redrive.ShortHash(pf.Hash), sanitize.Text(pf.Plan.DLQ), n, strings.Join(targets, ", "), out.AlreadySent, len(out.Skipped))
	if len(out.Skipped) > 0 {
		g := output.Grid{Header: []string{"SKIPPED", "EVENT", "REASON", "DETAIL"}}
		for _, s := range out.Skipped {
			g.Add(fmt.Sprintf("%d:%d", s.Partition, s.Offset), sanitize.Text(s.EventID), string(s.Reason), sanitize.Text(s.Detail))
		}
		return g.WriteTable(a.stdout)
	}
	return nil
}
