package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends"
)

// TopicConfigKeys are the topic configs Topics reads (DescribeConfigs) and
// reports in Topic.Configs: the ones the console's views and checks use.
var TopicConfigKeys = []string{
	backends.ConfigMinISR,
	backends.ConfigRetentionMs,
	backends.ConfigCleanupPolicy,
	backends.ConfigTimestampType,
	"retention.bytes",
}

// Cluster implements backends.Cluster on a Client. Every request is batched
// (one Metadata, one ListOffsets per leader and kind, one DescribeConfigs,
// one OffsetFetch per coordinator), never one per partition.
type Cluster struct {
	c *Client
}

var _ backends.Cluster = (*Cluster)(nil)

// NewCluster returns the backends.Cluster view of c. The Cluster owns c from
// then on: Cluster.Close closes it.
func NewCluster(c *Client) *Cluster { return &Cluster{c: c} }

// Client is the connection the cluster uses (for backend packages).
func (k *Cluster) Client() *Client { return k.c }

// Close releases connections.
func (k *Cluster) Close() { k.c.Close() }

// Describe returns the cluster id, controller and brokers (sorted by id).
func (k *Cluster) Describe(ctx context.Context) (backends.ClusterInfo, error) {
	md, err := k.c.admin.BrokerMetadata(ctx)
	if err != nil {
		return backends.ClusterInfo{}, describeErr("metadata from "+k.bootstrap(), err)
	}
	info := backends.ClusterInfo{ID: md.Cluster, Controller: md.Controller, Brokers: []backends.Broker{}}
	for _, b := range md.Brokers {
		br := backends.Broker{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == md.Controller}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		info.Brokers = append(info.Brokers, br)
	}
	sort.Slice(info.Brokers, func(i, j int) bool { return info.Brokers[i].ID < info.Brokers[j].ID })
	return info, nil
}

func (k *Cluster) bootstrap() string { return strings.Join(k.c.opts.Bootstrap, ",") }

