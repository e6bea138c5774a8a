package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/durations"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui/styles"
)

func init() {
	RegisterPageSpec(PageSpec{Name: "queue", Help: "one RabbitMQ queue: statistics, age, status, wiring", Factory: newQueue, Complete: queueNames})
}

// QueueDescriber is implemented by the backend handle (env.Do's Cluster)
// of a RabbitMQ source: it reads one queue in full, including a stream's
// first and last messages' publisher timestamps, which the periodic
// inventory does not read.
type QueueDescriber interface {
	DescribeQueue(ctx context.Context, vhost, name string) (backends.Queue, error)
}

// queueDetailEvery is how often the queue page re-reads a stream's extent
// (a short stream read, not free).
const queueDetailEvery = 30 * time.Second

// queuePage shows one queue: statistics, age and status, its wiring (where
// its dead letters go and the limits that make messages die), DLQ links,
// and for streams their extent. Text only; it scrolls.
type queuePage struct {
	env         PageEnv
	vhost, name string // raw; vhost "" when opened by name alone
	snap        *Snapshot

	// detail is the queue read in full (streams), loaded in a tea.Cmd;
	// detailSeq drops an older load's answer.
	detail    *backends.Queue
	detailErr string
	detailAt  time.Time
	detailSeq uint64
	loading   bool

	w, h, offset int
	keys         queuePageKeys
}

type queuePageKeys struct {
	Up, Down, PageUp, PageDown, Top, Bottom, Reset, DLQ, DeadLetters key.Binding
}

// queueDetailMsg is the answer to a detail load.
type queueDetailMsg struct {
	seq uint64
	q   backends.Queue
	err error
}

func newQueue(env PageEnv) Page {
	p := &queuePage{env: env}
	arg := strings.Join(env.Args, " ")
	if v, n, ok := strings.Cut(arg, "\x00"); ok {
		p.vhost, p.name = v, n
	} else {
		p.name = arg
	}
	p.keys = queuePageKeys{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "scroll up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "scroll down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+b", "ctrl+u"), key.WithHelp("pgup/ctrl+b", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+f", "ctrl+d", " "), key.WithHelp("pgdn/ctrl+f", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("home/g", "top")),
		Bottom:   key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end/G", "bottom")),
		DLQ:      key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "open its DLQ")),
		// On a DLQ: its classes and messages, to select into a redrive plan.
		DeadLetters: key.NewBinding(key.WithKeys("D"), key.WithHelp("D", "dead letters")),
		Reset:       key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "reset offsets (does not apply)")),
	}
	p.snap = env.Snapshot()
	return p
}

func (p *queuePage) Title() string { return sanitize.Text(p.name) }

func (p *queuePage) KeyBindings() []key.Binding {
	k := p.keys
	return []key.Binding{k.DLQ, k.DeadLetters, k.Reset, k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}
}

func (p *queuePage) Init() tea.Cmd { return p.maybeLoad() }

// lookup finds the queue by vhost and raw name, else by name in any vhost
// (":queue NAME"), else by its sanitised name.
func (p *queuePage) lookup() (monitor.QueueState, bool) {
	if p.snap == nil || p.snap.RabbitMQ == nil {
		return monitor.QueueState{}, false
	}
	qs := p.snap.RabbitMQ.Queues
	for _, match := range []func(backends.Queue) bool{
		func(q backends.Queue) bool { return q.Name == p.name && (p.vhost == "" || q.Vhost == p.vhost) },
		func(q backends.Queue) bool { return sanitize.Text(q.Name) == p.name },
	} {
		for _, q := range qs {
			if match(q.Queue) {
				return q, true
			}
		}
	}
	return monitor.QueueState{}, false
}

// maybeLoad reads a stream's extent when it is missing or old. Other
// queue types need nothing beyond the refresh.
func (p *queuePage) maybeLoad() tea.Cmd {
	q, ok := p.lookup()
	if !ok || q.Queue.Type != backends.QueueStream || p.loading {
		return nil
	}
	if !p.detailAt.IsZero() && p.snap.Observed.Sub(p.detailAt) < queueDetailEvery {
		return nil
	}
	p.loading = true
	p.detailAt = p.snap.Observed
	p.detailSeq++
	seq, vhost, name := p.detailSeq, q.Queue.Vhost, q.Queue.Name
	return p.env.Do(func(ctx context.Context, c backends.Cluster) tea.Msg {
		d, ok := c.(QueueDescriber)
		if !ok {
			return queueDetailMsg{seq: seq, err: fmt.Errorf("this backend cannot read a queue")}
		}
		qq, err := d.DescribeQueue(ctx, vhost, name)
		return queueDetailMsg{seq: seq, q: qq, err: err}
	})
}

