package dlq

import (
	"context"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

// Failure classes read by what failed and how, the opaque id last: the id is
// what --class takes, not what a person recognises. Both backends' classes
// pages use these columns (RabbitMQ names the parts differently: the death
// reason stands for the exception, the error header for the message).

// Columns of a classes table.
const (
	colClassSel = iota
	colClassException
	colClassPattern
	colClassCount
	colClassVerdict
	colClassOriginal
	colClassLast
	colClassID
	numClassCols
)

// classTitles names a backend's class parts.
type classTitles struct{ exception, pattern, original, last string }

var (
	kafkaClassTitles = classTitles{"EXCEPTION", "MESSAGE PATTERN", "ORIGINAL", "LAST SEEN"}
	queueClassTitles = classTitles{"REASON", "ERROR PATTERN", "ORIGINAL QUEUE", "LAST DEATH"}
)

func classColumns(t classTitles) []table.Column {
	return []table.Column{
		colClassSel:       {Title: "SEL", Width: 3},
		colClassException: {Title: t.exception, Width: 20, Flex: 1},
		colClassPattern:   {Title: t.pattern, Width: 24, Flex: 3, Drop: 1},
		colClassCount:     {Title: "COUNT", Width: 5, Right: true, Numeric: true},
		colClassVerdict:   {Title: "VERDICT", Width: 9, Whole: true},
		colClassOriginal:  {Title: t.original, Width: 12, Flex: 1, Drop: 3},
		colClassLast:      {Title: t.last, Width: 8, Right: true, Numeric: true, Drop: 4},
		colClassID:        {Title: "CLASS", Width: 12, Drop: 2},
	}
}

// classRow is one class; the row ID is the class id.
func classRow(c redrive.Class, sel, last string, lastSecs float64, applied int) table.Row {
	cells := make([]string, numClassCols)
	nums := make([]float64, numClassCols)
	cells[colClassSel] = sel
	cells[colClassException] = sanitize.Text(orUnknown(javaSimpleName(c.Exception)))
	cells[colClassPattern] = sanitize.Text(dash(c.Pattern))
	cells[colClassCount], nums[colClassCount] = fmt.Sprint(c.Count), float64(c.Count)
	verdict, lv := verdictCell(c.Verdict, applied, c.Count)
	cells[colClassVerdict] = verdict
	cells[colClassOriginal] = sanitize.Text(c.OriginalTopic)
	cells[colClassLast], nums[colClassLast] = last, lastSecs
	cells[colClassID] = c.ID
	return table.Row{ID: c.ID, Cells: cells, Nums: nums, Level: lv}
}

// verdictCell is a class's verdict as shown: the rules' verdict, unless the
// system of record says some of its records already took effect, which
// matters more than whether the failure was transient (a payment captured
// before the ledger call failed reads "transient" by its exception).
func verdictCell(verdict string, applied, count int) (string, styles.Level) {
	switch {
	case applied > 0:
		return fmt.Sprintf("took effect %d/%d!", applied, count), styles.Bad
	case verdict == redrive.VerdictPermanent:
		return verdict, styles.Warn
	}
	return verdict, styles.Normal
}

// classLabel names a class for a person: what failed, how, then the id.
func classLabel(c redrive.Class) string {
	what := orUnknown(javaSimpleName(c.Exception))
	if c.Pattern != "" {
		what += ": " + c.Pattern
	}
	return what + " (" + c.ID + ")"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown failure"
	}
	return s
}

// classLabels maps class ids to their labels; an id with no class (a
// record already redriven is in none of the pending classes) is its own
// label.
type classLabelMap map[string]string

func classLabels(cs []redrive.Class) classLabelMap {
	out := make(classLabelMap, len(cs))
	for _, c := range cs {
		out[c.ID] = classLabel(c)
	}
	return out
}

func (m classLabelMap) of(id string) string {
	if l, ok := m[id]; ok {
		return l
	}
	return id
}

// Applier is implemented by services that can ask a DLQ's system of record
// which idempotency keys already have their effect committed (planner's
// Console for Kafka, the console's RabbitMQ service); configured is false
// when the DLQ's policy names none. It reads only.
type Applier interface {
	Applied(ctx context.Context, dlq string, keys []string) (applied map[string]bool, configured bool, err error)
}

type appliedMsg struct {
	applied    map[string]bool
	configured bool
	err        error
	keys       []keyed
}

// keyed is one pending record's class and idempotency key.
type keyed struct{ class, key string }

// effects is what the system of record said about a DLQ's pending records:
// a class whose records failed after their side effect committed (a
// payment captured, then the ledger call failed) reads "transient" by its
// exception, yet redriving it would apply it twice.
type effects struct {
	applied map[string]bool // by idempotency key; nil until answered
	byClass map[string]int  // records that took effect, by class
	note    string          // the page's line about it ("" when nothing to say)
}

// probe asks, off the UI goroutine (through run), about the keys.
func (e *effects) probe(keys []keyed, run func(func(context.Context, Applier) tea.Msg) tea.Cmd, dlq string) tea.Cmd {
	e.applied, e.byClass, e.note = nil, nil, ""
	var ask []string
	for _, k := range keys {
		if k.key != "" {
			ask = append(ask, k.key)
		}
	}
	if len(ask) == 0 {
		return nil
	}
	return run(func(ctx context.Context, a Applier) tea.Msg {
		m, conf, err := a.Applied(ctx, dlq, ask)
		return appliedMsg{applied: m, configured: conf, err: err, keys: keys}
	})
}

// answered records the answer; what names the records in the note.
func (e *effects) answered(m appliedMsg, what string) {
	switch {
	case m.err != nil:
		e.note = "system of record not asked: " + m.err.Error()
		return
	case !m.configured:
		return
	}
	e.applied, e.byClass = map[string]bool{}, map[string]int{}
	n := 0
	for _, k := range m.keys {
		if k.key != "" && m.applied[k.key] {
			e.applied[k.key] = true
			e.byClass[k.class]++
			n++
		}
	}
	if n > 0 {
		e.note = fmt.Sprintf("system of record: %d %s already took effect", n, what)
	}
}
