package chunkcache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/promreg"
)

// Tier label values.
const (
	TierMemory = "memory"
	TierDisk   = "disk"
)

// Read-ahead outcome label values.
const (
	ReadAheadUseful = "useful" // read by a client before eviction
	ReadAheadWasted = "wasted" // evicted from memory unread
)

// cacheMetrics are the cache, store and read-ahead series of one
// CachingBucket (the gate series live in gate.go).
type cacheMetrics struct {
	hits, misses, evictions *prometheus.CounterVec
	bytes                   *prometheus.GaugeVec
	corrupt                 prometheus.Counter
	storeGets, storeBytes   prometheus.Counter
	continued               prometheus.Counter
	endCheckGets            prometheus.Counter
	parked                  prometheus.Gauge
	parkedUnused            prometheus.Counter
	readAhead               *prometheus.CounterVec
	cacheWait               prometheus.Histogram
}

func newCacheMetrics(reg prometheus.Registerer) *cacheMetrics {
	m := &cacheMetrics{
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_cache_hits_total",
			Help: "Chunk lookups for client reads answered by a cache tier.",
		}, []string{"tier"}),
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_cache_misses_total",
			Help: "Chunk lookups for client reads a cache tier could not answer.",
		}, []string{"tier"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_cache_evictions_total",
			Help: "Chunks evicted from a cache tier to stay within its byte bound.",
		}, []string{"tier"}),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tiered_fetch_cache_bytes",
			Help: "Bytes of chunks held by a cache tier.",
		}, []string{"tier"}),
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_cache_corrupt_chunks_total",
			Help: "Disk-tier chunk files that failed their length or checksum check and were refetched.",
		}),
		storeGets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_store_gets_total",
			Help: "Range GETs sent to the object store by the cache.",
		}),
		storeBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_store_get_bytes_total",
			Help: "Bytes received from the object store by the cache's range GETs.",
		}),
		endCheckGets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_store_gets_end_check_total",
			Help: "Range GETs of partition end checks (a final segment's tail, or index and tail, which a high watermark is checked against); counted in tiered_fetch_store_gets_total too.",
		}),
		continued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_store_gets_continued_total",
			Help: "Chunk runs read from the parked body of an earlier run's GET instead of a GET of their own.",
		}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tiered_fetch_store_gets_parked",
			Help: "GET bodies parked for the next run of their object to continue.",
		}),
		parkedUnused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_store_gets_parked_unused_total",
			Help: "Parked GET bodies closed without a run continuing them: idle past the stream idle time, evicted from a full parking, or at close.",
		}),
		readAhead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_readahead_chunks_total",
			Help: "Chunks fetched by read-ahead, by outcome: read by a client (useful) or evicted unread (wasted).",
		}, []string{"outcome"}),
		cacheWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tiered_fetch_cache_wait_seconds",
			Help:    "Time a client read waited for the store or the disk tier, gate waits included: for chunks not yet in memory (its own loads, or read-ahead's it joined), or for an uncached exact range (an end check's tail) until the store's answer began. Reads answered from memory at once are not observed.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	if reg != nil {
		m.hits = promreg.RegisterOrReuse(reg, m.hits)
		m.misses = promreg.RegisterOrReuse(reg, m.misses)
		m.evictions = promreg.RegisterOrReuse(reg, m.evictions)
		m.bytes = promreg.RegisterOrReuse(reg, m.bytes)
		m.corrupt = promreg.RegisterOrReuse(reg, m.corrupt)
		m.storeGets = promreg.RegisterOrReuse(reg, m.storeGets)
		m.storeBytes = promreg.RegisterOrReuse(reg, m.storeBytes)
		m.continued = promreg.RegisterOrReuse(reg, m.continued)
		m.endCheckGets = promreg.RegisterOrReuse(reg, m.endCheckGets)
		m.parked = promreg.RegisterOrReuse(reg, m.parked)
		m.parkedUnused = promreg.RegisterOrReuse(reg, m.parkedUnused)
		m.readAhead = promreg.RegisterOrReuse(reg, m.readAhead)
		m.cacheWait = promreg.RegisterOrReuse(reg, m.cacheWait)
	}
	for _, tier := range []string{TierMemory, TierDisk} {
		m.hits.WithLabelValues(tier)
		m.misses.WithLabelValues(tier)
		m.evictions.WithLabelValues(tier)
		m.bytes.WithLabelValues(tier)
	}
	m.readAhead.WithLabelValues(ReadAheadUseful)
	m.readAhead.WithLabelValues(ReadAheadWasted)
	return m
}
