package dlq

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/berth-dev/berth/redrive"
	"github.com/berth-dev/berth/tui"
	"github.com/berth-dev/berth/tui/styles"
)

// The selection both brokers' pages share (picks): a class selected on the
// classes page, then one of its messages taken out on the messages page,
// leaves the rest of the class selected one by one. A RabbitMQ read is
// plain data, so the pages get it as the browse's answer, with no broker.
func TestTakingOneMessageOutOfASelectedClassKeepsTheRest(t *testing.T) {
	env := tui.PageEnv{Styles: styles.New(), Size: func() (int, int) { return width, height }}
	read := QueueBrowse{DLQ: "orders.dlq", Vhost: "/", Type: "classic", Method: "basic.get + nack", Complete: true, Limit: 100,
		Classes: []redrive.Class{{ID: "c-timeout", Count: 2, Verdict: "transient"}, {ID: "c-invalid", Count: 1, Verdict: "permanent"}},
		Messages: []QueueMessage{
			{Position: 1, EventID: "ev-1", Class: "c-timeout"},
			{Position: 2, EventID: "ev-2", Class: "c-timeout"},
			{Position: 3, EventID: "ev-3", Class: "c-invalid"},
		}}
	classes := tui.Page(NewQueueClassesPage(env, "orders.dlq"))
	classes, _ = classes.Update(browsedMsg{read})
	// The biggest class comes first: select it.
	classes, _, _ = press(t, env, classes, runes("x"))
	if v := checkView(t, classes); !strings.Contains(v, "selected 2 message(s)") {
		t.Fatalf("class selected:\n%s", v)
	}
	_, pushed, _ := press(t, env, classes, enterKey)
	messages := pushed[0]
	if v := checkView(t, messages); !strings.Contains(v, "2 message(s) · enter") || strings.Count(v, "●") != 2 {
		t.Fatalf("class messages:\n%s", v)
	}
	messages, _, _ = press(t, env, messages, runes("x"))
	v := checkView(t, messages)
	if !strings.Contains(v, "selected 1 message(s)") || strings.Count(v, "●") != 1 {
		t.Fatalf("one message taken out:\n%s", v)
	}
	// H toggles the ordering hazards on the shared selection line.
	messages, _, _ = press(t, env, messages, runes("H"))
	if v := checkView(t, messages); !strings.Contains(v, "ordering hazards INCLUDED (H)") {
		t.Fatalf("hazards:\n%s", v)
	}
	// The plan request is the message left, by event id.
	req := messages.(*QueueMessagesPage).s.request(false)
	if len(req.Classes) != 0 || len(req.EventIDs) != 1 || !req.AllowHazards {
		t.Fatalf("request %+v", req)
	}
}

// When a run ends while the page asks "esc again to leave it running", the
// question goes: there is nothing left to leave running (both brokers'
// plan pages end runs through runOver).
func TestRunOverDropsTheLeaveQuestion(t *testing.T) {
	var u planUI
	u.runKey(tea.KeyMsg{Type: tea.KeyEsc}, runControl{})
	if !u.leaving || !strings.Contains(u.note, "esc again") {
		t.Fatalf("first esc while running: leaving %v, note %q", u.leaving, u.note)
	}
	u.runOver()
	if u.leaving || u.note != "" {
		t.Fatalf("after the run: leaving %v, note %q", u.leaving, u.note)
	}
	u.note = "approval refused: not in allowed_signers"
	u.runOver()
	if u.note == "" {
		t.Fatal("runOver dropped a note that was not about the run")
	}
}

// TestQueueResultLineSpeaksKafkasWords: the RabbitMQ plan page's result
// reads like the Kafka page and `berth redrive execute`: a message gone
// from the DLQ is skipped as record_gone (not "not found"), a ledger
// skip is already sent, and the counts stay true.
func TestQueueResultLineSpeaksKafkasWords(t *testing.T) {
	res := QueueResult{Sent: 3, Resent: 1, AlreadySent: 2, NotFound: []string{"ev-9"},
		Skipped: []QueueSkip{
			{EventID: "ev-4", Reason: redrive.ReasonAlreadyRedriven},
			{EventID: "ev-5", Reason: redrive.ReasonEffectCommitted},
		},
		Failed: []QueueFailure{{EventID: "ev-6", Error: "returned"}}}
	got := queueResultLine(res)
	want := "result: sent 3 · already sent 3 · skipped 2 (effect_committed 1, record_gone 1) · failed 1 · 1 of the sent resent (an earlier run stopped before their confirm)"
	if got != want {
		t.Errorf("result line\n got %q\nwant %q", got, want)
	}
	if got := queueResultLine(QueueResult{Sent: 4}); got != "result: sent 4 · already sent 0 · skipped 0 · failed 0" {
		t.Errorf("a clean run reads %q", got)
	}
}
