package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/tiered/tiered/internal/testkit/testminio"
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

// cpuMeter measures the CPU time (user+system) the MinIO process and this
// process spend during a benchmark, per MB of benchmark bytes: on a shared
// 2-core machine, CPU per byte on either side is what bounds throughput.
type cpuMeter struct {
	minioPID                        int
	minioStart, selfStart           time.Duration
	busyStart, stealStart, allStart int64
}

func startCPU(srv *testminio.Server) *cpuMeter {
	m := &cpuMeter{minioPID: minioPID(srv.Addr)}
	m.minioStart, m.selfStart = procCPU(m.minioPID), selfCPU()
	m.busyStart, m.stealStart, m.allStart = machineCPU()
	return m
}

// machineCPU returns clock ticks of all CPUs from /proc/stat: busy (all but
// idle, iowait and steal), stolen by the hypervisor, and in all; or zeros.
func machineCPU() (busy, steal, all int64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0
	}
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, _ := strconv.ParseInt(v, 10, 64)
		all += n
		switch i {
		case 3, 4:
		case 7:
			steal += n
		default:
			busy += n
		}
	}
	return busy, steal, all
}

// finish reports minio-cpu-ms/MB and self-cpu-ms/MB over b.N runs of
// bytes each (MinIO's figure is omitted when its process was not found),
// and the share of the machine's CPU time that was busy (any process: busy
// beyond MinIO's and this process's time is another load, or the kernel's
// work on their behalf) and that the hypervisor stole: a run with much of
// either is not comparable with a quiet one.
func (m *cpuMeter) finish(b *testing.B, bytes int64) {
	mb := float64(bytes) * float64(b.N) / 1e6
	if m.minioPID > 0 {
		b.ReportMetric(float64(procCPU(m.minioPID)-m.minioStart)/1e6/mb, "minio-cpu-ms/MB")
	}
	b.ReportMetric(float64(selfCPU()-m.selfStart)/1e6/mb, "self-cpu-ms/MB")
	if busy, steal, all := machineCPU(); all > m.allStart {
		b.ReportMetric(100*float64(busy-m.busyStart)/float64(all-m.allStart), "machine-busy-%")
		b.ReportMetric(100*float64(steal-m.stealStart)/float64(all-m.allStart), "steal-%")
	}
}

// minioPID finds the MinIO server listening on addr (its command line
// holds --address addr), or 0.
func minioPID(addr string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--address" && args[i+1] == addr {
				return pid
			}
		}
	}
	return 0
}

// procFaults returns a process's minor page faults from /proc/PID/stat, or 0.
func procFaults(pid int) int64 {
	f := procStat(pid)
	if len(f) < 8 {
		return 0
	}
	n, _ := strconv.ParseInt(f[7], 10, 64)
	return n
}

// procStat returns the fields of /proc/PID/stat after the command name
// (which may hold spaces), from field 3, or nil.
func procStat(pid int) []string {
	if pid <= 0 {
		return nil
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(data[i+1:]))
}

// procCPU returns a process's utime+stime from /proc/PID/stat (in clock
// ticks of 10 ms, USER_HZ on Linux), or 0.
func procCPU(pid int) time.Duration {
	f := procStat(pid)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settle gives every sub-benchmark the same machine state, so that the
// baseline and tiered's figures of one run can be compared: on this kind of
// VM, page-cache pages that were never used (or were given back to the
// host) cost several times more system CPU to fill than recycled ones, so
// once a run has written a few GB (the 32 MiB sub-benchmarks write ~0.8 GB
// each), MinIO's CPU per byte nearly doubles and whichever sub-benchmark
// ran later lost. Before a sub-benchmark, settle writes back and drops the
// clean page cache (Linux, as root; skipped with a log line otherwise) and
// reads the segment files again, so every sub-benchmark starts with
// recycled free memory and reads them from memory; when it ends, its
// objects are removed.
func settle(b *testing.B, srv *testminio.Server, bucket string, files []string) {
	b.Helper()
	b.Cleanup(func() { emptyBucket(b, srv, bucket) })
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
		dropFailed.Do(func() {
			b.Logf("page cache not dropped (figures of later sub-benchmarks may suffer): %v", err)
		})
	}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, f)
		f.Close()
		if err != nil {
			b.Fatalf("read %s: %v", path, err)
		}
	}
}

var dropFailed sync.Once

// emptyBucket removes every object in bucket.
func emptyBucket(b *testing.B, srv *testminio.Server, bucket string) {
	ctx := context.Background()
	c := srv.Client()
	objs := make(chan minio.ObjectInfo)
	go func() {
		defer close(objs)
		for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if o.Err != nil {
				b.Errorf("list %s: %v", bucket, o.Err)
				return
			}
			objs <- o
		}
	}()
	for e := range c.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		b.Errorf("remove %s from %s: %v", e.ObjectName, bucket, e.Err)
	}
}

