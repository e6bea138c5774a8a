// Package config is Berth's typed configuration: named contexts, SLOs, group
// policies and redrive policies, with defaults and validation. The file is
// decoded here with yaml.v3 (Load, Parse: unknown fields are errors, so the
// struct tags that matter are the yaml ones); flags and environment variables
// are read with viper in cmd/. Everything else receives a *Config that has
// passed Validate.
package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/redrive"
)

// DefaultBootstrap is where the bundled broker listens unless told otherwise.
const DefaultBootstrap = "127.0.0.1:9092"

// DefaultContextName is the context used when no config file exists.
const DefaultContextName = "bundled"

// Config is the whole effective configuration.
type Config struct {
	CurrentContext string             `yaml:"current_context" json:"current_context"`
	Contexts       map[string]Context `yaml:"contexts" json:"contexts"`
	// Refresh is how often the console and `--watch` re-read the cluster.
	Refresh time.Duration `yaml:"refresh" json:"refresh"`
	Lag     LagConfig     `yaml:"lag" json:"lag"`
	// Groups holds per-group-pattern policies (SLOs, effects).
	Groups  []GroupPolicy `yaml:"groups" json:"groups"`
	Redrive RedriveConfig `yaml:"redrive" json:"redrive"`
	// Audit is the local audit log file.
	Audit AuditConfig `yaml:"audit" json:"audit"`
	// Source is the file the config was read from ("" when none).
	Source string `yaml:"-" json:"source,omitempty"`
}

// Context is one named system Berth can attach to.
type Context struct {
	Kind      string   `yaml:"kind" json:"kind"`
	Bootstrap []string `yaml:"bootstrap" json:"bootstrap,omitempty"`
	TLS       TLS      `yaml:"tls" json:"tls"`
	SASL      SASL     `yaml:"sasl" json:"sasl"`
	ReadOnly  bool     `yaml:"read_only" json:"read_only"`
	// ClusterID names the cluster itself (Kafka: its cluster id; RabbitMQ:
	// its cluster name), so read_only guards it however it is reached.
	ClusterID string `yaml:"cluster_id" json:"cluster_id,omitempty"`
	// RabbitMQ.
	AMQPURL       string   `yaml:"amqp_url" json:"amqp_url,omitempty"`
	ManagementURL string   `yaml:"management_url" json:"management_url,omitempty"`
	Vhosts        []string `yaml:"vhosts" json:"vhosts,omitempty"`
	Username      string   `yaml:"username" json:"username,omitempty"`
	PasswordEnv   string   `yaml:"password_env" json:"password_env,omitempty"`
	PasswordFile  string   `yaml:"password_file" json:"password_file,omitempty"`
	// Queues are checked by passive declare when the management API is absent.
	Queues []string `yaml:"queues" json:"queues,omitempty"`
	// DataDir is the bundled broker's data directory (kind bundled only).
	DataDir string `yaml:"data_dir" json:"data_dir,omitempty"`
}

// TLS settings for a connection.
type TLS struct {
	Enabled    bool   `yaml:"enabled" json:"enabled"`
	CAFile     string `yaml:"ca_file" json:"ca_file,omitempty"`
	CertFile   string `yaml:"cert_file" json:"cert_file,omitempty"`
	KeyFile    string `yaml:"key_file" json:"key_file,omitempty"`
	SkipVerify bool   `yaml:"skip_verify" json:"skip_verify"`
	// ServerName is the name the server certificate must carry, when it is
	// not the host dialled (a port-forward, an IP address, a load balancer).
	ServerName string `yaml:"server_name" json:"server_name,omitempty"`
}

