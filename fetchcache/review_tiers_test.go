package fetchcache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/remotetier/objstore"
)

// compactedGap builds the state of TestReviewCombinedCompactedGapAtBoundary:
// topic cg, its cleaned segment [0,10) uploaded to mem and deleted locally,
// the local log starting at 15; kept are the uploaded records, tail the
// local ones.
func compactedGap(t *testing.T) (e *fetchkit.Env, mem *objstore.Memory, kept, tail []fetchkit.Rec, now time.Time) {
	t.Helper()
	e = fetchkit.NewEnv(t)
	e.Topic("cg", 1, map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact,delete",
		"delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0", "internal.segment.bytes": "1048576"})
	l := e.Log("cg", 0)
	now = time.Now()
	var recs []fetchkit.Rec
	for i := range 10 {
		recs = append(recs, fetchkit.Rec{Timestamp: now.UnixMilli() + int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	for i := range 5 {
		recs = append(recs, fetchkit.Rec{Timestamp: now.UnixMilli() + 10 + int64(i), Key: []byte(fmt.Sprintf("t%d", i))}) // tombstones
	}
	kept = e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None, Per: 5}, recs)[:10]
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	var more []fetchkit.Rec
	for i := range 5 {
		more = append(more, fetchkit.Rec{Timestamp: now.UnixMilli() + 100 + int64(i), Key: []byte(fmt.Sprintf("b%d", i)), Value: []byte("b")})
	}
	tail = e.Produce(l, fetchkit.ProduceOpts{Per: 5}, more)
	for _, at := range []time.Time{now, now.Add(time.Hour), now.Add(2 * time.Hour)} {
		if _, err := compactor.RunOnce(context.Background(), e.Dir, compactor.PassOptions{Force: true, Config: compactor.Config{DedupeBufferSize: 1 << 20, Now: func() time.Time { return at }}}); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	if len(segs) != 2 || segs[0].NextOffset != 10 || segs[1].BaseOffset != 15 {
		t.Fatalf("setup: segments %+v, want [0,10) cleaned and 15 active", segs)
	}
	mem = objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	// Local retention: the remote tier holds every offset of segment 0.
	if _, err := l.DeleteSegments(segs[0].NextOffset); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 15 {
		t.Fatalf("setup: local start %d", l.LogStartOffset())
	}
	return e, mem, kept, tail, now
}

// gapPartition is partition cg-0 of compactedGap, both tiers, the remote
// one read from b.
func gapPartition(t *testing.T, e *fetchkit.Env, b objstore.Bucket, o fetchcache.RemoteCatalogOptions) fetchcache.Partition {
	t.Helper()
	remote, err := fetchcache.NewRemoteCatalog(b, o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fetchcache.NewCombinedCatalog(e.Dir, remote).Partition(context.Background(), "cg", 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// countingGets counts the Gets of a bucket.
type countingGets struct {
	objstore.Bucket
	gets atomic.Int64
}

func (b *countingGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.gets.Add(1)
	return b.Bucket.Get(ctx, key)
}

// TestCombinedCompactedGapRereadsSpaced: a compacted partition whose remote
// end stays below the local start (TestReviewCombinedCompactedGapAtBoundary)
// does not re-read its manifest from the store on every Offsets call (every
// Fetch and long-poll tick of every consumer, the tail's included), only
// once per MinRefresh; a read inside the gap still re-reads first.
func TestCombinedCompactedGapRereadsSpaced(t *testing.T) {
	e, mem, _, tail, _ := compactedGap(t)
	b := &countingGets{Bucket: mem}
	p := gapPartition(t, e, b, fetchcache.RemoteCatalogOptions{MinRefresh: time.Hour})
	ctx := context.Background()
	if o, err := p.Offsets(ctx); err != nil || o.LogStart != 0 {
		t.Fatalf("offsets %+v, %v; want the remote start 0", o, err)
	}
	before := b.gets.Load()
	for range 50 {
		if o, err := p.Offsets(ctx); err != nil || o.LogStart != 0 {
			t.Fatalf("offsets %+v, %v; want the remote start 0", o, err)
		}
	}
	if n := b.gets.Load() - before; n > 1 {
		t.Fatalf("50 Offsets calls made %d store GETs, want at most 1 (a re-read per MinRefresh)", n)
	}
	before = b.gets.Load()
	fetchkit.SameRecs(t, readPartition(t, p, 12), tail)
	if n := b.gets.Load() - before; n == 0 {
		t.Fatal("a read inside the gap did not re-read the manifest first")
	}
}

// TestReviewCombinedCompactedGapAtBoundary: a compacted topic whose last
// uploaded segment lost its trailing tombstones to the cleaner (delete
// horizon passed) ends in the bucket below the next local segment's base;
// once local retention deleted that segment the local log starts at the
// next base. The offsets between are nobody's (compacted away), so the
// bucket's offsets below are still the partition's: the log start is the
// remote start and a read from it goes on locally, as a Kafka broker with
// tiered storage answers.
func TestReviewCombinedCompactedGapAtBoundary(t *testing.T) {
	e, mem, kept, tail, now := compactedGap(t)
	p := gapPartition(t, e, mem, fetchcache.RemoteCatalogOptions{})
	ctx := context.Background()
	o, err := p.Offsets(ctx)
	if err != nil || o.LogStart != 0 || o.LogEnd != 20 {
		t.Fatalf("offsets %+v, %v; want the remote start 0 and the local end 20", o, err)
	}
	fetchkit.SameRecs(t, readPartition(t, p, 0), append(append([]fetchkit.Rec{}, kept...), tail...))
	// A position inside the gap goes on with the next record present.
	fetchkit.SameRecs(t, readPartition(t, p, 12), tail)
	if off, _, found, err := p.OffsetForTimestamp(ctx, now.UnixMilli()+3); err != nil || !found || off != 3 {
		t.Fatalf("offset for an uploaded timestamp: %d %v %v, want 3", off, found, err)
	}
}

// TestReviewCombinedLogStartSurvivesManifestRefreshFailure: once the
// remote tier's offsets are known, a manifest re-read that fails (a store
// hiccup, an overloaded gate) does not move the reported log start up to
// the local start: ListOffsets(earliest) answers from it, and a consumer
// resetting to the earliest offset then would skip every uploaded offset
// for good. A Kafka broker answers its log start from memory.
func TestReviewCombinedLogStartSurvivesManifestRefreshFailure(t *testing.T) {
	e := fetchkit.NewEnv(t)
	l, mem := fetchkit.OffloadedTopic(t, e, "cold", 9)
	localStart := l.LogStartOffset()
	var failing atomic.Bool
	b := objstore.WithFaults(mem, objstore.FailMatching(func(objstore.Call) bool { return failing.Load() }, errors.New("store timeout")))
	now := time.Now()
	var clock atomic.Int64
	remote, err := fetchcache.NewRemoteCatalog(b, fetchcache.RemoteCatalogOptions{
		Now: func() time.Time { return now.Add(time.Duration(clock.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cat := fetchcache.NewCombinedCatalog(e.Dir, remote)
	p, err := cat.Partition(ctx, "cold", 0)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := p.Offsets(ctx); err != nil || o.LogStart != 0 || localStart == 0 {
		t.Fatalf("setup: offsets %+v, %v (local start %d)", o, err, localStart)
	}
	failing.Store(true)
	clock.Store(int64(time.Minute)) // the manifest is due for a re-read
	o, err := p.Offsets(ctx)
	if err == nil && o.LogStart != 0 {
		t.Fatalf("offsets with the manifest re-read failing: %+v; the log start moved from 0 to %d, hiding the uploaded offsets", o, o.LogStart)
	}
}
