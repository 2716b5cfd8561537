package chunkcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Tests of chunk loads in runs (cache_load.go) and read-ahead runs
// (readahead.go): the GETs a read causes, the disk tier splitting runs,
// GETs failing part-way through a run, a client joining a read-ahead that
// gives up, Close under load, size hints, and that gates and flights come
// back to idle whatever happens.

// spans renders GETs as chunk spans, sorted: "0-3 5" is one GET of chunks
// 0 to 3 and one of chunk 5; "none" for none.
func spans(calls []rangeCall, chunk int64) string {
	calls = slices.Clone(calls)
	slices.SortFunc(calls, func(a, b rangeCall) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		if a.off != b.off {
			return int(a.off - b.off)
		}
		return int(a.size - b.size)
	})
	var parts []string
	for _, c := range calls {
		first, last := c.off/chunk, (c.off+c.size-1)/chunk
		s := strconv.FormatInt(first, 10)
		if c.off%chunk != 0 {
			s += fmt.Sprintf("(unaligned %d)", c.off)
		}
		if last > first {
			s += "-" + strconv.FormatInt(last, 10)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// loadCounters is a snapshot of the cache's lookup and store counters.
type loadCounters struct {
	memHits, memMisses, diskHits, diskMisses, storeGets, storeBytes float64
}

func countersOf(c *CachingBucket) loadCounters {
	m := c.m
	return loadCounters{
		testutil.ToFloat64(m.hits.WithLabelValues(TierMemory)),
		testutil.ToFloat64(m.misses.WithLabelValues(TierMemory)),
		testutil.ToFloat64(m.hits.WithLabelValues(TierDisk)),
		testutil.ToFloat64(m.misses.WithLabelValues(TierDisk)),
		testutil.ToFloat64(m.storeGets),
		testutil.ToFloat64(m.storeBytes),
	}
}

func (a loadCounters) minus(b loadCounters) loadCounters {
	return loadCounters{a.memHits - b.memHits, a.memMisses - b.memMisses, a.diskHits - b.diskHits,
		a.diskMisses - b.diskMisses, a.storeGets - b.storeGets, a.storeBytes - b.storeBytes}
}

// assertIdle waits for the cache to be idle: no flight, and the gates and
// their gauges at exactly zero. (waitIdle alone would accept a weight
// released twice, a negative in-flight count.) A load hands out its last
// chunk just before it returns the weight, so this polls.
func assertIdle(t testing.TB, c *CachingBucket) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, b, g := c.loading(), c.bytes.InFlight(), c.gets.InFlight()
		bg, gg := testutil.ToFloat64(c.bytes.Series().InFlight), testutil.ToFloat64(c.gets.Series().InFlight)
		if l == 0 && b == 0 && g == 0 && bg == 0 && gg == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache not idle: flights %d, bytes %d (gauge %v), gets %d (gauge %v); want 0 each", l, b, bg, g, gg)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// result is the outcome of a GetRange read to the end.
type result struct {
	data []byte
	err  error
}

func goRead(c *CachingBucket, ctx context.Context, key string, off, n int64) chan result {
	ch := make(chan result, 1)
	go func() {
		rc, err := c.GetRange(ctx, key, off, n)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		ch <- result{b, err}
	}()
	return ch
}

func await(t testing.TB, ch chan result, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer after 10 s (a flight never settled?)", what)
		return result{}
	}
}

// TestLoadRunGETs: the missing chunks of a read load in runs of
// consecutive chunks, one GET each, at most a quarter of the in-flight
// budget (1 to 8 chunks) per run; cached chunks split runs. The lookups
// and GETs are counted.
func TestLoadRunGETs(t *testing.T) {
	const chunk = 100
	for _, tc := range []struct {
		name     string
		size     int64
		inflight int64   // MaxInFlightBytes, in chunks
		cached   []int64 // chunks read into memory first
		off, n   int64
		want     string // GETs of the read
		hits     int    // memory hits of the read
	}{
		{"cold range is one GET", 800, 32, nil, 0, 800, "0-7", 0},
		{"runs hold a quarter of the budget", 800, 8, nil, 0, 800, "0-1 2-3 4-5 6-7", 0},
		{"runs of at least one chunk", 800, 1, nil, 0, 800, "0 1 2 3 4 5 6 7", 0},
		{"runs of at most eight chunks", 1200, 64, nil, 0, -1, "0-7 8-11", 0},
		{"a cached chunk splits the run", 800, 32, []int64{3}, 0, 800, "0-2 4-7", 1},
		{"cached chunks at both ends", 800, 32, []int64{0, 7}, 50, 700, "1-6", 2},
		{"cached every other chunk", 800, 32, []int64{1, 3, 5}, 0, 800, "0 2 4 6-7", 3},
		{"short last chunk", 750, 32, nil, 250, -1, "2-7", 0},
		{"inside one chunk", 800, 32, nil, 130, 20, "1", 0},
		{"all cached", 300, 32, []int64{0, 1, 2}, 0, -1, "none", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			want := putObject(t, store, "seg", tc.size)
			inner := newCounting(store)
			c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: -1,
				MaxInFlightBytes: tc.inflight * chunk, MaxWait: 10 * time.Second})
			for _, i := range tc.cached {
				readAll(t, c, "seg", i*chunk, 1)
			}
			assertIdle(t, c)
			inner.takeRanges()
			before := countersOf(c)

			got := readAll(t, c, "seg", tc.off, tc.n)
			if !bytes.Equal(got, expectRange(want, tc.off, tc.n)) {
				t.Fatalf("read %d bytes, not the object's", len(got))
			}
			assertIdle(t, c)
			calls := inner.takeRanges()
			if s := spans(calls, chunk); s != tc.want {
				t.Fatalf("GETs %s, want %s", s, tc.want)
			}
			exp := expectRange(want, tc.off, tc.n)
			chunks := (tc.off+int64(len(exp))-1)/chunk - tc.off/chunk + 1
			var fetched int64
			for _, call := range calls {
				fetched += call.size
			}
			d := countersOf(c).minus(before)
			wantD := loadCounters{memHits: float64(tc.hits), memMisses: float64(chunks) - float64(tc.hits),
				storeGets: float64(len(calls)), storeBytes: float64(fetched)}
			if d != wantD {
				t.Fatalf("counters %+v, want %+v", d, wantD)
			}
			// Every chunk of the range is cached now.
			a, _ := c.attrs.Get("seg")
			for i := tc.off / chunk; i < tc.off/chunk+chunks; i++ {
				if !c.mem.contains(chunkKey{"seg", objectVersion(a), i}) {
					t.Fatalf("chunk %d not cached after the read", i)
				}
			}
		})
	}
}

