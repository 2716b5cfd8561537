package fetchcache_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// BenchmarkRemoteWarmRead: a consumer's small sequential reads (3000
// bytes) of 1 and of 32 partitions (one read of each in turn) whose chunks
// are all cached, through the catalog and the chunk cache, with the
// streams' read-ahead (read_ahead) and without it (no_read_ahead): what
// the read-ahead bookkeeping costs a warm read (a stream asks for its
// window again only half a window on, or not at all once it covers the
// log's end; a stream with a small share asks for twice what it got).
func BenchmarkRemoteWarmRead(b *testing.B) {
	for _, parts := range []int{1, 32} {
		mem := objstore.NewMemory()
		var remotes []*remotekit.Remote
		for p := range int32(parts) {
			segs := 40 / parts
			local := remotekit.WriteLocal(b, b.TempDir(), 41+uint64(p), max(segs, 2), 12, false)
			r := remotekit.NewRemotePartition(b, mem, "", p, 0, manifest.DefaultPolicy())
			r.Commit(local.Files(b)...)
			remotes = append(remotes, r)
		}
		for _, ra := range []int64{-1, 0} {
			name := fmt.Sprintf("partitions=%d/%s", parts, map[int64]string{-1: "no_read_ahead", 0: "read_ahead"}[ra])
			b.Run(name, func(b *testing.B) {
				// A cache small enough that 32 streams get small shares.
				cb, err := chunkcache.NewCachingBucket(mem, chunkcache.CacheOptions{MemoryBytes: 64 << 20})
				if err != nil {
					b.Fatal(err)
				}
				defer cb.Close()
				cat, err := fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{Reader: remotelog.ReaderOptions{ReadAheadBytes: ra}})
				if err != nil {
					b.Fatal(err)
				}
				ps := make([]fetchcache.Partition, parts)
				for p := range ps {
					if ps[p], err = cat.Partition(context.Background(), remotekit.TestTopic, int32(p)); err != nil {
						b.Fatal(err)
					}
				}
				read := func() int64 {
					var n int64
					offs := make([]int64, parts)
					for left := parts; left > 0; {
						left = 0
						for p, r := range remotes {
							if offs[p] >= r.M.NextOffset() {
								continue
							}
							left++
							v, err := fetchcache.ReadView(context.Background(), ps[p], offs[p], 3000)
							if err != nil {
								b.Fatal(err)
							}
							n += int64(v.Len)
							offs[p] = v.Next
						}
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
}