// Topics returns the named topics (an unknown name is an error naming it),
// or every non-internal topic when none are named, sorted by name, with
// partitions (sorted), log start / high watermark / last stable offsets and
// the configs in TopicConfigKeys. A partition whose offsets could not be
// read keeps -1 offsets and says why in Partition.Err.
func (k *Cluster) Topics(ctx context.Context, names ...string) ([]backends.Topic, error) {
	md, err := k.c.admin.Metadata(ctx, names...)
	if err != nil {
		return nil, describeErr("metadata from "+k.bootstrap(), err)
	}
	var list []string
	for name, td := range md.Topics {
		if len(names) == 0 && td.IsInternal {
			continue
		}
		if td.Err != nil && len(names) > 0 {
			if errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				// The same cause as RabbitMQ's missing queue (a redrive
				// whose DLQ was deleted says so on both in one wording).
				return nil, backends.Failure(fmt.Sprintf("topic %s: %v", name, td.Err), td.Err, backends.ErrNotFound)
			}
			return nil, fmt.Errorf("topic %s: %w", name, td.Err)
		}
		list = append(list, name)
	}
	sort.Strings(list)
	if len(list) == 0 {
		return []backends.Topic{}, nil
	}

	// The four reads are independent; run them together so a refresh costs
	// the slowest, not the sum.
	var (
		wg                        sync.WaitGroup
		start, end, stable        kadm.ListedOffsets
		startErr, endErr, stabErr error
		configs                   kadm.ResourceConfigs
		cfgErr                    error
	)
	listOffsets := func() {
		wg.Add(3)
		go func() { defer wg.Done(); start, startErr = k.c.admin.ListStartOffsets(ctx, list...) }()
		go func() { defer wg.Done(); end, endErr = k.c.admin.ListEndOffsets(ctx, list...) }()
		go func() { defer wg.Done(); stable, stabErr = k.c.admin.ListCommittedOffsets(ctx, list...) }()
	}
	listOffsets()
	wg.Add(1)
	go func() { defer wg.Done(); configs, cfgErr = k.c.admin.DescribeTopicConfigs(ctx, list...) }()
	wg.Wait()
	// Just after a broker is lost the client's metadata can still route a
	// listing to a leader it no longer knows ("unknown broker"): refresh the
	// client's metadata and list once more rather than fail the refresh.
	if staleRoute(startErr) || staleRoute(endErr) || staleRoute(stabErr) {
		k.c.cl.ForceMetadataRefresh()
		listOffsets()
		wg.Wait()
	}
	for _, e := range []struct {
		what string
		err  error
	}{{"log start offsets", startErr}, {"end offsets", endErr}, {"last stable offsets", stabErr}} {
		// A listing that failed on some brokers only still answers for the
		// others; their partitions carry the error (fill, below).
		if allFailed(e.err) {
			return nil, describeErr(e.what, e.err)
		}
	}

	out := make([]backends.Topic, 0, len(list))
	for _, name := range list {
		td := md.Topics[name]
		t := backends.Topic{Name: name, Internal: td.IsInternal, Partitions: []backends.Partition{}, Configs: map[string]string{}}
		for _, pd := range td.Partitions.Sorted() {
			p := backends.Partition{
				Topic:         name,
				Partition:     pd.Partition,
				Leader:        pd.Leader,
				LeaderEpoch:   pd.LeaderEpoch,
				Replicas:      nonNil(pd.Replicas),
				ISR:           nonNil(pd.ISR),
				Offline:       nonNil(pd.OfflineReplicas),
				LogStart:      -1,
				HighWatermark: -1,
				LastStable:    -1,
			}
			var errs []string
			var offErrs [][2]string // {which offset, why}
			if pd.Err != nil {
				errs = append(errs, codeName(pd.Err))
			}
			fill := func(l kadm.ListedOffsets, reqErr error, dst *int64, what string) {
				o, ok := l.Lookup(name, pd.Partition)
				switch {
				case ok && o.Err == nil:
					*dst = o.Offset
				case ok:
					offErrs = append(offErrs, [2]string{what, codeName(o.Err)})
				default:
					if msg, isShard := shardFailure(reqErr, pd.Leader); isShard {
						offErrs = append(offErrs, [2]string{what, msg})
					} else {
						offErrs = append(offErrs, [2]string{what, "no answer"})
					}
				}
			}
			fill(start, startErr, &p.LogStart, "log start")
			fill(end, endErr, &p.HighWatermark, "end")
			fill(stable, stabErr, &p.LastStable, "last stable")
			p.Err = dedupeJoin(append(errs, groupByCause(offErrs)...))
			if len(p.Replicas) > t.ReplicationFactor {
				t.ReplicationFactor = len(p.Replicas)
			}
			t.Partitions = append(t.Partitions, p)
		}
		if td.Err != nil {
			// Listed but not loadable (e.g. being created): keep it visible.
			t.Err = codeName(td.Err)
		}
		if cfgErr != nil {
			// DescribeConfigs went to one broker; without its answer the
			// topic is still listed, its configs missing and saying why.
			why := "configs not read: " + describeErr("topic configs", cfgErr).Error()
			if t.Err != "" {
				why = t.Err + "; " + why
			}
			t.Err = why
		}
		if rc, err := configs.On(name, nil); err == nil && rc.Err == nil {
			for _, c := range rc.Configs {
				for _, key := range TopicConfigKeys {
					if c.Key == key && c.Value != nil {
						t.Configs[key] = *c.Value
					}
				}
			}
		}
		out = append(out, t)
	}
	return out, nil
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	out := append([]int32(nil), s...)
	return out
}

// groupByCause merges {what, why} pairs with the same cause: "log start,
// end, last stable: ListOffsets broker 2 (...): context deadline exceeded".
func groupByCause(pairs [][2]string) []string {
	var order []string
	whats := map[string][]string{}
	for _, p := range pairs {
		if _, ok := whats[p[1]]; !ok {
			order = append(order, p[1])
		}
		whats[p[1]] = append(whats[p[1]], p[0])
	}
	out := make([]string, 0, len(order))
	for _, why := range order {
		out = append(out, strings.Join(whats[why], ", ")+": "+why)
	}
	return out
}

