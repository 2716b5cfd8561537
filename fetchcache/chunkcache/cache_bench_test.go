package chunkcache

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/remotetier/objstore"
)

// BenchmarkCacheHit reads 1 MiB ranges of a warm object: "read" copies
// into the caller's buffer (io.ReadFull), "writeto" hands the cached
// chunks to an io.Writer (what io.Copy to a response does).
func BenchmarkCacheHit(b *testing.B) {
	const size, rng = 16 << 20, 1 << 20
	store := objstore.NewMemory()
	putObject(b, store, "seg", size)
	c := mustCache(b, store, CacheOptions{MemoryBytes: 4 * size, ReadAheadChunks: -1})
	readAll(b, c, "seg", 0, -1)
	ctx := context.Background()
	buf := make([]byte, rng)
	for _, mode := range []string{"read", "writeto"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(rng)
			off := int64(0)
			for b.Loop() {
				rc, err := c.GetRange(ctx, "seg", off, rng)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "read" {
					_, err = io.ReadFull(rc, buf)
				} else {
					_, err = io.Copy(io.Discard, rc)
				}
				if err != nil {
					b.Fatal(err)
				}
				rc.Close()
				off = (off + rng + 4096) % (size - rng)
			}
		})
	}
}

// BenchmarkColdSequentialRead reads a whole 32 MiB object in 1 MiB ranges,
// directly from the store ("direct", the physical baseline) and through a
// cold cache with default chunks and read-ahead ("cached"), on the memory,
// filesystem and MinIO backends; the ratio of the two is the cache's cost
// (or gain) on a cold sequential scan.
func BenchmarkColdSequentialRead(b *testing.B) {
	const size, rng = 32 << 20, 1 << 20
	data := content("seg", size)
	backends := []struct {
		name string
		open func(b *testing.B) objstore.Bucket
	}{
		{"memory", func(b *testing.B) objstore.Bucket { return objstore.NewMemory() }},
		{"filesystem", func(b *testing.B) objstore.Bucket {
			fs, err := objstore.NewFilesystem(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { fs.Close() })
			return fs
		}},
		{"s3", func(b *testing.B) objstore.Bucket { return objtesting.NewMinIOBucket(b) }},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			store := be.open(b)
			ctx := context.Background()
			if _, err := store.Put(ctx, "seg", bytes.NewReader(data), size, objstore.Condition{}); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, rng)
			scan := func(b *testing.B, r objstore.BucketReader) {
				for off := int64(0); off < size; off += rng {
					rc, err := r.GetRange(ctx, "seg", off, rng)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(rc, buf); err != nil {
						b.Fatal(err)
					}
					rc.Close()
				}
			}
			b.Run("direct", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(size)
				for b.Loop() {
					scan(b, store)
				}
			})
			b.Run("cached", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(size)
				for b.Loop() {
					c, err := NewCachingBucket(store, CacheOptions{MemoryBytes: 2 * size})
					if err != nil {
						b.Fatal(err)
					}
					scan(b, c)
					c.Close()
				}
			})
		})
	}
}
