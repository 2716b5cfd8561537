package chunkcache

import (
	"errors"
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
// A RemoteLog carries its streams across segments with ReadAhead
// (readahead_streams.go) instead.
// Many readers of one object each keep their own cursor, so 64 consumers
// at different offsets all get read-ahead. Cursors live in a bounded LRU
// (Streams); a stream that stops simply ages out.
//
// Read-ahead never waits: it takes gate capacity only when free
// (Gate.TryStart), so it yields to client requests, and Close cancels it.
// Chunks it brings in are marked; a client read settles one as useful,
// eviction before any read as wasted (tiered_fetch_readahead_chunks_total).
type readAhead struct {
	mu      sync.Mutex
	cursors *simplelru.LRU[chunkKey, struct{}]
}

func newReadAhead(streams int) *readAhead {
	l, err := simplelru.NewLRU[chunkKey, struct{}](streams, nil)
	if err != nil {
		panic(err)
	}
	return &readAhead{cursors: l}
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

// readAheadAfter is called after a client read of chunks [first, last];
// on a sequential stream it keeps the next ReadAheadChunks chunks cached
// or loading. It refills only once the first half of that window has a
// gap, and then claims the whole window, so a stream reads ahead in runs
// of about half the window, each one GET, instead of one chunk (and one
// GET) per read. A read of an object's first chunk starts a stream:
// readers of a segment begin there, and waiting for a second read would
// leave the first two reads of every segment without read-ahead.
func (c *CachingBucket) readAheadAfter(object, version string, size, first, last int64) {
	ra := int64(c.o.ReadAheadChunks)
	if ra <= 0 {
		return
	}
	if !c.ra.advance(object, version, first, last) && first != 0 {
		return
	}
	end := (size - 1) / c.o.ChunkBytes
	low := min(last+(ra+1)/2, end)
	gap := false
	c.fmu.Lock()
	for i := last + 1; i <= low && !gap; i++ {
		k := chunkKey{object, version, i}
		_, loading := c.flights[k]
		gap = !loading && !c.mem.contains(k)
	}
	c.fmu.Unlock()
	if gap {
		c.readAheadChunks(object, version, size, last+1, last+ra)
	}
}

// readAheadChunks starts background loads of the chunks [from, to] of an
// object version (clipped to its size) that are neither cached nor
// already loading: one run (one GET) per stretch of such chunks.
func (c *CachingBucket) readAheadChunks(object, version string, size, from, to int64) {
	to = min(to, (size-1)/c.o.ChunkBytes)
	if from > to {
		return
	}
	runs, _, _ := c.claim(object, version, from, to, false, false)
	for _, r := range runs {
		c.goLoad([]loadRun{r}, func() {
			c.load(r, size, time.Time{}, true)
			for i, f := range r.flights {
				if f.err != nil && !errors.Is(f.err, errReadAheadSkipped) {
					c.o.Logger.Debug("read-ahead did not load chunk", "chunk", r.keys[i].String(), "err", f.err)
				}
			}
		})
	}
}
