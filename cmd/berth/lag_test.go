package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/internal/kafkatest"
)

func lagCluster(t *testing.T) *kafkatest.Cluster {
	t.Helper()
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 2, 3, map[string]string{"min.insync.replicas": "2"})
	now := time.Now()
	kc.ProduceTo(t, "orders", 0, 10, now.Add(-time.Hour), time.Second)
	kc.ProduceTo(t, "orders", 1, 4, now.Add(-10*time.Second), time.Second)
	kc.Commit(t, "billing", map[string]map[int32]int64{"orders": {0: 4, 1: 4}})
	kc.Commit(t, "fresh", map[string]map[int32]int64{"orders": {0: 10, 1: 4}})
	return kc
}

func TestLagJSON(t *testing.T) {
	isolateConfig(t)
	kc := lagCluster(t)
	var doc struct {
		Context       string           `json:"context"`
		WindowSeconds float64          `json:"window_seconds"`
		Groups        []map[string]any `json:"groups"`
		Partitions    []map[string]any `json:"partitions"`
		Warnings      []string         `json:"warnings"`
	}
	out, errOut, code := runBerth(t, "--bootstrap", strings.Join(kc.Addrs, ","), "-o", "json", "lag", "--sample", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.Groups) != 2 || len(doc.Partitions) != 4 || len(doc.Warnings) != 0 {
		t.Fatalf("groups %d partitions %d warnings %v", len(doc.Groups), len(doc.Partitions), doc.Warnings)
	}
	for _, field := range []string{"group", "topic", "partition", "committed", "log_start", "end", "lag", "age_seconds", "timestamp_type", "status", "produce_rate", "consume_rate", "eta_seconds"} {
		if _, ok := doc.Partitions[0][field]; !ok {
			t.Errorf("partition rows lack %q: %v", field, doc.Partitions[0])
		}
	}
	var p0 map[string]any
	for _, p := range doc.Partitions {
		if p["group"] == "billing" && p["partition"] == 0.0 {
			p0 = p
		}
	}
	// Committed 4 of 10 records a second apart from an hour ago: the oldest
	// unread is 3596 s old (to the second, the test's clock vs the command's).
	if age, _ := p0["age_seconds"].(float64); p0["lag"] != 6.0 || age < 3596 || age > 3600 || p0["timestamp_type"] != "CreateTime" || p0["status"] != "STOPPED" {
		t.Fatalf("billing orders[0]: %v", p0)
	}
	billing := doc.Groups[0]
	if billing["group"] != "billing" || billing["total_lag"] != 6.0 || billing["breach"] != true || billing["max_age_partition"] != 0.0 {
		t.Fatalf("billing roll-up: %v", billing)
	}
	fresh := doc.Groups[1]
	if fresh["status"] != "OK" || fresh["total_lag"] != 0.0 || fresh["breach"] != false {
		t.Fatalf("fresh roll-up: %v", fresh)
	}
}

func TestLagExitCodesAndTable(t *testing.T) {
	isolateConfig(t)
	kc := lagCluster(t)
	boot := strings.Join(kc.Addrs, ",")
	// billing's oldest unread record is an hour old: over the default 5m SLO.
	out, errOut, code := runBerth(t, "--bootstrap", boot, "lag", "--sample", "0", "--fail-on-breach")
	if code != 3 || !strings.Contains(errOut, "SLO breached: billing") {
		t.Fatalf("breach: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "billing") || !strings.Contains(out, "BREACH") || !strings.Contains(out, "STOPPED") {
		t.Fatalf("table:\n%s", out)
	}
	// A group within its SLO passes.
	if _, errOut, code := runBerth(t, "--bootstrap", boot, "lag", "fresh", "--sample", "0", "--fail-on-breach"); code != 0 {
		t.Fatalf("fresh: exit %d %s", code, errOut)
	}
	// Per-group SLOs from the config: billing may be an hour and a half old.
	cfg := writeConfig(t, "contexts:\n  test:\n    kind: kafka\n    bootstrap: ["+boot+"]\ncurrent_context: test\ngroups:\n  - match: bill*\n    slo: 90m\n")
	if _, errOut, code := runBerth(t, "--config", cfg, "lag", "billing", "--sample", "0", "--fail-on-breach"); code != 0 {
		t.Fatalf("billing with a 90m SLO: exit %d %s", code, errOut)
	}
	if _, errOut, code := runBerth(t, "--bootstrap", boot, "lag", "nope", "--sample", "0"); code != 1 || !strings.Contains(errOut, "group nope not found") {
		t.Fatalf("unknown group: exit %d %q", code, errOut)
	}
	for _, args := range [][]string{
		{"lag", "--interval", "10ms", "--watch"},
		{"lag", "--sample", "-1s"},
		{"-o", "markdown", "lag"},
		{"health", "extra"},
	} {
		if _, errOut, code := runBerth(t, append([]string{"--bootstrap", boot}, args...)...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errOut)
		}
	}
}

