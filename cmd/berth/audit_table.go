package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/berth-dev/berth/internal/audit"
)

// The table `berth audit` prints: one row per entry, with who signed (the
// verified signer of an approval, the approvers an execution ran under),
// what happened to it and its details as words rather than raw JSON. -o
// json keeps the entries exactly as stored.

var auditHeader = []string{"SEQ", "TIME (UTC)", "ACTOR", "SIGNER", "ACTION", "CONTEXT", "TARGET", "OUTCOME", "DETAILS"}

// auditRow is an entry's cells after SEQ, TIME and ACTOR.
type auditRow struct {
	signer, target, outcome, details string
}

// maxMoves is how many partition moves a row lists before it counts the rest.
const maxMoves = 6

var planHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// auditRowOf reads an entry's details (any shape: the log holds whatever
// each action wrote) into the table's cells.
func auditRowOf(e audit.Entry) auditRow {
	d := map[string]any{}
	if raw := e.DetailsJSON(); raw != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&d); err != nil {
			// Not an object: show it as one value, still as text.
			d = map[string]any{"details": strings.TrimSpace(string(raw))}
		}
	}
	r := auditRow{signer: auditSigner(d), target: auditTarget(e, d), outcome: auditOutcome(e.Action, d)}
	if e.Action == audit.TornAction {
		// The torn line's bytes, base64: as long as the line was, and
		// unreadable in a table; its length and sha256 stay, -o json has it.
		delete(d, "fragment")
	}
	r.details = auditDetails(d)
	return r
}

// auditSigner is the verified signer an entry names: an approval's signer,
// or the approvers an execution ran under.
func auditSigner(d map[string]any) string {
	if s, ok := d["signer"].(string); ok && s != "" {
		return s
	}
	if as, ok := d["approvers"].([]any); ok && len(as) > 0 {
		return joinValues(as)
	}
	return "-"
}

// auditTarget is the entry's target, a plan hash shortened (the JSON has it
// whole) and the DLQ it belongs to.
func auditTarget(e audit.Entry, d map[string]any) string {
	t := e.Target
	if planHash.MatchString(t) {
		t = "plan " + t[:12]
	}
	if dlq, ok := d["dlq"].(string); ok && dlq != "" && dlq != e.Target {
		t += " on " + dlq
	}
	return t
}

// auditOutcome says how the step ended.
func auditOutcome(action string, d map[string]any) string {
	str := func(k string) string { s, _ := d[k].(string); return s }
	switch {
	case action == audit.TornAction:
		return "set aside"
	case strings.HasSuffix(action, ".refused"):
		return "refused"
	case str("status") != "":
		return str("status")
	case str("phase") == "start":
		return "started"
	case str("phase") == "end" && str("error") != "":
		return "failed"
	case str("phase") == "end":
		return "finished"
	}
	if v, ok := d["approved"].(bool); ok {
		if v {
			return "approved"
		}
		return "signed; approvals still short"
	}
	if v, ok := d["ok"].(bool); ok {
		if v {
			return "verified"
		}
		return "mismatch"
	}
	if v, ok := d["blocked"].(bool); ok && v {
		return "blocked"
	}
	if str("error") != "" {
		return "failed"
	}
	switch {
	case strings.HasSuffix(action, ".started"):
		return "started"
	case strings.HasSuffix(action, ".failed"):
		return "failed"
	case strings.HasSuffix(action, ".sent"):
		return "sent"
	}
	return "done"
}

// shown are keys the other columns already carry, or that only repeat them.
var shown = map[string]bool{"signer": true, "approvers": true, "dlq": true, "plan": true, "status": true,
	"phase": true, "approved": true, "ok": true, "group": true, "cluster_id": true}

// auditDetails renders the rest of the details as words: the reason of a
// refusal first, offset moves, plan totals, then every other field as
// key value, nested fields with dotted names; an error last.
func auditDetails(d map[string]any) string {
	var parts []string
	used := map[string]bool{}
	take := func(k string) (any, bool) {
		v, ok := d[k]
		if ok {
			used[k] = true
		}
		return v, ok
	}
	if v, ok := take("reason"); ok {
		parts = append(parts, "reason: "+flat(v))
	}
	if v, ok := take("spec"); ok {
		parts = append(parts, strings.TrimSpace(flat(v)))
	}
	if v, ok := take("partitions"); ok {
		if moves := offsetMoves(v); moves != "" {
			parts = append(parts, moves)
		}
	}
	if v, ok := take("totals"); ok {
		if t, ok := v.(map[string]any); ok {
			parts = append(parts, fmt.Sprintf("%s selected, %s included, %s excluded", flat(t["selected"]), flat(t["included"]), flat(t["excluded"])))
		}
	}
	errText, hasErr := take("error")
	keys := make([]string, 0, len(d))
	for k := range d {
		if !used[k] && !shown[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fields(strings.ReplaceAll(k, "_", " "), d[k])...)
	}
	if hasErr && flat(errText) != "" {
		parts = append(parts, "error: "+flat(errText))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// offsetMoves is an offset reset's partitions as "orders[3] 120->500", the
// first few and a count of the rest.
func offsetMoves(v any) string {
	list, ok := v.([]any)
	if !ok {
		return flat(v)
	}
	var moves []string
	for i, p := range list {
		if i == maxMoves {
			moves = append(moves, fmt.Sprintf("(+%d more partitions: -o json lists them)", len(list)-maxMoves))
			break
		}
		m, _ := p.(map[string]any)
		before := "none"
		if b, ok := m["before"]; ok && b != nil {
			before = flat(b)
		}
		moves = append(moves, fmt.Sprintf("%s[%s] %s->%s", flat(m["topic"]), flat(m["partition"]), before, flat(m["after"])))
	}
	return strings.Join(moves, " ")
}

// fields flattens one value into "key value" pieces; objects give dotted
// keys, lists of plain values are joined with commas.
func fields(key string, v any) []string {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			return nil
		}
		ks := make([]string, 0, len(v))
		for k := range v {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var out []string
		for _, k := range ks {
			out = append(out, fields(key+"."+strings.ReplaceAll(k, "_", " "), v[k])...)
		}
		return out
	case []any:
		plain := true
		for _, x := range v {
			switch x.(type) {
			case map[string]any, []any:
				plain = false
			}
		}
		if !plain {
			var out []string
			for i, x := range v {
				out = append(out, fields(fmt.Sprintf("%s[%d]", key, i), x)...)
			}
			return out
		}
		if len(v) == 0 {
			return []string{key + " none"}
		}
		return []string{key + " " + joinValues(v)}
	case nil:
		return nil
	}
	if s, ok := v.(string); ok && planHash.MatchString(s) {
		return []string{key + " " + s[:12] + "…"} // a digest: -o json has it whole
	}
	return []string{key + " " + flat(v)}
}

func joinValues(vs []any) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = flat(v)
	}
	return strings.Join(s, ", ")
}

// flat is a plain value as text.
func flat(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		return v
	case bool:
		if v {
			return "yes"
		}
		return "no"
	case json.Number:
		return v.String()
	case []any:
		return joinValues(v)
	case map[string]any:
		return strings.Join(fields("", v), ", ")
	}
	return fmt.Sprint(v)
}
