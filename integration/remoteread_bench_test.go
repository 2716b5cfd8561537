package integration

import (
	"context"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/objtesting"
)

// The remote read pipeline below the Kafka handler, measured on its own:
// one partition read sequentially from a cold cache through the chunk
// cache and RemoteLog (fetchcache.RemoteCatalog, the fetch service's
// defaults: 4 MiB chunks, 16 concurrent GETs, a 64 MiB in-flight budget)
// as a Kafka consumer reads it (1 MiB per partition per read), against
// raw GetObject calls of the same .log objects by minio-go at the same
// concurrency (16). TIERED_BENCH_REMOTE_READ_BYTES sizes the partition
// (default 128 MiB).
const (
	remoteReadCache    = 256 << 20
	remoteReadMaxBytes = 1 << 20
	// remoteReadHeadroom is what the process may hold beyond the cache
	// and in-flight budgets (issue 17: RSS <= budgets + 64 MiB).
	remoteReadHeadroom = 64 << 20
)

func remoteReadBytes() int {
	if v, err := strconv.Atoi(os.Getenv("TIERED_BENCH_REMOTE_READ_BYTES")); err == nil && v > 0 {
		return v
	}
	return 128 << 20
}

// BenchmarkRemoteRead: seg=1MiB and seg=16MiB, each remote (the read
// pipeline, cold) and raw_get (minio-go, 16 at once). remote reports the
// store requests per segment and per MiB, the process's CPU seconds per
// GB, and its RSS growth over the run's start (peak-rss-growth-MiB) against the
// budget (budget-MiB: cache + in flight + 64 MiB), with the soft memory
// limit set as the fetch service sets it.
func BenchmarkRemoteRead(b *testing.B) {
	for _, seg := range []struct {
		name  string
		bytes int
	}{{"seg=1MiB", 1 << 20}, {"seg=16MiB", 16 << 20}} {
		b.Run(seg.name, func(b *testing.B) {
			cd, _ := wideData(b, remoteReadBytes(), seg.bytes)
			keys := cd.logKeys["wide-0"]
			total := int64(len(cd.logBytes["wide-0"]))
			cd.logBytes = nil // the bytes are checked by length here; free them
			runtime.GC()
			b.Run("raw_get", func(b *testing.B) { benchRawParallelGet(b, cd, keys, total) })
			b.Run("objstore_get", func(b *testing.B) { benchStoreParallelGet(b, cd, keys, total) })
			b.Run("remote", func(b *testing.B) { benchRemoteRead(b, cd, len(keys), total) })
		})
	}
}

// benchRawParallelGet reads every object whole with minio-go GetObject,
// chunkcache.DefaultMaxConcurrentGets at a time.
func benchRawParallelGet(b *testing.B, cd *coldData, keys []string, total int64) {
	benchParallelGet(b, keys, total, func(ctx context.Context, k string) (io.ReadCloser, error) {
		return cd.srv.Client().GetObject(ctx, cd.bucket, k, minio.GetObjectOptions{})
	})
}

// benchStoreParallelGet is benchRawParallelGet through tiered's own S3
// backend (objstore), which the pipeline's GETs go through: what of the
// gap to raw_get is the backend's.
func benchStoreParallelGet(b *testing.B, cd *coldData, keys []string, total int64) {
	benchParallelGet(b, keys, total, func(ctx context.Context, k string) (io.ReadCloser, error) {
		return cd.store.GetRange(ctx, k, 0, -1)
	})
}

// benchParallelGet reads every object whole with get,
// chunkcache.DefaultMaxConcurrentGets at a time, and reports the CPU time
// per GB.
func benchParallelGet(b *testing.B, keys []string, total int64, get func(ctx context.Context, key string) (io.ReadCloser, error)) {
	ctx := context.Background()
	b.SetBytes(total)
	b.ReportAllocs()
	cpu := time.Duration(0)
	for b.Loop() {
		cpu0 := selfCPU()
		work := make(chan string, len(keys))
		for _, k := range keys {
			work <- k
		}
		close(work)
		var mu sync.Mutex
		var n int64
		var wg sync.WaitGroup
		for range chunkcache.DefaultMaxConcurrentGets {
			wg.Go(func() {
				buf := make([]byte, 256<<10)
				for k := range work {
					rc, err := get(ctx, k)
					if err != nil {
						b.Error(err)
						return
					}
					m, err := io.CopyBuffer(io.Discard, rc, buf)
					rc.Close()
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					n += m
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		cpu += selfCPU() - cpu0
		if n != total {
			b.Fatalf("read %d bytes, want %d", n, total)
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N)/(float64(total)/1e9), "cpu-s/GB")
}

// benchRemoteRead reads the partition from its start to its end through a
// new caching bucket and catalog each iteration, as a consumer of a fresh
// fetch process does.
func benchRemoteRead(b *testing.B, cd *coldData, segments int, total int64) {
	ctx := context.Background()
	o := chunkcache.CacheOptions{MemoryBytes: remoteReadCache, Registerer: prometheus.NewRegistry()}.EnsureDefaults()
	budget := o.MemoryBytes + o.MaxInFlightBytes + remoteReadHeadroom
	runtime.GC()
	base := rssKB() << 10
	// The soft limit the fetch service runs under, over what this process
	// held before (the test's own data).
	prev := debug.SetMemoryLimit(int64(base) + o.MemoryBytes + o.MaxInFlightBytes + remoteReadHeadroom)
	defer debug.SetMemoryLimit(prev)
	var reads, cpu time.Duration
	var storeReads int64
	ms := startSampler()
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		rc := &objtesting.ReadCounter{BucketReader: cd.store}
		o.Registerer = prometheus.NewRegistry()
		cb, err := chunkcache.NewCachingBucket(rc, o)
		if err != nil {
			b.Fatal(err)
		}
		cat, err := fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{})
		if err != nil {
			b.Fatal(err)
		}
		start, cpu0 := time.Now(), selfCPU()
		p, err := cat.Partition(ctx, "wide", 0)
		if err != nil {
			b.Fatal(err)
		}
		offs, err := p.Offsets(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		for off := offs.LogStart; off < offs.LogEnd; {
			v, err := fetchcache.ReadView(ctx, p, off, remoteReadMaxBytes)
			if err != nil {
				b.Fatalf("read at %d: %v", off, err)
			}
			n += int64(v.Len)
			off = v.Next
		}
		reads += time.Since(start)
		cpu += selfCPU() - cpu0
		b.StopTimer()
		if n != total {
			b.Fatalf("read %d bytes, want %d", n, total)
		}
		cb.Close()
		storeReads += rc.Reads()
		b.StartTimer()
	}
	close(ms.stop)
	ms.done.Wait()
	iters := float64(b.N)
	b.ReportMetric(float64(storeReads)/iters/float64(segments), "store-reads/segment")
	b.ReportMetric(float64(storeReads)/iters/(float64(total)/(1<<20)), "store-reads/MiB")
	b.ReportMetric(cpu.Seconds()/iters/(float64(total)/1e9), "cpu-s/GB")
	grown := max(int64(ms.peakRSS.Load()<<10)-int64(base), 0)
	b.ReportMetric(float64(grown)/(1<<20), "peak-rss-growth-MiB")
	b.ReportMetric(float64(budget)/(1<<20), "budget-MiB")
	if grown > budget {
		b.Errorf("RSS grew %d MiB during the read, over the %d MiB of cache + in flight + 64 MiB", grown>>20, budget>>20)
	}
}
