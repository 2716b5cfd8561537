package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/brokermeta"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/policy"
	"github.com/tiered/tiered/remotetier/remotelog"
)

var sidecarPlanCmd = &command{
	name:    "sidecar plan",
	summary: "what the sidecar does with each topic of a broker's log dir: tiered or not, lag, headroom",
	help: `usage: tiered sidecar plan (--kafka-log-dir DIR | --config FILE) [--bucket URL]
                           [--bootstrap-server H:P] [--topics LIST] [--json]

For each topic in the broker's log dir (read only, like the sidecar): whether the sidecar
tiers it and by which rule of sidecar.topics (or why not), its topic ID, the remote retention
the rule gives, and the broker's own settings that bound the upload (cleanup.policy,
retention.ms, retention.bytes: the local window), then per topic (summed over its
partitions) the local bytes, the bytes uploaded (from the partitions' manifests: one GET
each, no LIST; '-' without a bucket), the lag (rolled segments not yet uploaded: bytes and
count) and the headroom: the time (and the bytes of growth) before the broker's retention
deletes the oldest segment not yet uploaded ('-': no bound; 0: it is due now, data is about
to be lost). Then one line per topic the broker's metadata says was deleted (name, ID, the
metadata offset of the removal, when). The broker's view comes from --bootstrap-server when given, else the log dir's
KRaft metadata log (__cluster_metadata-0), else partition.metadata with Kafka's defaults
(the 'source' line says which).

The configuration is the sidecar's (tiered config print --process sidecar): the same file,
TIERED_* variables and flags; the bucket is optional here.

Flags:
  --kafka-log-dir DIR      the broker's log dir (sidecar.kafka_log_dir)
  --bucket URL             the sidecar's bucket, to read the uploaded bytes
  --bootstrap-server H:P   ask the cluster for topics, IDs and configs
  --topics LIST            the --topics shorthand of tiered sidecar
  --config FILE            YAML configuration file
  --json                   {"source": ..., "bucket": ..., "topics": [{..., "partitions": [...]}],
                           "deleted": [{"topic", "topic_id", "metadata_offset", "deleted_at_ms"}]}

Examples:
  tiered sidecar plan --config /etc/tiered/tiered.yaml
  tiered sidecar plan --kafka-log-dir /var/lib/kafka/data --topics 'orders,logs-*' --json
`,
	run: runSidecarPlan,
}

// planTopic is one topic of `sidecar plan`.
type planTopic struct {
	Topic   string `json:"topic"`
	TopicID string `json:"topic_id"` // "" when unknown
	Tiered  bool   `json:"tiered"`
	Rule    int    `json:"rule"`
	Reason  string `json:"reason"`
	// Remote retention (the rule's), -1 = keep.
	RemoteRetentionMs    int64 `json:"remote_retention_ms"`
	RemoteRetentionBytes int64 `json:"remote_retention_bytes"`
	// The broker's local window.
	CleanupPolicy        string          `json:"cleanup_policy"`
	BrokerRetentionMs    int64           `json:"broker_retention_ms"`
	BrokerRetentionBytes int64           `json:"broker_retention_bytes"`
	LocalBytes           int64           `json:"local_bytes"`
	UploadedBytes        int64           `json:"uploaded_bytes"` // -1 without a bucket
	LagBytes             int64           `json:"lag_bytes"`
	LagSegments          int             `json:"lag_segments"`
	HeadroomMs           int64           `json:"headroom_ms"`    // min over partitions; -1 = no bound
	HeadroomBytes        int64           `json:"headroom_bytes"` // min over partitions; -1 = no bound
	Partitions           []planPartition `json:"partitions"`
}

type planPartition struct {
	Partition     int32 `json:"partition"`
	UploadedBytes int64 `json:"uploaded_bytes"` // -1 without a bucket
	UploadedEnd   int64 `json:"uploaded_end_offset"`
	remotetier.Lag
}

type planReport struct {
	Source string      `json:"source"`
	Bucket string      `json:"bucket"`
	Topics []planTopic `json:"topics"`
	// Deleted are the topics the broker's metadata says were deleted.
	Deleted []planDeleted `json:"deleted"`
}

