package record

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends"
	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/kafkatest"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/styles"
)

func TestMain(m *testing.M) {
	// Plain text: an escape sequence in a view can then only come from
	// unsanitised input.
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

// payment is the kind of payload issue 15 found cut at the screen edge
// ("amountCents": and nothing after it).
const payment = `{"eventId":"58d02f87-d4d7-4d23-b08b-23191473c9aa","paymentId":"pay-1796136255904","orderId":"1796136255904","customer":{"id":"cus-77","country":"GB"},"currency":"GBP","amountCents":129900,"note":"` +
	`a long free-text note that goes on and on past any terminal width so that it has to wrap rather than be cut at the edge of the screen"}`

func env(w, h int, cl backends.Cluster) tui.PageEnv {
	return tui.PageEnv{
		Styles: styles.New(),
		Size:   func() (int, int) { return w, h },
		Do: func(fn func(ctx context.Context, c backends.Cluster) tea.Msg) tea.Cmd {
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				return fn(ctx, cl)
			}
		},
	}
}

// feed delivers cmd's messages (and theirs) to the page; flashes are
// returned.
func feed(p tui.Page, cmd tea.Cmd) (tui.Page, []string) {
	var flashes []string
	queue := []tea.Cmd{cmd}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		switch msg := c().(type) {
		case tea.BatchMsg:
			queue = append(queue, msg...)
		case tui.FlashMsg:
			flashes = append(flashes, msg.Text)
		case nil:
		default:
			var more tea.Cmd
			p, more = p.Update(msg)
			queue = append(queue, more)
		}
	}
	return p, flashes
}

func press(p tui.Page, keys ...string) (tui.Page, []string) {
	var all []string
	for _, k := range keys {
		var msg tea.KeyMsg
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		case "ctrl+u":
			msg = tea.KeyMsg{Type: tea.KeyCtrlU}
		case "pgdown":
			msg = tea.KeyMsg{Type: tea.KeyPgDown}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		var cmd tea.Cmd
		p, cmd = p.Update(msg)
		var fl []string
		p, fl = feed(p, cmd)
		all = append(all, fl...)
	}
	return p, all
}

func typeText(p tui.Page, s string) tui.Page {
	for _, r := range s {
		p, _ = p.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	return p
}

// checkFrame fails when the view is not exactly h lines of at most w cells
// or carries an escape byte (which could only come from the record).
func checkFrame(t *testing.T, v string, w, h int) {
	t.Helper()
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		t.Fatalf("view has %d lines, want %d:\n%s", len(lines), h, v)
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			t.Fatalf("line %d is %d cells wide (> %d): %q", i, ansi.StringWidth(l), w, l)
		}
	}
	if strings.ContainsAny(v, "\x1b\x07\u202e") {
		t.Fatalf("view carries a control or bidi character:\n%q", v)
	}
}

// wholeText is the view with wrapped lines joined back (leading spaces of
// continuation lines dropped), to look for text that spans a wrap.
func wholeText(v string) string {
	var b strings.Builder
	for _, l := range strings.Split(v, "\n") {
		b.WriteString(strings.TrimSpace(l))
	}
	return b.String()
}

func TestJSONPayloadIsPrettyPrintedAndWrappedNotCut(t *testing.T) {
	const w, h = 80, 60
	r := Record{Where: "payments.DLT 0:1", HasKey: true, Key: []byte("pay-1"), Value: []byte(payment), ValueName: "payload"}
	p := New(env(w, h, nil), "payments.DLT", []Record{r}, 0)
	v := p.View()
	checkFrame(t, v, w, h)
	for _, want := range []string{"payload (", "JSON", `"amountCents": 129900,`, `"country": "GB"`, "key             pay-1"} {
		if !strings.Contains(v, want) {
			t.Fatalf("view lacks %q:\n%s", want, v)
		}
	}
	// The note is longer than the screen: every word of it is on screen.
	if !strings.Contains(wholeText(v), "cut at the edge of the screen") {
		t.Fatalf("the long note was cut, not wrapped:\n%s", v)
	}
}

func TestHostileHeadersAndPayloadAreEscapedAndBinaryIsHex(t *testing.T) {
	const w, h = 80, 40
	r := Record{
		Where: "evil\x1b[2J", HasKey: true, Key: []byte{0xca, 0xfe, 0x00},
		Headers: []Header{
			{Key: "note\x1b]0;title\x07", Value: []byte("\x1b[31mred\u202eevil")},
			{Key: "bin", Value: []byte{0, 1, 2, 3, 0xff}},
			{Key: "trace", Value: []byte("java.lang.Exception: boom\n\tat com.x.A.b(A.java:1)\n\tat com.x.C.d(C.java:2)")},
		},
		Value: []byte{0xde, 0xad, 0xbe, 0xef, 0x00, 0x1b, 0x5b},
	}
	p := New(env(w, h, nil), "t", []Record{r}, 0)
	v := p.View()
	checkFrame(t, v, w, h)
	for _, want := range []string{`note\e]0;title\x07 = \e[31mred\u{202E}evil`, "bin = hex:00010203ff", "key             hex:cafe00",
		"value (7 bytes, binary, hex dump)", "de ad be ef 00 1b 5b", "    at com.x.A.b(A.java:1)"} {
		if !strings.Contains(v, want) {
			t.Fatalf("view lacks %q:\n%s", want, v)
		}
	}
	if title := p.Title(); strings.ContainsRune(title, 0x1b) || !strings.Contains(title, `evil\e[2J`) {
		t.Fatalf("title not sanitised: %q", title)
	}
}

