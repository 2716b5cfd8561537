package kafkasrv

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// A topic first uploaded after the remote catalog's topic listing (reused
// for TopicsTTL, 30 s) is served already: its partitions are opened by
// their manifests. The Kafka listener takes commits on it, as the bare
// catalog's CatalogTopicIDs does (TestCatalogTopicIDsTopicNewerThanListing):
// the listener wraps its catalog (ValidatingCatalog), and the wrapper must
// still let CatalogTopicIDs look an unlisted topic up by its topic object.
// Before, the listener refused the commit UNKNOWN_TOPIC_OR_PARTITION and
// took the topic's committed offsets for a deleted topic's (OffsetFetch -1,
// removed at the group's next commit) until the listing was renewed.
func TestReviewCommitOnTopicNewerThanListing(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	var now atomic.Int64
	now.Store(1000)
	remote, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{Now: func() time.Time { return time.Unix(now.Load(), 0) }})
	if err != nil {
		t.Fatal(err)
	}
	if topics, err := remote.Topics(ctx); err != nil || len(topics) != 0 {
		t.Fatalf("empty bucket lists %+v, %v", topics, err)
	}
	// The topic's first upload, after the listing.
	lineageAt(t, mem, testTopicID, 51)
	s, _, _, err := manifest.ObserveTopic("", remotekit.TestTopic, nil, manifest.Observation{TopicID: testTopicID, Partitions: 1, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	now.Add(1) // within the listing's TTL

	c := startCoordinator(t, objstore.NewMemory(), nil)
	addr := startKafka(t, remote, KafkaOptions{Groups: c})
	rc := fetchkit.DialRaw(t, addr)
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Version, q.Group, q.Generation = 8, "g", -1
	q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: remotekit.TestTopic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	resp := kmsg.NewPtrOffsetCommitResponse()
	if err := rc.Request(1, q, resp); err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit on a served topic newer than the listing: code %d, want 0", code)
	}
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version, f.Group = 7, "g"
	f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: remotekit.TestTopic, Partitions: []int32{0}}}
	fr := kmsg.NewPtrOffsetFetchResponse()
	if err := rc.Request(2, f, fr); err != nil || fr.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v code %d", err, fr.ErrorCode)
	}
	if got := fr.Topics[0].Partitions[0].Offset; got != 3 {
		t.Fatalf("offset fetch answers %d, want the committed 3", got)
	}
}
