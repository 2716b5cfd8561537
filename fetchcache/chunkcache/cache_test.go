package chunkcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestConcurrentColdRange: 64 goroutines read the same cold range while
// the store holds GETs; every chunk is fetched from the store exactly once
// (in runs of consecutive chunks, one GET each) and every reader gets the
// right bytes.
func TestConcurrentColdRange(t *testing.T) {
	store := objstore.NewMemory()
	const size, chunk = 1<<20 + 123, 64 << 10
	want := putObject(t, store, "topic/0/seg.log", size)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 4 << 20, ReadAheadChunks: -1,
		FetchParallelism: 8})
	var joined atomic.Int64
	c.testHook = func(chunkKey) { joined.Add(1) }
	inner.holdGets()

	const readers = 64
	off, length := int64(1000), int64(size-5000)
	var wg sync.WaitGroup
	errs := make([]error, readers)
	for r := range readers {
		wg.Go(func() {
			rc, err := c.GetRange(context.Background(), "topic/0/seg.log", off, length)
			if err != nil {
				errs[r] = err
				return
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err == nil && !bytes.Equal(got, want[off:off+length]) {
				err = errors.New("content differs")
			}
			errs[r] = err
		})
	}
	for joined.Load() < readers {
		time.Sleep(100 * time.Microsecond)
	}
	inner.release()
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("reader %d: %v", r, err)
		}
	}
	first, last := off/chunk, (off+length-1)/chunk
	calls := inner.takeRanges()
	tileChunks(t, calls, chunk, first*chunk, (last+1)*chunk, c.maxRunChunks())
	if inner.attrs != 1 {
		t.Fatalf("%d Attributes calls, want 1 (shared, then cached)", inner.attrs)
	}
	if got := testutil.ToFloat64(c.m.storeGets); got != float64(len(calls)) {
		t.Fatalf("store gets metric %v, want %d", got, len(calls))
	}
}

// TestOverloadFailsFast: a store that does not answer and small gates; a
// request that cannot start gets gate.ErrOverloaded within the wait bound and
// never hangs; the blocked request still completes once the store answers.
func TestOverloadFailsFast(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts CacheOptions
		gate string
	}{
		{"gets", CacheOptions{MaxConcurrentGets: 1}, gate.Gets},
		{"bytes", CacheOptions{MaxInFlightBytes: 100}, gate.Bytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			want := putObject(t, store, "a", 1000)
			putObject(t, store, "b", 1000)
			inner := newCounting(store)
			const wait = 50 * time.Millisecond
			o := tc.opts
			o.ChunkBytes, o.MemoryBytes, o.ReadAheadChunks = 100, 10000, -1
			o.MaxWait, o.RetryAfter = wait, 3*time.Second
			reg := prometheus.NewRegistry()
			o.Registerer = reg
			c := mustCache(t, inner, o)
			// Learn b's size now, so the rejection below comes from the
			// chunk load, not the Attributes call.
			if _, err := c.objectAttrs(context.Background(), "b", time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}

			inner.holdGets()
			blocked := make(chan []byte)
			go func() {
				rc, err := c.GetRange(context.Background(), "a", 0, 100)
				if err != nil {
					t.Error(err)
					blocked <- nil
					return
				}
				b, _ := io.ReadAll(rc)
				blocked <- b
			}()
			for inner.started.Load() == 0 {
				time.Sleep(100 * time.Microsecond)
			}

			for range 3 {
				start := time.Now()
				_, err := c.GetRange(context.Background(), "b", 500, 10)
				took := time.Since(start)
				if !errors.Is(err, gate.ErrOverloaded) {
					t.Fatalf("got %v, want gate.ErrOverloaded", err)
				}
				var oe *gate.OverloadedError
				if !errors.As(err, &oe) || oe.Gate != tc.gate || oe.RetryAfter != 3*time.Second {
					t.Fatalf("overload error %+v, want gate %s, retry after 3s", oe, tc.gate)
				}
				if d, ok := gate.RetryAfter(err); !ok || d != 3*time.Second {
					t.Fatalf("RetryAfter = %v, %v", d, ok)
				}
				if took < wait || took > wait+2*time.Second {
					t.Fatalf("rejected after %v, want the %v wait bound (+ slack)", took, wait)
				}
			}
			if got := testutil.ToFloat64(c.bytes.Series().Rejections) + testutil.ToFloat64(c.gets.Series().Rejections); got != 3 {
				t.Fatalf("rejections %v, want 3", got)
			}
			if got := testutil.ToFloat64(c.gets.Series().Waits) + testutil.ToFloat64(c.bytes.Series().Waits); got != 3 {
				t.Fatalf("waits %v, want 3", got)
			}

			// A caller whose own ctx ends first gets its ctx error.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			_, err := c.GetRange(ctx, "b", 0, 10)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want the caller's deadline", err)
			}

			inner.release()
			if got := <-blocked; !bytes.Equal(got, want[:100]) {
				t.Fatal("blocked request did not complete correctly")
			}
			// Capacity is back: b loads now.
			if got := readAll(t, c, "b", 500, 10); len(got) != 10 {
				t.Fatalf("read %d bytes after release", len(got))
			}
		})
	}
}

