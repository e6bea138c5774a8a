package main

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berth-dev/berth/internal/kafkatest"
)

// berthJSON runs a command with -o json against the cluster and decodes it.
func berthJSON(t *testing.T, kc *kafkatest.Cluster, into any, args ...string) {
	t.Helper()
	args = append([]string{"--bootstrap", strings.Join(kc.Addrs, ","), "-o", "json"}, args...)
	out, errOut, code := runBerth(t, args...)
	if code != 0 {
		t.Fatalf("berth %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("berth %s: decoding JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestBrokersJSON(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 3)
	var got struct {
		ClusterID  string `json:"cluster_id"`
		Controller int32  `json:"controller"`
		Brokers    []struct {
			ID         int32  `json:"id"`
			Host       string `json:"host"`
			Port       int32  `json:"port"`
			Rack       string `json:"rack"`
			Controller bool   `json:"controller"`
		} `json:"brokers"`
	}
	berthJSON(t, kc, &got, "brokers")
	if len(got.Brokers) != 3 || got.ClusterID == "" {
		t.Fatalf("brokers = %+v", got)
	}
	var addrs []string
	for _, b := range got.Brokers {
		addrs = append(addrs, net.JoinHostPort(b.Host, itoa(b.Port)))
		if b.Controller != (b.ID == got.Controller) {
			t.Errorf("broker %d controller flag %v, cluster controller %d", b.ID, b.Controller, got.Controller)
		}
	}
	for _, a := range kc.Addrs {
		if !slices.Contains(addrs, a) {
			t.Errorf("listening address %s missing from %v", a, addrs)
		}
	}

	// The table names every broker too.
	out, _, code := runBerth(t, "--bootstrap", kc.Addrs[0], "brokers")
	if code != 0 || !strings.HasPrefix(out, "ID") || strings.Count(out, "\n") != 4 {
		t.Fatalf("table (exit %d):\n%s", code, out)
	}
}

type topicsJSON struct {
	Topics []struct {
		Name              string            `json:"name"`
		Partitions        int               `json:"partitions"`
		ReplicationFactor int               `json:"replication_factor"`
		MinISR            int               `json:"min_insync_replicas"`
		UnderReplicated   int               `json:"under_replicated_partitions"`
		UnderMinISR       int               `json:"under_min_isr_partitions"`
		Offline           int               `json:"offline_partitions"`
		Records           int64             `json:"records"`
		Configs           map[string]string `json:"configs"`
	} `json:"topics"`
}

func TestTopicsAndDescribeTopicJSON(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 6, 3, map[string]string{"min.insync.replicas": "2", "retention.ms": "259200000"})
	kc.CreateTopic(t, "customer-profile", 1, 1, map[string]string{"cleanup.policy": "compact"})
	kc.ProduceTo(t, "orders", 1, 4, time.Now(), time.Millisecond)
	kc.ProduceTo(t, "orders", 5, 2, time.Now(), time.Millisecond)

	var ts topicsJSON
	berthJSON(t, kc, &ts, "topics")
	if len(ts.Topics) != 2 || ts.Topics[0].Name != "customer-profile" || ts.Topics[1].Name != "orders" {
		t.Fatalf("topics = %+v", ts)
	}
	o := ts.Topics[1]
	if o.Partitions != 6 || o.ReplicationFactor != 3 || o.MinISR != 2 || o.Records != 6 || o.UnderReplicated != 0 || o.Offline != 0 {
		t.Fatalf("orders = %+v", o)
	}
	if o.Configs["retention.ms"] != "259200000" || ts.Topics[0].Configs["cleanup.policy"] != "compact" {
		t.Fatalf("configs: orders %v, customer-profile %v", o.Configs, ts.Topics[0].Configs)
	}

	var dt describeTopicJSON
	berthJSON(t, kc, &dt, "describe", "topic", "orders")
	if dt.Name != "orders" || len(dt.Partitions) != 6 || dt.MinISR != 2 {
		t.Fatalf("describe topic = %+v", dt)
	}
	for i, p := range dt.Partitions {
		wantEnd := map[int32]int64{1: 4, 5: 2}[p.Partition]
		if p.Partition != int32(i) || p.HighWatermark != wantEnd || p.LogStart != 0 || p.LastStable != wantEnd {
			t.Errorf("partition row %d = %+v, want partition %d end %d", i, p, i, wantEnd)
		}
		if len(p.Replicas) != 3 || !slices.Equal(p.ISR, p.Replicas) || len(p.Flags) != 0 || p.Leader != p.Replicas[0] {
			t.Errorf("partition %d = %+v, want healthy with 3 replicas", p.Partition, p)
		}
	}

	// The table has a header line, a blank line, a column header and one
	// row per partition.
	out, _, code := runBerth(t, "--bootstrap", kc.Addrs[0], "describe", "topic", "orders")
	if code != 0 || strings.Count(out, "\n") != 9 || !strings.Contains(out, "RETENTION 3d") {
		t.Fatalf("describe topic table (exit %d):\n%s", code, out)
	}

	// An unknown topic is a failure naming it, with Kafka's code.
	_, errOut, code := runBerth(t, "--bootstrap", kc.Addrs[0], "describe", "topic", "nope")
	if code != 1 || !strings.HasPrefix(errOut, "berth: ") || !strings.Contains(errOut, "nope") || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("unknown topic: exit %d, stderr %q", code, errOut)
	}
	// A missing name is a usage error.
	if _, _, code := runBerth(t, "--bootstrap", kc.Addrs[0], "describe", "topic"); code != 2 {
		t.Fatalf("describe topic without a name: exit %d, want 2", code)
	}
	if _, _, code := runBerth(t, "--bootstrap", kc.Addrs[0], "-o", "yaml", "topics"); code != 2 {
		t.Fatalf("-o yaml: exit %d, want 2", code)
	}
}

