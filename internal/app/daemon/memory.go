package daemon

import (
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// MemoryHeadroom is what serve's soft memory limit allows beyond its
// budgets: the runtime, the log engine's per-partition state, per-connection
// state, buffers not drawn from a budget.
const MemoryHeadroom = 128 << 20

// FetchMemoryHeadroom is what fetch's RSS may reach beyond its budgets
// (issue 17: a replay's RSS stays within the cache and in-flight budgets +
// 64 MiB): the runtime, the open partitions' manifests, index and stream
// caches, per-connection state. The soft memory limit is fetchRSSReserve
// below it: the runtime does not count the binary's mapped text and data,
// which RSS does.
const FetchMemoryHeadroom = 64 << 20

// fetchRSSReserve is the part of FetchMemoryHeadroom the soft memory limit
// leaves for memory the Go runtime does not count (measured: RSS peaks
// about 6 MiB above the limit on a replay).
const fetchRSSReserve = 16 << 20

// pressureMargin: the chunk cache holds less once the heap live after the
// last collection comes within this of the soft memory limit (HeapPressure).
const pressureMargin = 32 << 20

// HeapPressure returns a chunkcache MemoryPressure: by how many bytes the
// heap found live by the last garbage collection exceeds the soft memory
// limit in force less pressureMargin (0 without a limit), read at most
// every 10 ms. Chunks evicted from the cache but still written by Kafka
// responses are live and no budget counts them; under this pressure the
// cache holds less until they are written, so the heap stays under the
// limit instead of the collector running without end above it.
func HeapPressure() func() int64 {
	var (
		mu   sync.Mutex
		at   time.Time
		over int64
	)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); now.Sub(at) >= 10*time.Millisecond {
			at = now
			over = 0
			if limit := debug.SetMemoryLimit(-1); limit > 0 && limit < math.MaxInt64 {
				metrics.Read(sample)
				if sample[0].Value.Kind() == metrics.KindUint64 {
					over = max(int64(sample[0].Value.Uint64())-(limit-pressureMargin), 0)
				}
			}
		}
		return over
	}
}

// budgets is the sum of the daemon's configured memory budgets that hold
// bytes in the process: the chunk cache, the bytes being fetched, the
// Kafka responses being built or written and the produce bodies being read.
func (b *base) budgets() int64 {
	c := b.cfg
	n := int64(c.Fetch.CacheBytes) + int64(c.Fetch.MaxInFlightBytes) + int64(c.HTTP.MaxInFlightProduceBytes)
	if b.fetch {
		n += int64(c.Kafka.MaxInFlightResponseBytes)
	}
	return n
}

// MemoryLimit is the soft memory limit (runtime/debug.SetMemoryLimit) the
// daemon runs under: its budgets plus MemoryHeadroom. Without it the
// garbage collector lets the heap grow to twice what is live (GOGC=100),
// so a process full to its budgets would reach about twice them.
func (s *Serve) MemoryLimit() int64 {
	return s.budgets() + s.settings.CleanerDedupeBufferSize + MemoryHeadroom
}

// MemoryLimit is the soft memory limit fetch runs under: the budgets that
// hold its bytes — the chunk cache and the bytes being fetched into it —
// plus FetchMemoryHeadroom (issue 17's bound on a replay's RSS) less
// fetchRSSReserve. The Kafka
// responses being built or written (kafka.max_inflight_response_bytes) are
// not added: they are views of cached chunks, not copies; responses that
// keep chunks the cache has evicted make the garbage collector work harder
// under the limit rather than let the heap grow past it (GOMEMLIMIT
// overrides). fetch has no write API, so no produce budget.
func (f *Fetch) MemoryLimit() int64 {
	c := f.cfg
	return int64(c.Fetch.CacheBytes) + int64(c.Fetch.MaxInFlightBytes) + FetchMemoryHeadroom - fetchRSSReserve
}

// PretouchBytes is the memory fetch takes at start-up (fetch.pretouch,
// Pretouch): its chunk cache and in-flight budgets, what the cache holds
// when full; 0 when fetch.pretouch is off.
func (f *Fetch) PretouchBytes() int64 {
	c := f.cfg.Fetch
	if !c.Pretouch {
		return 0
	}
	return int64(c.CacheBytes) + int64(c.MaxInFlightBytes)
}

// pretouchBlock is the size of the blocks Pretouch allocates: the chunk
// cache's default chunk, so that the pages they free are taken again by
// the chunks the cache reads.
const pretouchBlock = 4 << 20

