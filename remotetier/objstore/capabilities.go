package objstore

import "context"

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

// Prefetcher is implemented by caching buckets that can load a range in
// the background. A RemoteLog prefetches the start of the next segment's
// .log object, and loads its index, when a read comes near the end of a
// segment, so a sequential reader does not wait for either there.
type Prefetcher interface {
	// Prefetch loads [off, off+length) of key (and what a read of it would
	// read ahead) in the background. It must not block or wait for
	// capacity: it may skip the work.
	Prefetch(key string, off, length int64)
	// Background runs fn in a goroutine under the bucket's lifetime: ctx
	// ends when the bucket is closed, which waits for fn. It reports false
	// (and does not run fn) when the bucket is closed.
	Background(fn func(ctx context.Context)) bool
}
