package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/tui"
)

// The record behind a stall is one key away: the real program on a broker,
// the group page opened from the command line, "v" on the oldest partition
// (the cursor's row) reads the record at the group's committed offset and
// shows it whole: pretty-printed, headers listed, hostile bytes escaped.
func TestConsoleViewsTheRecordAtTheCommittedOffset(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 2, 1, nil)
	start := time.Now().Add(-10 * time.Minute)
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: 1, Key: []byte(fmt.Sprintf("order-%d", i)), Timestamp: start.Add(time.Duration(i) * time.Second),
			Value:   []byte(fmt.Sprintf(`{"orderId":"o-%d","amountCents":%d,"note":"\u001b[2J"}`, i, 1000+i)),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("evil\x1b]0;owned\x07")}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.AddOffset("orders", 1, 4, -1)
	offs.AddOffset("orders", 0, 0, -1)
	if _, err := kc.Admin.CommitOffsets(ctx, "fraud-monitor", offs); err != nil {
		t.Fatal(err)
	}

	a := consoleApp(t, kc.Addrs[0])
	m := tui.New(tui.Options{Config: a.cfg, Context: "local", Dial: a.dialConsole, Timeout: consoleTimeout, Refresh: 300 * time.Millisecond, Services: consoleServices()})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 40))
	wait := func(what string, re *regexp.Regexp) {
		t.Helper()
		t.Logf("waiting for %s", what)
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return re.MatchString(ansi.Strip(string(b))) },
			teatest.WithDuration(screenWait), teatest.WithCheckInterval(30*time.Millisecond))
	}
	wait("the overview", regexp.MustCompile(`fraud-monitor`))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(":")})
	tm.Type("group fraud-monitor")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	wait("the group's partitions, oldest first", regexp.MustCompile(`▸ orders\s+1\s+4\s+10\s+6`))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("v")})
	wait("the record", regexp.MustCompile(`"amountCents": 1004`))

	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(quitWait)).(*tui.Model)
	v := fm.View()
	for _, want := range []string{"fraud-monitor › orders[1]@4", "the record at fraud-monitor's committed offset 4 on orders[1]",
		"offset          4 (the committed offset)", "key             order-4", "trace = hex:6576696c1b5d303b6f776e656407", `"orderId": "o-4",`, `"note": "\u001b[2J"`} {
		if !strings.Contains(ansi.Strip(v), want) {
			t.Errorf("viewer lacks %q:\n%s", want, ansi.Strip(v))
		}
	}
	if strings.Contains(ansi.Strip(v), "\x1b]0;") {
		t.Errorf("an escape sequence from the record reached the screen")
	}
}
