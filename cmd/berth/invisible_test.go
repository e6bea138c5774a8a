package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// Group names that differ from a real group only by invisible characters
// (zero-width space, BOM, line separator, tag characters) are printed
// escaped by `berth groups` and `berth lag`, so an operator never resets the
// look-alike by mistake and a line separator cannot forge a table row.
func TestInvisibleCharactersInGroupNamesAreEscapedByTheCLI(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 1, 1, nil)
	kc.ProduceTo(t, "orders", 0, 3, time.Now().Add(-time.Minute), time.Second)
	names := map[string]string{
		"pay\u200bments":          `pay\u{200B}ments`,
		"\ufeffbom-group":         `\u{FEFF}bom-group`,
		"line\u2028sep":           `line\u{2028}sep`,
		"tag\U000E0041\U000E007F": `tag\u{E0041}\u{E007F}`,
	}
	for name := range names {
		kc.Commit(t, name, map[string]map[int32]int64{"orders": {0: 1}})
	}
	for _, cmd := range [][]string{{"groups"}, {"lag"}} {
		out, errOut, code := runBerth(t, append([]string{"--bootstrap", strings.Join(kc.Addrs, ",")}, cmd...)...)
		if code != 0 {
			t.Fatalf("berth %s: exit %d: %s", cmd[0], code, errOut)
		}
		for raw, escaped := range names {
			if !strings.Contains(out, escaped) {
				t.Errorf("berth %s does not show %q as %s:\n%s", cmd[0], raw, escaped, out)
			}
		}
		if strings.ContainsAny(out, "\u200b\ufeff\u2028\U000E0041\U000E007F") {
			t.Errorf("berth %s printed an invisible character raw:\n%s", cmd[0], out)
		}
	}
}