type describeTopicJSON struct {
	Name              string            `json:"name"`
	Internal          bool              `json:"internal"`
	ReplicationFactor int               `json:"replication_factor"`
	MinISR            int               `json:"min_insync_replicas"`
	Configs           map[string]string `json:"configs"`
	Partitions        []partitionJSON   `json:"partitions"`
}

type partitionJSON struct {
	Topic         string   `json:"topic"`
	Partition     int32    `json:"partition"`
	Leader        int32    `json:"leader"`
	LeaderEpoch   int32    `json:"leader_epoch"`
	Replicas      []int32  `json:"replicas"`
	ISR           []int32  `json:"isr"`
	Offline       []int32  `json:"offline_replicas"`
	LogStart      int64    `json:"log_start"`
	HighWatermark int64    `json:"high_watermark"`
	LastStable    int64    `json:"last_stable"`
	Err           string   `json:"error"`
	Flags         []string `json:"flags"`
}

// shrinkISR answers Metadata as if a broker had left every ISR (kfake
// itself always reports ISR = replicas). The broker is a replica of
// partition 0 of topic (kfake places replicas by leader, which varies); it
// is returned.
func shrinkISR(t *testing.T, kc *kafkatest.Cluster, topic string) (down int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	real, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, kc.Client)
	if err != nil {
		t.Fatal(err)
	}
	down = -1
	for _, rt := range real.Topics {
		for _, p := range rt.Partitions {
			if *rt.Topic == topic && p.Partition == 0 {
				down = p.Replicas[len(p.Replicas)-1]
			}
		}
	}
	if down < 0 {
		t.Fatalf("topic %s has no partition 0", topic)
	}
	kc.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kr.(*kmsg.MetadataRequest)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version, resp.Brokers, resp.ClusterID, resp.ControllerID = req.Version, real.Brokers, real.ClusterID, real.ControllerID
		for _, rt := range real.Topics {
			if req.Topics != nil && !slices.ContainsFunc(req.Topics, func(x kmsg.MetadataRequestTopic) bool { return x.Topic != nil && *x.Topic == *rt.Topic }) {
				continue
			}
			nt := rt
			nt.Partitions = nil
			for _, p := range rt.Partitions {
				np := p
				np.ISR, np.OfflineReplicas = nil, nil
				for _, r := range p.Replicas {
					if r == down {
						np.OfflineReplicas = append(np.OfflineReplicas, r)
					} else {
						np.ISR = append(np.ISR, r)
					}
				}
				nt.Partitions = append(nt.Partitions, np)
			}
			resp.Topics = append(resp.Topics, nt)
		}
		return resp, nil, true
	})
	return down
}

