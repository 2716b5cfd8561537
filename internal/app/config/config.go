package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/fleet"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/policy"
)

// Built-in defaults. Listeners bind to loopback so a default process is reachable only from
// the machine it runs on; set http.addr / kafka.addr (and kafka.advertised_addr) to serve others.
// The uploader's defaults are remotetier's own (the constants of the component that uses them),
// so the configuration and a zero remotetier.Options mean the same.
const (
	DefaultDataDir         = "./data"
	DefaultHTTPAddr        = "127.0.0.1:8080"
	DefaultKafkaAddr       = "127.0.0.1:9092"
	DefaultLogLevel        = "info"
	DefaultLogFormat       = "text"
	DefaultShutdownTimeout = 30 * time.Second

	// DefaultSidecarHTTPAddr is the sidecar's http.addr: empty, no listener unless one is
	// configured (it runs beside a broker whose host may use any port). The sidecar has no
	// Kafka listener at all: it ignores the kafka section.
	DefaultSidecarHTTPAddr = ""

	DefaultUploaderConcurrency     = remotetier.DefaultConcurrency
	DefaultUploaderInterval        = remotetier.DefaultInterval
	DefaultUploaderGCGrace         = remotetier.DefaultGCGrace
	DefaultUploaderManifestVersion = remotetier.DefaultManifestVersion

	// The fetch defaults are the caching bucket's own (fetchcache/chunkcache).
	DefaultFetchCacheBytes        = chunkcache.DefaultMemoryBytes
	DefaultFetchChunkBytes        = chunkcache.DefaultChunkBytes
	DefaultFetchMaxConcurrentGets = chunkcache.DefaultMaxConcurrentGets
	DefaultFetchMaxInFlightBytes  = chunkcache.DefaultInFlightChunks * DefaultFetchChunkBytes
	DefaultFetchMaxWait           = chunkcache.DefaultMaxWait
	DefaultFetchReadAheadChunks   = chunkcache.DefaultReadAheadChunks
	DefaultFetchPeerLease         = fleet.DefaultLease // the fleet's own (fetchcache/fleet)

	// The http listener's limits are the server's and the API's own.
	DefaultHTTPReadHeaderTimeout       = server.DefaultHTTPReadHeaderTimeout
	DefaultHTTPBodyReadTimeout         = httpapi.DefaultBodyReadTimeout
	DefaultHTTPWriteTimeout            = httpapi.DefaultWriteTimeout
	DefaultHTTPIdleTimeout             = server.DefaultHTTPIdleTimeout
	DefaultHTTPMaxConnections          = server.DefaultHTTPMaxConnections
	DefaultHTTPMaxConnectionsPerIP     = server.DefaultHTTPMaxConnectionsPerIP
	DefaultHTTPMaxInFlightProduceBytes = httpapi.DefaultMaxInFlightProduceBytes

	// The kafka listener's defaults are the listener's own (fetchcache/kafkasrv).
	DefaultKafkaIdleTimeout              = kafkasrv.DefaultKafkaIdleTimeout
	DefaultKafkaRequestReadTimeout       = kafkasrv.DefaultKafkaRequestReadTimeout
	DefaultKafkaSASLTimeout              = kafkasrv.DefaultKafkaSASLTimeout
	DefaultKafkaMaxConnections           = kafkasrv.DefaultKafkaMaxConnections
	DefaultKafkaMaxConnectionsPerIP      = kafkasrv.DefaultKafkaMaxConnectionsPerIP
	DefaultKafkaMaxInFlightResponseBytes = kafkasrv.DefaultKafkaMaxInFlightResponseBytes
	DefaultKafkaMaxFetchPartitions       = kafkasrv.DefaultKafkaMaxFetchPartitions
	DefaultKafkaFetchFillConcurrency     = kafkasrv.DefaultKafkaFetchFillConcurrency
	DefaultKafkaFetchMaxBytes            = kafkasrv.DefaultKafkaFetchMaxBytes

	// The consumer-group coordinator's: Kafka's broker defaults (fetchcache/groups).
	DefaultGroupsInitialRebalanceDelay = groups.DefaultInitialRebalanceDelay
	DefaultGroupsMinSessionTimeout     = groups.DefaultMinSessionTimeout
	DefaultGroupsMaxSessionTimeout     = groups.DefaultMaxSessionTimeout
	DefaultGroupsOffsetsRetention      = groups.DefaultOffsetsRetention
	DefaultGroupsMaxSize               = groups.DefaultMaxGroupSize
)