// TestLoadRunDiskTier: chunks the disk tier holds split a run (they are
// promoted, not fetched); every chunk fetched is written to disk with its
// byte weight returned once written; disk lookups are counted for client
// loads only (a read-ahead run split by disk counts nothing).
func TestLoadRunDiskTier(t *testing.T) {
	const chunk, size = 100, 800
	for _, tc := range []struct {
		name                 string
		onDisk               []int64
		ra                   int
		off, n               int64
		want                 string // GETs of the read (and its read-ahead)
		diskHits, diskMisses float64
		files                int64 // chunks 0..files-1 on disk afterwards
	}{
		{"nothing on disk", nil, -1, 0, 800, "0-7", 0, 8, 8},
		{"chunks on disk split the run", []int64{2, 5}, -1, 0, 800, "0-1 3-4 6-7", 2, 6, 8},
		{"first chunk on disk", []int64{0}, -1, 0, 800, "1-7", 1, 7, 8},
		{"last chunk on disk", []int64{7}, -1, 0, 800, "0-6", 1, 7, 8},
		{"only the ends missing", []int64{1, 2, 3, 4, 5, 6}, -1, 0, 800, "0 7", 6, 2, 8},
		{"everything on disk", []int64{0, 1, 2, 3, 4, 5, 6, 7}, -1, 0, 800, "none", 8, 0, 8},
		{"read-ahead run split by disk", []int64{2}, 4, 0, 100, "0 1 3-4", 0, 1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := objstore.NewMemory()
			want := putObject(t, store, "seg", size)
			opts := func(ra int) CacheOptions {
				return CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: ra,
					MaxInFlightBytes: 32 * chunk, CacheDir: dir, DiskBytes: 1 << 20, MaxWait: 10 * time.Second}
			}
			warm := mustCache(t, store, opts(-1))
			for _, i := range tc.onDisk {
				readAll(t, warm, "seg", i*chunk, 1)
			}
			assertIdle(t, warm) // disk writes done: their weight is back
			if err := warm.Close(); err != nil {
				t.Fatal(err)
			}

			inner := newCounting(store)
			c := mustCache(t, inner, opts(tc.ra))
			before := countersOf(c)
			if got := readAll(t, c, "seg", tc.off, tc.n); !bytes.Equal(got, expectRange(want, tc.off, tc.n)) {
				t.Fatal("wrong bytes")
			}
			assertIdle(t, c)
			if s := spans(inner.takeRanges(), chunk); s != tc.want {
				t.Fatalf("GETs %s, want %s", s, tc.want)
			}
			d := countersOf(c).minus(before)
			if d.diskHits != tc.diskHits || d.diskMisses != tc.diskMisses {
				t.Fatalf("disk hits %v misses %v, want %v and %v", d.diskHits, d.diskMisses, tc.diskHits, tc.diskMisses)
			}
			a, _ := c.attrs.Get("seg")
			for i := range int64(tc.files) {
				if !c.disk.has(chunkKey{"seg", objectVersion(a), i}) {
					t.Fatalf("chunk %d not on disk", i)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			// The files hold the right bytes: a new cache reads them all
			// without a GET.
			again := newCounting(store)
			c2 := mustCache(t, again, opts(-1))
			if got := readAll(t, c2, "seg", 0, tc.files*chunk); !bytes.Equal(got, want[:tc.files*chunk]) {
				t.Fatal("wrong bytes from the disk tier")
			}
			if s := spans(again.takeRanges(), chunk); s != "none" {
				t.Fatalf("GETs %s after a restart, want none", s)
			}
			assertIdle(t, c2)
		})
	}
}

// failingBodies makes the store's range GETs fail while armed: at open
// (after < 0) or after `after` bytes of the body, with err (io.EOF: the
// body just ends short).
type failingBodies struct {
	objstore.BucketReader
	after int64
	err   error
	armed atomic.Int64 // GETs still to fail; < 0: every one
}

func (b *failingBodies) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	fail := false
	for {
		n := b.armed.Load()
		if n == 0 {
			break
		}
		if n < 0 || b.armed.CompareAndSwap(n, n-1) {
			fail = true
			break
		}
	}
	if !fail {
		return b.BucketReader.GetRange(ctx, key, off, length)
	}
	if b.after < 0 {
		return nil, fmt.Errorf("get range %q: %w", key, b.err)
	}
	rc, err := b.BucketReader.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return &failAfter{ReadCloser: rc, left: b.after, err: b.err}, nil
}

type failAfter struct {
	io.ReadCloser
	left int64
	err  error
}

func (r *failAfter) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, r.err
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= int64(n)
	return n, err
}

var errReset = errors.New("connection reset by peer")

