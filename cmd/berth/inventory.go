package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/output"
	"github.com/berth-dev/berth/internal/sanitize"
)

// The headless inventory commands: brokers, topics, describe topic, groups,
// describe group. Each prints a table by default and stable JSON with -o
// json (field names are part of the interface; see
// berth help config). All of them read only.

func init() {
	register(func(a *app) *cobra.Command {
		return &cobra.Command{
			Use:   "brokers",
			Short: "List the cluster's brokers (id, address, rack, controller)",
			Args:  noArgs,
			RunE:  a.withCluster(a.runBrokers),
		}
	})
	register(func(a *app) *cobra.Command {
		return &cobra.Command{
			Use:   "topics",
			Short: "List topics with partitions, replication and ISR health",
			Args:  noArgs,
			RunE:  a.withCluster(a.runTopics),
		}
	})
	register(func(a *app) *cobra.Command {
		return &cobra.Command{
			Use:   "groups",
			Short: "List consumer groups with state, members and offset lag",
			Args:  noArgs,
			RunE:  a.withCluster(a.runGroups),
		}
	})
	register(func(a *app) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "describe",
			Short: "Describe one topic or consumer group in detail",
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return usageErr("%s: name what to describe: topic NAME or group NAME", cmd.CommandPath())
			},
		}
		cmd.AddCommand(&cobra.Command{
			Use:   "topic NAME",
			Short: "One row per partition: leader, replicas, ISR, offsets, ISR flags",
			Args:  exactArgs("NAME"),
			RunE:  a.withCluster(a.runDescribeTopic),
		})
		cmd.AddCommand(&cobra.Command{
			Use:   "group NAME",
			Short: "Members with assignments, and per partition committed offset, end offset and lag",
			Args:  exactArgs("NAME"),
			RunE:  a.withCluster(a.runDescribeGroup),
		})
		for _, f := range describeCommands {
			cmd.AddCommand(f(a))
		}
		return cmd
	})
}

// describeCommands lets other files add `berth describe X` subcommands.
var describeCommands []func(*app) *cobra.Command

func registerDescribe(f func(*app) *cobra.Command) { describeCommands = append(describeCommands, f) }

// clusterRun is a command body that reads a connected cluster.
type clusterRun func(ctx context.Context, cl backends.Cluster, f output.Format, args []string) error

// withCluster validates -o, connects within --timeout and bounds the whole
// command by --timeout, so nothing hangs on an unresponsive cluster.
func (a *app) withCluster(run clusterRun) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		f, err := a.format(output.Table, output.JSON)
		if err != nil {
			return err
		}
		ctx, cancel := a.opCtx(cmd.Context())
		defer cancel()
		cl, err := a.kafkaCluster(ctx)
		if err != nil {
			return err
		}
		defer cl.Close()
		return run(ctx, cl, f, args)
	}
}

func (a *app) runBrokers(ctx context.Context, cl backends.Cluster, f output.Format, _ []string) error {
	info, err := cl.Describe(ctx)
	if err != nil {
		return err
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, info)
	}
	g := output.Grid{Header: []string{"ID", "HOST", "PORT", "RACK", "CONTROLLER"}, Right: map[int]bool{0: true, 2: true}}
	for _, b := range info.Brokers {
		g.Add(itoa(b.ID), b.Host, itoa(b.Port), b.Rack, yesNo(b.Controller))
	}
	return g.WriteTable(a.stdout)
}

