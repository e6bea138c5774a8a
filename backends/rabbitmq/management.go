package rabbitmq

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/config"
)

// mgmt is a small client for the management HTTP API. Only the calls Berth
// needs; every listing is paged and asks for a column list so a server with
// thousands of queues answers quickly.
type mgmt struct {
	base     *url.URL // without credentials
	user     string
	password string
	http     *http.Client
}

func newMgmt(raw, user, password string, tlsConf *tls.Config, timeout time.Duration) (*mgmt, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("management_url: %q is not an http(s) URL", config.RedactURL(raw))
	}
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			password = p
		}
		u.User = nil
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
	}
	return &mgmt{base: u, user: user, password: password, http: &http.Client{Transport: tr, Timeout: timeout}}, nil
}

// Addr is the API's address for messages (no credentials).
func (m *mgmt) Addr() string { return m.base.String() }

// errNotFound is a 404 from the API; callers say what was not found, and
// keep it matching backends.ErrNotFound.
var errNotFound = backends.ErrNotFound

// get decodes GET path?query into v. Errors name the address, never the
// credentials.
func (m *mgmt) get(ctx context.Context, path string, q url.Values, v any) error {
	target := m.base.String() + escapePath(path)
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(m.user, m.password)
	resp, err := m.http.Do(req)
	if err != nil {
		return m.wrap(ctx, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errNotFound
	case resp.StatusCode == http.StatusUnauthorized:
		return backends.Failure(fmt.Sprintf("rabbitmq management %s: 401 unauthorised (check username and password)", m.Addr()), backends.ErrAuth)
	case resp.StatusCode >= 300:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("rabbitmq management %s: %s: %s", m.Addr(), resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("rabbitmq management %s: bad response to %s: %w", m.Addr(), path, err)
	}
	return nil
}

// wrap names the address. Network failures keep their cause for
// errors.Is/As (ctx's error or the net.OpError, which name addresses only);
// anything else is flattened to its redacted text.
func (m *mgmt) wrap(ctx context.Context, err error) error {
	var ne net.Error
	if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
		return backends.Failure(fmt.Sprintf("rabbitmq management %s: no answer within the timeout", m.Addr()), backends.ErrUnreachable, ctx.Err())
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return backends.Failure(fmt.Sprintf("rabbitmq management %s: %v", m.Addr(), oe.Err), backends.ErrUnreachable, oe)
	}
	return fmt.Errorf("rabbitmq management %s: %s", m.Addr(), config.RedactError(err.Error()))
}

// escapePath escapes each segment the API expects escaped (vhost "/" is %2F).
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(url.PathEscape(s), "%252F", "%2F")
	}
	return strings.Join(parts, "/")
}

// seg is one path segment, escaped later by escapePath; a "/" inside (the
// default vhost) is pre-encoded so it survives the split.
func seg(s string) string { return strings.ReplaceAll(s, "/", "%2F") }

// overview is the part of /api/overview Berth reads.
type overview struct {
	RabbitMQVersion   string `json:"rabbitmq_version"`
	ManagementVersion string `json:"management_version"`
	ClusterName       string `json:"cluster_name"`
	Node              string `json:"node"`
}

func (m *mgmt) overview(ctx context.Context) (overview, error) {
	var o overview
	err := m.get(ctx, "/api/overview", url.Values{"columns": {"rabbitmq_version,management_version,cluster_name,node"}}, &o)
	return o, err
}

// queueColumns are the fields a queue listing asks for.
var queueColumns = strings.Join([]string{
	"name", "vhost", "type", "state", "node", "durable", "auto_delete", "exclusive",
	"arguments", "policy", "operator_policy", "effective_policy_definition",
	"messages", "messages_ready", "messages_unacknowledged", "consumers",
	"consumer_utilisation", "head_message_timestamp",
	"message_stats.publish_details.rate", "message_stats.deliver_get_details.rate",
	"message_stats.ack_details.rate", "message_stats.deliver_no_ack_details.rate",
	"message_stats.get_no_ack_details.rate", "message_stats.redeliver_details.rate",
}, ",")

// mQueue is a queue as the API returns it. Pointers: absent keys are unknown.
type mQueue struct {
	Name           string          `json:"name"`
	Vhost          string          `json:"vhost"`
	Type           string          `json:"type"`
	State          string          `json:"state"`
	Node           string          `json:"node"`
	Durable        bool            `json:"durable"`
	AutoDelete     bool            `json:"auto_delete"`
	Exclusive      bool            `json:"exclusive"`
	Arguments      map[string]any  `json:"arguments"`
	Policy         *string         `json:"policy"`
	OperatorPolicy *string         `json:"operator_policy"`
	Effective      map[string]any  `json:"effective_policy_definition"`
	Messages       *int64          `json:"messages"`
	Ready          *int64          `json:"messages_ready"`
	Unacked        *int64          `json:"messages_unacknowledged"`
	Consumers      *int            `json:"consumers"`
	Utilisation    *float64        `json:"consumer_utilisation"`
	HeadTimestamp  *float64        `json:"head_message_timestamp"`
	Stats          *mMessageStats  `json:"message_stats"`
	Members        json.RawMessage `json:"members"`
	// ConsumerDetails are asked for one queue only (queueWith).
	ConsumerDetails []mConsumer `json:"consumer_details"`
}

