package redrive

import (
	"path"
	"sort"
	"time"
)

// DLQPatterns are the topic names recognised as dead-letter queues: Spring's
// <topic>.DLT (up to 3.2) and <topic>-dlt (3.3+), and the common .dlq/-dlq/.DLQ.
var DLQPatterns = []string{"*.DLT", "*-dlt", "*.dlq", "*-dlq", "*.DLQ"}

// IsDLQName reports whether a topic name follows a DLQ naming convention.
func IsDLQName(name string) bool {
	for _, p := range DLQPatterns {
		if ok, _ := path.Match(p, name); ok && len(name) > len(p)-1 {
			return true
		}
	}
	return false
}

// Pair is a DLQ and the original topic its configuration declares.
type Pair struct {
	DLQ      string
	Original string
}

// Discover picks the DLQs among topic names: every conventionally named
// topic plus every declared pair whose DLQ exists. The result is sorted;
// Declared holds the configured original ("" when found by name only).
func Discover(topics []string, pairs []Pair) []DLQ {
	exists := map[string]bool{}
	for _, t := range topics {
		exists[t] = true
	}
	found := map[string]*DLQ{}
	for _, t := range topics {
		if IsDLQName(t) {
			found[t] = &DLQ{Name: t}
		}
	}
	for _, p := range pairs {
		if !exists[p.DLQ] {
			continue
		}
		d, ok := found[p.DLQ]
		if !ok {
			d = &DLQ{Name: p.DLQ}
			found[p.DLQ] = d
		}
		d.Declared = p.Original
	}
	out := make([]DLQ, 0, len(found))
	for _, d := range found {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DLQ summarises one dead-letter queue.
type DLQ struct {
	Name     string `json:"dlq"`
	Declared string `json:"declared_original,omitempty"`
	// Records is how many records the DLQ holds (offset span).
	Records int64 `json:"records"`
	// Depth is the records not yet redriven or settled (per the ledger).
	Depth int64 `json:"depth"`
	// OldestAge is the age of the oldest record not yet redriven or settled
	// (0 when there is none).
	OldestAge time.Duration `json:"-"`
	OldestAt  *time.Time    `json:"oldest_at,omitempty"`
	// Classes is how many failure classes its pending records fall into.
	Classes int `json:"classes"`
	// Originals are the topics its records came from (last hop).
	Originals []string `json:"original_topics"`
	// Sampled is true when only the first records were read (the read bound):
	// classes and originals then describe those records only.
	Sampled bool `json:"sampled"`
}

// Summarise fills a DLQ's depth, oldest age, classes and originals from the
// records read (recs, oldest first per partition), the total record count in
// the DLQ, and the ledger. Records not read count as pending.
func Summarise(d DLQ, total int64, recs []Parsed, read int64, ledger LedgerIndex, complete bool, now time.Time) DLQ {
	return summarise(d, total, complete, now, ledger.Done, func(yield func(Coord, string, string, time.Time)) {
		for _, r := range recs {
			yield(r.Coord(), r.Class, r.OriginalTopic(), r.Timestamp)
		}
	})
}

// Summarise is Summarise over the records counted, without holding them.
func (t *ClassTally) Summarise(d DLQ, total int64, complete bool, done func(Coord) bool, now time.Time) DLQ {
	return summarise(d, total, complete, now, done, func(yield func(Coord, string, string, time.Time)) {
		for _, r := range t.rows {
			first := t.classes[r.class].first // a class has one original topic
			yield(r.coord, first.Class, first.OriginalTopic(), r.ts)
		}
	})
}

// summarise is Summarise over records given as (coordinates, class,
// original topic, timestamp).
func summarise(d DLQ, total int64, complete bool, now time.Time, isDone func(Coord) bool, each func(yield func(Coord, string, string, time.Time))) DLQ {
	d.Records = total
	d.Sampled = !complete
	done := int64(0)
	classes := map[string]bool{}
	origins := map[string]bool{}
	var oldest time.Time
	each(func(c Coord, class, origin string, ts time.Time) {
		if isDone(c) {
			done++
			return
		}
		classes[class] = true
		if origin != "" {
			origins[origin] = true
		}
		if oldest.IsZero() || ts.Before(oldest) {
			oldest = ts
		}
	})
	d.Depth = total - done
	if d.Depth < 0 {
		d.Depth = 0
	}
	d.Classes = len(classes)
	d.Originals = make([]string, 0, len(origins))
	for t := range origins {
		d.Originals = append(d.Originals, t)
	}
	if len(d.Originals) == 0 && d.Declared != "" {
		d.Originals = append(d.Originals, d.Declared)
	}
	sort.Strings(d.Originals)
	if !oldest.IsZero() {
		o := oldest.UTC()
		d.OldestAt = &o
		d.OldestAge = now.Sub(oldest)
		if d.OldestAge < 0 {
			d.OldestAge = 0
		}
	}
	return d
}
