package fetchcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
)

// CachingBucket is an objstore.BucketReader that serves GetRange from
// aligned chunks cached in memory (and optionally on disk), behind gates
// that bound concurrent GETs, in-flight bytes and waiting. Get, Attributes
// and List pass through to the inner bucket untouched (manifests change, so
// whole-object reads are never cached). Safe for concurrent use.
type CachingBucket struct {
	inner objstore.BucketReader
	o     CacheOptions
	m     *cacheMetrics

	mem   *memoryTier
	disk  *diskTier // nil without a cache dir
	gets  *Gate
	bytes *Gate
	attrs *lru.Cache[string, objstore.Attrs]
	sf    singleflight.Group
	ra    *readAhead
	// diskQueue feeds diskWriter; its capacity covers every chunk the
	// bytes gate can admit, so a send fails only under a full budget.
	diskQueue chan diskWrite

	// ctx is the lifetime of background work: shared loads (detached from
	// any one caller so a caller's cancellation does not fail the others),
	// read-ahead and disk writes. Close cancels it and waits for wg.
	ctx    context.Context
	cancel context.CancelFunc
	lifeMu sync.RWMutex
	closed bool
	wg     sync.WaitGroup

	// testHook, when set by a test, runs just before a caller joins a
	// shared load.
	testHook func(chunkKey)
}

var (
	_ objstore.BucketReader        = (*CachingBucket)(nil)
	_ remotetier.Prefetcher        = (*CachingBucket)(nil)
	_ remotetier.SharedRangeReader = (*chunkReader)(nil)
)

// NewCachingBucket wraps inner. Options are defaulted and validated; with
// a CacheDir the disk tier is opened (created, locked, reloaded). The
// returned bucket must be closed to stop its background work.
func NewCachingBucket(inner objstore.BucketReader, opts CacheOptions) (*CachingBucket, error) {
	o := opts.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	m := newCacheMetrics(o.Registerer)
	attrs, err := lru.New[string, objstore.Attrs](o.AttrsEntries)
	if err != nil {
		return nil, fmt.Errorf("new attrs cache: %w", err)
	}
	c := &CachingBucket{
		inner: inner,
		o:     o,
		m:     m,
		mem:   newMemoryTier(o.MemoryBytes, m),
		gets: NewGate(GateOptions{Name: GateGets, Capacity: int64(o.MaxConcurrentGets),
			MaxWait: o.MaxWait, RetryAfter: o.RetryAfter, Registerer: o.Registerer}),
		bytes: NewGate(GateOptions{Name: GateBytes, Capacity: o.MaxInFlightBytes,
			MaxWait: o.MaxWait, RetryAfter: o.RetryAfter, Registerer: o.Registerer}),
		attrs: attrs,
		ra:    newReadAhead(o.Streams),
	}
	if o.CacheDir != "" {
		if c.disk, err = openDiskTier(o.CacheDir, o.DiskBytes, o.ChunkBytes, m, o.Logger); err != nil {
			return nil, err
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.disk != nil {
		c.diskQueue = make(chan diskWrite, o.MaxInFlightBytes/o.ChunkBytes+1)
		c.goBackground(c.diskWriter)
	}
	return c, nil
}

// Options returns the effective options (defaults filled).
func (c *CachingBucket) Options() CacheOptions { return c.o }

// Close cancels read-ahead and in-flight shared loads, waits for every
// background goroutine, and releases the disk tier (its files stay). Later
// GetRange calls fail with ErrClosed; the pass-through calls keep working.
// It does not close the inner bucket.
func (c *CachingBucket) Close() error {
	c.lifeMu.Lock()
	if c.closed {
		c.lifeMu.Unlock()
		return nil
	}
	c.closed = true
	c.lifeMu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mem.purge()
	if c.disk != nil {
		// A load that ended as Close began may have queued its write
		// after diskWriter drained the queue: release those too.
		for drained := false; !drained; {
			select {
			case w := <-c.diskQueue:
				c.bytes.Done(w.weight)
			default:
				drained = true
			}
		}
		return c.disk.close()
	}
	return nil
}

// goBackground runs fn in a goroutine that Close waits for; false after
// Close.
func (c *CachingBucket) goBackground(fn func()) bool {
	c.lifeMu.RLock()
	defer c.lifeMu.RUnlock()
	if c.closed {
		return false
	}
	c.wg.Go(fn)
	return true
}

func (c *CachingBucket) isClosed() bool {
	c.lifeMu.RLock()
	defer c.lifeMu.RUnlock()
	return c.closed
}

// Get passes through: whole objects (manifests) are not cached.
func (c *CachingBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return c.inner.Get(ctx, key)
}

// Attributes passes through, so callers always see the current object.
func (c *CachingBucket) Attributes(ctx context.Context, key string) (objstore.Attrs, error) {
	return c.inner.Attributes(ctx, key)
}

// List passes through.
func (c *CachingBucket) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	return c.inner.List(ctx, prefix, fn)
}

// GetRange implements objstore.BucketReader with the same contract as the
// backends (length < 0 to the end, a range past the end cut, off == size
// empty, off > size ErrInvalidRange, missing key ErrNotFound), served from
// cached chunks. All chunks of the range are in memory when it returns, so
// errors (including *OverloadedError) come from GetRange, never from Read.
// The object's size and ETag are learnt once with Attributes and cached.
func (c *CachingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("get range %q: negative offset %d", key, off)
	}
	if c.isClosed() {
		return nil, fmt.Errorf("get range %q: %w", key, ErrClosed)
	}
	deadline := time.Now().Add(c.o.MaxWait)
	attrs, err := c.objectAttrs(ctx, key, deadline)
	if err != nil {
		return nil, err
	}
	size := attrs.Size
	if off > size {
		return nil, fmt.Errorf("get range %q: offset %d beyond size %d: %w", key, off, size, objstore.ErrInvalidRange)
	}
	n := size - off
	if length >= 0 && length < n {
		n = length
	}
	if n == 0 {
		return &chunkReader{}, nil
	}
	cs := c.o.ChunkBytes
	first, last := off/cs, (off+n-1)/cs
	ver := objectVersion(attrs)
	chunks := make([][]byte, last-first+1)
	var missing []int64
	for i := first; i <= last; i++ {
		if data, ok := c.mem.get(chunkKey{key, ver, i}, true); ok {
			c.m.hits.WithLabelValues(TierMemory).Inc()
			chunks[i-first] = data
		} else {
			c.m.misses.WithLabelValues(TierMemory).Inc()
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		c.readAheadAfter(key, ver, size, first, last)
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(c.o.FetchParallelism)
		for _, i := range missing {
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err // another chunk failed: start no more loads
				}
				data, err := c.chunk(gctx, chunkKey{key, ver, i}, chunkLen(i, cs, size), deadline)
				chunks[i-first] = data
				return err
			})
		}
		// Read-ahead starts while this read's own chunks load, so the
		// store works on the next chunks while this read is served.
		c.readAheadAfter(key, ver, size, first, last)
		if err := g.Wait(); err != nil {
			return nil, fmt.Errorf("get range %q [%d, %d): %w", key, off, off+n, err)
		}
		// Loads finish in any order; make the request's chunks most
		// recently used in offset order, so eviction order is stable.
		for _, i := range missing {
			c.mem.touch(chunkKey{key, ver, i})
		}
	}
	return &chunkReader{chunks: chunks, skip: off - first*cs, remaining: n}, nil
}

