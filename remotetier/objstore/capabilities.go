package objstore

import (
	"context"
	"errors"
	"sync/atomic"
)

// Capabilities a BucketReader (or the readers it returns) may have beyond
// the Bucket interface. Callers discover them with a type assertion and work
// without them: they save requests or copies, never change results. The
// fetch service's caching bucket (fetchcache/chunkcache) implements them; the
// manifest-driven reader (remotelog.RemoteLog) uses them.

// SharedRangeReader is implemented by range readers whose bytes are
// immutable memory shared with a cache (the fetch service's chunk cache):
// SharedBytes hands out the unread bytes, in order, without copying them,
// and consumes them. The caller may keep the slices (the garbage collector
// keeps them alive after the cache drops them) and must never modify them.
type SharedRangeReader interface {
	SharedBytes() [][]byte
}

// SizeHinter is implemented by caching buckets that learn an object's size
// with an Attributes call (a HEAD) before range-reading it: a RemoteLog
// tells them the size its manifest recorded for a segment's .log, and for
// its indexes object (the sum of the sections), which saves that request.
// A bucket that finds the object shorter than the hint must fall back to
// the object's real size.
type SizeHinter interface {
	HintSize(key string, size int64)
}

// ReadAheader is implemented by caching buckets that read ahead for
// several sequential readers at once and share their budget among them: a
// RemoteLog names each of its readers by a stream number (unique within
// the process, NewStreamID) and, after each read, hands the bucket the
// window it wants cached next, which may span the ends of several objects
// (segments). The bucket loads what of it is neither cached nor loading,
// in order, in the background, within the stream's fair share of its
// in-flight budget; it must not block or wait for capacity (it may load
// what it held back later, as capacity frees up, until the stream asks
// again). It returns how many bytes of the window, from its start, are now
// cached or loading: the caller need not ask for them again until its
// reader gets near their end.
type ReadAheader interface {
	ReadAhead(stream uint64, window []Range) (covered int64)
}

// Range is a byte range of an object whose size the caller knows (from a
// manifest).
type Range struct {
	Key      string
	Off, Len int64
	Size     int64 // the object's size
}

// readMark is a mark on a context that tells a caching bucket how to serve
// the range reads made with it.
type readMark int

const (
	markCallerReadsAhead readMark = iota
	markExactRange
	markCachedOnly
	markPrefetch
	markEndCheck
)

func withMark(ctx context.Context, m readMark) context.Context {
	return context.WithValue(ctx, m, true)
}

func hasMark(ctx context.Context, m readMark) bool {
	v, _ := ctx.Value(m).(bool)
	return v
}

// WithCallerReadAhead returns ctx marked so that a caching bucket does not
// read ahead of range reads made with it on its own: the caller (a
// RemoteLog over a ReadAheader) asks for the window it wants itself, under
// its stream's share.
func WithCallerReadAhead(ctx context.Context) context.Context {
	return withMark(ctx, markCallerReadsAhead)
}

// CallerReadsAhead reports whether ctx was marked by WithCallerReadAhead.
func CallerReadsAhead(ctx context.Context) bool { return hasMark(ctx, markCallerReadsAhead) }

// WithExactRange returns ctx marked so that a caching bucket serves range
// reads made with it from its cache when it holds every byte, and
// otherwise reads exactly the range from the store, uncached, rather than
// whole chunks: for a small read nothing else will want soon (a
// RemoteLog's check of a segment's tail), which should cost neither a
// chunk's transfer nor a chunk's place in the cache.
func WithExactRange(ctx context.Context) context.Context { return withMark(ctx, markExactRange) }

// ExactRange reports whether ctx was marked by WithExactRange.
func ExactRange(ctx context.Context) bool { return hasMark(ctx, markExactRange) }

// ErrNotCached: a range read marked WithCachedOnly found bytes of the
// range not cached; the caching bucket has started loading them.
var ErrNotCached = errors.New("range not cached")

// WithCachedOnly returns ctx marked so that a caching bucket serves range
// reads made with it only from its cache: when a byte of the range is not
// cached it starts loading the missing chunks in the background (as
// read-ahead, with free capacity only) and fails at once with an error
// wrapping ErrNotCached. A Fetch whose response already holds data reads
// partitions that could add only a few bytes so: it does not wait for the
// store for them, and their data is cached by their next read. Buckets
// without a cache ignore the mark.
func WithCachedOnly(ctx context.Context) context.Context { return withMark(ctx, markCachedOnly) }

// CachedOnly reports whether ctx was marked by WithCachedOnly.
func CachedOnly(ctx context.Context) bool { return hasMark(ctx, markCachedOnly) }

// WithPrefetch returns ctx marked as WithCachedOnly, and so that a caching
// bucket answers its range reads with ErrNotCached even when the range is
// cached: a read made with it only has what it would read start loading,
// as read-ahead, and reads nothing itself.
func WithPrefetch(ctx context.Context) context.Context {
	return withMark(withMark(ctx, markCachedOnly), markPrefetch)
}

// Prefetch reports whether ctx was marked by WithPrefetch.
func Prefetch(ctx context.Context) bool { return hasMark(ctx, markPrefetch) }

// WithoutPrefetch returns ctx without WithPrefetch's mark, cached-only
// still: a prefetch that must read something first to know what to load
// (a segment's offset index) reads it so.
func WithoutPrefetch(ctx context.Context) context.Context {
	if !Prefetch(ctx) {
		return ctx
	}
	return context.WithValue(ctx, markPrefetch, false)
}

// WithoutCacheMarks returns ctx without WithCachedOnly's and
// WithPrefetch's marks: for a step that must not fail for want of cached
// bytes, such as a partition's end check, which other readers share.
func WithoutCacheMarks(ctx context.Context) context.Context {
	if !CachedOnly(ctx) && !Prefetch(ctx) {
		return ctx
	}
	return context.WithValue(context.WithValue(ctx, markCachedOnly, false), markPrefetch, false)
}

// WithEndCheck returns ctx marked as the check of a partition's end (the
// final segment's tail, or its index and tail, against which its high
// watermark is checked): a caching bucket counts the store GETs of reads made with it
// apart from those of the reads that serve clients. It changes nothing
// else.
func WithEndCheck(ctx context.Context) context.Context { return withMark(ctx, markEndCheck) }

// EndCheck reports whether ctx was marked by WithEndCheck.
func EndCheck(ctx context.Context) bool { return hasMark(ctx, markEndCheck) }

var streamIDs atomic.Uint64

// NewStreamID returns a stream number no other call in this process
// returned.
func NewStreamID() uint64 { return streamIDs.Add(1) }
