package fetchcache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/remotetier/objstore"
)

// logGets counts the range GETs of .log objects.
type logGets struct {
	objstore.BucketReader
	n atomic.Int64
}

func (b *logGets) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if strings.HasSuffix(key, ".log") {
		b.n.Add(1)
	}
	return b.BucketReader.GetRange(ctx, key, off, n)
}

// TestPrefetchLoadsPastTheIndex: a prefetch read (objstore.WithPrefetch)
// inside a segment, whose offset index a cached-only read has just had
// loaded, reads that index from the cache to find the position and has
// the data there loaded; it never answers with data. (Marked prefetch,
// the index read too would answer "not cached", and no data would ever
// load.)
func TestPrefetchLoadsPastTheIndex(t *testing.T) {
	ctx := context.Background()
	// Uploaded by the uploader: each segment's indexes are one .indexes
	// object, read by range through the cache.
	e := fetchkit.NewEnv(t)
	e.Topic("pf", 1, map[string]string{"remote.storage.enable": "true", "internal.segment.bytes": "262144"})
	l := e.Log("pf", 0)
	recs := make([]fetchkit.Rec, 400)
	for i := range recs {
		recs[i] = fetchkit.Rec{Timestamp: 1_700_000_000_000 + int64(i), Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{'v'}, 1000)}
	}
	e.Produce(l, fetchkit.ProduceOpts{Per: 16}, recs)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	var first objstore.ObjectInfo // the first segment's .indexes object
	if err := mem.List(ctx, "", func(o objstore.ObjectInfo) error {
		if strings.HasSuffix(o.Key, ".indexes") && strings.Contains(o.Key, "/00000000000000000000-") {
			first = o
		}
		return nil
	}); err != nil || first.Key == "" {
		t.Fatalf("no .indexes object of the first segment (%v)", err)
	}
	lg := &logGets{BucketReader: mem}
	cb, cat := fetchkit.CachedCatalog(t, lg, chunkcache.CacheOptions{MemoryBytes: 64 << 20, ReadAheadChunks: -1}, fetchcache.RemoteCatalogOptions{})
	part, err := cat.Partition(ctx, "pf", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := part.Offsets(ctx); err != nil { // the end check: the final segment's tail
		t.Fatal(err)
	}
	// The first segment's indexes are in the cache (as a cached-only
	// read's miss would have loaded them), not yet parsed; its data is not.
	rc, err := cb.GetRange(ctx, first.Key, 0, first.Size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	const mid = 100 // inside the first segment (about 250 records)
	before := lg.n.Load()
	if _, err := fetchcache.ReadView(objstore.WithPrefetch(ctx), part, mid, 1000); !errors.Is(err, objstore.ErrNotCached) {
		t.Fatalf("prefetch read: %v, want ErrNotCached (never data)", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for lg.n.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the prefetch read loaded no data of the segment")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Loaded: a cached-only read is served, from the batch holding mid.
	for {
		v, err := fetchcache.ReadView(objstore.WithCachedOnly(ctx), part, mid, 1000)
		if err == nil {
			it := record.NewIter(v.Bytes())
			b, ok := it.Next()
			if !ok || b.BaseOffset() > mid || b.LastOffset() < mid {
				t.Fatalf("read after the prefetch: %d bytes, not from the batch holding %d", v.Len, mid)
			}
			break
		}
		if !errors.Is(err, objstore.ErrNotCached) || time.Now().After(deadline) {
			t.Fatalf("cached-only read after the prefetch: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEndCheckIgnoresCacheMarks: a partition's end check, which its
// callers share, reads the store even when the first to ask is a
// cached-only or prefetch read: its offsets never fail with ErrNotCached
// (which another client joining the check would get as a storage error).
func TestEndCheckIgnoresCacheMarks(t *testing.T) {
	for _, tt := range []struct {
		name string
		mark func(context.Context) context.Context
	}{
		{"cached_only", objstore.WithCachedOnly},
		{"prefetch", objstore.WithPrefetch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := fetchkit.NewEnv(t)
			e.Topic("ec", 1, map[string]string{"remote.storage.enable": "true"})
			l := e.Log("ec", 0)
			e.Produce(l, fetchkit.ProduceOpts{Per: 8}, fetchkit.GenRecs(100, fetchkit.Ts0, "ec"))
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			mem := objstore.NewMemory()
			fetchkit.UploadAll(t, e, mem)
			_, cat := fetchkit.CachedCatalog(t, mem, chunkcache.CacheOptions{MemoryBytes: 64 << 20}, fetchcache.RemoteCatalogOptions{})
			part, err := cat.Partition(ctx, "ec", 0)
			if err != nil {
				t.Fatal(err)
			}
			off, err := part.Offsets(tt.mark(ctx))
			if err != nil {
				t.Fatalf("offsets of a cold partition under a %s context: %v", tt.name, err)
			}
			if off.LogEnd != 100 {
				t.Fatalf("log end %d, want 100", off.LogEnd)
			}
		})
	}
}
