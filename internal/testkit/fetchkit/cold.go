package fetchkit

import (
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/remotetier/objstore"
)

// ColdCombined is serve's combined catalog over a topic "cold" whose
// uploaded offsets (about 1.4 MB of batches in 256 KiB segments) are all
// deleted locally, so [0, end) is read from the bucket through a caching
// bucket of 64 KiB chunks: reads of more than a chunk come back in parts.
func ColdCombined(t testing.TB) (cat *fetchcache.CombinedCatalog, end int64) {
	t.Helper()
	e := NewEnv(t)
	e.Topic("cold", 1, map[string]string{"remote.storage.enable": "true", "internal.segment.bytes": "262144"})
	l := e.Log("cold", 0)
	e.Produce(l, ProduceOpts{Codec: codec.None, Per: 20}, GenRecs(25000, Ts0, "z"))
	mem := Offload(t, e, l)
	_, remote := CachedCatalog(t, mem, chunkcache.CacheOptions{ChunkBytes: 64 << 10, MemoryBytes: 64 << 20}, fetchcache.RemoteCatalogOptions{})
	return fetchcache.NewCombinedCatalog(e.Dir, remote), l.LogStartOffset()
}

// CachedCatalog is a remote catalog over a new caching bucket over b,
// closed when the test ends (after what the test registers later, such as
// a listener serving the catalog).
func CachedCatalog(t testing.TB, b objstore.BucketReader, co chunkcache.CacheOptions, ro fetchcache.RemoteCatalogOptions) (*chunkcache.CachingBucket, *fetchcache.RemoteCatalog) {
	t.Helper()
	cb, err := chunkcache.NewCachingBucket(b, co)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cb.Close() })
	cat, err := fetchcache.NewRemoteCatalog(cb, ro)
	if err != nil {
		t.Fatal(err)
	}
	return cb, cat
}