// SASL settings. No secret is stored in the file: a password comes from
// PasswordEnv or PasswordFile, an OAUTHBEARER token from TokenFile, TokenEnv
// or TokenCommand, AWS credentials from the standard AWS environment
// variables or shared credentials file; none is ever printed.
type SASL struct {
	Mechanism    string `yaml:"mechanism" json:"mechanism,omitempty"`
	Username     string `yaml:"username" json:"username,omitempty"`
	PasswordEnv  string `yaml:"password_env" json:"password_env,omitempty"`
	PasswordFile string `yaml:"password_file" json:"password_file,omitempty"`
	// OAUTHBEARER: where the token comes from (exactly one), re-read when
	// the cached token is about to expire.
	TokenFile    string   `yaml:"token_file" json:"token_file,omitempty"`
	TokenEnv     string   `yaml:"token_env" json:"token_env,omitempty"`
	TokenCommand []string `yaml:"token_command" json:"token_command,omitempty"`
	// Extensions are OAUTHBEARER SASL extensions (e.g. logicalCluster).
	Extensions map[string]string `yaml:"extensions" json:"extensions,omitempty"`
	// AWSProfile is the shared-credentials profile for AWS_MSK_IAM
	// (default: the AWS environment variables, then AWS_PROFILE, then default).
	AWSProfile string `yaml:"aws_profile" json:"aws_profile,omitempty"`
}

// SASL mechanism names, as Kafka spells them.
const (
	SASLPlain       = "PLAIN"
	SASLScram256    = "SCRAM-SHA-256"
	SASLScram512    = "SCRAM-SHA-512"
	SASLOAuthBearer = "OAUTHBEARER"
	SASLAWSMSKIAM   = "AWS_MSK_IAM"
)

// SASLMechanisms lists the supported mechanisms, for messages and docs.
var SASLMechanisms = []string{SASLPlain, SASLScram256, SASLScram512, SASLOAuthBearer, SASLAWSMSKIAM}

