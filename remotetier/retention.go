package remotetier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
	"github.com/tiered/tiered/retention"
)

// RemoteLookup answers retention.RunOnce for remote-enabled topics from the
// partitions' manifests in b: HighestOffset is the last offset of the
// committed segments that follow one another from the start of the remote
// log without a gap. A gap next to a compacted segment does not end the run
// (the cleaner removed those offsets); any other gap does, so a local segment
// past it is kept until the gap is filled. Only the manifest of the
// partition's own lineage counts (ownLineage): one the bucket holds of
// another lineage (a topic created again, another data dir's), or one that
// ends past the local log's end (offsets this log never had), holds nothing
// of this log, and every local segment is kept.
func RemoteLookup(b objstore.Bucket, prefix string) (retention.RemoteLookup, error) {
	store, err := newManifestStore(b, prefix)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, pl localtier.PartitionLog) (retention.RemoteState, error) {
		m, _, why, err := store.ownManifest(ctx, pl)
		if err != nil {
			return retention.RemoteState{}, fmt.Errorf("remote state of %s-%d: %w", pl.Topic, pl.Partition, err)
		}
		if why != "" {
			return retention.RemoteState{Consulted: true, HighestOffset: -1, NotOurs: why}, nil
		}
		return retention.RemoteState{Consulted: true, HighestOffset: contiguousEnd(ctx, store, m)}, nil
	}, nil
}

// ownLineage is the lineage (keyID for manifest.ManifestKeyID, "" =
// name-only) in which the bucket holds the local partition pl, or why it
// holds none. A topic with an ID is its topic object's current lineage of
// that ID (before the topic's first upload pass there is no object, or one
// naming another ID: nothing of it is in the bucket; the name-only lineage
// is never its own). A topic without one (created before tiered wrote
// topic IDs) is the name-only lineage while the bucket has no topic
// object; once one names a topic ID, the bucket serves another lineage,
// which the uploader refuses to write the topic into (manifest.ErrNoTopicID).
func (s *manifestStore) ownLineage(ctx context.Context, pl localtier.PartitionLog) (keyID, why string, err error) {
	st, err := remotelog.ReadTopic(ctx, s.bkt, s.prefix, pl.Topic)
	if err != nil {
		return "", "", err
	}
	id := pl.TopicID.StringOrEmpty()
	keyID, served, ok := st.Serving()
	switch {
	case st == nil && id == "":
		return "", "", nil
	case st == nil:
		return "", fmt.Sprintf("the bucket has no lineage of topic id %s yet (its first upload pass starts it; any name-only manifest there is another incarnation's)", id), nil
	case !ok:
		return "", "the topic object marks the topic deleted", nil
	case id == "":
		return "", fmt.Sprintf("the bucket serves topic id %s, and this topic has no id", served), nil
	case served != id:
		return "", fmt.Sprintf("the bucket serves topic id %s, not this topic's %s (the topic was created again, or another data dir shares the bucket)", served, id), nil
	}
	return keyID, "", nil
}

// ownManifest loads the manifest of pl's own lineage (ownLineage) and its
// ETag, or says why the bucket holds nothing of pl. A manifest that ends
// past the local log's end holds offsets this log never had (the uploader
// commits only offsets below the log's last stable offset): not this
// log's either. For a topic without an ID whose name-only manifest another
// data dir wrote, that protection is partial: once the local log has grown
// past the foreign manifest's end, nothing tells the two apart, and local
// retention takes its offsets for this log's (topics created with an ID
// are not exposed).
func (s *manifestStore) ownManifest(ctx context.Context, pl localtier.PartitionLog) (*manifest.Manifest, string, string, error) {
	keyID, why, err := s.ownLineage(ctx, pl)
	if err != nil || why != "" {
		return nil, "", why, err
	}
	m, etag, err := s.loadID(ctx, pl.Topic, keyID, pl.Partition, 0)
	if err != nil {
		return nil, "", "", err
	}
	if end := pl.Log.LogEndOffset(); m.NextOffset() > end {
		return nil, "", fmt.Sprintf("the remote log ends at offset %d, past the local log end %d: another incarnation's offsets", m.NextOffset(), end), nil
	}
	return m, etag, "", nil
}

// contiguousEnd is the last offset of the gap-free run of committed segments
// from the start of m, -1 when there is none.
func contiguousEnd(ctx context.Context, store *manifestStore, m *manifest.Manifest) int64 {
	highest := int64(-1)
	var prev *manifest.Segment
	errStop := errors.New("stop")
	_ = m.Walk(ctx, store.subs, func(s manifest.Segment) error {
		if prev != nil && s.BaseOffset != prev.LastOffset+1 && !prev.Compacted && !s.Compacted {
			return errStop
		}
		highest = s.LastOffset
		prev = &s
		return nil
	})
	return highest
}

