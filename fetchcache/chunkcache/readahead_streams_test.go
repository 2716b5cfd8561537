package chunkcache

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
)

// inFlightByObject counts the GETs of each object that reached the store
// and are held there (holdGets), waiting until total of them are.
func inFlightByObject(t *testing.T, inner *countingBucket, total int64) map[string]int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for inner.started.Load() < total {
		if time.Now().After(deadline) {
			t.Fatalf("%d GETs reached the store, want %d", inner.started.Load(), total)
		}
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(20 * time.Millisecond) // no more come
	out := map[string]int{}
	for _, r := range inner.takeRanges() {
		out[r.key] += int(r.size / 100)
	}
	inner.started.Store(0)
	return out
}

// waitSettled waits until only the held GETs' chunks are loading: the
// read-ahead that found the gates full has let go of its claims (its
// window is held, to be tried again as capacity frees up).
func waitSettled(t *testing.T, c *CachingBucket) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.loading() > int(c.bytes.InFlight()/c.o.ChunkBytes) {
		if time.Now().After(deadline) {
			t.Fatalf("%d chunks loading, %d bytes in flight", c.loading(), c.bytes.InFlight())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// eightStreamCache is a cache whose in-flight budget is 8 chunks of 100
// bytes (a share of one chunk each among eight streams), over objects
// seg0..seg<n-1> of 16 chunks, with room in memory for mem times 9 of them.
func eightStreamCache(t *testing.T, n, mem int64) (*countingBucket, *CachingBucket, []string) {
	t.Helper()
	const chunk, objChunks = 100, 16
	store := objstore.NewMemory()
	var keys []string
	for i := range n {
		k := fmt.Sprintf("seg%d", i)
		putObject(t, store, k, chunk*objChunks)
		keys = append(keys, k)
	}
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: mem * 9 * objChunks * chunk,
		MaxInFlightBytes: 8 * chunk, MaxConcurrentGets: 64, StreamIdle: time.Hour})
	return inner, c, keys
}

// TestReadAheadSharedFairly: streams asking for read-ahead share the
// in-flight budget. A stream alone may take all of it; the seven that ask
// while it is full get nothing at once, but hold their windows, and as the
// first one's loads end the capacity goes to them (the least covered
// first: TestHeldReadAheadLeastCoveredFirst), until every window is
// loaded, each chunk once. Once the others go idle the one left has the
// budget again.
func TestReadAheadSharedFairly(t *testing.T) {
	const chunk, objChunks, streams = 100, 16, 8
	inner, c, keys := eightStreamCache(t, streams+1, 2)
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	c.streams.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	window := func(i int, from int64) []objstore.Range {
		return []objstore.Range{{Key: keys[i], Off: from * chunk, Len: (objChunks - from) * chunk, Size: objChunks * chunk}}
	}

	// One stream alone takes the whole budget.
	inner.holdGets()
	c.ReadAhead(1, window(0, 0))
	got := inFlightByObject(t, inner, 8) // the share cut into 8 GETs
	if got[keys[0]] != streams || len(got) != 1 {
		t.Fatalf("alone, stream 1 loads %v, want %d chunks of %s", got, streams, keys[0])
	}
	for i := 1; i < streams; i++ {
		// The bytes gate is full: held back, and said so (nothing covered).
		if got := c.ReadAhead(uint64(i+1), window(i, 0)); got != 0 {
			t.Fatalf("stream %d: %d bytes covered with the budget full", i+1, got)
		}
	}
	waitSettled(t, c)
	if n := inner.started.Load(); n != 0 {
		t.Fatalf("%d GETs past a full budget", n)
	}
	inner.release()
	waitIdle(t, c)
	perObject := map[string]int64{keys[0]: streams}
	for _, r := range inner.takeRanges() {
		perObject[r.key] += r.size / chunk
	}
	for _, k := range keys[:streams] {
		if perObject[k] != objChunks {
			t.Fatalf("loaded %v chunks per object, want each window's %d once", perObject, objChunks)
		}
	}

	// The others idle: stream 1 has the budget again.
	c.streams.idle = time.Second
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	inner.started.Store(0)
	inner.holdGets()
	c.ReadAhead(1, window(streams, 0))
	got = inFlightByObject(t, inner, streams)
	if got[keys[streams]] != streams || len(got) != 1 {
		t.Fatalf("alone again: %v, want %d chunks of %s", got, streams, keys[streams])
	}
	inner.release()
	waitIdle(t, c)
	for i := range objChunks {
		if !c.mem.contains(chunkKey{keys[streams], objectVersion(objstore.Attrs{Size: objChunks * chunk}), int64(i)}) {
			t.Fatalf("chunk %d of %s not cached after its read-ahead", i, keys[streams])
		}
	}
}

