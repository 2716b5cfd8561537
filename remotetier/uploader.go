package remotetier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/ctxsleep"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Defaults of Options.
const (
	DefaultConcurrency = 4
	DefaultInterval    = 10 * time.Second
	// DefaultManifestVersion is the manifest format written unless told
	// otherwise: the newest this release knows.
	DefaultManifestVersion = manifest.Version
	// DefaultMaxCommitSegments is the most segments one manifest commit
	// covers; a backlog is committed in batches of this many.
	DefaultMaxCommitSegments = 8
)

// Options configure an Uploader. The zero value of each field picks its
// default.
type Options struct {
	// Prefix is the key prefix of manifests and data inside the bucket.
	// Usually empty: objstore.Open already applies the URL's prefix.
	Prefix string
	// Concurrency is the most segments uploaded at once, over all
	// partitions (default 4). As many more may be read and checked ahead,
	// so that a segment is ready to send when an upload ends.
	Concurrency int
	// BytesPerSecond throttles the object bytes stored; 0 is unlimited.
	BytesPerSecond int64
	// Interval is how often Run looks for rolled segments (default 10s).
	Interval time.Duration
	// MaxCommitSegments is the most segments per manifest commit (default 8).
	MaxCommitSegments int
	// Policy is the manifest sealing policy (default manifest.DefaultPolicy).
	Policy manifest.Policy
	// UploaderID is recorded in every committed segment (default
	// hostname/pid).
	UploaderID string
	// ManifestVersion is the newest manifest format version the segments
	// this uploader commits may need (default DefaultManifestVersion). Version 2
	// stores a segment's indexes as one .indexes object; 1 stores one
	// object per index, which readers of a release before version 2 can
	// read: set it during a rolling upgrade until every reader is upgraded.
	ManifestVersion int
	Retry           Retry
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Registerer receives the metrics (nil: a private registry).
	Registerer prometheus.Registerer
	// Logger (nil: discard).
	Logger *slog.Logger
	// GCInterval, when positive, makes Run collect garbage (GC) that
	// often, with GCGrace. Zero never collects.
	GCInterval time.Duration
	GCGrace    time.Duration
	// RemoteRetention, when set, makes every pass apply remote retention
	// to each partition after its upload (the sidecar: retention.Remote,
	// manifest first, data after; SidecarRetention). It returns the
	// partition's rule, or false to leave its remote segments alone.
	RemoteRetention func(p Partition) (RetentionRule, bool)
	// RetentionMetrics counts remote retention's deletions (nil: not counted).
	RetentionMetrics *RetentionMetrics
	// RemoveLineages makes every pass remove the superseded lineages (a
	// deleted or re-created topic's old data) older than
	// DeletedTopicRetention (0: at once; negative: keep them), as
	// RemoveExpiredLineages. The sidecar sets it.
	RemoveLineages        bool
	DeletedTopicRetention time.Duration
	// RemovesLineages, when set, is asked each pass whether this uploader
	// is the one that removes lineages (several sidecars over one bucket:
	// one removes, so no object is deleted twice); nil: it is.
	RemovesLineages func() bool
	// DeletedTopics, when set, is asked at the start of every pass for the
	// topics the broker's metadata deleted; each whose ID is its topic
	// object's current one is marked deleted (MarkDeletedTopics): no
	// longer served, removed after DeletedTopicRetention.
	DeletedTopics func(ctx context.Context) ([]DeletedTopic, error)
	// LiveTopics, when set, is asked at the start of every pass for an
	// authoritative view of the cluster's live topics (nil: none this
	// pass). With one, the pass records it as proof on the lineages it
	// observes live in it, and the pass that removes lineages marks
	// deleted every current lineage it proves gone (ReconcileDeleted):
	// the deletions no logged record reports, made while no sidecar ran.
	LiveTopics func(ctx context.Context) (*LiveTopics, error)
	// OnPass, when set, is called by Run after every pass that ctx did not
	// end, with the pass's report and error (a daemon's health and
	// readiness follow it). It must not block.
	OnPass func(Report, error)
}

