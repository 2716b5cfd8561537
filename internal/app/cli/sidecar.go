package cli

import (
	"context"
	"log/slog"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/app/daemon"
)

var sidecarCmd = &command{
	name:    "sidecar",
	summary: "beside a Kafka broker: upload its rolled segments to a bucket, continuously",
	help: `usage: tiered sidecar (--kafka-log-dir DIR --bucket URL | --config FILE) [--bootstrap-server H:P]
                      [--topics 'orders,logs-*'] [--http ADDR] [--interval DURATION] [--concurrency N] [--rate BYTES/s]
                      [--gc-grace DURATION] [--manifest-version N] [--log-level L] [--log-format F]

Runs beside a Kafka broker until SIGINT or SIGTERM. Every uploader.interval it lists the
broker's log dir (one entry of its log.dirs), and uploads each partition's rolled segments
whose offsets are all below the high watermark in replication-offset-checkpoint, committing
them to the partition's manifest in the bucket. It only reads the log dir: nothing is ever
written, renamed or locked there. A segment the broker deletes or replaces while it is
being uploaded is skipped (tiered_uploader_segments_gone_total) and never half-committed.
Orphaned objects (attempts that crashed or lost a race) are garbage-collected once older
than uploader.gc_grace.

Which topics are tiered is the policy sidecar.topics: a list of rules {match, tier,
retention.ms, retention.bytes}, tried in order; the first whose match (a topic name or a
glob: *, ?, [a-z]) accepts the topic decides; a topic no rule matches is not tiered.
retention.ms and retention.bytes are the remote (total) retention, -1 (or omitted) keeps
everything. Internal topics (__consumer_offsets, __transaction_state, ...) are tiered only
when a rule names them exactly. With no rules every non-internal topic is tiered and
nothing is deleted remotely, and a WARN says so at start-up. --topics 'orders,logs-*' is a
shorthand for rules that tier the listed topics and globs with no remote deletion.
sidecar.deleted_topic_retention (default 24h; 0 = at once; -1 = keep) is how long the
remote data of a topic the broker deleted stays in the bucket.

A topic's identity in the bucket is its topic ID (partition.metadata): a topic deleted and
re-created under the same name starts a new lineage that never mixes with the old one, and
readers serve the current ID only (topics/<topic>.json names it). A deleted topic (the
broker's metadata says so) is no longer served; the old lineage is removed after
sidecar.deleted_topic_retention. Without partition.metadata (brokers before 2.8) the name
is the identity. A bucket written before topic IDs is adopted by the first ID seen.

'tiered sidecar plan' (see 'tiered help sidecar plan') shows, without uploading anything,
what this policy does with each topic of the log dir: tiered or not and by which rule, its
topic ID, remote retention, local and uploaded bytes, lag and headroom.

Every pass reads the broker's metadata: with sidecar.bootstrap_server the cluster's
answers, else the KRaft metadata log in the log dir (__cluster_metadata-0), else
partition.metadata. With the broker's id (the log dir's meta.properties: node.id or
broker.id; optional) and the partitions' leaders from it, only the partitions this broker
leads are uploaded, so the sidecars of a cluster split the work. Segments a new leader cut
at other offsets are reconciled with the manifest: no gap, no offset twice. Without an id or
leaders, every partition with a high watermark is uploaded (conditional manifest writes keep
several sidecars safe).

Remote retention runs in every pass for the topics whose rule sets retention.ms or
retention.bytes, with Kafka's remote rules: the manifest first (a conditional write), the
objects after. The leader counts its whole log (remote and local segments) toward
retention.bytes; a sidecar that cannot tell counts the remote segments only, which never
deletes more than Kafka would.

Loss alarms: a segment the broker deleted before it was uploaded (its own retention ran
while uploads stalled) is recorded as a gap in the manifest, counted in
tiered_uploader_segments_lost_total and logged at ERROR; reads inside it are
OFFSET_OUT_OF_RANGE. Per partition, tiered_uploader_partition_lag_bytes and _lag_seconds
say what waits, tiered_uploader_retention_headroom_seconds and _bytes how long the broker's
retention leaves before it deletes the oldest of it.

With http.addr set (none by default), it serves /metrics (Prometheus), /healthz (200 while
it runs) and /readyz (200 once an upload pass succeeded and while the latest one did, else
503 with the pass's error) on that address, with http.tls and auth.tokens as serve's
(with auth.acls, /metrics needs admin).

Configuration as for serve and fetch: built-in defaults < --config FILE (YAML) < TIERED_*
environment < flags; see 'tiered config print --process sidecar --sources'. The keys:
  sidecar.kafka_log_dir      --kafka-log-dir      TIERED_SIDECAR_KAFKA_LOG_DIR (required)
  bucket                     --bucket             TIERED_BUCKET (required)
  sidecar.bootstrap_server   --bootstrap-server   TIERED_SIDECAR_BOOTSTRAP_SERVER
  sidecar.topics             --topics             TIERED_SIDECAR_TOPICS (YAML list; default none)
  sidecar.deleted_topic_retention                 TIERED_SIDECAR_DELETED_TOPIC_RETENTION (default 24h)
  http.addr                  --http               TIERED_HTTP_ADDR
  uploader.interval          --interval           TIERED_UPLOADER_INTERVAL (default 10s)
  uploader.concurrency       --concurrency        TIERED_UPLOADER_CONCURRENCY (default 4)
  uploader.bytes_per_second  --rate               TIERED_UPLOADER_BYTES_PER_SECOND (default 0)
  uploader.gc_grace          --gc-grace           TIERED_UPLOADER_GC_GRACE (default 1h)
  uploader.manifest_version  --manifest-version   TIERED_UPLOADER_MANIFEST_VERSION (default 2)
  log.level, log.format      --log-level, --log-format
The sidecar ignores data_dir, broker, fetch and the kafka listener, so one file can serve
the sidecar and fetch. An invalid configuration, or a bucket that cannot be opened, is
refused with every problem listed (exit 1; 2 when the only problems are flag values or
required flags not given); a log dir that is not a Kafka log dir or a bootstrap server that
does not answer exits 1 too. SIGTERM stops within shutdown_timeout (an
upload in flight is abandoned and garbage-collected later) and exits 0.

Flags:
  --kafka-log-dir DIR      the broker's log dir
  --bucket URL             file:///dir, mem://name[/prefix] or
                           s3://bucket[/prefix]?endpoint=...&region=...&path_style=true
  --bootstrap-server H:P   the broker's Kafka listener(s), comma-separated, to upload only
                           the partitions it leads
  --topics LIST            tier only these topics or globs, comma-separated, with no remote
                           deletion (replaces sidecar.topics)
  --http ADDR              serve /metrics, /healthz and /readyz on ADDR (e.g. :9108)
  --interval DURATION      how often to look for rolled segments (default 10s)
  --concurrency N          segments uploaded at once, 1 to 256 (default 4)
  --rate BYTES/s           throttle the bytes stored per second (default 0, unlimited;
                           units as for sizes: 10M, 512KiB, 1GB)
  --gc-grace DURATION      age from which unreferenced objects are deleted (default 1h)
  --manifest-version N     newest manifest format to write (default 2); 1 stores one object
                           per index, readable by releases before format 2 (rolling upgrades)
  --config FILE            YAML configuration file
  --log-level L, --log-format F

Examples:
  tiered sidecar --kafka-log-dir /var/lib/kafka/data --bucket 's3://logs/prod?region=eu-west-1' \
      --bootstrap-server localhost:9092 --http :9108

  # /etc/tiered/tiered.yaml:
  #   bucket: s3://logs/prod?region=eu-west-1
  #   sidecar:
  #     kafka_log_dir: /var/lib/kafka/data
  #     bootstrap_server: "localhost:9092"
  #     topics:
  #       - {match: "orders", retention.ms: 7776000000, retention.bytes: -1}
  #       - {match: "logs-*", retention.ms: 2592000000}
  #       - {match: "scratch-*", tier: false}
  #   http: {addr: ":9108"}
  tiered sidecar --config /etc/tiered/tiered.yaml
`,
	run: runSidecar,
}

func runSidecar(r *Runner, ctx context.Context, args []string) error {
	flags := []string{"kafka-log-dir", "bucket", "bootstrap-server", "topics", "http", "interval", "concurrency", "rate",
		"gc-grace", "manifest-version", "log-level", "log-format"}
	return runDaemon(r, ctx, args, config.ProcessSidecar, flags, func(cfg *config.Config, _ func() (*config.Config, error), logger *slog.Logger) (daemonRunner, error) {
		return daemon.NewSidecar(ctx, daemon.SidecarOptions{Config: cfg, Logger: logger, Now: r.Now})
	})
}
