package tui

import (
	"net"
	"slices"
	"strconv"

	"github.com/berth-dev/berth/backends"
)

// BrokerSwitch is the demo's simulated broker loss (backends/bundled.Broker
// implements it). The switch, not a page, owns which brokers are down, so
// every page and every visit shows the same state, including brokers taken
// down with `berth demo --down-broker`. The console calls it only off the UI
// goroutine (with each refresh and after each flip).
type BrokerSwitch interface {
	// Addrs lists the switch's brokers: broker i listens on Addrs()[i].
	Addrs() []string
	// Down lists the brokers simulated down.
	Down() []int32
	// SetDown takes broker id down, or brings it back.
	SetDown(id int32, down bool) error
}

// fleet is every broker the console knows of, shared by all pages: those
// the metadata listed at any refresh (one that disappears stays known, and
// is shown as MISSING) and the switch's own, with the down set as the
// switch last reported it. Changed only on the UI goroutine.
type fleet struct {
	known map[int32]backends.Broker
	down  map[int32]bool
}

func newFleet(sw BrokerSwitch) *fleet {
	f := &fleet{known: map[int32]backends.Broker{}, down: map[int32]bool{}}
	if sw == nil {
		return f
	}
	for i, addr := range sw.Addrs() {
		b := backends.Broker{ID: int32(i), Host: addr}
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if p, err := strconv.ParseInt(port, 10, 32); err == nil {
				b.Host, b.Port = host, int32(p)
			}
		}
		f.known[b.ID] = b
	}
	return f
}

// observe remembers the brokers of a snapshot.
func (f *fleet) observe(s *Snapshot) {
	if s == nil {
		return
	}
	for _, b := range s.Cluster.Brokers {
		f.known[b.ID] = b
	}
}

// setDown replaces the down set with the switch's report.
func (f *fleet) setDown(ids []int32) {
	clear(f.down)
	for _, id := range ids {
		f.down[id] = true
	}
}

// ids lists the known brokers in order.
func (f *fleet) ids() []int32 {
	out := make([]int32, 0, len(f.known))
	for id := range f.known {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// counts says how many brokers the snapshot lists as up (not simulated
// down), how many the console knows of in all, and how many are simulated
// down.
func (f *fleet) counts(s *Snapshot) (up, known, simDown int) {
	listed := map[int32]bool{}
	for _, b := range s.Cluster.Brokers {
		listed[b.ID] = true
		if !f.down[b.ID] {
			up++
		}
	}
	known = len(listed)
	for id := range f.known {
		if !listed[id] {
			known++
		}
	}
	for id := range f.down {
		simDown++
		if _, ok := f.known[id]; !ok && !listed[id] {
			known++ // down from the start: never listed
		}
	}
	return up, known, simDown
}