// Uploader copies rolled segments from a Source into a bucket and commits
// them to per-partition manifests. It is safe for one RunOnce or Run at a
// time; several Uploaders (in several processes) may race on one bucket.
type Uploader struct {
	bkt     objstore.Bucket
	src     Source
	opts    Options
	store   *manifestStore
	metrics *Metrics
	limiter *rate.Limiter
	// gate bounds the segments being stored (Concurrency); checkGate the
	// segments being read and checked ahead of a free gate slot (as many).
	gate      chan struct{}
	checkGate chan struct{}
	logger    *slog.Logger

	mu    sync.Mutex
	state map[partKey]*partState
	// listed are the partitions the last pass listed: those a pass no
	// longer lists (led elsewhere now, deleted, no longer tiered) lose
	// their per-partition series.
	listed map[partKey]bool
	lastGC time.Time
	// deletionsDone are the deletions already recorded in their topic
	// objects (or found not current), not looked at again.
	deletionsDone map[DeletedTopic]bool

	// lineageMetrics are topic identity's series (lineage_metrics.go).
	lineageMetrics *lineageMetrics
}

type partKey struct {
	topic     string
	partition int32
	keyID     string // the lineage
}

// partState is the cached manifest of a partition and the ETag it was read
// with. Only this uploader's own commits update it without a read; a lost
// conditional write re-reads it.
type partState struct {
	mu   sync.Mutex
	m    *manifest.Manifest
	etag string
	// listed holds the base offsets of segments listed by earlier passes
	// and not committed yet: a gap counts those it swallowed as lost.
	listed map[int64]bool
}

// NewUploader returns an uploader from src into bkt.
func NewUploader(bkt objstore.Bucket, src Source, opts Options) (*Uploader, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MaxCommitSegments <= 0 {
		opts.MaxCommitSegments = DefaultMaxCommitSegments
	}
	if opts.Policy == (manifest.Policy{}) {
		opts.Policy = manifest.DefaultPolicy()
	}
	if opts.ManifestVersion == 0 {
		opts.ManifestVersion = DefaultManifestVersion
	}
	if opts.ManifestVersion < 1 || opts.ManifestVersion > manifest.Version {
		return nil, fmt.Errorf("uploader: manifest version %d: this release writes versions 1 to %d", opts.ManifestVersion, manifest.Version)
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("uploader: %w", err)
	}
	if opts.UploaderID == "" {
		host, _ := os.Hostname()
		opts.UploaderID = host + "/" + strconv.Itoa(os.Getpid())
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BytesPerSecond < 0 {
		return nil, fmt.Errorf("uploader: negative bytes per second %d", opts.BytesPerSecond)
	}
	opts.Retry = opts.Retry.withDefaults()
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	store, err := newManifestStore(bkt, opts.Prefix)
	if err != nil {
		return nil, fmt.Errorf("uploader: %w", err)
	}
	m, err := NewMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("uploader metrics: %w", err)
	}
	u := &Uploader{bkt: bkt, src: src, opts: opts, store: store, metrics: m, logger: logger,
		gate: make(chan struct{}, opts.Concurrency), checkGate: make(chan struct{}, opts.Concurrency),
		state: map[partKey]*partState{}}
	if u.lineageMetrics, err = newLineageMetrics(opts.Registerer); err != nil {
		return nil, fmt.Errorf("uploader metrics: %w", err)
	}
	if opts.BytesPerSecond > 0 {
		burst := int(min(max(opts.BytesPerSecond, 64<<10), 1<<30))
		u.limiter = rate.NewLimiter(rate.Limit(opts.BytesPerSecond), burst)
	}
	return u, nil
}

