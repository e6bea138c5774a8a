package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Malformed connection strings never print their password: not in the
// error a bad URL causes, not in `config view` (YAML or JSON). Before, a
// password with whitespace, an upper-case AMQP:// scheme with a bad port and
// a libpq "\ " escape came out whole, and so did a URL whose scheme lost
// its "://" (amqp//user:pass@host).
func TestMalformedConnectionStringsNeverPrintThePassword(t *testing.T) {
	const secret = "Hunter2Secret"
	urls := []string{
		"amqp://ops:pa ss" + secret + "@127.0.0.1:5672/",
		"AMQP://ops:" + secret + "@127.0.0.1:bad/",
		"amqp://ops:" + secret + "/x@127.0.0.1:1/",
		"http://ops:pa ss" + secret + "@127.0.0.1:1/",
		// A scheme mistyped (no "://") is still a password before an '@'.
		"amqp//ops:" + secret + "@127.0.0.1:5672/",
		"amqp:/ops:" + secret + "@127.0.0.1:5672/",
		"http:ops:" + secret + "@127.0.0.1:15672",
	}
	for _, u := range urls {
		isolateConfig(t)
		for _, flag := range []string{"--amqp", "--management"} {
			out, errOut, code := runBerth(t, "--timeout", "500ms", flag, u, "queues")
			if code == 0 || strings.Contains(out+errOut, secret) {
				t.Errorf("%s %q: exit %d, output shows the password:\n%s%s", flag, u, code, out, errOut)
			}
		}
	}
	dsns := []string{
		`host=127.0.0.1 user=berth password=pa\ ss` + secret + ` dbname=test`,
		`host=127.0.0.1 password='it\'s ` + secret + `' dbname=test`,
		"postgres://berth:pa ss" + secret + "@127.0.0.1:5432/test",
	}
	for i, u := range append(urls, dsns...) {
		isolateConfig(t)
		q := strconv.Quote(u)
		cfg := rabbitConfig{AMQP: q, Management: q, Store: q,
			Policies: fmt.Sprintf("    - match: \"*\"\n      system_of_record: {driver: postgres, dsn: %s, query: \"select 1\"}\n", q)}.write(t)
		for _, o := range []string{"yaml", "json"} {
			args := []string{"--config", cfg, "config", "view"}
			if o == "json" {
				args = append(args, "-o", "json")
			}
			out, errOut, code := runBerth(t, args...)
			if code != 0 || strings.Contains(out+errOut, secret) || !strings.Contains(out, "*****") {
				t.Errorf("config view -o %s with %d %q: exit %d, password shown or nothing masked:\n%s%s", o, i, u, code, out, errOut)
			}
		}
	}
}