// Config is the configuration of a long-running tiered process. Not every process reads every
// section: fetch ignores the broker and uploader sections, sidecar the local log engine's
// (data_dir, broker), the kafka listener and the fetch section.
// Start from Defaults (or Load); the zero Config is not valid.
type Config struct {
	// DataDir is serve's local-tier data directory (flag --data-dir, default ./data). One
	// process holds it at a time.
	DataDir string `yaml:"data_dir"`
	// Bucket is the object-store URL (flag --bucket): file:///dir, mem://name or
	// s3://bucket/prefix?endpoint=...&region=...&path_style=true. Empty means
	// file://<absolute data_dir>/bucket, filled in by Load.
	Bucket string `yaml:"bucket"`
	// HTTP is the HTTP listener: API, /metrics, /healthz, /readyz.
	HTTP HTTPListener `yaml:"http"`
	// Kafka is the Kafka-protocol fetch listener.
	Kafka KafkaListener `yaml:"kafka"`
	// Sidecar locates the Kafka broker a sidecar runs beside.
	Sidecar Sidecar `yaml:"sidecar"`
	// Log configures the process's structured logs.
	Log Log `yaml:"log"`
	// LocalTier configures serve's log engine over data_dir.
	LocalTier LocalTier `yaml:"localtier"`
	// Broker holds Kafka broker configs by their Kafka names: broker-wide topic defaults
	// (log.retention.hours, log.segment.bytes, ...), the log cleaner (log.cleaner.*), the
	// retention loop (log.retention.check.interval.ms), auto.create.topics.enable and
	// num.partitions. Values are Kafka's strings; see BrokerConfigNames.
	Broker map[string]string `yaml:"broker"`
	// Uploader configures the copy of rolled segments to the bucket and orphan collection.
	Uploader Uploader `yaml:"uploader"`
	// Fetch configures the fetch service's cache and overload gates.
	Fetch Fetch `yaml:"fetch"`
	// Auth configures authentication and per-principal topic allow-lists.
	Auth Auth `yaml:"auth"`
	// Groups configures the consumer-group coordinator of the Kafka listener (fetch, serve).
	Groups Groups `yaml:"groups"`
	// ShutdownTimeout bounds a graceful stop after SIGTERM (default 30s).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`

	meta *meta // where each value came from; nil for a Config built by hand
}

// HTTPListener is the HTTP listener.
type HTTPListener struct {
	// Addr is host:port (flag --http, default 127.0.0.1:8080). Port 0 picks a free port.
	Addr string `yaml:"addr"`
	TLS  TLS    `yaml:"tls"`
	// ReadHeaderTimeout bounds the arrival of a request's headers (default 10s).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// BodyReadTimeout bounds the arrival of a request's body (default 1m): a write route's
	// slower body is answered 408 REQUEST_TIMED_OUT and its connection closed; a body another
	// route does not read is discarded within it, else the connection is closed.
	BodyReadTimeout time.Duration `yaml:"body_read_timeout"`
	// WriteTimeout bounds each write of a read route's response (default 30s; the deadline
	// moves with the writes): a client that stops reading is disconnected.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection with no request for this long (default 2m).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections bounds open connections (default 4096); more are closed at once and
	// counted in tiered_fetch_connections_refused_total.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP bounds the open connections of one client IP (default 1024).
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
	// MaxInFlightProduceBytes is the one budget, across all requests, for produce body
	// bytes from their read until they are appended (serve; default 128MiB, two bodies of
	// the largest size). A body that cannot get it within fetch.max_wait is answered 429
	// THROTTLED with Retry-After. A body counts as the larger of its bytes and its records'
	// encoded batches, which serve holds until it appends them (for the smallest records,
	// 2.7 times the body). A body already read that needs more for its records gets it
	// before new bodies; when every byte of the budget is held by such bodies waiting for
	// more, the last to ask is answered 429 at once, so the others can finish.
	MaxInFlightProduceBytes ByteSize `yaml:"max_inflight_produce_bytes"`
}

