package fetchcache_test

import (
	"context"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// BenchmarkRemoteWarmRead: a consumer's small sequential reads (3000
// bytes) of a partition whose chunks are all cached, through the catalog
// and the chunk cache, with the streams' read-ahead (read_ahead) and
// without it (no_read_ahead): what the read-ahead bookkeeping costs a warm
// read (a stream asks for its window again only half a depth on, or not
// at all once it covers the log's end).
func BenchmarkRemoteWarmRead(b *testing.B) {
	local := remotekit.WriteLocal(b, b.TempDir(), 41, 40, 12, false)
	r := remotekit.NewRemote(b, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(b)...)
	for _, ra := range []int64{-1, 0} {
		b.Run(map[int64]string{-1: "no_read_ahead", 0: "read_ahead"}[ra], func(b *testing.B) {
			cb, err := chunkcache.NewCachingBucket(r.Bucket, chunkcache.CacheOptions{MemoryBytes: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer cb.Close()
			cat, err := fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{Reader: remotelog.ReaderOptions{ReadAheadBytes: ra}})
			if err != nil {
				b.Fatal(err)
			}
			p, err := cat.Partition(context.Background(), remotekit.TestTopic, remotekit.TestPartition)
			if err != nil {
				b.Fatal(err)
			}
			read := func() int64 {
				var n int64
				for off := int64(0); off < r.M.NextOffset(); {
					v, err := fetchcache.ReadView(context.Background(), p, off, 3000)
					if err != nil {
						b.Fatal(err)
					}
					n += int64(v.Len)
					off = v.Next
				}
				return n
			}
			n := read()
			b.SetBytes(n)
			b.ReportAllocs()
			for b.Loop() {
				read()
			}
		})
	}
}