type mRate struct {
	Rate *float64 `json:"rate"`
}

type mMessageStats struct {
	Publish      *mRate `json:"publish_details"`
	DeliverGet   *mRate `json:"deliver_get_details"`
	Ack          *mRate `json:"ack_details"`
	DeliverNoAck *mRate `json:"deliver_no_ack_details"`
	GetNoAck     *mRate `json:"get_no_ack_details"`
	Redeliver    *mRate `json:"redeliver_details"`
}

type mPage struct {
	Items     []mQueue `json:"items"`
	Page      int      `json:"page"`
	PageCount int      `json:"page_count"`
}

// pageSize is how many queues one page holds.
const pageSize = 500

// queues lists every queue of vhost ("" for all vhosts), page by page.
func (m *mgmt) queues(ctx context.Context, vhost string) ([]mQueue, error) {
	path := "/api/queues"
	if vhost != "" {
		path += "/" + seg(vhost)
	}
	var out []mQueue
	for page := 1; ; page++ {
		q := url.Values{
			"page":      {strconv.Itoa(page)},
			"page_size": {strconv.Itoa(pageSize)},
			"columns":   {queueColumns},
		}
		var p mPage
		if err := m.get(ctx, path, q, &p); err != nil {
			if errors.Is(err, errNotFound) {
				return nil, fmt.Errorf("rabbitmq management %s: vhost %q %w", m.Addr(), vhost, backends.ErrNotFound)
			}
			return nil, err
		}
		out = append(out, p.Items...)
		if page >= p.PageCount {
			return out, nil
		}
	}
}

// queue reads one queue; errNotFound when it does not exist.
func (m *mgmt) queue(ctx context.Context, vhost, name string) (mQueue, error) {
	return m.queueWith(ctx, vhost, name, queueColumns)
}

// queueWith reads one queue's columns (comma-separated).
func (m *mgmt) queueWith(ctx context.Context, vhost, name, columns string) (mQueue, error) {
	var q mQueue
	err := m.get(ctx, "/api/queues/"+seg(vhost)+"/"+seg(name), url.Values{"columns": {columns}}, &q)
	return q, err
}

// mConsumer is one of a queue's consumers as its statistics list them
// (consumer_details).
type mConsumer struct {
	Tag string `json:"consumer_tag"`
}

// mBinding is one binding as the API returns it.
type mBinding struct {
	Source          string `json:"source"`
	Vhost           string `json:"vhost"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
}

// bindings lists the bindings of vhost whose source is exchange.
func (m *mgmt) exchangeBindings(ctx context.Context, vhost, exchange string) ([]mBinding, error) {
	var out []mBinding
	err := m.get(ctx, "/api/exchanges/"+seg(vhost)+"/"+seg(exchange)+"/bindings/source", nil, &out)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	return out, err
}

// toQueue converts the API's view to the plain type.
func (q mQueue) toQueue() backends.Queue {
	out := backends.Queue{
		Name: q.Name, Vhost: q.Vhost, Type: q.Type, State: q.State, Node: q.Node,
		Durable: q.Durable, AutoDelete: q.AutoDelete, Exclusive: q.Exclusive,
		Messages: q.Messages, Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers,
		ConsumerUtilisation: q.Utilisation,
		Source:              "management",
	}
	if out.Type == "" {
		out.Type = backends.QueueClassic
	}
	if q.Policy != nil {
		out.Policy = *q.Policy
	}
	if q.OperatorPolicy != nil {
		out.OperatorPolicy = *q.OperatorPolicy
	}
	if q.HeadTimestamp != nil {
		t := time.Unix(int64(*q.HeadTimestamp), 0).UTC()
		out.HeadPublisherTimestamp = &t
	}
	if s := q.Stats; s != nil {
		out.PublishRate = s.Publish.rate()
		out.DeliverRate = s.DeliverGet.rate()
		out.AckRate = s.Ack.rate()
		out.RedeliverRate = s.Redeliver.rate()
		na, ga := s.DeliverNoAck.rate(), s.GetNoAck.rate()
		if na != nil || ga != nil {
			v := deref(na) + deref(ga)
			out.NoAckRate = &v
		}
		// The API omits a kind's details until that kind happened once: a
		// queue that has stats but never saw an ack has acked nothing.
		zero := 0.0
		if out.AckRate == nil && (out.PublishRate != nil || out.DeliverRate != nil) {
			out.AckRate = &zero
		}
		if out.PublishRate == nil && (out.AckRate != nil || out.DeliverRate != nil) {
			out.PublishRate = &zero
		}
	}
	if len(q.Arguments) > 0 {
		out.Arguments = make(map[string]string, len(q.Arguments))
		for k, v := range q.Arguments {
			out.Arguments[k] = fmt.Sprint(v)
		}
	}
	out.Wiring = Wiring(q.Arguments, q.Effective)
	if out.Type == backends.QueueStream {
		si := &backends.StreamInfo{Messages: q.Messages}
		if v, ok := q.Arguments["x-max-age"].(string); ok {
			si.MaxAge = v
		}
		if n, ok := asInt(q.Arguments["x-max-length-bytes"]); ok {
			si.MaxLengthBytes = &n
		}
		out.Stream = si
	}
	return out
}

func (r *mRate) rate() *float64 {
	if r == nil {
		return nil
	}
	return r.Rate
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
