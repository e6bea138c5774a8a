package lag

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// step is one scripted observation: seconds after t0, committed, end, and
// the age (seconds) the probe would read (-1: unknown).
type step struct {
	sec       int
	committed int64
	end       int64
	age       int
}

// run plays a script through the engine the way the monitor does: each
// step's result is stored as history for the next.
func run(t *testing.T, steps []step, owner string, logStart int64) PartitionLag {
	t.Helper()
	cfg := Config{Window: time.Minute, SteadyAge: 10 * time.Second}
	var hist []Sample
	var last PartitionLag
	for _, s := range steps {
		now := t0.Add(time.Duration(s.sec) * time.Second)
		in := PartitionInput{Topic: Intern("orders"), Partition: 0, Committed: s.committed, LogStart: logStart, End: s.end, History: hist, Owner: Intern(owner), SLO: time.Minute}
		if s.age >= 0 {
			in.Probe = Probe{Known: true, Found: true, Timestamp: now.Add(-time.Duration(s.age) * time.Second), Type: backends.CreateTime}
		}
		last = Evaluate(in, now, cfg)
		hist = append(hist, Sample{At: now, Committed: s.committed, LogStart: logStart, End: s.end, Age: last.Age, AgeKnown: last.AgeKnown})
	}
	return last
}

func TestStatusScripts(t *testing.T) {
	cases := []struct {
		name  string
		owner string
		start int64
		steps []step
		want  Status
	}{
		{"caught up", "m1", 0, []step{{0, 100, 100, 0}, {5, 150, 150, 0}}, OK},
		{"keeping up with small age", "m1", 0, []step{{0, 100, 120, 3}, {5, 150, 170, 4}, {10, 200, 230, 5}}, OK},
		{"catching up", "m1", 0, []step{{0, 100, 1000, 300}, {30, 600, 1100, 200}, {60, 1000, 1200, 100}}, OK},
		{"lagging: commits move, lag grows", "m1", 0, []step{{0, 100, 1000, 60}, {30, 200, 2000, 80}, {60, 300, 3000, 100}}, LAGGING},
		{"lagging: lag shrinks but age grows", "m1", 0, []step{{0, 100, 1000, 60}, {30, 500, 1300, 80}, {60, 900, 1500, 100}}, LAGGING},
		{"stalled: owner present, commit fixed", "m1", 0, []step{{0, 100, 1000, 60}, {30, 100, 1100, 90}, {60, 100, 1200, 120}}, STALLED},
		{"stalled without new data", "m1", 0, []step{{0, 100, 101, 60}, {30, 100, 101, 90}}, STALLED},
		{"stopped: no owner", "", 0, []step{{0, 100, 1000, 60}, {30, 100, 1100, 90}}, STOPPED},
		{"stopped on one sample", "", 0, []step{{0, 100, 1000, 60}}, STOPPED},
		{"unowned but committing (manual assignment) is judged on movement", "", 0, []step{{0, 100, 1000, 60}, {30, 200, 2000, 90}}, LAGGING},
		{"rewind", "m1", 0, []step{{0, 900, 1000, 5}, {30, 100, 1000, 500}}, REWIND},
		{"rewind recovered", "m1", 0, []step{{0, 900, 1000, 5}, {20, 100, 1000, 500}, {40, 1000, 1000, 0}}, OK},
		{"rewind outside the window forgotten", "m1", 0, []step{{0, 900, 1000, 5}, {10, 100, 1000, 500}, {80, 150, 1000, 490}, {100, 200, 1000, 480}}, OK},
		{"expired", "m1", 500, []step{{0, 100, 1000, 60}, {30, 100, 1000, 90}}, EXPIRED},
		{"caught up earlier in window: new data just arrived", "m1", 0, []step{{0, 100, 100, 0}, {30, 100, 101, 4}}, OK},
		{"caught up earlier in window, then stuck past the steady age", "m1", 0, []step{{0, 100, 100, 0}, {30, 100, 101, 40}}, STALLED},
		{"one sample, behind: still judging", "m1", 0, []step{{0, 100, 1000, 600}}, JUDGING},
		{"two samples closer than the commit interval: still judging", "m1", 0, []step{{0, 100, 1000, 600}, {2, 100, 1000, 602}}, JUDGING},
		{"two samples closer than the commit interval, commit moved", "m1", 0, []step{{0, 100, 1000, 600}, {2, 110, 1100, 602}}, LAGGING},
		{"one sample, young backlog", "m1", 0, []step{{0, 100, 1000, 3}}, OK},
		{"no commit, owner never commits", "m1", 0, []step{{0, NoCommit, 50, 100}, {30, NoCommit, 60, 130}}, STALLED},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := run(t, c.steps, c.owner, c.start)
			if got.Status != c.want {
				t.Fatalf("status %s, want %s (row %+v)", got.Status, c.want, got)
			}
		})
	}
}