func TestLagSanitisesNamesAndTimesOut(t *testing.T) {
	isolateConfig(t)
	kc := lagCluster(t)
	kc.Commit(t, "evil\x1b[2J\x07", map[string]map[int32]int64{"orders": {0: 1}})
	out, _, code := runBerth(t, "--bootstrap", strings.Join(kc.Addrs, ","), "lag", "--sample", "0")
	if code != 0 || strings.ContainsAny(out, "\x1b\x07") {
		t.Fatalf("exit %d, escape sequences reached the table: %q", code, out)
	}
	// An address nothing listens on: a one-line error naming it, promptly.
	start := time.Now()
	_, errOut, code := runBerth(t, "--bootstrap", "127.0.0.1:1", "--timeout", "1s", "lag")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:1") || time.Since(start) > 10*time.Second {
		t.Fatalf("unreachable: exit %d after %s: %q", code, time.Since(start), errOut)
	}
}

func TestHealthJSON(t *testing.T) {
	isolateConfig(t)
	kc := lagCluster(t)
	// Two brokers leave every ISR: orders (min ISR 2) can no longer take
	// acks=all writes; partitions they led are offline. The survivor is
	// the leader of orders[0] (the backend fails outright when no partition
	// has a leader at all).
	real, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), kc.Client)
	if err != nil {
		t.Fatal(err)
	}
	var up int32 = -1
	for _, rt := range real.Topics {
		for _, p := range rt.Partitions {
			if *rt.Topic == "orders" && p.Partition == 0 {
				up = p.Leader
			}
		}
	}
	kc.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kr.(*kmsg.MetadataRequest)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version = req.Version
		resp.Brokers, resp.ClusterID, resp.ControllerID = real.Brokers, real.ClusterID, real.ControllerID
		for _, rt := range real.Topics {
			nt := rt
			nt.Partitions = nil
			for _, p := range rt.Partitions {
				np := p
				np.ISR = []int32{up}
				if p.Leader != up {
					np.Leader = -1
				}
				nt.Partitions = append(nt.Partitions, np)
			}
			resp.Topics = append(resp.Topics, nt)
		}
		return resp, nil, true
	})
	var doc struct {
		ISR struct {
			UnderMinISR   int              `json:"under_min_isr"`
			Offline       int              `json:"offline"`
			WritesBlocked int              `json:"writes_blocked"`
			Partitions    []map[string]any `json:"partitions"`
		} `json:"isr"`
		Hot      []any            `json:"hot_partitions"`
		Brokers  []map[string]any `json:"brokers"`
		Breaches []map[string]any `json:"breaches"`
	}
	out, errOut, code := runBerth(t, "--bootstrap", strings.Join(kc.Addrs, ","), "-o", "json", "health", "--sample", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.ISR.UnderMinISR+doc.ISR.Offline != 2 || doc.ISR.WritesBlocked != 2 || len(doc.ISR.Partitions) != 2 {
		t.Fatalf("isr: %+v", doc.ISR)
	}
	if len(doc.Brokers) != 3 || doc.Hot == nil {
		t.Fatalf("brokers %v hot %v", doc.Brokers, doc.Hot)
	}
	if len(doc.Breaches) != 1 || doc.Breaches[0]["group"] != "billing" {
		t.Fatalf("breaches %v", doc.Breaches)
	}
	// The table says writes are blocked.
	out, _, _ = runBerth(t, "--bootstrap", strings.Join(kc.Addrs, ","), "health", "--sample", "0")
	if !strings.Contains(out, "acks=all writes are blocked on 2 partition(s)") {
		t.Fatalf("table:\n%s", out)
	}
}