// RetentionOptions configure RemoteRetention.
type RetentionOptions struct {
	Prefix string
	// Topic limits the pass to one topic.
	Topic string
	// DryRun reports and changes nothing.
	DryRun bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Metrics, when set, counts remote deletions.
	Metrics *RetentionMetrics
	Logger  *slog.Logger
}

// RetentionReport is what RemoteRetention did (or, dry run, would do).
type RetentionReport struct {
	DryRun     bool                       `json:"dry_run"`
	Partitions []RemotePartitionRetention `json:"partitions"`
	// Segments are the remote segments deleted.
	Segments        []retention.SegmentReport `json:"segments"`
	DeletedSegments int                       `json:"deleted_segments"`
	DeletedBytes    int64                     `json:"deleted_bytes"`
	DeletedObjects  int                       `json:"deleted_objects"`
	// LocalDeleted counts local segments deleted because they fell below
	// the new log start offset.
	LocalDeleted int `json:"local_deleted_segments"`
}

// RemotePartitionRetention is one partition's outcome.
type RemotePartitionRetention struct {
	Topic             string `json:"topic"`
	Partition         int32  `json:"partition"`
	LogStartOffset    int64  `json:"log_start_offset"`
	NewLogStartOffset int64  `json:"new_log_start_offset"`
	Segments          int    `json:"deleted_segments"`
	Bytes             int64  `json:"deleted_bytes"`
	Error             string `json:"error,omitempty"`
}

// RetentionMetrics are the remote retention series:
//
//	tiered_retention_remote_deleted_segments_total{reason}
//	tiered_retention_remote_deleted_bytes_total{reason}
//	tiered_retention_remote_deleted_objects_total
type RetentionMetrics struct {
	segments, bytes *prometheus.CounterVec
	objects         prometheus.Counter
}

// NewRetentionMetrics registers the series on reg, every one at 0.
func NewRetentionMetrics(reg prometheus.Registerer) (*RetentionMetrics, error) {
	m := &RetentionMetrics{
		segments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tiered_retention_remote_deleted_segments_total",
			Help: "Remote segments deleted by retention, by the rule that deleted them."}, []string{"reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tiered_retention_remote_deleted_bytes_total",
			Help: "Bytes of remote segments deleted by retention, by the rule that deleted them."}, []string{"reason"}),
		objects: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_retention_remote_deleted_objects_total",
			Help: "Objects deleted after remote retention committed their removal."}),
	}
	for _, c := range []prometheus.Collector{m.segments, m.bytes, m.objects} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range retention.Reasons() {
		m.segments.WithLabelValues(string(r))
		m.bytes.WithLabelValues(string(r))
	}
	return m, nil
}

