package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/redrive/approval"
)

func init() { registerUnder("redrive", newRedriveSignCmd) }

// signOutput is `redrive sign -o json`.
type signOutput struct {
	Plan      string `json:"plan"`
	DLQ       string `json:"dlq"`
	AuthorKey string `json:"author_key"`
}

// newRedriveSignCmd signs a stored plan as its author, headless: what the
// console's S does for a plan made there, and what `redrive plan --key`
// does in one step. A policy with review needs the author's signature.
func newRedriveSignCmd(a *app) *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "sign PLAN --key SSH_KEY",
		Short: "Sign a plan made without --key as its author (a policy with review needs it)",
		Long: `Sign a stored plan (a hash prefix, or a plan file, which is stored first) as
its author with your SSH key, as redrive plan --key does when the plan is
made and the console's S does for a plan made there. Refused, storing
nothing: in a read-only context, when the plan already carries an author's
signature (nobody takes over authorship), and for a key that already
approved it (two-person rule). Audited as redrive.plan.signed.`,
		Args: exactArgs("PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := a.format(output.Table, output.JSON)
			if err != nil {
				return err
			}
			if keyFile == "" {
				return usageErr("--key: required (your SSH private key)")
			}
			signer, err := loadKey(keyFile)
			if err != nil {
				return err
			}
			// A signature is written to the plan store (and a plan file
			// would be stored): refused before the cluster is touched.
			if a.readOnly {
				return fmt.Errorf("%w: a signature is written to the plan store", errReadOnly)
			}
			ctx, cancel := a.opCtx(cmd.Context())
			defer cancel()
			var out signOutput
			if a.isRabbit() {
				l, p, _, err := a.rmqOpenPlan(ctx, args[0], true, nil)
				if err != nil {
					return err
				}
				defer l.Close()
				sig, err := approval.Sign(p.Subject(), signer, approval.RoleAuthor, time.Now())
				if err != nil {
					return err
				}
				if err := a.rabbitRedrive().SignAsAuthor(ctx, l, p, sig); err != nil {
					return err
				}
				out = signOutput{Plan: p.Hash(), DLQ: p.DLQ, AuthorKey: sig.Fingerprint}
			} else {
				s, err := a.redriveSession(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				pf, err := s.loadPlan(ctx, args[0])
				if err != nil {
					return err
				}
				sig, err := approval.Sign(subjectOf(pf), signer, approval.RoleAuthor, time.Now())
				if err != nil {
					return err
				}
				if err := a.kafkaRedrive(s, "", "").SignAsAuthor(ctx, pf, sig); err != nil {
					return err
				}
				out = signOutput{Plan: pf.Hash, DLQ: pf.Plan.DLQ, AuthorKey: sig.Fingerprint}
			}
			if f == output.JSON {
				return output.WriteJSON(a.stdout, out)
			}
			fmt.Fprintf(a.stdout, "signed plan %s (%s) as its author with %s\n", redrive.ShortHash(out.Plan), sanitize.Text(out.DLQ), out.AuthorKey)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "your SSH private key (unencrypted OpenSSH format)")
	return cmd
}