// TestLoadRunFailsMidBody: a run's GET fails at open or part-way through
// its body. The chunks delivered before the failure stay valid and cached,
// the rest of the run fail (a client that joined one of them gets the same
// error) and are not cached, and every weight comes back. A short body
// (the size the cache had is wrong, or the connection was cut) makes
// GetRange learn the size again and retry once; the error keeps its cause.
func TestLoadRunFailsMidBody(t *testing.T) {
	const chunk, size = 100, 800
	for _, tc := range []struct {
		name    string
		after   int64 // bytes delivered before the failure; < 0: at open
		err     error
		armed   int64 // failing GETs; -1: all
		faulty  bool  // use objstore's fault wrapper (truncation) instead
		joined  bool  // a second client joins chunk 5 and must fail alike
		wantErr error // nil: the read succeeds
		kept    int64 // chunks 0..kept-1 cached afterwards
		gets    string
		attrs   int // Attributes calls
		reread  string
	}{
		{"open fails", -1, errReset, 1, false, true, errReset, 0, "0-7", 1, "0-7"},
		{"fails in chunk 2", 250, errReset, 1, false, true, errReset, 2, "0-7", 1, "2-7"},
		{"fails at the chunk 3 boundary", 300, errReset, 1, false, true, errReset, 3, "0-7", 1, "3-7"},
		{"fails in the last chunk", 799, errReset, 1, false, true, errReset, 7, "0-7", 1, "7"},
		{"short body once is retried", 250, io.EOF, 1, false, false, nil, 8, "0-7 2-7", 2, "none"},
		{"short body always", 250, io.EOF, -1, false, false, io.ErrUnexpectedEOF, 4, "0-7 2-7", 2, "4-7"},
		{"truncated body keeps its cause", 250, nil, -1, true, false, objstore.ErrInjected, 4, "0-7 2-7", 2, "4-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			want := putObject(t, store, "seg", size)
			var under objstore.BucketReader
			var disarm func()
			if tc.faulty {
				var on atomic.Bool
				on.Store(true)
				under = objstore.WithFaults(store, objstore.TruncateReads(func(objstore.Call) bool { return on.Load() }, tc.after))
				disarm = func() { on.Store(false) }
			} else {
				fb := &failingBodies{BucketReader: store, after: tc.after, err: tc.err}
				fb.armed.Store(tc.armed)
				under = fb
				disarm = func() { fb.armed.Store(0) }
			}
			inner := newCounting(under)
			c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: -1,
				MaxInFlightBytes: 32 * chunk, MaxWait: 10 * time.Second})
			before := countersOf(c)

			inner.holdGets()
			a := goRead(c, context.Background(), "seg", 0, size)
			waitFor(t, "the run's GET", func() bool { return inner.started.Load() == 1 })
			var b chan result
			if tc.joined {
				var five atomic.Bool
				c.testHook = func(k chunkKey) {
					if k.index == 5 {
						five.Store(true)
					}
				}
				b = goRead(c, context.Background(), "seg", 550, 30)
				waitFor(t, "the second client to join chunk 5", five.Load)
			}
			inner.release()
			ra := await(t, a, "read of the run")
			if tc.wantErr == nil {
				if ra.err != nil || !bytes.Equal(ra.data, want) {
					t.Fatalf("read: %v (%d bytes), want the object", ra.err, len(ra.data))
				}
			} else if !errors.Is(ra.err, tc.wantErr) {
				t.Fatalf("read error %v, want one wrapping %v", ra.err, tc.wantErr)
			}
			if tc.joined {
				rb := await(t, b, "joined read")
				if tc.kept > 5 {
					if rb.err != nil || !bytes.Equal(rb.data, want[550:580]) {
						t.Fatalf("joined read of a delivered chunk: %v, %d bytes; want the object's [550, 580)", rb.err, len(rb.data))
					}
				} else if !errors.Is(rb.err, tc.wantErr) {
					t.Fatalf("joined read error %v, want one wrapping %v", rb.err, tc.wantErr)
				}
			}
			assertIdle(t, c)
			calls := inner.takeRanges()
			if s := spans(calls, chunk); s != tc.gets {
				t.Fatalf("GETs %s, want %s", s, tc.gets)
			}
			if inner.attrs != tc.attrs {
				t.Fatalf("%d Attributes calls, want %d", inner.attrs, tc.attrs)
			}
			opened := len(calls)
			if tc.after < 0 {
				opened = 0
			}
			if d := countersOf(c).minus(before); d.storeGets != float64(opened) {
				t.Fatalf("store GETs counted %v, want %d", d.storeGets, opened)
			}
			attrs, _ := c.attrs.Get("seg")
			for i := range int64(size / chunk) {
				if got := c.mem.contains(chunkKey{"seg", objectVersion(attrs), i}); got != (i < tc.kept) {
					t.Fatalf("chunk %d cached: %v, want %v (chunks before the failure only)", i, got, i < tc.kept)
				}
			}

			// The store recovers: the chunks kept are served from memory,
			// only the others are fetched, and the bytes are right.
			disarm()
			if got := readAll(t, c, "seg", 0, size); !bytes.Equal(got, want) {
				t.Fatal("wrong bytes after the failure")
			}
			assertIdle(t, c)
			if s := spans(inner.takeRanges(), chunk); s != tc.reread {
				t.Fatalf("GETs of the reread %s, want %s", s, tc.reread)
			}
		})
	}
}

// TestClientJoinsSkippedReadAhead: a client that joined the flights of a
// read-ahead run which then gave up (gates full, errReadAheadSkipped)
// loads those chunks itself, and as a run: one GET for the chunks of the
// skipped run, not one GET per chunk one after the other.
func TestClientJoinsSkippedReadAhead(t *testing.T) {
	const chunk, size = 100, 1000
	for _, tc := range []struct {
		name     string
		gate     string // the gate read-ahead finds full
		raFirst  int64  // read-ahead run: chunks raFirst..raLast
		raLast   int64
		off, n   int64
		want     string
		misses   float64 // memory misses of the client read (counted once)
		cachedRA []int64 // chunks cached before the read-ahead claims
	}{
		{"skipped on bytes, same range", gate.Bytes, 2, 5, 200, 400, "2-5", 4, nil},
		{"skipped on gets, same range", gate.Gets, 2, 5, 200, 400, "2-5", 4, nil},
		{"skipped run inside a wider read", gate.Gets, 2, 5, 100, 600, "1 2-5 6", 6, nil},
		{"read ends inside the skipped run", gate.Bytes, 2, 7, 0, 450, "0-1 2-4", 5, nil},
		{"skipped runs around a cached chunk", gate.Gets, 2, 6, 200, 500, "2-3 5-6", 4, []int64{4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			want := putObject(t, store, "seg", size)
			inner := newCounting(store)
			c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: -1,
				MaxInFlightBytes: 32 * chunk, MaxWait: 10 * time.Second})
			ctx := context.Background()
			a, err := c.objectAttrs(ctx, "seg", time.Now().Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range tc.cachedRA {
				readAll(t, c, "seg", i*chunk, 1)
			}
			assertIdle(t, c)
			inner.takeRanges()
			before := countersOf(c)

			// Read-ahead claims its runs as readAheadChunks does.
			runs, _, _ := c.claim("seg", objectVersion(a), tc.raFirst, tc.raLast, false, false)
			var joined atomic.Bool
			c.testHook = func(chunkKey) { joined.Store(true) }
			r := goRead(c, ctx, "seg", tc.off, tc.n)
			waitFor(t, "the client to wait", joined.Load) // its claim is done
			// The read-ahead finds its gate full and gives up.
			g := c.gets
			if tc.gate == gate.Bytes {
				g = c.bytes
			}
			if err := g.Start(ctx, g.Capacity()); err != nil {
				t.Fatal(err)
			}
			for _, run := range runs {
				c.load(run, size, time.Time{}, true)
				for _, f := range run.flights {
					if !errors.Is(f.err, errReadAheadSkipped) {
						t.Fatalf("read-ahead flight ended with %v, want skipped", f.err)
					}
				}
			}
			g.Done(g.Capacity())

			res := await(t, r, "client read")
			if res.err != nil || !bytes.Equal(res.data, expectRange(want, tc.off, tc.n)) {
				t.Fatalf("client read: %v, %d bytes; want %d bytes of the object", res.err, len(res.data), len(expectRange(want, tc.off, tc.n)))
			}
			assertIdle(t, c)
			if s := spans(inner.takeRanges(), chunk); s != tc.want {
				t.Fatalf("GETs %s, want %s", s, tc.want)
			}
			if d := countersOf(c).minus(before); d.memMisses != tc.misses {
				t.Fatalf("memory misses %v, want %v (each chunk once)", d.memMisses, tc.misses)
			}
		})
	}
}

// stallingBodies delivers `after` bytes of each range GET's body, then
// blocks until released or the GET's ctx ends (as an HTTP body does when
// its request is cancelled).
type stallingBodies struct {
	objstore.BucketReader
	after   int64
	release chan struct{}
}

func (b *stallingBodies) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := b.BucketReader.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return &stallAfter{ReadCloser: rc, left: b.after, release: b.release, ctx: ctx}, nil
}

