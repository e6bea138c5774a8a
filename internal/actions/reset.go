package actions

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/audit"
	"github.com/berth-dev/berth/internal/offsets"
)

// ResetBackend is the cluster I/O a reset needs. backends/kafka.Resets
// implements it; nothing here knows about a client library.
type ResetBackend interface {
	// Describe identifies the cluster (its id binds a saved plan to it).
	Describe(ctx context.Context) (backends.ClusterInfo, error)
	// Topics returns the named topics with partitions and log offsets; an
	// unknown topic is an error naming it.
	Topics(ctx context.Context, names ...string) ([]backends.Topic, error)
	// GroupForReset describes the group; a group the cluster does not know
	// is State "Dead" with no members (a reset may create its offsets).
	GroupForReset(ctx context.Context, group string) (backends.Group, error)
	// CommittedOffsets returns committed offsets per group.
	CommittedOffsets(ctx context.Context, groups ...string) (map[string][]backends.Committed, error)
	// OffsetsForTime returns, per partition of the topics, the first offset
	// whose record timestamp is at or after at (ListOffsets by timestamp).
	OffsetsForTime(ctx context.Context, at time.Time, topics ...string) (map[offsets.TP]int64, error)
	// FirstTimestamps reads the timestamps of records at given offsets.
	FirstTimestamps(ctx context.Context, queries []backends.OffsetQuery) ([]backends.RecordTime, error)
	// CommitOffsets commits offsets for the group as a non-member, in one
	// request. The broker refuses it when the group has members.
	CommitOffsets(ctx context.Context, group string, offsets []backends.Committed) error
}

// ResetRequest is what the operator asked for.
type ResetRequest struct {
	Group string
	Spec  offsets.Spec
	Scope offsets.Scope
}