func dedupeJoin(errs []string) string {
	seen := map[string]bool{}
	var out []string
	for _, e := range errs {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return strings.Join(out, "; ")
}

// Groups lists every consumer group (classic and KIP-848) and describes
// each with one request per coordinator. A group that could not be
// described is kept with Err set; the call fails only when nothing could
// be listed at all.
func (k *Cluster) Groups(ctx context.Context) ([]backends.Group, error) {
	listed, err := k.c.admin.ListGroups(ctx)
	if allFailed(err) || (err != nil && len(listed) == 0) {
		return nil, describeErr("list groups", err)
	}
	var classic, next []string
	for _, g := range listed.Sorted() {
		switch g.GroupType {
		case "consumer":
			next = append(next, g.Group)
		case "share", "streams":
			// Not consumer groups in the sense the console tracks.
		default:
			classic = append(classic, g.Group)
		}
	}
	byName := map[string]backends.Group{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var descErr error
	if len(classic) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := k.c.admin.DescribeGroups(ctx, classic...)
			mu.Lock()
			defer mu.Unlock()
			if allFailed(err) {
				descErr = describeErr("describe groups", err)
				return
			}
			for _, g := range d {
				byName[g.Group] = classicGroup(g)
			}
		}()
	}
	if len(next) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := k.describeConsumerGroups(ctx, next...)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				descErr = err
				return
			}
			for _, g := range d {
				byName[g.Name] = g
			}
		}()
	}
	wg.Wait()
	if descErr != nil {
		return nil, descErr
	}
	out := make([]backends.Group, 0, len(listed))
	for _, l := range listed.Sorted() {
		if l.GroupType == "share" || l.GroupType == "streams" {
			continue
		}
		g, ok := byName[l.Group]
		if !ok {
			// Its coordinator did not answer: keep what the listing said.
			g = backends.Group{Name: l.Group, State: l.State, ProtocolType: l.ProtocolType, Coordinator: l.Coordinator,
				Type: l.GroupType, Members: []backends.Member{}, Err: "not described: coordinator did not answer"}
		}
		out = append(out, g)
	}
	return out, nil
}

// DescribeGroup describes one group, whichever protocol it uses. A group
// the cluster does not know is an error naming it (GROUP_ID_NOT_FOUND).
func (k *Cluster) DescribeGroup(ctx context.Context, name string) (backends.Group, error) {
	// KIP-848 groups answer ConsumerGroupDescribe only; classic groups (and
	// brokers before Kafka 4) answer DescribeGroups. Ask the newer API first.
	if d, err := k.describeConsumerGroups(ctx, name); err == nil {
		if g, ok := d[name]; ok && g.Err == "" {
			return g, nil
		}
	} else if ctx.Err() != nil {
		return backends.Group{}, fmt.Errorf("group %s: %w", name, ctx.Err())
	}
	d, err := k.c.admin.DescribeGroups(ctx, name)
	if err != nil {
		return backends.Group{}, describeErr("group "+name, err)
	}
	g, ok := d[name]
	if !ok {
		return backends.Group{}, fmt.Errorf("group %s: %w", name, kerr.GroupIDNotFound)
	}
	if g.Err != nil {
		return backends.Group{}, fmt.Errorf("group %s: %w", name, g.Err)
	}
	// Brokers before DescribeGroups v6 answer an unknown group as "Dead"
	// with no error.
	if g.State == "Dead" && len(g.Members) == 0 && g.ProtocolType == "" {
		return backends.Group{}, fmt.Errorf("group %s: %w", name, kerr.GroupIDNotFound)
	}
	return classicGroup(g), nil
}

func classicGroup(g kadm.DescribedGroup) backends.Group {
	out := backends.Group{
		Name:         g.Group,
		State:        g.State,
		Protocol:     g.Protocol,
		ProtocolType: g.ProtocolType,
		Coordinator:  g.Coordinator.NodeID,
		Type:         "classic",
		Members:      []backends.Member{},
	}
	if g.Err != nil {
		out.Err = codeName(g.Err)
	}
	for _, m := range g.Members {
		mem := backends.Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []backends.TopicPartition{}}
		if m.InstanceID != nil {
			mem.InstanceID = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				for _, p := range t.Partitions {
					mem.Assigned = append(mem.Assigned, backends.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
		}
		sortTPs(mem.Assigned)
		out.Members = append(out.Members, mem)
	}
	return out
}

// describeConsumerGroups describes KIP-848 groups with one
// ConsumerGroupDescribe per coordinator. It talks kmsg directly rather than
// through kadm because brokers may name assigned topics by id only (kfake
// does); ids are resolved to names from metadata. It fails only when no
// coordinator answered.
func (k *Cluster) describeConsumerGroups(ctx context.Context, names ...string) (map[string]backends.Group, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = names
	shards := k.c.cl.RequestSharded(ctx, req)
	out := map[string]backends.Group{}
	var firstErr error
	unnamed := false
	for _, sh := range shards {
		if sh.Err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("ConsumerGroupDescribe %s: %w", brokerName(sh.Meta), sh.Err)
			}
			continue
		}
		resp := sh.Resp.(*kmsg.ConsumerGroupDescribeResponse)
		for _, rg := range resp.Groups {
			g := backends.Group{
				Name:         rg.Group,
				State:        rg.State,
				Protocol:     rg.AssignorName,
				ProtocolType: "consumer",
				Coordinator:  sh.Meta.NodeID,
				Type:         "consumer",
				Members:      []backends.Member{},
			}
			if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
				g.Err = codeName(err)
			}
			for _, rm := range rg.Members {
				mem := backends.Member{ID: rm.MemberID, ClientID: rm.ClientID, Host: rm.ClientHost, Assigned: []backends.TopicPartition{}}
				if rm.InstanceID != nil {
					mem.InstanceID = *rm.InstanceID
				}
				for _, tp := range rm.Assignment.TopicPartitions {
					topic := tp.Topic
					if topic == "" {
						topic = "id:" + kadm.TopicID(tp.TopicID).String()
						unnamed = true
					}
					for _, p := range tp.Partitions {
						mem.Assigned = append(mem.Assigned, backends.TopicPartition{Topic: topic, Partition: p})
					}
				}
				g.Members = append(g.Members, mem)
			}
			sort.Slice(g.Members, func(i, j int) bool { return g.Members[i].ID < g.Members[j].ID })
			out[g.Name] = g
		}
	}
	if len(out) == 0 && firstErr != nil {
		return nil, firstErr
	}
	if unnamed {
		ids := map[string]string{}
		if md, err := k.c.admin.Metadata(ctx); err == nil {
			for name, td := range md.Topics {
				ids["id:"+td.ID.String()] = name
			}
		}
		for _, g := range out {
			for _, m := range g.Members {
				for i, tp := range m.Assigned {
					if name, ok := ids[tp.Topic]; ok {
						m.Assigned[i].Topic = name
					}
				}
			}
		}
	}
	for _, g := range out {
		for _, m := range g.Members {
			sortTPs(m.Assigned)
		}
	}
	return out, nil
}