type planDeleted struct {
	Topic          string `json:"topic"`
	TopicID        string `json:"topic_id"`
	MetadataOffset int64  `json:"metadata_offset"` // -1 when the source does not know it
	DeletedAtMs    int64  `json:"deleted_at_ms"`
}

func runSidecarPlan(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("sidecar plan")
	file := daemonFlags(fs, "kafka-log-dir", "bucket", "bootstrap-server", "topics")
	asJSON := fs.Bool("json", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	flags := config.SetFlags(fs)
	delete(flags, "json")
	cfg, err := config.Load(config.LoadOptions{File: *file, Env: os.Environ(), Flags: flags, Process: config.ProcessSidecar})
	if err = withoutBucketRequirement(err); err != nil {
		return configRefusal(err, true, err.Error())
	}
	pol, err := cfg.Sidecar.Policy()
	if err != nil {
		return err
	}
	var bucket objstore.Bucket
	shown := ""
	if cfg.Source("bucket") != config.SourceDefault {
		if bucket, err = openReadBucket(ctx, cfg.Bucket); err != nil {
			return err
		}
		defer bucket.Close()
		shown = shownURL(cfg.Bucket)
	}
	logDir := cfg.Sidecar.KafkaLogDir
	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		return err
	}
	src, err := brokermeta.Open(ctx, brokermeta.Options{LogDir: logDir, BootstrapServer: cfg.Sidecar.BootstrapServer, NodeID: -1})
	if err != nil {
		return err
	}
	defer src.Close()
	snap, err := src.Snapshot(ctx)
	if err != nil {
		return err
	}
	rep, err := buildPlan(ctx, view, snap, pol.Decide, bucket, r.now())
	if err != nil {
		return err
	}
	rep.Source, rep.Bucket = string(snap.Origin), shown
	rep.Deleted = []planDeleted{}
	for _, d := range snap.Deleted {
		rep.Deleted = append(rep.Deleted, planDeleted{Topic: d.Name, TopicID: d.ID.String(), MetadataOffset: d.MetadataOffset, DeletedAtMs: d.DeletedAtMs})
	}
	if *asJSON {
		return writeJSON(r.Stdout, rep)
	}
	return writePlanText(r.Stdout, rep)
}

// withoutBucketRequirement drops the sidecar's "bucket required" problem: plan reads the
// bucket only when one is given.
func withoutBucketRequirement(err error) error {
	if err == nil {
		return nil
	}
	var keep []error
	for _, e := range unjoinErr(err) {
		var fe *config.FieldError
		if errors.As(e, &fe) && fe.Path == "bucket" && strings.Contains(fe.Msg, "required for tiered sidecar") {
			continue
		}
		keep = append(keep, e)
	}
	return errors.Join(keep...)
}

