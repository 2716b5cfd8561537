package chunkcache

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/remotetier/objstore"
)

// content is the deterministic body of a test object.
func content(key string, size int64) []byte {
	b := make([]byte, size)
	h := byte(len(key) * 31)
	for _, c := range []byte(key) {
		h = h*33 + c
	}
	for i := range b {
		b[i] = byte(i*131+i>>8) ^ h
	}
	return b
}

func putObject(t testing.TB, b *objstore.Memory, key string, size int64) []byte {
	t.Helper()
	data := content(key, size)
	if _, err := b.Put(context.Background(), key, bytes.NewReader(data), size, objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	return data
}

// slowObjects stores n objects obj-0, obj-1, … of base, base+step, …
// bytes and returns the store, a counting view of it whose requests take
// 200µs (so that concurrent ones overlap), and the objects' bytes by key.
func slowObjects(t testing.TB, n int, base, step int64) (*objstore.Memory, *countingBucket, map[string][]byte) {
	store := objstore.NewMemory()
	objs := map[string][]byte{}
	for i := range n {
		k := fmt.Sprintf("obj-%d", i)
		objs[k] = putObject(t, store, k, base+int64(i)*step)
	}
	inner := newCounting(store)
	inner.delay = 200 * time.Microsecond
	return store, inner, objs
}

// countingBucket records the range GETs reaching the store and can hold
// them until released; it also tracks the bytes requested by GETs in
// flight, the requests of any kind in flight (gets: range GETs, GETs until
// their body is closed, HEADs) and their maxima.
type countingBucket struct {
	objstore.BucketReader

	mu       sync.Mutex
	ranges   []rangeCall
	attrs    int
	hold     chan struct{} // non-nil: GetRange waits for it to close (or ctx)
	delay    time.Duration // sleep in each GetRange, to make GETs overlap
	started  atomic.Int64  // GetRange calls that reached the store
	inFlight atomic.Int64  // bytes of GETs not yet closed
	maxBytes atomic.Int64
	maxGets  atomic.Int64
	gets     atomic.Int64
}

type rangeCall struct {
	key       string
	off, size int64
}

func newCounting(inner objstore.BucketReader) *countingBucket {
	return &countingBucket{BucketReader: inner}
}

// holdGets makes later GetRange calls block until release.
func (b *countingBucket) holdGets() {
	b.mu.Lock()
	b.hold = make(chan struct{})
	b.mu.Unlock()
}

func (b *countingBucket) release() {
	b.mu.Lock()
	if b.hold != nil {
		close(b.hold)
		b.hold = nil
	}
	b.mu.Unlock()
}

func (b *countingBucket) Attributes(ctx context.Context, key string) (objstore.Attrs, error) {
	b.mu.Lock()
	b.attrs++
	b.mu.Unlock()
	raiseTo(&b.maxGets, b.gets.Add(1))
	defer b.gets.Add(-1)
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	return b.BucketReader.Attributes(ctx, key)
}

// Get counts whole-object GETs among the requests in flight (gets), until
// their body is closed.
func (b *countingBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	raiseTo(&b.maxGets, b.gets.Add(1))
	done := func() { b.gets.Add(-1) }
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	rc, err := b.BucketReader.Get(ctx, key)
	if err != nil {
		done()
		return nil, err
	}
	return &doneReader{ReadCloser: rc, done: done}, nil
}

func (b *countingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	b.mu.Lock()
	b.ranges = append(b.ranges, rangeCall{key, off, length})
	hold := b.hold
	b.mu.Unlock()
	b.started.Add(1)
	g := b.gets.Add(1)
	raiseTo(&b.maxGets, g)
	raiseTo(&b.maxBytes, b.inFlight.Add(length))
	done := func() {
		b.inFlight.Add(-length)
		b.gets.Add(-1)
	}
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			done()
			return nil, ctx.Err()
		}
	}
	rc, err := b.BucketReader.GetRange(ctx, key, off, length)
	if err != nil {
		done()
		return nil, err
	}
	return &doneReader{ReadCloser: rc, done: done}, nil
}

func raiseTo(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

type doneReader struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (r *doneReader) Close() error {
	r.once.Do(r.done)
	return r.ReadCloser.Close()
}

// takeRanges returns and forgets the recorded GETs, sorted.
func (b *countingBucket) takeRanges() []rangeCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ranges
	b.ranges = nil
	sort.Slice(r, func(i, j int) bool {
		if r[i].key != r[j].key {
			return r[i].key < r[j].key
		}
		return r[i].off < r[j].off
	})
	return r
}