// An abandoned group (no members, its backlog three hours old) is listed
// apart, after the live groups, in berth lag's table and berth health; JSON
// marks it inactive.
func TestLagListsInactiveGroupsApart(t *testing.T) {
	isolateConfig(t)
	kc := lagCluster(t)
	kc.CreateTopic(t, "reports", 1, 1, nil)
	kc.ProduceTo(t, "reports", 0, 5, time.Now().Add(-3*time.Hour), time.Second)
	kc.Commit(t, "aa-old-reports", map[string]map[int32]int64{"reports": {0: 1}})
	boot := strings.Join(kc.Addrs, ",")
	out, errOut, code := runBerth(t, "--bootstrap", boot, "lag", "--sample", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	live, idle, found := strings.Cut(out, inactiveTitle)
	if !found || strings.Contains(live, "aa-old-reports") || !strings.Contains(idle, "aa-old-reports") || !strings.Contains(live, "billing") {
		t.Fatalf("the abandoned group is not apart after the live ones:\n%s", out)
	}
	out, _, _ = runBerth(t, "--bootstrap", boot, "-o", "json", "lag", "--sample", "0")
	var doc struct {
		Groups []struct {
			Group    string `json:"group"`
			Inactive bool   `json:"inactive"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, g := range doc.Groups {
		if g.Inactive != (g.Group == "aa-old-reports") {
			t.Errorf("%s: inactive %v", g.Group, g.Inactive)
		}
	}
	out, _, _ = runBerth(t, "--bootstrap", boot, "health", "--sample", "0")
	live, idle, found = strings.Cut(out, inactiveTitle)
	if !found || strings.Contains(live, "aa-old-reports") || !strings.Contains(idle, "aa-old-reports") {
		t.Fatalf("health does not list the abandoned group's breach apart:\n%s", out)
	}
}

// lag.event_time from the config file through berth lag -o json: the event
// age comes from the payload (ten minutes) while the ingest age is seconds;
// the group's event SLO (2m) is breached, its ingest SLO is not.
func TestLagEventTimeFromConfig(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "outbox-orders", 1, 1, nil)
	now := time.Now()
	kc.Produce(t, &kgo.Record{Topic: "outbox-orders", Timestamp: now.Add(-2 * time.Second),
		Value: []byte(`{"eventTime":"` + now.Add(-10*time.Minute).UTC().Format(time.RFC3339Nano) + `"}`)})
	kc.Commit(t, "shipper", map[string]map[int32]int64{"outbox-orders": {0: 0}})
	cfg := writeConfig(t, "contexts:\n  test:\n    kind: kafka\n    bootstrap: ["+strings.Join(kc.Addrs, ",")+"]\ncurrent_context: test\n"+
		"lag:\n  event_time:\n    - match: outbox-*\n      field: json:eventTime\ngroups:\n  - match: shipper\n    event_slo: 2m\n")
	out, errOut, code := runBerth(t, "--config", cfg, "-o", "json", "lag", "--sample", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Groups     []map[string]any `json:"groups"`
		Partitions []map[string]any `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	p, g := doc.Partitions[0], doc.Groups[0]
	ev, _ := p["event_age_seconds"].(float64)
	age, _ := p["age_seconds"].(float64)
	if ev < 599 || ev > 605 || age > 10 {
		t.Fatalf("event age %v, ingest age %v: %v", p["event_age_seconds"], p["age_seconds"], p)
	}
	if g["event_breach"] != true || g["breach"] != false || g["event_slo_seconds"] != 120.0 || g["max_event_age_seconds"] != p["event_age_seconds"] {
		t.Fatalf("group: %v", g)
	}
	bad := writeConfig(t, "lag:\n  event_time:\n    - match: outbox-*\n      field: eventTime\n")
	if _, errOut, code := runBerth(t, "--config", bad, "lag"); code == 0 || !strings.Contains(errOut, "lag.event_time[0].field") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
		t.Fatalf("a bad field: exit %d, %q", code, errOut)
	}
}