type stallAfter struct {
	io.ReadCloser
	left    int64
	release chan struct{}
	ctx     context.Context
}

func (r *stallAfter) Read(p []byte) (int, error) {
	if r.left <= 0 {
		select {
		case <-r.release:
			return r.ReadCloser.Read(p)
		case <-r.ctx.Done():
			return 0, fmt.Errorf("read body: %w", r.ctx.Err())
		}
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= int64(n)
	return n, err
}

// TestRunHandsOutChunksAsTheyArrive: while a run's GET is still in its
// body, a client of a chunk already received is answered (and the chunk
// cached) without waiting for the rest of the run, and the chunks received
// no longer hold the in-flight budget.
func TestRunHandsOutChunksAsTheyArrive(t *testing.T) {
	const chunk, size = 100, 800
	for _, tc := range []struct {
		name   string
		off, n int64
		stalls bool // the read waits for the stalled part of the body
	}{
		{"first chunk", 0, 100, false},
		{"first two chunks", 30, 150, false},
		{"chunk being received", 150, 100, true},
		{"last chunk", 700, 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			want := putObject(t, store, "seg", size)
			sb := &stallingBodies{BucketReader: store, after: 250, release: make(chan struct{})}
			inner := newCounting(sb)
			c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: -1,
				MaxInFlightBytes: 32 * chunk, MaxWait: 10 * time.Second})
			a := goRead(c, context.Background(), "seg", 0, size)
			attrs, _ := c.objectAttrs(context.Background(), "seg", time.Now().Add(time.Second))
			// Chunks 0 and 1 arrive; the body stalls in chunk 2.
			waitFor(t, "chunk 1 to be cached", func() bool { return c.mem.contains(chunkKey{"seg", objectVersion(attrs), 1}) })
			// The chunks received are the memory tier's: the in-flight
			// budget holds only the run's other six.
			waitFor(t, "the bytes gate to hold the 6 chunks not received", func() bool { return c.bytes.InFlight() == size-2*chunk })
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			b := goRead(c, ctx, "seg", tc.off, tc.n)
			res := await(t, b, "second read")
			if tc.stalls {
				if !errors.Is(res.err, context.DeadlineExceeded) {
					t.Fatalf("read of a chunk not received yet: %v, want its deadline", res.err)
				}
			} else if res.err != nil || !bytes.Equal(res.data, want[tc.off:tc.off+tc.n]) {
				t.Fatalf("read of received chunks: %v, %d bytes; want its %d bytes without waiting for the run", res.err, len(res.data), tc.n)
			}
			close(sb.release)
			if res := await(t, a, "run read"); res.err != nil || !bytes.Equal(res.data, want) {
				t.Fatalf("run read: %v, %d bytes; want the object's %d", res.err, len(res.data), size)
			}
			assertIdle(t, c)
			if s := spans(inner.takeRanges(), chunk); s != "0-7" {
				t.Fatalf("GETs %s, want the one run", s)
			}
		})
	}
}

// TestCloseDuringLoads: Close while clients wait on loads (GETs held at
// open, or stalled part-way through a run's body, read-ahead running,
// disk writes queued) returns, every client is answered, the gates are
// back to zero and later reads fail with ErrClosed.
func TestCloseDuringLoads(t *testing.T) {
	const chunk, size = 100, 3000
	for _, tc := range []struct {
		name  string
		stall bool // bodies stall after 250 bytes; else GETs are held at open
		disk  bool
	}{
		{"GETs held", false, false},
		{"GETs held, disk tier", false, true},
		{"bodies stalled mid-run", true, false},
		{"bodies stalled mid-run, disk tier", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			objs := map[string][]byte{"seg": putObject(t, store, "seg", size), "other": putObject(t, store, "other", size)}
			var under objstore.BucketReader = store
			if tc.stall {
				under = &stallingBodies{BucketReader: store, after: 250, release: make(chan struct{})}
			}
			inner := newCounting(under)
			o := CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: 4,
				MaxInFlightBytes: 16 * chunk, MaxWait: 10 * time.Second}
			if tc.disk {
				o.CacheDir, o.DiskBytes = t.TempDir(), 1<<20
			}
			c, err := NewCachingBucket(inner, o)
			if err != nil {
				t.Fatal(err)
			}
			// Learn the sizes first, so every client reaches the loads.
			for _, k := range []string{"seg", "other"} {
				if _, err := c.objectAttrs(context.Background(), k, time.Now().Add(time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.stall {
				inner.holdGets()
			}
			var reads []chan result
			var offs []int64
			var keys []string
			for i := range int64(12) {
				off := (i % 6) * 400 // overlapping ranges: clients join loads
				key := "seg"
				if i >= 10 {
					key = "other"
				}
				reads = append(reads, goRead(c, context.Background(), key, off, 450))
				offs = append(offs, off)
				keys = append(keys, key)
			}
			waitFor(t, "loads in the store", func() bool { return inner.started.Load() >= 2 })
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return")
			}
			for i, r := range reads {
				res := await(t, r, fmt.Sprint("read ", i))
				// Answered with an error or with the right bytes.
				if want := objs[keys[i]][offs[i] : offs[i]+450]; res.err == nil && !bytes.Equal(res.data, want) {
					t.Fatalf("read %d (%s at %d) returned %d wrong bytes, want the object's %d", i, keys[i], offs[i], len(res.data), len(want))
				}
			}
			if b, g, l := c.bytes.InFlight(), c.gets.InFlight(), c.loading(); b != 0 || g != 0 || l != 0 {
				t.Fatalf("after Close: bytes %d, gets %d, flights %d; want 0", b, g, l)
			}
			if _, err := c.GetRange(context.Background(), "seg", 0, 1); !errors.Is(err, ErrClosed) {
				t.Fatalf("after Close: %v, want ErrClosed", err)
			}
			inner.release()
		})
	}
}

