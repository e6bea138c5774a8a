package config

import (
	"net/url"
	"regexp"
	"strings"
)

// RedactURL hides the password of a URL (amqp://user:pass@host) and of
// key=value DSNs (password=...), so it can be shown, logged or put in an error.
func RedactURL(s string) string {
	if s == "" {
		return s
	}
	if strings.Contains(s, "://") {
		if u, err := url.Parse(s); err != nil {
			// A bad %-escape in the password makes the URL unparsable; it
			// must not come out whole.
			s = userinfo.ReplaceAllString(s, "${1}${2}:*****@")
		} else if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			s = strings.Replace(u.String(), "xxxxx", "*****", 1)
		}
		// libpq also takes the password as a query parameter.
		return queryPassword.ReplaceAllString(s, "${1}*****")
	}
	return kvPassword.ReplaceAllString(s, "${1}*****")
}

var (
	kvPassword    = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)
	queryPassword = regexp.MustCompile(`(?i)([?&]password=)[^&#\s]*`)
)

// RedactError rewrites an error message so any URL with credentials in it
// is masked; use it on errors that might quote a connection string.
func RedactError(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, RedactURL(s))
		}
	}
	msg = queryPassword.ReplaceAllString(msg, "${1}*****")
	return userinfo.ReplaceAllString(msg, "${1}${2}:*****@")
}

var userinfo = regexp.MustCompile(`([a-z][a-z0-9+.-]*://)([^:/@\s]+):[^@\s]+@`)

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