// validate checks the SASL block: each mechanism's own fields are given,
// and none of another mechanism's. Errors start with the field's name
// under sasl.
func (s SASL) validate() error {
	mech := strings.ToUpper(s.Mechanism)
	password := s.PasswordEnv != "" || s.PasswordFile != ""
	token := countSet(s.TokenFile != "", s.TokenEnv != "", len(s.TokenCommand) > 0)
	switch mech {
	case "":
		if s.Username != "" || password || token > 0 || s.AWSProfile != "" || len(s.Extensions) > 0 {
			return fmt.Errorf("sasl.mechanism: required when other sasl fields are set (one of %s)", strings.Join(SASLMechanisms, ", "))
		}
		return nil
	case SASLPlain, SASLScram256, SASLScram512:
		if s.Username == "" {
			return fmt.Errorf("sasl.username: required with %s", mech)
		}
		if !password {
			return fmt.Errorf("sasl.password_env: %s needs a password: set sasl.password_env or sasl.password_file", mech)
		}
		if s.PasswordEnv != "" && s.PasswordFile != "" {
			return errors.New("sasl.password_file: give password_env or password_file, not both")
		}
	case SASLOAuthBearer:
		if token != 1 {
			return errors.New("sasl.token_file: OAUTHBEARER needs exactly one of sasl.token_file, sasl.token_env, sasl.token_command")
		}
		if len(s.TokenCommand) > 0 && s.TokenCommand[0] == "" {
			return errors.New("sasl.token_command: the first element is the program to run")
		}
	case SASLAWSMSKIAM:
	default:
		return fmt.Errorf("sasl.mechanism: %q is not one of %s", s.Mechanism, strings.Join(SASLMechanisms, ", "))
	}
	if mech != SASLPlain && mech != SASLScram256 && mech != SASLScram512 && (s.Username != "" || password) {
		return fmt.Errorf("sasl.username: %s takes no username or password", mech)
	}
	if mech != SASLOAuthBearer && (token > 0 || len(s.Extensions) > 0) {
		return fmt.Errorf("sasl.token_file: token and extensions fields go with OAUTHBEARER, not %s", mech)
	}
	if mech != SASLAWSMSKIAM && s.AWSProfile != "" {
		return fmt.Errorf("sasl.aws_profile: goes with AWS_MSK_IAM, not %s", mech)
	}
	return nil
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// LagConfig tunes the lag engine.
type LagConfig struct {
	// DefaultSLO is the age a group may reach before it is in breach.
	DefaultSLO time.Duration `yaml:"default_slo" json:"default_slo"`
	// Window is the sliding window statuses are judged over.
	Window time.Duration `yaml:"window" json:"window"`
	// RetentionMargin flags a partition whose time to data loss is below it.
	RetentionMargin time.Duration `yaml:"retention_margin" json:"retention_margin"`
	// CommitInterval is the longest a working consumer goes between
	// commits: a commit unmoved for this long, past the steady age, is a
	// stall.
	CommitInterval time.Duration `yaml:"commit_interval" json:"commit_interval"`
	// EventTime reads an event time from the records of matching topics,
	// for event-time freshness beside the ingest age (Decision 17).
	EventTime []EventTimeRule `yaml:"event_time" json:"event_time,omitempty"`
}

// EventTimeRule says where the records of matching topics carry the time
// their event happened: a JSON field of the payload or a header, holding an
// RFC 3339 time or epoch milliseconds.
type EventTimeRule struct {
	// Match is a topic glob; the first matching rule applies.
	Match string `yaml:"match" json:"match"`
	// Field is json:PATH (dots for nested objects) or header:NAME.
	Field string `yaml:"field" json:"field"`
	// ClockMargin: an event time ahead of now by more than this is flagged
	// as producer clock error (default 5s).
	ClockMargin time.Duration `yaml:"clock_margin" json:"clock_margin,omitempty"`
}

func (r EventTimeRule) validate() error {
	if r.Match == "" {
		return errors.New("match: empty pattern")
	}
	if _, err := path.Match(r.Match, ""); err != nil {
		return fmt.Errorf("match: bad pattern %q", r.Match)
	}
	if r.Field == "" {
		return errors.New("field: empty (json:PATH or header:NAME)")
	}
	if _, err := redrive.ParseField(r.Field); err != nil {
		return fmt.Errorf("field: %v", err)
	}
	if r.ClockMargin < 0 {
		return fmt.Errorf("clock_margin: %s must not be negative", r.ClockMargin)
	}
	return nil
}

// GroupPolicy applies to consumer groups (or queues) whose name matches.
type GroupPolicy struct {
	Match string `yaml:"match" json:"match"`
	// SLO is the maximum acceptable age; zero means the default.
	SLO time.Duration `yaml:"slo" json:"slo,omitempty"`
	// EventSLO is the maximum acceptable event-time age (lag.event_time
	// topics); zero: none.
	EventSLO time.Duration `yaml:"event_slo" json:"event_slo,omitempty"`
	// Effects marks groups whose processing has external side effects
	// (payments): replays need explicit confirmation.
	Effects bool `yaml:"effects" json:"effects"`
}

// RedriveConfig holds DLQ pairs and redrive policies.
type RedriveConfig struct {
	// DLQs declares DLQ -> original pairs not found by naming convention.
	DLQs     []DLQPair       `yaml:"dlqs" json:"dlqs,omitempty"`
	Policies []RedrivePolicy `yaml:"policies" json:"policies,omitempty"`
	// PlanMaxAge is how long an approved plan stays executable.
	PlanMaxAge time.Duration `yaml:"plan_max_age" json:"plan_max_age"`
	// VerifyWatch is how long to watch the DLQ for re-failures after execution.
	VerifyWatch time.Duration `yaml:"verify_watch" json:"verify_watch"`
	// StoreDSN is where RabbitMQ plans and ledger live (postgres:// or a sqlite file path).
	StoreDSN string `yaml:"store_dsn" json:"store_dsn,omitempty"`
	// Classes adds failure-class rules (regular expressions over
	// "exception: message"), checked before the built-in ones.
	Classes ClassRules `yaml:"classes" json:"classes"`
}

// ClassRules are extra transient/permanent rules for DLQ failure classes.
type ClassRules struct {
	Transient []string `yaml:"transient" json:"transient,omitempty"`
	Permanent []string `yaml:"permanent" json:"permanent,omitempty"`
}

// DLQPair declares that DLQ receives dead letters of Original.
type DLQPair struct {
	DLQ      string `yaml:"dlq" json:"dlq"`
	Original string `yaml:"original" json:"original"`
}

// RedrivePolicy applies to DLQs whose name matches the glob Match.
type RedrivePolicy struct {
	Match          string `yaml:"match" json:"match"`
	IdempotencyKey string `yaml:"idempotency_key" json:"idempotency_key,omitempty"`
	// EventID is where the event id lives (json:FIELD or header:NAME;
	// default json:eventId).
	EventID               string          `yaml:"event_id" json:"event_id,omitempty"`
	RequireIdempotencyKey bool            `yaml:"require_idempotency_key" json:"require_idempotency_key"`
	SystemOfRecord        *SystemOfRecord `yaml:"system_of_record" json:"system_of_record,omitempty"`
	Review                string          `yaml:"review" json:"review,omitempty"`
	Approvals             int             `yaml:"approvals" json:"approvals"`
	AllowedSigners        string          `yaml:"allowed_signers" json:"allowed_signers,omitempty"`
	MaxRedrives           int             `yaml:"max_redrives" json:"max_redrives"`
	// OrderingKey names the business key for ordering checks on queues
	// (json:FIELD or header:NAME); Kafka uses the record key.
	OrderingKey string `yaml:"ordering_key" json:"ordering_key,omitempty"`
	// ErrorHeader names an application error header used for classes.
	ErrorHeader string `yaml:"error_header" json:"error_header,omitempty"`
	// StopOnFailure stops execution at the first failed send (payments).
	StopOnFailure bool `yaml:"stop_on_failure" json:"stop_on_failure"`
}

// SystemOfRecord is where a policy checks whether an effect already committed.
type SystemOfRecord struct {
	Driver string `yaml:"driver" json:"driver"`
	// DSN is masked when printed: it may carry a password.
	DSN    string `yaml:"dsn" json:"dsn,omitempty"`
	DSNEnv string `yaml:"dsn_env" json:"dsn_env,omitempty"`
	Query  string `yaml:"query" json:"query"`
}

// AuditConfig locates the local audit log.
type AuditConfig struct {
	File string `yaml:"file" json:"file"`
}

// Default returns the configuration used when no file exists: one bundled
// context on 127.0.0.1:9092.
func Default() *Config {
	return &Config{
		CurrentContext: DefaultContextName,
		Contexts: map[string]Context{
			DefaultContextName: {Kind: "bundled", Bootstrap: []string{DefaultBootstrap}},
		},
		Refresh: 5 * time.Second,
		Lag: LagConfig{
			DefaultSLO:      5 * time.Minute,
			Window:          2 * time.Minute,
			RetentionMargin: 6 * time.Hour,
			CommitInterval:  5 * time.Second,
		},
		Redrive: RedriveConfig{
			PlanMaxAge:  24 * time.Hour,
			VerifyWatch: 30 * time.Second,
		},
		Audit: AuditConfig{File: path.Join(DataHome(), "audit.log")},
	}
}

// ApplyDefaults fills zero values that have a default.
func (c *Config) ApplyDefaults() {
	d := Default()
	if c.Contexts == nil {
		c.Contexts = map[string]Context{}
	}
	if len(c.Contexts) == 0 {
		c.Contexts = d.Contexts
	}
	if c.CurrentContext == "" {
		// A file with several contexts and no current_context leaves the
		// choice to --context; guessing could point a write at production.
		if _, ok := c.Contexts[DefaultContextName]; ok {
			c.CurrentContext = DefaultContextName
		} else if len(c.Contexts) == 1 {
			for name := range c.Contexts {
				c.CurrentContext = name
			}
		}
	}
	if c.Refresh == 0 {
		c.Refresh = d.Refresh
	}
	if c.Lag.DefaultSLO == 0 {
		c.Lag.DefaultSLO = d.Lag.DefaultSLO
	}
	if c.Lag.Window == 0 {
		c.Lag.Window = d.Lag.Window
	}
	if c.Lag.RetentionMargin == 0 {
		c.Lag.RetentionMargin = d.Lag.RetentionMargin
	}
	if c.Lag.CommitInterval == 0 {
		c.Lag.CommitInterval = d.Lag.CommitInterval
	}
	for i := range c.Lag.EventTime {
		if c.Lag.EventTime[i].ClockMargin == 0 {
			c.Lag.EventTime[i].ClockMargin = 5 * time.Second
		}
	}
	if c.Redrive.PlanMaxAge == 0 {
		c.Redrive.PlanMaxAge = d.Redrive.PlanMaxAge
	}
	if c.Redrive.VerifyWatch == 0 {
		c.Redrive.VerifyWatch = d.Redrive.VerifyWatch
	}
	if c.Audit.File == "" {
		c.Audit.File = d.Audit.File
	}
	for name, ctx := range c.Contexts {
		if ctx.Kind == "" {
			ctx.Kind = "kafka"
		}
		if ctx.Kind == "bundled" && len(ctx.Bootstrap) == 0 {
			ctx.Bootstrap = []string{DefaultBootstrap}
		}
		c.Contexts[name] = ctx
	}
}

// Validate reports the first problem as an error naming the field.
func (c *Config) Validate() error {
	if _, ok := c.Contexts[c.CurrentContext]; !ok && c.CurrentContext != "" {
		return fmt.Errorf("current_context: unknown context %q (have: %s)", c.CurrentContext, strings.Join(c.ContextNames(), ", "))
	}
	for _, name := range c.ContextNames() {
		if err := c.Contexts[name].validate(); err != nil {
			return fmt.Errorf("contexts.%s.%w", name, err)
		}
	}
	if c.Refresh < 200*time.Millisecond {
		return fmt.Errorf("refresh: %s is too short (at least 200ms)", c.Refresh)
	}
	if c.Lag.DefaultSLO <= 0 {
		return errors.New("lag.default_slo: must be positive")
	}
	if c.Lag.Window <= 0 {
		return errors.New("lag.window: must be positive")
	}
	// A negative duration is a typo that would turn a rule around (every
	// plan expired, a watch that never starts): refuse it by name.
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"lag.retention_margin", c.Lag.RetentionMargin}, {"redrive.plan_max_age", c.Redrive.PlanMaxAge}, {"redrive.verify_watch", c.Redrive.VerifyWatch}} {
		if d.v < 0 {
			return fmt.Errorf("%s: %s must not be negative", d.name, d.v)
		}
	}
	if c.Lag.CommitInterval <= 0 {
		return errors.New("lag.commit_interval: must be positive")
	}
	for i, r := range c.Lag.EventTime {
		if err := r.validate(); err != nil {
			return fmt.Errorf("lag.event_time[%d].%w", i, err)
		}
	}
	if c.Lag.CommitInterval >= c.Lag.Window {
		return fmt.Errorf("lag.commit_interval: %s must be shorter than lag.window (%s)", c.Lag.CommitInterval, c.Lag.Window)
	}
	for i, g := range c.Groups {
		if g.EventSLO < 0 {
			return fmt.Errorf("groups[%d].event_slo: must not be negative", i)
		}
		if g.Match == "" {
			return fmt.Errorf("groups[%d].match: empty pattern", i)
		}
		if _, err := path.Match(g.Match, ""); err != nil {
			return fmt.Errorf("groups[%d].match: bad pattern %q", i, g.Match)
		}
		if g.SLO < 0 {
			return fmt.Errorf("groups[%d].slo: must not be negative", i)
		}
	}
	for i, p := range c.Redrive.Policies {
		if err := p.validate(); err != nil {
			return fmt.Errorf("redrive.policies[%d].%w", i, err)
		}
	}
	for i, r := range c.Redrive.Classes.Transient {
		if _, err := regexp.Compile(r); err != nil {
			return fmt.Errorf("redrive.classes.transient[%d]: bad regular expression %q", i, r)
		}
	}
	for i, r := range c.Redrive.Classes.Permanent {
		if _, err := regexp.Compile(r); err != nil {
			return fmt.Errorf("redrive.classes.permanent[%d]: bad regular expression %q", i, r)
		}
	}
	for i, d := range c.Redrive.DLQs {
		if d.DLQ == "" || d.Original == "" {
			return fmt.Errorf("redrive.dlqs[%d]: both dlq and original are required", i)
		}
	}
	return nil
}

