package fetchcache_test

import (
	"context"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/groups"
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
