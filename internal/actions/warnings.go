package actions

import (
	"context"
	"fmt"
	"sort"

	"github.com/berth-dev/berth/backends/rabbitmq"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/redrive"
)

// A plan may select records whose failure the class rules call permanent
// (validation, deserialisation, 4xx: the demo's invalid postcodes): sent
// again unchanged, they fail again. Nothing refuses such a plan (a fix may
// have shipped that the rules cannot know of), but its review says so, on
// both backends, for every record included: the verdict comes from the
// records as they are read (their exception and message, or death reason
// and error header), never from the plan file, which holds neither.

// classRules are the class rules of cfg: its own first, then the defaults
// (as `berth dlq classes` judges a Kafka DLQ's classes).
func classRules(cfg *config.Config) (redrive.Rules, error) {
	if cfg == nil {
		return redrive.DefaultRules, nil
	}
	extra, err := redrive.CompileRules(cfg.Redrive.Classes.Permanent, cfg.Redrive.Classes.Transient)
	if err != nil {
		return nil, fmt.Errorf("redrive.classes: %v", err)
	}
	return append(extra, redrive.DefaultRules...), nil
}

// Rules are the class rules RabbitMQ DLQs are judged by (`berth dlq
// classes`, the console's classes page): the config's first, then the
// defaults, as for Kafka.
func (r *RabbitRedrive) Rules() (redrive.Rules, error) { return classRules(r.Config) }

// classJudge remembers the verdict of every class it was shown a record
// of; a class is judged on its first record, as `berth dlq classes` does.
type classJudge struct {
	rules redrive.Rules
	by    map[string]redrive.Class
	noun  string // "record" (Kafka) or "message" (RabbitMQ)
}

func newClassJudge(rules redrive.Rules, noun string) *classJudge {
	return &classJudge{rules: rules, by: map[string]redrive.Class{}, noun: noun}
}

// new says whether a record of class would be judged (a nil judge judges
// nothing).
func (j *classJudge) new(class string) bool {
	if j == nil {
		return false
	}
	_, ok := j.by[class]
	return !ok
}

// kafka judges a parsed Kafka record's class (once per class).
func (j *classJudge) kafka(p redrive.Parsed) {
	if _, ok := j.by[p.Class]; !ok {
		j.by[p.Class] = j.rules.JudgeParsed(p)
	}
}

// rabbit judges a RabbitMQ message's class (once per class).
func (j *classJudge) rabbit(m rabbitmq.Message) {
	if _, ok := j.by[m.Class]; !ok {
		j.by[m.Class] = rabbitmq.JudgeClass(m, j.rules)
	}
}

// warnings counts n records (rec: each one's class, and whether it is
// included and was judged from its record now) per permanent class, and
// words one warning per class, largest first.
func (j *classJudge) warnings(n int, rec func(i int) (class string, counted bool)) []string {
	count := map[string]int{}
	for i := 0; i < n; i++ {
		if c, ok := rec(i); ok {
			count[c]++
		}
	}
	return j.warningsOf(count)
}

// warningsOf words one warning per permanent class among count (records
// per class), largest first.
func (j *classJudge) warningsOf(count map[string]int) []string {
	for c := range count {
		if j.by[c].Verdict != redrive.VerdictPermanent {
			delete(count, c)
		}
	}
	ids := make([]string, 0, len(count))
	for c := range count {
		ids = append(ids, c)
	}
	sort.Slice(ids, func(a, b int) bool {
		if count[ids[a]] != count[ids[b]] {
			return count[ids[a]] > count[ids[b]]
		}
		return ids[a] < ids[b]
	})
	out := []string{}
	for _, id := range ids {
		c := j.by[id]
		what := c.Exception
		if c.Pattern != "" {
			what += ": " + c.Pattern
		}
		out = append(out, fmt.Sprintf("%d included %s(s) of class %s (%s) failed for a reason the class rules call permanent: redriven unchanged, they will fail again", count[id], j.noun, id, what))
	}
	return out
}

// kafkaWarnings words the warnings of a Kafka plan whose included records'
// classes j judged.
func (j *classJudge) kafkaWarnings(p redrive.Plan) []string {
	return j.warnings(len(p.Records), func(i int) (string, bool) {
		r := p.Records[i]
		return r.Class, r.Included && r.Derived()
	})
}

// rabbitWarnings is kafkaWarnings for a RabbitMQ plan.
func (j *classJudge) rabbitWarnings(p redrive.QueuePlan) []string {
	return j.warnings(len(p.Records), func(i int) (string, bool) {
		r := p.Records[i]
		return r.Class(), r.Included && r.Derived
	})
}

// reviewClusterRefusal refuses to derive a review of another cluster's
// plan, on both backends: what this cluster holds at the plan's
// coordinates (or under its event ids) says nothing about its records.
func reviewClusterRefusal(hash, made, here string) error {
	return Refuse(ErrClusterMismatch, "plan %s was made on cluster %q, this is cluster %q: show it attached to its own cluster", redrive.ShortHash(hash), made, here)
}

