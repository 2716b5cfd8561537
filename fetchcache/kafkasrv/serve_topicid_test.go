package kafkasrv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/groupadmin"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// A serve data dir's topics carry the IDs its partition.metadata gives
// them: Metadata answers them, a consumer fetching by topic ID (franz-go,
// Fetch v13+) reads the records, and a group's committed offsets record the
// incarnation they were committed against. When the data dir is lost and
// the topic created again on a fresh one over the same bucket (whose group
// objects outlive it), OffsetFetch answers -1 for the new incarnation, as
// Kafka does once a topic is deleted: the old incarnation's offset would
// skip the new records below it.
func TestServeGroupOffsetsOfAnotherIncarnation(t *testing.T) {
	groupBkt := objstore.NewMemory()
	serveDir := func() (addr, id string) {
		e := fetchkit.NewEnvWithTopicIDs(t)
		e.Topic("orders", 1, nil)
		e.Produce(e.Log("orders", 0), fetchkit.ProduceOpts{Per: 5}, fetchkit.GenRecs(30, ts0, "o"))
		tid, err := e.Dir.TopicID("orders")
		if err != nil || tid.IsZero() {
			t.Fatalf("test setup: topic id %v, %v", tid, err)
		}
		return startKafka(t, fetchcache.NewCombinedCatalog(e.Dir, nil), KafkaOptions{Groups: startCoordinator(t, groupBkt, nil)}), tid.String()
	}
	offsetOf := func(rc *fetchkit.RawConn) int64 {
		t.Helper()
		q := kmsg.NewPtrOffsetFetchRequest()
		q.Version, q.Group = 7, "g"
		q.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
		resp := kmsg.NewPtrOffsetFetchResponse()
		if err := rc.Request(2, q, resp); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("offset fetch: %v code %d", err, resp.ErrorCode)
		}
		return resp.Topics[0].Partitions[0].Offset
	}

	addr, id := serveDir()
	rc := fetchkit.DialRaw(t, addr)
	mq := kmsg.NewPtrMetadataRequest()
	mq.Version = 12
	mq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	mresp := kmsg.NewPtrMetadataResponse()
	if err := rc.Request(1, mq, mresp); err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v, %d topics", err, len(mresp.Topics))
	}
	if got := mresp.Topics[0].TopicID; got != topicIDBytes(id) {
		t.Fatalf("metadata topic id %x, want the data dir's %s", got, id)
	}
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got int
	for got < 20 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records", got)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch: %v", errs)
		}
		got += fs.NumRecords()
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 20}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	cl.Close()
	if off := offsetOf(rc); off != 20 {
		t.Fatalf("committed offset %d, want 20", off)
	}

	fresh, _ := serveDir()
	if off := offsetOf(fetchkit.DialRaw(t, fresh)); off != -1 {
		t.Fatalf("the topic created again on a fresh data dir: offset %d, want -1 (another incarnation's)", off)
	}
}

