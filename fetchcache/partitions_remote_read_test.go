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
)

// remoteOverCache is a remote partition of segs small segments read
// through a caching bucket over a bucket that counts its reads.
func remoteOverCache(t *testing.T, segs int, txn bool, o chunkcache.CacheOptions) (*remotekit.Remote, *objtesting.ReadCounter, *chunkcache.CachingBucket, fetchcache.Partition) {
	t.Helper()
	local := remotekit.WriteLocal(t, t.TempDir(), 41, segs, 12, txn)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	rc := &objtesting.ReadCounter{BucketReader: r.Bucket}
	cb, err := chunkcache.NewCachingBucket(rc, o)
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
	return r, rc, cb, p
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
