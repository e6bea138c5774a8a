package tui

// RabbitMQ contexts in the console. A RabbitMQ source's snapshots carry
// Snapshot.RabbitMQ (queues with status and age, nodes, DLQs) instead of
// topics and groups. The overview switches to its queue form when such a
// snapshot arrives; "groups" and "group" open their queue counterparts;
// Kafka-only pages say so instead of showing empty tables.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/components/table"
	"github.com/berth-dev/berth/tui/styles"
)

func init() {
	RegisterPageSpec(PageSpec{Name: "queues", Aliases: []string{"qs"}, Help: "RabbitMQ queues: status, head age, depth, consumers, rates", Factory: newQueues})
}

// Columns of the queues table (queue overview and queues page). Drop
// order keeps, at 80 columns, what answers "is it stuck and how badly":
// name, status, age and its source, depth, consumers, ETA.
const (
	colQName = iota
	colQVhost
	colQType
	colQStatus
	colQAge
	colQAgeSrc
	colQReady
	colQUnacked
	colQConsumers
	colQUtil
	colQPublish
	colQDeliver
	colQAck
	colQETA
	numQCols
)

func queueColumns() []table.Column {
	return []table.Column{
		colQName:      {Title: "QUEUE", Width: 18, Flex: 1},
		colQVhost:     {Title: "VHOST", Width: 6, Drop: 12},
		colQType:      {Title: "TYPE", Width: 7, Drop: 9},
		colQStatus:    {Title: "STATUS", Width: 8, Whole: true},
		colQAge:       {Title: "AGE", Width: 7, Right: true, Numeric: true},
		colQAgeSrc:    {Title: "AGE FROM", Width: 12},
		colQReady:     {Title: "READY", Width: 7, Right: true, Numeric: true},
		colQUnacked:   {Title: "UNACKED", Width: 7, Right: true, Numeric: true, Drop: 6},
		colQConsumers: {Title: "CONS", Width: 5, Right: true, Numeric: true},
		colQUtil:      {Title: "UTIL", Width: 5, Right: true, Numeric: true, Drop: 10},
		colQPublish:   {Title: "PUB/S", Width: 7, Right: true, Numeric: true, Drop: 8},
		colQDeliver:   {Title: "DLV/S", Width: 7, Right: true, Numeric: true, Drop: 11},
		colQAck:       {Title: "ACK/S", Width: 7, Right: true, Numeric: true, Drop: 7},
		colQETA:       {Title: "ETA", Width: 6, Right: true, Numeric: true, Drop: 5},
	}
}

// queueID is a queue's row ID: vhost and name, raw (what the queue page
// is opened with).
func queueID(q backends.Queue) string { return q.Vhost + "\x00" + q.Name }

// queueRows builds one row per queue; cells are sanitised, and statistics
// RabbitMQ has not produced yet read "?" (sorted after every number).
func queueRows(s *Snapshot) []table.Row {
	if s.RabbitMQ == nil {
		return nil
	}
	qs := s.RabbitMQ.Queues
	cells := make([]string, len(qs)*numQCols)
	nums := make([]float64, len(qs)*numQCols)
	rows := make([]table.Row, 0, len(qs))
	for i, qsI := range qs {
		c := cells[i*numQCols : (i+1)*numQCols : (i+1)*numQCols]
		n := nums[i*numQCols : (i+1)*numQCols : (i+1)*numQCols]
		rows = append(rows, queueRow(qsI, c, n))
	}
	return rows
}

func queueRow(st monitor.QueueState, cells []string, nums []float64) table.Row {
	q, l := st.Queue, st.Lag
	for i := range nums {
		nums[i] = unknown
	}
	cells[colQName] = sanitize.Text(q.Name)
	cells[colQVhost] = sanitize.Text(q.Vhost)
	cells[colQType] = orUnknown(sanitize.Text(q.Type))
	cells[colQStatus] = queueStatusText(l)
	cells[colQAge], cells[colQAgeSrc] = queueAgeText(q, l)
	if a, ok := st.Age(); ok {
		nums[colQAge] = a.Seconds()
	}
	cells[colQReady], nums[colQReady] = optCount(q.Ready)
	cells[colQUnacked], nums[colQUnacked] = optCount(q.Unacked)
	if q.Consumers != nil {
		cells[colQConsumers], nums[colQConsumers] = strconv.Itoa(*q.Consumers), float64(*q.Consumers)
	} else {
		cells[colQConsumers] = "?"
	}
	if u := q.ConsumerUtilisation; u != nil {
		cells[colQUtil], nums[colQUtil] = strconv.FormatFloat(*u*100, 'f', 0, 64)+"%", *u
	} else {
		cells[colQUtil] = "?"
	}
	cells[colQPublish], nums[colQPublish] = optRate(q.PublishRate)
	cells[colQDeliver], nums[colQDeliver] = optRate(q.DeliverRate)
	cells[colQAck], nums[colQAck] = optRate(q.AckRate)
	cells[colQETA], nums[colQETA] = queueETA(q, l)
	return table.Row{ID: queueID(q), Cells: cells, Nums: nums, Level: queueLevel(l)}
}

