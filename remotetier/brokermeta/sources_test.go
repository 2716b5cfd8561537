package brokermeta

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestKRaftSourceFixture: the real broker's metadata log gives foo with the ID of its
// partition.metadata, one partition with replica 1, and Kafka's default configs.
func TestKRaftSourceFixture(t *testing.T) {
	logDir := brokerdir.Copy(t, filepath.Join(t.TempDir(), "kafka"))
	src, err := Open(context.Background(), Options{LogDir: logDir, NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	snap, err := src.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	id, err := localtier.ReadPartitionMetadata(vfs.Default, filepath.Join(logDir, "foo-0"))
	if err != nil {
		t.Fatal(err)
	}
	foo, ok := snap.Topic("foo")
	if snap.Origin != OriginKRaft || !ok || len(snap.Topics) != 1 || foo.ID != id {
		t.Fatalf("snapshot %+v, foo %+v; want foo with ID %s from the KRaft log", snap, foo, id)
	}
	if !reflect.DeepEqual(foo.Partitions, []Partition{{Partition: 0, Leader: -1, LeaderEpoch: 3, Replicas: []int32{1}}}) {
		t.Errorf("partitions %+v", foo.Partitions)
	}
	if foo.Config != topicconfig.Defaults() || len(foo.Overrides) != 0 {
		t.Errorf("configs %+v, overrides %v; want Kafka's defaults", foo.Config, foo.Overrides)
	}
}

// TestAdminMatchesKRaft: the same cluster seen through --bootstrap-server (franz-go's
// kfake) and through a KRaft metadata log holding what that cluster holds gives the same
// topics, IDs, partitions, leaders, overrides and effective configs, and the same deletion.
func TestAdminMatchesKRaft(t *testing.T) {
	ctx := context.Background()
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	overrides := map[string]map[string]string{
		"orders":  {"cleanup.policy": "compact", "retention.ms": "7776000000", "min.insync.replicas": "2"},
		"logs":    {"retention.bytes": "1073741824", "message.timestamp.type": "LogAppendTime"},
		"scratch": {},
	}
	parts := map[string]int32{"orders": 3, "logs": 1, "scratch": 2}
	for name, cfg := range overrides {
		if err := c.CreateTopic(name, parts[name], cfg); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := DialAdmin(ctx, c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	seenAt := time.UnixMilli(1_800_000_000_000)
	admin.Now = func() time.Time { return seenAt }
	got, err := admin.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The metadata log of that cluster: its topics with the IDs and leaders the cluster gave
	// them, the overrides set above, and its broker-wide default that differs from Kafka's
	// (kfake's segment.bytes is 100 MiB).
	logDir := t.TempDir()
	l, err := kraftlog.Create(logDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(kraftlog.BrokerConfig("", "log.segment.bytes", kraftlog.Value("104857600"))); err != nil {
		t.Fatal(err)
	}
	for _, name := range got.Names() {
		top := got.Topics[name]
		recs := []kraft.Record{kraftlog.Topic(name, top.ID)}
		for k, v := range overrides[name] {
			recs = append(recs, kraftlog.TopicConfig(name, k, kraftlog.Value(v)))
		}
		for _, p := range top.Partitions {
			recs = append(recs, kraftlog.Partition(top.ID, p.Partition, p.Leader, p.LeaderEpoch, p.Replicas...))
		}
		if _, err := l.Append(recs...); err != nil {
			t.Fatal(err)
		}
	}
	kr := &KRaftSource{LogDir: logDir, NodeID: -1}
	want, err := kr.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Topics) != 3 {
		t.Fatalf("admin topics %v", got.Names())
	}
	for _, name := range want.Names() {
		g, w := got.Topics[name], want.Topics[name]
		if g == nil || !reflect.DeepEqual(*g, *w) {
			t.Errorf("%s:\nadmin %+v\nkraft %+v", name, g, w)
		}
	}
	if o := got.Topics["orders"]; o.Config.RetentionMs != 7776000000 || !o.Config.CleanupPolicy.Compact || o.Overrides["min.insync.replicas"] != "2" ||
		got.Topics["logs"].Config.MessageTimestampType != topicconfig.LogAppendTime || got.Topics["scratch"].Config.SegmentBytes != 100<<20 {
		t.Errorf("effective configs: orders %+v, logs %+v", o.Config, got.Topics["logs"].Config)
	}
	if len(got.Deleted) != 0 || len(want.Deleted) != 0 {
		t.Errorf("deleted before any deletion: %v %v", got.Deleted, want.Deleted)
	}

	// A deletion, seen by both.
	logsID := got.Topics["logs"].ID
	if err := c.DeleteTopic("logs"); err != nil {
		t.Fatal(err)
	}
	off, err := l.Append(kraftlog.RemoveTopic(logsID))
	if err != nil {
		t.Fatal(err)
	}
	removedAt := l.LastTimestamp()
	if got, err = admin.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if want, err = kr.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Deleted, []DeletedTopic{{Name: "logs", ID: logsID, MetadataOffset: -1, DeletedAtMs: seenAt.UnixMilli()}}) ||
		!reflect.DeepEqual(want.Deleted, []DeletedTopic{{Name: "logs", ID: logsID, MetadataOffset: off, DeletedAtMs: removedAt}}) {
		t.Errorf("deleted: admin %+v, kraft %+v", got.Deleted, want.Deleted)
	}
	if !reflect.DeepEqual(got.Names(), want.Names()) || !got.DeletedID(logsID) {
		t.Errorf("after the deletion: admin %v, kraft %v", got.Names(), want.Names())
	}

	// A re-creation: the admin source sees the ID change.
	if err := c.CreateTopic("logs", 1, nil); err != nil {
		t.Fatal(err)
	}
	if got, err = admin.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if n := got.Topics["logs"]; n == nil || n.ID == logsID || n.ID.IsZero() || len(got.Deleted) != 1 {
		t.Errorf("re-created logs %+v, deleted %+v", n, got.Deleted)
	}
}

// TestFallbackSource: without a metadata log or a bootstrap server, IDs come from
// partition.metadata and configs are Kafka's defaults; a re-creation (a new ID in
// partition.metadata) reports the old ID deleted; a topic whose partitions are gone is not
// (it may have moved to other brokers), and coming back with yet another ID is a
// re-creation again.
func TestFallbackSource(t *testing.T) {
	ctx := context.Background()
	logDir := brokerdir.Copy(t, filepath.Join(t.TempDir(), "kafka"))
	if err := os.RemoveAll(filepath.Join(logDir, kraft.MetadataDir)); err != nil {
		t.Fatal(err)
	}
	src, err := Open(ctx, Options{LogDir: logDir, NodeID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	seenAt := time.UnixMilli(1_800_000_000_000)
	src.(*FallbackSource).Now = func() time.Time { return seenAt }
	first, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fooDir := filepath.Join(logDir, "foo-0")
	oldID, _ := localtier.ReadPartitionMetadata(vfs.Default, fooDir)
	foo := first.Topics["foo"]
	if first.Origin != OriginFallback || foo == nil || foo.ID != oldID || oldID.IsZero() || foo.Config != topicconfig.Defaults() ||
		!reflect.DeepEqual(foo.Partitions, []Partition{{Partition: 0, Leader: -1, LeaderEpoch: -1}}) || len(first.Deleted) != 0 {
		t.Fatalf("first snapshot %+v, foo %+v", first, foo)
	}
	newID := localtier.TopicID{1, 2, 3}
	if err := localtier.WritePartitionMetadata(vfs.Default, fooDir, newID); err != nil {
		t.Fatal(err)
	}
	second, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Topics["foo"].ID != newID || !reflect.DeepEqual(second.Deleted, []DeletedTopic{{Name: "foo", ID: oldID, MetadataOffset: -1, DeletedAtMs: seenAt.UnixMilli()}}) {
		t.Errorf("after re-creation: foo %+v, deleted %+v", second.Topics["foo"], second.Deleted)
	}
	if err := os.RemoveAll(fooDir); err != nil {
		t.Fatal(err)
	}
	third, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(third.Topics) != 0 || len(third.Deleted) != 1 {
		t.Errorf("after removal: %+v, deleted %+v; want nothing more deleted", third.Topics, third.Deleted)
	}
	brokerdir.CopyTree(t, filepath.Join(brokerdir.Fixtures(), brokerdir.KRaft, "foo-0"), fooDir)
	thirdID := localtier.TopicID{4, 5, 6}
	if err := localtier.WritePartitionMetadata(vfs.Default, fooDir, thirdID); err != nil {
		t.Fatal(err)
	}
	fourth, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fourth.Topics["foo"] == nil || len(fourth.Deleted) != 2 || fourth.Deleted[1].ID != newID {
		t.Errorf("back with another ID: %+v, deleted %+v", fourth.Topics, fourth.Deleted)
	}
}

// TestAdminTransientErrors: a topic the cluster answers with an error other than
// UNKNOWN_TOPIC_OR_PARTITION, in Metadata or DescribeConfigs, drops out of that snapshot
// but is never reported deleted (the sidecar would remove its remote data).
func TestAdminTransientErrors(t *testing.T) {
	ctx := context.Background()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin, err := DialAdmin(ctx, c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if snap, err := admin.Snapshot(ctx); err != nil || len(snap.Topics) != 2 {
		t.Fatalf("first snapshot %v, %v", snap, err)
	}
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.DropControl()
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.SetVersion(req.GetVersion())
		for _, name := range []string{"a", "b"} {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			rt.ErrorCode = kerr.LeaderNotAvailable.Code
			if name == "b" {
				rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	snap, err := admin.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Topics) != 0 || len(snap.Deleted) != 0 {
		t.Errorf("topics answered with errors: live %v, deleted %+v; want neither", snap.Names(), snap.Deleted)
	}
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.DropControl()
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		resp.SetVersion(req.GetVersion())
		for _, r := range req.(*kmsg.DescribeConfigsRequest).Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, kerr.RequestTimedOut.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	if snap, err = admin.Snapshot(ctx); err != nil || len(snap.Deleted) != 0 {
		t.Errorf("configs answered with errors: %v, deleted %+v", err, snap.Deleted)
	}
	// An all-topics answer without b (Kafka leaves out the topics the principal may not
	// describe): b is asked for by name, found, and not deleted.
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.MetadataRequest).Topics != nil {
			return nil, nil, false // by name: as the cluster answers
		}
		c.DropControl()
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.SetVersion(req.GetVersion())
		return resp, nil, true // no topics at all
	})
	if snap, err = admin.Snapshot(ctx); err != nil || len(snap.Deleted) != 0 {
		t.Errorf("topics left out of the listing: %v, deleted %+v", err, snap.Deleted)
	}
	// A real deletion is still seen.
	if err := c.DeleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	if snap, err = admin.Snapshot(ctx); err != nil || len(snap.Deleted) != 1 || snap.Deleted[0].Name != "a" || snap.Names()[0] != "b" {
		t.Errorf("after deleting a: %+v, %v", snap, err)
	}
}
