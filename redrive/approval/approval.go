// Package approval signs redrive plans and decides whether a plan's
// approvals satisfy its policy (the two-person rule). A signature is an SSH
// signature (SSHSIG, namespace "berth-redrive") over Statement: the role,
// the cluster and the plan hash, so a signature cannot be moved to another
// role, cluster or plan. ssh-keygen makes the same signature with
// `printf 'berth-redrive-signature/v2\nrole %s\ncluster %s\nplan %s\n' ROLE CLUSTER HASH | ssh-keygen -Y sign -n berth-redrive -f KEY`,
// and it is verified against an OpenSSH allowed_signers file, the format git
// uses for commit signing. The package does no network I/O: it
// reads key and signer files it is pointed at.
package approval

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Namespace binds signatures to Berth redrive approvals, so a signature made
// for git or another tool can never be replayed as an approval.
const Namespace = "berth-redrive"

// Role says what a signature stands for.
type Role string

const (
	RoleAuthor   Role = "author"
	RoleApproval Role = "approval"
)

// Signature is one stored signature over a plan hash. It is kept beside the
// plan, never inside the hashed content, so adding one does not change the
// plan's identity.
type Signature struct {
	Role        Role      `json:"role"`
	PlanHash    string    `json:"plan_hash"`
	Fingerprint string    `json:"fingerprint"` // SHA256:... of the signing key
	Armored     string    `json:"signature"`   // -----BEGIN SSH SIGNATURE-----
	SignedAt    time.Time `json:"signed_at"`
	// Principal is filled by Verify from allowed_signers; not trusted when stored.
	Principal string `json:"principal,omitempty"`
}

// LoadSigner reads an unencrypted OpenSSH private key. An encrypted key is
// refused with a clear reason rather than prompting: Berth runs headless too.
func LoadSigner(keyFile string) (ssh.Signer, error) {
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--key: cannot read %s: %v", keyFile, errors.Unwrap(err))
	}
	s, err := ssh.ParsePrivateKey(raw)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("--key: %s is passphrase-protected; sign with `printf 'berth-redrive-signature/v2\\nrole approval\\ncluster CLUSTER\\nplan HASH\\n' | ssh-keygen -Y sign -n %s -f %s` and pass --signature", keyFile, Namespace, keyFile)
	}
	if err != nil {
		return nil, fmt.Errorf("--key: %s is not an OpenSSH private key: %v", keyFile, err)
	}
	return s, nil
}

// Subject is what a signature is about: a plan (by hash) on a cluster (by
// its identity: Kafka cluster id, RabbitMQ cluster name).
type Subject struct {
	PlanHash string
	Cluster  string
}

// Statement is the exact byte string a signature signs:
//
//	berth-redrive-signature/v2\nrole ROLE\ncluster CLUSTER\nplan HASH\n
func Statement(role Role, s Subject) []byte {
	return fmt.Appendf(nil, "berth-redrive-signature/v2\nrole %s\ncluster %s\nplan %s\n", role, s.Cluster, s.PlanHash)
}

// Sign signs the statement for role over subject with signer.
func Sign(subj Subject, signer ssh.Signer, role Role, now time.Time) (Signature, error) {
	sig, err := sshsig.Sign(bytes.NewReader(Statement(role, subj)), signer, sshsig.HashSHA512, Namespace)
	if err != nil {
		return Signature{}, fmt.Errorf("sign plan %s: %w", short(subj.PlanHash), err)
	}
	return Signature{
		Role:        role,
		PlanHash:    subj.PlanHash,
		Fingerprint: ssh.FingerprintSHA256(signer.PublicKey()),
		Armored:     string(sshsig.Armor(sig)),
		SignedAt:    now.UTC(),
	}, nil
}

// FromArmored wraps a signature made elsewhere (ssh-keygen -Y sign over
// Statement); Verify checks it.
func FromArmored(planHash string, armored []byte, role Role, now time.Time) (Signature, error) {
	sig, err := sshsig.Unarmor(armored)
	if err != nil {
		return Signature{}, fmt.Errorf("signature: not an SSH signature: %v", err)
	}
	return Signature{
		Role:        role,
		PlanHash:    planHash,
		Fingerprint: ssh.FingerprintSHA256(sig.PublicKey),
		Armored:     string(armored),
		SignedAt:    now.UTC(),
	}, nil
}

// AllowedSigner is one line of an allowed_signers file.
type AllowedSigner struct {
	Principals  []string
	Key         ssh.PublicKey
	Namespaces  []string // empty: any namespace
	ValidAfter  time.Time
	ValidBefore time.Time
	CertAuth    bool
}

// AllowedSigners is a parsed allowed_signers file.
type AllowedSigners []AllowedSigner