// queueStatusText is the status word, "!" when the age breaches the SLO.
func queueStatusText(l lag.QueueLag) string {
	s := l.Status.String()
	if l.Breach {
		s += "!"
	}
	return s
}

// queueLevel colours a queue row by meaning.
func queueLevel(l lag.QueueLag) styles.Level {
	switch {
	case l.Breach || l.Status == lag.QueueStalled:
		return styles.Bad
	case l.Status == lag.QueueGrowing, l.Status == lag.QueueDLQReceiving:
		return styles.Warn
	}
	return styles.Normal
}

// Age source labels: where a queue's age comes from, said plainly.
const (
	ageSrcPublisher = "publisher ts" // the head message's timestamp property
	ageSrcEstimate  = "est."         // ready / drain rate: not a measured age
	ageSrcEmpty     = "empty"
	ageSrcStream    = "stream: n/a"
	ageSrcUnknown   = "unknown" // a DLQ holds messages whose age is not reported (yet)
)

// queueAgeText is the age cell and its source label. Unknown is "?",
// never 0; a stream has no age ("—").
func queueAgeText(q backends.Queue, l lag.QueueLag) (age, src string) {
	if q.Type == backends.QueueStream {
		return "—", ageSrcStream
	}
	if l.Age == nil {
		if l.AgeSource == lag.AgeUnknown {
			return "?", ageSrcUnknown
		}
		return "?", "—"
	}
	age = durations.Format(*l.Age)
	switch l.AgeSource {
	case lag.AgePublisherTimestamp:
		src = ageSrcPublisher
	case lag.AgeEstimate:
		src = ageSrcEstimate
		age = "~" + age
	case lag.AgeEmpty:
		src = ageSrcEmpty
	default:
		src = sanitize.Text(l.AgeSource)
	}
	if l.ClockSkew {
		age += "⚠"
	}
	return age, src
}

// queueETA is the time to drain, with the same words as a group's
// catch-up column: "behind" when the queue is not gaining (growing or
// stalled), "steady" when balanced with messages waiting.
func queueETA(q backends.Queue, l lag.QueueLag) (string, float64) {
	depth, known := q.Total()
	switch {
	case q.Type == backends.QueueStream:
		return "—", unknown
	case known && depth == 0:
		return "0s", 0
	case l.ETA != nil:
		return durations.Format(*l.ETA), l.ETA.Seconds()
	case l.Status == lag.QueueGrowing || l.Status == lag.QueueStalled:
		return "behind", 1e18
	}
	// OK with messages waiting and a drain rate that matches publishing:
	// the backlog neither grows nor shrinks.
	if drain, ok := q.DrainRate(); ok && known && drain > 0 && q.PublishRate != nil && l.Status == lag.QueueOK {
		return "steady", 1e17
	}
	return "?", unknown
}

func optCount(p *int64) (string, float64) {
	if p == nil {
		return "?", unknown
	}
	return strconv.FormatInt(*p, 10), float64(*p)
}