// TestHintSizeFallback: a size hint (a RemoteLog's manifest size) saves
// the Attributes call; a hint longer than the object is found out by the
// short GET and the read is answered by the object's real size (one
// Attributes call, the objstore contract kept: empty at the end,
// ErrInvalidRange past it); a hint shorter than the object is trusted: no
// GET goes past it. Gates return to zero whatever the outcome, read-ahead
// included; a hint never replaces attributes already cached.
func TestHintSizeFallback(t *testing.T) {
	const chunk = 100
	for _, tc := range []struct {
		name       string
		size, hint int64 // hint < 0: none
		off, n     int64
		ra         int
		visible    int64 // the size the read is answered by
		wantErr    error
		attrs      int
	}{
		{"no hint", 1000, -1, 150, 600, -1, 1000, nil, 1},
		{"exact", 1000, 1000, 0, -1, -1, 1000, nil, 0},
		{"exact, read inside the object", 1000, 1000, 150, 600, -1, 1000, nil, 0},
		{"exact, read from inside to the end", 1000, 1000, 900, -1, -1, 1000, nil, 0},
		{"longer, read crosses an aligned end", 1000, 1300, 900, 300, -1, 1000, nil, 1},
		{"longer, read inside the object", 950, 1300, 100, 200, -1, 950, nil, 0},
		{"longer, read crosses the end", 950, 1300, 900, 300, -1, 950, nil, 1},
		{"longer, read to the end", 950, 1300, 0, -1, -1, 950, nil, 1},
		{"longer, read at the end", 950, 1300, 950, -1, -1, 950, nil, 1},
		{"longer, read at an aligned end", 1000, 1300, 1000, 50, -1, 1000, nil, 1},
		{"longer, read past the end", 950, 1300, 1100, 10, -1, 950, objstore.ErrInvalidRange, 0},
		{"longer, with read-ahead", 950, 1300, 0, 300, 4, 950, nil, 0},
		{"longer, read-ahead past the end", 950, 1300, 0, 900, 4, 950, nil, 0},
		{"shorter, read inside the hint", 1000, 800, 100, 200, -1, 800, nil, 0},
		{"shorter, read to the end of the hint", 1000, 850, 0, -1, 4, 850, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			obj := putObject(t, store, "seg", tc.size)
			inner := newCounting(store)
			c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: tc.ra,
				MaxInFlightBytes: 32 * chunk, MaxWait: 10 * time.Second})
			c.HintSize("seg", tc.hint) // a negative hint is ignored
			got, err := readRange(context.Background(), c, "seg", tc.off, tc.n)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("read: %v, want %v", err, tc.wantErr)
				}
			} else if err != nil || !bytes.Equal(got, expectRange(obj[:tc.visible], tc.off, tc.n)) {
				t.Fatalf("read: %v, %d bytes; want %d bytes of the object", err, len(got), len(expectRange(obj[:tc.visible], tc.off, tc.n)))
			}
			assertIdle(t, c)
			if inner.attrs != tc.attrs {
				t.Fatalf("%d Attributes calls, want %d", inner.attrs, tc.attrs)
			}
			bound := tc.hint
			if bound < 0 {
				bound = tc.size
			}
			for _, call := range inner.takeRanges() {
				if end := call.off + call.size; end > bound {
					t.Fatalf("GET [%d, %d) past the size %d (hinted or learnt)", call.off, end, bound)
				}
			}
			if tc.attrs > 0 {
				// The real size replaced the hint; a second read is served
				// by it without another Attributes call.
				if a, _ := c.attrs.Get("seg"); a.Size != tc.size {
					t.Fatalf("size %d after the fallback, want %d", a.Size, tc.size)
				}
				if got := readAll(t, c, "seg", 0, -1); !bytes.Equal(got, obj) {
					t.Fatal("wrong bytes after the fallback")
				}
				assertIdle(t, c)
				if inner.attrs != tc.attrs {
					t.Fatalf("%d Attributes calls after a second read, want %d", inner.attrs, tc.attrs)
				}
			}
			// Cached attributes (hinted or learnt) stay: a later, wrong
			// hint changes nothing.
			before, ok := c.attrs.Get("seg")
			if !ok {
				t.Fatal("no attributes cached after the read, want the hinted or learnt size")
			}
			c.HintSize("seg", tc.size+500)
			if a, _ := c.attrs.Get("seg"); a.Size != before.Size {
				t.Fatalf("cached size %d after a later hint of %d, want %d kept", a.Size, tc.size+500, before.Size)
			}
		})
	}
}

// TestHintSizeLongerConcurrent: readers racing on an object hinted longer
// than it is all get its bytes.
func TestHintSizeLongerConcurrent(t *testing.T) {
	store := objstore.NewMemory()
	obj := putObject(t, store, "seg", 950)
	inner := newCounting(store)
	inner.delay = 200 * time.Microsecond
	c := mustCache(t, inner, CacheOptions{ChunkBytes: 100, MemoryBytes: 1 << 20, ReadAheadChunks: 2,
		MaxInFlightBytes: 3200, MaxWait: 10 * time.Second})
	c.HintSize("seg", 1300)
	var reads []chan result
	for i := range int64(16) {
		reads = append(reads, goRead(c, context.Background(), "seg", (i%4)*250, -1))
	}
	for i, r := range reads {
		res := await(t, r, "read")
		if off := int64(i%4) * 250; res.err != nil || !bytes.Equal(res.data, obj[off:]) {
			t.Fatalf("read %d from %d: %v, %d bytes; want the object's %d from there", i, off, res.err, len(res.data), len(obj[off:]))
		}
	}
	assertIdle(t, c)
}

// TestLoadsFetchEachChunkOnce: concurrent sequential readers and their
// read-ahead over a few objects, with a memory tier holding everything:
// every chunk is fetched at most once (runs never overlap), every read
// returns the object's bytes, the memory tier and the GETs stay within
// their bounds, and the gates end at zero. Small gates make read-ahead
// give up often, so clients load chunks whose read-ahead was skipped.
func TestLoadsFetchEachChunkOnce(t *testing.T) {
	const chunk = 100
	for _, tc := range []struct {
		name     string
		inflight int64 // chunks
		gets     int
		disk     bool
	}{
		{"roomy gates", 32, 16, false},
		{"roomy gates, disk tier", 32, 16, true},
		{"small gates", 3, 2, false},
		{"small gates, disk tier", 3, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			objs := map[string][]byte{}
			var total int64
			for i := range 3 {
				k := fmt.Sprintf("seg-%d", i)
				objs[k] = putObject(t, store, k, int64(2500+i*333))
				total += int64(len(objs[k]))
			}
			inner := newCounting(store)
			inner.delay = 100 * time.Microsecond
			o := CacheOptions{ChunkBytes: chunk, MemoryBytes: total, ReadAheadChunks: 4,
				MaxInFlightBytes: tc.inflight * chunk, MaxConcurrentGets: tc.gets, MaxWait: 20 * time.Second}
			if tc.disk {
				o.CacheDir, o.DiskBytes = t.TempDir(), 1<<20
			}
			c := mustCache(t, inner, o)
			// Each reader scans 6 times from a random point to an object's end.
			randomReaders(8, 6, 11, objs, func(_ int, rng *rand.Rand, k string, data []byte) bool {
				off := rng.Int64N(int64(len(data)) / 2)
				for off < int64(len(data)) && !t.Failed() {
					n := 20 + rng.Int64N(180)
					got, err := readRange(context.Background(), c, k, off, n)
					if err != nil || !bytes.Equal(got, expectRange(data, off, n)) {
						t.Errorf("%s [%d,+%d): %v, %d bytes; want %d bytes of the object", k, off, n, err, len(got), len(expectRange(data, off, n)))
						return false
					}
					off += n
				}
				return true
			})
			assertIdle(t, c)
			eachChunkOnce(t, inner.takeRanges(), chunk)
			if m := inner.maxBytes.Load(); m > o.MaxInFlightBytes {
				t.Fatalf("%d bytes of GETs in flight, budget %d", m, o.MaxInFlightBytes)
			}
			if m := inner.maxGets.Load(); m > int64(o.MaxConcurrentGets) {
				t.Fatalf("%d GETs in flight, limit %d", m, o.MaxConcurrentGets)
			}
			if s := c.mem.size(); s > o.MemoryBytes {
				t.Fatalf("memory tier holds %d, bound %d", s, o.MemoryBytes)
			}
		})
	}
}

