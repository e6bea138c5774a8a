package bundled

// Degraded mode: a simulated broker loss.
//
// kfake replicates nothing and always reports ISR = replicas. To let the ISR
// views be exercised without a real cluster, a broker can be marked "down":
//
//   - Metadata (key 3) and DescribeTopicPartitions (key 75) are answered by
//     kfake's own handlers, then edited: the down broker leaves the broker
//     list, every partition it replicates shows it as an offline replica and
//     out of the ISR, the leader moves to the first in-sync replica (or is -1
//     with LEADER_NOT_AVAILABLE when no replica is up; the last leader stays
//     in the ISR, as with unclean election disabled), and the controller
//     moves to an up broker.
//   - Leadership really moves inside kfake (MoveTopicPartition), so clients
//     that follow the edited metadata produce and fetch without errors.
//   - Produce with acks=all to a partition whose ISR is below the topic's
//     min.insync.replicas fails with NOT_ENOUGH_REPLICAS (a kfake Fault).
//   - Group coordinators move off down brokers (kfake rehashes coordinators;
//     FindCoordinator never names a down broker).
//
// What is NOT simulated: the down broker's listener keeps accepting
// connections (a client that already knows its address can still reach it),
// and nothing is copied or lost: there are no real replicas to fall behind.
//
// Passing a request through: a control function cannot call kfake's default
// handler directly, and the cluster loop waits while a control function runs.
// The hook therefore sleeps (SleepControl, which frees the loop), re-issues
// the same request from the broker's internal client marked with a private
// tagged field, lets that marked request fall through to kfake's handler
// (the hook returns "not handled" for it), then edits the answer and returns
// it for the original request at the original request's version.

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends/bundled/internal/kfake"
)

// passthroughTag marks requests the hooks must leave to kfake. Kafka's own
// tagged fields are small numbers; this one is private to Berth.
const passthroughTag uint32 = 0x62657274 // "bert"

var passthroughVal = []byte("berth-passthrough")

type degradedState struct {
	setMu sync.Mutex // serialises SetDown

	mu   sync.Mutex
	down map[int32]bool
	// assign is each partition's replica order, captured when degradation
	// starts: kfake derives replicas from the leader, so once leaders move
	// its own order would rotate.
	assign map[string]map[int32][]int32
	faults *kfake.FaultHandle
}

func (d *degradedState) init() {
	d.down = map[int32]bool{}
	d.assign = map[string]map[int32][]int32{}
}

// snapshot returns a copy of the down set (nil when nothing is down).
func (d *degradedState) snapshot() map[int32]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.down) == 0 {
		return nil
	}
	m := make(map[int32]bool, len(d.down))
	for k := range d.down {
		m[k] = true
	}
	return m
}

// replicasFor returns the stable replica order of a partition, remembering
// reported as the order for a partition seen for the first time.
func (d *degradedState) replicasFor(topic string, p int32, reported []int32) []int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	ps := d.assign[topic]
	if ps == nil {
		ps = map[int32][]int32{}
		d.assign[topic] = ps
	}
	if r, ok := ps[p]; ok && len(r) == len(reported) {
		return slices.Clone(r)
	}
	ps[p] = slices.Clone(reported)
	return slices.Clone(reported)
}

