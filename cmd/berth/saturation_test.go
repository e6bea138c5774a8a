package main

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A shift past the int64 range is still a shift: forward saturates to the
// log end and backward to the log start, both through the plan and through
// --execute. Before, +MaxInt64 wrapped into a rewind to the log start.
func TestOffsetsResetShiftBySaturatesInsteadOfWrapping(t *testing.T) {
	kc, _ := resetCluster(t)
	for _, tc := range []struct {
		shift   int64
		want    int64
		clamped string
	}{
		{math.MaxInt64, 10, "log-end"},
		{math.MinInt64, 0, "log-start"},
	} {
		arg := strconv.FormatInt(tc.shift, 10)
		got, errOut, code := resetRun(t, kc, "g", "--shift-by", arg, "--all-topics")
		if code != 0 {
			t.Fatalf("--shift-by %s: exit %d: %s", arg, code, errOut)
		}
		for _, r := range got.Partitions {
			if r.Target != tc.want || r.ClampedTo != tc.clamped {
				t.Fatalf("--shift-by %s: %s[%d] target %d (clamped to %q); want %d (%s)", arg, r.Topic, r.Partition, r.Target, r.ClampedTo, tc.want, tc.clamped)
			}
		}
	}
	if _, errOut, code := resetRun(t, kc, "g", "--shift-by", strconv.FormatInt(math.MaxInt64, 10), "--all-topics", "--execute"); code != 0 {
		t.Fatalf("--execute: exit %d: %s", code, errOut)
	}
	if c := committedOf(t, kc, "g"); c[0] != 10 || c[1] != 10 {
		t.Fatalf("after a huge forward shift the group is at %v; want the log end (10) on both partitions", c)
	}
}

// Read and scan limits: a non-positive count is a usage error naming the
// flag (before, --read -1 silently meant the default), and a huge
// --scan-limit plans normally (before, the scan's deadline overflowed into
// the past and the plan failed at once).
func TestDLQCountFlagsAreRangeChecked(t *testing.T) {
	f := newRedriveFixture(t, 2, "    - match: \"ledger-events.DLT\"\n      review: none\n")
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"dlq", "classes", "ledger-events.DLT", "--limit", "-1"}, "--limit"},
		{[]string{"dlq", "show", "ledger-events.DLT", "--read", "0"}, "--read"},
		{[]string{"redrive", "plan", "ledger-events.DLT", "--offsets", "0:0", "--read", "-5", "--out", filepath.Join(t.TempDir(), "p.json")}, "--read"},
	} {
		_, errOut, code := runBerth(t, append([]string{"--config", f.config}, tc.args...)...)
		if code != 2 || !strings.HasPrefix(errOut, "berth: "+tc.flag+":") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s", tc.args, code, errOut, tc.flag)
		}
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	_, errOut, code := runBerth(t, "--config", f.config, "redrive", "plan", "ledger-events.DLT", "--offsets", "0:0",
		"--scan-limit", "100000000000000", "--out", planFile)
	if code != 0 {
		t.Fatalf("--scan-limit 1e14: exit %d: %s", code, errOut)
	}
}
