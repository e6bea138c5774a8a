// Package record is the console's record viewer: one message (a Kafka
// record, a DLQ record, a RabbitMQ message) shown whole. Lines wrap to the
// terminal instead of being cut, the page scrolls, a JSON payload is
// pretty-printed, headers are listed one a line, binary keys, headers and
// payloads are shown as hex, and every byte that came from the message goes
// through internal/sanitize. The record can be copied to the clipboard
// (OSC 52) or saved to a file.
//
// The viewer is opened from a group's partition row (the record at the
// group's committed offset and those after it, read through a
// backends.RecordReader off the UI goroutine), from a Kafka DLQ record and
// from a RabbitMQ DLQ message (already read by their pages).
package record

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/berth-dev/berth/internal/sanitize"
)

// Record is one message as the viewer shows it. Every string and byte slice
// is raw (untrusted): the viewer sanitises all of it.
type Record struct {
	// Where names the record in the page title: "orders[7]@2595",
	// "payments.DLT 0:3", "#12".
	Where string
	// Note is a line above the fields ("the group's committed offset: …").
	Note string
	// Fields are labelled values shown first (offset, timestamp, class…).
	Fields []Field
	// HasKey is set for records that have a key (Kafka); KeyNull marks a
	// null key.
	HasKey  bool
	KeyNull bool
	Key     []byte
	Headers []Header
	// ValueName is what the payload is called ("value", "body").
	ValueName   string
	Value       []byte
	ContentType string

	// laid is the record laid out (lines), when a loader did it off the UI
	// goroutine; nil means the page lays it out when first shown.
	laid []line
}

// Field is one labelled value.
type Field struct{ Label, Value string }

// Header is one header, raw.
type Header struct {
	Key   string
	Value []byte
}

// kind is how a line is styled.
type kind uint8

const (
	plain kind = iota
	section
	muted
)

// line is one logical line of the view: indent spaces, then head (a label,
// styled), then text. When text wraps, the continuation lines start
// indent+hang cells in.
type line struct {
	indent, hang int
	head, text   string
	kind         kind
}

const labelWidth = 16

// lines lays a record out as logical lines, every untrusted byte sanitised.
func lines(r Record) []line {
	var out []line
	if r.Note != "" {
		out = append(out, line{text: sanitize.Text(r.Note), kind: muted})
	}
	field := func(label, value string) {
		head := fmt.Sprintf("%-*s", labelWidth-1, label) + " "
		out = append(out, line{head: head, hang: ansi.StringWidth(head), text: value})
	}
	for _, f := range r.Fields {
		field(f.Label, sanitize.Text(f.Value))
	}
	if r.HasKey {
		field("key", keyText(r.KeyNull, r.Key))
	}
	out = append(out, line{}, line{text: fmt.Sprintf("headers (%d)", len(r.Headers)), kind: section})
	for _, h := range r.Headers {
		k := sanitize.Text(h.Key)
		v, _ := valueText(h.Value)
		hang := min(ansi.StringWidth(k)+3, 24)
		for i, l := range v {
			if i == 0 {
				out = append(out, line{indent: 2, hang: hang, text: k + " = " + l})
				continue
			}
			out = append(out, line{indent: 2 + hang, text: l})
		}
	}
	name := r.ValueName
	if name == "" {
		name = "value"
	}
	body, form := payloadLines(r.Value)
	desc := fmt.Sprintf("%s (%d bytes, %s", name, len(r.Value), form)
	if r.ContentType != "" {
		desc += ", content type " + sanitize.Text(r.ContentType)
	}
	out = append(out, line{}, line{text: desc + ")", kind: section})
	for _, l := range body {
		// A wrapped line continues two cells right of its own indentation,
		// so that the rest of a long JSON string does not read as a key.
		lead := len(l) - len(strings.TrimLeft(l, " "))
		out = append(out, line{indent: 2, hang: min(lead+2, 24), text: l})
	}
	return out
}

// keyText is a key as text: "(null)", the sanitised text, or hex.
func keyText(null bool, k []byte) string {
	switch {
	case null:
		return "(null)"
	case sanitize.IsBinary(k):
		return "hex:" + hex.EncodeToString(k)
	case len(k) == 0:
		return `"" (empty)`
	}
	return sanitize.Bytes(k)
}

// valueText is a header value as one or more lines: hex for binary data,
// else the sanitised text split at its line breaks (a stack trace reads as
// one frame a line). The bool reports binary.
func valueText(v []byte) ([]string, bool) {
	if sanitize.IsBinary(v) {
		return []string{"hex:" + hex.EncodeToString(v)}, true
	}
	return textLines(v), false
}

// textLines splits text at its line breaks and sanitises each line. Tabs
// become four spaces first (a stack trace's "\tat" frames stay readable);
// any other control character is escaped by the sanitiser.
func textLines(v []byte) []string {
	s := strings.TrimRight(string(v), "\r\n")
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		parts[i] = sanitize.Text(strings.ReplaceAll(strings.TrimSuffix(p, "\r"), "\t", "    "))
	}
	return parts
}

// payloadLines renders a payload: JSON pretty-printed, binary as a hex
// dump, anything else as text; form says which.
func payloadLines(v []byte) ([]string, string) {
	switch {
	case len(v) == 0:
		return []string{"(empty)"}, "empty"
	case sanitize.IsBinary(v):
		return strings.Split(strings.TrimRight(sanitize.Hex(v), "\n"), "\n"), "binary, hex dump"
	}
	if t := bytes.TrimSpace(v); len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
		var b bytes.Buffer
		if json.Indent(&b, t, "", "  ") == nil {
			return textLines(b.Bytes()), "JSON"
		}
	}
	return textLines(v), "text"
}

// Text is the record as plain text, unwrapped: what copy and save write.
// It is built from the same sanitised lines as the view.
func Text(r Record) string {
	var b strings.Builder
	if r.Where != "" {
		b.WriteString(sanitize.Text(r.Where))
		b.WriteByte('\n')
	}
	for _, l := range lines(r) {
		b.WriteString(strings.Repeat(" ", l.indent))
		b.WriteString(strings.TrimRight(l.head+l.text, " "))
		b.WriteByte('\n')
	}
	return b.String()
}

// wrap cuts s (sanitised: no escape sequences) into pieces of at most first
// cells, then at most rest cells, breaking after a space when one falls in
// the second half of the piece, else mid-word.
func wrap(s string, first, rest int) []string {
	first, rest = max(first, 1), max(rest, 1)
	var out []string
	w := first
	for {
		if cut, whole := fitCells(s, w); whole {
			return append(out, s)
		} else {
			if sp := strings.LastIndexByte(s[:cut], ' '); sp > 0 && ansi.StringWidth(s[:sp+1]) > w/2 {
				cut = sp + 1
			}
			out = append(out, s[:cut])
			s = s[cut:]
		}
		w = rest
	}
}

// fitCells returns the byte length of the longest prefix of s that is at
// most w cells wide, and whether that is all of s.
func fitCells(s string, w int) (int, bool) {
	cells := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if cells+1 > w {
				return i, false
			}
			cells++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		cw := ansi.StringWidth(s[i : i+size])
		if cells+cw > w {
			if i == 0 { // a character wider than the line still goes somewhere
				return size, size == len(s)
			}
			return i, false
		}
		cells += cw
		i += size
	}
	return len(s), true
}