func TestAgeAndLagDefinitions(t *testing.T) {
	now := t0
	in := PartitionInput{Topic: Intern("t"), Committed: 40, LogStart: 10, End: 100, Owner: Intern("m"),
		Probe: Probe{Known: true, Found: true, Timestamp: now.Add(-90 * time.Second), Type: backends.LogAppendTime}}
	r := Evaluate(in, now, Config{})
	if r.Lag != 60 || r.Age != 90*time.Second || !r.AgeKnown || r.TimestampType != backends.LogAppendTime || r.Lost != 0 {
		t.Fatalf("lag %d age %s known %v type %s lost %d", r.Lag, r.Age, r.AgeKnown, r.TimestampType, r.Lost)
	}
	// Expired: committed below log start counts from the log start and
	// reports what retention deleted.
	in.Committed, in.LogStart = 5, 30
	r = Evaluate(in, now, Config{})
	if r.Status != EXPIRED || r.Lost != 25 || r.Lag != 70 {
		t.Fatalf("expired: status %s lost %d lag %d", r.Status, r.Lost, r.Lag)
	}
	// No commit: counted from log start, not expired.
	in.Committed = NoCommit
	r = Evaluate(in, now, Config{})
	if r.Status == EXPIRED || r.Lost != 0 || r.Lag != 70 {
		t.Fatalf("no commit: status %s lost %d lag %d", r.Status, r.Lost, r.Lag)
	}
	// Caught up: age 0 whatever the probe says.
	in.Committed = 100
	r = Evaluate(in, now, Config{})
	if r.Lag != 0 || r.Age != 0 || !r.AgeKnown || !r.ETAKnown || r.ETA != 0 {
		t.Fatalf("caught up: %+v", r)
	}
	// Only transaction markers past the position: not lag.
	in.Committed, in.Probe = 98, Probe{Known: true, Found: false}
	r = Evaluate(in, now, Config{})
	if r.Lag != 0 || r.Age != 0 || r.Status != OK {
		t.Fatalf("markers: lag %d age %s status %s", r.Lag, r.Age, r.Status)
	}
	// Unknown timestamp: lag stays, age unknown.
	in.Probe = Probe{}
	r = Evaluate(in, now, Config{})
	if r.Lag != 2 || r.AgeKnown {
		t.Fatalf("unknown: lag %d known %v", r.Lag, r.AgeKnown)
	}
}

func TestClockSkew(t *testing.T) {
	in := PartitionInput{Committed: 0, End: 10, Owner: Intern("m"),
		Probe: Probe{Known: true, Found: true, Timestamp: t0.Add(time.Minute), Type: backends.CreateTime}}
	r := Evaluate(in, t0, Config{})
	if r.Age != 0 || !r.ClockSkew {
		t.Fatalf("future timestamp: age %s skew %v", r.Age, r.ClockSkew)
	}
	in.Probe.Timestamp = t0.Add(2 * time.Second) // within tolerance
	r = Evaluate(in, t0, Config{})
	if r.Age != 0 || r.ClockSkew {
		t.Fatalf("small skew: age %s skew %v", r.Age, r.ClockSkew)
	}
}

