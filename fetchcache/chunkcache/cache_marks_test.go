package chunkcache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestExactRangeReadsOnlyTheRange: a range read marked WithExactRange on
// bytes not cached is one GET of exactly the range, uncached (a second
// read GETs again); once the chunks are cached it is served from them
// with no GET.
func TestExactRangeReadsOnlyTheRange(t *testing.T) {
	store := objstore.NewMemory()
	const size, chunk = 1 << 20, 256 << 10
	want := putObject(t, store, "t/0/seg.log", size)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 4 << 20, ReadAheadChunks: -1})
	ctx := objstore.WithExactRange(context.Background())
	off, n := int64(size-5000), int64(3000)
	for range 2 {
		got := readAllCtx(t, c, ctx, "t/0/seg.log", off, n)
		if !bytes.Equal(got, want[off:off+n]) {
			t.Fatal("exact range: wrong bytes")
		}
		if r := inner.takeRanges(); len(r) != 1 || r[0].off != off || r[0].size != n {
			t.Fatalf("exact range sent %v; want one GET of [%d, +%d)", r, off, n)
		}
	}
	if c.mem.size() != 0 {
		t.Fatalf("exact range cached %d bytes", c.mem.size())
	}
	// Cached by a plain read: the exact read needs no GET.
	readAllCtx(t, c, context.Background(), "t/0/seg.log", off, n)
	inner.takeRanges()
	if got := readAllCtx(t, c, ctx, "t/0/seg.log", off, n); !bytes.Equal(got, want[off:off+n]) {
		t.Fatal("exact range from the cache: wrong bytes")
	}
	if r := inner.takeRanges(); len(r) != 0 {
		t.Fatalf("exact range of cached bytes sent %v", r)
	}
	waitIdle(t, c)
}

// markChunk is the chunk size of coldSegment's cache.
const markChunk = 256 << 10

// coldSegment is a cache (chunks of markChunk, no read-ahead of its own)
// over a store, counted, holding one 1 MiB object t/0/seg.log whose size
// the cache knows and none of whose bytes it holds.
func coldSegment(t *testing.T) (*CachingBucket, *countingBucket, []byte) {
	t.Helper()
	store := objstore.NewMemory()
	const size = 1 << 20
	want := putObject(t, store, "t/0/seg.log", size)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: markChunk, MemoryBytes: 4 << 20, ReadAheadChunks: -1})
	c.HintSize("t/0/seg.log", size)
	return c, inner, want
}

// TestCachedOnlyNeverWaits: a range read marked WithCachedOnly on bytes not
// all cached fails at once with ErrNotCached, even while the store holds
// every GET, and starts loading the missing chunks; once they are in, the
// same read is served with no further GET.
func TestCachedOnlyNeverWaits(t *testing.T) {
	c, inner, want := coldSegment(t)
	ctx := objstore.WithCachedOnly(context.Background())
	off, n := int64(markChunk-100), int64(200) // chunks 0 and 1
	inner.holdGets()
	_, err := c.GetRange(ctx, "t/0/seg.log", off, n)
	if !errors.Is(err, objstore.ErrNotCached) {
		t.Fatalf("cached-only read of cold bytes: %v; want ErrNotCached", err)
	}
	inner.release()
	waitIdle(t, c)
	if r := inner.takeRanges(); len(r) != 1 || r[0].off != 0 || r[0].size != 2*markChunk {
		t.Fatalf("the miss loaded %v; want chunks 0-1 in one GET", r)
	}
	if got := readAllCtx(t, c, ctx, "t/0/seg.log", off, n); !bytes.Equal(got, want[off:off+n]) {
		t.Fatal("cached-only read: wrong bytes")
	}
	if r := inner.takeRanges(); len(r) != 0 {
		t.Fatalf("cached-only read of cached bytes sent %v", r)
	}
}

// slowKey delays every GET of one key.
type slowKey struct {
	objstore.BucketReader
	key   string
	delay time.Duration
}

func (b *slowKey) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if key == b.key {
		time.Sleep(b.delay)
	}
	return b.BucketReader.GetRange(ctx, key, off, length)
}