// RemoteRetention applies retention.ms and retention.bytes over the whole
// log (remote and local) of every remote-enabled partition of dir, as
// Kafka's RemoteLogManager: the policy is retention.Remote; the removal is
// committed to the manifest first (RemoveBelow, conditional write, re-read
// and re-planned on a lost race), then the objects it no longer references
// are deleted, then the local segments below the new log start offset.
// A failing partition does not stop the others.
func RemoteRetention(ctx context.Context, b objstore.Bucket, dir *localtier.LogDir, opts RetentionOptions) (RetentionReport, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	store, err := newManifestStore(b, opts.Prefix)
	if err != nil {
		return RetentionReport{}, err
	}
	rep := RetentionReport{DryRun: opts.DryRun, Partitions: []RemotePartitionRetention{}, Segments: []retention.SegmentReport{}}
	topics, err := dir.SelectTopics(opts.Topic)
	if err != nil {
		return rep, err
	}
	var errs []error
	localChanged := false
	for _, pl := range dir.RemotePartitions(topics) {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		pr, segs, nLocal, err := remoteRetentionPartition(ctx, store, pl, pl.Log.Config(), opts, logger)
		if err != nil {
			pr.Error = err.Error()
			errs = append(errs, fmt.Errorf("remote retention %s-%d: %w", pl.Topic, pl.Partition, err))
		}
		if pr.Segments > 0 || pr.Error != "" {
			rep.Partitions = append(rep.Partitions, pr)
		}
		rep.Segments = append(rep.Segments, segs...)
		rep.DeletedSegments += pr.Segments
		rep.DeletedBytes += pr.Bytes
		rep.LocalDeleted += nLocal
		localChanged = localChanged || nLocal > 0
	}
	if localChanged {
		if err := dir.Checkpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

func remoteRetentionPartition(ctx context.Context, store *manifestStore, pl localtier.PartitionLog,
	cfg topicconfig.Config, opts RetentionOptions, logger *slog.Logger) (RemotePartitionRetention, []retention.SegmentReport, int, error) {
	topic, partition, l := pl.Topic, pl.Partition, pl.Log
	pr := RemotePartitionRetention{Topic: topic, Partition: partition}
	for attempt := 1; ; attempt++ {
		// Only the partition's own lineage: another's log start says
		// nothing of this log, whose local segments below it are its only
		// copy, and its segments are not this topic's to delete.
		m, etag, why, err := store.ownManifest(ctx, pl)
		if err != nil {
			return pr, nil, 0, err
		}
		if why != "" {
			logger.Debug("remote retention: skipped, the bucket holds nothing of the partition", "topic", topic, "partition", partition, "why", why)
			return pr, nil, 0, nil
		}
		local, err := l.RetentionSegments()
		if err != nil {
			return pr, nil, 0, err
		}
		step, err := retentionStep(ctx, store, m, etag, retention.FromLog(local), cfg, 0, opts, logger)
		pr = step.pr
		if objstore.IsPreconditionFailed(err) && attempt < 8 {
			continue // another writer committed: plan again from its manifest
		}
		if err != nil || opts.DryRun {
			return pr, step.reports, 0, err
		}
		// Local copies below the remote log start go too: the ones this
		// commit dropped, and any a pass left behind when it died (or
		// failed to delete them) after its commit. Without this, nothing
		// deletes them once the remote log holds no segment: the local
		// pass sees a remote tier that holds nothing and keeps them, and
		// readers are served offsets below the log start.
		nLocal := 0
		segsNow := l.Segments()
		if n := len(segsNow); n > 0 {
			upTo := min(pr.NewLogStartOffset, segsNow[n-1].BaseOffset)
			deleted, err := l.DeleteSegments(upTo)
			nLocal = len(deleted)
			if err != nil {
				logger.Warn("remote retention: local deletions failed", "topic", topic, "partition", partition, "err", err)
			}
		}
		return pr, step.reports, nLocal, nil
	}
}

// largestTimestamp is Kafka's largestTimestamp for a committed segment: its
// largest record timestamp or, when no record carries one, its upload time.
// Kafka copies the .log file's last-modified time into the remote metadata
// then; the upload time is no earlier, so the segment never expires sooner
// than Kafka's rule would have it, and it expires by retention.ms instead
// of never (which also kept every later segment from expiring by age).
func largestTimestamp(s manifest.Segment) int64 {
	if s.MaxTimestamp < 0 && s.UploadTimeMs > 0 {
		return s.UploadTimeMs
	}
	return s.MaxTimestamp
}

// remoteSegment is a committed segment as retention.Remote sees it.
func remoteSegment(s manifest.Segment) retention.Segment {
	return retention.Segment{BaseOffset: s.BaseOffset, LastOffset: s.LastOffset, Size: s.Log.Size,
		MaxTimestamp: largestTimestamp(s), Uploaded: true}
}

// remoteDecision is retention.Remote over the whole log: the committed
// segments of m, then the segments of local past m's end (the source's
// segments the remote tier does not hold yet: they count toward
// retention.bytes and, not uploaded, end the deletable set). It reads only
// the sealed sub-manifests that hold deleted segments and the one the
// deletable set ends in: the log's size is the references' log bytes plus
// the inline and local sizes, and a sub-manifest whose first segment the
// rules surely keep (RemotePlan.Kept, from its reference) ends the set
// unread. What a reference bounds of its first segment: it ends at or after
// the reference's base offset and, for the first reference, the log start
// (LoadSub refuses anything else); its largestTimestamp is at least the
// reference's min timestamp (a segment's max timestamp is at least its min,
// and one without timestamps, judged by its upload time, has min -1); its
// .log has at least one byte.
// The log start it plans from is m's, or floor, clamped to m's end, when higher.
func remoteDecision(ctx context.Context, r manifest.Resolver, m *manifest.Manifest, local []retention.Segment,
	cfg topicconfig.Config, now time.Time, floor int64) (retention.Decision, error) {
	total := m.LogBytes()
	for _, s := range local {
		if s.NextOffset() > m.NextOffset() {
			total += s.Size
		}
	}
	plan := retention.NewRemotePlan(cfg, max(m.LogStartOffset, min(floor, m.NextOffset())), now, total)
	for i, ref := range m.Sealed {
		lastAtLeast := ref.BaseOffset
		if i == 0 {
			lastAtLeast = max(lastAtLeast, m.LogStartOffset)
		}
		if plan.Kept(lastAtLeast, ref.MinTimestamp, 1) {
			return plan.Decision(), nil
		}
		sub, err := m.LoadSub(ctx, r, i)
		if err != nil {
			return retention.Decision{}, err
		}
		for _, s := range sub.Segments {
			if !plan.Offer(remoteSegment(s)) {
				return plan.Decision(), nil
			}
		}
	}
	for _, s := range m.Segments {
		if !plan.Offer(remoteSegment(s)) {
			break
		}
	}
	// The local segments past m's end come next: not uploaded, they end
	// the set.
	return plan.Decision(), nil
}

// retained is one retentionStep's outcome: commit is nil when nothing was
// deletable (or on a dry run); etag is the new manifest's.
type retained struct {
	pr      RemotePartitionRetention
	reports []retention.SegmentReport
	commit  *manifest.Commit
	etag    string
}

// retentionStep applies retention.Remote to m (read with etag) and the
// source's segments past its end (local: the segments the remote tier does
// not hold, counted toward retention.bytes), reading no more sub-manifests
// than the decision needs (remoteDecision), and commits the removal:
// manifest.RemoveBelow written conditionally on etag first, then the
// objects it no longer references deleted (only by the writer whose commit
// unreferenced them, so never twice). A lost race is returned as the
// store's precondition error: plan again from the new manifest. The log
// start moves to floor too when that is higher (the source's after a
// DeleteRecords; clamped to m's end), taking the segments wholly below it
// (retention.ReasonLogStartOffset).
func retentionStep(ctx context.Context, store *manifestStore, m *manifest.Manifest, etag string, local []retention.Segment,
	cfg topicconfig.Config, floor int64, opts RetentionOptions, logger *slog.Logger) (retained, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	out := retained{pr: RemotePartitionRetention{Topic: m.Topic, Partition: m.Partition, LogStartOffset: m.LogStartOffset,
		NewLogStartOffset: m.LogStartOffset}}
	if m.Generation == 0 {
		return out, nil // nothing remote yet
	}
	d, err := remoteDecision(ctx, store.subs, m, local, cfg, opts.Now(), floor)
	if err != nil {
		return out, err
	}
	if d.NewLogStartOffset <= m.LogStartOffset {
		return out, nil
	}
	var bytes int64
	for _, del := range d.Delete {
		out.reports = append(out.reports, retention.SegmentReport{Topic: m.Topic, Partition: m.Partition, BaseOffset: del.Segment.BaseOffset,
			LastOffset: del.Segment.LastOffset, SizeBytes: del.Segment.Size, MaxTimestamp: del.Segment.MaxTimestamp,
			Reason: del.Reason, SizeBeatTime: del.SizeBeatTime})
		bytes += del.Segment.Size
	}
	out.pr.NewLogStartOffset, out.pr.Segments, out.pr.Bytes = d.NewLogStartOffset, len(d.Delete), bytes
	if opts.DryRun {
		return out, nil
	}
	// The new start may lie inside a segment the remote tier does not
	// hold yet (a local one): RemoveBelow keeps the segment holding it.
	c, err := manifest.RemoveBelow(ctx, store.subs, m, d.NewLogStartOffset)
	if err != nil {
		return out, err
	}
	if out.etag, err = store.write(ctx, c, m.Generation, etag); err != nil {
		return out, err
	}
	out.commit = c
	var delErrs []error
	for _, k := range c.Unreferenced {
		if err := store.bkt.Delete(ctx, k); err != nil {
			delErrs = append(delErrs, err) // an orphan now: GC collects it
			continue
		}
		if opts.Metrics != nil {
			opts.Metrics.objects.Inc()
		}
	}
	if opts.Metrics != nil {
		for _, r := range out.reports {
			opts.Metrics.segments.WithLabelValues(string(r.Reason)).Inc()
			opts.Metrics.bytes.WithLabelValues(string(r.Reason)).Add(float64(r.SizeBytes))
		}
	}
	logger.Info("remote retention", "topic", m.Topic, "partition", m.Partition, "deleted_segments", len(out.reports),
		"deleted_bytes", bytes, "new_log_start_offset", d.NewLogStartOffset)
	if len(delErrs) > 0 {
		logger.Warn("remote retention: some deletions failed (left to garbage collection)", "topic", m.Topic, "partition", m.Partition,
			"err", errors.Join(delErrs...))
	}
	return out, nil
}