// Report is what one pass did.
type Report struct {
	Partitions       []PartitionReport `json:"partitions"`
	UploadedSegments int               `json:"uploaded_segments"`
	ReplacedSegments int               `json:"replaced_segments"`
	UploadedBytes    int64             `json:"uploaded_bytes"`
	Commits          int               `json:"commits"`
	CommitConflicts  int               `json:"commit_conflicts"`
	SegmentsGone     int               `json:"segments_gone"`
	SegmentsLost     int               `json:"segments_lost"`
	// RetainedSegments and RetainedBytes are what remote retention deleted.
	RetainedSegments int   `json:"retention_deleted_segments"`
	RetainedBytes    int64 `json:"retention_deleted_bytes"`
	LagSegments      int   `json:"lag_segments"`
	LagBytes         int64 `json:"lag_bytes"`
	Errors           int   `json:"errors"`
	// RefusedPartitions were not uploaded because their topic ID belongs to
	// a superseded lineage (or they have none under a topic with one).
	RefusedPartitions int `json:"refused_partitions"`
	// RemovedLineages is how many superseded lineages the pass removed.
	RemovedLineages int `json:"removed_lineages"`
	// ReconciledTopics is how many topics the pass found deleted by the
	// broker's live topics (Options.LiveTopics) and marked deleted.
	ReconciledTopics int `json:"reconciled_topics,omitempty"`
}

// PartitionReport is one partition's outcome.
type PartitionReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed lists the segments this pass committed.
	Committed []CommittedSegment `json:"committed"`
	// RemoteNextOffset is the manifest's first uncommitted offset after the pass.
	RemoteNextOffset int64 `json:"remote_next_offset"`
	HighWatermark    int64 `json:"high_watermark"`
	LagSegments      int   `json:"lag_segments"`
	LagBytes         int64 `json:"lag_bytes"`
	SegmentsGone     int   `json:"segments_gone,omitempty"`
	// Lost lists the gaps this pass recorded: offsets the source deleted
	// before they were uploaded; SegmentsLost counts their segments.
	Lost         []manifest.Gap `json:"lost,omitempty"`
	SegmentsLost int            `json:"segments_lost,omitempty"`
	// OldestLagMs is the largest timestamp of the oldest rolled segment
	// not yet committed (-1 when none); HeadroomMs and HeadroomBytes are
	// what is left before the source's retention deletes it (PartitionLag: 0 when due, NoLimit -1 without a limit or nothing waiting).
	OldestLagMs int64 `json:"oldest_lag_max_timestamp"`
	// Retention is what remote retention did to the partition this pass.
	Retention       *RemotePartitionRetention `json:"retention,omitempty"`
	HeadroomMs      int64                     `json:"headroom_ms"`
	HeadroomBytes   int64                     `json:"headroom_bytes"`
	Commits         int                       `json:"commits"`
	CommitConflicts int                       `json:"commit_conflicts"`
	Error           string                    `json:"error,omitempty"`
}

// CommittedSegment is one segment a pass committed.
type CommittedSegment struct {
	BaseOffset int64  `json:"base_offset"`
	LastOffset int64  `json:"last_offset"`
	Bytes      int64  `json:"bytes"`
	AttemptID  string `json:"attempt_id"`
	// Replaced: a cleaned segment swapped in for committed offsets.
	Replaced bool `json:"replaced,omitempty"`
	// Emptied (with Replaced): the cleaner left no record in
	// [BaseOffset, LastOffset]; the committed segments there were removed,
	// nothing took their place (a compaction gap).
	Emptied bool `json:"emptied,omitempty"`
	// Cut: the local segment started inside the committed range (a new
	// leader rolled at other offsets); only its batches from the committed
	// end on were uploaded.
	Cut bool `json:"cut,omitempty"`
}

// Metrics returns the uploader's metrics.
func (u *Uploader) Metrics() *Metrics { return u.metrics }

