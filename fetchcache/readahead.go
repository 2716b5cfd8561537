package fetchcache

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Read-ahead. The cache cannot tell clients apart (it sits under RemoteLog
// as a BucketReader), so it tracks streams by position: after each
// GetRange it remembers a cursor (object, version, last chunk read). A
// GetRange whose first chunk is the last chunk of a remembered cursor, or
// the one after it, continues that stream, and one that starts in an
// object's first chunk begins one: it is sequential, and the next
// ReadAheadChunks chunks past its last chunk are loaded in the background.
// RemoteLog carries a stream into the next segment with Prefetch.
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
// chunks that are neither cached nor already being read ahead. A read of
// an object's first chunk starts a stream: readers of a segment begin
// there, and waiting for a second read would leave the first two reads
// of every segment without read-ahead.
func (c *CachingBucket) readAheadAfter(object, version string, size, first, last int64) {
	if c.o.ReadAheadChunks <= 0 {
		return
	}
	if !c.ra.advance(object, version, first, last) && first != 0 {
		return
	}
	c.readAheadChunks(object, version, size, last+1, last+int64(c.o.ReadAheadChunks))
}

// Prefetch loads the chunks of [off, off+length) of key, and the
// ReadAheadChunks after them as a read of the range would, in the
// background (remotetier.Prefetcher): a RemoteLog calls it for the start of
// the next segment as a reader nears the end of one. Like read-ahead it never waits:
// the object's size is learnt only if a GET is free at once, and chunks
// are loaded only with free gate capacity. The reader's first read of the
// object then continues the stream.
func (c *CachingBucket) Prefetch(key string, off, length int64) {
	if c.o.ReadAheadChunks <= 0 || off < 0 || length <= 0 {
		return
	}
	c.goBackground(func() {
		attrs, ok := c.attrs.Get(key)
		if !ok {
			if !c.gets.TryStart(1) {
				return
			}
			a, err := c.inner.Attributes(c.ctx, key)
			c.gets.Done(1)
			if err != nil {
				c.o.Logger.Debug("prefetch did not learn the object size", "object", key, "err", err)
				return
			}
			c.attrs.Add(key, a)
			attrs = a
		}
		if off >= attrs.Size {
			return
		}
		cs := c.o.ChunkBytes
		first, last := off/cs, (min(off+length, attrs.Size)-1)/cs
		c.readAheadChunks(key, objectVersion(attrs), attrs.Size, first, last+int64(c.o.ReadAheadChunks))
	})
}

// Background runs fn under the bucket's lifetime (remotetier.Prefetcher):
// ctx is cancelled by Close, which waits for fn.
func (c *CachingBucket) Background(fn func(ctx context.Context)) bool {
	return c.goBackground(func() { fn(c.ctx) })
}

// readAheadChunks starts a background load of chunks [from, to] of an
// object version (clipped to its size) that are neither cached nor
// already being read ahead.
func (c *CachingBucket) readAheadChunks(object, version string, size, from, to int64) {
	cs := c.o.ChunkBytes
	to = min(to, (size-1)/cs)
	var claimed []chunkKey
	for i := from; i <= to; i++ {
		k := chunkKey{object, version, i}
		if !c.mem.contains(k) && c.ra.claim(k) {
			claimed = append(claimed, k)
		}
	}
	if len(claimed) == 0 {
		return
	}
	// Each claimed chunk loads in its own goroutine: a cold stream needs
	// its next chunks at once, and the store serves them faster side by
	// side than one after another. The gates bound the total.
	for _, k := range claimed {
		if !c.goBackground(func() {
			defer c.ra.release(k)
			if c.ctx.Err() != nil {
				return
			}
			n := chunkLen(k.index, cs, size)
			_, err, _ := c.sf.Do(k.flightKey(), func() (any, error) {
				return c.load(k, n, time.Time{}, true)
			})
			if err != nil {
				c.o.Logger.Debug("read-ahead did not load chunk", "chunk", k.String(), "err", err)
			}
		}) {
			c.ra.release(k)
		}
	}
}
