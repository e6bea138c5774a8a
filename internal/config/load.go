package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads and parses the YAML config file at path. It does not apply
// defaults or validate. Errors are one line, start with the path and name
// the line and the field ("config.yaml: line 7: unknown field "bootstrapp"").
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: config file not found", path)
		}
		return nil, fmt.Errorf("%s: %v", path, errors.Unwrap(err))
	}
	c, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Source = path
	return c, nil
}

// Parse decodes a YAML config. Unknown keys are errors (a misspelt key would
// otherwise be ignored silently, e.g. a read_only that never applies).
// Context names keep their case.
func Parse(raw []byte) (*Config, error) {
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlErr(raw, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errors.New("more than one YAML document; put everything in one")
	}
	return c, nil
}

var (
	notFound  = regexp.MustCompile(`field (\S+) not found in type \S+`)
	intoType  = regexp.MustCompile(`cannot unmarshal (!!\w+)(?: ` + "`" + `([^` + "`" + `]*)` + "`" + `)? into (\S+)`)
	lineNo    = regexp.MustCompile(`^line (\d+): `)
	keyOnLine = regexp.MustCompile(`^\s*(?:-\s+)?([A-Za-z0-9_.-]+)\s*:`)
	typeNames = map[string]string{
		"time.Duration": "a duration (e.g. 30s, 5m, 2h)",
		"bool":          "true or false",
		"int":           "a whole number",
		"string":        "a string",
	}
)

// yamlErr turns yaml.v3's errors into one line naming the line and field:
// "line 7: unknown field "bootstrapp"", "line 3: refresh: "soon" is not a
// duration (e.g. 30s, 5m, 2h)".
func yamlErr(raw []byte, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg := withKey(raw, tidy(te.Errors[0]))
		if n := len(te.Errors) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more problem(s))", n)
		}
		return errors.New(msg)
	}
	return errors.New(tidy(strings.TrimPrefix(err.Error(), "yaml: ")))
}

func tidy(s string) string {
	s = strings.TrimPrefix(s, "yaml: ")
	s = notFound.ReplaceAllString(s, `unknown field "$1"`)
	if m := intoType.FindStringSubmatch(s); m != nil {
		want := typeNames[m[3]]
		if want == "" {
			want = strings.TrimPrefix(m[3], "config.")
			if strings.HasPrefix(want, "map[") {
				want = "a mapping"
			} else if strings.HasPrefix(want, "[]") {
				want = "a list"
			} else {
				want = "a " + want + " mapping"
			}
		}
		value := fmt.Sprintf("%q", m[2])
		if m[1] == "!!map" || m[1] == "!!seq" {
			value = map[string]string{"!!map": "a mapping", "!!seq": "a list"}[m[1]]
		}
		s = intoType.ReplaceAllString(s, fmt.Sprintf("%s is not %s", value, want))
	}
	return strings.Join(strings.Fields(s), " ")
}

// withKey adds the key written on the error's line, so a type error names
// the field as well as the line: "line 3: refresh: "soon" is not a duration".
func withKey(raw []byte, msg string) string {
	m := lineNo.FindStringSubmatch(msg)
	if m == nil || strings.Contains(msg, "unknown field") {
		return msg
	}
	var n int
	fmt.Sscan(m[1], &n)
	lines := strings.Split(string(raw), "\n")
	if n < 1 || n > len(lines) {
		return msg
	}
	k := keyOnLine.FindStringSubmatch(lines[n-1])
	if k == nil {
		return msg
	}
	return m[0] + k[1] + ": " + strings.TrimPrefix(msg, m[0])
}