// DeriveReview re-reads a stored Kafka plan's records as Derive does (filling
// what a reviewer sees from them) and returns what the reviewer signs:
// the counts per target, the idempotency keys, the records changed or
// gone, and a warning per permanent class the plan includes. Another
// cluster's plan is refused (ErrClusterMismatch), nothing read.
func (k *KafkaRedrive) DeriveReview(ctx context.Context, f *redrive.File) (Summary, error) {
	id, err := k.Identity(ctx)
	if err != nil {
		return Summary{}, err
	}
	if id != f.Plan.Cluster {
		return Summary{}, reviewClusterRefusal(f.Hash, f.Plan.Cluster, id)
	}
	rules, err := classRules(k.Planner.Config)
	if err != nil {
		return Summary{}, err
	}
	j := newClassJudge(rules, "record")
	changed, gone, err := k.derive(ctx, f, j)
	if err != nil {
		return Summary{}, err
	}
	s := Summarise(f.Plan, changed, gone)
	s.Warnings = j.kafkaWarnings(f.Plan)
	return s, nil
}

// PlanReviewed is Plan with the review of the plan just made: its records
// were read to make it, so their classes are judged as they were read.
func (p *Planner) PlanReviewed(ctx context.Context, req PlanRequest) (redrive.File, Summary, error) {
	rules, err := p.Rules()
	if err != nil {
		return redrive.File{}, Summary{}, err
	}
	j := newClassJudge(rules, "record")
	f, err := p.plan(ctx, req, j.kafka)
	if err != nil {
		return f, Summary{}, err
	}
	s := Summarise(f.Plan, nil, nil)
	s.Warnings = j.kafkaWarnings(f.Plan)
	return f, s, nil
}

// PlanReviewed is MakePlan with the warnings of the plan just made (its
// messages' classes judged as they were browsed).
func (r *RabbitRedrive) PlanReviewed(ctx context.Context, cl RabbitClient, l RabbitStore, in RabbitPlanInput) (redrive.QueuePlan, rabbitmq.BrowseResult, []string, error) {
	rules, err := classRules(r.Config)
	if err != nil {
		return redrive.QueuePlan{}, rabbitmq.BrowseResult{}, nil, err
	}
	j := newClassJudge(rules, "message")
	in.seen = j.rabbit
	p, res, err := r.MakePlan(ctx, cl, l, in)
	if err != nil {
		return p, res, nil, err
	}
	return p, res, j.rabbitWarnings(p), nil
}

// DeriveReview re-reads a RabbitMQ plan's DLQ as Derive does and returns, with
// Derive's answers, a warning per permanent class the plan includes among
// the messages found unchanged. Another cluster's plan (by cl's cluster
// name) is refused (ErrClusterMismatch), nothing read. With a ledger l (nil:
// none), the records the plan already sent are counted as such
// (RabbitReview.AlreadySent), not called gone.
func (r *RabbitRedrive) DeriveReview(ctx context.Context, cl RabbitClient, l RabbitLedger, p *redrive.QueuePlan, accept bool) (RabbitReview, error) {
	if here := cl.ClusterName(); here != p.Cluster {
		return RabbitReview{}, reviewClusterRefusal(p.Hash(), p.Cluster, here)
	}
	if err := vhostRefusal(cl, *p); err != nil {
		return RabbitReview{}, err
	}
	rules, err := classRules(r.Config)
	if err != nil {
		return RabbitReview{}, err
	}
	j := newClassJudge(rules, "message")
	rv, err := r.derive(ctx, cl, l, p, accept, j.rabbit)
	if err != nil {
		return RabbitReview{}, err
	}
	rv.Warnings = j.rabbitWarnings(*p)
	return rv, nil
}

// warningsChunk is how many records Warnings re-reads at once: each is
// only parsed for its class, so a small chunk keeps approve's peak near
// what it was without the pass (a 20,000-record plan: 58 MiB without it,
// 69 MiB in chunks of 2,000, 124 MiB in one chunk of them all).
const warningsChunk = 2000

// Warnings are DeriveReview's warnings without the rest of the review: the
// included records are re-read a chunk at a time and only their classes
// kept (nothing is filled in f), for `berth redrive approve` without a
// terminal, which shows no review but must not sign past a warning unsaid.
func (k *KafkaRedrive) Warnings(ctx context.Context, f redrive.File) ([]string, error) {
	rules, err := classRules(k.Planner.Config)
	if err != nil {
		return nil, err
	}
	x, err := redrive.ExtractorsOf(f.Plan.Policy)
	if err != nil {
		return nil, err
	}
	j := newClassJudge(rules, "record")
	// Included records found unchanged, per class.
	count := map[string]int{}
	for from := 0; from < len(f.Plan.Records); from += warningsChunk {
		part := f.Plan.Records[from:min(from+warningsChunk, len(f.Plan.Records))]
		var coords []redrive.Coord
		for _, r := range part {
			if r.Included {
				coords = append(coords, r.Coord())
			}
		}
		if len(coords) == 0 {
			continue
		}
		recs, err := k.Planner.Cluster.ReadDLQByCoord(ctx, f.Plan.DLQ, coords)
		if err != nil {
			return nil, err
		}
		for _, r := range part {
			if rec, ok := recs[r.Coord()]; ok && r.Included && rec.Digest() == r.Digest {
				p := redrive.ParseRecord(rec, x)
				j.kafka(p)
				count[p.Class]++
			}
		}
	}
	return j.warningsOf(count), nil
}
