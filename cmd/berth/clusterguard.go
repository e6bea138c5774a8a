package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/config"
)

// read_only is a property of the cluster: after every connection the app
// asks whether a read-only context names the cluster it reached (by
// cluster_id, by the id last seen through that context, or by a shared
// address) and, if one does, the command is read-only whatever context,
// flag or address reached it. The actions consult a.readOnly after
// connecting, so they refuse as they would in that context.

// guardKafka checks a Kafka connection's cluster.
func (a *app) guardKafka(ctx context.Context, c *kafka.Client) error {
	id, addrs, err := c.Identity(ctx)
	if err != nil {
		return err
	}
	a.guard(config.ClusterSeen{Kind: "kafka", ID: id, Addrs: addrs})
	return nil
}

// guardRabbit checks a RabbitMQ connection's cluster and makes the client
// itself refuse changes when the cluster is read-only.
func (a *app) guardRabbit(c *rabbitmq.Client) {
	var addrs []string
	for _, u := range []string{a.ctx.AMQPURL, a.ctx.ManagementURL} {
		if addr := config.URLAddr(u); addr != "" {
			addrs = append(addrs, addr)
		}
	}
	a.guard(config.ClusterSeen{Kind: "rabbitmq", ID: c.ClusterName(), Addrs: addrs})
	if a.readOnly {
		c.SetReadOnly()
	}
}

func (a *app) guard(seen config.ClusterSeen) {
	if a.cfg == nil {
		return
	}
	learned := loadLearnedClusters()
	if a.ctx.ReadOnly && seen.ID != "" && learned[a.ctxName] != seen.ID {
		if _, named := a.cfg.Contexts[a.ctxName]; named {
			learned[a.ctxName] = seen.ID
			saveLearnedClusters(learned)
		}
	}
	if a.readOnly {
		return
	}
	if owner, ok := a.cfg.ReadOnlyOwner(seen, learned); ok {
		a.readOnly = true
		a.readOnlyReason = fmt.Sprintf("cluster %s is the cluster of context %s, which is read_only", clusterLabel(seen), owner)
	}
}

func clusterLabel(s config.ClusterSeen) string {
	if s.ID != "" {
		return s.ID
	}
	if len(s.Addrs) > 0 {
		return s.Addrs[0]
	}
	return "?"
}

// readOnlyErr adds why a command is read-only to a refusal, when the
// reason is the cluster rather than the context or --read-only.
func (a *app) readOnlyErr(err error) error {
	if a.readOnlyReason == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, a.readOnlyReason)
}

// learnedClustersPath keeps, per read-only context, the cluster id Berth
// saw through it, so the cluster stays read-only when reached by another
// address. Deleting it loses only what cluster_id and addresses do not
// already give; it can only ever add read-only.
func learnedClustersPath() string { return filepath.Join(config.DataHome(), "read-only-clusters.json") }

func loadLearnedClusters() map[string]string {
	m := map[string]string{}
	if raw, err := os.ReadFile(learnedClustersPath()); err == nil {
		_ = json.Unmarshal(raw, &m)
	}
	return m
}

func saveLearnedClusters(m map[string]string) {
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return
	}
	p := learnedClustersPath()
	if os.MkdirAll(filepath.Dir(p), 0o700) != nil {
		return
	}
	_ = writeFileAtomic(p, append(raw, '\n'))
}