// LoadAllowedSigners parses an OpenSSH allowed_signers file (see
// ssh-keygen(1), "ALLOWED SIGNERS"): principals, options, key type, key.
func LoadAllowedSigners(file string) (AllowedSigners, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("allowed_signers: cannot read %s: %v", file, errors.Unwrap(err))
	}
	return ParseAllowedSigners(file, raw)
}

// ParseAllowedSigners parses allowed_signers content; errors name the line.
func ParseAllowedSigners(name string, raw []byte) (AllowedSigners, error) {
	var out AllowedSigners
	for i, line := range bytes.Split(raw, []byte("\n")) {
		text := strings.TrimSpace(string(line))
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := splitFields(text)
		if len(fields) < 3 {
			return nil, fmt.Errorf("allowed_signers %s:%d: expected principals, key type and key", name, i+1)
		}
		s := AllowedSigner{Principals: strings.Split(fields[0], ",")}
		rest := fields[1:]
		// Options come before the key type when the next field is not a key type.
		if !isKeyType(rest[0]) {
			if err := s.parseOptions(rest[0]); err != nil {
				return nil, fmt.Errorf("allowed_signers %s:%d: %v", name, i+1, err)
			}
			rest = rest[1:]
		}
		if len(rest) < 2 {
			return nil, fmt.Errorf("allowed_signers %s:%d: missing key", name, i+1)
		}
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rest[0] + " " + rest[1]))
		if err != nil {
			return nil, fmt.Errorf("allowed_signers %s:%d: bad key: %v", name, i+1, err)
		}
		s.Key = key
		out = append(out, s)
	}
	return out, nil
}

func (s *AllowedSigner) parseOptions(opts string) error {
	for _, o := range splitOptions(opts) {
		k, v, _ := strings.Cut(o, "=")
		v = strings.Trim(v, `"`)
		switch strings.ToLower(k) {
		case "namespaces":
			s.Namespaces = strings.Split(v, ",")
		case "cert-authority":
			s.CertAuth = true
		case "valid-after", "valid-before":
			t, err := parseSSHTime(v)
			if err != nil {
				return fmt.Errorf("%s: %v", k, err)
			}
			if k == "valid-after" {
				s.ValidAfter = t
			} else {
				s.ValidBefore = t
			}
		default:
			return fmt.Errorf("unknown option %q", k)
		}
	}
	return nil
}

// Verified is a signature that checked out: who made it.
type Verified struct {
	Signature
	Principal string
}

// Verify checks one signature over subject, in the role the signature
// states, against the allowed signers and returns the principal it belongs
// to. Each failure names its reason.
func Verify(subj Subject, s Signature, signers AllowedSigners, now time.Time) (Verified, error) {
	planHash := subj.PlanHash
	if s.PlanHash != planHash {
		return Verified{}, fmt.Errorf("signature %s: stored for plan %s, not %s", s.Fingerprint, short(s.PlanHash), short(planHash))
	}
	sig, err := sshsig.Unarmor([]byte(s.Armored))
	if err != nil {
		return Verified{}, fmt.Errorf("signature %s: unreadable: %v", s.Fingerprint, err)
	}
	fp := ssh.FingerprintSHA256(sig.PublicKey)
	var match *AllowedSigner
	for i := range signers {
		if !signers[i].CertAuth && ssh.FingerprintSHA256(signers[i].Key) == fp {
			match = &signers[i]
			break
		}
	}
	if match == nil {
		return Verified{}, fmt.Errorf("signature by %s: key is not in allowed_signers", fp)
	}
	if len(match.Namespaces) > 0 && !contains(match.Namespaces, Namespace) {
		return Verified{}, fmt.Errorf("signature by %s: allowed_signers does not allow namespace %s for this key", match.Principals[0], Namespace)
	}
	if !match.ValidAfter.IsZero() && now.Before(match.ValidAfter) || !match.ValidBefore.IsZero() && now.After(match.ValidBefore) {
		return Verified{}, fmt.Errorf("signature by %s: key is outside its validity period in allowed_signers", match.Principals[0])
	}
	if err := sshsig.Verify(bytes.NewReader(Statement(s.Role, subj)), sig, sig.PublicKey, sig.HashAlgorithm, Namespace); err != nil {
		return Verified{}, fmt.Errorf("signature by %s: does not verify as %s of plan %s on cluster %q (signed another plan, role or cluster, or altered): %v", match.Principals[0], s.Role, short(planHash), subj.Cluster, err)
	}
	v := Verified{Signature: s, Principal: match.Principals[0]}
	v.Fingerprint = fp
	v.Signature.Principal = v.Principal
	return v, nil
}