// waitIdle waits until no read-ahead or background load holds a gate.
func waitIdle(t testing.TB, c *CachingBucket) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	// A window held back (ReadAhead) is loaded once the gates free up: the
	// cache is idle only when none is left.
	for c.loading() > 0 || c.bytes.InFlight() > 0 || c.gets.InFlight() > 0 || (c.streams.anyHeld.Load() && !c.isClosed()) {
		if time.Now().After(deadline) {
			t.Fatalf("cache not idle: read-ahead %d, bytes %d, gets %d, a window held %v", c.loading(), c.bytes.InFlight(), c.gets.InFlight(), c.streams.anyHeld.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

func readAll(t testing.TB, c objstore.BucketReader, key string, off, length int64) []byte {
	t.Helper()
	rc, err := c.GetRange(context.Background(), key, off, length)
	if err != nil {
		t.Fatalf("get range %s [%d,+%d): %v", key, off, length, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustCache opens a CachingBucket that the test's cleanup closes.
// Unless o sets ParkedGets, parking is off: the tests of runs, claims and
// budgets check the range each run asks of the store, which a parked GET
// extends to the object's end; parked_test.go tests parking.
func mustCache(t testing.TB, inner objstore.BucketReader, o CacheOptions) *CachingBucket {
	t.Helper()
	if o.ParkedGets == 0 {
		o.ParkedGets = -1
	}
	c, err := NewCachingBucket(inner, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func expectRange(want []byte, off, length int64) []byte {
	if off >= int64(len(want)) {
		return nil
	}
	end := int64(len(want))
	if length >= 0 && off+length < end {
		end = off + length
	}
	return want[off:end]
}

// tileChunks checks that the GETs (sorted by takeRanges) cover [from, to)
// exactly once, each starting on a chunk boundary and spanning at most
// maxRun chunks (the last GET may stop at the object's end before to).
func tileChunks(t testing.TB, calls []rangeCall, chunk, from, to int64, maxRun int) {
	t.Helper()
	pos := from
	for _, call := range calls {
		if call.off != pos || call.off%chunk != 0 {
			t.Fatalf("GET at %d, want one at %d (each chunk once, aligned): %v", call.off, pos, calls)
		}
		if call.size <= 0 || call.size > int64(maxRun)*chunk {
			t.Fatalf("GET of %d bytes at %d: want 1 to %d chunks: %v", call.size, call.off, maxRun, calls)
		}
		pos += call.size
	}
	if pos > to || pos <= to-chunk {
		t.Fatalf("GETs cover [%d, %d), want [%d, %d): %v", from, pos, from, to, calls)
	}
}

// eachChunkOnce checks that no chunk is fetched by more than one of the
// GETs (a GET of a run fetches every chunk it spans).
func eachChunkOnce(t testing.TB, calls []rangeCall, chunk int64) {
	t.Helper()
	fetched := map[string]int{}
	for _, call := range calls {
		for i := call.off / chunk; i*chunk < call.off+call.size; i++ {
			id := fmt.Sprintf("%s#%d", call.key, i)
			if fetched[id]++; fetched[id] > 1 {
				t.Fatalf("chunk %s fetched twice, want once: %v", id, calls)
			}
		}
	}
}

// randomReaders runs workers goroutines at once and waits for them. Each
// has its own generator (seeded by its number and seed) and calls read
// iters times (i: the call's number) with an object of objs picked at
// random (keys in order); a read returning false stops its worker. read
// runs off the test goroutine: it reports with t.Errorf, never t.Fatal.
func randomReaders(workers, iters int, seed uint64, objs map[string][]byte, read func(i int, rng *rand.Rand, key string, data []byte) bool) {
	keys := slices.Sorted(maps.Keys(objs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			for i := range iters {
				k := keys[rng.IntN(len(keys))]
				if !read(i, rng, k, objs[k]) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// sampleViolations checks bad every few microseconds in the background
// until the returned stop is called, which returns how many samples found
// it true.
func sampleViolations(bad func() bool) (stop func() int64) {
	done := make(chan struct{})
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if bad() {
				n.Add(1)
			}
			time.Sleep(20 * time.Microsecond)
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return n.Load()
	}
}
