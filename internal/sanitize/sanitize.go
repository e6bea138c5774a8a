// Package sanitize makes untrusted text (topic names, keys, values, headers
// read from a cluster) safe to put on a terminal: control characters and
// escape sequences are shown escaped, never executed, and invalid UTF-8 is
// shown as \xNN. Everything that prints message data goes through here.
package sanitize

import (
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s with every control character (C0, DEL, C1), every
// invisible or format character (Unicode Cf, Zl, Zp and the tag block: bidi
// overrides, zero-width spaces, BOM, line separators) and every invalid
// UTF-8 byte escaped, so the result contains nothing a terminal would
// interpret and nothing the reader cannot see.
func Text(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\x`)
			b.WriteString(hex.EncodeToString([]byte{s[i]}))
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == 0x1b:
			b.WriteString(`\e`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex.EncodeToString([]byte{byte(r)}))
		case unsafeRune(r):
			b.WriteString(`\u{`)
			b.WriteString(strings.ToUpper(hexRune(r)))
			b.WriteString(`}`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Bytes is Text for a byte slice.
func Bytes(p []byte) string { return Text(string(p)) }

// IsBinary reports whether p looks like binary data (invalid UTF-8, or many
// control characters) and is better shown as hex.
func IsBinary(p []byte) bool {
	if !utf8.Valid(p) {
		return true
	}
	ctrl := 0
	for _, c := range p {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			ctrl++
		}
	}
	return ctrl > 0 && ctrl*10 >= len(p)
}

// Hex renders p as a classic hex dump (offset, 16 bytes, printable ASCII).
func Hex(p []byte) string {
	var b strings.Builder
	for off := 0; off < len(p); off += 16 {
		end := off + 16
		if end > len(p) {
			end = len(p)
		}
		line := p[off:end]
		b.WriteString(hexOffset(off))
		b.WriteString("  ")
		for i := 0; i < 16; i++ {
			if i < len(line) {
				b.WriteString(hex.EncodeToString(line[i : i+1]))
			} else {
				b.WriteString("  ")
			}
			b.WriteByte(' ')
			if i == 7 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				b.WriteByte(c)
			} else {
				b.WriteByte('.')
			}
		}
		b.WriteString("|\n")
	}
	return b.String()
}

// Payload renders a payload for display: escaped text, or a hex dump when it
// is binary.
func Payload(p []byte) string {
	if IsBinary(p) {
		return Hex(p)
	}
	return Bytes(p)
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c >= 0x80 {
			if c >= 0x80 {
				return cleanSlow(s[i:])
			}
			return false
		}
	}
	return true
}

func cleanSlow(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || r < 0x20 || r == 0x7f || unsafeRune(r) {
			return false
		}
		i += size
	}
	return true
}

// unsafeRune reports runes a terminal would act on or that hide or reorder
// what it shows: C1 controls and every format (Cf: zero-width space, BOM,
// bidi overrides and isolates, tag characters), line separator (Zl) and
// paragraph separator (Zp) rune, taken from the Unicode tables so new
// assignments are covered without a hand list. The whole tag block is
// included, its unassigned code points too: a terminal may still swallow them.
func unsafeRune(r rune) bool {
	if r >= 0x80 && r <= 0x9f {
		return true
	}
	if r >= tagBlockStart && r <= tagBlockEnd {
		return true
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// The Tags block (U+E0000..U+E007F): invisible copies of ASCII.
const (
	tagBlockStart = 0xe0000
	tagBlockEnd   = 0xe007f
)

func hexRune(r rune) string {
	const digits = "0123456789abcdef"
	if r == 0 {
		return "0"
	}
	var buf [8]byte
	i := len(buf)
	for r > 0 {
		i--
		buf[i] = digits[r&0xf]
		r >>= 4
	}
	return string(buf[i:])
}

func hexOffset(off int) string {
	const digits = "0123456789abcdef"
	var buf [8]byte
	for i := 7; i >= 0; i-- {
		buf[i] = digits[off&0xf]
		off >>= 4
	}
	return string(buf[:])
}