func TestTopicsFlagDegradedISR(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 6, 3, map[string]string{"min.insync.replicas": "2"})
	kc.CreateTopic(t, "payments", 3, 2, map[string]string{"min.insync.replicas": "2"})
	down := shrinkISR(t, kc, "payments")

	var dt describeTopicJSON
	berthJSON(t, kc, &dt, "describe", "topic", "payments")
	onDown := 0
	for _, p := range dt.Partitions {
		if slices.Contains(p.Replicas, down) {
			onDown++
			// RF 2 minus the down broker leaves one copy: below min ISR 2.
			if !slices.Equal(p.Flags, []string{"under_replicated", "under_min_isr"}) || !slices.Equal(p.Offline, []int32{down}) || len(p.ISR) != 1 {
				t.Errorf("payments[%d] = %+v, want flags under_replicated,under_min_isr, offline [%d]", p.Partition, p, down)
			}
		} else if len(p.Flags) != 0 || len(p.ISR) != 2 {
			t.Errorf("payments[%d] not on broker %d but flagged %v", p.Partition, down, p.Flags)
		}
	}
	if onDown == 0 {
		t.Fatal("partition 0 of payments should be replicated on the down broker")
	}

	var ts topicsJSON
	berthJSON(t, kc, &ts, "topics")
	// RF 3 on 3 brokers puts a replica of every partition on the down
	// broker, leaving 2 copies: under-replicated, still at min ISR.
	if o := ts.Topics[0]; o.Name != "orders" || o.UnderReplicated != 6 || o.UnderMinISR != 0 {
		t.Errorf("orders = %+v, want 6 under-replicated, 0 under min ISR", o)
	}
	if p := ts.Topics[1]; p.Name != "payments" || p.UnderReplicated != onDown || p.UnderMinISR != onDown {
		t.Errorf("payments = %+v, want %d under-replicated and under min ISR", p, onDown)
	}
}

type memberJSON struct {
	ID         string `json:"member_id"`
	InstanceID string `json:"instance_id"`
	ClientID   string `json:"client_id"`
	Host       string `json:"host"`
	Assigned   []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
	} `json:"assignment"`
}

type describeGroupJSON struct {
	Name         string       `json:"group"`
	State        string       `json:"state"`
	Protocol     string       `json:"protocol"`
	ProtocolType string       `json:"protocol_type"`
	Coordinator  int32        `json:"coordinator"`
	Members      []memberJSON `json:"members"`
	Type         string       `json:"type"`
	Err          string       `json:"error"`
	Offsets      []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Member    string `json:"member"`
		Committed *int64 `json:"committed"`
		LogStart  int64  `json:"log_start"`
		End       int64  `json:"end"`
		Lag       *int64 `json:"lag"`
	} `json:"offsets"`
	Lag int64 `json:"lag"`
}