// topicSummary is one row of `berth topics -o json`.
type topicSummary struct {
	Name              string `json:"name"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	// MinISR is min.insync.replicas, 0 when the cluster did not say.
	MinISR          int `json:"min_insync_replicas"`
	UnderReplicated int `json:"under_replicated_partitions"`
	UnderMinISR     int `json:"under_min_isr_partitions"`
	Offline         int `json:"offline_partitions"`
	// Records is the sum over partitions of high watermark - log start: the
	// offsets retained (an upper bound on records for compacted topics).
	Records int64             `json:"records"`
	Configs map[string]string `json:"configs"`
	// Error is the Kafka error the topic's metadata came with, if any.
	Error string `json:"error,omitempty"`
}

func (a *app) runTopics(ctx context.Context, cl backends.Cluster, f output.Format, _ []string) error {
	topics, err := cl.Topics(ctx)
	if err != nil {
		return err
	}
	rows := make([]topicSummary, 0, len(topics))
	for _, t := range topics {
		s := topicSummary{Name: t.Name, Partitions: len(t.Partitions), ReplicationFactor: t.ReplicationFactor, MinISR: t.MinISR(), Configs: t.Configs, Error: t.Err}
		for _, p := range t.Partitions {
			if p.UnderReplicated() {
				s.UnderReplicated++
			}
			if p.UnderMinISR(s.MinISR) {
				s.UnderMinISR++
			}
			if p.LeaderOffline() {
				s.Offline++
			}
			if p.HighWatermark >= 0 && p.LogStart >= 0 {
				s.Records += p.HighWatermark - p.LogStart
			}
		}
		rows = append(rows, s)
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, struct {
			Topics []topicSummary `json:"topics"`
		}{rows})
	}
	g := output.Grid{
		Header: []string{"TOPIC", "PARTITIONS", "RF", "MIN-ISR", "URP", "UNDER-MIN-ISR", "OFFLINE", "RECORDS", "CLEANUP", "RETENTION"},
		Right:  map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true},
	}
	for _, s := range rows {
		g.Add(s.Name, strconv.Itoa(s.Partitions), strconv.Itoa(s.ReplicationFactor), orDash(s.MinISR), strconv.Itoa(s.UnderReplicated),
			strconv.Itoa(s.UnderMinISR), strconv.Itoa(s.Offline), strconv.FormatInt(s.Records, 10),
			s.Configs[backends.ConfigCleanupPolicy], retention(s.Configs[backends.ConfigRetentionMs]))
	}
	return g.WriteTable(a.stdout)
}

// partitionRow is one partition in `berth describe topic -o json`.
type partitionRow struct {
	backends.Partition
	// Flags name what is wrong: under_replicated (ISR smaller than the
	// replica set), under_min_isr (acks=all writes are refused), offline (no
	// leader). Empty when healthy.
	Flags []string `json:"flags"`
}

func partitionFlags(p backends.Partition, minISR int) []string {
	flags := []string{}
	if p.UnderReplicated() {
		flags = append(flags, "under_replicated")
	}
	if p.UnderMinISR(minISR) {
		flags = append(flags, "under_min_isr")
	}
	if p.LeaderOffline() {
		flags = append(flags, "offline")
	}
	return flags
}

func (a *app) runDescribeTopic(ctx context.Context, cl backends.Cluster, f output.Format, args []string) error {
	topics, err := cl.Topics(ctx, args[0])
	if err != nil {
		return err
	}
	if len(topics) != 1 {
		return fmt.Errorf("topic %s: not found", args[0])
	}
	t := topics[0]
	rows := make([]partitionRow, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		rows = append(rows, partitionRow{Partition: p, Flags: partitionFlags(p, t.MinISR())})
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, struct {
			Name              string            `json:"name"`
			Internal          bool              `json:"internal"`
			ReplicationFactor int               `json:"replication_factor"`
			MinISR            int               `json:"min_insync_replicas"`
			Configs           map[string]string `json:"configs"`
			Partitions        []partitionRow    `json:"partitions"`
			Error             string            `json:"error,omitempty"`
		}{t.Name, t.Internal, t.ReplicationFactor, t.MinISR(), t.Configs, rows, t.Err})
	}
	fmt.Fprintf(a.stdout, "TOPIC %s  PARTITIONS %d  RF %d  MIN-ISR %s  CLEANUP %s  RETENTION %s  TIMESTAMPS %s\n\n",
		sanitize.Text(t.Name), len(t.Partitions), t.ReplicationFactor, orDash(t.MinISR()),
		dash(t.Configs[backends.ConfigCleanupPolicy]), retention(t.Configs[backends.ConfigRetentionMs]), dash(t.Configs[backends.ConfigTimestampType]))
	g := output.Grid{
		Header: []string{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "LOG-START", "END", "LSO", "FLAGS"},
		Right:  map[int]bool{0: true, 1: true, 2: true, 6: true, 7: true, 8: true},
	}
	for _, r := range rows {
		flags := strings.Join(r.Flags, ",")
		if r.Err != "" {
			flags = strings.TrimPrefix(flags+",error: "+r.Err, ",")
		}
		g.Add(itoa(r.Partition.Partition), itoa(r.Leader), itoa(r.LeaderEpoch), ids(r.Replicas), ids(r.ISR), ids(r.Offline),
			offset(r.LogStart), offset(r.HighWatermark), offset(r.LastStable), flags)
	}
	return g.WriteTable(a.stdout)
}

// groupSummary is one row of `berth groups -o json`.
type groupSummary struct {
	Name         string `json:"group"`
	State        string `json:"state"`
	Type         string `json:"type,omitempty"`
	Protocol     string `json:"protocol"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
	Members      int    `json:"members"`
	// Topics the group has committed offsets for or is assigned.
	Topics []string `json:"topics"`
	// Lag is the sum of partition offset lags (see describe group).
	Lag   int64  `json:"lag"`
	Error string `json:"error,omitempty"`
}

