package demo

import (
	"os"
	"path/filepath"

	"github.com/berth-dev/berth/internal/config"
)

// PaymentsDB is the payments system of record inside the demo's data dir.
func PaymentsDB(dataDir string) string { return filepath.Join(dataDir, "payments.db") }

// AllowedSigners is the allowed_signers file the demo's payments policy names.
func AllowedSigners(dataDir string) string { return filepath.Join(dataDir, "allowed_signers") }

// CapturedQuery returns a row when a payment's capture already committed.
const CapturedQuery = "select 1 from payments where idempotency_key = ? and status = 'captured'"

// RedrivePolicies are the demo's redrive policies: payments.DLT needs an
// idempotency key, is checked against the SQLite system of record and needs
// one reviewed approval; shipment-jobs.DLT needs no review.
func RedrivePolicies(dataDir string) []config.RedrivePolicy {
	return []config.RedrivePolicy{
		{
			Match:                 TopicPaymentsDLT,
			IdempotencyKey:        "json:idempotencyKey",
			RequireIdempotencyKey: true,
			SystemOfRecord: &config.SystemOfRecord{
				Driver: "sqlite",
				DSN:    PaymentsDB(dataDir),
				Query:  CapturedQuery,
			},
			Review:         "required",
			Approvals:      1,
			AllowedSigners: AllowedSigners(dataDir),
			MaxRedrives:    3,
			StopOnFailure:  true,
		},
		{
			Match:          TopicShipmentDLT,
			IdempotencyKey: "json:eventId",
			Review:         "none",
			MaxRedrives:    3,
		},
	}
}

// GroupPolicies mark the payments consumers as having external effects:
// replaying them charges customers again.
func GroupPolicies() []config.GroupPolicy {
	return []config.GroupPolicy{{Match: "payments-*", Effects: true}}
}

// ApplyConfig gives cfg the demo's policies when the user's configuration
// declares no redrive policies of its own (and the payments group policy when
// no policy already covers the payments group). It reports whether it
// changed anything.
func ApplyConfig(cfg *config.Config, dataDir string) bool {
	changed := false
	if len(cfg.Redrive.Policies) == 0 {
		cfg.Redrive.Policies = RedrivePolicies(dataDir)
		changed = true
	}
	if p, _ := cfg.GroupPolicyFor(GroupPayments); p.Match == "" {
		cfg.Groups = append(cfg.Groups, GroupPolicies()...)
		changed = true
	}
	return changed
}

// ensureAllowedSigners creates the allowed_signers file the payments policy
// names, empty but for a comment, so approvals have a place to add keys.
func ensureAllowedSigners(dataDir string) error {
	p := AllowedSigners(dataDir)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	const header = "# Berth demo: approvers of payments.DLT redrive plans, one per line:\n" +
		"# <principal> <key-type> <public-key>   (ssh-keygen ALLOWED SIGNERS format)\n"
	return os.WriteFile(p, []byte(header), 0o600)
}