func (x Context) validate() error {
	switch x.Kind {
	case "bundled", "kafka":
		if len(x.Bootstrap) == 0 {
			return errors.New("bootstrap: at least one host:port is required")
		}
		for _, b := range x.Bootstrap {
			if !strings.Contains(b, ":") {
				return fmt.Errorf("bootstrap: %q is not host:port", b)
			}
		}
	case "rabbitmq":
		if x.AMQPURL == "" && x.ManagementURL == "" {
			return errors.New("amqp_url: an AMQP URL or a management URL is required")
		}
		// username replaces the URLs' user and password: without a
		// password of its own it would log in with an empty one.
		if x.Username != "" && x.PasswordEnv == "" && x.PasswordFile == "" {
			return fmt.Errorf("password_env: username %s needs a password: set password_env or password_file", x.Username)
		}
		if x.PasswordEnv != "" && x.PasswordFile != "" {
			return errors.New("password_file: give password_env or password_file, not both")
		}
	default:
		return fmt.Errorf("kind: %q is not one of bundled, kafka, rabbitmq", x.Kind)
	}
	return x.SASL.validate()
}

func (p RedrivePolicy) validate() error {
	if p.Match == "" {
		return errors.New("match: empty pattern")
	}
	if _, err := path.Match(p.Match, ""); err != nil {
		return fmt.Errorf("match: bad pattern %q", p.Match)
	}
	if p.IdempotencyKey != "" && !strings.HasPrefix(p.IdempotencyKey, "json:") && !strings.HasPrefix(p.IdempotencyKey, "header:") {
		return fmt.Errorf("idempotency_key: %q must be json:FIELD or header:NAME", p.IdempotencyKey)
	}
	if p.EventID != "" && !strings.HasPrefix(p.EventID, "json:") && !strings.HasPrefix(p.EventID, "header:") {
		return fmt.Errorf("event_id: %q must be json:FIELD or header:NAME", p.EventID)
	}
	switch p.Review {
	case "", "none", "required":
	default:
		return fmt.Errorf("review: %q is not required or none", p.Review)
	}
	if p.Approvals < 0 {
		return errors.New("approvals: must not be negative")
	}
	if p.Review == "required" && p.Approvals > 0 && p.AllowedSigners == "" {
		return errors.New("allowed_signers: required when approvals are required")
	}
	if p.MaxRedrives < 0 {
		return errors.New("max_redrives: must not be negative")
	}
	if s := p.SystemOfRecord; s != nil {
		switch s.Driver {
		case "postgres", "sqlite":
		default:
			return fmt.Errorf("system_of_record.driver: %q is not postgres or sqlite", s.Driver)
		}
		if s.DSN == "" && s.DSNEnv == "" {
			return errors.New("system_of_record.dsn: dsn or dsn_env is required")
		}
		if s.Query == "" {
			return errors.New("system_of_record.query: required")
		}
	}
	return nil
}

