package config

import (
	"net"
	"net/url"
	"strings"
)

// ClusterSeen is what a connection learned about the cluster it reached:
// its identity (Kafka cluster id; RabbitMQ cluster name) and the addresses
// it is known by (the bootstrap dialled and the brokers it advertises, or
// the AMQP and management URLs' hosts).
type ClusterSeen struct {
	Kind  string // "kafka" (bundled counts as kafka) or "rabbitmq"
	ID    string
	Addrs []string
}

// ReadOnlyOwner returns the read-only context that names the cluster a
// connection reached, however it was reached (--bootstrap, --amqp, another
// context, a port-forward): read_only is a property of the cluster, not of
// a context's name. A context names a cluster by its cluster_id, by the id
// Berth last saw through it when it has no cluster_id (learned, context
// name -> id), or by sharing
// an address with it. The first such context in name order is returned.
func (c *Config) ReadOnlyOwner(seen ClusterSeen, learned map[string]string) (string, bool) {
	addrs := map[string]bool{}
	for _, a := range seen.Addrs {
		addrs[normAddr(a)] = true
	}
	for _, name := range c.ContextNames() {
		x := c.Contexts[name]
		if !x.ReadOnly || family(x.Kind) != family(seen.Kind) {
			continue
		}
		// A cluster_id in the file overrides what was learned.
		if seen.ID != "" && (x.ClusterID == seen.ID || (x.ClusterID == "" && learned[name] == seen.ID)) {
			return name, true
		}
		for _, a := range x.addresses() {
			if addrs[normAddr(a)] {
				return name, true
			}
		}
	}
	return "", false
}

func family(kind string) string {
	if kind == "bundled" || kind == "" {
		return "kafka"
	}
	return kind
}

// addresses are the host:port a context dials.
func (x Context) addresses() []string {
	if family(x.Kind) == "kafka" {
		return x.Bootstrap
	}
	var out []string
	for _, u := range []string{x.AMQPURL, x.ManagementURL} {
		if a := URLAddr(u); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// URLAddr is a URL's host:port with the scheme's default port filled in
// ("" when it has no host).
func URLAddr(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"amqp": "5672", "amqps": "5671", "http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// normAddr compares addresses case-insensitively, with "localhost" and the
// loopback address taken as the same host.
func normAddr(a string) string {
	a = strings.ToLower(strings.TrimSpace(a))
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if host == "localhost" || host == "::1" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