// Down lists the brokers currently marked down, in order.
func (b *Broker) Down() []int32 {
	b.deg.mu.Lock()
	defer b.deg.mu.Unlock()
	out := make([]int32, 0, len(b.deg.down))
	for id := range b.deg.down {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// SetDown marks broker id down (or back up). See the package comment in
// degraded.go for what is simulated.
func (b *Broker) SetDown(id int32, down bool) error {
	if id < 0 || int(id) >= len(b.addrs) {
		return fmt.Errorf("broker %d: no such broker (have 0-%d)", id, len(b.addrs)-1)
	}
	d := &b.deg
	d.setMu.Lock()
	defer d.setMu.Unlock()
	if b.ctx.Err() != nil {
		return fmt.Errorf("broker %d: the bundled broker is closed", id)
	}

	d.mu.Lock()
	was := len(d.down)
	if d.down[id] == down {
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()

	if was == 0 && down {
		// Capture kfake's natural replica order before any leader moves.
		md, err := b.passMetadata(kmsg.NewPtrMetadataRequest())
		if err != nil {
			return fmt.Errorf("broker %d down: %w", id, err)
		}
		assign := map[string]map[int32][]int32{}
		for _, t := range md.Topics {
			if t.Topic == nil || t.ErrorCode != 0 {
				continue
			}
			ps := map[int32][]int32{}
			for _, p := range t.Partitions {
				ps[p.Partition] = slices.Clone(p.Replicas)
			}
			assign[*t.Topic] = ps
		}
		d.mu.Lock()
		d.assign = assign
		d.mu.Unlock()
	}

	d.mu.Lock()
	if down {
		d.down[id] = true
	} else {
		delete(d.down, id)
	}
	nowDown := len(d.down)
	d.mu.Unlock()

	if err := b.settleLeaders(nowDown == 0); err != nil {
		return err
	}
	b.refreshFaults()
	if nowDown > 0 {
		b.moveCoordinators(nil)
	}
	return nil
}

// settleLeaders moves kfake's real leaders so they match what the edited
// metadata reports: off down brokers, or back to each partition's preferred
// (first) replica once every broker is up again.
func (b *Broker) settleLeaders(allUp bool) error {
	md, err := b.passMetadata(kmsg.NewPtrMetadataRequest())
	if err != nil {
		return fmt.Errorf("moving leaders: %w", err)
	}
	down := b.deg.snapshot()
	for _, t := range md.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		for _, p := range t.Partitions {
			replicas := b.deg.replicasFor(*t.Topic, p.Partition, p.Replicas)
			var target int32 = -1
			if allUp {
				if len(replicas) > 0 && p.Leader != replicas[0] {
					target = replicas[0]
				}
			} else if nl, _, _ := degradePartition(replicas, p.Leader, down); nl >= 0 && nl != p.Leader {
				target = nl
			}
			if target >= 0 {
				if err := b.kc.MoveTopicPartition(*t.Topic, p.Partition, target); err != nil {
					return fmt.Errorf("moving leader of %s/%d: %w", *t.Topic, p.Partition, err)
				}
			}
		}
	}
	if allUp {
		b.deg.mu.Lock()
		b.deg.assign = map[string]map[int32][]int32{}
		b.deg.mu.Unlock()
	}
	return nil
}

// refreshFaults makes acks=all produce fail with NOT_ENOUGH_REPLICAS on
// partitions whose simulated ISR is below the topic's min.insync.replicas.
func (b *Broker) refreshFaults() {
	d := &b.deg
	d.mu.Lock()
	old := d.faults
	d.faults = nil
	type under struct {
		topic string
		ps    []int32
	}
	var unders []under
	if len(d.down) > 0 {
		topics := make([]string, 0, len(d.assign))
		for t := range d.assign {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		d.mu.Unlock()
		minISR := map[string]int{}
		for _, t := range topics {
			minISR[t] = b.minISR(t)
		}
		d.mu.Lock()
		for _, t := range topics {
			var ps []int32
			for p, replicas := range d.assign[t] {
				up := 0
				for _, r := range replicas {
					if !d.down[r] {
						up++
					}
				}
				if up > 0 && up < minISR[t] {
					ps = append(ps, p)
				}
			}
			if len(ps) > 0 {
				slices.Sort(ps)
				unders = append(unders, under{t, ps})
			}
		}
	}
	d.mu.Unlock()
	if old != nil {
		old.Remove()
	}
	if len(unders) == 0 {
		return
	}
	fs := make([]kfake.Fault, 0, len(unders))
	for _, u := range unders {
		fs = append(fs, kfake.Fault{
			Keys:       []kmsg.Key{kmsg.Produce},
			Topic:      u.topic,
			Partitions: u.ps,
			Err:        kerr.NotEnoughReplicas,
			Count:      -1,
			When: func(r kmsg.Request) bool {
				pr, ok := r.(*kmsg.ProduceRequest)
				return ok && pr.Acks == -1
			},
		})
	}
	h := b.kc.Fault(fs...)
	d.mu.Lock()
	d.faults = h
	d.mu.Unlock()
}

// minISR is the topic's min.insync.replicas (Kafka's default 1 when unset).
func (b *Broker) minISR(topic string) int {
	ti := b.kc.TopicInfo(topic)
	if ti != nil {
		if v := ti.Configs["min.insync.replicas"]; v != nil {
			if n, err := strconv.Atoi(*v); err == nil {
				return n
			}
		}
	}
	return 1
}

// moveCoordinators rehashes kfake's group coordinators until none of the
// known groups (plus extra keys) is coordinated by a down broker: the
// simulated coordinator failover.
func (b *Broker) moveCoordinators(extra []string) {
	down := b.deg.snapshot()
	if len(down) == 0 || len(down) >= len(b.addrs) {
		return
	}
	keys := append(b.listGroups(), extra...)
	if len(keys) == 0 {
		return
	}
	for attempt := 0; attempt < 20000 && b.ctx.Err() == nil; attempt++ {
		ok := true
		for _, k := range keys {
			if down[b.kc.CoordinatorFor(k)] {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		b.kc.RehashCoordinators()
	}
}

// listGroups asks every broker for the groups it coordinates.
func (b *Broker) listGroups() []string {
	var out []string
	for _, sb := range b.internal.SeedBrokers() {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		req := kmsg.NewPtrListGroupsRequest()
		kresp, err := sb.Request(ctx, req)
		cancel()
		if err != nil {
			continue
		}
		for _, g := range kresp.(*kmsg.ListGroupsResponse).Groups {
			out = append(out, g.Group)
		}
	}
	return out
}

// degradePartition computes one partition's view with the brokers in down:
// the leader (kept when it is up, else the first up replica, else -1), the
// ISR (the up replicas; with none up, the last leader, as Kafka keeps it with
// unclean election disabled) and the offline replicas.
func degradePartition(replicas []int32, leader int32, down map[int32]bool) (newLeader int32, isr, offline []int32) {
	isr = []int32{}
	offline = []int32{}
	for _, r := range replicas {
		if down[r] {
			offline = append(offline, r)
		} else {
			isr = append(isr, r)
		}
	}
	switch {
	case len(isr) == 0:
		return -1, []int32{leader}, offline
	case !down[leader] && slices.Contains(replicas, leader):
		return leader, isr, offline
	default:
		return isr[0], isr, offline
	}
}

type leaderMove struct {
	topic     string
	partition int32
	leader    int32
}

func (b *Broker) installHooks() {
	b.kc.ControlKey(int16(kmsg.Metadata), b.controlMetadata)
	b.kc.ControlKey(int16(kmsg.DescribeTopicPartitions), b.controlDescribeTopicPartitions)
	b.kc.ControlKey(int16(kmsg.FindCoordinator), b.controlFindCoordinator)
}

func isPassthrough(t *kmsg.Tags) bool {
	found := false
	t.Each(func(k uint32, v []byte) {
		if k == passthroughTag && bytes.Equal(v, passthroughVal) {
			found = true
		}
	})
	return found
}

// send re-issues a marked request to kfake from the internal client.
func (b *Broker) send(req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	seeds := b.internal.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no broker to ask")
	}
	return seeds[0].Request(ctx, req)
}

// pass asks kfake's own handler for req, a copy the caller made of the
// request it answers: tags (req's tagged fields) are replaced by the mark
// the control hooks let through. Inside a control function it must run
// under SleepControl.
func pass[Resp kmsg.Response](b *Broker, req kmsg.Request, tags *kmsg.Tags) (Resp, error) {
	*tags = kmsg.Tags{}
	tags.Set(passthroughTag, passthroughVal)
	var resp Resp
	kresp, err := b.send(req)
	if err != nil {
		return resp, err
	}
	return kresp.(Resp), nil
}

// passMetadata asks kfake's own Metadata handler (bypassing the edit).
func (b *Broker) passMetadata(req *kmsg.MetadataRequest) (*kmsg.MetadataResponse, error) {
	r := *req
	return pass[*kmsg.MetadataResponse](b, &r, &r.UnknownTags)
}

// applyMoves makes kfake's real leadership follow the edited answer.
func (b *Broker) applyMoves(moves []leaderMove) {
	for _, m := range moves {
		_ = b.kc.MoveTopicPartition(m.topic, m.partition, m.leader)
	}
}

func (b *Broker) controlMetadata(kreq kmsg.Request) (kmsg.Response, error, bool) {
	b.kc.KeepControl()
	req := kreq.(*kmsg.MetadataRequest)
	if isPassthrough(&req.UnknownTags) {
		return nil, nil, false
	}
	down := b.deg.snapshot()
	if down == nil {
		return nil, nil, false
	}
	var resp *kmsg.MetadataResponse
	var err error
	b.kc.SleepControl(func() { resp, err = b.passMetadata(req) })
	if err != nil {
		// The broker is closing; a closed connection makes the client retry.
		return nil, err, true
	}
	moves := b.degradeMetadata(resp, down)
	b.applyMoves(moves)
	resp.Version = req.Version
	return resp, nil, true
}

// degradeMetadata edits a Metadata answer for the brokers in down and
// returns the leader moves kfake must make to agree with it.
func (b *Broker) degradeMetadata(resp *kmsg.MetadataResponse, down map[int32]bool) []leaderMove {
	brokers := resp.Brokers[:0]
	for _, br := range resp.Brokers {
		if !down[br.NodeID] {
			brokers = append(brokers, br)
		}
	}
	resp.Brokers = brokers
	if down[resp.ControllerID] {
		resp.ControllerID = -1
		for _, br := range resp.Brokers {
			if resp.ControllerID == -1 || br.NodeID < resp.ControllerID {
				resp.ControllerID = br.NodeID
			}
		}
	}
	var moves []leaderMove
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != 0 {
				continue
			}
			moves = b.degrade(*t.Topic, p.Partition, down, moves, &p.Replicas, &p.ISR, &p.OfflineReplicas, &p.Leader, &p.LeaderEpoch, &p.ErrorCode)
		}
	}
	return moves
}

func (b *Broker) controlDescribeTopicPartitions(kreq kmsg.Request) (kmsg.Response, error, bool) {
	b.kc.KeepControl()
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	if isPassthrough(&req.UnknownTags) {
		return nil, nil, false
	}
	down := b.deg.snapshot()
	if down == nil {
		return nil, nil, false
	}
	var resp *kmsg.DescribeTopicPartitionsResponse
	var err error
	b.kc.SleepControl(func() {
		r := *req
		resp, err = pass[*kmsg.DescribeTopicPartitionsResponse](b, &r, &r.UnknownTags)
	})
	if err != nil {
		return nil, err, true
	}
	var moves []leaderMove
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != 0 {
				continue
			}
			moves = b.degrade(*t.Topic, p.Partition, down, moves, &p.Replicas, &p.ISR, &p.OfflineReplicas, &p.LeaderID, &p.LeaderEpoch, &p.ErrorCode)
		}
	}
	b.applyMoves(moves)
	resp.Version = req.Version
	return resp, nil, true
}