func TestScrollsToTheEndAndStepsBetweenRecords(t *testing.T) {
	const w, h = 80, 12
	long := make([]Header, 40)
	for i := range long {
		long[i] = Header{Key: "h" + string(rune('a'+i%26)), Value: []byte("v")}
	}
	recs := []Record{{Where: "a", Headers: long, Value: []byte("first-payload")}, {Where: "b", Value: []byte("second-payload")}}
	var p tui.Page = New(env(w, h, nil), "t", recs, 0)
	if strings.Contains(p.View(), "first-payload") {
		t.Fatal("the payload should be below the first screen")
	}
	p, _ = press(p, "G")
	v := p.View()
	checkFrame(t, v, w, h)
	if !strings.Contains(v, "first-payload") || !strings.Contains(v, "record 1 of 2") {
		t.Fatalf("G did not reach the end:\n%s", v)
	}
	p, _ = press(p, "g", "pgdown")
	if !strings.Contains(p.View(), "lines 11-") {
		t.Fatalf("pgdown did not page:\n%s", p.View())
	}
	p, _ = press(p, "n")
	if v := p.View(); !strings.Contains(v, "second-payload") || !strings.Contains(v, "record 2 of 2") || !strings.Contains(p.Title(), "b") {
		t.Fatalf("n did not show the next record:\n%s", v)
	}
	_, flashes := press(p, "n")
	if len(flashes) != 1 || flashes[0] != "no more records" {
		t.Fatalf("n past the last record: %v", flashes)
	}
	p, _ = press(p, "p")
	if !strings.Contains(p.View(), "record 1 of 2") {
		t.Fatal("p did not go back")
	}
}

func TestCopyWritesOSC52WithTheWholeRecord(t *testing.T) {
	var out strings.Builder
	Terminal = &out
	t.Cleanup(func() { Terminal = os.Stdout })
	r := Record{Where: "orders[7]@2595", HasKey: true, Key: []byte("k"), Value: []byte(payment)}
	_, flashes := press(New(env(80, 24, nil), "t", []Record{r}, 0), "y")
	seq := out.String()
	if !strings.HasPrefix(seq, "\x1b]52;c;") || !strings.HasSuffix(seq, "\x07") {
		t.Fatalf("not an OSC 52 sequence: %q", seq)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(seq, "\x1b]52;c;"), "\x07"))
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != Text(r) || !strings.Contains(string(raw), `"amountCents": 129900`) {
		t.Fatalf("clipboard holds:\n%s", raw)
	}
	if len(flashes) != 1 || !strings.Contains(flashes[0], "copied") {
		t.Fatalf("flashes %v", flashes)
	}
}

func TestSaveWritesANewFileAndNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	r := Record{Where: "orders[7]@2595", Value: []byte{0xca, 0xfe, 0x00, 0x01}}
	var p tui.Page = New(env(80, 24, nil), "t", []Record{r}, 0)
	p, _ = press(p, "s")
	if v := p.View(); !strings.Contains(v, "save as text to: record-orders-7-2595.txt") {
		t.Fatalf("no prompt with the default name:\n%s", v)
	}
	// While the prompt is open, keys are text: "q" must not quit.
	if c, ok := p.(tui.InputCapturer); !ok || !c.CapturesKey(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}) {
		t.Fatal("the prompt does not capture keys")
	}
	text := filepath.Join(dir, "rec.txt")
	p, _ = press(p, "ctrl+u")
	p = typeText(p, text)
	p, flashes := press(p, "enter")
	got, err := os.ReadFile(text)
	if err != nil || string(got) != Text(r) || !strings.Contains(string(got), "ca fe 00 01") {
		t.Fatalf("saved %q, %v (flashes %v)", got, err, flashes)
	}
	// S writes the payload's own bytes.
	bin := filepath.Join(dir, "rec.bin")
	p, _ = press(p, "S", "ctrl+u")
	p = typeText(p, bin)
	p, _ = press(p, "enter")
	if got, _ := os.ReadFile(bin); string(got) != string(r.Value) {
		t.Fatalf("raw save wrote %x", got)
	}
	// Saving onto an existing file refuses and leaves it as it was.
	p, _ = press(p, "s", "ctrl+u")
	p = typeText(p, bin)
	_, flashes = press(p, "enter")
	if len(flashes) != 1 || !strings.Contains(flashes[0], "already exists: nothing written") {
		t.Fatalf("overwrite: %v", flashes)
	}
	if got, _ := os.ReadFile(bin); string(got) != string(r.Value) {
		t.Fatal("the existing file was changed")
	}
}

