// Package rabbitmq is the RabbitMQ backend: queue inventory and statistics
// from the management HTTP API, messages over AMQP 0.9.1 (amqp091-go), and a
// reduced mode (passive declares of configured queues) when there is no
// management API. It also holds RabbitMQ's redrive I/O (plan store, ledger,
// confirmed publishing), which internal/actions drives: a run reports what
// the broker says about the DLQ and what each consumed message derives to,
// and an Admission (internal/actions) decides whether the DLQ may be
// consumed and which messages are sent; no redrive policy is decided here.
// amqp091-go stays here: only ContentDigest and ToMessage take an
// amqp.Delivery.
package rabbitmq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
)

// Options say how to reach a RabbitMQ server.
type Options struct {
	// AMQPURL is amqp:// or amqps:// (credentials in it are never printed).
	AMQPURL string
	// ManagementURL is the management API's base (http(s)://host:15672).
	ManagementURL string
	// Username and Password override the URLs' credentials when set.
	Username, Password string
	// Vhosts limits the inventory (empty: every vhost the user can see).
	Vhosts []string
	// Queues are the queues reduced mode checks by passive declare.
	Queues []string
	TLS    *tls.Config // for amqps:// and https://; nil: system defaults
	// Timeout bounds dialing and each call.
	Timeout time.Duration
	// ReadOnly refuses every action that changes the server (redrive).
	ReadOnly bool
}

// Client is one attachment to a RabbitMQ server.
type Client struct {
	opts Options
	mgmt *mgmt // nil in reduced mode
	// mgmtErr says why there is no management API (reduced mode).
	mgmtErr error
	uri     amqp.URI // parsed AMQPURL (zero when none)

	// clusterName is the cluster's name, from the management API or the
	// AMQP server properties ("" until known).
	clusterName string

	mu   sync.Mutex
	conn *amqp.Connection
}

// Mode names of a QueueInventory.
const (
	ModeManagement = "management"
	ModeReduced    = "reduced"
)

// Dial attaches. With a management URL it checks the API answers; when it
// does not and there is an AMQP URL, the client falls back to reduced mode
// (Reduced says why). With an AMQP URL it connects. Errors name the address
// and never carry credentials.
func Dial(ctx context.Context, o Options) (*Client, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.AMQPURL == "" && o.ManagementURL == "" {
		return nil, errors.New("rabbitmq: an AMQP URL or a management URL is required")
	}
	c := &Client{opts: o}
	if o.AMQPURL != "" {
		u, err := amqp.ParseURI(o.AMQPURL)
		if err != nil {
			return nil, fmt.Errorf("amqp_url: %q: %s", config.RedactURL(o.AMQPURL), amqpURLProblem(err, o.AMQPURL))
		}
		if o.Username != "" {
			u.Username, u.Password = o.Username, o.Password
		}
		c.uri = u
	}
	// AMQP is dialled while the management API is asked, each within the
	// same budget: a management API that never answers would otherwise
	// spend it all and fail the AMQP dial ("no time left"), blaming the
	// server that was fine instead of falling back to reduced mode.
	dialed := make(chan error, 1)
	if o.AMQPURL != "" {
		go func() {
			_, err := c.connection(ctx)
			dialed <- err
		}()
	} else {
		dialed <- nil
	}
	if err := c.probeManagement(ctx, o); err != nil {
		<-dialed
		c.Close()
		return nil, err
	}
	// AMQP failing is fatal only without the management API: with it the
	// inventory still works, and message operations will say why not.
	if err := <-dialed; err != nil && c.mgmt == nil {
		return nil, err
	}
	return c, nil
}

// probeBudget is how long the management API may take to answer the
// probe. With AMQP to fall back to, at most half of what is left of the
// operation: a silent management API must leave reduced mode the time to
// do its work (passive declares), not only to connect.
func (c *Client) probeBudget(ctx context.Context) time.Duration {
	d := c.opts.Timeout
	if dl, ok := ctx.Deadline(); ok && c.uri.Host != "" && time.Until(dl)/2 < d {
		d = time.Until(dl) / 2
	}
	return d
}