// TestCachedOnlyEvictedMeanwhile: a cached-only read takes its chunks from
// memory in one step, so a chunk evicted by another reader between finding
// it cached and reading it does not make the read load it and wait for the
// store. Another reader evicts and reloads A (each GET of A 20 ms) while
// cached-only reads of A, each with 10 ms to finish, must get A or
// ErrNotCached at once, never wait out their deadline.
func TestCachedOnlyEvictedMeanwhile(t *testing.T) {
	const chunk = 100
	store := objstore.NewMemory()
	putObject(t, store, "A", chunk)
	putObject(t, store, "B", 50*chunk)
	c := mustCache(t, &slowKey{BucketReader: store, key: "A", delay: 20 * time.Millisecond},
		CacheOptions{ChunkBytes: chunk, MemoryBytes: 2 * chunk, ReadAheadChunks: -1, MaxInFlightBytes: 8 * chunk, MaxWait: 5 * time.Second})
	readAll(t, c, "A", 0, chunk)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for k := int64(1); ; k = k%48 + 1 {
			select {
			case <-stop:
				return
			default:
			}
			readAll(t, c, "B", k*chunk, 2*chunk) // evicts A
			readAll(t, c, "A", 0, chunk)         // loads it again
		}
	})
	defer func() { close(stop); wg.Wait() }()
	hits := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(objstore.WithCachedOnly(context.Background()), 10*time.Millisecond)
		rc, err := c.GetRange(ctx, "A", 0, chunk)
		cancel()
		switch {
		case err == nil:
			_ = rc.Close()
			hits++
		case !errors.Is(err, objstore.ErrNotCached):
			t.Fatalf("cached-only read of A while it is evicted and reloaded: %v; want its bytes or ErrNotCached at once", err)
		}
	}
	if hits == 0 {
		t.Fatal("no cached-only read found A cached: the race was never tried")
	}
}

// TestPrefetchReadsNothing: a range read marked WithPrefetch fails with
// ErrNotCached whether or not its bytes are cached: on bytes not cached it
// starts loading the missing chunks (one GET) and returns at once; on
// cached bytes it sends no GET.
func TestPrefetchReadsNothing(t *testing.T) {
	c, inner, want := coldSegment(t)
	ctx := objstore.WithPrefetch(context.Background())
	if !objstore.CachedOnly(ctx) {
		t.Fatal("a prefetch context is not cached-only: a bucket without a cache would not know to refuse it")
	}
	off, n := int64(markChunk-100), int64(200) // chunks 0 and 1
	for i := range 2 {
		if _, err := c.GetRange(ctx, "t/0/seg.log", off, n); !errors.Is(err, objstore.ErrNotCached) {
			t.Fatalf("prefetch %d: %v; want ErrNotCached", i, err)
		}
		waitIdle(t, c)
		r := inner.takeRanges()
		switch {
		case i == 0 && (len(r) != 1 || r[0].off != 0 || r[0].size != 2*markChunk):
			t.Fatalf("the prefetch loaded %v; want chunks 0-1 in one GET", r)
		case i == 1 && len(r) != 0:
			t.Fatalf("a prefetch of cached bytes sent %v", r)
		}
	}
	if got := readAllCtx(t, c, objstore.WithCachedOnly(context.Background()), "t/0/seg.log", off, n); !bytes.Equal(got, want[off:off+n]) {
		t.Fatal("cached-only read after the prefetch: wrong bytes")
	}
}

func readAllCtx(t *testing.T, c *CachingBucket, ctx context.Context, key string, off, n int64) []byte {
	t.Helper()
	rc, err := c.GetRange(ctx, key, off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMemoryPressureShrinksTheTier: under memory pressure the memory tier
// holds that many bytes less, never below a quarter of its bound, and
// holds its whole bound again once the pressure is gone.
func TestMemoryPressureShrinksTheTier(t *testing.T) {
	store := objstore.NewMemory()
	const chunk = 1 << 10
	putObject(t, store, "t/0/seg.log", 64*chunk)
	var pressure int64
	c := mustCache(t, store, CacheOptions{ChunkBytes: chunk, MemoryBytes: 16 * chunk, ReadAheadChunks: -1,
		MemoryPressure: func() int64 { return pressure }})
	read := func(from int64) {
		for i := from; i < from+20; i++ {
			readAllCtx(t, c, context.Background(), "t/0/seg.log", i*chunk, chunk)
		}
	}
	for _, tc := range []struct {
		pressure, want int64
	}{
		{0, 16 * chunk},
		{6 * chunk, 10 * chunk},
		{100 * chunk, 4 * chunk}, // a quarter at least
		{0, 16 * chunk},
	} {
		pressure = tc.pressure
		read(tc.pressure % 40)
		if got := c.mem.size(); got != tc.want {
			t.Fatalf("pressure %d: %d bytes cached, want %d", tc.pressure, got, tc.want)
		}
	}
}

// TestReadAheadWholeObjectPastShare: a stream whose share of the in-flight
// budget is smaller than an object one GET can load still loads it by one
// GET, its first run of the call.
func TestReadAheadWholeObjectPastShare(t *testing.T) {
	store := objstore.NewMemory()
	const chunk = 100
	putObject(t, store, "seg", 4*chunk)
	putObject(t, store, "other", chunk)
	inner := newCounting(store)
	// 16 chunks in flight: runs of up to 4 chunks (maxRunChunks); eight
	// active streams share 2 chunks each.
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 100 * chunk, MaxInFlightBytes: 16 * chunk})
	for s := uint64(1); s <= 7; s++ {
		c.ReadAhead(s, []objstore.Range{{Key: "other", Off: 0, Len: chunk, Size: chunk}})
	}
	waitIdle(t, c)
	inner.takeRanges()
	if got := c.ReadAhead(8, []objstore.Range{{Key: "seg", Off: 0, Len: 4 * chunk, Size: 4 * chunk}}); got != 4*chunk {
		t.Fatalf("covered %d bytes, want the whole object (%d)", got, 4*chunk)
	}
	waitIdle(t, c)
	if r := inner.takeRanges(); len(r) != 1 || r[0].size != 4*chunk {
		t.Fatalf("GETs %v; want the object in one", r)
	}
}