// TestGetsGateBoundsEveryRequest: whole-object Gets (manifests) and
// Attributes calls go through the gets gate with the chunk loads, so
// MaxConcurrentGets bounds every request at the store; a Get body holds its
// slot until it is closed, and a full gate answers gate.ErrOverloaded.
func TestGetsGateBoundsEveryRequest(t *testing.T) {
	store, inner, objs := slowObjects(t, 4, 2000, 333)
	o := CacheOptions{ChunkBytes: 256, MemoryBytes: 4000, MaxConcurrentGets: 3, MaxInFlightBytes: 2048,
		ReadAheadChunks: 2, MaxWait: 5 * time.Second, FetchParallelism: 2}
	c := mustCache(t, inner, o)
	randomReaders(8, 60, 3, objs, func(i int, rng *rand.Rand, k string, data []byte) bool {
		switch i % 3 {
		case 0:
			rc, err := c.Get(context.Background(), k)
			if err != nil {
				t.Errorf("get %s: %v, want its bytes", k, err)
				return false
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("get %s: %v, %d bytes; want the object's %d", k, err, len(got), len(data))
				return false
			}
		case 1:
			a, err := c.Attributes(context.Background(), k)
			if err != nil || a.Size != int64(len(data)) {
				t.Errorf("attributes %s: %+v, %v; want size %d", k, a, err, len(data))
				return false
			}
		default:
			off := rng.Int64N(int64(len(data)))
			got, err := readRange(context.Background(), c, k, off, 300)
			if err != nil || !bytes.Equal(got, expectRange(data, off, 300)) {
				t.Errorf("%s [%d,+300): %v, %d bytes; want %d bytes of the object", k, off, err, len(got), len(expectRange(data, off, 300)))
				return false
			}
		}
		return true
	})
	waitIdle(t, c)
	if m := inner.maxGets.Load(); m > int64(o.MaxConcurrentGets) || m < 2 {
		t.Fatalf("%d requests in flight at the store, want 2..%d", m, o.MaxConcurrentGets)
	}

	// A body held open keeps its slot: with one slot, the next Get and a
	// chunk load are overloaded until it is closed.
	o = CacheOptions{ChunkBytes: 256, MemoryBytes: 4000, MaxConcurrentGets: 1, ReadAheadChunks: -1,
		MaxWait: 30 * time.Millisecond}
	c = mustCache(t, newCounting(store), o)
	held, err := c.Get(context.Background(), "obj-0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), "obj-1"); !errors.Is(err, gate.ErrOverloaded) {
		t.Fatalf("second Get with the gate full: %v, want gate.ErrOverloaded", err)
	}
	if _, err := c.GetRange(context.Background(), "obj-1", 0, 10); !errors.Is(err, gate.ErrOverloaded) {
		t.Fatalf("GetRange with the gate full: %v, want gate.ErrOverloaded", err)
	}
	held.Close()
	held.Close() // a second Close gives nothing back twice
	for _, k := range []string{"obj-1", "obj-2"} {
		rc, err := c.Get(context.Background(), k)
		if err != nil {
			t.Fatalf("Get after the body was closed: %v", err)
		}
		rc.Close()
	}
	if g := c.gets.InFlight(); g != 0 {
		t.Fatalf("gets gate holds %d after every body was closed, want 0", g)
	}
}