func TestGroupsAndDescribeGroupJSON(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 3)
	kc.CreateTopic(t, "orders", 3, 3, nil)
	kc.ProduceTo(t, "orders", 0, 10, time.Now(), time.Millisecond)
	kc.ProduceTo(t, "orders", 1, 6, time.Now(), time.Millisecond)
	kc.ProduceTo(t, "orders", 2, 8, time.Now(), time.Millisecond)
	// Retention removed the first 5 records of partition 2: a commit before
	// them cannot lag by records that no longer exist.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if r, err := kc.Admin.DeleteRecords(ctx, kadm.Offsets{"orders": {2: {Topic: "orders", Partition: 2, At: 5}}}); err != nil || r.Error() != nil {
		t.Fatalf("delete records: %v %v", err, r.Error())
	}
	// sales-analytics: no members; committed 4 of 10, 6 of 6, 1 of 8 (log start 5).
	kc.Commit(t, "sales-analytics", map[string]map[int32]int64{"orders": {0: 4, 1: 6, 2: 1}})
	// email-notifier: one live member holding all partitions, committed
	// on partition 0 only.
	kc.Commit(t, "email-notifier", map[string]map[int32]int64{"orders": {0: 9}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ClientID("email-worker"), kgo.ConsumerGroup("email-notifier"),
		kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	pollCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pollCtx.Err() == nil {
			cl.PollFetches(pollCtx)
		}
	}()
	t.Cleanup(func() { stop(); <-done; cl.Close() })

	var dg describeGroupJSON
	deadline := time.Now().Add(2 * time.Minute)
	for {
		dg = describeGroupJSON{}
		berthJSON(t, kc, &dg, "describe", "group", "email-notifier")
		if dg.State == "Stable" && len(dg.Members) == 1 && len(dg.Members[0].Assigned) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("email-notifier never became stable with 3 partitions: %+v", dg)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m := dg.Members[0]
	if m.ClientID != "email-worker" || m.Host == "" || dg.Type != "classic" || dg.ProtocolType != "consumer" {
		t.Errorf("email-notifier = %+v", dg)
	}
	if len(dg.Offsets) != 3 {
		t.Fatalf("email-notifier offsets = %+v", dg.Offsets)
	}
	for _, o := range dg.Offsets {
		if o.Member != m.ID {
			t.Errorf("orders[%d] member %q, want %q", o.Partition, o.Member, m.ID)
		}
		if o.Partition == 0 {
			if o.Committed == nil || *o.Committed != 9 || o.Lag == nil || *o.Lag != 1 || o.End != 10 {
				t.Errorf("orders[0] = %+v, want committed 9 end 10 lag 1", o)
			}
		} else if o.Committed != nil || o.Lag != nil {
			t.Errorf("orders[%d] has no commit but reports committed/lag: %+v", o.Partition, o)
		}
	}
	if dg.Lag != 1 {
		t.Errorf("email-notifier total lag %d, want 1", dg.Lag)
	}

	dg = describeGroupJSON{}
	berthJSON(t, kc, &dg, "describe", "group", "sales-analytics")
	if dg.State != "Empty" || len(dg.Members) != 0 || len(dg.Offsets) != 3 {
		t.Fatalf("sales-analytics = %+v", dg)
	}
	wantLag := map[int32]int64{0: 6, 1: 0, 2: 3}
	for _, o := range dg.Offsets {
		if o.Lag == nil || *o.Lag != wantLag[o.Partition] || o.Member != "" {
			t.Errorf("sales-analytics orders[%d] = %+v, want lag %d", o.Partition, o, wantLag[o.Partition])
		}
	}
	if dg.Lag != 9 {
		t.Errorf("sales-analytics total lag %d, want 9", dg.Lag)
	}

	var gs struct {
		Groups []struct {
			Name         string   `json:"group"`
			State        string   `json:"state"`
			Type         string   `json:"type"`
			Protocol     string   `json:"protocol"`
			ProtocolType string   `json:"protocol_type"`
			Coordinator  int32    `json:"coordinator"`
			Members      int      `json:"members"`
			Topics       []string `json:"topics"`
			Lag          int64    `json:"lag"`
			Error        string   `json:"error"`
		} `json:"groups"`
	}
	berthJSON(t, kc, &gs, "groups")
	if len(gs.Groups) != 2 || gs.Groups[0].Name != "email-notifier" || gs.Groups[1].Name != "sales-analytics" {
		t.Fatalf("groups = %+v", gs)
	}
	if g := gs.Groups[0]; g.Members != 1 || g.Lag != 1 || !slices.Equal(g.Topics, []string{"orders"}) || g.State != "Stable" {
		t.Errorf("email-notifier row = %+v", g)
	}
	if g := gs.Groups[1]; g.Members != 0 || g.Lag != 9 || g.State != "Empty" {
		t.Errorf("sales-analytics row = %+v", g)
	}

	_, errOut, code := runBerth(t, "--bootstrap", kc.Addrs[0], "describe", "group", "ghost")
	if code != 1 || !strings.Contains(errOut, "ghost") || !strings.Contains(errOut, "GROUP_ID_NOT_FOUND") {
		t.Fatalf("unknown group: exit %d: %s", code, errOut)
	}
	out, _, code := runBerth(t, "--bootstrap", kc.Addrs[0], "describe", "group", "sales-analytics")
	if code != 0 || !strings.Contains(out, "LAG 9") || !strings.Contains(out, "no active members") {
		t.Fatalf("describe group table (exit %d):\n%s", code, out)
	}
}

func TestTopicNamesAreSanitisedInTables(t *testing.T) {
	isolateConfig(t)
	kc := kafkatest.Start(t, 1)
	evil := "evil\x1b[2Jtopic"
	kc.CreateTopic(t, evil, 1, 1, nil)
	out, errOut, code := runBerth(t, "--bootstrap", kc.Addrs[0], "topics")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.ContainsRune(out, 0x1b) || !strings.Contains(out, "evil") {
		t.Fatalf("escape sequence reached the table: %q", out)
	}
	out, _, _ = runBerth(t, "--bootstrap", kc.Addrs[0], "-o", "json", "topics")
	if strings.ContainsRune(out, 0x1b) {
		t.Fatalf("raw escape in JSON: %q", out)
	}
}

func TestUnreachableClusterFailsNamingTheAddress(t *testing.T) {
	isolateConfig(t)
	// Refused at once.
	_, errOut, code := runBerth(t, "--bootstrap", "127.0.0.1:1", "--timeout", "1s", "brokers")
	if code != 1 || !strings.HasPrefix(errOut, "berth: kafka 127.0.0.1:1: unreachable") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("refused: exit %d, stderr %q", code, errOut)
	}
	// The bundled context (the default with no config) says how to start it.
	path := writeConfig(t, "contexts:\n  bundled:\n    kind: bundled\n    bootstrap: [127.0.0.1:1]\n")
	_, errOut, code = runBerth(t, "--config", path, "--timeout", "1s", "topics")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:1: unreachable") || !strings.Contains(errOut, "berth broker") {
		t.Fatalf("bundled context down: exit %d, stderr %q", code, errOut)
	}
	// Accepts the connection but never answers: bounded by --timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	addr := ln.Addr().String()
	_, errOut, code = runBerth(t, "--bootstrap", addr, "--timeout", "1s", "topics")
	if code != 1 || errOut != "berth: kafka "+addr+": unreachable within 1s\n" {
		t.Fatalf("silent broker: exit %d, stderr %q", code, errOut)
	}
}