// KafkaListener is the Kafka-protocol listener.
type KafkaListener struct {
	// Addr is host:port (flag --kafka, default 127.0.0.1:9092); empty disables the listener.
	Addr string `yaml:"addr"`
	// AdvertisedAddr is the host:port returned to clients in Metadata (flag
	// --advertised-addr); empty means Addr. Required when Addr binds all interfaces.
	AdvertisedAddr string `yaml:"advertised_addr"`
	TLS            TLS    `yaml:"tls"`
	// IdleTimeout closes a connection on which no request begins for this long (Kafka's
	// connections.max.idle.ms; default 10m).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// RequestReadTimeout bounds the arrival of one request, from its first byte to its last
	// (default 30s): a half-sent request cannot hold its buffer longer.
	RequestReadTimeout time.Duration `yaml:"request_read_timeout"`
	// SASLTimeout bounds the time from accepting a connection to finishing SASL/PLAIN, when
	// auth.sasl_plain requires it (default 30s).
	SASLTimeout time.Duration `yaml:"sasl_timeout"`
	// MaxConnections bounds open client connections (default 4096); more are closed at once
	// and counted in tiered_fetch_connections_refused_total.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP bounds the open connections of one client IP (Kafka's
	// max.connections.per.ip; default 1024), so one host cannot lock the others out.
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
	// MaxInFlightResponseBytes is the one budget, across all connections, for the record
	// batches of Fetch responses from their read until they are written (default 256MiB). A
	// Fetch that cannot get any of it within its max wait is throttled (throttle_time_ms);
	// one that got some answers what it has.
	MaxInFlightResponseBytes ByteSize `yaml:"max_inflight_response_bytes"`
	// MaxFetchPartitions bounds the distinct partitions one Fetch may name (repeats collapse,
	// as in Kafka; default 10000); a larger Fetch is refused with INVALID_REQUEST.
	MaxFetchPartitions int `yaml:"max_fetch_partitions"`
	// FetchFillConcurrency bounds the partitions of one Fetch read at once (default 16, the
	// fetch section's default max_concurrent_gets): a Fetch's remote partitions are filled in
	// parallel.
	FetchFillConcurrency int `yaml:"fetch_fill_concurrency"`
	// FetchMaxBytes caps the record bytes of one Fetch response, whatever the client's max
	// bytes (Kafka's broker fetch.max.bytes; default 55MiB, at least 1KiB). A Fetch still
	// gets its first batch whole when that batch is larger (KIP-74).
	FetchMaxBytes ByteSize `yaml:"fetch_max_bytes"`
}

// Groups configures the consumer-group coordinator (Kafka's group.* and offsets.* broker
// configs of the same meaning).
type Groups struct {
	// InitialRebalanceDelay is how long the first rebalance of an empty group waits for more
	// members, extended by as much again while members keep arriving, up to the rebalance
	// timeout (group.initial.rebalance.delay.ms; default 3s; 0: none).
	InitialRebalanceDelay time.Duration `yaml:"initial_rebalance_delay"`
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a member may ask for
	// (group.min/max.session.timeout.ms; default 6s and 30m); outside them JoinGroup answers
	// INVALID_SESSION_TIMEOUT.
	MinSessionTimeout time.Duration `yaml:"min_session_timeout"`
	MaxSessionTimeout time.Duration `yaml:"max_session_timeout"`
	// OffsetsRetention is how long a group's committed offsets outlive its last member
	// (offsets.retention.minutes; default 168h).
	OffsetsRetention time.Duration `yaml:"offsets_retention"`
	// MaxSize bounds the members of one group, counting those told to rejoin with their new
	// member id (group.max.size; default 1000 — Kafka's is unbounded); past it a new member
	// gets GROUP_MAX_SIZE_REACHED.
	MaxSize int `yaml:"max_size"`
}

