package redrive

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// Extract returns the field's value in a record, and whether it was there and
// non-empty. The last occurrence of a repeated header wins. JSON strings are
// returned as is; numbers in their exact decimal form; other JSON values
// (objects, booleans, null) do not count as a value.
func (f Field) Extract(headers []Header, value []byte) (string, bool) {
	switch f.Kind {
	case "header":
		for i := len(headers) - 1; i >= 0; i-- {
			if headers[i].Key == f.Name {
				v := string(headers[i].Value)
				return v, v != ""
			}
		}
		return "", false
	case "json":
		return jsonField(value, strings.Split(f.Name, "."))
	}
	return "", false
}

func jsonField(value []byte, path []string) (string, bool) {
	doc, ok := decodeJSON(value)
	if !ok {
		return "", false
	}
	return walkJSON(doc, path)
}

// decodeJSON decodes a payload that is a JSON object (numbers kept exact).
func decodeJSON(value []byte) (any, bool) {
	value = bytes.TrimSpace(value)
	if len(value) == 0 || value[0] != '{' {
		return nil, false
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	return doc, true
}

// walkJSON follows path in a decoded document (see Field.Extract).
func walkJSON(cur any, path []string) (string, bool) {
	for _, p := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		cur, ok = obj[p]
		if !ok {
			return "", false
		}
	}
	switch v := cur.(type) {
	case string:
		return v, v != ""
	case json.Number:
		return v.String(), true
	}
	return "", false
}

// extract returns the event id and the idempotency key of a record,
// decoding a JSON payload once when both live in it (the payload decode is
// most of what parsing a record costs).
func (x Extractors) extract(headers []Header, value []byte) (eventID, idempotencyKey string) {
	if x.EventID.Kind != "json" || x.IdempotencyKey.Kind != "json" {
		eventID, _ = x.EventID.Extract(headers, value)
		idempotencyKey, _ = x.IdempotencyKey.Extract(headers, value)
		return eventID, idempotencyKey
	}
	doc, ok := decodeJSON(value)
	if !ok {
		return "", ""
	}
	eventID, _ = walkJSON(doc, strings.Split(x.EventID.Name, "."))
	idempotencyKey, _ = walkJSON(doc, strings.Split(x.IdempotencyKey.Name, "."))
	return eventID, idempotencyKey
}
