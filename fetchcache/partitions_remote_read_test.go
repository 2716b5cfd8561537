package fetchcache_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// remoteOverCache is a remote partition of segs small segments read
// through a caching bucket over a bucket that counts its reads.
func remoteOverCache(t *testing.T, segs int, txn bool, o chunkcache.CacheOptions) (*remotekit.Remote, *objtesting.ReadCounter, *chunkcache.CachingBucket, fetchcache.Partition) {
	t.Helper()
	local := remotekit.WriteLocal(t, t.TempDir(), 41, segs, 12, txn)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	rc := &objtesting.ReadCounter{BucketReader: r.Bucket}
	cb, p := partitionOverCache(t, rc, o)
	return r, rc, cb, p
}

// partitionOverCache opens the test partition of b through a chunk cache
// with options o.
func partitionOverCache(t *testing.T, b objstore.BucketReader, o chunkcache.CacheOptions) (*chunkcache.CachingBucket, fetchcache.Partition) {
	t.Helper()
	cb, err := chunkcache.NewCachingBucket(b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cb.Close() })
	cat, err := fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Partition(context.Background(), remotekit.TestTopic, remotekit.TestPartition)
	if err != nil {
		t.Fatal(err)
	}
	return cb, p
}

// TestRemoteSequentialReadGETs: a consumer reading a partition of many
// small segments through the chunk cache, as the fetch service does,
// costs at most one store GET per segment, plus the first segment's index
// when it starts inside one: no segment's offset or time index is read,
// nor a transaction index for a read_uncommitted reader; a read_committed
// one adds the transaction indexes of the segments the manifest says have
// one, once each. Every read returns the model's bytes.
func TestRemoteSequentialReadGETs(t *testing.T) {
	const segs = 12
	for _, tt := range []struct {
		name      string
		maxBytes  int
		mid       bool // start inside the first segment
		committed bool // ask for aborted transactions as read_committed
	}{
		{name: "from_the_start", maxBytes: 1 << 20},
		{name: "small_reads", maxBytes: 3000},
		{name: "one_batch_reads", maxBytes: 1},
		{name: "from_inside_a_segment", maxBytes: 3000, mid: true},
		{name: "read_committed", maxBytes: 3000, committed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			r, rc, cb, p := remoteOverCache(t, segs, true, chunkcache.CacheOptions{MemoryBytes: 64 << 20})
			txnSegs := 0
			for _, s := range r.Segs {
				if s.TxnIndex != nil {
					txnSegs++
				}
			}
			if txnSegs == 0 {
				t.Fatal("no segment has a transaction index: the test would not tell")
			}
			before := rc.Reads()
			off := r.M.LogStartOffset
			if tt.mid {
				off = (r.Segs[0].BaseOffset + r.Segs[0].LastOffset) / 2
			}
			for off < r.M.NextOffset() {
				v, err := fetchcache.ReadView(ctx, p, off, tt.maxBytes)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := v.Bytes(), r.ExpectRead(off, tt.maxBytes); !bytes.Equal(got, want) || len(got) == 0 {
					t.Fatalf("read %d: %d bytes, want %d", off, len(got), len(want))
				}
				if tt.committed {
					if _, err := p.AbortedTxns(ctx, off, v.Next); err != nil {
						t.Fatal(err)
					}
				}
				off = v.Next
			}
			cb.Close()              // waits for read-ahead
			n := int64(len(r.Segs)) // the marker batches roll more segments
			limit := n
			if tt.mid {
				limit++
			}
			if tt.committed {
				limit += int64(txnSegs)
			}
			if got := rc.Reads() - before; got > limit || got < n {
				t.Fatalf("%d store reads for %d segments, want %d (at most one per segment%s)", got, n, limit,
					map[bool]string{true: " and the indexes allowed"}[tt.mid || tt.committed])
			}
		})
	}
}

