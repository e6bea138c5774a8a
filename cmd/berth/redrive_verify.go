package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/actions"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
)

func init() { registerUnder("redrive", newRedriveVerifyCmd) }

// verifyOutput is `redrive verify -o json`: the plan and the verification
// object execute prints, with why it exits 1.
type verifyOutput struct {
	Backend      string               `json:"backend"`
	Plan         string               `json:"plan"`
	DLQ          string               `json:"dlq"`
	Verification *outcomeVerification `json:"verification"`
	Problems     []string             `json:"problems"`
}

// newRedriveVerifyCmd is the verification execute runs after sending, on
// its own: after `execute --no-verify`, or a watch left early (the console
// stops its watch after at most 30s), the copies can be read back and the
// DLQ watched again later, headless, with the same checks and audit entry.
func newRedriveVerifyCmd(a *app) *cobra.Command {
	var auditFile string
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "verify PLAN",
		Short: "Read back what a plan sent and watch its DLQ for re-failures, as execute does after sending",
		Long: `Read back every copy a plan sent (from the redrive ledger) and compare its
payload hash with the DLQ record's, then watch the DLQ for copies that fail
again (--watch, default redrive.verify_watch; 0 skips the watch), as
` + "`redrive execute`" + ` does after sending. Nothing is sent. Exit 1 when a copy
differs; copies that re-failed are listed but, as for execute, do not make
it 1 (they were sent). Audited as redrive.verified.

RabbitMQ: not available; execute verifies by the DLQ's depth while it runs
(messages on a queue cannot be read back later).`,
		Args: exactArgs("PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if watch < 0 {
				return usageErr("--watch: %s is negative (0 skips the re-failure watch)", watch)
			}
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			if a.isRabbit() {
				return actions.Refuse(actions.ErrUnsupported, "redrive verify: RabbitMQ verifies by the DLQ's depth during execute; copies on a queue cannot be read back later")
			}
			if !cmd.Flags().Changed("watch") {
				watch = a.cfg.Redrive.VerifyWatch
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
			pf, err := s.readPlan(setup, args[0], false)
			if err != nil {
				return err
			}
			v, verr := a.verifyRedrive(sigCtx, s, pf, nil, watch)
			if verr != nil {
				return verr
			}
			if err := a.auditRedrive(context.WithoutCancel(sigCtx), auditFile, "redrive.verified", pf, map[string]any{
				"checked": v.Checked, "mismatches": len(v.Mismatches), "refailed": len(v.Refailed),
			}); err != nil {
				return err
			}
			var o executeOutput
			o.kafkaVerified(v)
			out := verifyOutput{Backend: "kafka", Plan: pf.Hash, DLQ: pf.Plan.DLQ, Verification: o.Verification, Problems: []string{}}
			if !o.Verification.OK {
				out.Problems = append(out.Problems, o.Verification.Problem)
			}
			if f == output.JSON {
				if err := output.WriteJSON(a.stdout, out); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "plan %s  dlq %s\nverified: %d copies read back, %d mismatch(es); re-failed %d (watched %s)\n",
					redrive.ShortHash(pf.Hash), sanitize.Text(pf.Plan.DLQ), v.Checked, len(v.Mismatches), len(v.Refailed), v.Watched)
				for _, m := range v.Mismatches {
					fmt.Fprintf(a.stdout, "  mismatch %d:%d -> %s %s: %s\n", m.DLQ.Partition, m.DLQ.Offset, sanitize.Text(m.Target), m.Where, sanitize.Text(m.Reason))
				}
				for _, r := range v.Refailed {
					fmt.Fprintf(a.stdout, "  re-failed: %s landed again at %d:%d (%s)\n", sanitize.Text(r.Origin), r.DLQ.Partition, r.DLQ.Offset, sanitize.Text(r.Exception))
				}
			}
			if len(out.Problems) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("redrive %s: %s", redrive.ShortHash(pf.Hash), sanitize.Text(strings.Join(out.Problems, "; ")))}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&watch, "watch", 0, "watch the DLQ this long for re-failures (default redrive.verify_watch; 0 skips it)")
	addAuditFlag(cmd, &auditFile)
	return cmd
}
