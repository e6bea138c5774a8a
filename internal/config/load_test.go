package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The example in the documentation must be a valid configuration.
func TestDocumentedExampleIsValid(t *testing.T) {
	readme, err := os.ReadFile("../../cmd/berth/help/config.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index("\n"+string(readme), "\n# Configuration\n")
	if i < 0 {
		t.Fatal("help/config.md has no Configuration section")
	}
	doc := readme[i:]
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("no ```yaml block in the documentation")
	}
	c, err := Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Contexts) != 6 || c.Contexts["prod"].SASL.Mechanism != "SCRAM-SHA-512" || c.Contexts["rabbit"].Kind != "rabbitmq" ||
		len(c.Contexts["cloud"].SASL.TokenCommand) != 3 || c.Contexts["msk"].SASL.Mechanism != SASLAWSMSKIAM {
		t.Fatalf("example parsed to %+v", c.Contexts)
	}
	if p, slo := c.GroupPolicyFor("payments-capture"); !p.Effects || slo.Seconds() != 30 {
		t.Fatalf("payments-* policy: %+v %s", p, slo)
	}
}

// Every field the file can hold needs a yaml tag: without one, yaml.v3
// would expect the lower-cased Go name, and the documented key would be
// rejected as unknown.
func TestEveryConfigFieldHasAYAMLTag(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] || ty.PkgPath() != reflect.TypeOf(Config{}).PkgPath() {
			return
		}
		seen[ty] = true
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			tag := f.Tag.Get("yaml")
			if tag == "" {
				t.Errorf("%s.%s has no yaml tag", path, f.Name)
			}
			if tag == "-" {
				continue
			}
			walk(f.Type, path+"."+strings.Split(tag, ",")[0])
		}
	}
	walk(reflect.TypeOf(Config{}), "config")
}

func TestParseErrorsNameLineAndField(t *testing.T) {
	for in, want := range map[string]string{
		"contexts:\n  prod:\n    kind: kafka\n    bootstrapp: [a:1]\n": `line 4: unknown field "bootstrapp"`,
		"refresh: soon\n": `line 1: refresh: "soon" is not a duration`,
		"contexts:\n  prod:\n    read_only: maybe\n": `line 3: read_only: "maybe" is not true or false`,
		"contexts: [1,2]\n":                          `line 1: contexts: a list is not a mapping`,
		"contexts:\n  prod\n    kind: kafka\n":       `line 3: mapping values are not allowed`,
		"lag: {}\n---\nlag: {}\n":                    `more than one YAML document`,
	} {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
	c, err := Parse([]byte("contexts:\n  Prod:\n    bootstrap: [h:1]\n"))
	if err != nil || c.Contexts["Prod"].Bootstrap[0] != "h:1" {
		t.Fatalf("context names must keep their case: %v %+v", err, c)
	}
	if c, err := Parse(nil); err != nil || c == nil {
		t.Fatalf("empty file: %v", err)
	}
}
