package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/backends"
)

var _ backends.CommitTableReader = (*Cluster)(nil)

// CommitTables is CommittedOffsets for the lag monitor: the same request
// (one OffsetFetch per coordinator) and the same errors, but each group's
// commits come back indexed by topic and partition number. It reads the
// OffsetFetch response directly rather than through kadm.FetchManyOffsets:
// at 10,000 partitions x 50 groups kadm's per-partition maps and then our
// sorted []Committed cost more CPU than the request itself.
func (k *Cluster) CommitTables(ctx context.Context, groups ...string) (map[string]map[string]backends.TopicCommits, error) {
	out := make(map[string]map[string]backends.TopicCommits, len(groups))
	if len(groups) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	for _, g := range groups {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		req.Groups = append(req.Groups, rg)
	}
	// The error each group met, as kadm.FetchManyOffsets would report it.
	groupErrs := map[string]error{}
	partErrs := map[string][]string{}
	for _, shard := range k.c.cl.RequestSharded(ctx, req) {
		sreq := shard.Req.(*kmsg.OffsetFetchRequest)
		if shard.Err == nil {
			if err := authErr(shard.Resp.(*kmsg.OffsetFetchResponse).ErrorCode); err != nil {
				shard.Err = err
			}
		}
		if shard.Err != nil {
			for _, g := range sreq.Groups {
				groupErrs[g.Group] = shard.Err
			}
			continue
		}
		for _, g := range shard.Resp.(*kmsg.OffsetFetchResponse).Groups {
			if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
				groupErrs[g.Group] = err
				continue
			}
			delete(groupErrs, g.Group)
			tables := make(map[string]backends.TopicCommits, len(g.Topics))
			for _, t := range g.Topics {
				maxP := int32(-1)
				for _, p := range t.Partitions {
					maxP = max(maxP, p.Partition)
				}
				tc, ok := tables[t.Topic]
				if !ok {
					tc = backends.NewTopicCommits(len(t.Partitions), maxP)
				}
				set := ok
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						partErrs[g.Group] = append(partErrs[g.Group], fmt.Sprintf("%s[%d] %s", t.Topic, p.Partition, codeName(err)))
						continue
					}
					if p.Offset >= 0 {
						tc.Set(p.Partition, p.Offset)
						set = true
					}
				}
				// Like CommittedOffsets, a topic is listed only when the
				// group has a commit on it.
				if set {
					tables[t.Topic] = tc
				}
			}
			out[g.Group] = tables
		}
	}
	var errs []error
	for _, name := range groups {
		if err, ok := groupErrs[name]; ok {
			errs = append(errs, fmt.Errorf("group %s: %w", name, err))
			delete(out, name)
			continue
		}
		if _, ok := out[name]; !ok {
			errs = append(errs, fmt.Errorf("group %s: no answer from its coordinator", name))
			continue
		}
		if pe := partErrs[name]; len(pe) > 0 {
			sort.Strings(pe)
			errs = append(errs, fmt.Errorf("group %s: %s", name, strings.Join(pe, ", ")))
		}
	}
	if ctx.Err() != nil && len(errs) > 0 {
		return out, fmt.Errorf("committed offsets: %w", ctx.Err())
	}
	return out, errors.Join(errs...)
}

// authErr is the top-level OffsetFetch error kadm.FetchManyOffsets applies
// to every group of a shard: authorisation failures only.
func authErr(code int16) error {
	switch err := kerr.ErrorForCode(code); err {
	case kerr.ClusterAuthorizationFailed, kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed, kerr.DelegationTokenAuthorizationFailed:
		return &kadm.AuthError{Err: err}
	}
	return nil
}
