package chunkcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/x/workers"
	"github.com/tiered/tiered/remotetier/objstore"
)

// ErrClosed is returned by CachingBucket.GetRange after Close.
var ErrClosed = errors.New("caching bucket closed")

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
	gets  *gate.Gate
	bytes *gate.Gate
	attrs *lru.Cache[string, objstore.Attrs]
	sf    singleflight.Group // object attribute lookups
	ra    *readAhead
	// streams are the readers asking for read-ahead (ReadAhead).
	streams *raStreams
	// park holds read-ahead GET bodies for the next run (parked.go).
	park *parking
	// fmu guards flights: the chunk loads in progress (cache_load.go).
	fmu     sync.Mutex
	flights map[chunkKey]*flight
	// kickCh wakes the kicker, which loads held read-ahead windows
	// (readahead_streams.go).
	kickCh chan struct{}
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
	// workers run the background work (loads run the S3 client's deep
	// call stacks: a worker keeps the stack it grew; internal/x/workers).
	workers *workers.Pool

	// testHook, when set by a test, runs just before a caller joins a
	// shared load.
	testHook func(chunkKey)
}

var (
	_ objstore.BucketReader      = (*CachingBucket)(nil)
	_ objstore.SizeHinter        = (*CachingBucket)(nil)
	_ objstore.ReadAheader       = (*CachingBucket)(nil)
	_ objstore.SharedRangeReader = (*chunkReader)(nil)
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
		gets: gate.New(gate.Options{Name: gate.Gets, Capacity: int64(o.MaxConcurrentGets),
			MaxWait: o.MaxWait, RetryAfter: o.RetryAfter, Registerer: o.Registerer}),
		bytes: gate.New(gate.Options{Name: gate.Bytes, Capacity: o.MaxInFlightBytes,
			MaxWait: o.MaxWait, RetryAfter: o.RetryAfter, Registerer: o.Registerer}),
		attrs: attrs,
		ra:    newReadAhead(o.Streams),

		streams: newRAStreams(o.StreamIdle, o.Streams),
		park:    newParking(o.ParkedGets, o.StreamIdle, m.parked.Add, m.parkedUnused.Inc),

		flights: map[chunkKey]*flight{},
		workers: workers.New(workerIdle, 4*o.MaxConcurrentGets),
		kickCh:  make(chan struct{}, 1),
	}
	c.mem.pressure = o.MemoryPressure
	if o.CacheDir != "" {
		if c.disk, err = openDiskTier(o.FS, o.CacheDir, o.DiskBytes, o.ChunkBytes, m, o.Logger); err != nil {
			return nil, err
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.disk != nil {
		c.diskQueue = make(chan diskWrite, o.MaxInFlightBytes/o.ChunkBytes+1)
		c.goBackground(c.diskWriter)
	}
	if o.ParkedGets > 0 {
		c.goBackground(c.sweeper)
	}
	c.goBackground(c.kicker)
	return c, nil
}

// Options returns the effective options (defaults filled).
func (c *CachingBucket) Options() CacheOptions { return c.o }

// ChunkBytes is the size of the aligned chunks the cache reads
// (remotelog.ChunkSizer: a partition's end check reads a final segment
// that fits one whole, through the cache).
func (c *CachingBucket) ChunkBytes() int64 { return c.o.ChunkBytes }

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
	c.workers.Close()
	c.park.sweep(true) // a load that ended after the sweeper may have parked one
	c.mem.purge()
	if c.disk != nil {
		// A load that ended as Close began may have queued its write
		// after diskWriter drained the queue: release those too.
		for drained := false; !drained; {
			select {
			case w := <-c.diskQueue:
				c.bytesDone(w.weight)
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
	c.wg.Add(1)
	c.workers.Go(func() {
		defer c.wg.Done()
		fn()
	})
	return true
}

// workerIdle is how long a background worker waits for more work; at
// most 4 × MaxConcurrentGets wait at once.
const workerIdle = 10 * time.Second

func (c *CachingBucket) isClosed() bool {
	c.lifeMu.RLock()
	defer c.lifeMu.RUnlock()
	return c.closed
}

// Get passes through — whole objects (manifests) are not cached — behind
// the gets gate, whose slot the returned body holds until it is closed:
// MaxConcurrentGets bounds every request the cache makes of the store, not
// only the chunk loads. Past MaxWait it fails with an *gate.OverloadedError.
func (c *CachingBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := c.gets.StartBy(ctx, 1, time.Now().Add(c.o.MaxWait)); err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	rc, err := c.inner.Get(ctx, key)
	if err != nil {
		c.getDone()
		return nil, err
	}
	return &gatedBody{ReadCloser: rc, done: c.getDone}, nil
}

// gatedBody gives its gate slot back when closed (once).
type gatedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

// Close closes the body, then frees the slot: the request has ended at the
// store before another may start in its place.
func (b *gatedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// Attributes passes through, so callers always see the current object,
// behind the gets gate like Get.
func (c *CachingBucket) Attributes(ctx context.Context, key string) (objstore.Attrs, error) {
	if err := c.gets.StartBy(ctx, 1, time.Now().Add(c.o.MaxWait)); err != nil {
		return objstore.Attrs{}, fmt.Errorf("attributes %q: %w", key, err)
	}
	defer c.getDone()
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
// errors (including *gate.OverloadedError) come from GetRange, never from Read.
// The object's size and ETag are learnt once with Attributes and cached,
// unless a caller that knows the size told it first (HintSize).
func (c *CachingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("get range %q: negative offset %d", key, off)
	}
	if c.isClosed() {
		return nil, fmt.Errorf("get range %q: %w", key, ErrClosed)
	}
	deadline := time.Now().Add(c.o.MaxWait)
	for retried := false; ; retried = true {
		rc, err := c.getRange(ctx, key, off, length, deadline)
		if err != nil && !retried && errors.Is(err, io.ErrUnexpectedEOF) {
			// The object is shorter than the size the cache had (a hint
			// or an outdated HEAD): forget it and answer by the object's
			// real size, as a caller without the cache would see it.
			c.attrs.Remove(key)
			continue
		}
		return rc, err
	}
}

func (c *CachingBucket) getRange(ctx context.Context, key string, off, length int64, deadline time.Time) (io.ReadCloser, error) {
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
	var chunks [][]byte
	switch {
	case objstore.CachedOnly(ctx):
		// Taken from memory in one step: a check, then acquire, would
		// load a chunk evicted in between and wait for the store.
		if !objstore.Prefetch(ctx) {
			chunks = c.takeCached(key, ver, first, last)
		}
		if chunks == nil {
			c.readAheadChunks(key, ver, size, first, last)
			return nil, fmt.Errorf("get range %q [%d, %d): %w", key, off, off+n, objstore.ErrNotCached)
		}
		objstore.DemandAsked(ctx) // as acquire does for a read all cached
		if !objstore.CallerReadsAhead(ctx) {
			c.readAheadAfter(key, ver, size, first, last)
		}
	case objstore.ExactRange(ctx) && !c.cached(key, ver, first, last):
		return c.exactRange(ctx, key, off, n, deadline)
	default:
		if chunks, err = c.acquire(ctx, key, ver, size, first, last, off+n-last*cs, deadline, !objstore.CallerReadsAhead(ctx), objstore.EndCheck(ctx)); err != nil {
			return nil, fmt.Errorf("get range %q [%d, %d): %w", key, off, off+n, err)
		}
	}
	return &chunkReader{chunks: chunks, skip: off - first*cs, remaining: n}, nil
}

// takeCached returns chunks [first, last] of an object version for a
// client read if the memory tier holds them all (counted as memory hits),
// else nil.
func (c *CachingBucket) takeCached(key, ver string, first, last int64) [][]byte {
	ks := make([]chunkKey, 0, last-first+1)
	for i := first; i <= last; i++ {
		ks = append(ks, chunkKey{key, ver, i})
	}
	chunks := c.mem.getAll(ks)
	if chunks != nil {
		c.m.hits.WithLabelValues(TierMemory).Add(float64(len(chunks)))
	}
	return chunks
}

// cached reports whether chunks [first, last] of an object version are all
// in the memory tier, without counting or touching them.
func (c *CachingBucket) cached(key, ver string, first, last int64) bool {
	for i := first; i <= last; i++ {
		if !c.mem.contains(chunkKey{key, ver, i}) {
			return false
		}
	}
	return true
}

// exactRange reads [off, off+n) of key from the store, uncached
// (objstore.WithExactRange), behind the gets gate, whose slot the body
// holds until it is closed.
func (c *CachingBucket) exactRange(ctx context.Context, key string, off, n int64, deadline time.Time) (io.ReadCloser, error) {
	defer c.observeWait(time.Now()) // until the store's answer begins
	if err := c.gets.StartBy(ctx, 1, deadline); err != nil {
		return nil, fmt.Errorf("get range %q [%d, %d): %w", key, off, off+n, err)
	}
	objstore.DemandAsked(ctx)
	rc, err := c.inner.GetRange(ctx, key, off, n)
	if err != nil {
		c.getDone()
		if errors.Is(err, objstore.ErrNotFound) {
			c.attrs.Remove(key)
		}
		return nil, fmt.Errorf("get range %q [%d, %d): %w", key, off, off+n, err)
	}
	c.m.storeGets.Inc()
	if objstore.EndCheck(ctx) {
		c.m.endCheckGets.Inc()
	}
	c.m.storeBytes.Add(float64(n))
	return &gatedBody{ReadCloser: rc, done: c.getDone}, nil
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

// HintSize records the size of an object whose size the caller knows (a
// RemoteLog, from its manifest; objstore.SizeHinter), so its first range
// read needs no Attributes call. Without an ETag the chunks of a hinted
// object are versioned by size; attributes already cached are kept. A
// hint larger than the object is corrected by GetRange, which re-learns
// the size when the store returns fewer bytes than a chunk should hold. A
// hint shorter than the object is trusted: reads are cut at it, as a
// RemoteLog reading by its manifest would cut them anyway.
func (c *CachingBucket) HintSize(key string, size int64) {
	if size < 0 {
		return
	}
	c.attrs.ContainsOrAdd(key, objstore.Attrs{Size: size})
}

// objectAttrs returns the cached size and ETag, learning them with one
// shared Attributes call (behind the gets gate) on a miss. Missing objects
// are not cached.
func (c *CachingBucket) objectAttrs(ctx context.Context, key string, deadline time.Time) (objstore.Attrs, error) {
	if a, ok := c.attrs.Get(key); ok {
		return a, nil
	}
	v, err := c.sharedAttrs(ctx, key, deadline)
	for err != nil && takeOver(err, deadline) {
		// Joined a call the gate refused at its caller's deadline,
		// before this caller's: wait on, until this caller's own.
		v, err = c.sharedAttrs(ctx, key, deadline)
	}
	if err != nil {
		return objstore.Attrs{}, fmt.Errorf("get range %q: %w", key, err)
	}
	return v, nil
}

// sharedAttrs learns an object's attributes with one Attributes call
// shared by the concurrent callers (its gate wait ends at the deadline of
// the caller that makes it).
func (c *CachingBucket) sharedAttrs(ctx context.Context, key string, deadline time.Time) (objstore.Attrs, error) {
	v, err := c.shared(ctx, "a\x00"+key, func() (any, error) {
		if a, ok := c.attrs.Get(key); ok {
			return a, nil // learnt by a flight that ended meanwhile
		}
		if err := c.gets.StartBy(c.ctx, 1, deadline); err != nil {
			return nil, err
		}
		a, err := c.inner.Attributes(c.ctx, key)
		c.getDone()
		if err != nil {
			return nil, err
		}
		c.attrs.Add(key, a)
		return a, nil
	})
	if err != nil {
		return objstore.Attrs{}, err
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

// errReadAheadSkipped ends a read-ahead load that found the gates full, or
// its stream's share taken: it never waits. A client that joined such a
// load retries as a client.
var errReadAheadSkipped = errors.New("read-ahead skipped: gates full")

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
			c.bytesDone(w.weight)
		case <-c.ctx.Done():
			for {
				select {
				case w := <-c.diskQueue:
					c.bytesDone(w.weight)
				default:
					return
				}
			}
		}
	}
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
// (objstore.SharedRangeReader) and consumes them. Chunks are never
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

// getDone frees a gets slot whose request has ended, and offers it to
// read-ahead held back for want of capacity (kickAhead).
func (c *CachingBucket) getDone() {
	c.gets.Done(1)
	c.kickAhead()
}

// bytesDone frees w bytes of the in-flight budget, and offers them to
// read-ahead held back for want of capacity (kickAhead).
func (c *CachingBucket) bytesDone(w int64) {
	c.bytes.Done(w)
	c.kickAhead()
}
