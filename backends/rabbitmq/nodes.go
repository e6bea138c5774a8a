package rabbitmq

import (
	"context"
	"errors"
	"net/url"
)

// Node is one node of a RabbitMQ cluster as the management API reports it.
type Node struct {
	Name    string `json:"name"`
	Type    string `json:"type"` // disc or ram
	Running bool   `json:"running"`
	// MemAlarm and DiskAlarm: a resource alarm blocks every publishing
	// connection in the cluster until it clears.
	MemAlarm  bool `json:"mem_alarm"`
	DiskAlarm bool `json:"disk_free_alarm"`
	// Partitions names the nodes this one cannot see (a network partition).
	Partitions []string `json:"partitions"`
}

// Server is the cluster as a whole: its name, version and nodes.
type Server struct {
	ClusterName string `json:"cluster_name"`
	Version     string `json:"rabbitmq_version"`
	// Node is the node the management API answered from.
	Node  string `json:"node"`
	Nodes []Node `json:"nodes"`
}

// ErrNoManagement is returned by calls that need the management API when
// the client runs in reduced mode.
var ErrNoManagement = errors.New("no management API (reduced mode)")

// Server reads the cluster name, version and nodes (two small API calls,
// with column lists). It needs the management API.
func (c *Client) Server(ctx context.Context) (Server, error) {
	if c.mgmt == nil {
		return Server{}, ErrNoManagement
	}
	o, err := c.mgmt.overview(ctx)
	if err != nil {
		return Server{}, err
	}
	s := Server{ClusterName: o.ClusterName, Version: o.RabbitMQVersion, Node: o.Node}
	err = c.mgmt.get(ctx, "/api/nodes", url.Values{"columns": {"name,type,running,mem_alarm,disk_free_alarm,partitions"}}, &s.Nodes)
	return s, err
}