// The listener security settings are the fetch service's own types
// (fetchcache/auth), embedded here so the loader, the validator and the
// printer see them like every other section.
type (
	TLS       = auth.TLS
	Auth      = auth.Settings
	Token     = auth.Token
	PlainUser = auth.PlainUser
	Secret    = auth.Secret
	ACL       = auth.ACL
)

// Sidecar locates the Kafka broker a sidecar reads.
type Sidecar struct {
	// KafkaLogDir is the broker's log.dirs directory, read only (flag --kafka-log-dir).
	KafkaLogDir string `yaml:"kafka_log_dir"`
	// BootstrapServer is the broker's host:port list, comma-separated (flag
	// --bootstrap-server). When set, the sidecar asks the cluster on every pass which
	// partitions its broker (node.id or broker.id in the log dir's meta.properties) leads,
	// and uploads only those.
	BootstrapServer string `yaml:"bootstrap_server"`
	// DeletedTopicRetention is how long the remote data of a topic the broker deleted stays in
	// the bucket (default 24h; 0 removes it at once; -1 keeps it).
	DeletedTopicRetention RetentionDuration `yaml:"deleted_topic_retention"`
	// Topics are the per-topic policy rules (flag --topics 'orders,logs-*' for rules that
	// tier the named topics with no remote deletion): first match wins, no match is not
	// tiered, internal topics (__*) only when a rule names them exactly. With no rules every
	// non-internal topic is tiered and nothing is deleted remotely (a WARN at start-up).
	// See remotetier/policy.
	Topics []TopicRule `yaml:"topics"`
}

// TopicRule is one sidecar.topics rule: {match, tier, retention.ms, retention.bytes}.
type TopicRule = policy.Rule

// DefaultDeletedTopicRetention is sidecar.deleted_topic_retention's default.
const DefaultDeletedTopicRetention = RetentionDuration(24 * time.Hour)

// KeepForever is the RetentionDuration -1: never remove.
const KeepForever = RetentionDuration(-1)

// RetentionDuration is a duration that may also be -1, "keep forever" (written -1 in YAML,
// environment and flags; other values as durations: 24h, 30m, 0).
type RetentionDuration time.Duration

// Keep reports whether d is -1 (never remove).
func (d RetentionDuration) Keep() bool { return d == KeepForever }

// String is "-1" or the duration's own form.
func (d RetentionDuration) String() string {
	if d.Keep() {
		return "-1"
	}
	return time.Duration(d).String()
}

// MarshalYAML prints d as String does (config print).
func (d RetentionDuration) MarshalYAML() (any, error) {
	if d.Keep() {
		return -1, nil
	}
	return d.String(), nil
}

// Policy returns the sidecar.topics rules as a policy (Validate has checked them).
func (s Sidecar) Policy() (*policy.Policy, error) { return policy.New(s.Topics) }

// LocalTier configures serve's log engine.
type LocalTier struct {
	// MaxOpenFiles bounds the file descriptors the data dir's partitions hold: the files
	// of idle segments are closed, least recently used first, and reopened on demand
	// (localtier.FileTable). 0 (the default) is half of the process's RLIMIT_NOFILE soft
	// limit, leaving the rest to sockets; -1 is no bound.
	MaxOpenFiles int `yaml:"max_open_files"`
}

// Log configures log/slog output.
type Log struct {
	// Level is debug, info, warn or error (default info).
	Level string `yaml:"level"`
	// Format is text or json (default text).
	Format string `yaml:"format"`
}

// Uploader configures the remote-tier uploader.
type Uploader struct {
	// Concurrency is how many segments upload at once (default 4).
	Concurrency int `yaml:"concurrency"`
	// BytesPerSecond caps upload throughput; 0 means unlimited.
	BytesPerSecond ByteSize `yaml:"bytes_per_second"`
	// Interval is the pause between upload passes (default 10s).
	Interval time.Duration `yaml:"interval"`
	// GCGrace is how old an object no manifest references must be before garbage collection
	// deletes it (default 1h). It must exceed the longest upload, or an upload whose manifest
	// commit is still coming loses its data.
	GCGrace time.Duration `yaml:"gc_grace"`
	// ManifestVersion is the newest manifest format version the uploader writes (default 2):
	// 1 stores one object per index, readable by releases before format 2, for a rolling
	// upgrade until every reader is upgraded.
	ManifestVersion int `yaml:"manifest_version"`
}

