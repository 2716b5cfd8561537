package fetchkit

import (
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/localtier/codec"
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
	cb, err := chunkcache.NewCachingBucket(mem, chunkcache.CacheOptions{ChunkBytes: 64 << 10, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cb.Close() })
	remote, err := fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fetchcache.NewCombinedCatalog(e.Dir, remote), l.LogStartOffset()
}