// TestServeGroupOffsetsKeptByBucketAdmin: serve keeps its groups in its
// bucket, which holds only its remote-enabled topics. `tiered groups
// --bucket` (a bucket's catalog) must not take serve's committed offset of
// another topic for a deleted topic's: describe shows it, and a reset of
// another group topic, which drops the offsets of deleted topics, keeps it.
func TestServeGroupOffsetsKeptByBucketAdmin(t *testing.T) {
	groupBkt := serveCommittedBoth(t)

	ctx := context.Background()
	cat, err := fetchcache.NewRemoteCatalog(groupBkt, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := &groupadmin.Admin{Store: groups.NewStore(groupBkt, groups.StoreOptions{}), Catalog: cat}
	d, err := a.Describe(ctx, "g", "orders")
	if err != nil || len(d.Offsets) != 1 || d.Offsets[0].Committed != 20 {
		t.Fatalf("describe over the bucket: %+v, %v; want serve's committed offset 20 of orders", d, err)
	}
	if _, err := a.Reset(ctx, "g", groupadmin.ResetSpec{Topic: "payments", ToEarliest: true, Execute: true}); err != nil {
		t.Fatal(err)
	}
	o, err := a.Store.Reload(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := o.Lookup("orders", 0); !ok || off.Offset != 20 {
		t.Fatalf("after a reset of payments over the bucket, orders' offset is %+v (%v): serve's committed offset was dropped", off, ok)
	}
}

// TestBucketKnowsStaleIncarnations: over a bucket, an offset's incarnation
// is stale only when the topic object lists it as an earlier one (deleted,
// or replaced by a re-creation) — whether the catalog serves the topic now
// or not (a re-created lineage without a manifest yet) — never when the
// bucket does not know it: no topic object (a serve topic never tiered), or
// an ID the object does not list (a serve topic created again local-only).
func TestBucketKnowsStaleIncarnations(t *testing.T) {
	const thirdID = "AAAAAAAAAAAAAAAAAAAAAg"
	ctx := context.Background()
	mem := objstore.NewMemory()
	s, _, _, err := manifest.ObserveTopic("", "recreated", nil, manifest.Observation{TopicID: testTopicID, Partitions: 1, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _, err = manifest.ObserveTopic("", "recreated", s, manifest.Observation{TopicID: otherTopicID, Partitions: 1, NowMs: 2}); err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	d, _, _, err := manifest.ObserveTopic("", "deleted", nil, manifest.Observation{TopicID: testTopicID, Partitions: 1, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, _ = d.MarkDeleted(3)
	remotekit.PutTopicState(t, mem, d)
	cat, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lin := groups.NewLineages(fetchcache.NewCatalogTopicIDs(cat))
	for _, tt := range []struct {
		topic, id string
		stale     bool
	}{
		{"recreated", testTopicID, true},   // replaced, and its new lineage has no manifest yet
		{"recreated", otherTopicID, false}, // current
		{"recreated", thirdID, false},      // not the bucket's
		{"deleted", testTopicID, true},
		{"deleted", thirdID, false},
		{"never-tiered", testTopicID, false},
	} {
		got, err := lin.Stale(ctx, groups.Offset{Topic: tt.topic, Partition: 0, Offset: 5, TopicID: tt.id})
		if err != nil || got != tt.stale {
			t.Errorf("%s under %s: stale %v, %v; want %v", tt.topic, tt.id, got, err, tt.stale)
		}
	}
}

// TestFetchListenerKeepsServeOffsets: a fetch replica over serve's bucket
// (the same groups/ objects) commits a group's offset of a tiered topic;
// the group's offset of serve's local-only topic, which the bucket does not
// hold, stays.
func TestFetchListenerKeepsServeOffsets(t *testing.T) {
	groupBkt := serveCommittedBoth(t)
	remote, err := fetchcache.NewRemoteCatalog(groupBkt, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	commit20(t, startKafka(t, remote, KafkaOptions{Groups: startCoordinator(t, groupBkt, nil)}), "payments")
	o, err := groups.NewStore(groupBkt, groups.StoreOptions{}).Reload(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := o.Lookup("orders", 0); !ok || off.Offset != 20 {
		t.Fatalf("after a commit through a fetch listener over the bucket, orders' offset is %+v (%v): serve's offset dropped", off, ok)
	}
}

// commit20 commits offset 20 of partition 0 of each topic for group "g"
// (a simple commit, generation -1) at the Kafka listener addr.
func commit20(t *testing.T, addr string, topics ...string) {
	t.Helper()
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Version, q.Group, q.Generation = 8, "g", -1
	for _, tp := range topics {
		q.Topics = append(q.Topics, kmsg.OffsetCommitRequestTopic{Topic: tp, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 20, LeaderEpoch: -1}}})
	}
	resp := kmsg.NewPtrOffsetCommitResponse()
	if err := fetchkit.DialRaw(t, addr).Request(1, q, resp); err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		if c := rt.Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("commit %s: code %d", rt.Topic, c)
		}
	}
}

// serveCommittedBoth is a serve data dir's bucket with topics orders (local
// only: the bucket never holds it) and payments (uploaded), and group "g"'s
// offset 20 of both, committed through serve's Kafka listener.
func serveCommittedBoth(t *testing.T) *objstore.Memory {
	t.Helper()
	groupBkt := objstore.NewMemory()
	e := fetchkit.NewEnvWithTopicIDs(t)
	e.Topic("orders", 1, nil) // local only: the bucket never holds it
	e.Topic("payments", 1, map[string]string{"remote.storage.enable": "true"})
	for _, tp := range []string{"orders", "payments"} {
		e.Produce(e.Log(tp, 0), fetchkit.ProduceOpts{Per: 5}, fetchkit.GenRecs(30, ts0, "o"))
	}
	if err := e.Log("payments", 0).Roll(); err != nil {
		t.Fatal(err)
	}
	fetchkit.UploadAll(t, e, groupBkt)
	commit20(t, startKafka(t, fetchcache.NewCombinedCatalog(e.Dir, nil), KafkaOptions{Groups: startCoordinator(t, groupBkt, nil)}), "orders", "payments")
	return groupBkt
}
