package main

import (
	"encoding/json"
	"strings"
	"testing"

	tuidlq "github.com/berth-dev/berth/tui/dlq"
)

// The console's p on a class whose messages were taken from the DLQ after
// it was read (another consumer): the plan page says the selection matches
// nothing, and no plan of nothing is stored.
func TestConsoleRabbitPlanOfNothingIsRefused(t *testing.T) {
	isolateConfig(t)
	_, ch, _, dlq := rmqDLQ(t, 2)
	rc := newRabbitConsole(t, "", false)
	d := drive(t, rc.env, tuidlq.NewQueueClassesPage(rc.env, dlq))
	d.until("1 class(es)")
	d.press(keyRunes("x"), never)
	mustContain(t, d.view(), "selected 2 message(s)")
	drainIDs(t, ch, dlq)
	d.press(keyRunes("p"), never)
	v := d.until("matches no record")
	mustContain(t, v, "--class", dlq)
	if strings.Contains(v, "stored in the redrive store") {
		t.Errorf("the console stored a plan of nothing:\n%s", v)
	}
	out, errOut, code := rc.berth(t, "redrive", "status", "-o", "json")
	var plans []json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &plans) != nil || len(plans) != 0 {
		t.Errorf("redrive status after the console's plan of nothing: exit %d, want no plan:\n%s%s", code, out, errOut)
	}
}