// probeManagement asks the management API for the overview. An error is
// returned only when there is no AMQP URL to fall back to; otherwise the
// reason is kept for Reduced.
func (c *Client) probeManagement(ctx context.Context, o Options) error {
	if o.ManagementURL == "" {
		c.mgmtErr = errors.New("no management URL configured")
		return nil
	}
	user, pass := "guest", "guest"
	if c.uri.Host != "" {
		user, pass = c.uri.Username, c.uri.Password
	}
	if o.Username != "" {
		user, pass = o.Username, o.Password
	}
	m, err := newMgmt(o.ManagementURL, user, pass, o.TLS, o.Timeout)
	if err != nil {
		return err
	}
	if o.Username != "" {
		m.user, m.password = o.Username, o.Password
	}
	octx, cancel := context.WithTimeout(ctx, c.probeBudget(ctx))
	ov, err := m.overview(octx)
	cancel()
	switch {
	case err == nil:
		c.mgmt = m
		c.clusterName = ov.ClusterName
	case o.AMQPURL == "":
		return err
	default:
		c.mgmtErr = err
	}
	return nil
}

// Reduced reports whether the client runs without the management API, and why.
func (c *Client) Reduced() (bool, error) { return c.mgmt == nil, c.mgmtErr }

// AMQPAddr is host:port of the AMQP endpoint (no credentials).
func (c *Client) AMQPAddr() string {
	if c.uri.Host == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", c.uri.Host, c.uri.Port)
}

// Vhost is the AMQP connection's vhost.
func (c *Client) Vhost() string {
	if c.uri.Host == "" {
		return "/"
	}
	return c.uri.Vhost
}

// Close releases the AMQP connection.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.CloseDeadline(time.Now().Add(closeGrace))
		c.conn = nil
	}
}

// closeGrace bounds the wait for the broker's close-ok. A broker that does
// not answer (a queue process busy requeueing tens of thousands of
// messages, a stalled network) must not hold up an exit, an interrupt in
// particular; the socket closes either way and the broker returns what
// the connection held unacked.
const closeGrace = 500 * time.Millisecond

// connection returns the shared AMQP connection, dialing it when needed.
func (c *Client) connection(ctx context.Context) (*amqp.Connection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && !c.conn.IsClosed() {
		return c.conn, nil
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return conn, nil
}

// dial opens a new AMQP connection (redrive uses its own).
func (c *Client) dial(ctx context.Context) (*amqp.Connection, error) {
	if c.uri.Host == "" {
		return nil, errors.New("rabbitmq: this operation needs AMQP; the context has no amqp_url")
	}
	timeout := c.opts.Timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return nil, backends.Failure(fmt.Sprintf("rabbitmq amqp %s: no time left to connect", c.AMQPAddr()), backends.ErrUnreachable, context.DeadlineExceeded)
	}
	var watch netErrWatch
	cfg := amqp.Config{
		SASL:       []amqp.Authentication{&amqp.PlainAuth{Username: c.uri.Username, Password: c.uri.Password}},
		Vhost:      c.uri.Vhost,
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Dial:       watch.dial(amqp.DefaultDial(timeout)),
		Properties: amqp.Table{"connection_name": "berth"},
	}
	if c.uri.Scheme == "amqps" {
		cfg.TLSClientConfig = c.opts.TLS
		if cfg.TLSClientConfig == nil {
			cfg.TLSClientConfig = &tls.Config{ServerName: c.uri.Host}
		}
	}
	u := c.uri
	u.Username, u.Password = "", ""
	conn, err := amqp.DialConfig(u.String(), cfg)
	if err != nil {
		// amqp091 turns a failed read or write into a FrameError holding
		// only its text: hand amqpErr the network error itself.
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.FrameError && watch.first() != nil {
			err = watch.first()
		}
		return nil, c.amqpErr(err)
	}
	return conn, nil
}

// netErrWatch keeps the first network error a connection met, so that a
// silent server (a read that timed out) is classified as unreachable.
type netErrWatch struct {
	mu  sync.Mutex
	err error
}

func (w *netErrWatch) dial(dial func(network, addr string) (net.Conn, error)) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (net.Conn, error) {
		conn, err := dial(network, addr)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: conn, w: w}, nil
	}
}

func (w *netErrWatch) note(err error) {
	var ne net.Error
	if err == nil || !errors.As(err, &ne) {
		return
	}
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

func (w *netErrWatch) first() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

type watchedConn struct {
	net.Conn
	w *netErrWatch
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.w.note(err)
	return n, err
}

func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.w.note(err)
	return n, err
}

