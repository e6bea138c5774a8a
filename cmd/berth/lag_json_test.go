package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/internal/lag"
	"github.com/berth-dev/berth/internal/monitor"
)

// awkward names a cluster may hand back: quotes, escapes, control and
// invisible characters, HTML, invalid UTF-8.
var awkward = []string{"orders", `q"uote\back`, "esc\x1b[31mred", "tab\tnew\nline", "<b>&amp;</b>", "bad\xffutf8", "zero\u200bwidth", "ünï", ""}

func randomRow(r *rand.Rand) lag.PartitionLag {
	pick := func() string { return awkward[r.IntN(len(awkward))] }
	dur := func() time.Duration {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return time.Duration(r.Int64N(int64(time.Millisecond))) // rounds to 0.000
		case 2:
			return time.Duration(r.Int64N(int64(48 * time.Hour)))
		}
		return -time.Duration(r.Int64N(int64(time.Hour)))
	}
	row := lag.PartitionLag{
		Topic: lag.Intern(pick()), Owner: lag.Intern(pick()), Partition: r.Int32N(1 << 20),
		Committed: r.Int64N(1<<40) - 1, LogStart: r.Int64N(1 << 30), End: r.Int64N(1 << 40), Lag: r.Int64N(1 << 40), Lost: r.Int64N(100),
		Age: dur(), ETA: dur(), TimeToLoss: dur(),
		ProduceRate: r.Float64() * float64(r.IntN(100000)), ConsumeRate: r.Float64() / 1e7,
		Status: lag.Statuses[r.IntN(len(lag.Statuses))], AgeKnown: r.IntN(2) == 0, AgeApprox: r.IntN(2) == 0,
		ClockSkew: r.IntN(2) == 0, RatesKnown: r.IntN(2) == 0, ETAKnown: r.IntN(2) == 0, FallingBehind: r.IntN(2) == 0,
		TimeToLossKnown: r.IntN(2) == 0, RetentionRisk: r.IntN(2) == 0, Breach: r.IntN(2) == 0, Compacted: r.IntN(2) == 0,
		TimestampType: backends.TimestampType(r.IntN(3)),
	}
	if r.IntN(5) == 0 {
		row.Committed = lag.NoCommit
	}
	if r.IntN(5) == 0 {
		row.Err = lag.Intern(pick())
	}
	if r.IntN(2) == 0 {
		row.EventRule, row.EventAgeKnown, row.EventClockError = true, r.IntN(2) == 0, r.IntN(3) == 0
		row.EventAge, row.EventState = dur(), lag.EventState(r.IntN(5))
	}
	return row
}

// Rows are encoded by hand for speed; they must be byte for byte what
// encoding/json writes for partLagJSON, the rows' definition.
func TestLagRowEncodingMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	e := newLagEncoder(&bytes.Buffer{})
	for i := 0; i < 20000; i++ {
		row := randomRow(r)
		group := awkward[i%len(awkward)]
		got := e.appendRow(nil, nil, e.str(group), &row)
		want, err := json.Marshal(partJSON(group, row))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("row %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func testSnapshot(r *rand.Rand) monitor.Snapshot {
	s := monitor.Snapshot{Observed: time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.UTC), Window: 5002 * time.Millisecond,
		Warnings: []string{"timestamps: \x1b[2J broker 2 unreachable"}}
	for gi, name := range []string{"fraud-monitor", `we"ird`, "empty"} {
		g := monitor.Group{GroupLag: lag.GroupLag{Group: name, State: "Stable", MemberCount: gi, Status: lag.Statuses[gi]}}
		if name != "empty" {
			for range 50 {
				g.Partitions = append(g.Partitions, randomRow(r))
			}
		}
		s.Groups = append(s.Groups, g)
	}
	return s
}

// The streamed document is the document encoding/json would write for the
// same values: the same keys, values and order, whatever its layout.
func TestLagJSONStreamsTheSameDocument(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s := testSnapshot(r)
	want := map[string]any{
		"context": "ctx\x1b", "observed": s.Observed.UTC(), "window_seconds": roundTo(s.Window.Seconds(), 3),
		"warnings": s.Warnings,
	}
	var groups []groupLagJSON
	var parts []partLagJSON
	for _, g := range s.Groups {
		groups = append(groups, groupJSON(g))
		for _, row := range g.Partitions {
			parts = append(parts, partJSON(g.Group, row))
		}
	}
	want["groups"], want["partitions"] = groups, parts
	wb, _ := json.Marshal(want)
	var wantV any
	if err := json.Unmarshal(wb, &wantV); err != nil {
		t.Fatal(err)
	}
	for _, oneLine := range []bool{false, true} {
		var buf bytes.Buffer
		if err := writeLagJSON(&buf, "ctx\x1b", s, oneLine); err != nil {
			t.Fatal(err)
		}
		out := buf.Bytes()
		if !json.Valid(out) {
			t.Fatalf("oneLine=%v: invalid JSON:\n%s", oneLine, out)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, wantV) {
			t.Fatalf("oneLine=%v: documents differ:\n got %s\nwant %s", oneLine, out, wb)
		}
		lines := bytes.Count(out, []byte("\n"))
		switch {
		case oneLine && lines != 1:
			t.Fatalf("--watch document spans %d lines", lines)
		case !oneLine && lines < len(parts):
			t.Fatalf("%d lines for %d rows: rows are not one a line", lines, len(parts))
		}
	}
	// No groups: empty arrays, still valid.
	var buf bytes.Buffer
	if err := writeLagJSON(&buf, "c", monitor.Snapshot{}, false); err != nil {
		t.Fatal(err)
	}
	var empty struct {
		Groups, Partitions, Warnings []any
	}
	if err := json.Unmarshal(buf.Bytes(), &empty); err != nil || empty.Groups == nil || empty.Partitions == nil || empty.Warnings == nil {
		t.Fatalf("empty document: %v %s", err, buf.Bytes())
	}
}

// -o jsonl: one object a line, each with its kind: a group's roll-up, then
// its partitions; warnings last.
func TestLagJSONLOneObjectALine(t *testing.T) {
	s := testSnapshot(rand.New(rand.NewPCG(5, 6)))
	var buf bytes.Buffer
	if err := writeLagJSONL(&buf, "bundled", s); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		if v["context"] != "bundled" || v["observed"] != "2026-12-01T09:00:00.123456789Z" {
			t.Fatalf("line without its context and time: %s", sc.Bytes())
		}
		kind, _ := v["kind"].(string)
		if kind == "partition" && v["group"] != s.Groups[0].Group && v["group"] != s.Groups[1].Group {
			t.Fatalf("partition of no group: %s", sc.Bytes())
		}
		kinds = append(kinds, kind)
	}
	want := []string{"group"}
	want = append(want, strings.Split(strings.Repeat("partition ", 50), " ")[:50]...)
	want = append(want, "group")
	want = append(want, strings.Split(strings.Repeat("partition ", 50), " ")[:50]...)
	want = append(want, "group", "warning")
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds %v", kinds)
	}
}