func sortTPs(s []backends.TopicPartition) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Topic != s[j].Topic {
			return s[i].Topic < s[j].Topic
		}
		return s[i].Partition < s[j].Partition
	})
}

// CommittedOffsets returns each named group's committed offsets (sorted by
// topic and partition; partitions without a commit are left out) with one
// OffsetFetch per coordinator. Groups that failed are missing from the map
// and named in the returned error, which keeps their Kafka error code; the
// map still holds every group that answered.
func (k *Cluster) CommittedOffsets(ctx context.Context, groups ...string) (map[string][]backends.Committed, error) {
	out := make(map[string][]backends.Committed, len(groups))
	if len(groups) == 0 {
		return out, nil
	}
	resps := k.c.admin.FetchManyOffsets(ctx, groups...)
	var errs []error
	for _, name := range groups {
		r, ok := resps[name]
		if !ok {
			errs = append(errs, fmt.Errorf("group %s: no answer from its coordinator", name))
			continue
		}
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("group %s: %w", name, r.Err))
			continue
		}
		// Topics in order, then each topic's partitions in order: sorting
		// ints per topic is far cheaper than one string-comparing sort of
		// every row (10,000 partitions x 50 groups on every refresh).
		topics := make([]string, 0, len(r.Fetched))
		n := 0
		for t, ps := range r.Fetched {
			topics = append(topics, t)
			n += len(ps)
		}
		slices.Sort(topics)
		cs := make([]backends.Committed, 0, n)
		var partErrs []string
		for _, t := range topics {
			start := len(cs)
			for _, o := range r.Fetched[t] {
				if o.Err != nil {
					partErrs = append(partErrs, fmt.Sprintf("%s[%d] %s", o.Topic, o.Partition, codeName(o.Err)))
					continue
				}
				if o.At < 0 {
					continue
				}
				cs = append(cs, backends.Committed{Topic: o.Topic, Partition: o.Partition, Offset: o.At, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
			}
			slices.SortFunc(cs[start:], func(a, b backends.Committed) int { return cmp.Compare(a.Partition, b.Partition) })
		}
		out[name] = cs
		if len(partErrs) > 0 {
			sort.Strings(partErrs)
			errs = append(errs, fmt.Errorf("group %s: %s", name, strings.Join(partErrs, ", ")))
		}
	}
	if ctx.Err() != nil && len(errs) > 0 {
		return out, fmt.Errorf("committed offsets: %w", ctx.Err())
	}
	return out, errors.Join(errs...)
}

// staleRoute reports franz-go's "unknown broker": a request routed with
// metadata older than the cluster's current shape. franz-go keeps that error
// unexported (kgo's errUnknownBroker), so its text is the only handle; the
// match is here once, and TestStaleRouteRecognisesFranzGoUnknownBroker fails if
// franz-go rewords it.
func staleRoute(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unknown broker")
}