// TestReadAheadWindowCut: a stream's window is cut at its share of the
// memory tier, so many streams' read-ahead does not evict itself.
func TestReadAheadWindowCut(t *testing.T) {
	store := objstore.NewMemory()
	const chunk = 100
	putObject(t, store, "a", 40*chunk)
	putObject(t, store, "b", 40*chunk)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 20 * chunk, MaxInFlightBytes: 40 * chunk})
	// Alone: half the memory tier, 10 chunks, across the two objects.
	c.ReadAhead(7, []objstore.Range{{Key: "a", Off: 35 * chunk, Len: 5 * chunk, Size: 40 * chunk}, {Key: "b", Off: 0, Len: 40 * chunk, Size: 40 * chunk}})
	waitIdle(t, c)
	n := 0
	for _, r := range inner.takeRanges() {
		n += int(r.size / chunk)
	}
	if n != 10 {
		t.Fatalf("read ahead %d chunks, want 10 (half of the memory tier)", n)
	}
}

// TestCallerReadAheadSkipsObjectReadAhead: a range read marked by a
// caller that reads ahead itself starts no read-ahead of its own.
func TestCallerReadAheadSkipsObjectReadAhead(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ctx   context.Context
		ahead bool
	}{
		{"unmarked_reads_ahead", context.Background(), true},
		{"marked_does_not", objstore.WithCallerReadAhead(context.Background()), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := objstore.NewMemory()
			putObject(t, store, "a", 1000)
			inner := newCounting(store)
			c := mustCache(t, inner, CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, MaxInFlightBytes: 1000})
			rc, err := c.GetRange(tt.ctx, "a", 0, 50)
			if err != nil {
				t.Fatal(err)
			}
			rc.Close()
			waitIdle(t, c)
			if got := len(inner.takeRanges()); (got > 1) != tt.ahead {
				t.Fatalf("%d GETs for a read of one chunk; read ahead: %v", got, tt.ahead)
			}
		})
	}
}

// TestReadAheadRunChunks: a stream's share is loaded by about eight GETs
// at once (the store's parallelism), in runs of at least one chunk and at
// most maxRunChunks (a quarter of the budget, at most 8).
func TestReadAheadRunChunks(t *testing.T) {
	const chunk = 100
	for _, tt := range []struct {
		name           string
		budget, share  int64 // in chunks
		want, maxChunk int
	}{
		{"lone_stream_default_budget", 16, 16, 2, 4},
		{"share_of_one_chunk", 16, 1, 1, 4},
		{"share_of_eight_streams", 16, 2, 1, 4},
		{"large_share_capped_by_the_run_limit", 256, 256, 8, 8},
		{"share_below_a_chunk", 16, 0, 1, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCache(t, newCounting(objstore.NewMemory()), CacheOptions{ChunkBytes: chunk, MemoryBytes: 1000, MaxInFlightBytes: tt.budget * chunk})
			if c.maxRunChunks() != tt.maxChunk {
				t.Fatalf("maxRunChunks %d, want %d", c.maxRunChunks(), tt.maxChunk)
			}
			if got := c.aheadRunChunks(tt.share * chunk); got != tt.want {
				t.Fatalf("runs of %d chunks, want %d", got, tt.want)
			}
		})
	}
}