func optRate(p *float64) (string, float64) {
	if p == nil {
		return "?", unknown
	}
	r := *p
	switch {
	case r >= 10000:
		return strconv.FormatFloat(r/1000, 'f', 0, 64) + "k", r
	case r >= 100:
		return strconv.FormatFloat(r, 'f', 0, 64), r
	}
	return strconv.FormatFloat(r, 'f', 1, 64), r
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// queuesPage lists every queue, worst age first.
type queuesPage struct{ tablePage }

func newQueues(env PageEnv) Page {
	p := &queuesPage{}
	p.self = p
	p.env, p.title = env, "queues"
	p.tbl = table.New(queueColumns(), env.Styles)
	p.tbl.SetSort(colQAge, true)
	p.tbl.SetEmpty("no queues")
	p.rows, p.async = queueRows, true
	p.enter = func(r table.Row) tea.Cmd { return Open("queue", r.ID) }
	p.header = func(s *Snapshot, w int) []string { return reducedLines(env.Styles, s, w, 2) }
	p.headerLines = func(h int) int { return min(2, max(0, h-6)) }
	return p
}

// View says plainly when the context is not RabbitMQ.
func (p *queuesPage) View() string {
	if p.snap != nil && p.snap.RabbitMQ == nil {
		return p.env.Styles.Muted.Render("  queues are RabbitMQ's; this is a Kafka context (c: consumer groups)")
	}
	return p.tablePage.View()
}

// reducedLines says what reduced mode (no management API) cannot show, in
// at most n lines; nothing in management mode.
func reducedLines(st *styles.Styles, s *Snapshot, w, n int) []string {
	r := s.RabbitMQ
	if r == nil || !r.Reduced() {
		return nil
	}
	why := "no management API"
	if len(r.Missing) > 0 {
		why = r.Missing[0]
	}
	out := []string{fit(st.Levels[styles.Warn].Render("REDUCED MODE: "+sanitize.Text(why)), w)}
	if n > 1 {
		out = append(out, fit(st.Muted.Render("unknown (?): unacked, rates, utilisation, ages, types, wiring; only configured queues are listed"), w))
	}
	return out
}

// queueNames completes ":queue NAME".
func queueNames(s *Snapshot) []string {
	if s == nil || s.RabbitMQ == nil {
		return nil
	}
	out := make([]string, 0, len(s.RabbitMQ.Queues))
	for _, q := range s.RabbitMQ.Queues {
		out = append(out, sanitize.Text(q.Queue.Name))
	}
	return out
}

// queueOverview is the overview's form on a RabbitMQ context: the server
// at a glance above every queue, worst age first. overviewPage defers to
// it once a RabbitMQ snapshot arrives (so esc, the root check and the
// breadcrumbs keep treating it as the overview).
type queueOverview struct{ tablePage }

func newQueueOverview(env PageEnv) *queueOverview {
	p := &queueOverview{}
	p.self = p
	p.env, p.title = env, "overview"
	p.tbl = table.New(queueColumns(), env.Styles)
	p.tbl.SetSort(colQAge, true)
	p.tbl.SetEmpty("no queues")
	p.rows, p.async = queueRows, true
	p.header = p.summary
	p.headerLines = func(h int) int { return min(9, max(0, h-6)) }
	p.enter = func(r table.Row) tea.Cmd { return Open("queue", r.ID) }
	return p
}

// summary is the RabbitMQ server at a glance.
func (p *queueOverview) summary(s *Snapshot, w int) []string {
	st := p.env.Styles
	r := s.RabbitMQ
	label := func(l string) string { return st.Label.Render(fmt.Sprintf("%-9s", l)) }
	var out []string

	// Server and nodes.
	var parts []string
	if r.ClusterName != "" {
		parts = append(parts, sanitize.Text(r.ClusterName))
	}
	if r.Version != "" {
		parts = append(parts, "RabbitMQ "+sanitize.Text(r.Version))
	}
	switch {
	case len(r.Nodes) > 0:
		up := 0
		for _, n := range r.Nodes {
			if n.Running {
				up++
			}
		}
		txt := fmt.Sprintf("%d/%d nodes running", up, len(r.Nodes))
		if up < len(r.Nodes) {
			txt = st.Levels[styles.Bad].Render(txt)
		}
		parts = append(parts, txt)
	case r.NodesErr != "":
		parts = append(parts, st.Levels[styles.Warn].Render("nodes unknown: "+sanitize.Text(r.NodesErr)))
	case r.Reduced():
		parts = append(parts, st.Muted.Render("nodes unknown (reduced mode)"))
	}
	if r.AMQPAddr != "" {
		parts = append(parts, "amqp "+sanitize.Text(r.AMQPAddr))
	}
	out = append(out, label("server")+strings.Join(parts, " · "))
	if line := nodeProblems(r); line != "" {
		out = append(out, label("nodes")+st.Levels[styles.Bad].Render(sanitize.Text(line)))
	}
	if r.Reduced() {
		for _, l := range reducedLines(st, s, w-9, 1) {
			out = append(out, label("mode")+l)
		}
	}

	// Queues by status.
	var counts [4]int
	breaches := 0
	for _, q := range r.Queues {
		if int(q.Lag.Status) < len(counts) {
			counts[q.Lag.Status]++
		}
		if q.Lag.Breach {
			breaches++
		}
	}
	qp := []string{plural(len(r.Queues), "queue")}
	for _, stt := range []lag.QueueStatus{lag.QueueStalled, lag.QueueGrowing, lag.QueueDraining} {
		if n := counts[stt]; n > 0 {
			txt := fmt.Sprintf("%d %s", n, stt)
			lv := styles.Warn
			if stt == lag.QueueStalled {
				lv = styles.Bad
			}
			if stt == lag.QueueDraining {
				lv = styles.Normal
			}
			qp = append(qp, st.Levels[lv].Render(txt))
		}
	}
	if breaches > 0 {
		qp = append(qp, st.Levels[styles.Bad].Render(fmt.Sprintf("%d over SLO", breaches)))
	}
	out = append(out, label("queues")+strings.Join(qp, " · "))

	// Stalled queues: messages but nobody consuming or acknowledging.
	// DLQs are left out: nobody consuming a DLQ is normal (its depth is
	// on the DLQs line).
	var stalled []string
	for _, q := range r.Queues {
		if q.Lag.Status == lag.QueueStalled && q.DLQFound == "" {
			stalled = append(stalled, fmt.Sprintf("%s (%s)", sanitize.Text(q.Queue.Name), sanitize.Text(q.Lag.Reason)))
		}
	}
	if len(stalled) == 0 {
		out = append(out, label("stalled")+st.Muted.Render("none"))
	} else {
		if len(stalled) > 2 {
			stalled = append(stalled[:2], fmt.Sprintf("+%d more", len(stalled)-2))
		}
		out = append(out, label("stalled")+st.Levels[styles.Bad].Render(strings.Join(stalled, " · ")))
	}

	// DLQs: queues that receive dead letters, deepest first.
	out = append(out, label("DLQs")+p.dlqLine(r))
	if len(r.Warnings) > 0 {
		out = append(out, label("warnings")+st.Levels[styles.Warn].Render(sanitize.Text(r.Warnings[0])))
	}
	out = append(out, "", st.Title.Render("Queues, worst age first"))
	for i := range out {
		if ansi.StringWidth(out[i]) > w {
			out[i] = ansi.Truncate(out[i], w, "…")
		}
	}
	return out
}

// nodeProblems lists stopped nodes, resource alarms (they block every
// publisher) and partitions, or "".
func nodeProblems(r *monitor.RabbitMQ) string {
	var parts []string
	for _, n := range r.Nodes {
		switch {
		case !n.Running:
			parts = append(parts, n.Name+" not running")
		case n.MemAlarm && n.DiskAlarm:
			parts = append(parts, n.Name+" memory and disk alarms: publishers blocked")
		case n.MemAlarm:
			parts = append(parts, n.Name+" memory alarm: publishers blocked")
		case n.DiskAlarm:
			parts = append(parts, n.Name+" disk alarm: publishers blocked")
		}
		if len(n.Partitions) > 0 {
			parts = append(parts, n.Name+" partitioned from "+strings.Join(n.Partitions, ","))
		}
	}
	return strings.Join(parts, " · ")
}

// dlqLine is the DLQs with their depth ("?" when not known yet).
func (p *queueOverview) dlqLine(r *monitor.RabbitMQ) string {
	st := p.env.Styles
	type dd struct {
		name  string
		depth int64
		known bool
	}
	var ds []dd
	for _, d := range r.DLQs {
		x := dd{name: d.Name}
		if q, ok := r.Queue(d.Vhost, d.Name); ok {
			x.depth, x.known = q.Queue.Total()
		}
		ds = append(ds, x)
	}
	if len(ds) == 0 {
		if r.DLQErr != "" {
			return st.Levels[styles.Warn].Render(sanitize.Text(r.DLQErr))
		}
		if r.Reduced() {
			return st.Muted.Render("none configured (reduced mode finds DLQs only in redrive.dlqs)")
		}
		return st.Muted.Render("none found (no queue has a dead-letter exchange wired to a queue)")
	}
	sort.SliceStable(ds, func(i, j int) bool {
		if ds[i].known != ds[j].known {
			return ds[i].known
		}
		return ds[i].depth > ds[j].depth
	})
	var parts []string
	for _, d := range ds {
		n := "?"
		if d.known {
			n = strconv.FormatInt(d.depth, 10)
		}
		txt := sanitize.Text(d.name) + " " + n
		if d.known && d.depth > 0 {
			txt = st.Levels[styles.Warn].Render(txt)
		}
		parts = append(parts, txt)
	}
	return strings.Join(parts, " · ")
}

// updateQueues is the overview's hook: once a RabbitMQ snapshot arrives
// the overview defers every message to its queue form. ok is false while
// the overview is Kafka's.
func (p *overviewPage) updateQueues(msg tea.Msg) (tea.Cmd, bool) {
	if p.queues == nil {
		s, isSnap := msg.(SnapshotMsg)
		if !isSnap || s.Snap == nil || s.Snap.RabbitMQ == nil {
			return nil, false
		}
		p.queues = newQueueOverview(p.env)
		p.queues.Update(tea.WindowSizeMsg{Width: p.width, Height: p.height})
	}
	_, cmd := p.queues.Update(msg)
	return cmd, true
}

// View, KeyBindings and CapturesKey follow the overview's current form.
func (p *overviewPage) View() string {
	if p.queues != nil {
		return p.queues.View()
	}
	return p.tablePage.View()
}

func (p *overviewPage) KeyBindings() []key.Binding {
	if p.queues != nil {
		return p.queues.KeyBindings()
	}
	return p.tablePage.KeyBindings()
}

func (p *overviewPage) CapturesKey(msg tea.KeyMsg) bool {
	if p.queues != nil {
		return p.queues.CapturesKey(msg)
	}
	return p.tablePage.CapturesKey(msg)
}

// queueCounterparts are the pages a RabbitMQ context opens instead of a
// Kafka one (":dlq" and ":plans" open the RabbitMQ dead-letter pages that
// tui/dlq registers); kafkaOnly pages have no counterpart and say so.
var (
	queueCounterparts = map[string]string{"groups": "queues", "group": "queue", "dlq": "queue-dlq", "plans": "queue-plans"}
	kafkaOnly         = map[string]string{
		"topics": "topics", "topic": "topics", "configs": "topic configs",
		"brokers": "brokers (the overview lists RabbitMQ's nodes)", "members": "group members",
	}
)

// forQueues maps a page name on a RabbitMQ context: the queue page to
// open instead, or a reason the page does not apply. Kafka contexts keep
// the name.
func forQueues(rabbit bool, name string) (string, string) {
	if !rabbit {
		return name, ""
	}
	if spec, ok := lookupPage(name); ok {
		name = spec.Name
	}
	if c, ok := queueCounterparts[name]; ok {
		return c, ""
	}
	if what, ok := kafkaOnly[name]; ok {
		return "", what + ": Kafka only; this is a RabbitMQ context (c or :queues lists queues)"
	}
	return name, ""
}

// queueCrumbs is the breadcrumb line's right side on a RabbitMQ context.
func queueCrumbs(r *monitor.RabbitMQ) string {
	var parts []string
	if r.Reduced() {
		parts = append(parts, "REDUCED")
	} else {
		parts = append(parts, plural(len(r.Nodes), "node"))
	}
	parts = append(parts, plural(len(r.Queues), "queue"), plural(len(r.DLQs), "DLQ"))
	return strings.Join(parts, " · ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// fmtTime is a timestamp for the queue page (UTC, to the second).
func fmtTime(t *time.Time) string {
	if t == nil {
		return "?"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// globalKeysFor describes the global page keys as they act on a RabbitMQ
// context (c opens the queues; t and b are Kafka pages), so help says
// what the keys do here. Kafka snapshots keep the bindings as they are.
func globalKeysFor(s *Snapshot, bs []key.Binding) []key.Binding {
	if s == nil || s.RabbitMQ == nil {
		return bs
	}
	out := make([]key.Binding, len(bs))
	for i, b := range bs {
		h := b.Help()
		switch h.Key {
		case "c":
			b.SetHelp(h.Key, "queues")
		case "t", "b":
			b.SetHelp(h.Key, h.Desc+" (Kafka only)")
		}
		out[i] = b
	}
	return out
}