func TestRatesETAAndTimeToLoss(t *testing.T) {
	hist := []Sample{{At: t0, Committed: 1000, End: 2000}}
	now := t0.Add(10 * time.Second)
	in := PartitionInput{Committed: 1500, End: 2200, History: hist, Owner: Intern("m"), Deletes: true, Retention: time.Hour,
		Probe: Probe{Known: true, Found: true, Timestamp: now.Add(-50 * time.Minute)}}
	r := Evaluate(in, now, Config{RetentionMargin: 15 * time.Minute})
	if r.ProduceRate != 20 || r.ConsumeRate != 50 {
		t.Fatalf("rates %v %v", r.ProduceRate, r.ConsumeRate)
	}
	// lag 700 at net 30/s.
	if !r.ETAKnown || math.Abs(r.ETA.Seconds()-700.0/30) > 0.01 || r.FallingBehind {
		t.Fatalf("eta %s known %v", r.ETA, r.ETAKnown)
	}
	if !r.TimeToLossKnown || r.TimeToLoss != 10*time.Minute || !r.RetentionRisk {
		t.Fatalf("time to loss %s risk %v", r.TimeToLoss, r.RetentionRisk)
	}
	// Consuming slower than producing: falling behind, no ETA.
	in.Committed = 1100
	r = Evaluate(in, now, Config{})
	if r.ETAKnown || !r.FallingBehind {
		t.Fatalf("falling behind: eta %s known %v fb %v", r.ETA, r.ETAKnown, r.FallingBehind)
	}
	// Compact-only topics have no time to loss.
	in.Deletes = false
	if r := Evaluate(in, now, Config{}); r.TimeToLossKnown {
		t.Fatal("time to loss on a non-delete topic")
	}
}

func TestRollUpUsesMaxAgeAndSumLag(t *testing.T) {
	rows := []PartitionLag{
		{Topic: Intern("b"), Partition: 0, Lag: 10, Age: 2 * time.Second, AgeKnown: true, Status: OK},
		{Topic: Intern("a"), Partition: 1, Lag: 5, Age: 600 * time.Second, AgeKnown: true, Status: STALLED},
		{Topic: Intern("a"), Partition: 0, Lag: 0, AgeKnown: true, Status: OK},
		{Topic: Intern("a"), Partition: 2, Lag: 7, Status: LAGGING},
	}
	members := []backends.Member{{ID: "m1", Assigned: []backends.TopicPartition{{Topic: "a", Partition: 0}}}, {ID: "m2"}}
	g := RollUp(GroupInfo{Name: "g", State: "Stable", Members: members, SLO: 5 * time.Minute}, rows, Config{})
	if g.Status != STALLED || g.TotalLag != 22 || g.MaxAge != 600*time.Second || g.MaxAgeTopic != "a" || g.MaxAgePartition != 1 {
		t.Fatalf("roll-up %+v", g)
	}
	if !g.Breach || g.AgesUnknown != 1 || g.Counts[OK] != 2 || g.Counts[STALLED] != 1 {
		t.Fatalf("breach %v unknown %d counts %v", g.Breach, g.AgesUnknown, g.Counts)
	}
	// median of (0, 2s, 600s) is 2s: the stuck partition is 300x the median.
	if math.Abs(g.AgeSkew-300) > 0.001 {
		t.Fatalf("age skew %v", g.AgeSkew)
	}
	if len(g.IdleMembers) != 1 || g.IdleMembers[0] != "m2" {
		t.Fatalf("idle %v", g.IdleMembers)
	}
	if g.Partitions[0].Topic.String() != "a" || g.Partitions[0].Partition != 0 || g.Partitions[3].Topic.String() != "b" {
		t.Fatalf("rows not sorted: %+v", g.Partitions)
	}
}

func TestTopicSkewNamesHotPartition(t *testing.T) {
	rates := []PartitionRate{
		{Topic: "t", Partition: 0, Leader: 1, Rate: 10, Known: true},
		{Topic: "t", Partition: 1, Leader: 2, Rate: 12, Known: true},
		{Topic: "t", Partition: 2, Leader: 3, Rate: 11, Known: true},
		{Topic: "t", Partition: 3, Leader: 1, Rate: 80, Known: true},
	}
	s := TopicSkewOf("t", rates, Config{})
	if len(s.Hot) != 1 || s.Hot[0].Partition != 3 || math.Abs(s.Ratio-80/11.5) > 1e-9 {
		t.Fatalf("skew %+v", s)
	}
	// All traffic on one partition: median 0, unbounded, that one is hot.
	rates = []PartitionRate{{Partition: 0, Rate: 0, Known: true}, {Partition: 1, Rate: 50, Known: true}, {Partition: 2, Rate: 0, Known: true}}
	s = TopicSkewOf("t", rates, Config{})
	if !s.Unbounded || len(s.Hot) != 1 || s.Hot[0].Partition != 1 || s.Hot[0].Share != 1 {
		t.Fatalf("one-partition skew %+v", s)
	}
	// Even spread: nothing hot.
	rates = []PartitionRate{{Partition: 0, Rate: 50, Known: true}, {Partition: 1, Rate: 50, Known: true}}
	if s = TopicSkewOf("t", rates, Config{}); len(s.Hot) != 0 || s.Ratio != 1 {
		t.Fatalf("even %+v", s)
	}
	// Too quiet to judge.
	rates = []PartitionRate{{Partition: 0, Rate: 0, Known: true}, {Partition: 1, Rate: 0.5, Known: true}}
	if s = TopicSkewOf("t", rates, Config{}); len(s.Hot) != 0 {
		t.Fatalf("quiet %+v", s)
	}
}

