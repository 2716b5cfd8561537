package fetchcache

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Read-ahead. The cache cannot tell clients apart (it sits under RemoteLog
// as a BucketReader), so it tracks streams by position: after each
// GetRange it remembers a cursor (object, version, last chunk read). A
// GetRange whose first chunk is the last chunk of a remembered cursor, or
// the one after it, continues that stream: it is sequential, and the next
// ReadAheadChunks chunks past its last chunk are loaded in the background.
// Many readers of one object each keep their own cursor, so 64 consumers
// at different offsets all get read-ahead. Cursors live in a bounded LRU
// (Streams); a stream that stops simply ages out.
//
// Read-ahead never waits: it takes gate capacity only when free
// (Gate.TryStart), so it yields to client requests, and Close cancels it.
// Chunks it brings in are marked; a client read settles one as useful,
// eviction before any read as wasted (tiered_fetch_readahead_chunks_total).
type readAhead struct {
	mu       sync.Mutex
	cursors  *simplelru.LRU[chunkKey, struct{}]
	inFlight map[chunkKey]struct{}
}

func newReadAhead(streams int) *readAhead {
	l, err := simplelru.NewLRU[chunkKey, struct{}](streams, nil)
	if err != nil {
		panic(err)
	}
	return &readAhead{cursors: l, inFlight: map[chunkKey]struct{}{}}
}

// advance records a read of chunks [first, last] of an object version and
// reports whether it continues a known stream.
func (r *readAhead) advance(object, version string, first, last int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := false
	for _, prev := range []int64{first, first - 1} {
		k := chunkKey{object, version, prev}
		if prev >= 0 && r.cursors.Contains(k) {
			r.cursors.Remove(k)
			seq = true
			break
		}
	}
	r.cursors.Add(chunkKey{object, version, last}, struct{}{})
	return seq
}

// claim marks k as being read ahead; false if it already is.
func (r *readAhead) claim(k chunkKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.inFlight[k]; ok {
		return false
	}
	r.inFlight[k] = struct{}{}
	return true
}

func (r *readAhead) release(k chunkKey) {
	r.mu.Lock()
	delete(r.inFlight, k)
	r.mu.Unlock()
}

func (r *readAhead) busy() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inFlight)
}

// readAheadAfter is called after a client read of chunks [first, last];
// on a sequential stream it starts background loads of the following
// chunks that are neither cached nor already being read ahead.
func (c *CachingBucket) readAheadAfter(object, version string, size, first, last int64) {
	if c.o.ReadAheadChunks <= 0 {
		return
	}
	if !c.ra.advance(object, version, first, last) {
		return
	}
	cs := c.o.ChunkBytes
	end := min(last+int64(c.o.ReadAheadChunks), (size-1)/cs)
	var claimed []chunkKey
	for i := last + 1; i <= end; i++ {
		k := chunkKey{object, version, i}
		if !c.mem.contains(k) && c.ra.claim(k) {
			claimed = append(claimed, k)
		}
	}
	if len(claimed) == 0 {
		return
	}
	// One goroutine per trigger loads its chunks in offset order: the
	// stream consumes them in that order, and successive triggers of a
	// stream (or of many streams) overlap, which gives the parallelism.
	if !c.goBackground(func() {
		for _, k := range claimed {
			if c.ctx.Err() == nil {
				n := chunkLen(k.index, cs, size)
				_, err, _ := c.sf.Do(k.flightKey(), func() (any, error) {
					return c.load(k, n, time.Time{}, true)
				})
				if err != nil {
					c.o.Logger.Debug("read-ahead did not load chunk", "chunk", k.String(), "err", err)
				}
			}
			c.ra.release(k)
		}
	}) {
		for _, k := range claimed {
			c.ra.release(k)
		}
	}
}