// TestRemoteFirstByteRoundTrips: a cold read at a random offset of a
// partition whose manifest is loaded costs two store requests on its
// critical path, one after the other: the segment's offset index, then
// the chunk of its .log holding the batch.
func TestRemoteFirstByteRoundTrips(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 20 {
		// Read-ahead off: it runs after the read, off its critical path.
		r, rc, _, p := remoteOverCache(t, 6, false, chunkcache.CacheOptions{MemoryBytes: 64 << 20, ReadAheadChunks: -1})
		seg := r.Segs[rng.IntN(len(r.Segs))]
		off := seg.BaseOffset + 1 + rng.Int64N(seg.LastOffset-seg.BaseOffset)
		before := rc.Reads()
		v, err := fetchcache.ReadView(ctx, p, off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := v.Bytes(), r.ExpectRead(off, 1<<20); !bytes.Equal(got, want) {
			t.Fatalf("read %d: %d bytes, want %d", off, len(got), len(want))
		}
		if got := rc.Reads() - before; got != 2 {
			t.Fatalf("try %d: a cold read at offset %d made %d store requests, want 2 (index, chunk)", i, off, got)
		}
	}
}

// TestRemoteCatalogSharesIndexCache: the open partitions of a catalog
// share one index cache of Reader.IndexCacheBytes, not one each: with room
// for one index, reading inside a segment of four partitions in turn
// leaves only the last one's index cached, so the first one's is fetched
// again (with one cache per partition it would still be cached).
func TestRemoteCatalogSharesIndexCache(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	const parts = 4
	var remotes []*remotekit.Remote
	largest, smallest := int64(0), int64(1<<62)
	for p := range int32(parts) {
		local := remotekit.WriteLocal(t, t.TempDir(), 50+uint64(p), 2, 20, false)
		r := remotekit.NewRemotePartition(t, mem, "", p, 0, manifest.DefaultPolicy())
		r.Commit(local.Files(t)...)
		remotes = append(remotes, r)
		largest, smallest = max(largest, r.Segs[0].Index.Size), min(smallest, r.Segs[0].Index.Size)
	}
	bound := largest + 64 // indexes are accounted at their size + 64
	if 2*(smallest+64) <= bound {
		t.Fatalf("index sizes %d..%d: the bound would hold two", smallest, largest)
	}
	rc := &objtesting.ReadCounter{BucketReader: mem}
	cat, err := fetchcache.NewRemoteCatalog(rc, fetchcache.RemoteCatalogOptions{Reader: remotelog.ReaderOptions{IndexCacheBytes: bound}})
	if err != nil {
		t.Fatal(err)
	}
	inside := func(r *remotekit.Remote, k int64) int64 {
		return r.Segs[0].BaseOffset + 1 + k
	}
	var first fetchcache.Partition
	for p, r := range remotes {
		part, err := cat.Partition(ctx, remotekit.TestTopic, int32(p))
		if err != nil {
			t.Fatal(err)
		}
		if p == 0 {
			first = part
		}
		if _, err := part.Read(ctx, inside(r, 0), 100); err != nil {
			t.Fatal(err)
		}
	}
	// Another offset inside the first partition's segment, not where a
	// read ended: its index is needed again.
	before := rc.Reads()
	off := inside(remotes[0], 5)
	data, err := first.Read(ctx, off, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := remotes[0].ExpectRead(off, 100); !bytes.Equal(data, want) {
		t.Fatalf("read %d: %d bytes, want %d", off, len(data), len(want))
	}
	if got := rc.Reads() - before; got != 2 {
		t.Fatalf("%d store reads, want 2: the index (evicted from the shared cache by the other partitions') and the log", got)
	}
}

// TestRemoteInterleavedPartitionsGETs: one consumer replaying eight
// partitions through one chunk cache, a read of each in turn (as one Fetch
// after another names them all), still costs at most one store GET per
// segment: each partition's reads continue its own stream.
func TestRemoteInterleavedPartitionsGETs(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	const parts = 8
	var remotes []*remotekit.Remote
	segs := 0
	for p := range int32(parts) {
		local := remotekit.WriteLocal(t, t.TempDir(), 60+uint64(p), 4, 12, false)
		r := remotekit.NewRemotePartition(t, mem, "", p, 0, manifest.DefaultPolicy())
		r.Commit(local.Files(t)...)
		remotes = append(remotes, r)
		segs += len(r.Segs)
	}
	rc := &objtesting.ReadCounter{BucketReader: mem}
	cb, err := chunkcache.NewCachingBucket(rc, chunkcache.CacheOptions{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	cat, err := fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]fetchcache.Partition, parts)
	offs := make([]int64, parts)
	for p := range ps {
		if ps[p], err = cat.Partition(ctx, remotekit.TestTopic, int32(p)); err != nil {
			t.Fatal(err)
		}
	}
	before := rc.Reads()
	for left := parts; left > 0; {
		left = 0
		for p, r := range remotes {
			if offs[p] >= r.M.NextOffset() {
				continue
			}
			left++
			v, err := fetchcache.ReadView(ctx, ps[p], offs[p], 2000)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := v.Bytes(), r.ExpectRead(offs[p], 2000); !bytes.Equal(got, want) || len(got) == 0 {
				t.Fatalf("partition %d read %d: %d bytes, want %d", p, offs[p], len(got), len(want))
			}
			offs[p] = v.Next
		}
	}
	cb.Close()
	if got := rc.Reads() - before; got > int64(segs) {
		t.Fatalf("%d store reads for %d segments of %d partitions, want at most one per segment", got, segs, parts)
	}
}
