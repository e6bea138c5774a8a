// Package kafka is the Kafka backend: it implements backends.Cluster (and the
// optional abilities) on franz-go's kgo and kadm. The console and the pure
// engines never see a franz-go type. Outside backends/, franz-go is imported
// only where Berth is itself a Kafka client or configures one: internal/demo
// (the HarborCart workload's producers and consumers), cmd/berth's SASL
// mechanisms (backend.go) and internal/kafkatest (tests seed topics and
// groups with it). Client.Kgo and Client.Admin are for backend
// packages.
package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/berth-dev/berth/backends"
)

// Options say how to reach a cluster.
type Options struct {
	Bootstrap []string
	TLS       *tls.Config    // nil: plaintext
	SASL      sasl.Mechanism // nil: none
	// SASLUser names the identity SASL authenticates as ("user admin"),
	// for error messages; never a secret.
	SASLUser string
	// Timeout bounds dialing and each request; callers' contexts bound calls.
	Timeout  time.Duration
	ClientID string
	// Extra options for specialised clients (transactions, consumers).
	Extra []kgo.Opt
}

// Client is a connection to one Kafka cluster.
type Client struct {
	opts  Options
	cl    *kgo.Client
	admin *kadm.Client
}

// Dial connects and checks the cluster answers within the timeout; the
// error names the bootstrap addresses.
func Dial(ctx context.Context, o Options) (*Client, error) {
	watch := &authWatch{}
	cl, err := kgo.NewClient(append(o.kgoOpts(), kgo.WithHooks(watch))...)
	if err != nil {
		return nil, fmt.Errorf("kafka %s: %w", strings.Join(o.Bootstrap, ","), err)
	}
	c := &Client{opts: o, cl: cl, admin: kadm.NewClient(cl)}
	pctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		if aerr := o.authFailure(err, watch); aerr != nil {
			return nil, aerr
		}
		if msg := notKafka(err); msg != "" {
			return nil, fmt.Errorf("kafka %s: %s", strings.Join(o.Bootstrap, ","), msg)
		}
		var he x509.HostnameError
		if errors.As(err, &he) && he.Certificate != nil {
			return nil, fmt.Errorf("kafka %s: the broker's certificate is for %s, not %s (set tls.server_name if that is the cluster's name)",
				strings.Join(o.Bootstrap, ","), certNames(he.Certificate), he.Host)
		}
		// A silent broker trips either our deadline or the client's own
		// read deadline (set to the same timeout) first: both mean the same.
		var ne net.Error
		if pctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			return nil, fmt.Errorf("kafka %s: %w within %s", strings.Join(o.Bootstrap, ","), backends.ErrUnreachable, o.timeout())
		}
		// A refused or unroutable connection fails at once; say so plainly
		// rather than wait out the timeout.
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			return nil, fmt.Errorf("kafka %s: %w: %w", strings.Join(o.Bootstrap, ","), backends.ErrUnreachable, op.Err)
		}
		if errors.Is(err, io.EOF) {
			// The broker hung up without answering: a TLS or SASL
			// listener reached without them, or a broker refusing us.
			return nil, fmt.Errorf("kafka %s: the broker closed the connection without answering (does the listener need TLS or SASL?)", strings.Join(o.Bootstrap, ","))
		}
		return nil, fmt.Errorf("kafka %s: %w", strings.Join(o.Bootstrap, ","), err)
	}
	return c, nil
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 10 * time.Second
	}
	return o.Timeout
}

func (o Options) kgoOpts() []kgo.Opt {
	id := o.ClientID
	if id == "" {
		id = "berth"
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Bootstrap...),
		kgo.ClientID(id),
		kgo.DialTimeout(o.timeout()),
		kgo.RequestTimeoutOverhead(o.timeout()),
		kgo.RetryTimeout(o.timeout()),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	if o.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(o.TLS))
	}
	if o.SASL != nil {
		opts = append(opts, kgo.SASL(o.SASL))
	}
	return append(opts, o.Extra...)
}

// NewKgo makes another franz-go client with the same connection settings
// plus extra options (a consumer, a transactional producer).
func (c *Client) NewKgo(extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(c.opts.kgoOpts(), extra...)...)
}

// Kgo is the underlying franz-go client (backend packages only).
func (c *Client) Kgo() *kgo.Client { return c.cl }

