package chunkcache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tiered/tiered/remotetier/objstore"
)

// replayStream reads the objects in order, one chunk a read, as a
// RemoteLog's sequential reader does: each read marked as reading ahead
// itself, then a stream read-ahead request for the depth chunks after it,
// across object boundaries. It checks every byte and returns the GETs the
// store saw.
func replayStream(t *testing.T, c *CachingBucket, inner *countingBucket, objects map[string][]byte, order []string, depth int64) []rangeCall {
	t.Helper()
	cs := c.o.ChunkBytes
	ctx := objstore.WithCallerReadAhead(context.Background())
	for oi, key := range order {
		data := objects[key]
		size := int64(len(data))
		for off := int64(0); off < size; off += cs {
			got, err := readRange(ctx, c, key, off, cs)
			if err != nil || !bytes.Equal(got, expectRange(data, off, cs)) {
				t.Fatalf("%s at %d: %v, %d bytes; want the object's", key, off, err, len(got))
			}
			// The window: the rest of this object, then the next ones.
			var win []objstore.Range
			left := depth * cs
			from := off + cs
			for _, k := range order[oi:] {
				n := int64(len(objects[k]))
				if from < n && left > 0 {
					l := min(n-from, left)
					win = append(win, objstore.Range{Key: k, Off: from, Len: l, Size: n})
					left -= l
				}
				from = 0
			}
			c.ReadAhead(1, win)
			waitIdle(t, c)
		}
	}
	return inner.takeRanges()
}

// TestParkedOneGETPerObject: a stream whose read-ahead claims one chunk at
// a time (a deep replay's share) reads each object with one GET: the first
// read-ahead run asks for the object to its end, and every later run of
// the object continues that body. Without parking the same replay costs a
// GET per chunk.
func TestParkedOneGETPerObject(t *testing.T) {
	const chunk = 100
	sizes := map[string]int64{"seg-0": 12 * chunk, "seg-1": 9*chunk + 37, "seg-2": 5 * chunk}
	order := []string{"seg-0", "seg-1", "seg-2"}
	for _, tc := range []struct {
		name   string
		parked int
	}{{"parked", 4}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			store := objstore.NewMemory()
			objects := map[string][]byte{}
			for _, k := range order {
				objects[k] = putObject(t, store, k, sizes[k])
			}
			inner := newCounting(store)
			// Depth 2 chunks (memory 4 chunks, one stream), share 1 chunk.
			c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 4 * chunk,
				MaxInFlightBytes: chunk, MaxConcurrentGets: 4, ParkedGets: tc.parked, StreamIdle: time.Hour})
			for _, k := range order {
				c.HintSize(k, sizes[k])
			}
			calls := replayStream(t, c, inner, objects, order, 2)
			gets := map[string]int{}
			for _, r := range calls {
				gets[r.key]++
			}
			var chunks int
			for _, k := range order {
				n := int((sizes[k] + chunk - 1) / chunk)
				chunks += n
				switch {
				case tc.parked > 0:
					// The stream's first read (it reads ahead itself: a
					// GET to the end) or its read-ahead from the
					// object's first byte, then continued: one GET.
					if gets[k] != 1 {
						t.Errorf("%s: %d GETs %v, want 1", k, gets[k], calls)
					}
				default:
					if gets[k] != n {
						t.Errorf("%s without parking: %d GETs, want one per chunk (%d)", k, gets[k], n)
					}
				}
			}
			continued := testutil.ToFloat64(c.m.continued)
			if tc.parked > 0 && int(continued)+len(calls) != chunks {
				t.Errorf("%v continued runs and %d GETs, want one or the other for each of %d chunks", continued, len(calls), chunks)
			}
			if tc.parked < 0 && continued != 0 {
				t.Errorf("parking off: %v runs continued, want 0", continued)
			}
			// The last object's body was read to its end: nothing stays parked.
			if n := c.park.len(); n != 0 {
				t.Errorf("%d bodies parked after the replay, want 0", n)
			}
		})
	}
}

// closeCounter counts Close calls of the bodies it hands out.
type closeCounter struct {
	objstore.BucketReader
	opened, closed atomic.Int64
	mu             sync.Mutex
	// fails names bodies by the order they were opened (from 1): their
	// reads fail after the first.
	fails map[int64]bool
}

func (b *closeCounter) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := b.BucketReader.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	n := b.opened.Add(1)
	b.mu.Lock()
	fail := b.fails[n]
	b.mu.Unlock()
	return &countedBody{ReadCloser: rc, b: b, fail: fail}, nil
}

type countedBody struct {
	io.ReadCloser
	b      *closeCounter
	fail   bool
	reads  int
	closed bool
}