func unjoinErr(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// buildPlan assembles the plan of every topic in the view's log dir.
func buildPlan(ctx context.Context, view *localtier.BrokerView, snap *brokermeta.Snapshot, decide func(string) policy.Decision,
	bucket objstore.BucketReader, now time.Time) (*planReport, error) {
	bps, err := view.Partitions()
	if err != nil {
		return nil, err
	}
	byTopic := map[string][]localtier.BrokerPartition{}
	for _, bp := range bps {
		if bp.Topic == strings.TrimSuffix(kraft.MetadataDir, "-0") {
			continue
		}
		byTopic[bp.Topic] = append(byTopic[bp.Topic], bp)
	}
	names := make([]string, 0, len(byTopic))
	for n := range byTopic {
		names = append(names, n)
	}
	sort.Strings(names)
	rep := &planReport{Topics: []planTopic{}}
	for _, name := range names {
		d := decide(name)
		cfg := topicconfig.Defaults()
		var id localtier.TopicID
		if t, ok := snap.Topic(name); ok {
			cfg, id = t.Config, t.ID
		}
		pt := planTopic{Topic: name, Tiered: d.Tiered, Rule: d.Rule, Reason: d.Reason,
			RemoteRetentionMs: d.RetentionMs, RemoteRetentionBytes: d.RetentionBytes,
			CleanupPolicy: cfg.CleanupPolicy.String(), BrokerRetentionMs: cfg.RetentionMs, BrokerRetentionBytes: cfg.RetentionBytes,
			HeadroomMs: remotetier.NoLimit, HeadroomBytes: remotetier.NoLimit}
		if bucket == nil {
			pt.UploadedBytes = -1
		}
		for _, bp := range byTopic[name] {
			if id.IsZero() {
				if id, err = view.TopicID(bp.Topic, bp.Partition); err != nil {
					return nil, err
				}
			}
			segs, err := view.Segments(bp.Topic, bp.Partition)
			if err != nil {
				return nil, err
			}
			pp := planPartition{Partition: bp.Partition, UploadedBytes: -1}
			if bucket != nil {
				if pp.UploadedBytes, pp.UploadedEnd, err = uploaded(ctx, bucket, bp.Topic, bp.Partition); err != nil {
					return nil, err
				}
				pt.UploadedBytes += pp.UploadedBytes
			}
			pp.Lag = remotetier.PartitionLag(remotetier.LagSegments(segs), pp.UploadedEnd, cfg, now)
			pt.LocalBytes += pp.LocalBytes
			pt.LagBytes += pp.Bytes
			pt.LagSegments += pp.Segments
			pt.HeadroomMs = minLimit(pt.HeadroomMs, pp.HeadroomMs)
			pt.HeadroomBytes = minLimit(pt.HeadroomBytes, pp.HeadroomBytes)
			pt.Partitions = append(pt.Partitions, pp)
		}
		sort.Slice(pt.Partitions, func(i, j int) bool { return pt.Partitions[i].Partition < pt.Partitions[j].Partition })
		pt.TopicID = id.StringOrEmpty()
		rep.Topics = append(rep.Topics, pt)
	}
	return rep, nil
}

// minLimit is the smaller headroom, NoLimit being the largest.
func minLimit(a, b int64) int64 {
	switch {
	case a == remotetier.NoLimit:
		return b
	case b == remotetier.NoLimit:
		return a
	}
	return min(a, b)
}

// uploaded reads a partition's root manifest in the lineage its topic object serves (two
// GETs): the .log bytes it holds and the offset after its last segment; 0, 0 when it has
// none, or the topic is deleted.
func uploaded(ctx context.Context, b objstore.BucketReader, topic string, partition int32) (int64, int64, error) {
	keyID, _, err := remotelog.ResolveTopic(ctx, b, "", topic)
	if errors.Is(err, remotelog.ErrTopicDeleted) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	key, err := manifest.ManifestKeyID("", topic, keyID, partition)
	if err != nil {
		return 0, 0, err
	}
	m, err := remotelog.LoadRoot(ctx, b, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read manifest of %s-%d: %w", topic, partition, err)
	}
	return m.LogBytes(), m.NextOffset(), nil
}

func writePlanText(w io.Writer, rep *planReport) error {
	bucket := rep.Bucket
	if bucket == "" {
		bucket = "- (no --bucket: uploaded bytes unknown)"
	}
	fmt.Fprintf(w, "source: %s\nbucket: %s\n", rep.Source, bucket)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tTIERED\tTOPIC_ID\tPARTITIONS\tREMOTE_RETENTION\tBROKER_RETENTION\tLOCAL_BYTES\tUPLOADED_BYTES\tLAG_BYTES\tLAG_SEGMENTS\tHEADROOM\tHEADROOM_BYTES\tWHY")
	for _, t := range rep.Topics {
		tiered, id := "no", t.TopicID
		if t.Tiered {
			tiered = "yes"
		}
		if id == "" {
			id = "-"
		}
		remote := "-"
		if t.Tiered {
			remote = "ms=" + strconv.FormatInt(t.RemoteRetentionMs, 10) + ",bytes=" + strconv.FormatInt(t.RemoteRetentionBytes, 10)
		}
		broker := fmt.Sprintf("%s,ms=%d,bytes=%d", t.CleanupPolicy, t.BrokerRetentionMs, t.BrokerRetentionBytes)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", t.Topic, tiered, id, len(t.Partitions), remote, broker,
			t.LocalBytes, orDash(t.UploadedBytes), t.LagBytes, t.LagSegments, headroomText(t.HeadroomMs), orDash(t.HeadroomBytes), t.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range rep.Deleted {
		fmt.Fprintf(w, "deleted: %s %s at metadata offset %d, %s\n", d.Topic, d.TopicID, d.MetadataOffset,
			time.UnixMilli(d.DeletedAtMs).UTC().Format(time.RFC3339))
	}
	return nil
}

func orDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func headroomText(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}
