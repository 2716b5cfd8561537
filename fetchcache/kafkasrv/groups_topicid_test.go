package kafkasrv

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// routeCatalog serves one topic from a second catalog, the others from the
// first.
type routeCatalog struct {
	fetchcache.Catalog
	topic string
	other fetchcache.Catalog
}

func (c routeCatalog) Topics(ctx context.Context) ([]fetchcache.TopicInfo, error) {
	a, err := c.Catalog.Topics(ctx)
	if err != nil {
		return nil, err
	}
	b, err := c.other.Topics(ctx)
	for _, t := range b {
		if t.Name == c.topic {
			a = append(a, t)
		}
	}
	slices.SortFunc(a, func(x, y fetchcache.TopicInfo) int { return strings.Compare(x.Name, y.Name) })
	return a, err
}

func (c routeCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	if topic == c.topic {
		return c.other.Partition(ctx, topic, p)
	}
	return c.Catalog.Partition(ctx, topic, p)
}

// lineageAt commits a lineage of remotekit.TestTopic, partition 0, in the
// lineage of id.
func lineageAt(t *testing.T, b objstore.Bucket, id string, seed uint64) *remotekit.Remote {
	r := remotekit.NewRemoteID(t, b, "", id, 0, manifest.DefaultPolicy())
	m, err := manifest.NewID("", remotekit.TestTopic, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.M = m
	r.Commit(remotekit.WriteLocal(t, t.TempDir(), seed, 1, 5, false).Files(t)...)
	return r
}

// A group commits on a topic with an ID and on another one; the first is
// deleted and re-created in the bucket (a new lineage in its topic object).
// OffsetFetch then answers -1 for the new incarnation (Kafka deleted the old
// one's offsets), the other topic's offset unchanged, and a franz-go group
// consumer reads the new topic from its start, not from the old offset; the
// next commit drops the old offset from the group object. Deleted without a
// re-creation, the topic's offsets are not served either, and a commit on it
// is refused.
func TestOffsetFetchAfterTopicRecreated(t *testing.T) {
	mem := objstore.NewMemory()
	topic := remotekit.TestTopic
	old := lineageAt(t, mem, testTopicID, 41)
	s, _, _, err := manifest.ObserveTopic("", topic, nil, manifest.Observation{TopicID: testTopicID, Partitions: 1, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	var now atomic.Int64 // Unix seconds; the server reads it as the test moves it
	now.Store(1000)
	remote, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{Now: func() time.Time { return time.Unix(now.Load(), 0) }})
	if err != nil {
		t.Fatal(err)
	}
	e := fetchkit.NewEnv(t)
	e.Topic("plain", 1, nil)
	e.Produce(e.Log("plain", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(30, ts0, "p"))
	const plainID = "AAAAAAAAAAAAAAAAAAAAAQ"
	cat := routeCatalog{Catalog: idCatalog{Catalog: e.Cat, IDs: map[string]string{"plain": plainID}}, topic: topic, other: remote}
	groupBkt := objstore.NewMemory()
	c := startCoordinator(t, groupBkt, nil)
	addr := startKafka(t, cat, KafkaOptions{Groups: c})
	rc := fetchkit.DialRaw(t, addr)
	corr := int32(0)

	const committed = 4
	if len(old.Records) <= committed {
		t.Fatalf("old lineage has %d records", len(old.Records))
	}
	commitCode := func(tp string, off int64) int16 {
		t.Helper()
		q := kmsg.NewPtrOffsetCommitRequest()
		q.Version, q.Group, q.Generation = 8, "g", -1
		q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: tp, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: off, LeaderEpoch: -1}}}}
		resp := kmsg.NewPtrOffsetCommitResponse()
		corr++
		if err := rc.Request(corr, q, resp); err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	commit := func(tp string, off int64) {
		t.Helper()
		if code := commitCode(tp, off); code != 0 {
			t.Fatalf("commit %s: code %d", tp, code)
		}
	}
	// fetched is what OffsetFetch v7 (topics named) and v8 (all topics)
	// answer, by topic.
	fetched := func() (named, all map[string]int64) {
		t.Helper()
		q := kmsg.NewPtrOffsetFetchRequest()
		q.Version, q.Group = 7, "g"
		q.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}, {Topic: "plain", Partitions: []int32{0}}}
		resp := kmsg.NewPtrOffsetFetchResponse()
		corr++
		if err := rc.Request(corr, q, resp); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("offset fetch v7: %v code %d", err, resp.ErrorCode)
		}
		named = map[string]int64{}
		for _, rt := range resp.Topics {
			named[rt.Topic] = rt.Partitions[0].Offset
		}
		q8 := kmsg.NewPtrOffsetFetchRequest()
		q8.Version = 8
		q8.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
		resp8 := kmsg.NewPtrOffsetFetchResponse()
		corr++
		if err := rc.Request(corr, q8, resp8); err != nil || resp8.Groups[0].ErrorCode != 0 {
			t.Fatalf("offset fetch v8: %v %+v", err, resp8.Groups)
		}
		all = map[string]int64{}
		for _, rt := range resp8.Groups[0].Topics {
			all[rt.Topic] = rt.Partitions[0].Offset
		}
		return named, all
	}
	commit(topic, committed)
	commit("plain", 12)
	if named, all := fetched(); named[topic] != committed || named["plain"] != 12 || len(all) != 2 {
		t.Fatalf("before the re-creation: %v, all %v", named, all)
	}
	o, err := c.Store().Reload(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	for tp, want := range map[string]string{topic: testTopicID, "plain": plainID} {
		if off, _ := o.Lookup(tp, 0); off.TopicID != want {
			t.Fatalf("%s committed against topic id %q, want %q", tp, off.TopicID, want)
		}
	}

	// Deleted and re-created: a new lineage, current in the topic object.
	cur := lineageAt(t, mem, otherTopicID, 42)
	if s, _, _, err = manifest.ObserveTopic("", topic, s, manifest.Observation{TopicID: otherTopicID, Partitions: 1, NowMs: 2}); err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	now.Add(int64((fetchcache.DefaultRemoteManifestTTL + time.Second) / time.Second)) // the manifest is re-read; the listing (30 s) is not
	named, all := fetched()
	if named[topic] != -1 || named["plain"] != 12 {
		t.Fatalf("after the re-creation: %v", named)
	}
	if _, ok := all[topic]; ok || all["plain"] != 12 {
		t.Fatalf("after the re-creation, all topics: %v", all)
	}

	// A consumer of the group reads the new incarnation from its start
	// (auto.offset.reset earliest), not from the old incarnation's offset.
	if len(cur.Records) <= committed {
		t.Fatalf("new lineage has %d records", len(cur.Records))
	}
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var first *kgo.Record
	for first == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no record consumed")
		}
		fs.EachRecord(func(r *kgo.Record) {
			if first == nil {
				first = r
			}
		})
	}
	if first.Offset != 0 {
		t.Fatalf("the group consumer started the re-created topic at offset %d, want 0", first.Offset)
	}
	cl.Close()

	// The next write of the group removes the old incarnation's offset.
	commit("plain", 13)
	if o, err = c.Store().Reload(context.Background(), "g"); err != nil {
		t.Fatal(err)
	}
	if off, ok := o.Lookup(topic, 0); ok {
		t.Fatalf("the old incarnation's offset is still in the object: %+v", off)
	}

	// Committed on the new incarnation, then deleted: not served.
	commit(topic, 2)
	if named, _ := fetched(); named[topic] != 2 {
		t.Fatalf("committed on the new incarnation: %v", named)
	}
	deleted, _ := s.MarkDeleted(3)
	remotekit.PutTopicState(t, mem, deleted)
	now.Add(int64((fetchcache.DefaultRemoteManifestTTL + time.Second) / time.Second))
	if named, _ := fetched(); named[topic] != -1 || named["plain"] != 13 {
		t.Fatalf("after the deletion: %v", named)
	}
	// A commit on the deleted topic is refused, as Kafka refuses one on a
	// topic it does not know.
	if code := commitCode(topic, 3); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit on the deleted topic: code %d", code)
	}
}