func (a *app) runGroups(ctx context.Context, cl backends.Cluster, f output.Format, _ []string) error {
	groups, err := cl.Groups(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(groups))
	for _, g := range groups {
		names = append(names, g.Name)
	}
	committed, err := cl.CommittedOffsets(ctx, names...)
	if err != nil && len(committed) == 0 && len(names) > 0 {
		return err
	}
	var ends map[backends.TopicPartition]backends.Partition
	if len(names) > 0 {
		if ends, err = partitionIndex(ctx, cl); err != nil {
			return err
		}
	}
	rows := make([]groupSummary, 0, len(groups))
	for _, g := range groups {
		offs := groupOffsets(g, committed[g.Name], ends)
		s := groupSummary{Name: g.Name, State: g.State, Type: g.Type, Protocol: g.Protocol, ProtocolType: g.ProtocolType,
			Coordinator: g.Coordinator, Members: len(g.Members), Topics: []string{}, Error: g.Err}
		seen := map[string]bool{}
		for _, o := range offs {
			if !seen[o.Topic] {
				seen[o.Topic] = true
				s.Topics = append(s.Topics, o.Topic)
			}
			if o.Lag != nil {
				s.Lag += *o.Lag
			}
		}
		if _, ok := committed[g.Name]; !ok && s.Error == "" {
			s.Error = "committed offsets unavailable"
		}
		rows = append(rows, s)
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, struct {
			Groups []groupSummary `json:"groups"`
		}{rows})
	}
	g := output.Grid{Header: []string{"GROUP", "STATE", "TYPE", "MEMBERS", "TOPICS", "LAG", "COORDINATOR"}, Right: map[int]bool{3: true, 5: true, 6: true}}
	for _, s := range rows {
		state := s.State
		if s.Error != "" {
			state += " (" + s.Error + ")"
		}
		g.Add(s.Name, state, dash(s.Type), strconv.Itoa(s.Members), dash(strings.Join(s.Topics, ",")), strconv.FormatInt(s.Lag, 10), itoa(s.Coordinator))
	}
	return g.WriteTable(a.stdout)
}

// partitionOffsets is one partition in `berth describe group -o json`.
type partitionOffsets struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Member is the member id assigned this partition, "" when none is.
	Member string `json:"member"`
	// Committed is the group's committed offset, null when it has none.
	Committed *int64 `json:"committed"`
	LogStart  int64  `json:"log_start"`
	End       int64  `json:"end"`
	// Lag = max(0, end - max(committed, log_start)): records the group has
	// still to read (records deleted by retention cannot be read, so they
	// do not count). Null when there is no commit or the end is unknown.
	Lag *int64 `json:"lag"`
}

