package record

import (
	"testing"

	"github.com/berth-dev/berth/internal/golden"
)

// TestGoldenViews pins the viewer's layout at 80x24 and 220x60: labels,
// the key, headers (a stack trace one frame a line, a binary value as
// hex), a JSON payload pretty-printed with a long string wrapped under its
// own indentation. Regenerate with -update and read the diff.
func TestGoldenViews(t *testing.T) {
	r := Record{
		Where: "payments.DLT 0:3",
		Note:  "the record at payments-capture's committed offset 3 on payments[0]: the next record the group will read",
		Fields: []Field{
			{"offset", "3 (the committed offset)"},
			{"timestamp", "2026-12-01T14:44:22Z (CreateTime)"},
			{"class", "LedgerClientException: Listener failed; ledger service returned HTTP <n> Service Unavailable (c-a706ec3297)"},
		},
		HasKey: true, Key: []byte("order:1796136255904"),
		Headers: []Header{
			{Key: "kafka_dlt-original-offset", Value: []byte{0, 0, 0, 0, 0, 0, 0, 0x19}},
			{Key: "kafka_dlt-exception-stacktrace", Value: []byte("com.harborcart.ledger.LedgerClientException: ledger service returned HTTP 503\n\tat com.harborcart.ledger.Client.post(Client.java:88)\n\tat com.harborcart.payments.Capture.run(Capture.java:41)")},
		},
		ValueName: "payload",
		Value:     []byte(payment),
	}
	for _, size := range []struct {
		name string
		w, h int
	}{{"viewer-80x24", 80, 24}, {"viewer-220x60", 220, 60}} {
		p := New(env(size.w, size.h, nil), "t", []Record{r, r}, 0)
		v := p.View()
		checkFrame(t, v, size.w, size.h)
		golden.Assert(t, "tui/record", size.name, v)
	}
}
