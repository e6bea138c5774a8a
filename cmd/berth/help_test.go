package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// berth help lists every topic the issue names, and berth help TOPIC prints
// that topic's file from the binary, not cobra's usage of a command that
// happens to share the name (lag, capacity, offsets, redrive, broker, config).
func TestHelpTopicsArePrintedFromTheBinary(t *testing.T) {
	isolateConfig(t)
	list, _, code := runBerth(t, "help")
	if code != 0 {
		t.Fatalf("berth help exited %d", code)
	}
	for _, topic := range []string{"broker", "console", "lag", "config", "capacity", "offsets", "redrive", "rabbitmq"} {
		if !regexp.MustCompile(`(?m)^  ` + topic + ` `).MatchString(list) {
			t.Errorf("berth help does not list %q:\n%s", topic, list)
		}
		out, _, code := runBerth(t, "help", topic)
		want, err := os.ReadFile("help/" + topic + ".md")
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 || out != string(want) {
			t.Errorf("berth help %s: exit %d, printed %d bytes, want the %d bytes of help/%s.md", topic, code, len(out), len(want), topic)
		}
	}
	// A command that is not a topic still gets its usage.
	if out, _, code := runBerth(t, "help", "describe"); code != 0 || !strings.Contains(out, "Usage:") {
		t.Errorf("berth help describe: exit %d\n%s", code, out)
	}
	if _, errOut, code := runBerth(t, "help", "no-such-topic"); code != 2 || !strings.Contains(errOut, `"no-such-topic"`) {
		t.Errorf("berth help no-such-topic: exit %d, stderr %q", code, errOut)
	}
}

// The README is a front page that links to every topic file, and each link
// resolves.
func TestReadmeLinksEveryHelpTopic(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 250 {
		t.Errorf("README.md has %d lines; the front page stays within 250", n)
	}
	for _, tp := range helpTopics() {
		link := "cmd/berth/help/" + tp.name + ".md"
		if !strings.Contains(string(readme), "("+link+")") {
			t.Errorf("README.md does not link %s", link)
		}
	}
}