// TestLoadsSurviveFaults: readers with short deadlines over a store that
// fails GETs at open, mid-body and with short bodies, with small gates,
// read-ahead and (optionally) the disk tier. Whatever fails, the gates and
// flights end at zero, the memory and in-flight bounds hold, nothing
// wrong is cached (once the store behaves every read is exact), and Close
// leaves the gates at zero. With parking, bodies parked and continued
// under the same faults serve exact bytes too.
func TestLoadsSurviveFaults(t *testing.T) {
	const chunk = 100
	for _, tc := range []struct {
		name         string
		disk, parked bool
	}{
		{"memory", false, false},
		{"disk tier", true, false},
		{"memory, parked GETs", false, true},
		{"disk tier, parked GETs", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			objs := map[string][]byte{}
			for i := range 3 {
				k := fmt.Sprintf("seg-%d", i)
				objs[k] = putObject(t, store, k, int64(2000+i*417))
			}
			rf := &randomFaults{BucketReader: store}
			rf.on.Store(true)
			inner := newCounting(rf)
			o := CacheOptions{ChunkBytes: chunk, MemoryBytes: 1500, ReadAheadChunks: 3,
				MaxInFlightBytes: 8 * chunk, MaxConcurrentGets: 3, MaxWait: 30 * time.Millisecond}
			if tc.disk {
				o.CacheDir, o.DiskBytes = t.TempDir(), 3000
			}
			if tc.parked {
				o.ParkedGets = 4
			}
			c := mustCache(t, inner, o)
			stopSampling := sampleViolations(func() bool {
				return c.mem.size() > o.MemoryBytes || c.bytes.InFlight() < 0 || c.gets.InFlight() < 0
			})
			var ok, failed atomic.Int64
			randomReaders(6, 80, 5, objs, func(_ int, rng *rand.Rand, k string, data []byte) bool {
				off := rng.Int64N(int64(len(data)))
				n := rng.Int64N(500)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rng.IntN(20))*time.Millisecond)
				got, err := readRange(ctx, c, k, off, n)
				cancel()
				if err != nil {
					failed.Add(1)
					return true
				}
				ok.Add(1)
				if !bytes.Equal(got, expectRange(data, off, n)) {
					t.Errorf("%s [%d,+%d): %d bytes, want %d bytes of the object", k, off, n, len(got), len(expectRange(data, off, n)))
					return false
				}
				return true
			})
			over := stopSampling()
			t.Logf("%d reads served, %d failed", ok.Load(), failed.Load())
			// Both outcomes must occur, or the faults (or the check of the
			// bytes served under them) were never exercised.
			if ok.Load() == 0 || failed.Load() == 0 {
				t.Fatalf("%d reads served, %d failed; want some of each", ok.Load(), failed.Load())
			}
			assertIdle(t, c)
			if over > 0 {
				t.Fatalf("bounds broken in %d samples, want none", over)
			}
			// (With the disk tier most reads are served from disk and a
			// run may never find a parked body; without it they do.)
			if n := testutil.ToFloat64(c.m.continued); tc.parked && !tc.disk && n == 0 {
				t.Fatal("no run continued a parked body: parking not exercised")
			}
			// (A parked GET asks for the object to its end: the bytes
			// asked of the store are not what the budget bounds.)
			if m := inner.maxBytes.Load(); m > o.MaxInFlightBytes && !tc.parked {
				t.Fatalf("%d bytes of GETs in flight, budget %d", m, o.MaxInFlightBytes)
			}
			// Nothing wrong was cached: with the store behaving, every
			// chunk reads back right (a read refused by the short wait
			// bound is retried; a leaked gate would refuse them all).
			rf.on.Store(false)
			for k, data := range objs {
				for off := int64(0); off < int64(len(data)); off += chunk {
					var got []byte
					var err error
					for try := 0; try < 50; try++ {
						if got, err = readRange(context.Background(), c, k, off, chunk); !errors.Is(err, gate.ErrOverloaded) {
							break
						}
					}
					if err != nil || !bytes.Equal(got, expectRange(data, off, chunk)) {
						t.Fatalf("%s [%d,+%d) after the faults: %v (%d bytes)", k, off, chunk, err, len(got))
					}
				}
			}
			assertIdle(t, c)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if b, g := c.bytes.InFlight(), c.gets.InFlight(); b != 0 || g != 0 {
				t.Fatalf("after Close: bytes %d, gets %d; want 0 each", b, g)
			}
		})
	}
}

// randomFaults fails about a third of the range GETs (while on): at open,
// part-way with an error, with a short body, or slowly.
type randomFaults struct {
	objstore.BucketReader
	on  atomic.Bool
	mu  sync.Mutex
	rng *rand.Rand
}

func (b *randomFaults) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if !b.on.Load() {
		return b.BucketReader.GetRange(ctx, key, off, length)
	}
	b.mu.Lock()
	if b.rng == nil {
		b.rng = rand.New(rand.NewPCG(3, 3))
	}
	kind, at := b.rng.IntN(9), b.rng.Int64N(max(length, 1))
	b.mu.Unlock()
	switch kind {
	case 0:
		return nil, fmt.Errorf("get range %q: %w", key, errReset)
	case 1, 2:
		rc, err := b.BucketReader.GetRange(ctx, key, off, length)
		if err != nil {
			return nil, err
		}
		e := error(errReset)
		if kind == 2 {
			e = io.EOF
		}
		return &failAfter{ReadCloser: rc, left: at, err: e}, nil
	case 3:
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.BucketReader.GetRange(ctx, key, off, length)
}