func TestBrokerShares(t *testing.T) {
	rates := []PartitionRate{
		{Partition: 0, Leader: 1, Rate: 30, Known: true},
		{Partition: 1, Leader: 1, Rate: 10, Known: true},
		{Partition: 2, Leader: 2, Rate: 60, Known: true},
		{Partition: 3, Leader: -1},
	}
	b := BrokerShares([]int32{1, 2, 3}, rates)
	if len(b) != 3 || b[0].Leaders != 2 || b[0].ProduceShare != 0.4 || b[1].ProduceShare != 0.6 || b[2].Leaders != 0 || math.Abs(b[0].LeaderShare-2.0/3) > 1e-9 {
		t.Fatalf("shares %+v", b)
	}
}

func TestClassifyISR(t *testing.T) {
	p := func(leader int32, replicas, isr int) backends.Partition {
		bp := backends.Partition{Topic: "t", Leader: leader, LeaderEpoch: 7}
		for i := 0; i < replicas; i++ {
			bp.Replicas = append(bp.Replicas, int32(i))
		}
		for i := 0; i < isr; i++ {
			bp.ISR = append(bp.ISR, int32(i))
		}
		return bp
	}
	cases := []struct {
		p       backends.Partition
		min     int
		want    ISRClass
		blocked bool
	}{
		{p(0, 3, 3), 2, Healthy, false},
		{p(0, 3, 2), 1, UnderReplicated, false},
		{p(0, 3, 2), 2, AtMinISR, false},
		{p(0, 3, 1), 2, UnderMinISR, true},
		{p(-1, 3, 0), 2, Offline, true},
		{p(0, 1, 1), 1, Healthy, false},
	}
	for i, c := range cases {
		h := ClassifyISR(c.p, c.min, -1)
		if h.Class != c.want || h.WritesBlocked != c.blocked || h.Elections != 0 {
			t.Errorf("case %d: %s blocked %v, want %s %v", i, h.Class, h.WritesBlocked, c.want, c.blocked)
		}
	}
	if h := ClassifyISR(p(0, 3, 3), 2, 5); h.Elections != 2 {
		t.Fatalf("elections %d", h.Elections)
	}
	if MinISR(map[string]string{backends.ConfigMinISR: "2"}) != 2 || MinISR(nil) != 1 {
		t.Fatal("MinISR")
	}
}

func TestStatusText(t *testing.T) {
	for _, s := range Statuses {
		b, _ := s.MarshalText()
		var back Status
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Fatalf("%s round trip: %v %v", s, back, err)
		}
	}
	if err := new(Status).UnmarshalText([]byte("FINE")); err == nil {
		t.Fatal("unknown status accepted")
	}
}