// TestReadAheadWholeRuns: a window that moves on by less than a run per
// read loads in whole runs: a short run at the window's far end waits for
// the window to cover it whole, instead of each chunk loading by itself as
// it enters the window; one at its near end (the reader is about to need
// it) and one at an object's end load at once, and an object one GET can
// load is loaded by one.
func TestReadAheadWholeRuns(t *testing.T) {
	store := objstore.NewMemory()
	const chunk, chunks = 100, 20
	putObject(t, store, "a", chunks*chunk)
	putObject(t, store, "b", 3*chunk)
	inner := newCounting(store)
	// 16 chunks in flight: runs of 2 chunks (aheadRunChunks).
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 100 * chunk, MaxInFlightBytes: 16 * chunk})
	win := func(from, n int64) []objstore.Range {
		return []objstore.Range{{Key: "a", Off: from, Len: n, Size: chunks * chunk}}
	}
	var sizes []int64
	take := func() {
		waitIdle(t, c)
		for _, r := range inner.takeRanges() {
			sizes = append(sizes, r.size/chunk)
		}
	}
	for read := int64(0); read < 10; read++ {
		// A reader of 60 bytes a read, with a window of 5 chunks: what is
		// covered ends where the runs left out begin.
		covered := c.ReadAhead(1, win(read*60, 5*chunk))
		if end := read*60 + covered; (end%(2*chunk) != 0 && end != read*60+5*chunk) || end < read*60+3*chunk {
			t.Fatalf("read %d: the window from %d covered up to %d, want its end or a whole run's, 3 chunks on or more", read, read*60, end)
		}
		take()
	}
	// All cached: the whole window is covered.
	if got := c.ReadAhead(1, win(0, 3*chunk+50)); got != 3*chunk+50 {
		t.Fatalf("a cached window: %d bytes covered, want %d", got, 3*chunk+50)
	}
	for i, n := range sizes {
		if n != 2 {
			t.Fatalf("GET %d of %v loads %d chunks, want whole runs of 2", i, sizes, n)
		}
	}
	// Near the window's start, and at an object's end, a short run loads.
	sizes = nil
	c.ReadAhead(1, []objstore.Range{{Key: "a", Off: 19 * chunk, Len: chunk, Size: chunks * chunk}, {Key: "b", Off: 0, Len: 3 * chunk, Size: 3 * chunk}})
	take()
	// b is short enough for one GET (maxRunChunks): it loads whole.
	if !slices.Equal(sizes, []int64{1, 3}) {
		t.Fatalf("GETs of %v chunks, want a's last chunk and b's 3 chunks in one GET", sizes)
	}
}

// TestStreamsActive: the streams counted as active are those seen within
// StreamIdle; idle ones with nothing in flight are forgotten, and a stream
// seen again after going idle counts again; past the bound a new stream is
// not tracked.
func TestStreamsActive(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newRAStreams(time.Second, 3)
	s.now = func() time.Time { return now }
	count := func(id uint64) int {
		t.Helper()
		_, n := s.touch(id)
		return n
	}
	steps := []struct {
		advance time.Duration
		stream  uint64
		want    int
	}{
		{0, 1, 1}, {0, 2, 2}, {0, 1, 2}, {0, 3, 3},
		{2 * time.Second, 1, 1},        // 2 and 3 idle: swept away
		{0, 2, 2},                      // back
		{100 * time.Millisecond, 4, 3}, // a new one
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		if got := count(st.stream); got != st.want {
			t.Fatalf("step %d (stream %d): %d active, want %d", i, st.stream, got, st.want)
		}
	}
	if st, _ := s.touch(5); st != nil {
		t.Fatal("a fourth stream past the bound of 3 was tracked")
	}
	// One in flight is kept while idle.
	a, _ := s.touch(1)
	s.take(a, 10, 100)
	now = now.Add(time.Minute)
	count(9)
	if _, ok := s.m[1]; !ok {
		t.Fatal("an idle stream with read-ahead in flight was forgotten")
	}
}

// TestReadAheadCoversWhatItAdmits: the bytes a stream's read-ahead says it
// covered are those loading or cached: with two GETs free, a window over
// five one-chunk objects covers the first two, and the other three are not
// left claimed. They are held back, not given up: as the two GETs end, the
// freed capacity loads them without another request, each chunk once.
func TestReadAheadCoversWhatItAdmits(t *testing.T) {
	store := objstore.NewMemory()
	const chunk = 100
	window := oneChunkWindow(t, store, "seg", 5, chunk)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 100 * chunk, MaxInFlightBytes: 16 * chunk, MaxConcurrentGets: 2})
	inner.holdGets()
	if got := c.ReadAhead(1, window); got != 2*chunk {
		t.Fatalf("covered %d bytes with 2 GETs free, want %d", got, 2*chunk)
	}
	if n := c.loading(); n != 2 {
		t.Fatalf("%d chunks loading, want 2", n)
	}
	inner.release()
	waitIdle(t, c)
	if got := c.ReadAhead(1, window); got != 5*chunk {
		t.Fatalf("after the first GETs ended, covered %d bytes, want all %d", got, 5*chunk)
	}
	if got := inner.started.Load(); got != 5 {
		t.Fatalf("%d GETs, want 5 (one per chunk)", got)
	}
}

