package redrive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// DefaultEventID is where the event id (and, unless a policy says otherwise,
// the idempotency key) is read from.
const DefaultEventID = "json:eventId"

// Field says where a value lives in a record: a header (header:NAME) or a
// JSON field of the payload (json:FIELD, dots for nested objects:
// json:payment.id).
type Field struct {
	Kind string // "header" or "json"
	Name string
}

// ParseField parses header:NAME or json:FIELD; "" means DefaultEventID.
func ParseField(s string) (Field, error) {
	if s == "" {
		s = DefaultEventID
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" || (kind != "header" && kind != "json") {
		return Field{}, fmt.Errorf("%q must be json:FIELD or header:NAME", s)
	}
	return Field{Kind: kind, Name: name}, nil
}

func (f Field) String() string { return f.Kind + ":" + f.Name }

// Extract returns the field's value in a record, and whether it was there,
// non-empty and unambiguous. JSON strings are returned as is; numbers in
// their exact decimal form; other JSON values (objects, booleans, null) do
// not count as a value.
//
// An ambiguous value counts as none: a header repeated with different
// values, a JSON key repeated in an object on the field's path, or content
// after the payload's JSON document. Parsers disagree on those (the first
// or the last occurrence, or an error), so the key Berth would check in the
// system of record could be another than the one the consumer acts on: a
// payment whose key cannot be read one way only is never redriven on the
// strength of a guess (policies requiring a key exclude it).
func (f Field) Extract(headers []Header, value []byte) (string, bool) {
	switch f.Kind {
	case "header":
		return headerField(headers, f.Name)
	case "json":
		v := jsonFields(value, [][]string{strings.Split(f.Name, ".")})
		return v[0], v[0] != ""
	}
	return "", false
}

// headerField is the value of the header name: one occurrence, or several
// with the same value.
func headerField(headers []Header, name string) (string, bool) {
	v, found := "", false
	for _, h := range headers {
		if h.Key != name {
			continue
		}
		if found && string(h.Value) != v {
			return "", false
		}
		v, found = string(h.Value), true
	}
	return v, v != ""
}

// jsonFields returns the value at each path in value, a payload that must
// be exactly one JSON object ("" for a path that is missing, not a string
// or number, or ambiguous). One pass reads the payload for every path.
func jsonFields(value []byte, paths [][]string) []string {
	out := make([]string, len(paths))
	value = bytes.TrimSpace(value)
	if len(value) == 0 || value[0] != '{' {
		return out
	}
	want := make([]int, len(paths))
	for i := range want {
		want[i] = i
	}
	if !lookupJSON(value, paths, 0, want, out) {
		clear(out)
	}
	return out
}

// lookupJSON reads the object doc (the value at depth of the paths in want)
// and fills out for those paths. It returns false when doc is not exactly
// one valid JSON object. A member a path goes through is read as raw JSON,
// others are skipped unread; a key on a path seen twice in this object
// makes every path through it ambiguous ("").
func lookupJSON(doc []byte, paths [][]string, depth int, want []int, out []string) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	members := map[string]json.RawMessage{}
	repeated := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return false
		}
		for _, i := range want {
			if paths[i][depth] == key {
				if _, seen := members[key]; seen {
					repeated[key] = true
				}
				members[key] = raw
				break
			}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		return false // content after the document
	}
	next := map[string][]int{}
	for _, i := range want {
		key := paths[i][depth]
		raw, ok := members[key]
		switch {
		case !ok || repeated[key]:
		case depth == len(paths[i])-1:
			out[i] = scalarJSON(raw)
		case len(raw) > 0 && raw[0] == '{':
			next[key] = append(next[key], i)
		}
	}
	for key, idx := range next {
		if !lookupJSON(members[key], paths, depth+1, idx, out) {
			return false
		}
	}
	return true
}

// scalarJSON is a JSON string's text or a number's exact decimal form; ""
// for anything else.
func scalarJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&n) != nil {
		return ""
	}
	return n.String()
}

// extract returns the event id and the idempotency key of a record, reading
// a JSON payload once when both live in it (the payload read is most of
// what parsing a record costs).
func (x Extractors) extract(headers []Header, value []byte) (eventID, idempotencyKey string) {
	if x.EventID.Kind != "json" || x.IdempotencyKey.Kind != "json" {
		eventID, _ = x.EventID.Extract(headers, value)
		idempotencyKey, _ = x.IdempotencyKey.Extract(headers, value)
		return eventID, idempotencyKey
	}
	v := jsonFields(value, [][]string{strings.Split(x.EventID.Name, "."), strings.Split(x.IdempotencyKey.Name, ".")})
	return v[0], v[1]
}
