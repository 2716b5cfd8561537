package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/brokermeta"
	"github.com/tiered/tiered/remotetier/policy"
)

// fixedMeta is a brokermeta.Source answering one snapshot.
type fixedMeta struct{ snap *brokermeta.Snapshot }

func (f fixedMeta) Snapshot(context.Context) (*brokermeta.Snapshot, error) { return f.snap, nil }
func (fixedMeta) Close() error                                             { return nil }

func metaSnapshot(leaders ...int32) *brokermeta.Snapshot {
	cfg := topicconfig.Defaults()
	cfg.RetentionMs = 3_600_000
	t := &brokermeta.Topic{Name: "orders", Config: cfg}
	for i, l := range leaders {
		t.Partitions = append(t.Partitions, brokermeta.Partition{Partition: int32(i), Leader: l, Replicas: []int32{2, 3, 4}})
	}
	return &brokermeta.Snapshot{Topics: map[string]*brokermeta.Topic{"orders": t}}
}

// TestSidecarLeadershipRule: which partitions a sidecar leads, whether it
// removes lineages, and how it applies remote retention, by what it knows.
func TestSidecarLeadershipRule(t *testing.T) {
	tp := func(p int32) checkpoint.TopicPartition {
		return checkpoint.TopicPartition{Topic: "orders", Partition: p}
	}
	tests := []struct {
		name      string
		nodeID    int32
		snap      *brokermeta.Snapshot
		wantLeads map[checkpoint.TopicPartition]bool // nil: unknown, every partition
		removes   bool
	}{
		{"leader known", 3, metaSnapshot(3, 2, 3), map[checkpoint.TopicPartition]bool{tp(0): true, tp(2): true}, false},
		{"lowest broker removes lineages", 2, metaSnapshot(3, 2, 3), map[checkpoint.TopicPartition]bool{tp(1): true}, true},
		{"no node id", -1, metaSnapshot(3, 2, 3), nil, true},
		{"leaders unknown (partition.metadata only)", 3, metaSnapshot(-1, -1, -1), nil, false},
		{"leads nothing", 4, metaSnapshot(3, 2, 3), map[checkpoint.TopicPartition]bool{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &sidecarMeta{src: fixedMeta{tt.snap}, nodeID: tt.nodeID}
			got, err := m.leads(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.wantLeads == nil) || len(got) != len(tt.wantLeads) {
				t.Fatalf("leads %v, want %v", got, tt.wantLeads)
			}
			for k := range tt.wantLeads {
				if !got[k] {
					t.Fatalf("leads %v, want %v", got, tt.wantLeads)
				}
			}
			if r := m.removesLineages(); r != tt.removes {
				t.Errorf("removesLineages %v, want %v", r, tt.removes)
			}
			if ms, _ := m.retention("orders"); ms != 3_600_000 {
				t.Errorf("broker retention.ms %d, want the metadata's", ms)
			}
			if ms, bytes := m.retention("absent"); ms != topicconfig.DefaultRetentionMs || bytes != topicconfig.DefaultRetentionBytes {
				t.Errorf("retention of a topic the metadata lacks: %d %d, want Kafka's defaults", ms, bytes)
			}
		})
	}
}

