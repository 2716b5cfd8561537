package chunkcache

import (
	"math"
	"strconv"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// chunkKey names one aligned chunk of one version of an object. Data
// objects are immutable (a unique key per upload attempt) and the version
// (ETag, or size when the store gives none) guards against a reused key.
type chunkKey struct {
	object  string
	version string
	index   int64
}

// String is the short form used by the test scripts: object#index.
func (k chunkKey) String() string { return k.object + "#" + strconv.FormatInt(k.index, 10) }

// memEntry is a cached chunk. data is never modified once cached, so
// readers share it without copying.
type memEntry struct {
	data []byte
	// readAhead is set while the chunk was brought in by read-ahead and no
	// client has read it yet; it decides useful vs wasted.
	readAhead bool
}

// memoryTier is the byte-bounded LRU of chunks in memory. The LRU itself is
// unbounded in entries; the bound is enforced here on the sum of chunk
// lengths, evicting oldest first.
type memoryTier struct {
	mu    sync.Mutex
	lru   *simplelru.LRU[chunkKey, *memEntry]
	bytes int64
	max   int64
	m     *cacheMetrics
	// pressure shrinks the bound (CacheOptions.MemoryPressure); nil none.
	pressure func() int64
}

func newMemoryTier(max int64, m *cacheMetrics) *memoryTier {
	l, err := simplelru.NewLRU[chunkKey, *memEntry](math.MaxInt, nil)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	return &memoryTier{lru: l, max: max, m: m}
}

// get returns the chunk for a client read and makes it most recently used;
// a read-ahead chunk read this way counts as useful.
func (t *memoryTier) get(k chunkKey) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.lru.Get(k)
	if !ok {
		return nil, false
	}
	t.readLocked(e)
	return e.data, true
}

// readLocked settles a read-ahead entry a client read as useful (once).
func (t *memoryTier) readLocked(e *memEntry) {
	if e.readAhead {
		e.readAhead = false
		t.m.readAhead.WithLabelValues(ReadAheadUseful).Inc()
	}
}

// getAll returns the chunks ks for a client read if every one is present,
// as get does for each, all under one lock: none is evicted between the
// check and the read. It returns nil, touching nothing, if any is missing.
func (t *memoryTier) getAll(ks []chunkKey) [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range ks {
		if !t.lru.Contains(k) {
			return nil
		}
	}
	out := make([][]byte, len(ks))
	for i, k := range ks {
		e, _ := t.lru.Get(k)
		t.readLocked(e)
		out[i] = e.data
	}
	return out
}

// touch makes k most recently used, if present.
func (t *memoryTier) touch(k chunkKey) {
	t.mu.Lock()
	t.lru.Get(k)
	t.mu.Unlock()
}

// contains reports presence without touching the LRU order.
func (t *memoryTier) contains(k chunkKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Contains(k)
}

// markRead records that a client read k (obtained from a shared load
// rather than a hit), settling a read-ahead entry as useful.
func (t *memoryTier) markRead(k chunkKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.lru.Peek(k); ok {
		t.readLocked(e)
	}
}

// add caches data under k as most recently used and evicts the oldest
// chunks until the byte bound holds. A chunk larger than the bound is not
// kept. Adding a present key only refreshes its position.
func (t *memoryTier) add(k chunkKey, data []byte, readAhead bool) {
	n := int64(len(data))
	if n > t.max {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lru.Contains(k) {
		t.lru.Get(k)
		return
	}
	t.lru.Add(k, &memEntry{data: data, readAhead: readAhead})
	t.bytes += n
	t.m.bytes.WithLabelValues(TierMemory).Add(float64(n))
	for bound := t.bound(); t.bytes > bound; {
		_, e, ok := t.lru.RemoveOldest()
		if !ok {
			break
		}
		sz := int64(len(e.data))
		t.bytes -= sz
		t.m.bytes.WithLabelValues(TierMemory).Sub(float64(sz))
		t.m.evictions.WithLabelValues(TierMemory).Inc()
		if e.readAhead {
			t.m.readAhead.WithLabelValues(ReadAheadWasted).Inc()
		}
	}
}

// bound is the byte bound now: max, less the process's memory pressure,
// at least a quarter of max.
func (t *memoryTier) bound() int64 {
	if t.pressure == nil {
		return t.max
	}
	return max(t.max-max(t.pressure(), 0), t.max/4)
}

// keys lists the cached chunks from least to most recently used.
func (t *memoryTier) keys() []chunkKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Keys()
}

func (t *memoryTier) size() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes
}

// purge drops everything (Close), releasing the bytes gauge.
func (t *memoryTier) purge() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m.bytes.WithLabelValues(TierMemory).Sub(float64(t.bytes))
	t.lru.Purge()
	t.bytes = 0
}