func (r *countedBody) Read(p []byte) (int, error) {
	r.reads++
	if r.fail && r.reads > 1 {
		return 0, errors.New("connection reset by peer")
	}
	return r.ReadCloser.Read(p)
}

func (r *countedBody) Close() error {
	if !r.closed {
		r.closed = true
		r.b.closed.Add(1)
	}
	return r.ReadCloser.Close()
}

// TestParkedBodiesClosed: parked bodies are closed when idle past
// StreamIdle, when the parking is full (the oldest first), and at Close,
// so none leaks a connection.
func TestParkedBodiesClosed(t *testing.T) {
	const chunk = 100
	store := objstore.NewMemory()
	for _, k := range []string{"a", "b", "c"} {
		putObject(t, store, k, 10*chunk)
	}
	inner := &closeCounter{BucketReader: store}
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 30 * chunk,
		MaxInFlightBytes: chunk, ParkedGets: 2, StreamIdle: 1500 * time.Millisecond})
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	c.park.mu.Lock() // the sweeper reads it
	c.park.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c.park.mu.Unlock()
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// One read-ahead run of chunk 0 of each object, a second apart: each
	// parks the rest.
	for i, k := range []string{"a", "b", "c"} {
		if i > 0 {
			advance(time.Second)
		}
		c.ReadAhead(uint64(i+1), []objstore.Range{{Key: k, Off: 0, Len: chunk, Size: 10 * chunk}})
		waitIdle(t, c)
	}
	if o, cl, p := inner.opened.Load(), inner.closed.Load(), c.park.len(); o != 3 || cl != 1 || p != 2 {
		t.Fatalf("after 3 runs with room for 2: %d opened, %d closed, %d parked; want 3, 1, 2", o, cl, p)
	}
	c.park.mu.Lock()
	for k := range c.park.m {
		if k.object == "a" || k.off != chunk {
			t.Errorf("parked at %s %d, want b's and c's bodies at their chunk 1 (a's, the oldest, closed)", k.object, k.off)
		}
	}
	c.park.mu.Unlock()
	// Idle past StreamIdle: b's goes (parked 2 s ago), c's (1 s) stays.
	advance(time.Second)
	c.park.sweep(false)
	if cl, p := inner.closed.Load(), c.park.len(); cl != 2 || p != 1 {
		t.Fatalf("after the sweep: %d closed, %d parked; want 2, 1", cl, p)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if cl, p := inner.closed.Load(), c.park.len(); cl != 3 || p != 0 {
		t.Fatalf("after Close: %d of 3 bodies closed, %d parked; want all closed", cl, p)
	}
	if n := testutil.ToFloat64(c.m.parkedUnused); n != 3 {
		t.Fatalf("%v parked bodies counted closed unused, want 3", n)
	}
}

// TestParkedBrokenBodyRetried: a parked body the store gave up on (its
// reads fail) is closed and the run it was to serve reads with a GET of
// its own: the reader gets the right bytes and no error.
func TestParkedBrokenBodyRetried(t *testing.T) {
	const chunk = 100
	store := objstore.NewMemory()
	data := putObject(t, store, "seg", 6*chunk)
	// Open 1 is the stream's first read, a GET to the end, whose reads
	// fail once it is parked.
	inner := &closeCounter{BucketReader: store, fails: map[int64]bool{1: true}}
	counting := newCounting(inner)
	c := mustCache(t, counting, CacheOptions{ChunkBytes: chunk, MemoryBytes: 4 * chunk,
		MaxInFlightBytes: chunk, MaxConcurrentGets: 4, ParkedGets: 4, StreamIdle: time.Hour})
	c.HintSize("seg", 6*chunk)
	// The failing body delivers its first read (chunk 0, one Read of the
	// memory store) and then fails: the run of chunk 1 retries.
	calls := replayStream(t, c, counting, map[string][]byte{"seg": data}, []string{"seg"}, 2)
	// The first read's GET to the end (chunk 0 read, then parked and
	// broken), and the retry from chunk 1, whose body the later runs
	// continue.
	want := []rangeCall{{"seg", 0, 6 * chunk}, {"seg", chunk, 5 * chunk}}
	if !slices.Equal(calls, want) {
		t.Fatalf("GETs %v, want %v", calls, want)
	}
	if n := testutil.ToFloat64(c.m.continued); n != 4 {
		t.Fatalf("%v runs continued a parked body, want 4 (chunks 2 to 5; chunk 1's failed)", n)
	}
	if o, cl := inner.opened.Load(), inner.closed.Load(); o != cl {
		t.Fatalf("%d bodies opened, %d closed", o, cl)
	}
}
