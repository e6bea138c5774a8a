package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// `berth records` is the record viewer without the console: from a group's
// committed offset, the record it will read next, sanitised, as text or
// JSON; bad input is a usage error naming the flag.
func TestRecordsFromTheCommittedOffset(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	kc.CreateTopic(t, "orders", 1, 1, nil)
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte{'k', byte('0' + i)}, Value: []byte(`{"n":` + string(rune('0'+i)) + `,"evil":"x"}`),
			Headers: []kgo.RecordHeader{{Key: "h\x1b[2J", Value: []byte("v")}}})
	}
	recs[3].Value = []byte{0xde, 0xad, 0xbe, 0xef}
	kc.Produce(t, recs...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var offs kadm.Offsets
	offs.AddOffset("orders", 0, 2, -1)
	if _, err := kc.Admin.CommitOffsets(ctx, "fraud-monitor", offs); err != nil {
		t.Fatal(err)
	}
	boot := "--bootstrap=" + kc.Addrs[0]

	out, errOut, code := runBerth(t, "records", "orders", "-p", "0", "--group", "fraud-monitor", "--limit", "2", boot)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"the record at fraud-monitor's committed offset 2 on orders[0]", "offset          2 (the committed offset)",
		`"n": 2,`, `h\e[2J = v`, "offset          3 (committed + 1)", "value (4 bytes, binary, hex dump)", "de ad be ef"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Fatal("an escape byte from a header reached the output")
	}

	out, errOut, code = runBerth(t, "records", "orders", "-p", "0", "--group", "fraud-monitor", "--limit", "2", "-o", "json", boot)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v struct {
		Committed *int64 `json:"committed"`
		End       int64  `json:"end"`
		Records   []struct {
			Offset   int64   `json:"offset"`
			Key      *string `json:"key"`
			Value    string  `json:"value"`
			ValueHex string  `json:"value_hex"`
			Binary   bool    `json:"value_binary"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if v.Committed == nil || *v.Committed != 2 || v.End != 5 || len(v.Records) != 2 || v.Records[0].Offset != 2 || *v.Records[0].Key != "k2" ||
		v.Records[0].Value != `{"n":2,"evil":"x"}` || !v.Records[1].Binary || v.Records[1].ValueHex != "deadbeef" {
		t.Fatalf("json: %s", out)
	}

	// From an offset, past the end: said so.
	out, _, code = runBerth(t, "records", "orders", "-p", "0", "--offset", "9", boot)
	if code != 0 || !strings.Contains(out, "no records at or after offset 9 (the partition ends at 5)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// A group that has read everything.
	offs = kadm.Offsets{}
	offs.AddOffset("orders", 0, 5, -1)
	if _, err := kc.Admin.CommitOffsets(ctx, "caught-up", offs); err != nil {
		t.Fatal(err)
	}
	out, _, _ = runBerth(t, "records", "orders", "-p", "0", "--group", "caught-up", boot)
	if !strings.Contains(out, "no record at caught-up's committed offset 5 on orders[0] yet: the group has read everything (end 5)") {
		t.Fatalf("caught-up:\n%s", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"records", "orders", "--offset", "0"}, "--partition is required"},
		{[]string{"records", "orders", "-p", "0"}, "give exactly one of --offset N and --group G"},
		{[]string{"records", "orders", "-p", "0", "--offset", "1", "--group", "g"}, "give exactly one of --offset N and --group G"},
		{[]string{"records", "orders", "-p", "-1", "--offset", "0"}, "--partition -1: must be 0 or more"},
		{[]string{"records", "orders", "-p", "0", "--offset", "0", "--limit", "0"}, "--limit 0: must be at least 1"},
	} {
		_, errOut, code := runBerth(t, append(c.args, boot)...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q (want one line with %q)", c.args, code, errOut, c.want)
		}
	}
	_, errOut, code = runBerth(t, "records", "orders", "-p", "7", "--offset", "0", boot)
	if code == 0 || !strings.Contains(errOut, "read orders[7]: no such partition (the topic has 1)") {
		t.Fatalf("missing partition: exit %d, %q", code, errOut)
	}
}