func (p *queuePage) Update(msg tea.Msg) (Page, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.w, p.h = msg.Width, msg.Height
	case SnapshotMsg:
		p.snap = msg.Snap
		return p, p.maybeLoad()
	case queueDetailMsg:
		if msg.seq != p.detailSeq {
			return p, nil
		}
		p.loading = false
		if msg.err != nil {
			p.detailErr = msg.err.Error()
		} else {
			q := msg.q
			p.detail, p.detailErr = &q, ""
		}
	case tea.MouseMsg:
		switch msg.Button {
		case tea.MouseButtonWheelUp:
			p.scroll(-3)
		case tea.MouseButtonWheelDown:
			p.scroll(3)
		}
	case tea.KeyMsg:
		k := p.keys
		switch {
		case key.Matches(msg, k.Up):
			p.scroll(-1)
		case key.Matches(msg, k.Down):
			p.scroll(1)
		case key.Matches(msg, k.PageUp):
			p.scroll(-max(1, p.h-1))
		case key.Matches(msg, k.PageDown):
			p.scroll(max(1, p.h-1))
		case key.Matches(msg, k.Top):
			p.offset = 0
		case key.Matches(msg, k.Bottom):
			p.offset = 1 << 30
			p.scroll(0)
		case key.Matches(msg, k.Reset):
			return p, Flash(Info, resetNote)
		case key.Matches(msg, k.DLQ):
			return p, p.openDLQ()
		case key.Matches(msg, k.DeadLetters):
			return p, p.openDeadLetters()
		}
	}
	return p, nil
}

// resetNote says why offset resets do not apply to RabbitMQ.
const resetNote = "offset resets do not apply to RabbitMQ: a queue has no offsets (acked messages are gone), and stream consumers choose x-stream-offset themselves"

// openDLQ opens the queue this one dead-letters into, when it is known.
func (p *queuePage) openDLQ() tea.Cmd {
	q, ok := p.lookup()
	if !ok {
		return nil
	}
	for _, d := range p.snap.RabbitMQ.DLQs {
		for _, s := range d.Sources {
			if s == q.Queue.Name && d.Vhost == q.Queue.Vhost {
				return Open("queue", d.Vhost+"\x00"+d.Name)
			}
		}
	}
	return Flash(Info, "no DLQ found for "+sanitize.Text(q.Queue.Name)+" (no dead-letter exchange wired to a queue)")
}

// openDeadLetters opens the dead-letter pages on this queue when it is a
// DLQ, or on the DLQ it dead-letters into.
func (p *queuePage) openDeadLetters() tea.Cmd {
	q, ok := p.lookup()
	if !ok {
		return nil
	}
	for _, d := range p.snap.RabbitMQ.DLQs {
		if d.Vhost != q.Queue.Vhost {
			continue
		}
		if d.Name == q.Queue.Name {
			return Open("queue-dlq", d.Name)
		}
		for _, s := range d.Sources {
			if s == q.Queue.Name {
				return Open("queue-dlq", d.Name)
			}
		}
	}
	return Flash(Info, sanitize.Text(q.Queue.Name)+" is not a DLQ and dead-letters into none (:dlq lists the DLQs)")
}

func (p *queuePage) scroll(d int) {
	p.offset += d
	maxOff := max(0, len(p.lines())-p.h)
	p.offset = max(0, min(p.offset, maxOff))
}

func (p *queuePage) View() string {
	lines := p.lines()
	off := min(p.offset, max(0, len(lines)-p.h))
	lines = lines[off:]
	if len(lines) > p.h {
		lines = lines[:p.h]
	}
	for i := range lines {
		lines[i] = fit(lines[i], p.w)
	}
	return strings.Join(lines, "\n")
}

