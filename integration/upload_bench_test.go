package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/tiered/tiered/internal/testminio"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
)

// memSampler records the peak live heap and RSS while it runs.
type memSampler struct {
	stop      chan struct{}
	done      sync.WaitGroup
	peakHeap  atomic.Uint64
	peakRSS   atomic.Uint64
	baseHeap  uint64
	baseRSSKB uint64
}

func startSampler() *memSampler {
	s := &memSampler{stop: make(chan struct{})}
	s.baseHeap, s.baseRSSKB = heapBytes(), rssKB()
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if h := heapBytes(); h > s.peakHeap.Load() {
				s.peakHeap.Store(h)
			}
			if r := rssKB(); r > s.peakRSS.Load() {
				s.peakRSS.Store(r)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *memSampler) finish(b *testing.B) {
	close(s.stop)
	s.done.Wait()
	b.ReportMetric(float64(s.peakHeap.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(s.peakRSS.Load())/1024, "peak-rss-MiB")
}

func heapBytes() uint64 {
	m := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

func rssKB() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func sumCounter(b *testing.B, reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// BenchmarkUpload compares the uploader with raw PutObject calls of
// minio-go on the same segment files, at the same concurrency (4), in the
// same run, for two segment sizes. The uploader's bytes/s should be at
// least 0.9 × raw_put's; it reports object-store requests per committed
// segment and its peak heap and RSS (which should not grow with the
// segment size).
func BenchmarkUpload(b *testing.B) {
	srv := testminio.Shared(b)
	testminio.SetCredentialsEnv(b)
	ctx := context.Background()
	for _, segMiB := range []int{4, 32} {
		dir := b.TempDir()
		d := localLog(b, dir, 2, 4, segMiB<<20)
		var files []string
		var total int64
		for p := int32(0); p < 2; p++ {
			l, _ := d.Partition("events", p)
			for _, s := range l.Segments() {
				if !s.Active {
					files = append(files, s.Path)
					total += s.Size
				}
			}
		}
		const concurrency = 4
		b.Run(fmt.Sprintf("seg=%dMiB/raw_put", segMiB), func(b *testing.B) {
			bucket := srv.NewBucket(b)
			b.SetBytes(total)
			b.ReportAllocs()
			ms := startSampler()
			i := 0
			for b.Loop() {
				var g errgroup.Group
				g.SetLimit(concurrency)
				for _, path := range files {
					key := fmt.Sprintf("raw/%d/%s/%s", i, filepath.Base(filepath.Dir(path)), filepath.Base(path))
					g.Go(func() error {
						f, err := os.Open(path)
						if err != nil {
							return err
						}
						defer f.Close()
						fi, err := f.Stat()
						if err != nil {
							return err
						}
						_, err = srv.Client().PutObject(ctx, bucket, key, f, fi.Size(), minio.PutObjectOptions{})
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				i++
			}
			ms.finish(b)
		})
		// The same Puts through tiered's own S3 backend (aws-sdk-go-v2):
		// separates the backend's cost from the uploader's.
		b.Run(fmt.Sprintf("seg=%dMiB/objstore_put", segMiB), func(b *testing.B) {
			bkt := openS3(b, srv, srv.NewBucket(b))
			b.SetBytes(total)
			b.ReportAllocs()
			ms := startSampler()
			i := 0
			for b.Loop() {
				var g errgroup.Group
				g.SetLimit(concurrency)
				for _, path := range files {
					key := fmt.Sprintf("raw/%d/%s/%s", i, filepath.Base(filepath.Dir(path)), filepath.Base(path))
					g.Go(func() error {
						f, err := os.Open(path)
						if err != nil {
							return err
						}
						defer f.Close()
						fi, err := f.Stat()
						if err != nil {
							return err
						}
						_, err = bkt.Put(ctx, key, f, fi.Size(), objstore.Condition{})
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				i++
			}
			ms.finish(b)
		})
		b.Run(fmt.Sprintf("seg=%dMiB/uploader", segMiB), func(b *testing.B) {
			bucket := srv.NewBucket(b)
			base := openS3(b, srv, bucket)
			reg := prometheus.NewRegistry()
			mb := objstore.WithMetrics(base, reg)
			src := remotetier.NewLocalSource(d, nil)
			b.SetBytes(total)
			b.ReportAllocs()
			ms := startSampler()
			i, segs := 0, 0
			for b.Loop() {
				pb, err := objstore.WithPrefix(mb, fmt.Sprintf("it%d", i))
				if err != nil {
					b.Fatal(err)
				}
				u, err := remotetier.NewUploader(pb, src, remotetier.Options{Concurrency: concurrency, Registerer: prometheus.NewRegistry()})
				if err != nil {
					b.Fatal(err)
				}
				rep, err := u.RunOnce(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if rep.UploadedSegments != len(files) {
					b.Fatalf("committed %d segments, want %d", rep.UploadedSegments, len(files))
				}
				segs += rep.UploadedSegments
				i++
			}
			ms.finish(b)
			b.ReportMetric(sumCounter(b, reg, "tiered_objstore_operations_total")/float64(segs), "requests/segment")
		})
		d.Close()
	}
}
