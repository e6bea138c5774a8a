package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/config"
)

// kafkaClient connects to the current context's Kafka cluster (bundled or
// external). It fails within --timeout naming the address when unreachable.
func (a *app) kafkaClient(ctx context.Context) (*kafka.Client, error) {
	opts, err := a.kafkaOptions()
	if err != nil {
		return nil, err
	}
	c, err := kafka.Dial(ctx, opts)
	if err != nil && a.ctx.Kind == "bundled" && errors.Is(err, backends.ErrUnreachable) {
		// The usual cause on a fresh machine: nothing started it yet.
		return nil, fmt.Errorf("%w (start the bundled broker with `berth broker` or `berth demo`)", err)
	}
	if err != nil {
		return nil, err
	}
	if err := a.guardKafka(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// kafkaCluster connects and returns the backends.Cluster view; the caller
// closes it.
func (a *app) kafkaCluster(ctx context.Context) (*kafka.Cluster, error) {
	c, err := a.kafkaClient(ctx)
	if err != nil {
		return nil, err
	}
	return kafka.NewCluster(c), nil
}

// kafkaOptions turns the current context into connection options: TLS
// material is loaded and the SASL password resolved from its environment
// variable or file here, so a bad setting fails before any dial, naming the
// context field (never the secret).
func (a *app) kafkaOptions() (kafka.Options, error) {
	switch a.ctx.Kind {
	case "kafka", "bundled":
	default:
		hint := ""
		if a.ctx.Kind == "rabbitmq" {
			hint = " (for RabbitMQ: berth queues, berth describe queue, berth dlq ..., berth redrive ...)"
		}
		return kafka.Options{}, fmt.Errorf("context %s is a %s context; this command needs Kafka%s", a.ctxName, a.ctx.Kind, hint)
	}
	opts := kafka.Options{Bootstrap: a.ctx.Bootstrap, Timeout: a.timeout}
	field := "contexts." + a.ctxName + "."
	t, err := tlsConfig(a.ctx.TLS)
	if err != nil {
		return opts, errors.New(field + err.Error())
	}
	opts.TLS = t
	m, user, err := saslMechanism(a.ctx.SASL, field+"sasl.")
	if err != nil {
		return opts, errors.New(field + err.Error())
	}
	opts.SASL, opts.SASLUser = m, user
	if m != nil && m.Name() == config.SASLPlain && t == nil && !a.warnedPlain {
		// PLAIN sends the password as it is: without TLS anyone on the
		// path reads it. Allowed (a local test cluster), never silent.
		a.warnedPlain = true
		fmt.Fprintf(a.stderr, "berth: warning: context %s sends its SASL PLAIN password unencrypted (no tls): set tls.enabled unless this network is trusted\n", a.ctxName)
	}
	return opts, nil
}

// tlsConfig builds a client TLS config, or nil for plaintext. Setting any
// file implies TLS even without enabled: true.
func tlsConfig(c config.TLS) (*tls.Config, error) {
	if !c.Enabled && c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" && !c.SkipVerify && c.ServerName == "" {
		return nil, nil
	}
	// An empty ServerName is set by franz-go per broker on each dial; a
	// configured one is kept for every broker (a port-forward or an IP
	// address in bootstrap, certificates naming the real host).
	t := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.SkipVerify, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: cannot read %s: %v", c.CAFile, errors.Unwrap(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file: %s holds no PEM certificate", c.CAFile)
		}
		t.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("tls.cert_file: cert_file and key_file go together")
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file: cannot load %s / %s: %v", c.CertFile, c.KeyFile, err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

// saslMechanism builds the SASL mechanism, or nil when none is configured,
// and the identity it authenticates as, for error messages. Secrets are
// resolved (or, for tokens and AWS credentials, fetched once) here so a
// missing one fails before any dial, naming its setting; field prefixes the
// names of errors raised later, during a connection.
func saslMechanism(s config.SASL, field string) (sasl.Mechanism, string, error) {
	mech := strings.ToUpper(s.Mechanism)
	switch mech {
	case "":
		return nil, "", nil
	case config.SASLPlain, config.SASLScram256, config.SASLScram512:
		pass, err := config.Password(s.PasswordEnv, s.PasswordFile)
		if err != nil {
			return nil, "", errors.New("sasl." + err.Error())
		}
		if pass == "" {
			return nil, "", fmt.Errorf("sasl.%s: the password is empty", passwordField(s))
		}
		user := "user " + s.Username
		switch mech {
		case config.SASLPlain:
			return plain.Auth{User: s.Username, Pass: pass}.AsMechanism(), user, nil
		case config.SASLScram256:
			return scram.Auth{User: s.Username, Pass: pass}.AsSha256Mechanism(), user, nil
		}
		return scram.Auth{User: s.Username, Pass: pass}.AsSha512Mechanism(), user, nil
	case config.SASLOAuthBearer:
		src := &kafka.TokenSource{File: s.TokenFile, Env: s.TokenEnv, Command: s.TokenCommand, Field: field}
		if _, err := src.Token(context.Background()); err != nil {
			return nil, "", errors.New("sasl." + strings.TrimPrefix(err.Error(), field))
		}
		return kafka.OAuthBearer(src, s.Extensions), "", nil
	case config.SASLAWSMSKIAM:
		creds := kafka.AWSCredentials{Profile: s.AWSProfile, Field: field}
		a, err := creds.Load()
		if err != nil {
			return nil, "", errors.New("sasl." + strings.TrimPrefix(err.Error(), field))
		}
		// The access key id is an identifier, not a secret: AWS prints it.
		return kafka.MSKIAM(creds), "access key " + a.AccessKey, nil
	}
	return nil, "", fmt.Errorf("sasl.mechanism: %q is not one of %s", s.Mechanism, strings.Join(config.SASLMechanisms, ", "))
}

func passwordField(s config.SASL) string {
	if s.PasswordEnv != "" {
		return "password_env"
	}
	return "password_file"
}

// opCtx is a context bounded by --timeout for one operation.
func (a *app) opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, a.timeout)
}

// workCtx bounds a step whose work grows with a plan: reading its records or
// messages again for a review, a dry run or the checks before a run
// (workBudget, at fetchPerSecond).
func (a *app) workCtx(parent context.Context, records int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, workBudget(a.timeout, work{int64(records), fetchPerSecond}))
}

// How many units of each kind of work a command is granted a second for:
// a slow broker's or busy machine's rate, not a fast one's.
const (
	// records the ordering scan reads: read and compared, nothing more.
	scanPerSecond = 10000
	// DLQ records a plan reads: each parsed, classed and digested.
	planReadPerSecond = 5000
	// records or messages fetched and re-derived one by one: a plan's read
	// again for a review, a dry run or the checks before a run, and a
	// RabbitMQ plan's browse of its DLQ.
	fetchPerSecond = 2000
)

// work is n units of one kind of work, done at per units a second.
type work struct{ n, per int64 }

// workBudget is the one rule for how long a command whose work grows with
// its input may take. --timeout is sized for one exchange with a cluster;
// such a command gets it plus a second for every per units of each kind of
// work it may do, so that a 100,000-record plan is not cut short at the
// default on a busy machine while a silent cluster still fails within a
// bound. Each kind's share is held at a day: a huge limit (--scan-limit)
// must not overflow into a negative, already expired, deadline.
func workBudget(timeout time.Duration, kinds ...work) time.Duration {
	const most = 24 * time.Hour
	budget := timeout
	for _, k := range kinds {
		extra := k.n / k.per
		if extra > int64(most/time.Second) {
			budget += most
			continue
		}
		budget += time.Duration(extra) * time.Second
	}
	return budget
}
