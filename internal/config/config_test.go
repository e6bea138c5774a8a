package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValidBundled(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	name, ctx := c.Current()
	if name != "bundled" || ctx.Kind != "bundled" || ctx.Bootstrap[0] != "127.0.0.1:9092" {
		t.Fatalf("default context = %s %+v", name, ctx)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.CurrentContext = "prod" }, `current_context: unknown context "prod"`},
		{func(c *Config) { c.Contexts["x"] = Context{Kind: "nats"} }, `contexts.x.kind: "nats"`},
		{func(c *Config) { c.Contexts["x"] = Context{Kind: "kafka"} }, `contexts.x.bootstrap`},
		{func(c *Config) {
			c.Contexts["x"] = Context{Kind: "kafka", Bootstrap: []string{"h:1"}, SASL: SASL{Mechanism: "GSSAPI"}}
		}, `contexts.x.sasl.mechanism`},
		{func(c *Config) { c.Redrive.Policies = []RedrivePolicy{{Match: "p*", Review: "maybe"}} }, `redrive.policies[0].review`},
		{func(c *Config) {
			c.Redrive.Policies = []RedrivePolicy{{Match: "p*", SystemOfRecord: &SystemOfRecord{Driver: "mysql"}}}
		}, `redrive.policies[0].system_of_record.driver`},
		{func(c *Config) { c.Groups = []GroupPolicy{{Match: "[bad"}} }, `groups[0].match`},
		{func(c *Config) { c.Groups = []GroupPolicy{{Match: "g", EventSLO: -time.Second}} }, `groups[0].event_slo: must not be negative`},
		{func(c *Config) { c.Lag.CommitInterval = -time.Second }, `lag.commit_interval: must be positive`},
		{func(c *Config) { c.Lag.CommitInterval = 5 * time.Minute }, `lag.commit_interval: 5m0s must be shorter than lag.window`},
		{func(c *Config) { c.Lag.EventTime = []EventTimeRule{{Field: "json:t"}} }, `lag.event_time[0].match: empty pattern`},
		{func(c *Config) { c.Lag.EventTime = []EventTimeRule{{Match: "o[", Field: "json:t"}} }, `lag.event_time[0].match: bad pattern "o["`},
		{func(c *Config) {
			c.Lag.EventTime = []EventTimeRule{{Match: "o*", Field: "json:t"}, {Match: "p*"}}
		}, `lag.event_time[1].field: empty (json:PATH or header:NAME)`},
		{func(c *Config) { c.Lag.EventTime = []EventTimeRule{{Match: "o*", Field: "payload.time"}} }, `lag.event_time[0].field: "payload.time" must be json:FIELD or header:NAME`},
		{func(c *Config) {
			c.Lag.EventTime = []EventTimeRule{{Match: "o*", Field: "header:t", ClockMargin: -time.Second}}
		}, `lag.event_time[0].clock_margin: -1s must not be negative`},
	}
	for _, tc := range cases {
		c := Default()
		tc.mutate(c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}

func TestPoliciesMatchByGlob(t *testing.T) {
	c := Default()
	c.Groups = []GroupPolicy{{Match: "payments-*", Effects: true}, {Match: "sales-*", SLO: 3600e9}}
	c.Redrive.Policies = []RedrivePolicy{{Match: "payments*.DLT", Review: "required"}}
	if p, _ := c.GroupPolicyFor("payments-capture"); !p.Effects {
		t.Fatal("payments-capture should be effect-producing")
	}
	if _, slo := c.GroupPolicyFor("sales-analytics"); slo.Hours() != 1 {
		t.Fatalf("sales SLO = %s", slo)
	}
	if _, slo := c.GroupPolicyFor("email-notifier"); slo != c.Lag.DefaultSLO {
		t.Fatalf("default SLO = %s", slo)
	}
	if p, ok := c.RedrivePolicyFor("payments.DLT"); !ok || p.Review != "required" {
		t.Fatal("payments.DLT policy not found")
	}
	if _, ok := c.RedrivePolicyFor("shipment-jobs.DLT"); ok {
		t.Fatal("shipment-jobs.DLT should match no policy")
	}
}

func TestRedactHidesPasswords(t *testing.T) {
	for _, in := range []string{
		"amqp://guest:s3cret@127.0.0.1:5672/",
		"postgres://app:s3cret@db:5432/test",
		"host=db user=app password=s3cret dbname=test",
	} {
		out := RedactURL(in)
		if strings.Contains(out, "s3cret") {
			t.Errorf("RedactURL(%q) = %q still holds the password", in, out)
		}
	}
	msg := RedactError(`dial amqp://guest:s3cret@10.0.0.1:5672/: refused`)
	if strings.Contains(msg, "s3cret") {
		t.Errorf("RedactError left the password: %s", msg)
	}
}

// Negative durations in the file are refused by name, not read as rules
// turned around (every plan expired at once).
func TestNegativeDurationsAreRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, field string }{
		{"redrive:\n  plan_max_age: -1h\n", "redrive.plan_max_age"},
		{"redrive:\n  verify_watch: -5s\n", "redrive.verify_watch"},
		{"lag:\n  retention_margin: -6h\n", "lag.retention_margin"},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		c.ApplyDefaults()
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.field+": ") {
			t.Errorf("%q: %v, want an error naming %s", tc.yaml, err, tc.field)
		}
	}
}

// A RabbitMQ username replaces the URLs' credentials: without a password
// of its own, the config says which field is missing instead of a login
// failing with an empty password.
func TestRabbitMQUsernameNeedsAPassword(t *testing.T) {
	c, err := Parse([]byte("contexts:\n  mq:\n    kind: rabbitmq\n    amqp_url: amqp://mq:5672/\n    username: ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err == nil || err.Error() != "contexts.mq.password_env: username ops needs a password: set password_env or password_file" {
		t.Fatalf("got %v", err)
	}
}