// TestSidecarRemoteRule: the policy's remote values over the topic's
// cleanup.policy; topics without a remote limit are left alone; only a
// partition the sidecar leads counts the broker's segments.
func TestSidecarRemoteRule(t *testing.T) {
	ms, keep := int64(86_400_000), int64(-1)
	pol, err := policy.New([]policy.Rule{
		{Match: "orders", RetentionMs: &ms},
		{Match: "keep-*"},
		{Match: "users", RetentionMs: &ms},
		{Match: "bytes", RetentionBytes: &keep},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap := metaSnapshot(1)
	compact := topicconfig.Defaults()
	compact.CleanupPolicy = topicconfig.Policy{Compact: true}
	snap.Topics["users"] = &brokermeta.Topic{Name: "users", Config: compact}
	m := &sidecarMeta{src: fixedMeta{snap}, nodeID: 1}
	if _, err := m.leads(context.Background()); err != nil {
		t.Fatal(err)
	}
	rule := m.remoteRule(pol)
	for _, tt := range []struct {
		p          remotetier.Partition
		ok, delete bool
		count      bool
	}{
		{remotetier.Partition{Topic: "orders", Led: true}, true, true, true},
		{remotetier.Partition{Topic: "orders"}, true, true, false},
		{remotetier.Partition{Topic: "keep-a", Led: true}, false, false, false},
		{remotetier.Partition{Topic: "bytes", Led: true}, false, false, false},
		{remotetier.Partition{Topic: "users", Led: true}, true, false, true},
		{remotetier.Partition{Topic: "other", Led: true}, false, false, false},
	} {
		r, ok := rule(tt.p)
		if ok != tt.ok || ok && (r.Config.CleanupPolicy.Delete != tt.delete || r.CountSource != tt.count || r.Config.RetentionMs != ms) {
			t.Errorf("%s led=%v: rule %+v %v, want ok %v delete %v count %v", tt.p.Topic, tt.p.Led, r, ok, tt.ok, tt.delete, tt.count)
		}
	}
}

// TestOptionalBrokerID: meta.properties is optional; present, it must name
// an id.
func TestOptionalBrokerID(t *testing.T) {
	dir := t.TempDir()
	if id, err := optionalBrokerID(dir); err != nil || id != -1 {
		t.Fatalf("no meta.properties: %d, %v; want -1", id, err)
	}
	for _, tt := range []struct {
		body string
		want int32
		bad  bool
	}{
		{"version=1\nnode.id=7\n", 7, false},
		{"broker.id=3\n", 3, false},
		{"version=1\ncluster.id=x\n", 0, true},
		{"node.id=-2\n", 0, true},
	} {
		if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		id, err := optionalBrokerID(dir)
		if (err != nil) != tt.bad || !tt.bad && id != tt.want {
			t.Errorf("%q: %d, %v", tt.body, id, err)
		}
	}
}

// countingMeta is a brokermeta.Source that counts its snapshots.
type countingMeta struct {
	fixedMeta
	n int
}

func (c *countingMeta) Snapshot(ctx context.Context) (*brokermeta.Snapshot, error) {
	c.n++
	return c.fixedMeta.Snapshot(ctx)
}

// TestSidecarOneSnapshotPerPass: a pass reads the broker's metadata once
// (a KRaft log dir re-read, a bootstrap server asked): the deletions it
// marks come from the snapshot its partitions were listed by, and the
// first pass's from the one taken at start-up.
func TestSidecarOneSnapshotPerPass(t *testing.T) {
	ctx := context.Background()
	id, err := localtier.ParseTopicID("AAAAAAAAAAAAAAAAAAAAAQ")
	if err != nil {
		t.Fatal(err)
	}
	snap := metaSnapshot(1)
	snap.Deleted = []brokermeta.DeletedTopic{{Name: "gone", ID: id}, {Name: "no-id"}}
	src := &countingMeta{fixedMeta: fixedMeta{snap: snap}}
	m := &sidecarMeta{src: src, nodeID: 1}
	if _, err := m.leads(ctx); err != nil { // start-up
		t.Fatal(err)
	}
	for pass := 1; pass <= 3; pass++ {
		del, err := m.deletedTopics(ctx) // a pass asks first, then lists
		if err != nil {
			t.Fatal(err)
		}
		if len(del) != 1 || del[0].Name != "gone" || del[0].TopicID != id.String() {
			t.Fatalf("pass %d: deletions %+v, want only gone (%s): one without an ID cannot be marked", pass, del, id)
		}
		if _, err := m.leads(ctx); err != nil {
			t.Fatal(err)
		}
		if src.n != 1+pass {
			t.Fatalf("after %d passes the metadata was read %d times, want %d (once at start-up, once a pass)", pass, src.n, 1+pass)
		}
	}
}

// TestSidecarRemoteRuleUnstatedCompaction: a partition the broker's cleaner
// compacts is not deleted by age where the metadata does not state the
// topic's cleanup.policy (a static log.cleanup.policy=compact in the
// broker's server.properties is not in a KRaft log; the partition.metadata
// fallback has no configs); a policy the metadata states is followed.
func TestSidecarRemoteRuleUnstatedCompaction(t *testing.T) {
	ms := int64(86_400_000)
	pol, err := policy.New([]policy.Rule{{Match: "*", RetentionMs: &ms}})
	if err != nil {
		t.Fatal(err)
	}
	topic := func(overrides map[string]string) *brokermeta.Topic {
		return &brokermeta.Topic{Name: "t", Overrides: overrides, Config: topicconfig.Defaults()}
	}
	for _, tt := range []struct {
		name       string
		origin     brokermeta.Origin
		top        *brokermeta.Topic
		brokerDefs map[string]string
		compacted  bool
		delete     bool
	}{
		{"kraft, no policy stated, cleaned", brokermeta.OriginKRaft, topic(nil), nil, true, false},
		{"kraft, no policy stated, not cleaned", brokermeta.OriginKRaft, topic(nil), nil, false, true},
		{"kraft, topic override delete, cleaned", brokermeta.OriginKRaft, topic(map[string]string{"cleanup.policy": "delete"}), nil, true, true},
		{"kraft, broker default delete, cleaned", brokermeta.OriginKRaft, topic(nil), map[string]string{"log.cleanup.policy": "delete"}, true, true},
		{"bootstrap server, effective delete, cleaned", brokermeta.OriginAdmin, topic(nil), nil, true, true},
		{"partition.metadata fallback, cleaned", brokermeta.OriginFallback, topic(nil), nil, true, false},
		{"topic not in the metadata, cleaned", brokermeta.OriginKRaft, nil, nil, true, false},
		{"topic not in the metadata, not cleaned", brokermeta.OriginKRaft, nil, nil, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			snap := &brokermeta.Snapshot{Origin: tt.origin, Topics: map[string]*brokermeta.Topic{}, BrokerDefaults: tt.brokerDefs}
			if tt.top != nil {
				snap.Topics["t"] = tt.top
			}
			m := &sidecarMeta{src: fixedMeta{snap}, nodeID: 1}
			if _, err := m.leads(context.Background()); err != nil {
				t.Fatal(err)
			}
			r, ok := m.remoteRule(pol)(remotetier.Partition{Topic: "t", Compacted: tt.compacted, Led: true})
			if !ok {
				t.Fatal("no rule")
			}
			if r.Config.CleanupPolicy.Delete != tt.delete {
				t.Fatalf("cleanup.policy %+v: delete %v, want %v", r.Config.CleanupPolicy, r.Config.CleanupPolicy.Delete, tt.delete)
			}
		})
	}
}
