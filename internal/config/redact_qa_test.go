package config

import (
	"strings"
	"testing"
)

// Passwords in the less common spellings of a connection string: a URL whose
// password has a bad %-escape (url.Parse fails on it) and libpq's
// ?password= query parameter. The rest of the string stays readable.
func TestRedactHidesPasswordsInOddURLs(t *testing.T) {
	for _, tc := range []struct{ in, keep string }{
		{"amqp://ops:p%zzs3cret@127.0.0.1:5672/", "127.0.0.1:5672"},
		{"postgres://postgres@127.0.0.1:5432/test?password=s3cret&sslmode=disable", "sslmode=disable"},
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable&PASSWORD=s3cret", "sslmode=disable"},
	} {
		out := RedactURL(tc.in)
		if strings.Contains(out, "s3cret") || !strings.Contains(out, tc.keep) {
			t.Errorf("RedactURL(%q) = %q: want the password masked and %q kept", tc.in, out, tc.keep)
		}
		if msg := RedactError("connect " + tc.in + ": refused"); strings.Contains(msg, "s3cret") {
			t.Errorf("RedactError kept the password: %q", msg)
		}
		c := &Config{Contexts: map[string]Context{"r": {Kind: "rabbitmq", AMQPURL: tc.in}}}
		if got := c.Redacted().Contexts["r"].AMQPURL; strings.Contains(got, "s3cret") {
			t.Errorf("Redacted() kept the password: %q", got)
		}
	}
}
