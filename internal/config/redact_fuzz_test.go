package config

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// redactShapes builds a connection string around a password in each shape a
// user may write one: URLs (any scheme case, bad ports, raw reserved
// characters and whitespace in the password), libpq key=value DSNs (quoted
// with backslash escapes, or bare with "\ " escapes) and ?password=.
var redactShapes = []func(pass string) string{
	func(p string) string { return "amqp://ops:" + p + "@mq.internal:5672/orders" },
	func(p string) string { return "AMQP://ops:" + p + "@mq.internal:bad/" },
	func(p string) string { return "Https://ops:" + p + "@mq.internal:99999/api" },
	func(p string) string { return "postgres://berth:" + p + "@db:5432/ops?sslmode=disable" },
	func(p string) string { return "host=db user=berth password=" + libpqQuote(p) + " dbname=ops" },
	func(p string) string { return "host=db password = " + libpqBare(p) + " sslmode=disable" },
	func(p string) string { return "postgres://berth@db/ops?sslmode=disable&password=" + url.QueryEscape(p) },
	func(p string) string { return "PASSWORD=" + libpqQuote(p) },
}

func libpqQuote(p string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(p) + "'"
}

func libpqBare(p string) string {
	if p == "" {
		return "''"
	}
	var b strings.Builder
	for _, r := range p {
		if r == '\\' || r == '\'' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

var alnumRun = regexp.MustCompile(`[A-Za-z0-9]{4,}`)

// leaked reports a piece of pass (a run of 4+ letters or digits, the part a
// reader could use) that out shows although the text around the password
// (frame) does not hold it.
func leaked(out, frame, pass string) string {
	for _, tok := range alnumRun.FindAllString(pass, -1) {
		if strings.Contains(out, tok) && !strings.Contains(frame, tok) {
			return tok
		}
	}
	return ""
}

// checkRedaction is the property: no password piece in RedactURL, in an
// error quoting the string (with the string passed as a secret, as callers
// do, and without it, as the CLI's last line of defence does), or in
// `config view`'s copy of the config.
func checkRedaction(t *testing.T, pass string) {
	t.Helper()
	for i, shape := range redactShapes {
		in, frame := shape(pass), shape("")
		msg, msgFrame := "connect "+in+": connection refused", "connect "+frame+": connection refused"
		outs := map[string]string{
			"RedactURL":              RedactURL(in),
			"RedactError(secret)":    RedactError(msg, in),
			"Redacted().AMQPURL":     (&Config{Contexts: map[string]Context{"x": {AMQPURL: in, ManagementURL: in}}}).Redacted().Contexts["x"].AMQPURL,
			"Redacted().StoreDSN":    (&Config{Redrive: RedriveConfig{StoreDSN: in}}).Redacted().Redrive.StoreDSN,
			"Redacted().SoR DSN":     (&Config{Redrive: RedriveConfig{Policies: []RedrivePolicy{{SystemOfRecord: &SystemOfRecord{DSN: in}}}}}).Redacted().Redrive.Policies[0].SystemOfRecord.DSN,
			"RedactError(no secret)": "",
		}
		// Without the secret, a password that makes a second "scheme://"
		// cannot be told from a second URL; callers that quote a connection
		// string pass it.
		if len(schemeRE.FindAllStringIndex(in, -1)) <= 1 {
			outs["RedactError(no secret)"] = RedactError(msg)
		}
		for where, out := range outs {
			if tok := leaked(out, frame+msgFrame, pass); tok != "" {
				t.Fatalf("shape %d: %s(%q) = %q shows %q of the password %q", i, where, in, out, tok, pass)
			}
		}
	}
}

// The seeded corpus runs in every `go test`; `go test -fuzz
// FuzzRedactHidesPasswords ./internal/config/` searches further.
var redactSeeds = []string{
	"s3cretPW",
	"pa ssword9 with spaces",
	"tab\there9999",
	"p%zzs3cret",
	"q/w?e#r@t:yuio",
	`back\slash\ quote'9999`,
	"trailing\\",
	"user@host.example:9999/path",
	"password=nested9999",
	"'quoted9999'",
	"unicodé9999 ünï",
	"x://inner9999@host",
	"new\nline9999",
	"amp&rest9999",
	"//0000",
}

func TestRedactionHidesPasswordsInEveryShape(t *testing.T) {
	for _, p := range redactSeeds {
		checkRedaction(t, p)
	}
}

func FuzzRedactHidesPasswords(f *testing.F) {
	for _, p := range redactSeeds {
		f.Add(p)
	}
	f.Fuzz(checkRedaction)
}
