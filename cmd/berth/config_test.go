package main

import (
	"strings"
	"testing"
)

func TestConfigViewWithoutFileShowsBundledDefault(t *testing.T) {
	isolateConfig(t)
	out, errOut, code := runBerth(t, "config", "view", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"active_context": "bundled"`) || !strings.Contains(out, "127.0.0.1:9092") {
		t.Fatalf("config view without a file should show the bundled context on 127.0.0.1:9092:\n%s", out)
	}
}
