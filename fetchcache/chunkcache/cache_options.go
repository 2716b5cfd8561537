package chunkcache

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tiered/tiered/fetchcache/gate"

	"github.com/tiered/tiered/localtier/vfs"
)

// Defaults of CacheOptions; EnsureDefaults fills zero fields with them.
const (
	DefaultChunkBytes        = 4 << 20   // --chunk-bytes
	DefaultMemoryBytes       = 512 << 20 // --cache-bytes
	DefaultReadAheadChunks   = 4
	DefaultMaxConcurrentGets = 16
	DefaultMaxWait           = 2 * time.Second
	DefaultRetryAfter        = gate.DefaultRetryAfter
	DefaultFetchParallelism  = 4
	DefaultAttrsEntries      = 16384
	DefaultStreams           = 4096
	// DefaultInFlightChunks sizes the default in-flight byte budget:
	// MaxInFlightBytes = DefaultInFlightChunks × ChunkBytes.
	DefaultInFlightChunks = 16
	// ParkedPerGet sizes the default ParkedGets: ParkedPerGet ×
	// MaxConcurrentGets.
	ParkedPerGet = 8
)

// CacheOptions configures a CachingBucket. The zero value of a field means
// its default; EnsureDefaults fills them and Validate reports every
// remaining problem at once.
type CacheOptions struct {
	// ChunkBytes is the alignment and size of cached chunks (--chunk-bytes).
	ChunkBytes int64
	// MemoryBytes bounds the bytes of chunks held by the memory tier
	// (--cache-bytes). Chunks are never split; a chunk larger than the
	// bound is served but not kept.
	MemoryBytes int64

	// MemoryPressure, when set, reports by how many bytes the process's
	// memory is over its target (0 when it is not): the memory tier then
	// holds that much less, down to a quarter of MemoryBytes. Chunks the
	// cache evicted stay in memory while responses still write them, which
	// no budget counts; under pressure the cache makes room for them.
	MemoryPressure func() int64

	// CacheDir enables the disk tier (--cache-dir); empty means none.
	CacheDir string
	// DiskBytes bounds the bytes of chunk files in CacheDir
	// (--disk-cache-bytes); required with CacheDir.
	DiskBytes int64
	// FS holds the disk tier's files; nil means vfs.Default.
	FS vfs.FS

	// ReadAheadChunks is how many chunks past a sequential read are fetched
	// in the background. Zero means the default (4); negative disables.
	ReadAheadChunks int

	// MaxConcurrentGets bounds GETs in flight against the store.
	MaxConcurrentGets int
	// MaxInFlightBytes bounds bytes being brought into memory at once (from
	// the store or the disk tier); at least ChunkBytes.
	MaxInFlightBytes int64
	// MaxWait is the per-request bound on waiting for the gates; past it
	// the request fails with *gate.OverloadedError.
	MaxWait time.Duration
	// RetryAfter is the delay an overload error suggests.
	RetryAfter time.Duration
	// FetchParallelism bounds the missing chunks of one request fetched at
	// once.
	FetchParallelism int

	// AttrsEntries bounds the cached object sizes/ETags (entries).
	AttrsEntries int
	// Streams bounds the sequential-read cursors tracked for read-ahead,
	// and the streams sharing the read-ahead budget (ReadAhead).
	Streams int
	// StreamIdle is how long a stream that asked for read-ahead counts as
	// active, sharing the budget (DefaultStreamIdle), and how long a
	// read-ahead GET's body stays parked for the stream's next run
	// (parked.go).
	StreamIdle time.Duration
	// ParkedGets bounds the read-ahead GET bodies parked for a next run
	// to continue (parked.go): each holds one connection to the store.
	// Zero means ParkedPerGet × MaxConcurrentGets; negative disables
	// parking (every run is a GET of its own).
	ParkedGets int

	// Registerer receives the tiered_fetch_cache_*, _store_*, _gate_* and
	// _readahead_* series; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Logger receives debug and warning records; nil discards them.
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with the defaults and returns o.
func (o CacheOptions) EnsureDefaults() CacheOptions {
	if o.ChunkBytes == 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.MemoryBytes == 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.ReadAheadChunks == 0 {
		o.ReadAheadChunks = DefaultReadAheadChunks
	}
	if o.MaxConcurrentGets == 0 {
		o.MaxConcurrentGets = DefaultMaxConcurrentGets
	}
	if o.MaxInFlightBytes == 0 {
		o.MaxInFlightBytes = DefaultInFlightChunks * o.ChunkBytes
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	if o.FetchParallelism == 0 {
		o.FetchParallelism = DefaultFetchParallelism
	}
	if o.AttrsEntries == 0 {
		o.AttrsEntries = DefaultAttrsEntries
	}
	if o.Streams == 0 {
		o.Streams = DefaultStreams
	}
	if o.StreamIdle == 0 {
		o.StreamIdle = DefaultStreamIdle
	}
	if o.ParkedGets == 0 {
		o.ParkedGets = ParkedPerGet * o.MaxConcurrentGets
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	return o
}

// Validate reports every problem of o (after EnsureDefaults) in one error.
func (o CacheOptions) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.ChunkBytes <= 0 {
		bad("chunk bytes %d: must be positive", o.ChunkBytes)
	}
	if o.MemoryBytes <= 0 {
		bad("cache bytes %d: must be positive", o.MemoryBytes)
	}
	if o.CacheDir != "" && o.DiskBytes <= 0 {
		bad("disk cache bytes %d: must be positive with a cache dir", o.DiskBytes)
	}
	if o.CacheDir == "" && o.DiskBytes != 0 {
		bad("disk cache bytes %d given without a cache dir", o.DiskBytes)
	}
	if o.MaxConcurrentGets <= 0 {
		bad("max concurrent gets %d: must be positive", o.MaxConcurrentGets)
	}
	if o.ChunkBytes > 0 && o.MaxInFlightBytes < o.ChunkBytes {
		bad("max in-flight bytes %d: must be at least one chunk (%d)", o.MaxInFlightBytes, o.ChunkBytes)
	}
	if o.MaxWait <= 0 {
		bad("max wait %v: must be positive", o.MaxWait)
	}
	if o.RetryAfter <= 0 {
		bad("retry after %v: must be positive", o.RetryAfter)
	}
	if o.FetchParallelism <= 0 {
		bad("fetch parallelism %d: must be positive", o.FetchParallelism)
	}
	if o.AttrsEntries <= 0 {
		bad("attrs entries %d: must be positive", o.AttrsEntries)
	}
	if o.Streams <= 0 {
		bad("streams %d: must be positive", o.Streams)
	}
	if o.StreamIdle < 0 {
		bad("stream idle %v: must not be negative", o.StreamIdle)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid cache options: %w", errors.Join(errs...))
	}
	return nil
}