// Genuine checks that s is what it claims: an SSH signature by the key its
// fingerprint names, over the statement of its role for subj (this plan,
// this cluster). Whether that key may sign at all is not asked here:
// allowed_signers decides that when the signature is counted (Verify,
// Evaluate).
func Genuine(subj Subject, s Signature) error {
	if s.PlanHash != subj.PlanHash {
		return fmt.Errorf("signature %s: for plan %s, not %s", s.Fingerprint, short(s.PlanHash), short(subj.PlanHash))
	}
	sig, err := sshsig.Unarmor([]byte(s.Armored))
	if err != nil {
		return fmt.Errorf("signature %s: unreadable: %v", s.Fingerprint, err)
	}
	if fp := ssh.FingerprintSHA256(sig.PublicKey); fp != s.Fingerprint {
		return fmt.Errorf("signature %s: made by another key (%s)", s.Fingerprint, fp)
	}
	if err := sshsig.Verify(bytes.NewReader(Statement(s.Role, subj)), sig, sig.PublicKey, sig.HashAlgorithm, Namespace); err != nil {
		return fmt.Errorf("signature %s: does not verify as %s of plan %s on cluster %q: %v", s.Fingerprint, s.Role, short(subj.PlanHash), subj.Cluster, err)
	}
	return nil
}

// Decision is the verdict on a plan's approvals.
type Decision struct {
	Approved  bool     `json:"approved"`
	Required  int      `json:"required"`
	Author    string   `json:"author,omitempty"`
	Approvers []string `json:"approvers"`
	// Refused lists each signature that did not count, with its reason.
	Refused []string `json:"refused,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// Evaluate applies the two-person rule: the author's signature must verify;
// an approval counts only if it verifies over this plan's hash, is by a key
// in allowed_signers, is not the author's key or principal, and is by a
// signer not already counted. required approvals means that many distinct
// signers.
func Evaluate(subj Subject, author *Signature, approvals []Signature, signers AllowedSigners, required int, now time.Time) Decision {
	d := Decision{Required: required, Approvers: []string{}}
	authorFP, authorPrincipal := "", ""
	if author != nil {
		if author.Role != RoleAuthor {
			d.Refused = append(d.Refused, "author: signature is stored as "+string(author.Role))
		} else if v, err := Verify(subj, *author, signers, now); err != nil {
			d.Refused = append(d.Refused, "author: "+err.Error())
		} else {
			authorFP, authorPrincipal = v.Fingerprint, v.Principal
			d.Author = v.Principal
		}
	}
	seenKeys := map[string]bool{}
	seenPrincipals := map[string]bool{}
	for _, a := range approvals {
		v, err := Verify(subj, a, signers, now)
		switch {
		case a.Role != RoleApproval:
			d.Refused = append(d.Refused, fmt.Sprintf("signature %s: stored as %s, not approval", a.Fingerprint, a.Role))
		case err != nil:
			d.Refused = append(d.Refused, err.Error())
		case v.Fingerprint == authorFP || (authorPrincipal != "" && v.Principal == authorPrincipal):
			d.Refused = append(d.Refused, fmt.Sprintf("signature by %s: the plan's author cannot approve it", v.Principal))
		case seenKeys[v.Fingerprint] || seenPrincipals[v.Principal]:
			d.Refused = append(d.Refused, fmt.Sprintf("signature by %s: already counted (N approvals means N distinct signers)", v.Principal))
		default:
			seenKeys[v.Fingerprint], seenPrincipals[v.Principal] = true, true
			d.Approvers = append(d.Approvers, v.Principal)
		}
	}
	sort.Strings(d.Approvers)
	switch {
	case author == nil && required > 0:
		d.Reason = "the plan carries no author signature"
	case author != nil && d.Author == "" && required > 0:
		d.Reason = "the author's signature does not verify"
	case len(d.Approvers) < required:
		d.Reason = fmt.Sprintf("%d of %d required approvals", len(d.Approvers), required)
	default:
		d.Approved = true
	}
	return d
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

func isKeyType(s string) bool {
	return strings.HasPrefix(s, "ssh-") || strings.HasPrefix(s, "ecdsa-") || strings.HasPrefix(s, "sk-")
}

// splitFields splits on whitespace, keeping quoted option values whole.
func splitFields(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case (r == ' ' || r == '\t') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// splitOptions splits a comma-separated option list, keeping quoted values.
func splitOptions(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ',' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func parseSSHTime(v string) (time.Time, error) {
	v = strings.TrimSuffix(strings.TrimSuffix(v, "Z"), "z")
	for _, layout := range []string{"20060102150405", "200601021504", "20060102"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad time %q", v)
}
