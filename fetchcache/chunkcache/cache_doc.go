// Package chunkcache owns the fetch service's caching bucket: an
// objstore.BucketReader that serves range reads of immutable data objects
// from aligned chunks held in a byte-bounded memory LRU and an optional disk
// tier, shares one GET among concurrent misses (flights), loads runs of
// consecutive chunks with one GET, and reads ahead for sequential readers,
// all under the admission gates of fetchcache/gate.
//
// # Caching layer contract
//
// NewCachingBucket(inner, CacheOptions) returns a *CachingBucket, an
// objstore.BucketReader to hand to remotelog.RemoteLog (or anything that
// reads data objects by range), thanos CachingBucket style:
//
//   - GetRange(ctx, key, off, length) keeps the objstore contract (length
//     < 0 to the end; a range past the end cut; off == size empty; off >
//     size wraps objstore.ErrInvalidRange; a missing key wraps
//     objstore.ErrNotFound) and is served from aligned chunks of
//     ChunkBytes (default 4 MiB, --chunk-bytes). The size and ETag of an
//     object are learnt once with Attributes and cached (AttrsEntries),
//     unless the caller gave the size first (HintSize,
//     objstore.SizeHinter: a RemoteLog knows each .log's and .indexes
//     object's size from its manifest, which saves a HEAD per object; a
//     hint longer than the
//     object is detected by the short GET and replaced by a HEAD);
//     chunk keys are (object key, ETag or size, chunk index), which is
//     sound because data objects are immutable under unique keys. The
//     whole range is in memory when GetRange returns: errors come from
//     GetRange, never from Read. The reader shares the cached chunk
//     slices (no copy) and implements io.WriterTo.
//   - Get, Attributes and List pass through uncached (manifests change).
//   - Close stops read-ahead and background loads and waits for them;
//     afterwards GetRange wraps ErrClosed. It does not close inner.
//
// Tiers. Memory: a byte-bounded LRU (MemoryBytes, --cache-bytes) of whole
// chunks; the bound is on the sum of chunk lengths. Disk (optional,
// CacheDir + DiskBytes, --cache-dir / --disk-cache-bytes): every chunk
// fetched from the store is also written to a file (tmp + rename, length
// and CRC-32C trailer), bounded by bytes with LRU eviction; a memory miss
// that hits disk is promoted to memory. At start the directory is reloaded
// (files kept, oldest modification evicted first, leftover temporaries
// removed), and a LOCK file (flock) keeps a second process out. A file
// that fails its check on read is deleted, counted in
// tiered_fetch_cache_corrupt_chunks_total and the chunk refetched.
//
// Loads (cache_load.go). Every chunk being loaded has one flight;
// concurrent misses on it wait for that flight instead of sending a second
// GET. Loads run detached from any single caller, so one caller giving up
// does not fail the others; each caller still stops waiting when its own
// ctx ends. Loads go in runs: the consecutive missing chunks a request or a
// read-ahead claims together (at most a quarter of the in-flight budget,
// at most 8 chunks) are fetched with one range GET and handed out chunk
// by chunk as the body arrives. Stores charge a fixed cost per request
// (MinIO here: about as much as 2 MiB of transfer), so a sequential
// stream costs about one GET per run rather than one per chunk. A
// request's runs load at most FetchParallelism at a time. A range that
// ends inside a chunk still loading is answered as soon as its bytes of
// that chunk are in (the GET publishes its progress every 128 KiB), not
// once the whole chunk is: a 1 MiB Fetch at a random offset waits for the
// chunk's bytes up to its end rather than for all 4 MiB.
//
// Gates and overload. Two gates bound the work: "gets" (MaxConcurrentGets
// store requests at once, default 16: chunk loads, Attributes calls, and
// whole-object Gets such as manifests, whose slot the body holds until it
// is closed) and
// "bytes" (MaxInFlightBytes of chunks being brought into memory from the
// store or disk, default 16 chunks; a run's chunks are released one by one
// as each arrives in the memory tier, and a chunk on its way to the disk
// tier keeps its bytes until written). Every gate wait of one GetRange shares
// one deadline, MaxWait after the call began (default 2 s); past it the
// call fails with an *gate.OverloadedError (errors.Is(err, gate.ErrOverloaded);
// gate.RetryAfter(err) gives the suggested delay, CacheOptions.RetryAfter,
// default 1 s). The HTTP layer answers 429 THROTTLED with Retry-After, the
// Kafka layer sets throttle_time_ms. The memory the cache holds is thus at
// most MemoryBytes + MaxInFlightBytes, whatever the number of clients;
// what is not bounded here is bytes of evicted chunks still referenced by
// readers callers keep open, i.e. the ranges callers ask for — callers
// bound those (max_bytes × concurrent requests, e.g. with their own Gate).
//
// The gates are fetchcache/gate's (gate.New, Start/StartBy/TryStart/Done),
// which the protocol layers also use to bound their own work with the same
// overload answer and the same tiered_fetch_gate_* series under their own
// gate name.
//
// Read-ahead: see readahead.go. A GetRange that begins in or right after
// the chunk where an earlier GetRange of the same object ended is
// sequential and keeps the next ReadAheadChunks chunks (default 4) cached
// or loading: once the first half of that window has a gap, the missing
// chunks of the whole window load as one run. Read-ahead only takes free
// gate capacity and is cancelled by Close. Readers that know what they
// read next (a RemoteLog's streams, objstore.ReadAheader) ask for it with
// ReadAhead(stream, window), across objects, instead (readahead_streams.go):
// each stream active in the last StreamIdle holds at most its fair share
// of MaxInFlightBytes in read-ahead loads and of half the memory tier in
// its window, so the first readers cannot starve the others; a share is
// loaded by about eight GETs at once, in whole runs; ReadAhead returns the
// bytes of the window cached or loading, so the reader asks again only
// half a window later; what the gates or its share held back is loaded as
// loads end, the least covered stream first. Their own range reads, marked with
// objstore.WithCallerReadAhead, start no per-object read-ahead.
//
// A read-ahead run that stops short of its object's end asks the store for
// the rest of the object and parks the body where the run stopped
// (parked.go): the object's next run continues it instead of sending a
// GET, so a sequential reader costs one GET per object however small its
// share. MaxConcurrentGets bounds the GETs transferring at once; parked
// bodies, idle, are at most ParkedGets more open requests, each closed
// after StreamIdle unused.
//
// Metrics (registry injected through CacheOptions.Registerer, every
// series created at 0; several buckets may share a registry):
//
//	tiered_fetch_cache_hits_total{tier}         memory|disk, client chunk lookups
//	tiered_fetch_cache_misses_total{tier}
//	tiered_fetch_cache_evictions_total{tier}
//	tiered_fetch_cache_bytes{tier}              gauge
//	tiered_fetch_cache_corrupt_chunks_total     disk files failing their check
//	tiered_fetch_cache_wait_seconds             histogram, client reads' waits for the store or disk
//	tiered_fetch_store_gets_total               range GETs sent by the cache
//	tiered_fetch_store_get_bytes_total
//	tiered_fetch_store_gets_end_check_total     of them, for objstore.WithEndCheck reads
//	tiered_fetch_store_gets_continued_total      runs read from a parked body
//	tiered_fetch_store_gets_parked              gauge
//	tiered_fetch_store_gets_parked_unused_total closed without being continued
//	tiered_fetch_gate_in_flight{gate}           gets|bytes (+ callers' gates)
//	tiered_fetch_gate_waits_total{gate}
//	tiered_fetch_gate_rejections_total{gate}
//	tiered_fetch_gate_wait_seconds{gate}        histogram
//	tiered_fetch_readahead_chunks_total{outcome} useful|wasted
package chunkcache