// Fetch configures the fetch service.
type Fetch struct {
	// CacheBytes bounds the in-memory chunk cache (flag --cache-bytes, default 512MiB).
	CacheBytes ByteSize `yaml:"cache_bytes"`
	// ChunkBytes is the aligned range-GET size (flag --chunk-bytes, default 4MiB).
	ChunkBytes ByteSize `yaml:"chunk_bytes"`
	// CacheDir enables a disk chunk cache (flag --cache-dir); needs DiskCacheBytes.
	CacheDir string `yaml:"cache_dir"`
	// DiskCacheBytes bounds the disk cache (flag --disk-cache-bytes).
	DiskCacheBytes ByteSize `yaml:"disk_cache_bytes"`
	// MaxConcurrentGets bounds requests in flight against the bucket: chunk
	// GETs, HEADs and manifest reads (default 16). Read-ahead GET bodies
	// parked for a stream's next chunks (ParkedGets) are not counted while
	// they wait.
	MaxConcurrentGets int `yaml:"max_concurrent_gets"`
	// ParkedGets bounds the GET bodies parked for a sequential reader's next
	// chunks, each an open connection to the store (default 0: 8 ×
	// max_concurrent_gets; -1: none, every run of chunks is a GET of its own).
	ParkedGets int `yaml:"parked_gets"`
	// MaxInFlightBytes bounds bytes being fetched at once (default 64MiB, at least one chunk).
	MaxInFlightBytes ByteSize `yaml:"max_inflight_bytes"`
	// MaxWait bounds how long a request waits for the gates before it is throttled
	// (HTTP 429 / Kafka throttle; default 2s).
	MaxWait time.Duration `yaml:"max_wait"`
	// ReadAheadChunks is how many chunks past a sequential read are prefetched (default 4;
	// 0 disables).
	ReadAheadChunks int `yaml:"readahead_chunks"`
	// Peers are the fetch fleet's replicas (env TIERED_FETCH_PEERS): a list of advertised
	// Kafka addresses (this replica's kafka.advertised_addr among them), or one host:port
	// whose host is a DNS name resolving to every replica, as a Kubernetes headless service
	// does. A single string is one entry; empty (the default) means alone: this replica
	// coordinates every consumer group.
	Peers PeerList `yaml:"peers"`
	// PeerLease is how long a replica counts as alive after its lease object in the bucket
	// last changed (default 10s, at least 500ms); leases are renewed every PeerLease/5, and a
	// killed coordinator's groups move within 1.4 × PeerLease.
	PeerLease time.Duration `yaml:"peer_lease"`
	// Pretouch makes `tiered fetch` take the memory of its cache and in-flight budgets at
	// start-up and keep it (default true; serve ignores it): it touches that much heap once,
	// then runs its garbage collector from the soft memory limit alone (GOGC off unless
	// GOGC is set), as a JVM with -Xms = -Xmx and -XX:+AlwaysPreTouch. A cold read then
	// lands in pages already mapped instead of faulting in and zeroing new ones, which cost
	// a replay more CPU than the read itself. Off, RSS grows with the cache instead.
	Pretouch bool `yaml:"pretouch"`
}

// PeerList is fetch.peers: a YAML list, or a single string (one address or DNS name).
type PeerList []string