// Resetter is the offset-reset action, shared by the CLI and the TUI.
type Resetter struct {
	Backend ResetBackend
	// Audit records every executed reset; Execute refuses without it.
	Audit *audit.Log
	// Context names the Berth context (recorded in plans and the audit log).
	Context string
	// ReadOnly refuses Execute (dry runs are read-only and allowed).
	ReadOnly bool
	// Effects reports whether a group is effect-producing (config
	// groups[].effects); nil means none is.
	Effects func(group string) bool
	// Actor is who executes (default: the OS user).
	Actor string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ActiveError refuses a reset while the group has members: Kafka lets only
// an inactive group's offsets be altered, and a live consumer would commit
// over the reset anyway.
type ActiveError struct {
	Group   string
	State   string
	Members []backends.Member
}

func (e *ActiveError) Error() string {
	if len(e.Members) == 0 {
		return fmt.Sprintf("refused: group %s is %s, not Empty: stop its consumers first", e.Group, e.State)
	}
	return fmt.Sprintf("refused: group %s has %d active member(s): %s: stop its consumers first", e.Group, len(e.Members), offsets.MemberNames(e.Members))
}

// ChangedError refuses an execute whose plan no longer matches the cluster.
type ChangedError struct {
	Group   string
	Changes []string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("refused: group %s changed since the dry run (%s): nothing committed; run the dry run again", e.Group, strings.Join(e.Changes, "; "))
}

// EffectsError refuses a replay of an effect-producing group without
// explicit confirmation.
type EffectsError struct {
	Group  string
	Replay int64
}

func (e *EffectsError) Error() string {
	return fmt.Sprintf("refused: group %s is effect-producing and this reset replays %d record(s): their side effects repeat unless the consumer is idempotent; add --confirm-replay-effects to proceed", e.Group, e.Replay)
}

func (r *Resetter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Resetter) effects(group string) bool { return r.Effects != nil && r.Effects(group) }

// Plan computes the dry run (an offsets.Plan): it reads the group, its
// committed offsets, the partitions in scope with their log bounds (and,
// per mode, offsets for a time or another group's commits), computes
// targets, then reads the timestamps bounding each replayed or skipped
// span. It changes nothing and is allowed in read-only contexts.
func (r *Resetter) Plan(ctx context.Context, req ResetRequest) (offsets.Plan, error) {
	if req.Group == "" {
		return offsets.Plan{}, errors.New("no group given")
	}
	spec := req.Spec
	if spec.Mode == offsets.ByDuration && spec.Duration > 0 {
		spec.Time = r.now().Add(-spec.Duration).UTC()
	}
	if err := spec.Validate(); err != nil {
		return offsets.Plan{}, err
	}
	info, err := r.Backend.Describe(ctx)
	if err != nil {
		return offsets.Plan{}, err
	}
	g, err := r.Backend.GroupForReset(ctx, req.Group)
	if err != nil {
		return offsets.Plan{}, err
	}
	groups := []string{req.Group}
	if spec.Mode == offsets.FromGroup {
		if spec.Group == req.Group {
			return offsets.Plan{}, BadRequest("--from-group %s: that is the group being reset", spec.Group)
		}
		groups = append(groups, spec.Group)
	}
	commits, err := r.Backend.CommittedOffsets(ctx, groups...)
	if err != nil {
		return offsets.Plan{}, err
	}
	committed := toMap(commits[req.Group])
	var source map[offsets.TP]int64
	if spec.Mode == offsets.FromGroup {
		source = toMap(commits[spec.Group])
	}

	// Topics to describe: the scope's, the committed ones for --all-topics,
	// the file's or the source group's.
	names := map[string]bool{}
	for _, n := range req.Scope.TopicNames() {
		names[n] = true
	}
	if req.Scope.AllTopics {
		for tp := range committed {
			names[tp.Topic] = true
		}
	}
	for _, f := range spec.File {
		names[f.Topic] = true
	}
	if spec.Mode == offsets.FromGroup && req.Scope.Empty() {
		for tp := range source {
			names[tp.Topic] = true
		}
	}
	topicList := sortedKeys(names)
	topicParts := map[string][]int32{}
	bounds := map[offsets.TP]offsets.Bounds{}
	if len(topicList) > 0 {
		topics, err := r.Backend.Topics(ctx, topicList...)
		if err != nil {
			return offsets.Plan{}, err
		}
		for _, t := range topics {
			for _, p := range t.Partitions {
				topicParts[t.Name] = append(topicParts[t.Name], p.Partition)
				b := offsets.Bounds{LogStart: p.LogStart, LogEnd: p.HighWatermark}
				if p.Err != "" || p.LogStart < 0 || p.HighWatermark < 0 {
					// Unreadable offsets matter only for a partition in
					// scope; checked once the scope is resolved.
					b = offsets.Bounds{LogStart: -1, LogEnd: -1}
				}
				bounds[offsets.TP{Topic: t.Name, Partition: p.Partition}] = b
			}
		}
	}
	tps, err := offsets.Select(spec, req.Scope, committed, source, topicParts)
	if err != nil {
		return offsets.Plan{}, err
	}
	for _, tp := range tps {
		if b := bounds[tp]; b.LogStart < 0 {
			return offsets.Plan{}, fmt.Errorf("%s[%d]: log offsets unavailable (partition offline?): cannot plan a reset for it", tp.Topic, tp.Partition)
		}
	}
	snap := offsets.Snapshot{Group: req.Group, State: g.State, Members: g.Members, Committed: committed,
		Bounds: bounds, Source: source, Effects: r.effects(req.Group)}
	if spec.Mode == offsets.ToDatetime || spec.Mode == offsets.ByDuration {
		snap.ForTime, err = r.Backend.OffsetsForTime(ctx, spec.Time, topicsOf(tps)...)
		if err != nil {
			return offsets.Plan{}, err
		}
	}
	p, err := offsets.Compute(spec, tps, snap)
	if err != nil {
		return offsets.Plan{}, err
	}
	p.Context, p.ClusterID, p.Scope = r.Context, info.ID, req.Scope
	p.CreatedAt = r.now().UTC()
	p.CreatedBy = r.actor()
	if qs := p.SpanQueries(); len(qs) > 0 {
		// Spans are information, not safety: a failure to read them leaves
		// the span unknown rather than failing the dry run.
		if times, err := r.Backend.FirstTimestamps(ctx, qs); err == nil {
			p = p.WithSpans(times)
		} else {
			p.Warnings = append(p.Warnings, "time spans unknown: "+err.Error())
		}
	}
	return p.Seal(), nil
}

func (r *Resetter) actor() string {
	if r.Actor != "" {
		return r.Actor
	}
	return audit.CurrentUser()
}

// ResetOptions are the operator's explicit confirmations.
type ResetOptions struct {
	ConfirmReplayEffects bool
}

// ResetResult is what Execute did.
type ResetResult struct {
	Plan     offsets.Plan `json:"plan"`
	Executed bool         `json:"executed"`
	// Verified is true when the committed offsets read back after the
	// commit equal the plan's targets.
	Verified bool `json:"verified"`
	// AuditSeq is the sequence number of the audit entry recording the
	// outcome.
	AuditSeq int64 `json:"audit_seq"`
	// Warning is a non-fatal problem after the commit (audit mirror).
	Warning string `json:"warning,omitempty"`
}

// ResetAuditDetails is what an offsets.reset audit entry records.
type ResetAuditDetails struct {
	Group      string             `json:"group"`
	ClusterID  string             `json:"cluster_id"`
	Spec       string             `json:"spec"`
	PlanDigest string             `json:"plan_digest"`
	Status     string             `json:"status"` // "started", "committed", "failed" (nothing changed), "unknown"
	Error      string             `json:"error,omitempty"`
	Verified   bool               `json:"verified,omitempty"`
	Effects    bool               `json:"effects,omitempty"`
	Confirmed  bool               `json:"confirmed_replay_effects,omitempty"`
	Partitions []ResetAuditChange `json:"partitions"`
	// ReadBack is what the group's offsets read back as when the outcome
	// is not "committed" (after -1: no committed offset).
	ReadBack []ResetAuditChange `json:"read_back,omitempty"`
}

// ResetAuditChange is one partition's before and after.
type ResetAuditChange struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Before    *int64 `json:"before"`
	After     int64  `json:"after"`
}