func sumCounter(b *testing.B, reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		return sum
	}
	// Not a 0: a metric renamed or not registered would report nothing.
	b.Fatalf("no metric %s in the registry", name)
	return 0
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
		// putFiles Puts every file once per iteration, concurrency at a
		// time, under a fresh key prefix, with put.
		putFiles := func(b *testing.B, bucket string, put func(key string, f *os.File, size int64) error) {
			b.SetBytes(total)
			b.ReportAllocs()
			ms := startSampler()
			cpu := startCPU(srv)
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
						return put(key, f, fi.Size())
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				i++
			}
			cpu.finish(b, total)
			ms.finish(b)
		}
		b.Run(fmt.Sprintf("seg=%dMiB/raw_put", segMiB), func(b *testing.B) {
			bucket := srv.NewBucket(b)
			settle(b, srv, bucket, files)
			putFiles(b, bucket, func(key string, f *os.File, size int64) error {
				_, err := srv.Client().PutObject(ctx, bucket, key, f, size, minio.PutObjectOptions{})
				return err
			})
		})
		// The same Puts through tiered's own S3 backend (aws-sdk-go-v2):
		// separates the backend's cost from the uploader's.
		b.Run(fmt.Sprintf("seg=%dMiB/objstore_put", segMiB), func(b *testing.B) {
			bucket := srv.NewBucket(b)
			settle(b, srv, bucket, files)
			bkt := openS3(b, srv, bucket)
			putFiles(b, bucket, func(key string, f *os.File, size int64) error {
				_, err := bkt.Put(ctx, key, f, size, objstore.Condition{})
				return err
			})
		})
		b.Run(fmt.Sprintf("seg=%dMiB/uploader", segMiB), func(b *testing.B) {
			bucket := srv.NewBucket(b)
			settle(b, srv, bucket, files)
			base := openS3(b, srv, bucket)
			reg := prometheus.NewRegistry()
			mb := objstore.WithMetrics(base, reg)
			src := remotetier.NewLocalSource(d, nil)
			b.SetBytes(total)
			b.ReportAllocs()
			ms := startSampler()
			cpu := startCPU(srv)
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
			cpu.finish(b, total)
			ms.finish(b)
			b.ReportMetric(sumCounter(b, reg, "tiered_objstore_operations_total")/float64(segs), "requests/segment")
			// Failed object-store calls (each retried by the uploader with
			// backoff): a run slowed by them is the store's doing, not the
			// uploader's. A request the AWS SDK retried by itself and
			// then completed is not counted here.
			b.ReportMetric(sumCounter(b, reg, "tiered_objstore_operation_failures_total")/float64(segs), "failures/segment")
		})
		d.Close()
	}
}

// BenchmarkPutCost is a diagnostic for BenchmarkUpload: the MinIO and
// client CPU time of one Put of a given size, through tiered's S3 backend
// (with its default part size, and with a single PutObject up to 64 MiB)
// and through minio-go, 4 at a time.
func BenchmarkPutCost(b *testing.B) {
	srv := testminio.Shared(b)
	testminio.SetCredentialsEnv(b)
	ctx := context.Background()
	dir := b.TempDir()
	for _, size := range []int64{2 << 10, 4 << 20, 32 << 20} {
		path := filepath.Join(dir, strconv.FormatInt(size, 10))
		data := make([]byte, size)
		for i := range data {
			data[i] = byte('a' + i*7%26)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		count := 64 // Puts per iteration: small ones weigh per request
		if size >= 1<<20 {
			count = int(max(8, (64<<20)/size))
		}
		type putFn func(key string, f *os.File) error
		run := func(b *testing.B, put putFn) {
			b.SetBytes(size * int64(count))
			cpu := startCPU(srv)
			i := 0
			for b.Loop() {
				var g errgroup.Group
				g.SetLimit(4)
				for j := 0; j < count; j++ {
					key := fmt.Sprintf("cost/%d/%d", i, j)
					g.Go(func() error {
						f, err := os.Open(path)
						if err != nil {
							return err
						}
						defer f.Close()
						return put(key, f)
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				i++
			}
			cpu.finish(b, size*int64(count))
			if cpu.minioPID > 0 {
				b.ReportMetric(float64(procCPU(cpu.minioPID)-cpu.minioStart)/1e6/float64(count*b.N), "minio-cpu-ms/put")
			}
		}
		b.Run(fmt.Sprintf("size=%d/minio-go", size), func(b *testing.B) {
			bucket := srv.NewBucket(b)
			settle(b, srv, bucket, []string{path})
			run(b, func(key string, f *os.File) error {
				_, err := srv.Client().PutObject(ctx, bucket, key, f, size, minio.PutObjectOptions{})
				return err
			})
		})
		b.Run(fmt.Sprintf("size=%d/objstore", size), func(b *testing.B) {
			bucket := srv.NewBucket(b)
			settle(b, srv, bucket, []string{path})
			bkt := openS3(b, srv, bucket)
			run(b, func(key string, f *os.File) error {
				_, err := bkt.Put(ctx, key, f, size, objstore.Condition{})
				return err
			})
		})
		if size > objstore.DefaultPartSize {
			b.Run(fmt.Sprintf("size=%d/objstore_single", size), func(b *testing.B) {
				bucket := srv.NewBucket(b)
				settle(b, srv, bucket, []string{path})
				bkt, err := objstore.Open(ctx, srv.URL(bucket, "")+"&part_size="+strconv.Itoa(64<<20))
				if err != nil {
					b.Fatal(err)
				}
				defer bkt.Close()
				run(b, func(key string, f *os.File) error {
					_, err := bkt.Put(ctx, key, f, size, objstore.Condition{})
					return err
				})
			})
		}
	}
}