// Run runs a pass every Interval until ctx is done, and returns nil then.
// A failing pass is logged and counted; the loop goes on. Each pass's
// outcome goes to OnPass. With GCInterval set, garbage is collected that
// often (MaybeGC).
func (u *Uploader) Run(ctx context.Context) error {
	for {
		rep, err := u.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if u.opts.OnPass != nil {
			u.opts.OnPass(rep, err)
		}
		if err != nil {
			u.logger.Warn("upload pass failed", "err", err, "committed_segments", rep.UploadedSegments)
		} else if rep.UploadedSegments > 0 || rep.ReplacedSegments > 0 {
			u.logger.Info("upload pass", "committed_segments", rep.UploadedSegments, "replaced_segments", rep.ReplacedSegments,
				"bytes", rep.UploadedBytes, "commits", rep.Commits, "lag_segments", rep.LagSegments, "lag_bytes", rep.LagBytes)
		}
		if err := u.MaybeGC(ctx); err != nil && ctx.Err() == nil {
			u.logger.Warn("garbage collection failed", "err", err)
		}
		if ctxsleep.Sleep(ctx, u.opts.Interval) != nil {
			return nil
		}
	}
}

// MaybeGC runs GC (with GCGrace) when GCInterval has passed since the last
// collection; with GCInterval 0 it never does.
func (u *Uploader) MaybeGC(ctx context.Context) error {
	if u.opts.GCInterval <= 0 {
		return nil
	}
	now := u.opts.Now()
	u.mu.Lock()
	due := u.lastGC.IsZero() || now.Sub(u.lastGC) >= u.opts.GCInterval
	if due {
		u.lastGC = now
	}
	u.mu.Unlock()
	if !due {
		return nil
	}
	rep, err := GC(ctx, u.bkt, GCOptions{Prefix: u.opts.Prefix, Grace: u.opts.GCGrace, Now: u.opts.Now, Logger: u.logger})
	if len(rep.Deleted) > 0 {
		u.logger.Info("garbage collected", "deleted", len(rep.Deleted), "bytes", rep.DeletedBytes)
	}
	return err
}

// RunOnce runs one pass: for every partition of the source, uploads and
// commits its rolled segments that the manifest does not hold yet. A
// failing partition does not stop the others; their errors are joined.
func (u *Uploader) RunOnce(ctx context.Context) (Report, error) {
	u.metrics.passes.Inc()
	var delErr error
	if u.opts.DeletedTopics != nil {
		delErr = u.applyDeletions(ctx)
	}
	var live *LiveTopics
	if u.opts.LiveTopics != nil {
		var err error
		if live, err = u.opts.LiveTopics(ctx); err != nil {
			live = nil // never reconciled from a view that failed
			delErr = errors.Join(delErr, fmt.Errorf("read the broker's live topics: %w", err))
		}
	}
	parts, err := u.src.Partitions(ctx)
	var unlisted ListErrors
	if errors.As(err, &unlisted) {
		err = nil // the listed partitions go on; the others are reported
	}
	if err != nil {
		u.metrics.errors.WithLabelValues(ErrKindSource).Inc()
		return Report{}, fmt.Errorf("list partitions: %w", err)
	}
	parts, refused, lineageErr := u.resolveLineages(ctx, parts, live)
	reps := make([]PartitionReport, len(parts))
	errs := make([]error, len(parts))
	var g errgroup.Group
	g.SetLimit(u.opts.Concurrency)
	for i, p := range parts {
		g.Go(func() error {
			reps[i], errs[i] = u.uploadPartition(ctx, p)
			if errs[i] != nil {
				reps[i].Error = errs[i].Error()
				errs[i] = fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, errs[i])
			}
			return nil
		})
	}
	_ = g.Wait()
	for _, e := range unlisted {
		u.metrics.errors.WithLabelValues(ErrKindSource).Inc()
		u.logger.Error("partition not uploaded this pass: its listing failed", "topic", e.Topic, "partition", e.Partition, "err", e.Err)
		reps = append(reps, PartitionReport{Topic: e.Topic, Partition: e.Partition, OldestLagMs: -1, HeadroomMs: NoLimit, HeadroomBytes: NoLimit, Error: e.Error()})
		errs = append(errs, e)
	}
	rep := Report{Partitions: reps, RefusedPartitions: refused}
	u.lineageMetrics.refused.Add(float64(refused))
	for _, pr := range reps {
		for _, c := range pr.Committed {
			if c.Replaced {
				rep.ReplacedSegments++
			} else {
				rep.UploadedSegments++
			}
			rep.UploadedBytes += c.Bytes
		}
		rep.SegmentsGone += pr.SegmentsGone
		rep.SegmentsLost += pr.SegmentsLost
		if pr.Retention != nil {
			rep.RetainedSegments += pr.Retention.Segments
			rep.RetainedBytes += pr.Retention.Bytes
		}
		rep.Commits += pr.Commits
		rep.CommitConflicts += pr.CommitConflicts
		rep.LagSegments += pr.LagSegments
		rep.LagBytes += pr.LagBytes
		if pr.Error != "" {
			rep.Errors++
		}
	}
	u.forgetGone(parts, unlisted)
	u.metrics.lagBytes.WithLabelValues().Set(float64(rep.LagBytes))
	u.metrics.lagSegments.WithLabelValues().Set(float64(rep.LagSegments))
	if u.opts.RemoveLineages && (u.opts.RemovesLineages == nil || u.opts.RemovesLineages()) {
		lr, err := removeLineages(ctx, u.bkt, u.opts.Prefix, u.opts.DeletedTopicRetention, u.opts.Now(), u.logger, live)
		rep.RemovedLineages = lr.Lineages
		rep.ReconciledTopics = lr.Reconciled
		u.lineageMetrics.reconciled.Add(float64(lr.Reconciled))
		u.lineageMetrics.removed.Add(float64(lr.Lineages))
		errs = append(errs, err)
	}
	return rep, errors.Join(append(errs, lineageErr, delErr)...)
}