// chunkLen is the length of chunk i of an object of the given size: the
// chunk size except for a short last chunk.
func chunkLen(i, cs, size int64) int64 { return min(cs, size-i*cs) }

// objectVersion is the version part of chunk keys.
func objectVersion(a objstore.Attrs) string {
	if a.ETag != "" {
		return a.ETag
	}
	return "size:" + strconv.FormatInt(a.Size, 10)
}

// objectAttrs returns the cached size and ETag, learning them with one
// shared Attributes call (behind the gets gate) on a miss. Missing objects
// are not cached.
func (c *CachingBucket) objectAttrs(ctx context.Context, key string, deadline time.Time) (objstore.Attrs, error) {
	if a, ok := c.attrs.Get(key); ok {
		return a, nil
	}
	v, err := c.shared(ctx, "a\x00"+key, func() (any, error) {
		if a, ok := c.attrs.Get(key); ok {
			return a, nil // learnt by a flight that ended meanwhile
		}
		if err := c.gets.StartBy(c.ctx, 1, deadline); err != nil {
			return nil, err
		}
		a, err := c.inner.Attributes(c.ctx, key)
		c.gets.Done(1)
		if err != nil {
			return nil, err
		}
		c.attrs.Add(key, a)
		return a, nil
	})
	if err != nil {
		return objstore.Attrs{}, fmt.Errorf("get range %q: %w", key, err)
	}
	return v.(objstore.Attrs), nil
}