// TestMemoryBound runs concurrent random reads over more data than the
// cache holds and checks throughout that cached bytes stay within the
// bound and bytes and GETs in flight at the store within their budgets.
func TestMemoryBound(t *testing.T) {
	_, inner, objs := slowObjects(t, 6, 3000, 777)
	o := CacheOptions{ChunkBytes: 256, MemoryBytes: 2000, MaxConcurrentGets: 5, MaxInFlightBytes: 768,
		ReadAheadChunks: 2, MaxWait: 5 * time.Second, FetchParallelism: 4}
	c := mustCache(t, inner, o)

	stopSampling := sampleViolations(func() bool { return c.mem.size() > o.MemoryBytes })
	randomReaders(8, 150, 7, objs, func(_ int, rng *rand.Rand, k string, data []byte) bool {
		off := rng.Int64N(int64(len(data)))
		n := rng.Int64N(600)
		got, err := readRange(context.Background(), c, k, off, n)
		if err != nil || !bytes.Equal(got, expectRange(data, off, n)) {
			t.Errorf("%s [%d,+%d): %v, %d bytes; want %d bytes of the object", k, off, n, err, len(got), len(expectRange(data, off, n)))
			return false
		}
		return true
	})
	over := stopSampling()
	waitIdle(t, c)
	if over > 0 {
		t.Fatalf("cache bytes above %d in %d samples", o.MemoryBytes, over)
	}
	t.Logf("at most %d bytes and %d GETs in flight at the store", inner.maxBytes.Load(), inner.maxGets.Load())
	if m := inner.maxBytes.Load(); m > o.MaxInFlightBytes {
		t.Fatalf("%d bytes in flight at the store, budget %d", m, o.MaxInFlightBytes)
	}
	if m := inner.maxGets.Load(); m > int64(o.MaxConcurrentGets) {
		t.Fatalf("%d GETs in flight, limit %d", m, o.MaxConcurrentGets)
	}
	if g := testutil.ToFloat64(c.m.bytes.WithLabelValues(TierMemory)); g != float64(c.mem.size()) {
		t.Fatalf("bytes gauge %v, tier holds %d", g, c.mem.size())
	}
	if ev := testutil.ToFloat64(c.m.evictions.WithLabelValues(TierMemory)); ev == 0 {
		t.Fatal("workload larger than the cache evicted nothing")
	}
}

// TestRandomRangesMatchStore compares GetRange through the cache with
// GetRange on the store for random ranges, including the edges.
func TestRandomRangesMatchStore(t *testing.T) {
	for _, chunk := range []int64{1, 7, 64, 1000, 4096} {
		maxSize := min(chunk*200, 5000)
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			store := objstore.NewMemory()
			rng := rand.New(rand.NewPCG(uint64(chunk), 1))
			sizes := []int64{0, 1, chunk, chunk + 1, 3*chunk - 1}
			for range 4 {
				sizes = append(sizes, rng.Int64N(maxSize))
			}
			for i, s := range sizes {
				putObject(t, store, fmt.Sprint("o", i), s)
			}
			c := mustCache(t, store, CacheOptions{ChunkBytes: chunk, MemoryBytes: 3000, ReadAheadChunks: 1})
			ctx := context.Background()
			for range 400 {
				i := rng.IntN(len(sizes))
				key, size := fmt.Sprint("o", i), sizes[i]
				off := rng.Int64N(size + 3)
				length := rng.Int64N(size+3) - 1 // -1: to the end
				if rng.IntN(10) == 0 {
					off = size
				}
				direct, derr := readRange(ctx, store, key, off, length)
				cached, cerr := readRange(ctx, c, key, off, length)
				if (derr == nil) != (cerr == nil) || (derr != nil && !errors.Is(cerr, objstore.ErrInvalidRange)) {
					t.Fatalf("%s size %d [%d,+%d): store err %v, cache err %v", key, size, off, length, derr, cerr)
				}
				if !bytes.Equal(direct, cached) {
					t.Fatalf("%s size %d [%d,+%d): cache returned %d bytes, store %d", key, size, off, length, len(cached), len(direct))
				}
			}
			if _, err := c.GetRange(ctx, "missing", 0, 1); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("missing object: %v", err)
			}
			if _, err := c.GetRange(ctx, "o1", -1, 1); err == nil {
				t.Fatal("negative offset accepted")
			}
		})
	}
}

