package main

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// A name typed on the command line (or read from a file) can carry escape
// sequences; echoed back raw in an error, it would clear or recolour the
// on-call engineer's terminal. The error line shows it escaped, on one line.
func TestErrorLineEscapesHostileNames(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	for _, args := range [][]string{
		{"describe", "topic", "no\x1b[2Jtopic"},
		{"describe", "group", "no\x1b[31mgroup\nline"},
	} {
		_, errOut, code := runBerth(t, append([]string{"--bootstrap", kc.Addrs[0], "--timeout", "5s"}, args...)...)
		if code != 1 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		if strings.ContainsRune(errOut, 0x1b) || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, `\e[`) {
			t.Fatalf("%v: error line not escaped to one line: %q", args, errOut)
		}
	}
}
