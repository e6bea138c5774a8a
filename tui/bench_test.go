package tui

import (
	"fmt"
	"sort"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
)

// bigSnapshot is a cluster with one 10,000-partition topic consumed by one
// group: a refresh carries 10,000 partition-lag rows.
func bigSnapshot(n int) *monitor.Snapshot {
	s := fixtureSnapshot(1)
	t := monitor.Topic{Name: "big", ReplicationFactor: 3, MinISR: 2, Configs: map[string]string{}}
	g := monitor.Group{Members: []backends.Member{{ID: "m1", ClientID: "big-consumer", Host: "/10.0.0.9"}}}
	g.Group, g.State, g.SLO, g.Status = "big-group", "Stable", 5*time.Minute, lag.LAGGING
	for p := int32(0); p < int32(n); p++ {
		t.Partitions = append(t.Partitions, backends.Partition{Topic: "big", Partition: p, Leader: p % 3, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1, 2}, HighWatermark: 100000 + int64(p)})
		t.Health = append(t.Health, lag.PartitionHealth{Topic: "big", Partition: p, Replicas: 3, ISR: 3, MinISR: 2})
		t.Rates = append(t.Rates, lag.PartitionRate{Topic: "big", Partition: p, Rate: 1, Known: true})
		l := int64(p % 900)
		g.Partitions = append(g.Partitions, lag.PartitionLag{Topic: lag.Intern("big"), Partition: p, Committed: 100000 + int64(p) - l, End: 100000 + int64(p), Lag: l,
			Age: time.Duration(l) * time.Second, AgeKnown: true, Status: lag.Status(p % 4), Owner: lag.Intern("m1"), ETA: time.Minute, ETAKnown: true,
			TimeToLoss: 70 * time.Hour, TimeToLossKnown: true})
		g.TotalLag += l
	}
	g.MaxAge, g.MaxAgeKnown = 899*time.Second, true
	s.Topics = append(s.Topics, t)
	s.Groups = append(s.Groups, g)
	sort.Slice(s.Groups, func(i, j int) bool { return s.Groups[i].Group < s.Groups[j].Group })
	return s
}

// BenchmarkKeyToRender measures the time from a key message to its rendered
// frame while refresh results of 10,000 partitions keep arriving, on the
// group page of a 10,000-partition group at 200x50.
//
// Each iteration delivers a refresh (as the refresh loop would), then a key
// (cursor down) and renders; the refresh's row building runs concurrently
// in its tea.Cmd goroutine, as under bubbletea, and its result is applied
// before the next key. Reported:
//
//	key-ns   key message -> frame rendered, right behind a refresh message
//	key2-ns  key message -> frame rendered, right behind the rows result
//	apply-ns Update time of the refresh message plus the rows result
//
// "sync" is the baseline in the same run: rows built inside Update (what
// the page did before building moved into a tea.Cmd).
//
//	go test ./tui/ -run '^$' -bench KeyToRender -benchmem
func BenchmarkKeyToRender(b *testing.B) {
	lipgloss.SetColorProfile(termenv.TrueColor)
	b.Cleanup(func() { lipgloss.SetColorProfile(termenv.Ascii) })
	snap := bigSnapshot(10000)
	for _, mode := range []string{"async", "sync"} {
		b.Run(mode+"/partitions=10000/200x50", func(b *testing.B) {
			m, _ := newTestModel(b, 200, 50, func(o *Options) {
				o.Start = "group"
				o.Source = &fakeSource{snap: func(int) *monitor.Snapshot { return snap }}
			})
			m.stack = m.stack[:0]
			run(m, m.pushEntry(m.newEntry("group", []string{"big-group"})))
			gp := m.top().page.(*groupPage)
			gp.async = mode == "async"
			down := tea.KeyMsg{Type: tea.KeyDown}
			var keyNs, key2Ns, applyNs time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.seq++
				t0 := time.Now()
				_, cmd := m.Update(refreshedMsg{gen: m.gen, seq: m.seq, snap: snap})
				m.refreshing = true
				applied := time.Since(t0)
				// The rows are built on another goroutine meanwhile.
				done := make(chan tea.Msg, 1)
				go func() { done <- collect(cmd) }()
				m.Update(down)
				_ = m.View()
				keyNs += time.Since(t0)

				msg := <-done
				t1 := time.Now()
				if msg != nil {
					m.Update(msg)
				}
				applied += time.Since(t1)
				m.Update(down)
				_ = m.View()
				key2Ns += time.Since(t1)
				applyNs += applied
			}
			b.ReportMetric(float64(keyNs.Nanoseconds())/float64(b.N), "key-ns")
			b.ReportMetric(float64(key2Ns.Nanoseconds())/float64(b.N), "key2-ns")
			b.ReportMetric(float64(applyNs.Nanoseconds())/float64(b.N), "apply-ns")
			if r, ok := gp.tbl.VisibleRow(0); !ok || r.ID == "" {
				b.Fatalf("no rows rendered (%s)", fmt.Sprint(gp.tbl.Len()))
			}
		})
	}
}

// collect runs cmd and returns the routed rows message, ignoring timers
// (which are off in test models) and flattening batches.
func collect(cmd tea.Cmd) tea.Msg {
	if cmd == nil {
		return nil
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			if r := collect(c); r != nil {
				return r
			}
		}
		return nil
	case routedMsg:
		return msg
	}
	return nil
}

// BenchmarkFrame is the whole console frame (breadcrumbs, group page with
// chart and a 10,000-row table, status line) at 200x50 after a keypress.
func BenchmarkFrame(b *testing.B) {
	lipgloss.SetColorProfile(termenv.TrueColor)
	b.Cleanup(func() { lipgloss.SetColorProfile(termenv.Ascii) })
	snap := bigSnapshot(10000)
	m, _ := newTestModel(b, 200, 50, func(o *Options) { o.Source = &fakeSource{snap: func(int) *monitor.Snapshot { return snap }} })
	run(m, m.open("group", []string{"big-group"}))
	down, up := tea.KeyMsg{Type: tea.KeyDown}, tea.KeyMsg{Type: tea.KeyUp}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := down
		if i%200 >= 100 {
			k = up
		}
		m.Update(k)
		_ = m.View()
	}
}
