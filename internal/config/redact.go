package config

import (
	"regexp"
	"strings"
)

// RedactURL hides the password of a URL (amqp://user:pass@host) and of
// key=value DSNs (password=...), so it can be shown, logged or put in an
// error. It does not trust the string to be well formed: a password with
// whitespace, '/', '@' or a bad %-escape, an upper-case scheme or a bad port
// are all masked, and when in doubt more is hidden, never less.
func RedactURL(s string) string {
	if s == "" {
		return s
	}
	if loc := schemeRE.FindStringIndex(s); loc != nil {
		// The userinfo ends at the last '@': a raw password may hold '/',
		// '?', '#', ':' or '@', so where a URL parser ends the authority
		// is not where the password ends.
		s = s[:loc[1]] + maskUserinfo(s[loc[1]:])
		// libpq also takes the password as a query parameter.
		s = queryPasswordURL.ReplaceAllString(s, "${1}*****")
	} else {
		// A scheme mistyped without its "://" (amqp//user:pass@host,
		// http:user:pass@host) still holds a password before the '@'.
		s = maskUserinfo(s)
	}
	// A key=value DSN may hold "://" in another value: mask its password
	// whatever the branch above did.
	return maskKV(s)
}

// maskUserinfo masks the password in rest, the part of a URL after
// "scheme://": everything between the first ':' and the last '@'.
func maskUserinfo(rest string) string {
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return rest
	}
	colon := strings.IndexByte(rest[:at], ':')
	if colon < 0 {
		return rest
	}
	return rest[:colon] + ":*****" + rest[at:]
}

// maskKV masks every password=VALUE of a libpq key=value string, reading
// VALUE as libpq does: single-quoted (to the closing quote) or bare (to the
// next whitespace), a backslash escaping the next character in both. An
// unterminated quote runs to the end.
func maskKV(s string) string {
	var b strings.Builder
	for {
		loc := kvKeyRE.FindStringIndex(s)
		if loc == nil {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:loc[1]])
		s = s[loc[1]:]
		end := kvValueEnd(s)
		if end > 0 {
			b.WriteString("*****")
		}
		s = s[end:]
	}
}

// kvValueEnd is the length of the libpq value at the start of s.
func kvValueEnd(s string) int {
	quoted := strings.HasPrefix(s, "'")
	i := 0
	if quoted {
		i = 1
	}
	for i < len(s) {
		switch c := s[i]; {
		case c == '\\':
			i += 2
			continue
		case quoted && c == '\'':
			return i + 1
		case !quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'):
			return i
		}
		i++
	}
	return len(s)
}

var (
	schemeRE = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://`)
	kvKeyRE  = regexp.MustCompile(`(?i)(?:^|[\s'"(,;])password\s*=\s*`)
	// In a URL on its own the password parameter runs to the next
	// parameter; in an error message it also stops at whitespace.
	queryPasswordURL = regexp.MustCompile(`(?i)([?&]password=)[^&#]*`)
	queryPassword    = regexp.MustCompile(`(?i)([?&]password=)[^&#\s]*`)
)

// RedactError rewrites an error message so any URL or DSN with credentials
// in it is masked; use it on errors that might quote a connection string,
// passing the connection strings the error may quote as secrets (they are
// masked whole, whatever their shape). Without them it masks what looks
// like a password: the userinfo of every scheme:// (to the last '@' before
// the next scheme://), ?password= parameters and password=VALUE pairs.
func RedactError(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, RedactURL(s))
		}
	}
	var b strings.Builder
	locs := schemeRE.FindAllStringIndex(msg, -1)
	prev := 0
	for i, loc := range locs {
		next := len(msg)
		if i+1 < len(locs) {
			next = locs[i+1][0]
		}
		b.WriteString(msg[prev:loc[1]])
		b.WriteString(maskUserinfo(msg[loc[1]:next]))
		prev = next
	}
	b.WriteString(msg[prev:])
	msg = queryPassword.ReplaceAllString(b.String(), "${1}*****")
	return maskKV(msg)
}

// Redacted returns a copy of the config fit to print: URLs and DSNs masked.
func (c *Config) Redacted() *Config {
	out := *c
	out.Contexts = make(map[string]Context, len(c.Contexts))
	for n, x := range c.Contexts {
		x.AMQPURL = RedactURL(x.AMQPURL)
		x.ManagementURL = RedactURL(x.ManagementURL)
		out.Contexts[n] = x
	}
	out.Redrive.Policies = make([]RedrivePolicy, len(c.Redrive.Policies))
	for i, p := range c.Redrive.Policies {
		if p.SystemOfRecord != nil {
			s := *p.SystemOfRecord
			s.DSN = RedactURL(s.DSN)
			p.SystemOfRecord = &s
		}
		out.Redrive.Policies[i] = p
	}
	out.Redrive.StoreDSN = RedactURL(c.Redrive.StoreDSN)
	return &out
}