// controlFindCoordinator never names a down broker: such a lookup answers
// COORDINATOR_NOT_AVAILABLE (the client retries) and coordinators are moved
// off the down brokers in the background.
func (b *Broker) controlFindCoordinator(kreq kmsg.Request) (kmsg.Response, error, bool) {
	b.kc.KeepControl()
	req := kreq.(*kmsg.FindCoordinatorRequest)
	if isPassthrough(&req.UnknownTags) {
		return nil, nil, false
	}
	down := b.deg.snapshot()
	if down == nil {
		return nil, nil, false
	}
	var resp *kmsg.FindCoordinatorResponse
	var err error
	b.kc.SleepControl(func() {
		r := *req
		if req.Version <= 3 {
			r.CoordinatorKeys = []string{req.CoordinatorKey}
		}
		resp, err = pass[*kmsg.FindCoordinatorResponse](b, &r, &r.UnknownTags)
	})
	if err != nil {
		return nil, err, true
	}
	var moved []string
	for i := range resp.Coordinators {
		c := &resp.Coordinators[i]
		if c.ErrorCode == 0 && down[c.NodeID] {
			moved = append(moved, c.Key)
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			c.NodeID, c.Host, c.Port = -1, "", -1
		}
	}
	if len(moved) > 0 && req.CoordinatorType == 0 {
		go b.moveCoordinators(moved)
	}
	if req.Version <= 3 && len(resp.Coordinators) > 0 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	}
	resp.Version = req.Version
	return resp, nil, true
}

// degrade rewrites one partition of a Metadata or DescribeTopicPartitions
// answer (their partition types differ, their fields do not) for the down
// brokers, and appends the leader move it implies.
func (b *Broker) degrade(topic string, partition int32, down map[int32]bool, moves []leaderMove,
	replicas, isr, offline *[]int32, leader, epoch *int32, code *int16) []leaderMove {
	*replicas = b.deg.replicasFor(topic, partition, *replicas)
	nl, in, off := degradePartition(*replicas, *leader, down)
	*isr, *offline = in, off
	switch {
	case nl == -1:
		*leader = -1
		*code = kerr.LeaderNotAvailable.Code
	case nl != *leader:
		*leader = nl
		*epoch++ // MoveTopicPartition bumps kfake's epoch the same way
		moves = append(moves, leaderMove{topic, partition, nl})
	}
	return moves
}
