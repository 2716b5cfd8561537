package cli

import (
	"context"
	"log/slog"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/app/daemon"
)

var fetchCmd = &command{
	name:    "fetch",
	summary: "run the stateless fetch service over a bucket (HTTP and Kafka protocol)",
	help: `usage: tiered fetch --bucket URL [--http ADDR] [--kafka ADDR] [--advertised-addr H:P]
                    [--cache-bytes N] [--chunk-bytes N] [--cache-dir DIR --disk-cache-bytes N]
                    [--config FILE] [--log-level L] [--log-format text|json]

Serves every partition committed to the bucket, by offset or timestamp, without a broker,
until SIGINT or SIGTERM: reads follow the partitions' manifests (never LIST; topic
discovery lists the manifests prefix, cached), and data comes through a byte-bounded
chunk cache in memory (and optionally on disk) with read-ahead, gates on concurrent GETs
and in-flight bytes, and an overload answer (HTTP 429 THROTTLED / Kafka throttle) instead
of unbounded memory. The only thing it writes to the bucket is consumer-group state —
committed offsets, one object per group under groups/ (conditional PUTs) — so several can
run behind a load balancer. Reads need only read access (S3 credentials that may only read,
a file:// directory it may only read): then every read is still served and the group APIs
answer COORDINATOR_NOT_AVAILABLE (a WARN says so at start-up).

HTTP: GET /v1/topics, /v1/topics/T/partitions/P, /v1/topics/T/partitions/P/records
?offset=N|timestamp=MS&max_bytes=N (JSON lines, or raw batches with Accept:
application/octet-stream), /metrics, /healthz, /readyz. Kafka: ApiVersions, Metadata,
ListOffsets and Fetch, enough for any consumer reading assigned partitions (kcat -C, a
franz-go or Java consumer with assign()), and the classic consumer-group protocol
(FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
DescribeGroups, ListGroups, DeleteGroups, OffsetDelete) for subscribe() consumers: client-side
assignors, static membership, Kafka's session/rebalance timeouts (initial rebalance delay
3s), commits durable in the bucket before they are acknowledged, expired 7 days after a
group empties (offsets.retention.minutes). With auth.acls a principal reads the topics its
entry allows and uses the groups its groups patterns allow, and /metrics needs admin
(README, "Authorization").

Fleet: fetch.peers (config file, or TIERED_FETCH_PEERS) lists the replicas' advertised
Kafka addresses (this one's --advertised-addr among them), or is one DNS name resolving to
all of them (a Kubernetes headless Service); empty, this replica coordinates every
consumer group. Each replica keeps a lease in the bucket (groups/.fleet/, rewritten every
fetch.peer_lease/5, deleted on SIGTERM); each group is coordinated by one live replica
(rendezvous hashing), which FindCoordinator on any replica names. A killed coordinator's
groups move to another replica within 1.4 x fetch.peer_lease (default lease 10s: 14s).
Group administration: GET /v1/groups[/G], POST /v1/groups/G/reset-offsets, DELETE
/v1/groups/G ('tiered help groups').

Configuration as for serve (defaults < --config FILE < TIERED_* < flags); an invalid
configuration or a bucket that cannot be opened is refused with every problem listed
(exit 1; 2 when the only problems are flag values or a required flag not given). SIGTERM finishes in-flight requests within shutdown_timeout and exits 0.

Flags:
  --bucket URL             file:///dir, mem://name or s3://bucket/prefix?endpoint=...&region=... (required)
  --http ADDR              HTTP listener (default 127.0.0.1:8080)
  --kafka ADDR             Kafka-protocol listener (default 127.0.0.1:9092)
  --advertised-addr H:P    address Kafka Metadata advertises (default: the one reached)
  --cache-bytes N          memory cache bound (default 512MiB; units KiB, MiB, GiB, KB, ...)
  --chunk-bytes N          aligned range-GET size (default 4MiB)
  --cache-dir DIR          also cache chunks on disk in DIR (needs --disk-cache-bytes)
  --disk-cache-bytes N     disk cache bound
  --config FILE            YAML configuration file
  --log-level L, --log-format F

Example:
  tiered fetch --bucket 's3://logs/tiered?region=eu-west-1' --http :8080 --kafka :9092 \
      --advertised-addr fetch.internal:9092 --cache-bytes 2GiB
`,
	run: runFetch,
}

func runFetch(r *Runner, ctx context.Context, args []string) error {
	flags := []string{"bucket", "http", "kafka", "advertised-addr", "cache-bytes", "chunk-bytes",
		"cache-dir", "disk-cache-bytes", "log-level", "log-format"}
	return runDaemon(r, ctx, args, config.ProcessFetch, flags, func(cfg *config.Config, _ func() (*config.Config, error), logger *slog.Logger) (daemonRunner, error) {
		return daemon.NewFetch(ctx, daemon.FetchOptions{Config: cfg, Logger: logger})
	})
}
