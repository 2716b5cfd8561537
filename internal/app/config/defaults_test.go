package config_test

import (
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/fleet"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/remotetier"
)

// TestDefaultsAreTheComponents ties every built-in default that a component also has to the
// component's own: a process configured with nothing behaves as the component does with zero
// options. The fetch defaults are compared with what fetchcache/chunkcache fills into zero CacheOptions
// (the package constants and the derived in-flight budget alike).
func TestDefaultsAreTheComponents(t *testing.T) {
	d := config.Defaults()
	cache := chunkcache.CacheOptions{}.EnsureDefaults()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"uploader.concurrency", d.Uploader.Concurrency, remotetier.DefaultConcurrency},
		{"uploader.interval", d.Uploader.Interval, remotetier.DefaultInterval},
		{"uploader.gc_grace", d.Uploader.GCGrace, remotetier.DefaultGCGrace},
		{"uploader.manifest_version", d.Uploader.ManifestVersion, remotetier.DefaultManifestVersion},
		{"uploader.bytes_per_second", int64(d.Uploader.BytesPerSecond), int64(0)}, // remotetier: 0 is unlimited
		{"fetch.cache_bytes", int64(d.Fetch.CacheBytes), cache.MemoryBytes},
		{"fetch.chunk_bytes", int64(d.Fetch.ChunkBytes), cache.ChunkBytes},
		{"fetch.max_concurrent_gets", d.Fetch.MaxConcurrentGets, cache.MaxConcurrentGets},
		{"fetch.max_inflight_bytes", int64(d.Fetch.MaxInFlightBytes), cache.MaxInFlightBytes},
		{"fetch.max_wait", d.Fetch.MaxWait, cache.MaxWait},
		{"fetch.readahead_chunks", d.Fetch.ReadAheadChunks, cache.ReadAheadChunks},
		{"fetch.peer_lease", d.Fetch.PeerLease, fleet.DefaultLease},
		{"fetch.disk_cache_bytes", int64(d.Fetch.DiskCacheBytes), cache.DiskBytes},
		{"kafka.idle_timeout", d.Kafka.IdleTimeout, kafkasrv.DefaultKafkaIdleTimeout},
		{"groups.initial_rebalance_delay", d.Groups.InitialRebalanceDelay, groups.DefaultInitialRebalanceDelay},
		{"groups.min_session_timeout", d.Groups.MinSessionTimeout, groups.DefaultMinSessionTimeout},
		{"groups.max_session_timeout", d.Groups.MaxSessionTimeout, groups.DefaultMaxSessionTimeout},
		{"groups.offsets_retention", d.Groups.OffsetsRetention, groups.DefaultOffsetsRetention},
		{"groups.max_size", d.Groups.MaxSize, groups.DefaultMaxGroupSize},
		{"kafka.request_read_timeout", d.Kafka.RequestReadTimeout, kafkasrv.DefaultKafkaRequestReadTimeout},
		{"kafka.sasl_timeout", d.Kafka.SASLTimeout, kafkasrv.DefaultKafkaSASLTimeout},
		{"kafka.max_connections", d.Kafka.MaxConnections, kafkasrv.DefaultKafkaMaxConnections},
		{"kafka.max_connections_per_ip", d.Kafka.MaxConnectionsPerIP, kafkasrv.DefaultKafkaMaxConnectionsPerIP},
		{"kafka.max_inflight_response_bytes", int64(d.Kafka.MaxInFlightResponseBytes), int64(kafkasrv.DefaultKafkaMaxInFlightResponseBytes)},
		{"kafka.max_fetch_partitions", d.Kafka.MaxFetchPartitions, kafkasrv.DefaultKafkaMaxFetchPartitions},
		{"kafka.fetch_fill_concurrency", d.Kafka.FetchFillConcurrency, kafkasrv.DefaultKafkaFetchFillConcurrency},
		{"kafka.fetch_max_bytes", int64(d.Kafka.FetchMaxBytes), int64(kafkasrv.DefaultKafkaFetchMaxBytes)},
		{"http.read_header_timeout", d.HTTP.ReadHeaderTimeout, server.DefaultHTTPReadHeaderTimeout},
		{"http.body_read_timeout", d.HTTP.BodyReadTimeout, httpapi.DefaultBodyReadTimeout},
		{"http.write_timeout", d.HTTP.WriteTimeout, httpapi.DefaultWriteTimeout},
		{"http.idle_timeout", d.HTTP.IdleTimeout, server.DefaultHTTPIdleTimeout},
		{"http.max_connections", d.HTTP.MaxConnections, server.DefaultHTTPMaxConnections},
		{"http.max_connections_per_ip", d.HTTP.MaxConnectionsPerIP, server.DefaultHTTPMaxConnectionsPerIP},
		{"http.max_inflight_produce_bytes", int64(d.HTTP.MaxInFlightProduceBytes), int64(httpapi.DefaultMaxInFlightProduceBytes)},
		// The constants config exports are the ones Defaults uses.
		{"DefaultFetchCacheBytes", int64(config.DefaultFetchCacheBytes), int64(chunkcache.DefaultMemoryBytes)},
		{"DefaultFetchChunkBytes", int64(config.DefaultFetchChunkBytes), int64(chunkcache.DefaultChunkBytes)},
		{"DefaultFetchMaxConcurrentGets", config.DefaultFetchMaxConcurrentGets, chunkcache.DefaultMaxConcurrentGets},
		{"DefaultFetchMaxInFlightBytes", int64(config.DefaultFetchMaxInFlightBytes), int64(chunkcache.DefaultInFlightChunks * chunkcache.DefaultChunkBytes)},
		{"DefaultFetchMaxWait", time.Duration(config.DefaultFetchMaxWait), chunkcache.DefaultMaxWait},
		{"DefaultFetchReadAheadChunks", config.DefaultFetchReadAheadChunks, chunkcache.DefaultReadAheadChunks},
	} {
		if c.got != c.want {
			t.Errorf("%s: config default %v (%T), component default %v (%T)", c.name, c.got, c.got, c.want, c.want)
		}
	}
}
