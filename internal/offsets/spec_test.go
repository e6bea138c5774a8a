package offsets

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
)

func TestParseDatetimeNoZoneIsUTC(t *testing.T) {
	want := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	for _, s := range []string{
		"2026-11-29T08:00:00Z", "2026-11-29T08:00:00", "2026-11-29T08:00:00.000", "2026-11-29T08:00",
		"2026-11-29T16:00:00+08:00", "2026-11-29T16:00:00+0800", "2026-11-29T16:00:00+08",
		"2026-11-29T03:00:00-05:00",
	} {
		got, err := ParseDatetime(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if !got.Equal(want) {
			t.Fatalf("%s parsed as %s, want %s", s, got, want)
		}
	}
	if _, err := ParseDatetime("yesterday"); err == nil || !strings.Contains(err.Error(), "--to-datetime") {
		t.Fatalf("bad datetime: %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{"15m": 15 * time.Minute, "2h30m": 150 * time.Minute, "PT15M": 15 * time.Minute, "P1DT2H": 26 * time.Hour, "PT0.5S": 500 * time.Millisecond} {
		got, err := ParseDuration(s)
		if err != nil || got != want {
			t.Fatalf("%s: %s %v, want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"-5m", "0s", "P", "PT", "5 minutes", "P1H"} {
		if _, err := ParseDuration(s); err == nil {
			t.Fatalf("%q accepted", s)
		}
	}
}

func TestParseCSVLineNumberedErrors(t *testing.T) {
	good := "# exported\ntopic,partition,offset\norders,0,10\n\norders, 1, 20\npayments,0,0\n"
	got, err := ParseCSV("f.csv", strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1] != (FileOffset{Topic: "orders", Partition: 1, Offset: 20, Line: 5}) {
		t.Fatalf("parsed %+v", got)
	}
	for in, want := range map[string]string{
		"orders,0,10\norders,x,5\n":  "f.csv: line 2: partition \"x\"",
		"orders,0,10\norders,1,-3\n": "line 2: offset \"-3\"",
		"orders,0\n":                 "line 1: expected topic,partition,offset, got 2",
		"orders,0,1\n,1,2\n":         "line 2: topic is empty",
		"orders,0,1\norders,0,2\n":   "line 2: orders[0] already given on line 1",
		"# nothing\n":                "no offsets",
		"orders,0,1\n\"orders,1,2\n": "line 2",
	} {
		_, err := ParseCSV("f.csv", strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: %v, want %q", in, err, want)
		}
	}
}

func TestParseTopicScope(t *testing.T) {
	ts, err := ParseTopicScope("orders:0,3,5")
	if err != nil || ts.Topic != "orders" || len(ts.Partitions) != 3 || ts.Partitions[2] != 5 {
		t.Fatalf("%+v %v", ts, err)
	}
	if ts, err := ParseTopicScope("orders"); err != nil || ts.Partitions != nil {
		t.Fatalf("%+v %v", ts, err)
	}
	for _, s := range []string{"", ":1", "orders:a", "orders:1,-2"} {
		if _, err := ParseTopicScope(s); err == nil {
			t.Fatalf("%q accepted", s)
		}
	}
}

func ptr(v int64) *int64 { return &v }

func TestComputePure(t *testing.T) {
	a0, a1 := TP{Topic: "a", Partition: 0}, TP{Topic: "a", Partition: 1}
	snap := Snapshot{
		Group:     "payments-capture",
		State:     "Empty",
		Committed: map[TP]int64{a0: 2}, // below log start 5: already lost
		Bounds:    map[TP]Bounds{a0: {LogStart: 5, LogEnd: 100}, a1: {LogStart: 5, LogEnd: 100}},
		Effects:   true,
	}
	p, err := Compute(Spec{Mode: ToOffset, Offset: 50}, []TP{a0, a1}, snap)
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := p.Partitions[0], p.Partitions[1]
	// From 2 (already deleted up to 5) to 50: skips 5..49 that still exist.
	if r0.SkipRecords != 45 || *r0.Delta != 48 || r0.ReplayRecords != 0 {
		t.Fatalf("row 0 %+v", r0)
	}
	if r1.Current != nil || r1.Delta != nil || r1.ReplayRecords != 0 {
		t.Fatalf("row 1 %+v", r1)
	}
	w := strings.Join(p.Warnings, "\n")
	if !strings.Contains(w, "below the log start") || !strings.Contains(w, "a[1] had no committed offset") {
		t.Fatalf("warnings %q", w)
	}
	if !p.NeedsEffectsConfirmation() {
		t.Fatal("an effects group starting a partition with no commit mid-log must need confirmation")
	}
	if _, err := Compute(Spec{Mode: ToOffset, Offset: 1}, []TP{{Topic: "b"}}, snap); err == nil {
		t.Fatal("partition without bounds accepted")
	}
	// Same input, same output: the planner is deterministic.
	p2, _ := Compute(Spec{Mode: ToOffset, Offset: 50}, []TP{a0, a1}, snap)
	if p.Seal().Digest != p2.Seal().Digest {
		t.Fatal("same snapshot, different plan")
	}
}

func TestWithSpansIgnoresTimestampsBeyondTheSpan(t *testing.T) {
	a := TP{Topic: "a"}
	p := Plan{Partitions: []Row{{Topic: "a", Current: ptr(10), Target: 4, LogStart: 0, LogEnd: 20}}}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	qs := p.SpanQueries()
	if len(qs) != 2 || qs[0].Offset != 4 || qs[1].Offset != 9 {
		t.Fatalf("queries %+v", qs)
	}
	p = p.WithSpans([]backends.RecordTime{
		{OffsetQuery: qs[0], Found: true, At: 4, Timestamp: at},
		// Offset 9 was a transaction marker: the next data record is 12,
		// outside the replayed span, so the end stays unknown.
		{OffsetQuery: qs[1], Found: true, At: 12, Timestamp: at.Add(time.Hour)},
	})
	if r := p.Partitions[0]; r.SpanFrom == nil || !r.SpanFrom.Equal(at) || r.SpanTo != nil {
		t.Fatalf("span %v %v", r.SpanFrom, r.SpanTo)
	}
	_ = a
}

// BenchmarkCompute10k plans a reset of 10,000 partitions (a large group);
// BenchmarkComputeBaselineCopy10k is the floor it is compared with in the
// same run: building the same 10,000 rows with no mode logic, clamps or
// warnings.
func BenchmarkCompute10k(b *testing.B) {
	tps, snap := bigSnapshot(10000)
	spec := Spec{Mode: ShiftBy, Shift: -500}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Compute(spec, tps, snap); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkComputeBaselineCopy10k(b *testing.B) {
	tps, snap := bigSnapshot(10000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows := make([]Row, 0, len(tps))
		for _, tp := range tps {
			c := snap.Committed[tp]
			rows = append(rows, Row{Topic: tp.Topic, Partition: tp.Partition, Current: &c, Target: c - 500})
		}
		if len(rows) != len(tps) {
			b.Fatal("short")
		}
	}
}

func bigSnapshot(n int) ([]TP, Snapshot) {
	snap := Snapshot{Group: "g", State: "Empty", Committed: map[TP]int64{}, Bounds: map[TP]Bounds{}}
	tps := make([]TP, n)
	for i := range tps {
		tp := TP{Topic: "t" + strconvItoa(i/100), Partition: int32(i % 100)}
		tps[i] = tp
		snap.Committed[tp] = 1000
		snap.Bounds[tp] = Bounds{LogStart: int64(i % 700), LogEnd: 2000}
	}
	return tps, snap
}

func strconvItoa(i int) string { return fmt.Sprint(i) }