func readRange(ctx context.Context, b objstore.BucketReader, key string, off, length int64) ([]byte, error) {
	rc, err := b.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// Alternate between Read and WriteTo.
	if off%2 == 0 {
		var buf bytes.Buffer
		_, err = io.Copy(&buf, rc)
		return buf.Bytes(), err
	}
	out := []byte{}
	p := make([]byte, 3)
	for {
		n, err := rc.Read(p)
		out = append(out, p[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestSharedLoadSurvivesCallerCancel: the caller that started a shared
// load gives up; another caller waiting on the same chunk still gets it.
func TestSharedLoadSurvivesCallerCancel(t *testing.T) {
	store := objstore.NewMemory()
	want := putObject(t, store, "k", 500)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, ReadAheadChunks: -1})
	inner.holdGets()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error)
	go func() {
		_, err := c.GetRange(ctx, "k", 0, 50)
		first <- err
	}()
	for inner.started.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	second := make(chan []byte)
	var joined atomic.Bool
	c.testHook = func(chunkKey) { joined.Store(true) }
	go func() {
		rc, err := c.GetRange(context.Background(), "k", 10, 20)
		if err != nil {
			t.Error(err)
			second <- nil
			return
		}
		b, _ := io.ReadAll(rc)
		second <- b
	}()
	for !joined.Load() {
		time.Sleep(100 * time.Microsecond)
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: %v, want canceled", err)
	}
	inner.release()
	if got := <-second; !bytes.Equal(got, want[10:30]) {
		t.Fatal("second caller did not get the shared chunk")
	}
	if calls := inner.takeRanges(); len(calls) != 1 {
		t.Fatalf("%d GETs, want 1 shared", len(calls))
	}
}

// TestCloseStopsBackgroundWork: read-ahead stuck in the store is
// cancelled by Close, which returns with no goroutine left behind.
func TestCloseStopsBackgroundWork(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	store := objstore.NewMemory()
	putObject(t, store, "log", 10000)
	inner := newCounting(store)
	c, err := NewCachingBucket(inner, CacheOptions{ChunkBytes: 100, MemoryBytes: 10000, ReadAheadChunks: 4,
		CacheDir: t.TempDir(), DiskBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, c, "log", 500, 50) // not chunk 0: no read-ahead yet
	inner.holdGets()
	// Sequential: read-ahead of chunks 6..9 starts and blocks in the store.
	readAll(t, c, "log", 550, 40)
	for inner.started.Load() < 2 {
		time.Sleep(100 * time.Microsecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	inner.release()
	if _, err := c.GetRange(context.Background(), "log", 0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if g := c.bytes.InFlight() + c.gets.InFlight(); g != 0 {
		t.Fatalf("gates hold %d after Close", g)
	}
	// Pass-through calls still work after Close.
	if _, err := c.Attributes(context.Background(), "log"); err != nil {
		t.Fatal(err)
	}
}

// TestPassThrough: Get, Attributes and List go to the inner bucket and
// see changes at once (manifests are rewritten in place).
func TestPassThrough(t *testing.T) {
	store := objstore.NewMemory()
	putObject(t, store, "m/manifest.json", 10)
	c := mustCache(t, store, CacheOptions{})
	ctx := context.Background()
	if _, err := store.Put(ctx, "m/manifest.json", strings.NewReader("v2"), 2, objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	rc, err := c.Get(ctx, "m/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "v2" {
		t.Fatalf("Get returned %q", b)
	}
	if a, err := c.Attributes(ctx, "m/manifest.json"); err != nil || a.Size != 2 {
		t.Fatalf("Attributes %+v %v", a, err)
	}
	var keys []string
	if err := c.List(ctx, "m/", func(oi objstore.ObjectInfo) error { keys = append(keys, oi.Key); return nil }); err != nil || len(keys) != 1 {
		t.Fatalf("List %v %v", keys, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	err := CacheOptions{ChunkBytes: -1, MemoryBytes: -5, DiskBytes: 10, MaxWait: -time.Second,
		MaxConcurrentGets: -1, FetchParallelism: -2}.EnsureDefaults().Validate()
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{"chunk bytes", "cache bytes", "without a cache dir", "max wait",
		"max concurrent gets", "fetch parallelism"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not report %q", err, want)
		}
	}
	if err := (CacheOptions{ChunkBytes: 100, MaxInFlightBytes: 50}).EnsureDefaults().Validate(); err == nil ||
		!strings.Contains(err.Error(), "at least one chunk") {
		t.Fatalf("in-flight below a chunk: %v", err)
	}
	if err := (CacheOptions{CacheDir: "/x"}).EnsureDefaults().Validate(); err == nil {
		t.Fatal("cache dir without disk bytes accepted")
	}
	if err := (CacheOptions{}).EnsureDefaults().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if _, err := NewCachingBucket(objstore.NewMemory(), CacheOptions{ChunkBytes: -1}); err == nil {
		t.Fatal("NewCachingBucket accepted bad options")
	}
}

// TestMetricsStartAtZero: every series exists, at 0, before any read, and
// two caching buckets can share one registry.
func TestMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	mustCache(t, objstore.NewMemory(), CacheOptions{Registerer: reg})
	mustCache(t, objstore.NewMemory(), CacheOptions{Registerer: reg})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			series[f.GetName()]++
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Histogram != nil:
				v = float64(m.Histogram.GetSampleCount())
			}
			if v != 0 {
				t.Errorf("%s %v = %v at start", f.GetName(), m.GetLabel(), v)
			}
		}
	}
	want := map[string]int{
		"tiered_fetch_cache_hits_total": 2, "tiered_fetch_cache_misses_total": 2,
		"tiered_fetch_cache_evictions_total": 2, "tiered_fetch_cache_bytes": 2,
		"tiered_fetch_cache_corrupt_chunks_total": 1,
		"tiered_fetch_store_gets_total":           1, "tiered_fetch_store_get_bytes_total": 1,
		"tiered_fetch_store_gets_continued_total": 1, "tiered_fetch_store_gets_parked": 1,
		"tiered_fetch_store_gets_parked_unused_total": 1, "tiered_fetch_store_gets_end_check_total": 1,
		"tiered_fetch_gate_in_flight": 2, "tiered_fetch_gate_waits_total": 2,
		"tiered_fetch_gate_rejections_total": 2, "tiered_fetch_gate_wait_seconds": 2,
		"tiered_fetch_readahead_chunks_total": 2, "tiered_fetch_cache_wait_seconds": 1,
	}
	for name, n := range want {
		if series[name] != n {
			t.Errorf("%s: %d series, want %d", name, series[name], n)
		}
	}
	if len(series) != len(want) {
		t.Errorf("series %v, want exactly %v", series, want)
	}
}

// TestCacheWaitObserved: a client read that waits for a chunk's GET is
// observed in tiered_fetch_cache_wait_seconds, for about the GET's time,
// once however many chunks it waits for; as is an uncached exact range
// (an end check's tail). One answered from memory (read-ahead's chunks
// among them) is not, nor are read-ahead's own loads.
func TestCacheWaitObserved(t *testing.T) {
	store := objstore.NewMemory()
	putObject(t, store, "seg", 1000)
	inner := newCounting(store)
	inner.delay = 20 * time.Millisecond
	c := mustCache(t, inner, CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, ReadAheadChunks: 2})
	observed := func() (uint64, float64) {
		var m dto.Metric
		if err := c.m.cacheWait.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()
	}
	readAll(t, c, "seg", 0, 150) // chunks 0 and 1; read ahead: 2 and 3
	waitIdle(t, c)
	n, sum := observed()
	if n != 1 || sum < 0.02 {
		t.Fatalf("after a read from the store: %d observations, %vs in all; want 1 of at least the GET's 20ms", n, sum)
	}
	readAll(t, c, "seg", 150, 250) // chunks 1 to 3, in memory
	if n, _ := observed(); n != 1 {
		t.Fatalf("a read from memory was observed: %d observations, want 1", n)
	}
	rc, err := c.GetRange(objstore.WithExactRange(context.Background()), "seg", 900, 50)
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Close()
	if n, sum2 := observed(); n != 2 || sum2-sum < 0.02 {
		t.Fatalf("after an exact range: %d observations, %vs more; want 2, the GET's 20ms more", n, sum2-sum)
	}
}