// lines renders the whole page (it is short: a few dozen lines).
func (p *queuePage) lines() []string {
	st := p.env.Styles
	if p.snap == nil {
		return []string{st.Muted.Render("  waiting for the first refresh…")}
	}
	if p.snap.RabbitMQ == nil {
		return []string{st.Muted.Render("  queues are RabbitMQ's; this is a Kafka context")}
	}
	qs, ok := p.lookup()
	if !ok {
		return []string{st.Levels[styles.Bad].Render("queue " + sanitize.Text(p.name) + " not found in the last refresh")}
	}
	q := qs.Queue
	if p.detail != nil && q.Type == backends.QueueStream {
		q.Stream = p.detail.Stream // the stream's extent comes from the detail read
	}
	b := &queueLines{st: st}
	queueStatusLines(b, q, qs.Lag)
	p.wiringLines(b, qs, q)
	if q.Type == backends.QueueStream {
		p.streamLines(b, q)
	}
	b.section("Offset resets")
	b.out = append(b.out, st.Muted.Render("do not apply: a queue has no offsets (acknowledged messages are gone); stream"),
		st.Muted.Render("consumers choose x-stream-offset themselves. Redrive: D (or :dlq, :plans)."))
	return b.out
}

// queueLines collects the queue page's lines: labelled values under
// section titles.
type queueLines struct {
	st  *styles.Styles
	out []string
}

func (b *queueLines) add(k, v string) {
	b.out = append(b.out, b.st.Label.Render(fmt.Sprintf("%-24s", k))+v)
}

func (b *queueLines) section(t string) { b.out = append(b.out, "", b.st.Title.Render(t)) }

// queueStatusLines is the top of the page: where the queue lives, its
// status, age, SLO, time to drain, counts and rates.
func queueStatusLines(b *queueLines, q backends.Queue, l lag.QueueLag) {
	st, add := b.st, b.add
	head := []string{"vhost " + sanitize.Text(q.Vhost), orUnknown(sanitize.Text(q.Type))}
	if q.State != "" {
		head = append(head, sanitize.Text(q.State))
	}
	if q.Node != "" {
		head = append(head, "on "+sanitize.Text(q.Node))
	}
	if q.Policy != "" {
		head = append(head, "policy "+sanitize.Text(q.Policy))
	}
	if q.Source == "passive_declare" {
		head = append(head, st.Levels[styles.Warn].Render("reduced mode: ready count and consumers only"))
	}
	b.out = append(b.out, strings.Join(head, " · "))

	status := st.Levels[queueLevel(l)].Render(queueStatusText(l)) + ": " + sanitize.Text(l.Reason)
	add("status", status)
	age, src := queueAgeText(q, l)
	switch src {
	case ageSrcPublisher:
		src = "publisher ts " + fmtTime(q.HeadPublisherTimestamp) + " (head message's timestamp property: the publisher's clock)"
	case ageSrcEstimate:
		src = "est.: ready / drain rate, not a measured age"
	case "—":
		src = "unknown: no head timestamp and no drain rate"
		if q.Type == backends.QueueQuorum {
			src = "unknown: quorum queues report no head timestamp, and there is no drain rate"
		}
	}
	if l.ClockSkew {
		src += st.Levels[styles.Warn].Render(" (publisher clock ahead: age reads 0)")
	}
	add("age", age+"  "+st.Muted.Render(src))
	slo := durations.Format(l.SLO)
	if l.Breach {
		slo = st.Levels[styles.Bad].Render(slo + " BREACHED")
	}
	add("slo", slo)
	eta, _ := queueETA(q, l)
	if l.EstimatedWait != nil && l.AgeSource != lag.AgeEstimate {
		eta += st.Muted.Render("  (estimated wait " + durations.Format(*l.EstimatedWait) + ")")
	}
	add("eta to drain", eta)

	ready, _ := optCount(q.Ready)
	unacked, _ := optCount(q.Unacked)
	total := "?"
	if t, ok := q.Total(); ok {
		total = strconv.FormatInt(t, 10)
	}
	add("messages", fmt.Sprintf("ready %s · unacked %s · total %s", ready, unacked, total))
	cons := "?"
	if q.Consumers != nil {
		cons = strconv.Itoa(*q.Consumers)
	}
	util := "?"
	if q.ConsumerUtilisation != nil {
		util = fmt.Sprintf("%.0f%%", *q.ConsumerUtilisation*100)
	}
	add("consumers", cons+" · utilisation "+util)
	pub, _ := optRate(q.PublishRate)
	dlv, _ := optRate(q.DeliverRate)
	ack, _ := optRate(q.AckRate)
	red, _ := optRate(q.RedeliverRate)
	add("rates (msg/s)", fmt.Sprintf("publish %s · deliver %s · ack %s · redeliver %s", pub, dlv, ack, red))
}

