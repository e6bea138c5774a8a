package redrive

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// decodeCore is how a stored plan was read before DecodePlan: the whole
// core decoded, then rebuilt by PlanFromCore.
func decodeCore(raw []byte) (Plan, error) {
	var c Core
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Plan{}, err
	}
	return PlanFromCore(c)
}

// A stored plan read a row at a time is the plan that was stored, and an
// edited or malformed one is refused with the error the whole-core decode
// gives: the streaming read changes memory, not what is accepted.
func TestStoredPlanReadRowByRowIsThePlanStored(t *testing.T) {
	c := sampleCore()
	d := c.Rows[0].Digest
	c.Rows = append(c.Rows, Row{Loc: "1:0", Digest: d, Target: -1, Verdict: ReasonCheckFailed}, Row{Loc: "1:7", Digest: d, Target: 1})
	c.Selection.Locs = true
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeCore(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodePlan(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("row by row:\n%+v\nwhole core:\n%+v", got, want)
	}
	if h, _ := c.Hash(); got.Hash() != h {
		t.Fatalf("hash %s, stored core hashes to %s", got.Hash(), h)
	}
	if len(got.Selection.Offsets) != 4 || got.Records[3].Target != "shipment-jobs" || got.Records[2].Reason != ReasonCheckFailed {
		t.Fatalf("records %+v, offsets %v", got.Records, got.Selection.Offsets)
	}
	s := string(raw)
	edits := map[string]string{
		"unknown field":       strings.Replace(s, `"dlq":`, `"extra":1,"dlq":`, 1),
		"v1 format":           strings.Replace(s, PlanFormat, "berth-redrive-plan/v1", 1),
		"bad target":          strings.Replace(s, `,1,"already_redriven"]`, `,7,"ledger"]`, 1),
		"negative target":     strings.Replace(s, `,1,"already_redriven"]`, `,-2,"ledger"]`, 1),
		"included, no target": strings.Replace(s, `-1,"check_failed"]`, `-1,""]`, 1),
		"unknown verdict":     strings.Replace(s, `"already_redriven"]`, `"fine"]`, 1),
		"short row":           strings.Replace(s, `,1,"already_redriven"]`, `]`, 1),
		"local time":          strings.Replace(s, `.123Z"`, `.123+01:00"`, 1),
		"duplicated row":      strings.Replace(s, `"1:7"`, `"0:1"`, 1),
		"not a location":      strings.Replace(s, `"1:7"`, `"1:07"`, 1),
		"no such digest":      strings.Replace(s, `["0:1","`, `["0:1","x`, 1),
		"kafka only":          strings.Replace(s, `"backend":"kafka"`, `"backend":"rabbitmq"`, 1),
		"rows not an array":   s[:strings.Index(s, `"rows":`)] + `"rows":{}}`,
		"rows null":           s[:strings.Index(s, `"rows":`)] + `"rows":null}`,
		"targets after rows":  strings.Replace(s[:strings.Index(s, `"targets":`)]+s[strings.Index(s, `"rows":`):len(s)-1]+`,"targets":["payments","shipment-jobs"]}`, `,"rows":`, `,"rows":`, 1),
		"cut short":           s[:len(s)/2],
		"null":                "null",
		"an array":            "[1]",
		"rows a string":       s[:strings.Index(s, `"rows":`)] + `"rows":"x"}`,
		"not json at all":     "{",
	}
	for name, e := range edits {
		if e == s {
			t.Fatalf("%s: the edit did not apply", name)
		}
		want, werr := decodeCore([]byte(e))
		got, gerr := DecodePlan(strings.NewReader(e))
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Errorf("%s: row by row %v, whole core %v", name, gerr, werr)
			continue
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: row by row %+v, whole core %+v", name, got, want)
		}
	}
}