// shared runs fn once for all concurrent callers of the same flight key,
// in a goroutine detached from every caller (under the bucket's lifetime),
// and lets each caller stop waiting when its own ctx ends.
func (c *CachingBucket) shared(ctx context.Context, key string, fn func() (any, error)) (any, error) {
	type result struct {
		v   any
		err error
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan result, 1)
	if !c.goBackground(func() {
		v, err, _ := c.sf.Do(key, fn)
		ch <- result{v, err}
	}) {
		return nil, ErrClosed
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// errReadAheadSkipped ends a read-ahead load that found the gates full: it
// never waits. A client that joined such a load retries as a client.
var errReadAheadSkipped = errors.New("read-ahead skipped: gates full")

// chunk returns chunk k (of length n) for a client, loading it from the
// disk tier or the store through a load shared with concurrent callers.
func (c *CachingBucket) chunk(ctx context.Context, k chunkKey, n int64, deadline time.Time) ([]byte, error) {
	for {
		if c.testHook != nil {
			c.testHook(k)
		}
		v, err := c.shared(ctx, k.flightKey(), func() (any, error) {
			return c.load(k, n, deadline, false)
		})
		if errors.Is(err, errReadAheadSkipped) {
			continue // joined a read-ahead that gave up; load as a client
		}
		if err != nil {
			return nil, err
		}
		c.mem.markRead(k)
		return v.([]byte), nil
	}
}

// load brings chunk k into the memory tier, from the disk tier or the
// store. Client loads wait for the gates until deadline; read-ahead loads
// only take free capacity. It runs under the bucket's lifetime context.
func (c *CachingBucket) load(k chunkKey, n int64, deadline time.Time, readAhead bool) ([]byte, error) {
	if data, ok := c.mem.get(k, false); ok {
		return data, nil // filled while this load was being set up
	}
	start := func(g *Gate, w int64) error {
		if readAhead {
			if !g.TryStart(w) {
				return errReadAheadSkipped
			}
			return nil
		}
		return g.StartBy(c.ctx, w, deadline)
	}
	if err := start(c.bytes, n); err != nil {
		return nil, err
	}
	holdBytes := true
	defer func() {
		if holdBytes {
			c.bytes.Done(n)
		}
	}()
	if c.disk != nil {
		data, ok := c.disk.get(k, n)
		if !readAhead {
			if ok {
				c.m.hits.WithLabelValues(TierDisk).Inc()
			} else {
				c.m.misses.WithLabelValues(TierDisk).Inc()
			}
		}
		if ok {
			c.mem.add(k, data, readAhead)
			return data, nil
		}
	}
	if err := start(c.gets, 1); err != nil {
		return nil, err
	}
	data, err := c.fetch(k, n)
	c.gets.Done(1)
	if err != nil {
		return nil, err
	}
	c.mem.add(k, data, readAhead)
	if c.disk != nil {
		// The queued disk write keeps the chunk's in-flight bytes until
		// written, so a slow disk pushes back instead of holding memory
		// outside the budget. A full queue skips the write.
		select {
		case c.diskQueue <- diskWrite{k, data, n}:
			holdBytes = false
		default:
		}
	}
	return data, nil
}

// diskWrite is a chunk on its way to the disk tier; weight is the bytes
// gate weight it holds.
type diskWrite struct {
	k      chunkKey
	data   []byte
	weight int64
}

// diskWriter writes queued chunks in order, one at a time, until Close;
// writes still queued then are dropped (the disk tier is only a cache).
func (c *CachingBucket) diskWriter() {
	for {
		select {
		case w := <-c.diskQueue:
			if c.ctx.Err() == nil {
				c.disk.put(w.k, w.data)
			}
			c.bytes.Done(w.weight)
		case <-c.ctx.Done():
			for {
				select {
				case w := <-c.diskQueue:
					c.bytes.Done(w.weight)
				default:
					return
				}
			}
		}
	}
}

// fetch reads chunk k with one range GET and checks its length.
func (c *CachingBucket) fetch(k chunkKey, n int64) ([]byte, error) {
	off := k.index * c.o.ChunkBytes
	rc, err := c.inner.GetRange(c.ctx, k.object, off, n)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			c.attrs.Remove(k.object) // gone: do not trust its size any more
		}
		return nil, err
	}
	defer rc.Close()
	c.m.storeGets.Inc()
	data := make([]byte, n)
	got, err := io.ReadFull(rc, data)
	c.m.storeBytes.Add(float64(got))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("chunk %d of %q: store returned %d of %d bytes (object changed?): %w",
				k.index, k.object, got, n, io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("read chunk %d of %q: %w", k.index, k.object, err)
	}
	return data, nil
}

// chunkReader reads a range out of shared, immutable chunk slices without
// copying them; each chunk reference is dropped once consumed.
type chunkReader struct {
	chunks    [][]byte
	skip      int64 // bytes to skip in the first chunk
	remaining int64
	cur       []byte
}

func (r *chunkReader) next() bool {
	for len(r.cur) == 0 {
		if r.remaining == 0 || len(r.chunks) == 0 {
			return false
		}
		c := r.chunks[0]
		r.chunks[0] = nil
		r.chunks = r.chunks[1:]
		if r.skip > 0 {
			c = c[r.skip:]
			r.skip = 0
		}
		if int64(len(c)) > r.remaining {
			c = c[:r.remaining]
		}
		r.cur = c
	}
	return true
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if !r.next() {
		return 0, io.EOF
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	r.remaining -= int64(n)
	return n, nil
}

// WriteTo writes the remaining bytes straight from the cached chunks.
func (r *chunkReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for r.next() {
		n, err := w.Write(r.cur)
		total += int64(n)
		r.cur = r.cur[n:]
		r.remaining -= int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// SharedBytes hands out the remaining bytes as slices of the cached chunks
// (remotetier.SharedRangeReader) and consumes them. Chunks are never
// modified once cached, and an evicted chunk stays valid for as long as a
// caller holds it.
func (r *chunkReader) SharedBytes() [][]byte {
	var out [][]byte
	for r.next() {
		out = append(out, r.cur)
		r.remaining -= int64(len(r.cur))
		r.cur = nil
	}
	return out
}

func (r *chunkReader) Close() error {
	r.chunks, r.cur, r.remaining = nil, nil, 0
	return nil
}