// wiringLines is the queue's dead-letter and limit arguments, and its
// place in dead-letter wiring.
func (p *queuePage) wiringLines(b *queueLines, qs monitor.QueueState, q backends.Queue) {
	st, add := b.st, b.add
	b.section("Wiring")
	w := q.Wiring
	from := func(k string) string {
		if f := w.From[k]; f != "" {
			return st.Muted.Render("  (" + sanitize.Text(f) + ")")
		}
		return ""
	}
	unknownWiring := q.Source == "passive_declare"
	str := func(v *string, k string, empty string) string {
		switch {
		case unknownWiring:
			return "?"
		case v == nil:
			return "-"
		case *v == "":
			return empty + from(k)
		}
		return sanitize.Text(*v) + from(k)
	}
	n := func(v *int64, k, unit string) string {
		switch {
		case unknownWiring:
			return "?"
		case v == nil:
			return "-"
		}
		return strconv.FormatInt(*v, 10) + unit + from(k)
	}
	ttl := n(w.MessageTTLMs, "message_ttl_ms", " ms")
	if w.MessageTTLMs != nil && !unknownWiring {
		ttl = durations.Format(time.Duration(*w.MessageTTLMs)*time.Millisecond) + " (" + strconv.FormatInt(*w.MessageTTLMs, 10) + " ms)" + from("message_ttl_ms")
	}
	add("dead-letter exchange", str(w.DeadLetterExchange, "dead_letter_exchange", `"" (default exchange)`))
	add("dead-letter routing key", str(w.DeadLetterRoutingKey, "dead_letter_routing_key", `""`))
	add("delivery limit", n(w.DeliveryLimit, "delivery_limit", ""))
	add("message ttl", ttl)
	add("max length", n(w.MaxLength, "max_length", " messages"))
	add("max length bytes", n(w.MaxLengthBytes, "max_length_bytes", " bytes"))
	add("overflow", str(w.Overflow, "overflow", `""`))
	if dl := p.deadLettersInto(q); dl != "" {
		add("dead letters go to", dl)
	}
	if len(qs.DeadLetters) > 0 || qs.DLQFound != "" {
		srcs := make([]string, len(qs.DeadLetters))
		for i, s := range qs.DeadLetters {
			srcs[i] = sanitize.Text(s)
		}
		txt := "this is a DLQ (" + sanitize.Text(qs.DLQFound) + ")"
		if len(srcs) > 0 {
			txt += ": dead letters from " + strings.Join(srcs, ", ")
		}
		add("receives dead letters", st.Levels[styles.Warn].Render(txt)+st.Muted.Render("  (D: classes, messages, redrive)"))
	}
}

// streamLines is a stream's size, retention, offsets and the timestamps of
// its first and last messages (read on demand).
func (p *queuePage) streamLines(b *queueLines, q backends.Queue) {
	st, add := b.st, b.add
	b.section("Stream")
	si := q.Stream
	if si == nil {
		si = &backends.StreamInfo{}
	}
	size, _ := optCount(si.Messages)
	add("size", size+" messages "+st.Muted.Render("(approximate: offset-based)"))
	if si.MaxAge != "" || si.MaxLengthBytes != nil {
		ret := []string{}
		if si.MaxAge != "" {
			ret = append(ret, "max age "+sanitize.Text(si.MaxAge))
		}
		if si.MaxLengthBytes != nil {
			ret = append(ret, "max "+strconv.FormatInt(*si.MaxLengthBytes, 10)+" bytes")
		}
		add("retention", strings.Join(ret, " · "))
	}
	first, _ := optCount(si.FirstOffset)
	last, _ := optCount(si.LastOffset)
	add("offsets", "first "+first+" · last "+last+st.Muted.Render(" (last chunk)"))
	ft, lt := fmtTime(si.FirstTimestamp), fmtTime(si.LastTimestamp)
	note := st.Muted.Render("  (publisher timestamps)")
	switch {
	case p.loading && p.detail == nil:
		note = st.Muted.Render("  reading the stream's first and last messages…")
	case p.detailErr != "":
		note = st.Levels[styles.Warn].Render("  could not read: " + sanitize.Text(p.detailErr))
	}
	add("first / last message", ft+" / "+lt+note)
}

// deadLettersInto names the DLQs this queue's dead letters reach.
func (p *queuePage) deadLettersInto(q backends.Queue) string {
	var out []string
	for _, d := range p.snap.RabbitMQ.DLQs {
		if d.Vhost != q.Vhost {
			continue
		}
		for _, s := range d.Sources {
			if s == q.Name {
				out = append(out, sanitize.Text(d.Name))
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, ", ") + p.env.Styles.Muted.Render("  (d opens it, D its dead letters)")
}