// Admin is the underlying kadm client (backend packages only).
func (c *Client) Admin() *kadm.Client { return c.admin }

// Options returns the options the client was made with.
func (c *Client) Options() Options { return c.opts }

// Close releases connections.
func (c *Client) Close() { c.cl.Close() }

// authWatch notices a connection lost while authenticating: brokers (and
// kfake) answer a bad password by closing the connection, which franz-go
// reports as a bare EOF that says nothing about the password.
type authWatch struct{ lostInAuth atomic.Bool }

// OnBrokerRead implements kgo.HookBrokerRead.
func (w *authWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil && (key == int16(kmsg.SASLAuthenticate) || key == int16(kmsg.SASLHandshake)) {
		w.lostInAuth.Store(true)
	}
}

// AuthError is a SASL authentication failure: the mechanism and the
// identity are named, never the secret.
type AuthError struct {
	Bootstrap string
	Mechanism string
	User      string // "user admin"; empty when the mechanism has none
	Detail    string // the broker's reason, when it gave one
}

func (e *AuthError) Error() string {
	who := e.Mechanism
	if e.User != "" {
		who += ", " + e.User
	}
	msg := fmt.Sprintf("kafka %s: authentication failed (%s)", e.Bootstrap, who)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// authFailure turns a failed ping into an AuthError when SASL is why.
func (o Options) authFailure(err error, w *authWatch) error {
	if o.SASL == nil {
		return nil
	}
	e := &AuthError{Bootstrap: strings.Join(o.Bootstrap, ","), Mechanism: o.SASL.Name(), User: o.SASLUser}
	var ke *kerr.Error
	switch {
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("kafka %s: the cluster does not offer SASL mechanism %s", e.Bootstrap, e.Mechanism)
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState):
		// franz-go appends the broker's message after the code: keep it.
		if errors.As(err, &ke) {
			if _, after, ok := strings.Cut(err.Error(), ke.Error()+": "); ok {
				e.Detail = after
			}
		}
		return e
	case w.lostInAuth.Load():
		return e
	case errors.As(err, &ke):
		return nil
	}
	// A token or credential source that failed names its own setting.
	if msg := err.Error(); strings.Contains(msg, "sasl.") || strings.Contains(msg, "OAUTHBEARER") {
		return fmt.Errorf("kafka %s: %s: %w", e.Bootstrap, e.Mechanism, err)
	}
	return nil
}

// certNames lists the names a certificate is valid for.
func certNames(c *x509.Certificate) string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		names = append(names, c.Subject.CommonName)
	}
	return strings.Join(names, ", ")
}

// Identity reads the cluster's id and the addresses its brokers advertise,
// with the bootstrap addresses dialled: what read-only decisions compare
// against the contexts of the config.
func (c *Client) Identity(ctx context.Context) (id string, addrs []string, err error) {
	md, err := c.admin.BrokerMetadata(ctx)
	if err != nil {
		return "", nil, describeErr("metadata", err)
	}
	addrs = append(addrs, c.opts.Bootstrap...)
	for _, b := range md.Brokers {
		addrs = append(addrs, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	return md.Cluster, addrs, nil
}

// notKafka explains franz-go's "invalid large response size" (the first
// four bytes of the answer read as a length): the port speaks another
// protocol. "" when err is something else.
func notKafka(err error) string {
	msg := err.Error()
	if !strings.Contains(msg, "invalid large response size") {
		return ""
	}
	switch {
	case strings.Contains(msg, "tls alert"):
		return "the server answered with TLS: the listener needs tls.enabled"
	case strings.Contains(msg, "HTTP"):
		return "the server answered HTTP, not Kafka: is the port a Kafka listener?"
	}
	var size uint32
	if _, scanErr := fmt.Sscanf(msg[strings.Index(msg, "invalid large response size"):], "invalid large response size %d", &size); scanErr == nil {
		b := []byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}
		printable := true
		for _, c := range b {
			printable = printable && c >= 0x20 && c < 0x7f
		}
		if printable {
			return fmt.Sprintf("the server answered %q, not Kafka: is the port a Kafka listener (%q is how AMQP answers)?", b, "AMQP")
		}
	}
	return "the server did not answer as a Kafka broker: is the port a Kafka listener?"
}