// Defaults returns the built-in configuration: Kafka's defaults for the broker keys that have
// a non-null default, and loopback listeners. Bucket is left empty (Load derives it from
// DataDir).
func Defaults() Config {
	c := Config{
		DataDir: DefaultDataDir,
		HTTP: HTTPListener{
			Addr:                    DefaultHTTPAddr,
			ReadHeaderTimeout:       DefaultHTTPReadHeaderTimeout,
			BodyReadTimeout:         DefaultHTTPBodyReadTimeout,
			WriteTimeout:            DefaultHTTPWriteTimeout,
			IdleTimeout:             DefaultHTTPIdleTimeout,
			MaxConnections:          DefaultHTTPMaxConnections,
			MaxConnectionsPerIP:     DefaultHTTPMaxConnectionsPerIP,
			MaxInFlightProduceBytes: DefaultHTTPMaxInFlightProduceBytes,
		},
		Kafka: KafkaListener{
			Addr:                     DefaultKafkaAddr,
			IdleTimeout:              DefaultKafkaIdleTimeout,
			RequestReadTimeout:       DefaultKafkaRequestReadTimeout,
			SASLTimeout:              DefaultKafkaSASLTimeout,
			MaxConnections:           DefaultKafkaMaxConnections,
			MaxConnectionsPerIP:      DefaultKafkaMaxConnectionsPerIP,
			MaxInFlightResponseBytes: DefaultKafkaMaxInFlightResponseBytes,
			MaxFetchPartitions:       DefaultKafkaMaxFetchPartitions,
			FetchFillConcurrency:     DefaultKafkaFetchFillConcurrency,
			FetchMaxBytes:            DefaultKafkaFetchMaxBytes,
		},
		Log:    Log{Level: DefaultLogLevel, Format: DefaultLogFormat},
		Broker: map[string]string{},
		Uploader: Uploader{
			Concurrency:     DefaultUploaderConcurrency,
			Interval:        DefaultUploaderInterval,
			GCGrace:         DefaultUploaderGCGrace,
			ManifestVersion: DefaultUploaderManifestVersion,
		},
		Fetch: Fetch{
			CacheBytes:        DefaultFetchCacheBytes,
			ChunkBytes:        DefaultFetchChunkBytes,
			MaxConcurrentGets: DefaultFetchMaxConcurrentGets,
			MaxInFlightBytes:  DefaultFetchMaxInFlightBytes,
			MaxWait:           DefaultFetchMaxWait,
			ReadAheadChunks:   DefaultFetchReadAheadChunks,
			PeerLease:         DefaultFetchPeerLease,
			Pretouch:          true,
		},
		Sidecar: Sidecar{DeletedTopicRetention: DefaultDeletedTopicRetention},
		Groups: Groups{
			InitialRebalanceDelay: DefaultGroupsInitialRebalanceDelay,
			MinSessionTimeout:     DefaultGroupsMinSessionTimeout,
			MaxSessionTimeout:     DefaultGroupsMaxSessionTimeout,
			OffsetsRetention:      DefaultGroupsOffsetsRetention,
			MaxSize:               DefaultGroupsMaxSize,
		},
		ShutdownTimeout: DefaultShutdownTimeout,
		meta:            newMeta(),
	}
	for i := range brokerDefs {
		if d := &brokerDefs[i]; d.def != "" {
			c.Broker[d.name] = d.def
		}
	}
	return c
}

// DefaultsFor returns the built-in configuration of process p: Defaults, with the sidecar's
// listeners (DefaultSidecarHTTPAddr; no Kafka listener).
func DefaultsFor(p Process) Config {
	c := Defaults()
	if p == ProcessSidecar {
		c.HTTP.Addr = DefaultSidecarHTTPAddr
		c.Kafka.Addr = ""
	}
	return c
}

// ByteSize is a size in bytes. In YAML, the environment and flags it is an integer, optionally
// followed by a unit: KiB, MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB (powers of 1000), or
// the single letters K, M, G, T (powers of 1024, as in --rate 10M), e.g. 4MiB. Units are case
// insensitive. It prints as a plain integer.
type ByteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1},
}

// ParseByteSize parses "4194304", "4MiB", "512 KiB", "1GB" or "10M". Negative values parse (Validate
// refuses them where a size must not be negative).
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(lower, u.suffix) {
			mult = u.mult
			t = strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (want bytes as an integer, optionally with a unit: 4MiB, 512KiB, 1GB, 10M)", s)
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return ByteSize(n * mult), nil
}

// UnmarshalYAML accepts an integer or a size with a unit, so ByteSize also decodes with
// yaml.Unmarshal directly.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a size in bytes", n.Line)}}
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*b = v
	return nil
}
