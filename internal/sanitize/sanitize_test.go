package sanitize

import (
	"strings"
	"testing"
	"unicode"
)

func TestTextNeutralisesHostileInput(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"plain", "orders", "orders"},
		{"unicode kept", "café-ü", "café-ü"},
		{"csi clear screen", "a\x1b[2Jb", `a\e[2Jb`},
		{"osc title", "\x1b]0;pwned\x07", `\e]0;pwned\x07`},
		{"newline", "a\nb", `a\nb`},
		{"nul and del", "a\x00b\x7f", `a\x00b\x7f`},
		{"c1 csi", "a\u009b31mb", `a\u{9B}31mb`},
		{"bidi override", "x\u202ey", `x\u{202E}y`},
		{"invalid utf8", "a\xffb", `a\xffb`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Text(c.in)
			if got != c.want {
				t.Fatalf("Text(%q) = %q, want %q", c.in, got, c.want)
			}
			if strings.ContainsAny(got, "\x1b\x07\x00\n\r\u009b\u202e") {
				t.Fatalf("output still holds a control character: %q", got)
			}
		})
	}
}

func TestPayloadShowsBinaryAsHex(t *testing.T) {
	got := Payload([]byte{0x00, 0x01, 0x02, 0xff, 'A'})
	if !strings.HasPrefix(got, "00000000  00 01 02 ff 41") || !strings.Contains(got, "|....A|") {
		t.Fatalf("unexpected hex dump: %q", got)
	}
	if Payload([]byte(`{"a":1}`)) != `{"a":1}` {
		t.Fatal("JSON text should be shown as text")
	}
}

func FuzzText(f *testing.F) {
	f.Add("a\x1b[31mred")
	f.Add("\xff\xfe")
	f.Add("a\u200bb\ufeff\u2028\U000E0041")
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		for _, r := range out {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfffd && !strings.ContainsRune(s, 0xfffd) ||
				unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || (r >= 0xe0000 && r <= 0xe007f) {
				t.Fatalf("Text(%q) leaked %U", s, r)
			}
		}
	})
}

// Invisible and format characters: two group names that look the same on
// screen must not print the same, and a line separator must not break a row.
func TestTextEscapesInvisibleAndFormatCharacters(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"zero-width space", "pay\u200bments", `pay\u{200B}ments`},
		{"byte order mark", "\ufeffpayments", `\u{FEFF}payments`},
		{"line separator", "a\u2028b", `a\u{2028}b`},
		{"paragraph separator", "a\u2029b", `a\u{2029}b`},
		{"tag characters", "ok\U000E0041\U000E007F", `ok\u{E0041}\u{E007F}`},
		{"unassigned tag code point", "ok\U000E0002", `ok\u{E0002}`},
		{"soft hyphen", "pay\u00adments", `pay\u{AD}ments`},
		{"word joiner", "a\u2060b", `a\u{2060}b`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Text(c.in); got != c.want {
				t.Fatalf("Text(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
