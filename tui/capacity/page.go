package capacity

import (
	"context"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/backends"
	engine "github.com/berth-dev/berth/capacity"
	"github.com/berth-dev/berth/internal/sanitize"
	"github.com/berth-dev/berth/tui"
)

// Measure measures a topic ("" for all topics) on the attached cluster for
// prefill, observing the produce rate for window. cmd/berth sets it (it
// knows the Kafka backend; this package must not). When nil, or when the
// attached cluster is not Kafka, the page works without prefill.
var Measure func(ctx context.Context, c backends.Cluster, topic string, window time.Duration) (engine.Measurement, error)

// measureWindow is how long the page watches the produce rate. It stays
// well inside the console's per-operation timeout (see window below).
const measureWindow = 5 * time.Second

func init() {
	tui.RegisterPageSpec(tui.PageSpec{
		Name:     "capacity",
		Aliases:  []string{"worksheet", "cap"},
		Help:     "capacity worksheet: what a load needs (prefill: :capacity TOPIC)",
		Factory:  NewPage,
		Complete: topicNames,
	})
}

// Page adapts Model to the console's tui.Page.
type Page struct {
	Model
	autoMeasure bool
}

// NewPage builds the page; ":capacity orders" prefills from orders.
func NewPage(env tui.PageEnv) tui.Page {
	var measure MeasureFunc
	if Measure != nil && env.Do != nil {
		measure = func(topic string, gen int) tea.Cmd {
			if topic == "*" {
				topic = ""
			}
			return env.Do(func(ctx context.Context, c backends.Cluster) tea.Msg {
				m, err := Measure(ctx, c, topic, window(ctx))
				return MeasuredMsg{Gen: gen, M: m, Err: err}
			})
		}
	}
	p := &Page{Model: New(env.Styles, measure)}
	if len(env.Args) > 0 {
		p.SetTopic(env.Args[0])
		p.autoMeasure = true
	}
	if env.Size != nil {
		p.SetSize(env.Size())
	}
	return p
}

// window keeps the rate sample inside the operation's deadline, leaving
// half of it for the reads around the sample.
func window(ctx context.Context) time.Duration {
	w := measureWindow
	if dl, ok := ctx.Deadline(); ok {
		w = min(w, time.Until(dl)/2)
	}
	return max(w, time.Second)
}

// Init starts the prefill when the page was opened with a topic.
func (p *Page) Init() tea.Cmd {
	if p.autoMeasure {
		p.autoMeasure = false
		return p.StartMeasure()
	}
	return nil
}

// Update forwards to the model.
func (p *Page) Update(msg tea.Msg) (tui.Page, tea.Cmd) {
	var cmd tea.Cmd
	p.Model, cmd = p.Model.Update(msg)
	return p, cmd
}

// Title is the breadcrumb.
func (p *Page) Title() string { return "capacity" }

// KeyBindings lists the page's keys.
func (p *Page) KeyBindings() []key.Binding { return p.Model.KeyBindings() }

func topicNames(s *tui.Snapshot) []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.Topics))
	for _, t := range s.Topics {
		out = append(out, sanitize.Text(t.Name))
	}
	return out
}