// groupOffsets joins a group's commits and assignment with partition
// offsets: every committed or assigned partition, sorted.
func groupOffsets(g backends.Group, committed []backends.Committed, ends map[backends.TopicPartition]backends.Partition) []partitionOffsets {
	rows := map[backends.TopicPartition]*partitionOffsets{}
	get := func(tp backends.TopicPartition) *partitionOffsets {
		r, ok := rows[tp]
		if !ok {
			r = &partitionOffsets{Topic: tp.Topic, Partition: tp.Partition, LogStart: -1, End: -1}
			if p, ok := ends[tp]; ok {
				r.LogStart, r.End = p.LogStart, p.HighWatermark
			}
			rows[tp] = r
		}
		return r
	}
	for _, c := range committed {
		off := c.Offset
		get(backends.TopicPartition{Topic: c.Topic, Partition: c.Partition}).Committed = &off
	}
	for _, m := range g.Members {
		for _, tp := range m.Assigned {
			get(tp).Member = m.ID
		}
	}
	out := make([]partitionOffsets, 0, len(rows))
	for _, r := range rows {
		if r.Committed != nil && r.End >= 0 {
			lag := offsetLag(*r.Committed, r.LogStart, r.End)
			r.Lag = &lag
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// offsetLag is max(0, end - max(committed, logStart)).
func offsetLag(committed, logStart, end int64) int64 {
	from := max(committed, logStart)
	return max(0, end-from)
}

// partitionIndex reads every topic's partitions once, keyed for joins.
func partitionIndex(ctx context.Context, cl backends.Cluster) (map[backends.TopicPartition]backends.Partition, error) {
	topics, err := cl.Topics(ctx)
	if err != nil {
		return nil, err
	}
	idx := map[backends.TopicPartition]backends.Partition{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			idx[backends.TopicPartition{Topic: t.Name, Partition: p.Partition}] = p
		}
	}
	return idx, nil
}

func (a *app) runDescribeGroup(ctx context.Context, cl backends.Cluster, f output.Format, args []string) error {
	g, err := cl.DescribeGroup(ctx, args[0])
	if err != nil {
		return err
	}
	committed, err := cl.CommittedOffsets(ctx, g.Name)
	if err != nil {
		return err
	}
	ends, err := partitionIndex(ctx, cl)
	if err != nil {
		return err
	}
	offs := groupOffsets(g, committed[g.Name], ends)
	var total int64
	for _, o := range offs {
		if o.Lag != nil {
			total += *o.Lag
		}
	}
	if f == output.JSON {
		return output.WriteJSON(a.stdout, struct {
			backends.Group
			Offsets []partitionOffsets `json:"offsets"`
			Lag     int64              `json:"lag"`
		}{g, offs, total})
	}
	w := a.stdout
	fmt.Fprintf(w, "GROUP %s  STATE %s  TYPE %s  PROTOCOL %s  COORDINATOR %d  LAG %d\n",
		sanitize.Text(g.Name), sanitize.Text(g.State), dash(g.Type), dash(sanitize.Text(g.Protocol)), g.Coordinator, total)
	if g.Err != "" {
		fmt.Fprintf(w, "ERROR %s\n", sanitize.Text(g.Err))
	}
	if err := writeMembers(w, g.Members); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t := output.Grid{Header: []string{"TOPIC", "PARTITION", "COMMITTED", "LOG-START", "END", "LAG", "MEMBER"}, Right: map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true}}
	for _, o := range offs {
		committed, lag := "-", "-"
		if o.Committed != nil {
			committed = strconv.FormatInt(*o.Committed, 10)
		}
		if o.Lag != nil {
			lag = strconv.FormatInt(*o.Lag, 10)
		}
		t.Add(o.Topic, itoa(o.Partition), committed, offset(o.LogStart), offset(o.End), lag, dash(o.Member))
	}
	return t.WriteTable(w)
}

func writeMembers(w io.Writer, members []backends.Member) error {
	fmt.Fprintln(w)
	if len(members) == 0 {
		_, err := fmt.Fprintln(w, "no active members")
		return err
	}
	g := output.Grid{Header: []string{"MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT"}}
	for _, m := range members {
		g.Add(m.ID, m.ClientID, m.Host, assignment(m.Assigned))
	}
	return g.WriteTable(w)
}

// assignment compacts a member's partitions: "orders[0,1,2] payments[3]".
func assignment(tps []backends.TopicPartition) string {
	if len(tps) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, tp := range tps {
		if i == 0 || tps[i-1].Topic != tp.Topic {
			if i > 0 {
				b.WriteString("] ")
			}
			b.WriteString(tp.Topic + "[")
		} else {
			b.WriteString(",")
		}
		b.WriteString(itoa(tp.Partition))
	}
	b.WriteString("]")
	return b.String()
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func ids(s []int32) string {
	if len(s) == 0 {
		return "-"
	}
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = itoa(n)
	}
	return strings.Join(parts, ",")
}

func offset(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func orDash(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// retention renders retention.ms for people: "3d", "12h", "infinite".
func retention(ms string) string {
	if ms == "" {
		return "-"
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return ms
	}
	switch {
	case n < 0:
		return "infinite"
	case n%(24*3600*1000) == 0:
		return strconv.FormatInt(n/(24*3600*1000), 10) + "d"
	case n%(3600*1000) == 0:
		return strconv.FormatInt(n/(3600*1000), 10) + "h"
	case n%(60*1000) == 0:
		return strconv.FormatInt(n/(60*1000), 10) + "m"
	case n%1000 == 0:
		return strconv.FormatInt(n/1000, 10) + "s"
	}
	return ms + "ms"
}
