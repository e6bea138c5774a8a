// Package kafka is the Kafka backend: it implements backends.Cluster (and the
// optional abilities) on franz-go's kgo and kadm. Nothing outside backends/
// sees a franz-go type except through Client.Kgo/Admin in backend packages.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/berth-dev/berth/backends"
)

// Options say how to reach a cluster.
type Options struct {
	Bootstrap []string
	TLS       *tls.Config    // nil: plaintext
	SASL      sasl.Mechanism // nil: none
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
	cl, err := kgo.NewClient(o.kgoOpts()...)
	if err != nil {
		return nil, fmt.Errorf("kafka %s: %w", strings.Join(o.Bootstrap, ","), err)
	}
	c := &Client{opts: o, cl: cl, admin: kadm.NewClient(cl)}
	pctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
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
