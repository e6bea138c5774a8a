package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/backends/kafka"
	"github.com/berth-dev/berth/internal/kafkatest"
	tuicapacity "github.com/berth-dev/berth/tui/capacity"
)

func capacityJSONOut(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, errOut, code := runBerth(t, append([]string{"capacity", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return m
}

// TestCapacityCLI_SeedFigures: with no flags, berth capacity is the seed's
// HarborCart worksheet; the JSON carries every field the issue names,
// unrounded.
func TestCapacityCLI_SeedFigures(t *testing.T) {
	isolateConfig(t)
	m := capacityJSONOut(t)
	want := map[string]float64{
		"ingest_mib_per_s":         19.53125,
		"ingest_tb_per_day":        1.769472,
		"ingest_tib_per_day":       20480000.0 * 86400 / (1 << 40),
		"retention_logical_tib":    20480000.0 * 86400 * 3 / (1 << 40),
		"retention_replicated_tib": 20480000.0 * 86400 * 3 * 3 / (1 << 40),
		"peak_mib_per_s":           97.65625,
		"peak_gross_gib":           102400000.0 * 600 / (1 << 30),
		"peak_above_baseline_gib":  81920000.0 * 600 / (1 << 30),
		"deliveries_per_s":         60000,
		"peak_deliveries_per_s":    300000,
		"consumers_per_group":      10,
		"consumers_total":          30,
		"peak_consumers_per_group": 50,
		"peak_consumers_total":     150,
		"egress_mib_per_s":         97.65625,
		"peak_egress_mib_per_s":    488.28125,
		"partition_cap_per_s":      48000,
		"min_partitions_for_peak":  50,
		"peak_backlog_events":      31200000,
		"drain_seconds":            31200000.0 / 28000,
		"hot_partition_per_s":      6000,
		"hot_partition_multiple":   7.2,
		"other_partition_per_s":    14000.0 / 23,
	}
	for k, v := range want {
		got, ok := m[k].(float64)
		if !ok || got != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if in := m["inputs"].(map[string]any); in["avg_rate_per_s"] != 20000.0 || in["event_size_bytes"] != 1024.0 || in["retention_s"] != 259200.0 {
		t.Errorf("inputs %v", in)
	}
	if _, ok := m["measured"]; ok {
		t.Error("measured present without --from-topic")
	}
}

// TestCapacityCLI_NoConfigNeeded: the worksheet works with a broken config
// file in place and no cluster anywhere.
func TestCapacityCLI_NoConfigNeeded(t *testing.T) {
	path := isolateConfig(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("contexts: [this is: not valid"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBerth(t, "capacity")
	if code != 0 || !strings.Contains(out, "19.53 MiB/s") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// whereas a command that needs the config does read it
	if _, _, code := runBerth(t, "topics"); code == 0 {
		t.Fatal("topics succeeded with a broken config: the test is not exercising the config")
	}
}

func TestCapacityCLI_Overrides(t *testing.T) {
	isolateConfig(t)
	m := capacityJSONOut(t, "--event-size", "2KiB", "--avg-rate", "20,000", "--partitions", "60", "--headroom", "10%",
		"--compression", "2:1", "--lag-events", "1200000", "--lag-rate", "1000")
	checks := map[string]any{
		"ingest_mib_per_s":        19.53125, // twice the size, half the bytes
		"consumers_per_group":     11.0,     // 10% headroom
		"peak_backlog_events":     0.0,      // cap 120,000/s above the peak
		"drain_seconds":           0.0,
		"cap_reached":             false,
		"lag_seconds_for_events":  1200.0,
		"min_partitions_for_peak": 55.0,
	}
	for k, v := range checks {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	one := capacityJSONOut(t, "--partitions", "1")
	if one["other_partition_per_s"] != nil || one["drain_seconds"] != nil {
		t.Errorf("one partition: other %v drain %v, want null", one["other_partition_per_s"], one["drain_seconds"])
	}
}

// TestCapacityCLI_BadFlags: a bad value exits 2 with one line naming the
// flag and the reason.
func TestCapacityCLI_BadFlags(t *testing.T) {
	isolateConfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "0"}, "--partitions: must be at least 1"},
		{[]string{"--partitions", "2.5"}, "--partitions: 2.5 is not a whole number"},
		{[]string{"--event-size", "1K"}, `--event-size: unknown unit "K"`},
		{[]string{"--retention", "72"}, `--retention: "72" needs a unit`},
		{[]string{"--avg-rate", "abc"}, `--avg-rate: "abc" is not a number`},
		{[]string{"--avg-rate", "-5"}, "--avg-rate: must not be negative"},
		{[]string{"--consumer-rate", "0"}, "--consumer-rate: must be greater than 0"},
		{[]string{"--peak-rate", "5000"}, "--peak-rate: 5,000/s is below the average rate 20,000/s"},
		{[]string{"--hot-key-share", "1.5"}, "--hot-key-share: is absurdly large"},
		{[]string{"--event-size", "5GiB"}, "--event-size: is absurdly large"},
		{[]string{"--avg-rate", ""}, "--avg-rate: is empty"},
		{[]string{"-o", "yaml"}, `--output: "yaml" is not one of table, json, markdown`},
		{[]string{"--from-topic", "x", "--from-all-topics"}, "choose one"},
		{[]string{"--measure", "-1s"}, "--measure: must not be negative"},
		{[]string{"--measure", "5s"}, "--measure: only with --from-topic"},
		{[]string{"--sample", "50"}, "--sample: only with --from-topic"},
		{[]string{"--nope"}, "unknown flag: --nope"},
	} {
		out, errOut, code := runBerth(t, append([]string{"capacity"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.args, code, errOut, out, tc.want)
		}
	}
}

func TestCapacityCLI_TableAndMarkdown(t *testing.T) {
	isolateConfig(t)
	out, _, code := runBerth(t, "capacity")
	if code != 0 {
		t.Fatal(code)
	}
	for _, want := range []string{"19.53 MiB/s", "1.769 TB/day", "1.609 TiB/day", "4.83 TiB", "14.48 TiB", "57.22 GiB", "45.78 GiB",
		"60,000/s", "300,000/s", "10 per group", "150 total", "488.28 MiB/s", "48,000/s", "≥50 partitions", "7.2×", "≈609/s each",
		"19.53 MiB/s × (3 groups + 2 follower copies)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	md, _, code := runBerth(t, "capacity", "-o", "markdown")
	if code != 0 {
		t.Fatal(code)
	}
	if !strings.Contains(md, "| STEP | FIGURE | VALUE | WORKING |") || !strings.Contains(md, "| 6 Broker network | broker egress | 97.66 MiB/s |") {
		t.Errorf("markdown:\n%s", md)
	}
}

// TestCapacityCLI_FromTopic prefills from a live (in-process) cluster: the
// measured fields are marked, explicit flags win, and the rate is left
// alone with --measure 0.
func TestCapacityCLI_FromTopic(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 6, 1, map[string]string{"retention.ms": "86400000"})
	recs := make([]*kgo.Record, 60)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders", Value: bytes.Repeat([]byte("x"), 500)}
	}
	kc.Produce(t, recs...)
	kc.Commit(t, "billing", map[string]map[int32]int64{"orders": {0: 0}})
	kc.Commit(t, "analytics", map[string]map[int32]int64{"orders": {0: 0}})

	m := capacityJSONOut(t, "--bootstrap", kc.Addrs[0], "--from-topic", "orders", "--measure", "0s", "--partitions", "12")
	in := m["inputs"].(map[string]any)
	if in["event_size_bytes"] != 500.0 || in["replication_factor"] != 1.0 || in["retention_s"] != 86400.0 || in["groups"] != 2.0 {
		t.Errorf("inputs %v: want 500 B records, RF 1, 1 day, 2 groups measured", in)
	}
	if in["partitions"] != 12.0 || in["avg_rate_per_s"] != 20000.0 {
		t.Errorf("flag or default lost: partitions %v avg %v", in["partitions"], in["avg_rate_per_s"])
	}
	meas := m["measured"].(map[string]any)
	var fields []string
	for _, f := range meas["fields"].([]any) {
		fields = append(fields, f.(string))
	}
	slices.Sort(fields)
	if want := []string{"event-size", "groups", "replication-factor", "retention"}; !slices.Equal(fields, want) {
		t.Errorf("measured fields %v, want %v", fields, want)
	}
	if meas["topic"] != "orders" || meas["records_sampled"] != 60.0 {
		t.Errorf("measured %v", meas)
	}

	// the table marks the measured fields with where and how long
	out, _, code := runBerth(t, "--bootstrap", kc.Addrs[0], "capacity", "--from-topic", "orders", "--measure", "0s")
	if code != 0 || !strings.Contains(out, "measured: orders, measured\n") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestCapacityCLI_MeasuredZeroRate: an idle topic measures 0 events/s; that
// is not the user's typing, so it exits 1 and says how to override.
func TestCapacityCLI_MeasuredZeroRate(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "idle", 1, 1, nil)
	_, errOut, code := runBerth(t, "--bootstrap", kc.Addrs[0], "capacity", "--from-topic", "idle", "--measure", "1s")
	if code != 1 || !strings.Contains(errOut, "--avg-rate: must be greater than 0 (idle, measured over 1s); set --avg-rate to override") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestCapacityCLI_Unreachable(t *testing.T) {
	isolateConfig(t)
	_, errOut, code := runBerth(t, "--bootstrap", "127.0.0.1:1", "--timeout", "2s", "capacity", "--from-topic", "orders")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestCapacityConsolePrefill: the console's :capacity page measures through
// the hook this package installs, on the console's Kafka cluster.
func TestCapacityConsolePrefill(t *testing.T) {
	if tuicapacity.Measure == nil {
		t.Fatal("the :capacity page has no measurement hook")
	}
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 4, 1, map[string]string{"retention.ms": "7200000"})
	kc.Produce(t, &kgo.Record{Topic: "orders", Value: bytes.Repeat([]byte("x"), 321)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.Options{Bootstrap: kc.Addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.NewCluster(c)
	defer cl.Close()
	m, err := tuicapacity.Measure(ctx, cl, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Topic != "orders" || m.Partitions != 4 || m.EventSize != 321 || m.Retention != 2*time.Hour {
		t.Errorf("measurement %+v", m)
	}
}

// TestCapacityCLI_ProgressLineEscapesTopic: the "measuring topic …" line on
// stderr echoes the topic name; escape sequences in it are shown escaped.
func TestCapacityCLI_ProgressLineEscapesTopic(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	_, errOut, code := runBerth(t, "--bootstrap", kc.Addrs[0], "capacity", "--from-topic", "x\x1b[2Jy", "--measure", "1s")
	if code != 1 || strings.ContainsRune(errOut, 0x1b) || !strings.Contains(errOut, `measuring topic x\e[2Jy`) {
		t.Fatalf("exit %d: %q", code, errOut)
	}
}
