package fetchcache_test

import (
	"context"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestCatalogTopicIDsTopicNewerThanListing: a topic first uploaded after
// the catalog's topic listing (cached for TopicsTTL, 30 s) is served
// already (its partitions are opened by their manifests, no listing
// needed), so its current ID must be known: not "not served", which
// refuses the group's commits on it and takes its committed offsets
// (written by a replica that listed it) for a deleted topic's, answering
// no committed offset (the consumer resets) and removing them at the
// group's next commit.
func TestCatalogTopicIDsTopicNewerThanListing(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	now := time.Unix(1000, 0)
	cat, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if topics, err := cat.Topics(ctx); err != nil || len(topics) != 0 {
		t.Fatalf("empty bucket lists %+v, %v", topics, err)
	}

	// The topic's first upload, after the listing.
	r := remotekit.NewRemoteID(t, mem, "", lineNew, 0, manifest.DefaultPolicy())
	r.Commit(remotekit.WriteLocal(t, t.TempDir(), 31, 2, 10, false).Files(t)...)
	s, _, _, err := manifest.ObserveTopic("", remotekit.TestTopic, nil, manifest.Observation{TopicID: lineNew, Partitions: 1, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	now = now.Add(time.Second) // within the listing's TTL

	if _, err := cat.Partition(ctx, remotekit.TestTopic, remotekit.TestPartition); err != nil {
		t.Fatalf("the new topic's partition is not served: %v", err)
	}
	id, served, err := fetchcache.NewCatalogTopicIDs(cat).CurrentTopicID(ctx, remotekit.TestTopic)
	if err != nil || !served || id != lineNew {
		t.Fatalf("CurrentTopicID of a served topic newer than the listing: %q served %v, %v; want %q served", id, served, err, lineNew)
	}
	stale, err := groups.NewLineages(fetchcache.NewCatalogTopicIDs(cat)).Stale(ctx,
		groups.Offset{Topic: remotekit.TestTopic, Partition: 0, Offset: 5, TopicID: lineNew})
	if err != nil || stale {
		t.Fatalf("an offset committed against the served incarnation is stale: %v, %v", stale, err)
	}

	// A topic neither listed nor in the bucket is still not served.
	if _, served, err := fetchcache.NewCatalogTopicIDs(cat).CurrentTopicID(ctx, "never"); err != nil || served {
		t.Fatalf("unknown topic: served %v, %v", served, err)
	}
}

// TestCatalogTopicIDsPartitionNewerThanListing: HasPartition tells the
// partitions a served topic has, so that a group's commit on a partition
// the topic does not have is refused; a partition added after the
// catalog's topic listing (cached for TopicsTTL) is served already and is
// not refused, and one the bucket lacks is.
func TestCatalogTopicIDsPartitionNewerThanListing(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	now := time.Unix(1000, 0)
	cat, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	uploadServed(t, mem, 4)
	if topics, err := cat.Topics(ctx); err != nil || len(topics) != 1 || len(topics[0].Partitions) != 1 {
		t.Fatalf("listing: %+v, %v", topics, err)
	}

	// A partition's first upload, after the listing.
	const added = remotekit.TestPartition + 2
	r2 := remotekit.NewRemoteID(t, mem, "", lineNew, 0, manifest.DefaultPolicy())
	if r2.M, err = manifest.NewID("", remotekit.TestTopic, lineNew, added, 0); err != nil {
		t.Fatal(err)
	}
	r2.Commit(remotekit.WriteLocal(t, t.TempDir(), 32, 1, 5, false).Files(t)...)
	now = now.Add(time.Second) // within the listing's TTL

	ids := fetchcache.NewCatalogTopicIDs(cat)
	for _, tc := range []struct {
		topic     string
		partition int32
		want      bool
	}{
		{remotekit.TestTopic, remotekit.TestPartition, true},
		{remotekit.TestTopic, added, true},
		{remotekit.TestTopic, remotekit.TestPartition + 1, false},
		{remotekit.TestTopic, 100, false},
		{"never", 0, false},
	} {
		if has, err := ids.HasPartition(ctx, tc.topic, tc.partition); err != nil || has != tc.want {
			t.Errorf("HasPartition(%s, %d) = %v, %v; want %v", tc.topic, tc.partition, has, err, tc.want)
		}
	}
	var _ groups.TopicPartitions = ids
}

// TestCatalogTopicIDsUnlistedPartitionsBounded: one request (an
// OffsetCommit naming 1000 partitions its topic does not have) asks the
// catalog, which reads the store, for at most maxUnlistedPartitions
// partitions its listing lacks; the others are taken as missing. Before,
// each cost the store a read: 1000 GETs for one commit.
func TestCatalogTopicIDsUnlistedPartitionsBounded(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	mem := &objtesting.ReadCounter{BucketReader: store}
	cat, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uploadServed(t, store, 1)
	ids := fetchcache.NewCatalogTopicIDs(cat)
	if has, err := ids.HasPartition(ctx, remotekit.TestTopic, remotekit.TestPartition); err != nil || !has {
		t.Fatalf("HasPartition of the listed partition: %v, %v", has, err)
	}
	before := mem.Reads()
	for p := remotekit.TestPartition + 1; p <= remotekit.TestPartition+1000; p++ {
		if has, err := ids.HasPartition(ctx, remotekit.TestTopic, p); err != nil || has {
			t.Fatalf("HasPartition(%d) = %v, %v; want false", p, has, err)
		}
	}
	if reads := mem.Reads() - before; reads > 3*32 {
		t.Fatalf("1000 partitions the topic lacks cost %d store reads in one request, want at most %d", reads, 3*32)
	}
}

// uploadServed commits one segment of remotekit's partition under topic ID
// lineNew and writes the topic object naming lineNew current with
// partitions partitions.
func uploadServed(t *testing.T, b objstore.Bucket, partitions int32) {
	t.Helper()
	r := remotekit.NewRemoteID(t, b, "", lineNew, 0, manifest.DefaultPolicy())
	r.Commit(remotekit.WriteLocal(t, t.TempDir(), 31, 1, 5, false).Files(t)...)
	s, _, _, err := manifest.ObserveTopic("", remotekit.TestTopic, nil, manifest.Observation{TopicID: lineNew, Partitions: partitions, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, b, s)
}