// ContextNames lists context names in sorted order.
func (c *Config) ContextNames() []string {
	names := make([]string, 0, len(c.Contexts))
	for n := range c.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Current returns the current context and its name.
func (c *Config) Current() (string, Context) {
	return c.CurrentContext, c.Contexts[c.CurrentContext]
}

// GroupPolicyFor returns the first group policy matching name, and the SLO
// that applies (the policy's, or the default).
func (c *Config) GroupPolicyFor(name string) (GroupPolicy, time.Duration) {
	for _, g := range c.Groups {
		if ok, _ := path.Match(g.Match, name); ok {
			slo := g.SLO
			if slo == 0 {
				slo = c.Lag.DefaultSLO
			}
			return g, slo
		}
	}
	return GroupPolicy{}, c.Lag.DefaultSLO
}

// RedrivePolicyFor returns the first redrive policy whose glob matches the
// DLQ's name, and whether one matched.
func (c *Config) RedrivePolicyFor(dlq string) (RedrivePolicy, bool) {
	for _, p := range c.Redrive.Policies {
		if ok, _ := path.Match(p.Match, dlq); ok {
			return p, true
		}
	}
	return RedrivePolicy{}, false
}

// Password resolves a secret from an environment variable or a file. The
// error names the variable or file, never the value.
func Password(env, file string) (string, error) {
	if env != "" {
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("password_env: environment variable %s is not set", env)
		}
		return v, nil
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("password_file: cannot read %s: %v", file, errors.Unwrap(err))
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}

// DataHome is $XDG_DATA_HOME/berth (default ~/.local/share/berth).
func DataHome() string {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = path.Join(home, ".local", "share")
	}
	return path.Join(base, "berth")
}

// ConfigHome is $XDG_CONFIG_HOME/berth (default ~/.config/berth).
func ConfigHome() string {
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = path.Join(home, ".config")
	}
	return path.Join(base, "berth")
}
