package config

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Ordered is a mapping that keeps its keys in the order given, in both JSON
// and YAML: printed configuration reads in the order of the file format,
// and JSON output is byte-for-byte stable.
type Ordered []KV

// KV is one entry of an Ordered mapping.
type KV struct {
	Key   string
	Value any
}

// MarshalJSON writes the entries in order.
func (o Ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(kv.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(kv.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// MarshalYAML writes the entries in order.
func (o Ordered) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, kv := range o {
		var v yaml.Node
		if err := v.Encode(kv.Value); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: kv.Key}, &v)
	}
	return n, nil
}

// View turns a config value (a *Config, a Context, ...) into plain ordered
// data for printing: keys are the YAML field names in declaration order,
// maps are sorted by key, durations read as in the file ("5m", "1h30m")
// rather than nanoseconds. With omitEmpty, zero values are left out so the
// YAML shows only what is set; JSON callers pass false so every documented
// field is always present. Secrets must be masked before (Config.Redacted).
func View(v any, omitEmpty bool) any {
	out, _ := view(reflect.ValueOf(v), omitEmpty)
	return out
}

var durationType = reflect.TypeOf(time.Duration(0))

// view returns the printable form of v and whether v is empty.
func view(v reflect.Value, omitEmpty bool) (any, bool) {
	if !v.IsValid() {
		return nil, true
	}
	if v.Type() == durationType {
		d := time.Duration(v.Int())
		return FormatDuration(d), d == 0
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, true
		}
		return view(v.Elem(), omitEmpty)
	case reflect.Struct:
		o := Ordered{}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			fv, empty := view(v.Field(i), omitEmpty)
			if empty && omitEmpty {
				continue
			}
			o = append(o, KV{name, fv})
		}
		return o, len(o) == 0
	case reflect.Map:
		keys := make([]string, 0, v.Len())
		byKey := map[string]reflect.Value{}
		for _, k := range v.MapKeys() {
			s := k.String()
			keys = append(keys, s)
			byKey[s] = v.MapIndex(k)
		}
		sort.Strings(keys)
		o := Ordered{}
		for _, k := range keys {
			fv, _ := view(byKey[k], omitEmpty)
			o = append(o, KV{k, fv})
		}
		return o, len(o) == 0
	case reflect.Slice, reflect.Array:
		items := make([]any, 0, v.Len())
		for i := 0; i < v.Len(); i++ {
			fv, _ := view(v.Index(i), omitEmpty)
			items = append(items, fv)
		}
		return items, len(items) == 0
	}
	return v.Interface(), v.IsZero()
}

// FormatDuration prints d the way it is written in the config file: "5m",
// "1h30m", "250ms" rather than Go's "5m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