// Audit actions written by Execute.
const (
	ActionStart = "offsets.reset.start"
	ActionReset = "offsets.reset"
)

// Execute commits exactly the plan's targets, after checking, in order:
// the context is writable; the plan is intact, for this context and this
// cluster; the effects guard; and, re-read from the cluster immediately
// before committing, that the group has no members and that its committed
// offsets and the partitions' log bounds still match the plan. It records
// the intent in the audit log before committing (so an unwritable audit
// log stops the reset) and the outcome after, then reads the offsets back
// to verify them. On any refusal nothing is committed.
func (r *Resetter) Execute(ctx context.Context, p offsets.Plan, o ResetOptions) (ResetResult, error) {
	res := ResetResult{Plan: p}
	if r.ReadOnly {
		return res, Refuse(ErrReadOnly, "the context is read-only")
	}
	if p.Digest == "" || p.ComputeDigest() != p.Digest {
		return res, errors.New("refused: the plan's digest does not match its content; run the dry run again")
	}
	if p.Context != r.Context {
		return res, fmt.Errorf("refused: the plan was made for context %q, this is %q", p.Context, r.Context)
	}
	if r.Audit == nil {
		return res, errors.New("refused: no audit log configured (audit.file)")
	}
	effects := p.Effects || r.effects(p.Group)
	if effects && (p.ReplayTotal() > 0 || len(p.UnknownStart()) > 0) && !o.ConfirmReplayEffects {
		return res, &EffectsError{Group: p.Group, Replay: p.ReplayTotal()}
	}
	info, err := r.Backend.Describe(ctx)
	if err != nil {
		return res, err
	}
	if info.ID != p.ClusterID {
		return res, fmt.Errorf("refused: the plan was made on cluster %q, context %s is now cluster %q", p.ClusterID, r.Context, info.ID)
	}
	if err := r.recheck(ctx, p); err != nil {
		return res, err
	}

	details := ResetAuditDetails{Group: p.Group, ClusterID: p.ClusterID, Spec: p.Spec.String() + " " + p.Scope.String(),
		PlanDigest: p.Digest, Status: "started", Effects: effects, Confirmed: o.ConfirmReplayEffects}
	for _, row := range p.Partitions {
		details.Partitions = append(details.Partitions, ResetAuditChange{Topic: row.Topic, Partition: row.Partition, Before: row.Current, After: row.Target})
	}
	entry := audit.Entry{Actor: r.Actor, Action: ActionStart, Context: r.Context, Target: p.Group, Details: details}
	if _, err := r.Audit.Append(ctx, entry); err != nil && !isSinkErr(err) {
		return res, fmt.Errorf("refused: cannot write the audit log, nothing committed: %w", err)
	}

	offs := make([]backends.Committed, 0, len(p.Partitions))
	for _, row := range p.Partitions {
		offs = append(offs, backends.Committed{Topic: row.Topic, Partition: row.Partition, Offset: row.Target, LeaderEpoch: -1})
	}
	commitErr := r.Backend.CommitOffsets(ctx, p.Group, offs)

	// Read the offsets back, even when the commit reported an error or the
	// caller's context is done: a request cancelled in flight may still
	// have been applied, and the audit entry must say what really happened.
	bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer bcancel()
	readBack, rerr := r.readBack(bctx, p)
	switch {
	case rerr != nil:
		details.Status = "unknown"
		res.Warning = "could not read the offsets back to verify: " + rerr.Error()
		if commitErr == nil {
			details.Status, res.Executed = "committed", true
		}
	case matches(readBack, p, func(r offsets.Row) (int64, bool) { return r.Target, true }):
		details.Status, res.Executed, res.Verified = "committed", true, true
		if commitErr != nil {
			res.Warning = "the commit reported an error (" + commitErr.Error() + ") but the offsets read back match the plan"
			commitErr = nil
		}
	case commitErr == nil:
		details.Status, res.Executed = "committed", true
		res.Warning = "the committed offsets read back differ from the plan (a consumer committed since?)"
	case matches(readBack, p, func(r offsets.Row) (int64, bool) {
		if r.Current == nil {
			return 0, false
		}
		return *r.Current, true
	}):
		details.Status = "failed"
	default:
		details.Status = "unknown"
	}
	details.Verified = res.Verified
	if commitErr != nil {
		details.Error = commitErr.Error()
	}
	if details.Status != "committed" {
		details.ReadBack = readBackList(p, readBack)
	}

	// The outcome is recorded even when the caller's context is done (an
	// interrupted reset must still leave a trace).
	entry.Action, entry.Details = ActionReset, details
	stored, aerr := r.Audit.Append(bctx, entry)
	res.AuditSeq = stored.Seq
	if commitErr != nil {
		if details.Status == "failed" {
			return res, fmt.Errorf("commit failed, nothing changed: %w", commitErr)
		}
		return res, fmt.Errorf("commit failed and the group's offsets now match neither the plan nor its start (see audit entry %d): %w", stored.Seq, commitErr)
	}
	if aerr != nil {
		if isSinkErr(aerr) {
			res.Warning = joinWarn(res.Warning, aerr.Error())
		} else {
			return res, fmt.Errorf("offsets committed, but the audit log could not record it: %w", aerr)
		}
	}
	return res, nil
}

