package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

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
	return c, err
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
	m, err := saslMechanism(a.ctx.SASL)
	if err != nil {
		return opts, errors.New(field + err.Error())
	}
	opts.SASL = m
	return opts, nil
}

// tlsConfig builds a client TLS config, or nil for plaintext. Setting any
// file implies TLS even without enabled: true.
func tlsConfig(c config.TLS) (*tls.Config, error) {
	if !c.Enabled && c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" && !c.SkipVerify {
		return nil, nil
	}
	// ServerName is left empty: franz-go sets it per broker on each dial.
	t := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.SkipVerify}
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

// saslMechanism builds the SASL mechanism, or nil when none is configured.
func saslMechanism(s config.SASL) (sasl.Mechanism, error) {
	if s.Mechanism == "" {
		return nil, nil
	}
	pass, err := config.Password(s.PasswordEnv, s.PasswordFile)
	if err != nil {
		return nil, errors.New("sasl." + err.Error())
	}
	switch strings.ToUpper(s.Mechanism) {
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl.mechanism: %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", s.Mechanism)
}

// opCtx is a context bounded by --timeout for one operation.
func (a *app) opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, a.timeout)
}