// amqpErr names the address and masks credentials. Network and credential
// failures keep their cause for errors.Is/As (a net error names addresses,
// never the URL's password); anything else is flattened to its redacted
// text, since its own text may hold the URL.
func (c *Client) amqpErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return backends.Failure(fmt.Sprintf("rabbitmq amqp %s: no answer within %s", c.AMQPAddr(), c.opts.Timeout), backends.ErrUnreachable, ne)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return backends.Failure(fmt.Sprintf("rabbitmq amqp %s: %v", c.AMQPAddr(), oe.Err), backends.ErrUnreachable, oe)
	}
	if errors.Is(err, amqp.ErrSASL) || errors.Is(err, amqp.ErrCredentials) {
		return backends.Failure(fmt.Sprintf("rabbitmq amqp %s: authentication failed (check username and password)", c.AMQPAddr()), backends.ErrAuth, err)
	}
	// The server quotes the vhost back ("vhost X not found"): a URL with
	// a mistyped scheme (amqp:/user:pass@host) parses with the password in it.
	return fmt.Errorf("rabbitmq amqp %s: %s", c.AMQPAddr(), config.RedactError(err.Error(), c.opts.AMQPURL, c.uri.Vhost))
}

// channel opens a throwaway channel: a failed passive declare closes it.
func (c *Client) channel(ctx context.Context) (*amqp.Channel, error) {
	conn, err := c.connection(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		// The connection may have died under us: one fresh try.
		c.mu.Lock()
		if c.conn == conn {
			c.conn = nil
		}
		c.mu.Unlock()
		if conn, err = c.connection(ctx); err != nil {
			return nil, err
		}
		if ch, err = conn.Channel(); err != nil {
			return nil, c.amqpErr(err)
		}
	}
	return ch, nil
}

// bounded runs f, giving up when ctx ends (amqp091 calls take no context,
// and a busy queue process can block a declare for seconds).
func (c *Client) bounded(ctx context.Context, what string, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return backends.Failure(fmt.Sprintf("rabbitmq amqp %s: %s: no answer within the timeout", c.AMQPAddr(), what), backends.ErrUnreachable, ctx.Err())
	}
}

// Inventory lists queues with their statistics: every queue of the
// configured vhosts through the management API, or in reduced mode the
// configured queues by passive declare (and what that cannot show).
func (c *Client) Inventory(ctx context.Context) (backends.QueueInventory, error) {
	if c.mgmt == nil {
		return c.reducedInventory(ctx)
	}
	inv := backends.QueueInventory{Mode: ModeManagement}
	vhosts := c.opts.Vhosts
	if len(vhosts) == 0 {
		vhosts = []string{""}
	}
	for _, vh := range vhosts {
		qs, err := c.mgmt.queues(ctx, vh)
		if err != nil {
			return inv, err
		}
		for _, q := range qs {
			inv.Queues = append(inv.Queues, q.toQueue())
		}
	}
	sortQueues(inv.Queues)
	return inv, nil
}

// ReducedMissing is what reduced mode cannot show.
var ReducedMissing = []string{
	"unacknowledged counts, rates, consumer utilisation, head message timestamps (ages), queue types and dead-letter wiring need the management API",
	"only configured queues are listed (contexts.<name>.queues): AMQP cannot list queues",
}

func (c *Client) reducedInventory(ctx context.Context) (backends.QueueInventory, error) {
	inv := backends.QueueInventory{Mode: ModeReduced}
	why := "no management API"
	if c.mgmtErr != nil {
		why = "no management API (" + c.mgmtErr.Error() + ")"
	}
	inv.Missing = append([]string{why}, ReducedMissing...)
	if len(c.opts.Queues) == 0 {
		inv.Warnings = append(inv.Warnings, "no queues configured for reduced mode (contexts.<name>.queues)")
	}
	for _, name := range c.opts.Queues {
		q, err := c.passive(ctx, name)
		if err != nil {
			if errors.Is(err, errNotFound) {
				inv.Warnings = append(inv.Warnings, fmt.Sprintf("queue %q not found in vhost %q", name, c.Vhost()))
				continue
			}
			return inv, err
		}
		inv.Queues = append(inv.Queues, q)
	}
	sortQueues(inv.Queues)
	return inv, nil
}

// passive reads a queue's ready count and consumers by passive declare.
func (c *Client) passive(ctx context.Context, name string) (backends.Queue, error) {
	ch, err := c.channel(ctx)
	if err != nil {
		return backends.Queue{}, err
	}
	var q amqp.Queue
	err = c.bounded(ctx, "declare "+name, func() (err error) {
		q, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
		return err
	})
	// Closing waits for the broker's close-ok, and behind the declare a
	// busy queue process holds that up for minutes: once ctx ended, close
	// in the background so an interrupt takes effect now.
	if ctx.Err() != nil {
		go ch.Close()
	} else {
		defer ch.Close()
	}
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return backends.Queue{}, errNotFound
		}
		return backends.Queue{}, c.amqpErr(err)
	}
	ready := int64(q.Messages)
	cons := q.Consumers
	return backends.Queue{
		Name: name, Vhost: c.Vhost(), Ready: &ready, Consumers: &cons,
		Source: "passive_declare",
	}, nil
}

