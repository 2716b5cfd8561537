package fetchcache_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// topicGets counts the reads of topic objects.
type topicGets struct {
	objstore.BucketReader
	n atomic.Int64
}

func (b *topicGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasPrefix(key, "topics/") {
		b.n.Add(1)
	}
	return b.BucketReader.Get(ctx, key)
}

// TestRemoteOffsetsCheckTopicEndsTogether: the first partition of a topic
// whose offsets are asked for (as librdkafka asks, one partition per
// ListOffsets) has the ends of the topic's other partitions checked with
// its own, side by side, so that asking for theirs next costs no store
// read; the topic object is read once for all of the opens; every
// partition reports its own log end. A Fetch's Offsets checks its own
// partition only.
func TestRemoteOffsetsCheckTopicEndsTogether(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	const parts = 6
	var remotes []*remotekit.Remote
	for p := range int32(parts) {
		local := remotekit.WriteLocal(t, t.TempDir(), 70+uint64(p), 2, 20, false)
		r := remotekit.NewRemotePartition(t, mem, "", p, 0, manifest.DefaultPolicy())
		r.Commit(local.Files(t)...)
		remotes = append(remotes, r)
	}
	tg := &topicGets{BucketReader: mem}
	rc := &objtesting.ReadCounter{BucketReader: tg}
	cat, err := fetchcache.NewRemoteCatalog(rc, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Topics(ctx); err != nil { // as Metadata does first
		t.Fatal(err)
	}
	listed := tg.n.Load()
	offsets := func(p int32) fetchcache.Offsets {
		t.Helper()
		part, err := cat.Partition(ctx, remotekit.TestTopic, p)
		if err != nil {
			t.Fatal(err)
		}
		o, err := part.Offsets(fetchcache.WithOffsetsListing(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if want := remotes[p].Segs[len(remotes[p].Segs)-1].NextOffset(); o.LogEnd != want {
			t.Fatalf("partition %d: log end %d, want %d", p, o.LogEnd, want)
		}
		return o
	}
	offsets(2)
	if got := tg.n.Load() - listed; got != 1 {
		t.Fatalf("opening %d partitions read the topic object %d times; want once", parts, got)
	}
	before := rc.Reads()
	for p := range int32(parts) {
		offsets(p)
	}
	if got := rc.Reads() - before; got != 0 {
		t.Fatalf("the other partitions' offsets cost %d store reads; want 0 (their ends checked with the first)", got)
	}
	// A Fetch's Offsets (no listing mark) checks only its own partition.
	cat2, err := fetchcache.NewRemoteCatalog(rc, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat2.Topics(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{2, 3} {
		part, err := cat2.Partition(ctx, remotekit.TestTopic, p)
		if err != nil {
			t.Fatal(err)
		}
		before := rc.Reads()
		if _, err := part.Offsets(ctx); err != nil {
			t.Fatal(err)
		}
		if rc.Reads() == before {
			t.Fatalf("partition %d: its end was checked by another partition's Fetch", p)
		}
	}
}

// logRanges records the range GETs of .log objects.
type logRanges struct {
	objstore.BucketReader
	mu     sync.Mutex
	ranges [][2]int64 // offset, length
}

func (b *logRanges) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if strings.HasSuffix(key, ".log") {
		b.mu.Lock()
		b.ranges = append(b.ranges, [2]int64{off, n})
		b.mu.Unlock()
	}
	return b.BucketReader.GetRange(ctx, key, off, n)
}

// TestRemoteEndCheckReadsOnlyTheTail: through the chunk cache, the check
// of a partition's end reads the final segment's last bytes, exactly, not
// the chunk around them: one small GET (no index), and
// nothing cached for it (a partition of more than 8 MiB, whose final chunk
// a replay from its start would reach last).
func TestRemoteEndCheckReadsOnlyTheTail(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 77, 12, 400, false) // over 8 MiB in all
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	final := r.Segs[len(r.Segs)-1]
	rc := &objtesting.ReadCounter{BucketReader: r.Bucket}
	lr := &logRanges{BucketReader: rc}
	_, p := partitionOverCache(t, lr, chunkcache.CacheOptions{ChunkBytes: 1 << 20, MemoryBytes: 16 << 20})
	before := rc.Reads() // opening read the manifests
	if _, err := p.Offsets(ctx); err != nil {
		t.Fatal(err)
	}
	if reads := rc.Reads() - before; reads != 1 {
		t.Fatalf("the end check made %d store reads; want one (the tail, no index)", reads)
	}
	if r.M.LogBytes() <= 8<<20 {
		t.Fatalf("a partition of %d bytes: the check would read the chunk", r.M.LogBytes())
	}
	if len(lr.ranges) != 1 {
		t.Fatalf(".log range GETs %v; want one", lr.ranges)
	}
	got := lr.ranges[0]
	if got[0] == 0 || got[0]+got[1] != final.Log.Size || got[1] > 64<<10 {
		t.Fatalf("the end check read [%d, +%d) of a %d-byte segment; want a small tail ending at its end", got[0], got[1], final.Log.Size)
	}
}

// TestRemoteEndCheckFollowsTheChunkSize: whether the end check reads the
// final segment whole through the cache follows the cache's chunk size: a
// small partition (3 to 4 MiB) whose final segment is longer than a 1 MiB
// chunk has only its tail read, exactly, with 1 MiB chunks, and its final
// segment read whole with the default 4 MiB ones.
func TestRemoteEndCheckFollowsTheChunkSize(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 79, 2, 1000, false)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	final := r.Segs[len(r.Segs)-1]
	if final.Log.Size <= 1<<20 || r.M.LogBytes() > 8<<20 {
		t.Fatalf("a partition of %d bytes, final segment %d: want a final segment over 1 MiB in at most 8 MiB", r.M.LogBytes(), final.Log.Size)
	}
	for _, tc := range []struct {
		chunk int64
		whole bool
	}{{1 << 20, false}, {4 << 20, true}} {
		lr := &logRanges{BucketReader: r.Bucket}
		_, p := partitionOverCache(t, lr, chunkcache.CacheOptions{ChunkBytes: tc.chunk, MemoryBytes: 16 << 20})
		if _, err := p.Offsets(ctx); err != nil {
			t.Fatal(err)
		}
		if len(lr.ranges) != 1 {
			t.Fatalf("chunks of %d: .log range GETs %v; want one", tc.chunk, lr.ranges)
		}
		got := lr.ranges[0]
		if whole := got == [2]int64{0, final.Log.Size}; whole != tc.whole {
			t.Fatalf("chunks of %d: the end check read [%d, +%d) of a %d-byte final segment; want it whole: %v", tc.chunk, got[0], got[1], final.Log.Size, tc.whole)
		}
		if !tc.whole && (got[0]+got[1] != final.Log.Size || got[1] > 64<<10) {
			t.Fatalf("chunks of %d: the end check read [%d, +%d); want a small tail ending at %d", tc.chunk, got[0], got[1], final.Log.Size)
		}
	}
}

// TestRemoteEndCheckOfSmallPartition: the end check of a partition of at
// most 8 MiB whose final segment fits a chunk reads that segment through
// the cache and walks it from its first batch: one GET of the final .log,
// no index, and the replay that reaches it later reads it from the cache.
func TestRemoteEndCheckOfSmallPartition(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 78, 3, 40, false)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	final := r.Segs[len(r.Segs)-1]
	if r.M.LogBytes() > 8<<20 || final.Log.Size > 1<<20 {
		t.Fatalf("a partition of %d bytes, final segment %d: not small", r.M.LogBytes(), final.Log.Size)
	}
	rc := &objtesting.ReadCounter{BucketReader: r.Bucket}
	lr := &logRanges{BucketReader: rc}
	cb, p := partitionOverCache(t, lr, chunkcache.CacheOptions{ChunkBytes: 1 << 20, MemoryBytes: 16 << 20})
	before := rc.Reads() // opening read the manifests
	if _, err := p.Offsets(ctx); err != nil {
		t.Fatal(err)
	}
	if reads := rc.Reads() - before; reads != 1 || !slices.Equal(lr.ranges, [][2]int64{{0, final.Log.Size}}) {
		t.Fatalf("the end check made %d reads, .log ranges %v; want one, of the whole final segment [0, %d)", reads, lr.ranges, final.Log.Size)
	}
	body, err := cb.GetRange(ctx, final.Log.Key, 0, final.Log.Size)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, body)
	body.Close()
	if reads := rc.Reads() - before; reads != 1 {
		t.Fatalf("reading the final segment after the check made %d more store reads; want it cached", reads-1)
	}
}