// oneChunkWindow puts n objects prefix0.. of size bytes (one chunk each)
// and returns a window over them, in order.
func oneChunkWindow(t *testing.T, store *objstore.Memory, prefix string, n int, size int64) []objstore.Range {
	t.Helper()
	var window []objstore.Range
	for i := range n {
		k := fmt.Sprintf("%s%d", prefix, i)
		putObject(t, store, k, size)
		window = append(window, objstore.Range{Key: k, Off: 0, Len: size, Size: size})
	}
	return window
}

// callOrder is the keys of the GETs that reached the store, in call order.
func (b *countingBucket) callOrder() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []string
	for _, r := range b.ranges {
		keys = append(keys, r.key)
	}
	return keys
}

// oneGetCache is a cache of one concurrent GET whose store holds GETs
// (holdGets), and a window per count of one-chunk objects: "a0".., "b0"..
func oneGetCache(t *testing.T, chunk int64, counts ...int) (*countingBucket, *CachingBucket, [][]objstore.Range) {
	store := objstore.NewMemory()
	var windows [][]objstore.Range
	for i, n := range counts {
		windows = append(windows, oneChunkWindow(t, store, string(rune('a'+i)), n, chunk))
	}
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: 100 * chunk, MaxInFlightBytes: 16 * chunk, MaxConcurrentGets: 1})
	inner.holdGets()
	return inner, c, windows
}

// TestHeldReadAheadLeastCoveredFirst: capacity freed by a load goes to the
// held-back stream that has the least covered, not to the one that got
// there first: with one GET, stream 1 has a0 loading and a1.. held, stream
// 2 nothing; when a0 ends, b0 loads next.
func TestHeldReadAheadLeastCoveredFirst(t *testing.T) {
	const chunk = 100
	inner, c, w := oneGetCache(t, chunk, 3, 3)
	a, b := w[0], w[1]
	if got := c.ReadAhead(1, a); got != chunk {
		t.Fatalf("stream 1 covered %d, want %d", got, chunk)
	}
	if got := c.ReadAhead(2, b); got != 0 {
		t.Fatalf("stream 2 covered %d with no GET free, want 0", got)
	}
	inner.release()
	waitIdle(t, c)
	got := inner.callOrder()
	if len(got) != 6 || got[0] != "a0" || got[1] != "b0" {
		t.Fatalf("GETs in order %v, want a0 then b0 (the stream with less covered), 6 in all", got)
	}
}

// TestHeldReadAheadFollowsTheReader: a window held back is replaced by the
// stream's next one (its reader has moved on), and forgotten once the
// stream is idle past StreamIdle: neither is loaded after that.
func TestHeldReadAheadFollowsTheReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		next bool // the reader asks for another window
		idle bool // the stream goes idle
		want []string
	}{
		{"replaced", true, false, []string{"a0", "b0", "b1"}},
		{"idle", false, true, []string{"a0"}},
		{"kept", false, false, []string{"a0", "a1", "a2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, c, w := oneGetCache(t, 100, 3, 2)
			a, cw := w[0], w[1]
			c.ReadAhead(1, a)
			if tc.next {
				c.ReadAhead(1, cw)
			}
			if tc.idle {
				now := time.Now().Add(2 * DefaultStreamIdle)
				c.streams.mu.Lock()
				c.streams.now = func() time.Time { return now }
				c.streams.mu.Unlock()
			}
			inner.release()
			waitIdle(t, c)
			got := inner.callOrder()
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("GETs %v, want %v", got, tc.want)
			}
			if c.streams.anyHeld.Load() {
				t.Fatal("a window is still held after it was all loaded or dropped")
			}
		})
	}
}