// One member stuck on one partition while its others are caught up: that
// partition is STALLED. One member working through backlog partition by
// partition: the partitions it has not reached are LAGGING, not STALLED. A
// member that moves nothing: all its lagging partitions are STALLED.
func TestStuckVersusBusy(t *testing.T) {
	row := func(p int32, owner string, lag int64, age time.Duration, moved bool, st Status) PartitionLag {
		return PartitionLag{Topic: Intern("orders"), Partition: p, Owner: Intern(owner), Lag: lag, Age: age, AgeKnown: true, CommitMoved: moved, Status: st}
	}
	stuck := []PartitionLag{
		row(0, "m1", 2, time.Second, true, OK),
		row(1, "m1", 300, 4*time.Minute, false, STALLED),
		row(2, "m1", 0, 0, true, OK),
	}
	if g := RollUp(GroupInfo{Name: "fraud"}, stuck, Config{}); g.Status != STALLED || g.Counts[STALLED] != 1 {
		t.Fatalf("stuck partition: %s %v", g.Status, g.Counts)
	}
	busy := []PartitionLag{
		row(0, "m1", 900, 2*time.Minute, true, LAGGING),
		row(1, "m1", 800, 3*time.Minute, false, STALLED),
		row(2, "m1", 700, 90*time.Second, false, STALLED),
		row(3, "m2", 500, 3*time.Minute, false, STALLED), // m2 moves nothing
		row(4, "m2", 400, 2*time.Minute, false, STALLED),
	}
	g := RollUp(GroupInfo{Name: "sales"}, busy, Config{})
	if g.Partitions[1].Status != LAGGING || g.Partitions[2].Status != LAGGING {
		t.Fatalf("busy member's waiting partitions: %v %v", g.Partitions[1].Status, g.Partitions[2].Status)
	}
	if g.Partitions[3].Status != STALLED || g.Partitions[4].Status != STALLED || g.Status != STALLED {
		t.Fatalf("member moving nothing: %v %v group %v", g.Partitions[3].Status, g.Partitions[4].Status, g.Status)
	}
}

func TestUnknownOffsetsAreNotCaughtUp(t *testing.T) {
	r := Evaluate(PartitionInput{Topic: Intern("t"), Committed: 5, LogStart: -1, End: -1, Owner: Intern("m"), Err: Intern("LEADER_NOT_AVAILABLE")}, t0, Config{})
	if r.AgeKnown || r.Err.String() != "LEADER_NOT_AVAILABLE" {
		t.Fatalf("%+v", r)
	}
	g := RollUp(GroupInfo{Name: "g"}, []PartitionLag{r, {Topic: Intern("t"), Partition: 1, AgeKnown: true}}, Config{})
	if g.AgesUnknown != 1 {
		t.Fatalf("ages unknown %d", g.AgesUnknown)
	}
}

// The selection median equals the sorted median, for odd and even lengths,
// duplicates and sorted or reversed input.
func TestMedianMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n < 200; n++ {
		for _, shape := range []string{"random", "dups", "sorted", "reversed"} {
			d := make([]time.Duration, n)
			for i := range d {
				switch shape {
				case "random":
					d[i] = time.Duration(rng.IntN(1000))
				case "dups":
					d[i] = time.Duration(rng.IntN(3))
				case "sorted":
					d[i] = time.Duration(i)
				case "reversed":
					d[i] = time.Duration(n - i)
				}
			}
			s := slices.Clone(d)
			slices.Sort(s)
			want := s[n/2]
			if n%2 == 0 {
				want = (s[n/2-1] + s[n/2]) / 2
			}
			if got := median(d); got != want {
				t.Fatalf("n=%d %s: median %d, want %d", n, shape, got, want)
			}
		}
	}
}

// Abandoned groups are told from live incidents: no members, nothing
// moving, and nothing to read or a backlog older than InactiveAfter.
func TestInactiveGroups(t *testing.T) {
	cfg := Config{InactiveAfter: time.Hour}
	row := func(lagN int64, age time.Duration, moved bool) PartitionLag {
		return PartitionLag{Topic: Intern("t"), Lag: lagN, Age: age, AgeKnown: true, CommitMoved: moved, Status: STOPPED}
	}
	member := []backends.Member{{ID: "m", Assigned: []backends.TopicPartition{{Topic: "t"}}}}
	cases := []struct {
		name    string
		members []backends.Member
		rows    []PartitionLag
		want    bool
	}{
		{"abandoned days ago", nil, []PartitionLag{row(500, 72*time.Hour, false)}, true},
		{"emptied a minute ago, fresh backlog: a live incident", nil, []PartitionLag{row(50, time.Minute, false)}, false},
		{"nothing to read, nobody there: OK, not abandoned", nil, []PartitionLag{row(0, 0, false)}, false},
		{"old backlog but a member", member, []PartitionLag{row(500, 72*time.Hour, false)}, false},
		{"old backlog, no members, commits moving (manual assignment)", nil, []PartitionLag{row(500, 72*time.Hour, true)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := RollUp(GroupInfo{Name: "g", Members: c.members}, c.rows, cfg)
			if g.Inactive != c.want {
				t.Fatalf("inactive %v, want %v (%+v)", g.Inactive, c.want, g)
			}
		})
	}
}