// The record behind a stall: the viewer opened on a group's committed
// offset reads that record (and the ones after it, a batch at a time) from
// the broker, off the UI goroutine.
func TestPartitionViewerReadsFromTheCommittedOffset(t *testing.T) {
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 1, 1, nil)
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte{byte('a' + i%26)}, Value: []byte(`{"n":` + string(rune('0'+i%10)) + `}`),
			Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte{byte(i)}}}})
	}
	kc.Produce(t, recs...)
	c, err := kafka.Dial(context.Background(), kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	t.Cleanup(cl.Close)

	const w, h = 100, 30
	var p tui.Page = NewPartition(env(w, h, cl), tui.PartitionTarget{Group: "fraud-monitor", Topic: "orders", Partition: 0, Committed: 7})
	if v := p.View(); !strings.Contains(v, "reading…") {
		t.Fatalf("before the read:\n%s", v)
	}
	p, _ = feed(p, p.Init())
	v := p.View()
	checkFrame(t, v, w, h)
	for _, want := range []string{"the record at fraud-monitor's committed offset 7 on orders[0]", "offset          7 (the committed offset)",
		`"n": 7`, "seq = hex:07", "record 1 of 20+"} {
		if !strings.Contains(v, want) {
			t.Fatalf("view lacks %q:\n%s", want, v)
		}
	}
	// Step to the end of the first batch, then past it: the next batch is
	// read and the viewer moves on to it.
	for i := 0; i < 19; i++ {
		p, _ = press(p, "n")
	}
	if v := p.View(); !strings.Contains(v, "offset          26 (committed + 19)") {
		t.Fatalf("after 19 n:\n%s", v)
	}
	p, _ = press(p, "n")
	if v := p.View(); !strings.Contains(v, "offset          27 (committed + 20)") || !strings.Contains(v, "record 21 of 23") {
		t.Fatalf("past the first batch:\n%s", v)
	}

	// A group that has read everything: said so, not an empty page.
	var done tui.Page = NewPartition(env(w, h, cl), tui.PartitionTarget{Group: "g", Topic: "orders", Partition: 0, Committed: 30})
	done, _ = feed(done, done.Init())
	if v := done.View(); !strings.Contains(v, "no record at g's committed offset 30 on orders[0] yet: the group has read everything (end 30)") {
		t.Fatalf("caught-up group:\n%s", v)
	}
	// A partition that does not exist: the error names it.
	var bad tui.Page = NewPartition(env(w, h, cl), tui.PartitionTarget{Group: "g", Topic: "orders", Partition: 9, Committed: 0})
	bad, _ = feed(bad, bad.Init())
	if v := bad.View(); !strings.Contains(v, "error: read orders[9]: no such partition") {
		t.Fatalf("missing partition:\n%s", v)
	}
}

// The rest of a wrapped JSON string continues right of the line's own
// indentation, never at a key's.
func TestWrappedPayloadLinesHangUnderTheirOwnIndent(t *testing.T) {
	r := Record{Value: []byte(`{"note":"` + strings.Repeat("word ", 30) + `end"}`)}
	v := New(env(60, 20, nil), "t", []Record{r}, 0).View()
	lines := strings.Split(v, "\n")
	for i, l := range lines {
		if strings.Contains(l, `"note":`) {
			if next := lines[i+1]; !strings.HasPrefix(next, "      word") {
				t.Fatalf("continuation %q does not hang under the value:\n%s", next, v)
			}
			return
		}
	}
	t.Fatalf("no note line:\n%s", v)
}

// A path pasted into the save prompt is one line: a trailing line break or
// an escape sequence in the paste never reaches the file name.
func TestSavePromptTakesAPasteAsOneCleanLine(t *testing.T) {
	dir := t.TempDir()
	var p tui.Page = New(env(80, 24, nil), "t", []Record{{Where: "w", Value: []byte("v")}}, 0)
	p, _ = press(p, "s", "ctrl+u")
	p, _ = p.Update(tea.KeyMsg{Type: tea.KeyRunes, Paste: true, Runes: []rune(filepath.Join(dir, "a\x1b[2Jb.txt") + "\n")})
	if v := p.View(); strings.ContainsRune(v, 0x1b) {
		t.Fatalf("the prompt echoes an escape byte:\n%q", v)
	}
	_, flashes := press(p, "enter")
	want := filepath.Join(dir, "a[2Jb.txt")
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("saved elsewhere (%v): %v", flashes, err)
	}
}