// TestReadAheadDiskTier: a stream's read-ahead of chunks the disk tier
// holds promotes them without a GET, and gives back the GET slot it was
// admitted with; chunks it does not hold come from the store.
func TestReadAheadDiskTier(t *testing.T) {
	store := objstore.NewMemory()
	const chunk = 100
	putObject(t, store, "a", 8*chunk)
	inner := newCounting(store)
	dir := t.TempDir()
	o := CacheOptions{ChunkBytes: chunk, MemoryBytes: 100 * chunk, MaxInFlightBytes: 16 * chunk, CacheDir: dir, DiskBytes: 100 * chunk,
		ReadAheadChunks: -1}
	c := mustCache(t, inner, o)
	readAll(t, c, "a", 0, 4*chunk) // chunks 0-3 reach the disk tier
	waitIdle(t, c)
	c.Close()
	inner.takeRanges()

	o.ReadAheadChunks = 4
	c = mustCache(t, inner, o) // memory empty, disk holding what was read
	attrs, err := store.Attributes(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ver := objectVersion(attrs)
	// The stream's read learns the same version (not only the size hint).
	if _, err := c.objectAttrs(context.Background(), "a", time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	onDisk := 0
	for i := range 8 {
		if c.disk.has(chunkKey{"a", ver, int64(i)}) {
			onDisk++
		}
	}
	if onDisk == 0 || onDisk == 8 {
		t.Fatalf("%d of 8 chunks on disk: the test would not tell", onDisk)
	}
	got := c.ReadAhead(1, []objstore.Range{{Key: "a", Off: 0, Len: 8 * chunk, Size: 8 * chunk}})
	waitIdle(t, c) // also: every gate back at 0
	if got != 8*chunk {
		t.Fatalf("covered %d bytes, want %d", got, 8*chunk)
	}
	var fetched int64
	for _, r := range inner.takeRanges() {
		fetched += r.size / chunk
	}
	if fetched != int64(8-onDisk) {
		t.Fatalf("%d chunks from the store, want the %d not on disk", fetched, 8-onDisk)
	}
	for i := range 8 {
		if !c.mem.contains(chunkKey{"a", ver, int64(i)}) {
			t.Fatalf("chunk %d not in memory after read-ahead", i)
		}
	}
}

// TestHeldReadAheadEightStreamsOneChunkEach: eight streams asking at once,
// each with a window past its share, hold one chunk each in flight (the
// share of a budget of eight chunks), the first no more than the last.
func TestHeldReadAheadEightStreamsOneChunkEach(t *testing.T) {
	const chunk, objChunks, streams = 100, 16, 8
	inner, c, keys := eightStreamCache(t, 2*streams, 4)
	window := func(i int) []objstore.Range {
		return []objstore.Range{{Key: keys[i], Off: 0, Len: objChunks * chunk, Size: objChunks * chunk}}
	}
	for i := range streams { // all eight active
		c.ReadAhead(uint64(i+1), window(i))
	}
	waitIdle(t, c)
	inner.takeRanges()
	inner.started.Store(0)
	inner.holdGets()
	for i := range streams {
		c.ReadAhead(uint64(i+1), window(streams+i))
	}
	got := inFlightByObject(t, inner, streams)
	for i := range streams {
		if got[keys[streams+i]] != 1 {
			t.Fatalf("stream %d: %d chunks in flight (all %v), want 1", i+1, got[keys[streams+i]], got)
		}
	}
	inner.release()
	waitIdle(t, c)
}

// TestHeldReadAheadDiskTier: a held window is loaded once the bytes a
// chunk kept on its way to the disk tier are freed by the disk writer
// (slow here), not only when a GET ends.
func TestHeldReadAheadDiskTier(t *testing.T) {
	store := objstore.NewMemory()
	a := oneChunkWindow(t, store, "a", 1, 100)
	b := oneChunkWindow(t, store, "b", 1, 100)
	inner := newCounting(store)
	slow := vfs.NewErrorFS(vfs.Default, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpCreate {
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}))
	c := mustCache(t, inner, CacheOptions{ChunkBytes: 100, MemoryBytes: 100 * 100, MaxInFlightBytes: 100, MaxConcurrentGets: 8,
		CacheDir: t.TempDir(), DiskBytes: 1 << 20, FS: slow})
	inner.holdGets()
	if got := c.ReadAhead(1, a); got != 100 {
		t.Fatalf("stream 1 covered %d, want its one chunk", got)
	}
	if got := c.ReadAhead(2, b); got != 0 {
		t.Fatalf("stream 2 covered %d with the budget full, want 0", got)
	}
	inner.release()
	waitFor(t, "b0 to be loaded after a0's disk write", func() bool { return len(inner.callOrder()) == 2 })
	waitIdle(t, c)
}
