package fetchcache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

const (
	lineOld   = "o3Bx6y0QQxyxS2FrDcDiOw"
	lineNew   = "Vtqh-_aLSpGn3jK4dGnv8A"
	lineThird = "AQIDBAUGBwgJCgsMDQ4PEA"
)

// The remote catalog serves the lineage the topic object names: a
// re-created topic's old lineage is neither listed nor read, Topics
// carries the topic ID, and a deleted topic disappears.
func TestRemoteCatalogServesCurrentLineage(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	oldLocal := remotekit.WriteLocal(t, t.TempDir(), 21, 4, 10, false)
	old := remotekit.NewRemoteID(t, mem, "", lineOld, 0, manifest.DefaultPolicy())
	old.Commit(oldLocal.Files(t)...)
	newLocal := remotekit.WriteLocal(t, t.TempDir(), 22, 2, 10, false)
	cur := remotekit.NewRemoteID(t, mem, "", lineNew, 0, manifest.DefaultPolicy())
	cur.Commit(newLocal.Files(t)...)
	if old.M.NextOffset() <= cur.M.NextOffset() {
		t.Fatalf("the old lineage (%d) must be longer than the new (%d)", old.M.NextOffset(), cur.M.NextOffset())
	}
	s, _, _, err := manifest.ObserveTopic("", remotekit.TestTopic, nil, manifest.Observation{TopicID: lineOld, Partitions: 1, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, _, _, err = manifest.ObserveTopic("", remotekit.TestTopic, s, manifest.Observation{TopicID: lineNew, Partitions: 1, NowMs: 2})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)

	now := time.Unix(1000, 0)
	cat, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	topics, err := cat.Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0].ID != lineNew || len(topics[0].Partitions) != 1 {
		t.Fatalf("topics %+v, %v", topics, err)
	}
	p, err := cat.Partition(ctx, remotekit.TestTopic, remotekit.TestPartition)
	if err != nil {
		t.Fatal(err)
	}
	remotekit.CheckEveryOffset(t, cur, func(ctx context.Context, off int64, max int) ([]byte, int64, int64, error) {
		data, err := p.Read(ctx, off, max)
		o, oerr := p.Offsets(ctx)
		return data, o.LogStart, o.LogEnd, errors.Join(err, oerr)
	}, newLocal)
	var oe *fetchcache.OffsetOutOfRangeError
	if _, err := p.Read(ctx, cur.M.NextOffset()+1, 1<<20); !errors.As(err, &oe) {
		t.Fatalf("read past the new lineage's end (inside the old one): %v", err)
	}

	// Re-created again while the listing is fresh: the partition's next
	// manifest re-read sees the new lineage, and the listing follows at
	// once (Metadata's topic ID must match the data served).
	third := remotekit.NewRemoteID(t, mem, "", lineThird, 0, manifest.DefaultPolicy())
	third.Commit(remotekit.WriteLocal(t, t.TempDir(), 23, 1, 5, false).Files(t)...)
	s, _, _, err = manifest.ObserveTopic("", remotekit.TestTopic, s, manifest.Observation{TopicID: lineThird, Partitions: 1, NowMs: 3})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	now = now.Add(fetchcache.DefaultRemoteManifestTTL + time.Second) // within the 30 s listing TTL
	if o, err := p.Offsets(ctx); err != nil || o.LogEnd != third.M.NextOffset() {
		t.Fatalf("offsets after the second re-creation: %+v, %v", o, err)
	}
	if topics, err := cat.Topics(ctx); err != nil || len(topics) != 1 || topics[0].ID != lineThird {
		t.Fatalf("listing after the second re-creation: %+v, %v", topics, err)
	}

	del, _ := s.MarkDeleted(4)
	remotekit.PutTopicState(t, mem, del)
	now = now.Add(time.Hour)
	if topics, err := cat.Topics(ctx); err != nil || len(topics) != 0 {
		t.Fatalf("deleted topic listed: %+v, %v", topics, err)
	}
	var ue *fetchcache.UnknownTopicOrPartitionError
	if _, err := p.Offsets(ctx); !errors.As(err, &ue) {
		t.Fatalf("deleted topic's offsets: %v", err)
	}
	if _, err := p.Read(ctx, 0, 1<<20); err == nil {
		// The read re-reads the manifest only past its end; the offsets
		// above did, so the partition is now unknown.
		t.Fatal("deleted topic read")
	}
}