// TestReadAheadRuns: a sequential stream refills its read-ahead window in
// runs (one GET for the missing chunks of the window, once the first half
// of the window has a gap); a chunk read ahead counts as useful when a
// client reads it and as wasted when it is evicted unread, including a
// chunk a later refill found still unread.
func TestReadAheadRuns(t *testing.T) {
	const chunk, size = 100, 2000
	type read struct{ off, n int64 }
	for _, tc := range []struct {
		name           string
		ra             int
		reads          []read
		want           string // GETs of all the reads and their read-ahead
		useful, wasted float64
	}{
		{"stream stops after its first read", 4, []read{{0, 100}}, "0 1-4", 0, 4},
		{"refill past unread chunks", 4, []read{{0, 100}, {100, 100}, {200, 100}, {300, 100}}, "0 1-4 5-7", 3, 4},
		{"reads every chunk read ahead", 4, []read{{0, 100}, {100, 100}, {200, 100}, {300, 100}, {400, 100}}, "0 1-4 5-7", 4, 3},
		{"reads of several chunks", 4, []read{{0, 250}, {250, 250}}, "0-2 3-6", 2, 2},
		{"a jump is not a stream", 4, []read{{500, 100}, {900, 100}}, "5 9", 0, 0},
		{"window of one chunk", 1, []read{{0, 100}, {100, 100}, {200, 100}}, "0 1 2 3", 2, 1},
		{"window clipped at the end", 4, []read{{1700, 100}, {1800, 100}}, "17 18 19", 0, 1},
		{"disabled", -1, []read{{0, 100}, {100, 100}}, "0 1", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			want := putObject(t, store, "seg", size)
			putObject(t, store, "other", 2000)
			inner := newCounting(store)
			c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 1000, ReadAheadChunks: tc.ra,
				MaxInFlightBytes: 32 * chunk, MaxWait: 10 * time.Second})
			for _, r := range tc.reads {
				if got := readAll(t, c, "seg", r.off, r.n); !bytes.Equal(got, want[r.off:r.off+r.n]) {
					t.Fatalf("read [%d,+%d): wrong bytes", r.off, r.n)
				}
				assertIdle(t, c)
			}
			if s := spans(inner.takeRanges(), chunk); s != tc.want {
				t.Fatalf("GETs %s, want %s", s, tc.want)
			}
			// Push every chunk of seg out (no stream: not chunk 0).
			readAll(t, c, "other", 100, 1000)
			assertIdle(t, c)
			u := testutil.ToFloat64(c.m.readAhead.WithLabelValues(ReadAheadUseful))
			w := testutil.ToFloat64(c.m.readAhead.WithLabelValues(ReadAheadWasted))
			if u != tc.useful || w != tc.wasted {
				t.Fatalf("read-ahead useful %v wasted %v, want %v and %v", u, w, tc.useful, tc.wasted)
			}
		})
	}
}

// TestLoadsAfterClose: whatever claims flights once Close has begun (a
// client read, read-ahead, a client taking over a skipped read-ahead)
// settles them with ErrClosed: nobody waits forever, no flight stays in
// the table and no request reaches the store.
func TestLoadsAfterClose(t *testing.T) {
	const chunk, size = 100, 1000
	for _, tc := range []struct {
		name string
		// run acts after Close and returns what its caller is answered;
		// read-ahead answers nobody (nil).
		run     func(c *CachingBucket, ver string) error
		wantErr error
	}{
		{"client read", func(c *CachingBucket, ver string) error {
			_, err := c.acquire(context.Background(), "seg", ver, size, 0, 5, chunkLen(5, c.o.ChunkBytes, size), time.Now().Add(time.Second), true, false)
			return err
		}, ErrClosed},
		{"read-ahead", func(c *CachingBucket, ver string) error {
			c.readAheadChunks("seg", ver, size, 2, 9)
			return nil
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			putObject(t, store, "seg", size)
			inner := newCounting(store)
			c, err := NewCachingBucket(inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: 4})
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.objectAttrs(context.Background(), "seg", time.Now().Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- tc.run(c, objectVersion(a)) }()
			select {
			case err := <-done:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no answer after Close")
			}
			if l, b, g := c.loading(), c.bytes.InFlight(), c.gets.InFlight(); l != 0 || b != 0 || g != 0 {
				t.Fatalf("after Close: flights %d, bytes %d, gets %d; want 0 each", l, b, g)
			}
			if calls := inner.takeRanges(); len(calls) != 0 || inner.attrs != 1 {
				t.Fatalf("after Close: GETs %v and %d Attributes calls in all; want none and 1 (before Close)", calls, inner.attrs)
			}
		})
	}

	// A client waiting on a read-ahead run that gives up after Close
	// cannot start its own load: it gets ErrClosed.
	t.Run("client takes over a skipped read-ahead", func(t *testing.T) {
		store := objstore.NewMemory()
		putObject(t, store, "seg", size)
		c, err := NewCachingBucket(store, CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: -1})
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.objectAttrs(context.Background(), "seg", time.Now().Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		runs, _, _ := c.claim("seg", objectVersion(a), 2, 5, false, false)
		var joined atomic.Bool
		c.testHook = func(chunkKey) { joined.Store(true) }
		r := goRead(c, context.Background(), "seg", 200, 400)
		waitFor(t, "the client to wait", joined.Load)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.bytes.Start(context.Background(), c.bytes.Capacity()); err != nil {
			t.Fatal(err)
		}
		for _, run := range runs {
			c.load(run, size, time.Time{}, true)
		}
		c.bytes.Done(c.bytes.Capacity())
		if res := await(t, r, "client read"); !errors.Is(res.err, ErrClosed) {
			t.Fatalf("client read after Close: %v, want ErrClosed", res.err)
		}
		if l, b, g := c.loading(), c.bytes.InFlight(), c.gets.InFlight(); l != 0 || b != 0 || g != 0 {
			t.Fatalf("after Close: flights %d, bytes %d, gets %d; want 0 each", l, b, g)
		}
	})
}