// Pretouch takes n bytes of memory for the Go heap at once and keeps them
// mapped, as a JVM with -Xms = -Xmx and -XX:+AlwaysPreTouch does: it
// allocates them, writes every page and has the kernel write it too
// (touchPages: the pages are mapped and zeroed then, not while a replay
// waits) and frees them. A new process's cold reads otherwise fault in
// every page of the chunks they cache, which measured costs them more CPU
// than the read.
//
// The pages stay only if the runtime keeps freed memory, so Pretouch runs
// only under a soft memory limit (limit) and turns the collector's GOGC
// pacing off: the heap then grows to the limit before it is collected,
// and the runtime returns memory to the system only above 95 % of the
// limit. With GOGC set (the operator's pacing) or no limit it touches
// nothing. n is capped at 90 % of the limit. It returns the bytes touched.
func Pretouch(limit, n int64, log *slog.Logger) int64 {
	if n <= 0 {
		return 0
	}
	if limit <= 0 || limit == math.MaxInt64 {
		log.Info("memory not pretouched", "reason", "no soft memory limit")
		return 0
	}
	if env := os.Getenv("GOGC"); env != "" && env != "off" {
		log.Info("memory not pretouched", "reason", "GOGC="+env+" paces the garbage collector")
		return 0
	}
	debug.SetGCPercent(-1)
	n = min(n, limit/10*9)
	start := time.Now()
	if err := TouchHeap(n); err != nil {
		log.Debug("pretouch writes the pages itself", "err", err)
	}
	log.Info("memory pretouched", "bytes", n, "took", time.Since(start).Round(time.Millisecond),
		"gc", "GOGC off: collects as the heap nears the limit")
	return n
}

// TouchHeap is Pretouch's work without its settings: it allocates n bytes
// of Go heap in pretouchBlock blocks, has every page of them mapped
// (touchPages) and collects them, so that the heap's next n bytes of
// allocations take pages already mapped. Whether the pages stay mapped
// until then is the runtime's choice (Pretouch's settings make it keep
// them). It returns the error of opening /dev/zero, when the kernel could
// not be had to write the pages (they are written by the process only).
func TouchHeap(n int64) error {
	var zero io.Reader // nil, not a nil *os.File, when /dev/zero cannot be opened
	f, err := os.Open("/dev/zero")
	if err == nil {
		defer f.Close()
		zero = f
	}
	blocks := make([][]byte, 0, n/pretouchBlock+1)
	for got := int64(0); got < n; got += pretouchBlock {
		b := make([]byte, min(pretouchBlock, n-got))
		touchPages(b, zero)
		blocks = append(blocks, b)
	}
	runtime.KeepAlive(blocks)
	runtime.GC() // blocks is dead: its pages are free (kept under Pretouch's settings)
	return err
}

// touchPages makes every page of b mapped, for the process and for the
// kernel: it writes a byte to each page, then has the kernel fill b by
// reading zero (/dev/zero) into it (skipped with zero nil or failing). On
// a paravirtualized guest (PVM, measured on a 2-core cloud VM) the first
// access to a page costs as much as a fault once for the process and once
// more for the kernel: a cache's socket reads into pages only the process
// had written cost 1.9 s/GB, into pages both had written 0.35 s/GB, and
// the runtime's zeroing of pages only the kernel had written took half of
// a cold replay's CPU. Elsewhere the kernel's fill is one more pass over
// memory already mapped.
func touchPages(b []byte, zero io.Reader) {
	page := os.Getpagesize()
	for i := 0; i < len(b); i += page {
		b[i] = 1
	}
	if zero != nil {
		_, _ = io.ReadFull(zero, b)
	}
}

// ApplyMemoryLimit sets the process's soft memory limit to limit unless
// GOMEMLIMIT is set (the operator's value wins), and logs which applies.
// It returns the limit in force.
func ApplyMemoryLimit(limit int64, log *slog.Logger) int64 {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		cur := debug.SetMemoryLimit(-1) // reads without changing
		log.Info("soft memory limit", "bytes", cur, "from", "GOMEMLIMIT="+env)
		return cur
	}
	if limit <= 0 || limit == math.MaxInt64 {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(limit)
	log.Info("soft memory limit", "bytes", limit, "from", "budgets (fetch.cache_bytes, fetch.max_inflight_bytes; serve: + kafka.max_inflight_response_bytes, http.max_inflight_produce_bytes, log.cleaner.dedupe.buffer.size) + headroom (fetch 64MiB less 16MiB for memory the runtime does not count, serve 128MiB)")
	return limit
}