// Queue reads one queue; for a stream it also reads the first and last
// messages' publisher timestamps. The error says when it does not exist.
func (c *Client) Queue(ctx context.Context, vhost, name string) (backends.Queue, error) {
	if vhost == "" {
		vhost = c.Vhost()
	}
	if c.mgmt == nil {
		q, err := c.passive(ctx, name)
		if errors.Is(err, errNotFound) {
			return q, fmt.Errorf("queue %q %w in vhost %q", name, backends.ErrNotFound, c.Vhost())
		}
		return q, err
	}
	mq, err := c.mgmt.queue(ctx, vhost, name)
	if errors.Is(err, errNotFound) {
		return backends.Queue{}, fmt.Errorf("queue %q %w in vhost %q", name, backends.ErrNotFound, vhost)
	}
	if err != nil {
		return backends.Queue{}, err
	}
	q := mq.toQueue()
	if q.Type == backends.QueueStream && c.uri.Host != "" && vhost == c.Vhost() {
		_ = c.streamExtent(ctx, &q) // best effort: the fields stay unknown
	}
	return q, nil
}

func sortQueues(qs []backends.Queue) {
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].Vhost != qs[j].Vhost {
			return qs[i].Vhost < qs[j].Vhost
		}
		return qs[i].Name < qs[j].Name
	})
}

// ReadyCount is a queue's ready count by passive declare: immediate (no
// statistics lag) but without unacknowledged messages. Only queues in the
// AMQP connection's vhost.
func (c *Client) ReadyCount(ctx context.Context, name string) (int64, error) {
	q, err := c.passive(ctx, name)
	if errors.Is(err, errNotFound) {
		return 0, fmt.Errorf("queue %q %w in vhost %q", name, backends.ErrNotFound, c.Vhost())
	}
	if err != nil {
		return 0, err
	}
	return *q.Ready, nil
}

// ReadyAndConsumers is a queue's ready count and consumer count by passive
// declare (see ReadyCount). While the queue has consumers its ready count
// is not its depth: the messages they hold unacknowledged are not counted.
func (c *Client) ReadyAndConsumers(ctx context.Context, name string) (int64, int, error) {
	q, err := c.passive(ctx, name)
	if errors.Is(err, errNotFound) {
		return 0, 0, fmt.Errorf("queue %q %w in vhost %q", name, backends.ErrNotFound, c.Vhost())
	}
	if err != nil {
		return 0, 0, err
	}
	return *q.Ready, *q.Consumers, nil
}

// ClusterName is the cluster's name (management API overview, else the AMQP
// connection's server properties; "" when neither said).
func (c *Client) ClusterName() string {
	if c.clusterName != "" {
		return c.clusterName
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		if n, ok := c.conn.Properties["cluster_name"].(string); ok {
			return n
		}
	}
	return ""
}

// SetReadOnly makes the client refuse every change from now on: the
// cluster turned out to be one a read-only context names.
func (c *Client) SetReadOnly() { c.opts.ReadOnly = true }

// amqpURLProblem says why an AMQP URL does not parse without quoting it:
// net/url quotes the part it choked on ("invalid URL escape \"%PW\"", a
// piece of the password) and amqp091 adds a hint whose own '@' made the
// masking of the quoted URL swallow the reason ("parse
// \"amqp://guest:*****@\", \":\", or \"/\", it must be percent-encoded").
func amqpURLProblem(err error, raw string) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		// amqp091's own reasons (scheme, whitespace, a bad query
		// parameter) quote no part of the URL but may: masked all the same.
		return config.RedactError(err.Error(), raw)
	}
	why := "it does not parse"
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(ue.Err, &esc):
		why = "an invalid %-escape"
	case errors.As(ue.Err, &host):
		why = "an invalid host"
	case strings.Contains(ue.Err.Error(), "missing ']'"):
		why = "an IPv6 host without its ']'"
	case strings.Contains(ue.Err.Error(), "invalid port"):
		why = "an invalid port"
	}
	// No '@' in the hint: errors are masked again up to their last '@'.
	return why + " (in the user name or password, ? # : / % and the at sign must be percent-encoded)"
}