func (u *Uploader) partState(p Partition) *partState {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := partKey{p.Topic, p.Partition, p.keyID}
	st := u.state[k]
	if st == nil {
		st = &partState{}
		u.state[k] = st
	}
	return st
}

// reload reads the partition's manifest afresh.
func (u *Uploader) reload(ctx context.Context, p Partition, st *partState) error {
	var err error
	for attempt := 1; ; attempt++ {
		var m *manifest.Manifest
		var etag string
		m, etag, err = u.store.loadID(ctx, p.Topic, p.keyID, p.Partition, p.LogStartOffset)
		if err == nil {
			st.m, st.etag = m, etag
			return nil
		}
		if permanent(err) || attempt >= u.opts.Retry.Attempts {
			break
		}
		if serr := ctxsleep.Sleep(ctx, u.opts.Retry.backoff(attempt)); serr != nil {
			return serr
		}
	}
	u.metrics.errors.WithLabelValues(ErrKindManifest).Inc()
	return err
}

// forgetGone drops the per-partition series of the partitions the previous
// pass listed and this one did not (a partition whose listing failed is
// still there: its series stay).
func (u *Uploader) forgetGone(parts []Partition, unlisted ListErrors) {
	now := make(map[partKey]bool, len(parts)+len(unlisted))
	for _, p := range parts {
		now[partKey{topic: p.Topic, partition: p.Partition}] = true
	}
	for _, e := range unlisted {
		now[partKey{topic: e.Topic, partition: e.Partition}] = true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for k := range u.listed {
		if !now[k] {
			u.metrics.forget(k.topic, k.partition)
		}
	}
	u.listed = now
	// The state (cached manifest) of a partition or lineage no longer
	// listed goes too: with topics created and deleted all the time it
	// would grow for ever. One coming back re-reads its manifest.
	keep := make(map[partKey]bool, len(parts)+len(unlisted))
	for _, p := range parts {
		keep[partKey{p.Topic, p.Partition, p.keyID}] = true
	}
	for _, e := range unlisted {
		keep[partKey{topic: e.Topic, partition: e.Partition}] = true // its lineage is unknown
	}
	for k := range u.state {
		if !keep[k] && !keep[partKey{topic: k.topic, partition: k.partition}] {
			delete(u.state, k)
		}
	}
}