// matches reports whether every row's partition reads back as want(row)
// (a row for which want reports false must have no committed offset).
func matches(got map[offsets.TP]int64, p offsets.Plan, want func(offsets.Row) (int64, bool)) bool {
	for _, row := range p.Partitions {
		w, ok := want(row)
		g, has := got[row.TP()]
		if ok != has || (ok && g != w) {
			return false
		}
	}
	return true
}

func readBackList(p offsets.Plan, got map[offsets.TP]int64) []ResetAuditChange {
	out := []ResetAuditChange{}
	for _, row := range p.Partitions {
		c := ResetAuditChange{Topic: row.Topic, Partition: row.Partition, Before: row.Current, After: -1}
		if o, ok := got[row.TP()]; ok {
			c.After = o
		}
		out = append(out, c)
	}
	return out
}

func joinWarn(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func isSinkErr(err error) bool {
	var se *audit.SinkError
	return errors.As(err, &se)
}

// recheck re-reads the group and the log immediately before the commit and
// refuses when anything the plan depends on moved.
func (r *Resetter) recheck(ctx context.Context, p offsets.Plan) error {
	g, err := r.Backend.GroupForReset(ctx, p.Group)
	if err != nil {
		return err
	}
	if len(g.Members) > 0 {
		return &ActiveError{Group: p.Group, State: g.State, Members: g.Members}
	}
	switch g.State {
	case "Empty", "Dead", "":
	default:
		return &ActiveError{Group: p.Group, State: g.State}
	}
	var changes []string
	if len(p.Members) > 0 {
		changes = append(changes, fmt.Sprintf("it had %d member(s) at plan time", len(p.Members)))
	}
	commits, err := r.Backend.CommittedOffsets(ctx, p.Group)
	if err != nil {
		return err
	}
	now := toMap(commits[p.Group])
	topics := map[string]bool{}
	for _, row := range p.Partitions {
		topics[row.Topic] = true
		c, has := now[row.TP()]
		switch {
		case row.Current == nil && has:
			changes = append(changes, fmt.Sprintf("%s now has committed offset %d (none at plan time)", row.Label(), c))
		case row.Current != nil && !has:
			changes = append(changes, fmt.Sprintf("%s no longer has a committed offset (was %d)", row.Label(), *row.Current))
		case row.Current != nil && c != *row.Current:
			changes = append(changes, fmt.Sprintf("%s committed offset is %d, was %d at plan time", row.Label(), c, *row.Current))
		}
	}
	ts, err := r.Backend.Topics(ctx, sortedKeys(topics)...)
	if err != nil {
		return err
	}
	bounds := map[offsets.TP]backends.Partition{}
	for _, t := range ts {
		for _, pp := range t.Partitions {
			bounds[offsets.TP{Topic: t.Name, Partition: pp.Partition}] = pp
		}
	}
	for _, row := range p.Partitions {
		b, ok := bounds[row.TP()]
		switch {
		case !ok:
			changes = append(changes, row.Label()+" no longer exists")
		case b.Err != "" || b.LogStart < 0:
			changes = append(changes, row.Label()+" log offsets unavailable: "+b.Err)
		case row.Target < b.LogStart:
			changes = append(changes, fmt.Sprintf("%s target %d is now below the log start %d (retention deleted it)", row.Label(), row.Target, b.LogStart))
		case row.Target > b.HighWatermark:
			changes = append(changes, fmt.Sprintf("%s target %d is now beyond the log end %d (topic recreated?)", row.Label(), row.Target, b.HighWatermark))
		}
	}
	if len(changes) > 0 {
		return &ChangedError{Group: p.Group, Changes: changes}
	}
	return nil
}

// readBack reads the group's committed offsets (after a commit, to verify
// it: a reset tool that silently commits something else is worse than none).
func (r *Resetter) readBack(ctx context.Context, p offsets.Plan) (map[offsets.TP]int64, error) {
	commits, err := r.Backend.CommittedOffsets(ctx, p.Group)
	if err != nil {
		return nil, err
	}
	return toMap(commits[p.Group]), nil
}

func toMap(cs []backends.Committed) map[offsets.TP]int64 {
	m := make(map[offsets.TP]int64, len(cs))
	for _, c := range cs {
		m[offsets.TP{Topic: c.Topic, Partition: c.Partition}] = c.Offset
	}
	return m
}

func topicsOf(tps []offsets.TP) []string {
	set := map[string]bool{}
	for _, tp := range tps {
		set[tp.Topic] = true
	}
	return sortedKeys(set)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