// TestSettleRunEndsLastFirst: when the flights of a run fail together
// (read-ahead skipped, a GET failing part-way, Close), a waiter woken by
// the first of them already finds the later ones ended with the same
// error and gone from the table, so what it claims next starts fresh
// loads instead of joining flights about to fail (a client taking over a
// skipped read-ahead run would otherwise load it one chunk at a time;
// GetRange's retry of a short body would fail again). The waiter spins on
// another core to catch the flights in between.
func TestSettleRunEndsLastFirst(t *testing.T) {
	for _, tc := range []struct {
		name        string
		chunks      int64
		from        int // chunks before from were delivered
		err         error
		repetitions int
	}{
		{"whole run skipped", 8, 0, errReadAheadSkipped, 300},
		{"rest of a run after a failed body", 8, 3, io.ErrUnexpectedEOF, 300},
		{"last chunk", 8, 7, ErrClosed, 100},
		{"run of one", 1, 0, ErrClosed, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCache(t, objstore.NewMemory(), CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, MaxInFlightBytes: 3200})
			stop := time.Now().Add(time.Second)
			for n := 0; n < tc.repetitions && time.Now().Before(stop); n++ {
				runs, _, _ := c.claim("seg", "v", 0, tc.chunks-1, false, false)
				if len(runs) != 1 {
					t.Fatalf("%d runs, want 1", len(runs))
				}
				r := runs[0]
				for i := range tc.from {
					c.settle(r, i, []byte{1}, nil)
				}
				ready, seen := make(chan struct{}), make(chan string)
				go func() {
					close(ready)
					f := r.flights[tc.from]
					for {
						select {
						case <-f.done:
						default:
							continue
						}
						break
					}
					c.fmu.Lock()
					inTable := len(c.flights)
					c.fmu.Unlock()
					for i, f := range r.flights[tc.from:] {
						select {
						case <-f.done:
							if !errors.Is(f.err, tc.err) {
								seen <- fmt.Sprintf("chunk %d ended with %v", tc.from+i, f.err)
								return
							}
						default:
							seen <- fmt.Sprintf("chunk %d still loading when chunk %d failed", tc.from+i, tc.from)
							return
						}
					}
					if inTable != 0 {
						seen <- fmt.Sprintf("%d flights still in the table when chunk %d failed", inTable, tc.from)
						return
					}
					seen <- ""
				}()
				<-ready
				c.settleRun(r, tc.from, tc.err)
				if msg := <-seen; msg != "" {
					t.Fatalf("repetition %d: %s", n, msg)
				}
				for i := range tc.from {
					if r.flights[i].err != nil || r.flights[i].data == nil {
						t.Fatalf("delivered chunk %d changed: error %v, %d bytes; want no error and its bytes", i, r.flights[i].err, len(r.flights[i].data))
					}
				}
			}
		})
	}
}

// TestGetSlotFreeWhenAnswered: a client answered by the last chunk of a
// GET finds that GET's slot in the gets gate free again, so its next
// request does not wait behind its own finished GET (with
// MaxConcurrentGets 1 it would otherwise count a gate wait, or be
// refused). Earlier chunks of a run are still handed out as they arrive.
func TestGetSlotFreeWhenAnswered(t *testing.T) {
	const chunk = 100
	for _, tc := range []struct {
		name   string
		chunks int64 // per read (one run, one GET)
		disk   bool
	}{
		{"one chunk", 1, false},
		{"run of four", 4, false},
		{"one chunk, disk tier", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const reads = 150
			store := objstore.NewMemory()
			want := putObject(t, store, "seg", reads*tc.chunks*chunk)
			inner := newCounting(store)
			o := CacheOptions{ChunkBytes: chunk, MemoryBytes: 1 << 20, ReadAheadChunks: -1, MaxConcurrentGets: 1,
				MaxInFlightBytes: 32 * chunk, MaxWait: 10 * time.Second}
			if tc.disk {
				o.CacheDir, o.DiskBytes = t.TempDir(), 1<<20
			}
			c := mustCache(t, inner, o)
			if _, err := c.objectAttrs(context.Background(), "seg", time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			for n := range int64(reads) {
				off, length := n*tc.chunks*chunk, tc.chunks*chunk
				if got := readAll(t, c, "seg", off, length); !bytes.Equal(got, want[off:off+length]) {
					t.Fatalf("read %d: wrong bytes", n)
				}
				if g := c.gets.InFlight(); g != 0 {
					t.Fatalf("read %d answered with its GET still holding the gets gate (%d)", n, g)
				}
			}
			if w := testutil.ToFloat64(c.gets.Series().Waits); w != 0 {
				t.Fatalf("%v waits on the gets gate by one sequential reader, want 0", w)
			}
			assertIdle(t, c)
			if calls := inner.takeRanges(); len(calls) != reads {
				t.Fatalf("%d GETs, want %d", len(calls), reads)
			}
		})
	}
}

// TestJoinerKeepsItsOwnWait: a client that joins another client's load
// waits for the gates until its own deadline (MaxWait after its own call
// began), not the deadline of the client that claimed the load: the
// claimer's overload is not the joiner's answer while its own wait lasts.
func TestJoinerKeepsItsOwnWait(t *testing.T) {
	store := objstore.NewMemory()
	want := putObject(t, store, "k", 500)
	const wait = 300 * time.Millisecond
	c := mustCache(t, store, CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, ReadAheadChunks: -1,
		MaxInFlightBytes: 100, MaxWait: wait})
	if _, err := c.objectAttrs(context.Background(), "k", time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// The whole bytes budget is taken: the first client's load waits.
	if err := c.bytes.Start(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.GetRange(context.Background(), "k", 0, 50)
		first <- err
	}()
	for c.loading() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(wait * 2 / 3)
	second := make(chan error, 1)
	var got []byte
	var took time.Duration
	go func() {
		began := time.Now()
		rc, err := c.GetRange(context.Background(), "k", 10, 20)
		took = time.Since(began)
		if err == nil {
			got, err = io.ReadAll(rc)
		}
		second <- err
	}()
	if err := <-first; !errors.Is(err, gate.ErrOverloaded) {
		t.Fatalf("first caller: %v, want overloaded", err)
	}
	// The budget frees up within the second caller's own wait.
	time.Sleep(time.Until(start.Add(wait * 7 / 6)))
	c.bytesDone(100)
	if err := <-second; err != nil {
		t.Fatalf("second caller failed after %v of its %v wait: %v", took, wait, err)
	}
	if !bytes.Equal(got, want[10:30]) {
		t.Fatal("second caller got wrong bytes")
	}
}

// TestAttrsJoinerKeepsItsOwnWait: a client that joins another client's
// Attributes call for an object's size waits for the gets gate until its
// own deadline, not the deadline of the client that made the call.
func TestAttrsJoinerKeepsItsOwnWait(t *testing.T) {
	store := objstore.NewMemory()
	want := putObject(t, store, "k", 500)
	inner := newCounting(store)
	const wait = 300 * time.Millisecond
	c := mustCache(t, inner, CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, ReadAheadChunks: -1,
		MaxConcurrentGets: 1, MaxWait: wait})
	// The only GET slot is taken: the first client's Attributes call waits.
	if err := c.gets.Start(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.GetRange(context.Background(), "k", 0, 50)
		first <- err
	}()
	time.Sleep(wait * 2 / 3)
	second := make(chan error, 1)
	var got []byte
	var took time.Duration
	go func() {
		began := time.Now()
		rc, err := c.GetRange(context.Background(), "k", 10, 20)
		took = time.Since(began)
		if err == nil {
			got, err = io.ReadAll(rc)
		}
		second <- err
	}()
	if err := <-first; !errors.Is(err, gate.ErrOverloaded) {
		t.Fatalf("first caller: %v, want overloaded", err)
	}
	// The slot frees up within the second caller's own wait.
	time.Sleep(time.Until(start.Add(wait * 7 / 6)))
	c.getDone()
	if err := <-second; err != nil {
		t.Fatalf("second caller failed after %v of its %v wait: %v", took, wait, err)
	}
	if !bytes.Equal(got, want[10:30]) {
		t.Fatal("second caller got wrong bytes")
	}
}