// TestEndCheckGETsCounted: the store GETs of reads marked WithEndCheck,
// through chunks or exact, are counted apart as well as among all GETs;
// other reads' are not, nor a marked read the cache answers.
func TestEndCheckGETsCounted(t *testing.T) {
	const chunk = 100
	store := objstore.NewMemory()
	putObject(t, store, "seg", 10*chunk)
	c := mustCache(t, newCounting(store), CacheOptions{ChunkBytes: chunk, MemoryBytes: 20 * chunk, ReadAheadChunks: -1})
	end := objstore.WithEndCheck(context.Background())
	read := func(ctx context.Context, off, n int64) {
		t.Helper()
		if _, err := readRange(ctx, c, "seg", off, n); err != nil {
			t.Fatal(err)
		}
	}
	read(end, 950, 50)                          // chunk 9: one GET
	read(objstore.WithExactRange(end), 420, 10) // exact: one GET
	read(context.Background(), 0, 2*chunk)      // a client's: not an end check
	read(end, 960, 20)                          // cached: no GET
	if all, ec := testutil.ToFloat64(c.m.storeGets), testutil.ToFloat64(c.m.endCheckGets); all != 3 || ec != 2 {
		t.Fatalf("%v GETs, %v of them end checks; want 3, 2", all, ec)
	}
}

// TestReadAsksForItsDemand: a read of a request's DemandGroup ends its
// place in the group once a load of its own holds a GET's slot, while the
// store still holds the GET (not when the bytes arrive), so the read-ahead
// its request held back takes only the slots left: with one slot, the
// read's GET reaches the store before that read-ahead's. A read of cached
// bytes ends its place at once.
func TestReadAsksForItsDemand(t *testing.T) {
	store := objstore.NewMemory()
	const size = 1 << 20
	want := putObject(t, store, "t/0/a.log", size)
	putObject(t, store, "t/0/b.log", size)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: markChunk, MemoryBytes: 8 << 20, MaxConcurrentGets: 1})
	c.HintSize("t/0/a.log", size)
	c.HintSize("t/0/b.log", size)
	inner.holdGets()
	g := objstore.NewDemandGroup(1)
	settled := make(chan struct{})
	// What the request held back: a stream's window over another object.
	var slotsAtSettle int64
	g.OnSettled(func() {
		slotsAtSettle = c.gets.InFlight()
		c.ReadAhead(objstore.NewStreamID(), []objstore.Range{{Key: "t/0/b.log", Len: size, Size: size}})
		close(settled)
	})
	// Marked as a RemoteLog's read (it reads ahead itself): no read-ahead
	// of the object's next chunks besides.
	ctx, end := objstore.WithDemand(objstore.WithCallerReadAhead(context.Background()), g)
	defer end()
	got := make(chan []byte, 1)
	go func() {
		rc, err := c.GetRange(ctx, "t/0/a.log", 0, markChunk)
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	select {
	case <-settled:
	case <-time.After(5 * time.Second):
		t.Fatal("the read is waiting for the store, and its request has not settled")
	}
	if slotsAtSettle != 1 {
		t.Fatalf("the request settled with %d GET slots taken, want 1: the read's own", slotsAtSettle)
	}
	inner.release()
	if b := <-got; !bytes.Equal(b, want[:markChunk]) {
		t.Fatal("wrong bytes")
	}
	waitIdle(t, c)
	r := inner.takeRanges()
	if len(r) < 2 || r[0].key != "t/0/a.log" || r[len(r)-1].key != "t/0/b.log" {
		t.Fatalf("GETs %v: want the read's own first, then the read-ahead its request held back", r)
	}
	// A read of cached bytes asks at once.
	g = objstore.NewDemandGroup(1)
	ctx, end = objstore.WithDemand(context.Background(), g)
	defer end()
	readAllCtx(t, c, ctx, "t/0/a.log", 0, markChunk)
	if g.Pending() {
		t.Fatal("a read served from the cache left its group pending")
	}
}
