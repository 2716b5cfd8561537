package remotetier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/ctxsleep"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Defaults of Options.
const (
	DefaultConcurrency = 4
	DefaultInterval    = 10 * time.Second
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
	// this uploader commits may need (default manifest.Version). Version 2
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

	mu     sync.Mutex
	state  map[partKey]*partState
	lastGC time.Time
}

type partKey struct {
	topic     string
	partition int32
}

// partState is the cached manifest of a partition and the ETag it was read
// with. Only this uploader's own commits update it without a read; a lost
// conditional write re-reads it.
type partState struct {
	mu   sync.Mutex
	m    *manifest.Manifest
	etag string
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
		opts.ManifestVersion = manifest.Version
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
	LagSegments      int               `json:"lag_segments"`
	LagBytes         int64             `json:"lag_bytes"`
	Errors           int               `json:"errors"`
}

// PartitionReport is one partition's outcome.
type PartitionReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed lists the segments this pass committed.
	Committed []CommittedSegment `json:"committed"`
	// RemoteNextOffset is the manifest's first uncommitted offset after the pass.
	RemoteNextOffset int64  `json:"remote_next_offset"`
	HighWatermark    int64  `json:"high_watermark"`
	LagSegments      int    `json:"lag_segments"`
	LagBytes         int64  `json:"lag_bytes"`
	SegmentsGone     int    `json:"segments_gone,omitempty"`
	Commits          int    `json:"commits"`
	CommitConflicts  int    `json:"commit_conflicts"`
	Error            string `json:"error,omitempty"`
}

// CommittedSegment is one segment a pass committed.
type CommittedSegment struct {
	BaseOffset int64  `json:"base_offset"`
	LastOffset int64  `json:"last_offset"`
	Bytes      int64  `json:"bytes"`
	AttemptID  string `json:"attempt_id"`
	// Replaced: a cleaned segment swapped in for committed offsets.
	Replaced bool `json:"replaced,omitempty"`
	// Cut: the local segment started inside the committed range (a new
	// leader rolled at other offsets); only its batches from the committed
	// end on were uploaded.
	Cut bool `json:"cut,omitempty"`
}

// Metrics returns the uploader's metrics.
func (u *Uploader) Metrics() *Metrics { return u.metrics }

// Run runs a pass every Interval until ctx is done, and returns nil then.
// A failing pass is logged and counted; the loop goes on. With GCInterval
// set, garbage is collected that often (MaybeGC).
func (u *Uploader) Run(ctx context.Context) error {
	for {
		rep, err := u.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
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
	parts, err := u.src.Partitions(ctx)
	if err != nil {
		u.metrics.errors.WithLabelValues(ErrKindSource).Inc()
		return Report{}, fmt.Errorf("list partitions: %w", err)
	}
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
	rep := Report{Partitions: reps}
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
		rep.Commits += pr.Commits
		rep.CommitConflicts += pr.CommitConflicts
		rep.LagSegments += pr.LagSegments
		rep.LagBytes += pr.LagBytes
		if pr.Error != "" {
			rep.Errors++
		}
	}
	u.metrics.lagBytes.WithLabelValues().Set(float64(rep.LagBytes))
	u.metrics.lagSegments.WithLabelValues().Set(float64(rep.LagSegments))
	return rep, errors.Join(errs...)
}

func (u *Uploader) partState(p Partition) *partState {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := partKey{p.Topic, p.Partition}
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
		m, etag, err = u.store.load(ctx, p.Topic, p.Partition, p.LogStartOffset)
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

// task is one segment to upload: appended (from cut on) or replacing the
// committed range [from, to].
type task struct {
	seg       SegmentMeta
	cut       int64 // first offset uploaded (seg.BaseOffset unless cut)
	replace   bool
	from, to  int64
	compacted bool
}

// uploaded is a task whose objects are stored.
type uploaded struct {
	task
	seg     manifest.Segment
	bytes   int64
	started time.Time // when the attempt began storing objects
}

func (u *Uploader) uploadPartition(ctx context.Context, p Partition) (PartitionReport, error) {
	pr := PartitionReport{Topic: p.Topic, Partition: p.Partition, HighWatermark: p.HighWatermark}
	st := u.partState(p)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil {
		if err := u.reload(ctx, p, st); err != nil {
			return pr, err
		}
	}
	var err error
	for {
		var tasks []task
		tasks, err = u.plan(ctx, p, st.m)
		if err != nil || len(tasks) == 0 {
			break
		}
		if len(tasks) > u.opts.MaxCommitSegments {
			tasks = tasks[:u.opts.MaxCommitSegments]
		}
		var done []uploaded
		var upErr error
		done, upErr = u.uploadTasks(ctx, p, tasks, &pr)
		if len(done) > 0 {
			var committed []uploaded
			genBefore := st.m.Generation
			committed, err = u.commit(ctx, p, st, done, &pr)
			for _, d := range committed {
				pr.Committed = append(pr.Committed, CommittedSegment{BaseOffset: d.seg.BaseOffset, LastOffset: d.seg.LastOffset,
					Bytes: d.bytes, AttemptID: d.seg.AttemptID, Replaced: d.replace, Cut: d.cut > d.task.seg.BaseOffset})
			}
			if err != nil || len(committed) == 0 && st.m.Generation == genBefore {
				break // no progress: try again next pass
			}
		}
		if upErr != nil {
			err = upErr
			break
		}
		if len(done) < len(tasks) {
			break // a segment went away: list again next pass
		}
	}
	if st.m != nil {
		next := st.m.NextOffset()
		pr.RemoteNextOffset = next
		for _, s := range p.Segments {
			if s.NextOffset > next {
				pr.LagSegments++
				pr.LagBytes += s.Size
			}
		}
	}
	return pr, err
}

// plan decides, against the committed manifest m, which of the partition's
// segments to upload: appends (Reconcile: the first that is not skipped, and
// every later one), cut copies (conflict), and cleaned segments that
// replace a committed range they rewrote.
func (u *Uploader) plan(ctx context.Context, p Partition, m *manifest.Manifest) ([]task, error) {
	var tasks []task
	appending := false
	for _, s := range p.Segments {
		if s.NextOffset > p.HighWatermark {
			break
		}
		compacted := p.Compacted && s.NextOffset <= p.CleanedUpTo
		t := task{seg: s, cut: s.BaseOffset, compacted: compacted}
		if appending {
			tasks = append(tasks, t)
			continue
		}
		d := manifest.Reconcile(m, manifest.Range{Base: s.BaseOffset, Last: s.LastOffset()})
		switch d.Action {
		case manifest.ActionAppend:
			appending = true
			if d.Gap && !p.Compacted && m.SegmentCount() > 0 {
				u.logger.Warn("segment leaves a gap in the remote log", "topic", p.Topic, "partition", p.Partition,
					"remote_next_offset", d.Next, "segment_base", s.BaseOffset)
			}
			tasks = append(tasks, t)
		case manifest.ActionConflict:
			appending = true
			if compacted {
				// A cleaned segment spanning the committed end: the cleaner
				// may have removed the batch a cut would start at, so the
				// whole segment replaces the committed range it covers.
				rt, ok, err := u.spanningReplaceTask(ctx, m, t)
				if err != nil {
					return nil, err
				}
				if ok {
					tasks = append(tasks, rt)
					continue
				}
			}
			t.cut = d.Next
			tasks = append(tasks, t)
		case manifest.ActionSkip:
			if !compacted {
				continue
			}
			rt, ok, err := u.replaceTask(ctx, m, t)
			if err != nil {
				return nil, err
			}
			if ok {
				tasks = append(tasks, rt)
			}
		}
	}
	if !appending {
		// A cleaned segment whose range reaches the committed end but whose
		// last batch ends below it would move the end back (Replace refuses):
		// it waits until a later segment is appended in the same commit.
		kept := tasks[:0]
		for _, t := range tasks {
			if !(t.replace && t.to == m.NextOffset()-1 && t.seg.LastOffset() < t.to) {
				kept = append(kept, t)
			}
		}
		tasks = kept
	}
	return tasks, nil
}

// replaceTask decides whether a cleaned local segment, whose offsets are all
// committed, must replace what is committed for its range: unless exactly
// one committed segment holds the range, compacted, with the same base, last
// offset and size (the cheap identity of a cleaned segment).
func (u *Uploader) replaceTask(ctx context.Context, m *manifest.Manifest, t task) (task, bool, error) {
	from := t.seg.BaseOffset
	to := min(t.seg.NextBase, m.NextOffset()) - 1
	if to < t.seg.LastOffset() || from < m.LogStartOffset {
		return t, false, nil
	}
	var in []manifest.Segment
	if err := u.store.segmentsIn(ctx, m, from, to, func(s manifest.Segment) { in = append(in, s) }); err != nil {
		return t, false, err
	}
	if len(in) == 0 {
		return t, false, nil
	}
	if len(in) == 1 && in[0].Compacted && in[0].BaseOffset == from && in[0].LastOffset == t.seg.LastOffset() && in[0].Log.Size == t.seg.Size {
		return t, false, nil
	}
	// A committed segment straddling the range cannot be replaced (Replace
	// never cuts); leave it.
	if in[0].BaseOffset < from || in[len(in)-1].LastOffset > to {
		return t, false, nil
	}
	t.replace, t.from, t.to = true, from, to
	return t, true, nil
}

// spanningReplaceTask makes a cleaned segment that starts inside the
// committed range and ends past it replace every committed segment from its
// base on (the commit moves the end forward). It declines when a committed
// segment straddles the segment's base (a replace never cuts).
func (u *Uploader) spanningReplaceTask(ctx context.Context, m *manifest.Manifest, t task) (task, bool, error) {
	from, end := t.seg.BaseOffset, m.NextOffset()-1
	if from < m.LogStartOffset || t.seg.LastOffset() <= end {
		return t, false, nil
	}
	var in []manifest.Segment
	if err := u.store.segmentsIn(ctx, m, from, end, func(s manifest.Segment) { in = append(in, s) }); err != nil {
		return t, false, err
	}
	if len(in) == 0 || in[0].BaseOffset < from {
		return t, false, nil
	}
	t.replace, t.from, t.to = true, from, t.seg.LastOffset()
	return t, true, nil
}

// uploadTasks uploads tasks concurrently (bounded by the uploader's gates)
// and returns the longest prefix, in order, that was stored; the objects of
// later successes are deleted (never committed).
func (u *Uploader) uploadTasks(ctx context.Context, p Partition, tasks []task, pr *PartitionReport) ([]uploaded, error) {
	results := make([]uploaded, len(tasks))
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = u.uploadWithRetry(ctx, p, t)
		}()
	}
	wg.Wait()
	n := 0
	for n < len(tasks) && errs[n] == nil {
		n++
	}
	for i := n; i < len(tasks); i++ {
		if errs[i] == nil {
			u.deleteKeys(ctx, results[i].seg.Keys())
		}
	}
	var err error
	for i := n; i < len(tasks); i++ {
		if errs[i] != nil {
			if errors.Is(errs[i], ErrSegmentGone) {
				pr.SegmentsGone++
				u.metrics.gone.Inc()
				u.logger.Info("segment went away during upload; skipped", "topic", p.Topic, "partition", p.Partition,
					"base_offset", tasks[i].seg.BaseOffset, "err", errs[i])
				continue
			}
			if err == nil {
				err = errs[i]
			}
		}
	}
	return results[:n], err
}

func (u *Uploader) uploadWithRetry(ctx context.Context, p Partition, t task) (uploaded, error) {
	for attempt := 1; ; attempt++ {
		up, err := u.uploadSegment(ctx, p, t)
		if err == nil {
			return up, nil
		}
		var ce *CutError
		switch {
		case errors.As(err, &ce):
			u.metrics.errors.WithLabelValues(ErrKindConflict).Inc()
		case errors.Is(err, ErrSegmentGone), ctx.Err() != nil:
		case permanent(err):
			u.metrics.errors.WithLabelValues(ErrKindCorrupt).Inc()
		case errors.Is(err, errSource):
			u.metrics.errors.WithLabelValues(ErrKindSource).Inc()
		default:
			u.metrics.errors.WithLabelValues(ErrKindUpload).Inc()
		}
		if permanent(err) || attempt >= u.opts.Retry.Attempts {
			return uploaded{}, err
		}
		u.logger.Debug("segment upload failed; retrying", "topic", p.Topic, "partition", p.Partition,
			"base_offset", t.seg.BaseOffset, "attempt", attempt, "err", err)
		if serr := ctxsleep.Sleep(ctx, u.opts.Retry.backoff(attempt)); serr != nil {
			return uploaded{}, serr
		}
	}
}

// errSource marks errors of the source (local or broker files).
var errSource = errors.New("source")

type sourceError struct{ err error }

func (e *sourceError) Error() string   { return e.err.Error() }
func (e *sourceError) Unwrap() []error { return []error{errSource, e.err} }

// uploadSegment stores one attempt of one segment: its .log is read once
// and checked (check), then stored with the indexes (storeChecked). The
// check takes a slot of checkGate and keeps it until a slot of gate is free
// for the store, so up to Concurrency segments are checked ahead of the
// Concurrency being stored: a segment is ready to send as soon as an upload
// ends, instead of the object store waiting while it is read.
func (u *Uploader) uploadSegment(ctx context.Context, p Partition, t task) (uploaded, error) {
	if err := acquire(ctx, u.checkGate); err != nil {
		return uploaded{}, err
	}
	c, err := u.check(ctx, p, t)
	if err != nil {
		<-u.checkGate
		return uploaded{}, err
	}
	err = acquire(ctx, u.gate)
	<-u.checkGate
	if err != nil {
		c.rd.Close()
		return uploaded{}, err
	}
	defer func() { <-u.gate }()
	return u.storeChecked(ctx, c)
}

// acquire takes a slot of gate, or fails when ctx ends first.
func acquire(ctx context.Context, gate chan struct{}) error {
	select {
	case gate <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkedSegment is a segment whose .log was read and checked, open and
// ready to store (storeChecked).
type checkedSegment struct {
	t       task
	rd      SegmentReader
	keys    manifest.SegmentKeys
	started time.Time
	// sums and n: the block checksums and size of the .log bytes checked.
	sums                    *crcBlocks
	n                       int64
	seg                     manifest.Segment // all but the objects
	offIdx, timeIdx, txnIdx []byte           // txnIdx empty: no .txnindex
}

// check opens one attempt of one segment and reads its .log once,
// sequentially, checking every batch and taking its checksums (whole and
// per block) and statistics (and building indexes). On success the
// segment stays open for storeChecked.
func (u *Uploader) check(ctx context.Context, p Partition, t task) (_ *checkedSegment, err error) {
	started := u.opts.Now()
	attempt := manifest.NewAttemptID()
	keys, err := manifest.DataKeys(u.store.prefix, p.Topic, p.Partition, t.cut, attempt)
	if err != nil {
		return nil, err
	}
	rd, err := u.src.Open(ctx, p, t.seg)
	if err != nil {
		if errors.Is(err, ErrSegmentGone) {
			return nil, err
		}
		return nil, &sourceError{fmt.Errorf("open segment %d: %w", t.seg.BaseOffset, err)}
	}
	defer func() {
		if err != nil {
			rd.Close()
		}
	}()
	offIdx, hasOff, err := rd.OffsetIndex()
	if err != nil {
		u.logger.Warn("offset index is bad; rebuilding it from the log", "topic", p.Topic, "partition", p.Partition,
			"base_offset", t.seg.BaseOffset, "err", err)
		hasOff = false
	}
	timeIdx, hasTime, err := rd.TimeIndex()
	if err != nil {
		u.logger.Warn("time index is bad; rebuilding it from the log", "topic", p.Topic, "partition", p.Partition,
			"base_offset", t.seg.BaseOffset, "err", err)
		hasTime = false
	}
	txnIdx, hasTxn, err := rd.TxnIndex()
	if err != nil {
		return nil, err
	}
	if !hasTxn {
		txnIdx = nil
	}
	cutting := t.cut > t.seg.BaseOffset
	build := !hasOff || !hasTime || cutting
	interval := int64(-1)
	if build {
		interval = p.IndexIntervalBytes
		if interval < 0 {
			interval = DefaultIndexIntervalBytes
		}
	}
	name := fmt.Sprintf("%s-%d/%020d.log", p.Topic, p.Partition, t.seg.BaseOffset)
	ls := newLogStream(&sourceReader{r: rd}, name, t.seg.BaseOffset, t.cut, interval)
	sums := &crcBlocks{}
	n, err := io.Copy(sums, ls)
	if err != nil {
		if !errors.Is(err, ErrSegmentGone) && !errors.Is(err, errSource) && !permanent(err) {
			err = &sourceError{err}
		}
		return nil, fmt.Errorf("read segment %d: %w", t.seg.BaseOffset, err)
	}
	stats := ls.stats
	if stats.Batches == 0 {
		return nil, fmt.Errorf("segment %d: %w", t.seg.BaseOffset, ErrSegmentGone)
	}
	if stats.LastOffset >= p.HighWatermark {
		return nil, fmt.Errorf("segment %d holds offset %d at or above the high watermark %d: %w", t.seg.BaseOffset, stats.LastOffset, p.HighWatermark, ErrSegmentGone)
	}
	if stats.LastOffset != t.seg.LastOffset() {
		return nil, fmt.Errorf("segment %d ends at offset %d, listed as ending at %d: %w", t.seg.BaseOffset, stats.LastOffset, t.seg.LastOffset(), ErrSegmentGone)
	}
	if build {
		bOff, bTime, err := ls.indexes()
		if err != nil {
			return nil, err
		}
		if !hasOff || cutting {
			offIdx = bOff
		}
		if !hasTime || cutting {
			timeIdx = bTime
		}
	}
	if hasTxn && cutting {
		txns, err := index.DecodeAbortedTxns(txnIdx, t.seg.BaseOffset)
		if err != nil {
			return nil, err
		}
		var keep []index.AbortedTxn
		for _, a := range txns {
			if a.LastOffset >= t.cut {
				keep = append(keep, a)
			}
		}
		if txnIdx, err = index.EncodeAbortedTxns(keep, t.cut); err != nil {
			return nil, err
		}
	}
	seg := manifest.Segment{
		BaseOffset: t.cut, LastOffset: stats.LastOffset, RecordCount: stats.Records,
		MinTimestamp: stats.MinTimestamp, MaxTimestamp: stats.MaxTimestamp,
		Compacted: t.compacted, Uploader: u.opts.UploaderID, AttemptID: attempt,
	}
	if len(p.LeaderEpochs) > 0 {
		seg.LeaderEpochs = manifest.EpochsForSegment(p.LeaderEpochs, t.cut, stats.LastOffset)
	} else {
		seg.LeaderEpochs = stats.Epochs
	}
	return &checkedSegment{t: t, rd: rd, keys: keys, started: started, sums: sums, n: n, seg: seg,
		offIdx: offIdx, timeIdx: timeIdx, txnIdx: txnIdx}, nil
}

// storeChecked stores a checked segment: the very bytes checked, from the same
// file, by position (the object store then sends it in parts without
// buffering, whatever the segment size), and the indexes beside it; then
// closes it. On failure it deletes what it stored (the attempt's keys are
// its own and never committed).
func (u *Uploader) storeChecked(ctx context.Context, c *checkedSegment) (up uploaded, err error) {
	defer c.rd.Close()
	var stored []string
	defer func() {
		if err != nil && len(stored) > 0 {
			u.deleteKeys(context.WithoutCancel(ctx), stored)
		}
	}()
	rd, seg, n, keys := c.rd, c.seg, c.n, c.keys
	ra, err := rd.LogReaderAt()
	if err != nil {
		return up, err
	}
	var mu sync.Mutex
	var total int64
	put := func(key string, r io.Reader, size int64) (int64, error) {
		a, err := u.bkt.Put(ctx, key, r, size, objstore.Condition{})
		mu.Lock()
		defer mu.Unlock()
		stored = append(stored, key) // even on error: it may have been written
		if err != nil {
			return 0, fmt.Errorf("upload %s: %w", key, err)
		}
		total += a.Size
		u.metrics.uploadedBytes.Add(float64(a.Size))
		return a.Size, nil
	}
	// The indexes go in one object, back to back (manifest.FileIndexes):
	// one small request per segment instead of two or three. With
	// ManifestVersion 1, each goes in its own object.
	type small struct {
		key  string
		data []byte
	}
	var smalls []small
	combined := u.opts.ManifestVersion >= 2
	indexes := make([]byte, 0, len(c.offIdx)+len(c.timeIdx)+len(c.txnIdx))
	index := func(key string, data []byte) manifest.Object {
		sum := manifest.CRC32CChecksum(crc32.Checksum(data, castagnoli))
		if !combined {
			smalls = append(smalls, small{key, data})
			return manifest.Object{Key: key, Size: int64(len(data)), Checksum: sum}
		}
		o := manifest.Object{Key: keys.Indexes, Offset: int64(len(indexes)), Size: int64(len(data)), Checksum: sum}
		indexes = append(indexes, data...)
		return o
	}
	seg.Index = index(keys.Index, c.offIdx)
	seg.TimeIndex = index(keys.TimeIndex, c.timeIdx)
	if len(c.txnIdx) > 0 {
		txn := index(keys.TxnIndex, c.txnIdx)
		seg.TxnIndex = &txn
	}
	if combined {
		smalls = []small{{keys.Indexes, indexes}}
	}
	var g errgroup.Group
	g.Go(func() error {
		whole, _ := c.sums.sum(0, n)
		body := checkedSection{SectionReader: io.NewSectionReader(u.throttleAt(ctx, ra), rd.Size()-n, n), sums: c.sums}
		size, err := put(keys.Log, body, n)
		seg.Log = manifest.Object{Key: keys.Log, Size: size, Checksum: manifest.CRC32CChecksum(whole)}
		return err
	})
	for _, sm := range smalls {
		g.Go(func() error {
			if err := u.wait(ctx, len(sm.data)); err != nil {
				return err
			}
			_, err := put(sm.key, bytes.NewReader(sm.data), int64(len(sm.data)))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return up, err
	}
	if err := rd.Unchanged(); err != nil {
		return up, err
	}
	seg.UploadTimeMs = u.opts.Now().UnixMilli()
	if err := seg.Validate(); err != nil {
		return up, fmt.Errorf("segment %d: %w", c.t.seg.BaseOffset, err)
	}
	return uploaded{task: c.t, seg: seg, bytes: total, started: c.started}, nil
}

// sourceReader marks the source's read errors.
type sourceReader struct{ r io.Reader }

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrSegmentGone) {
		err = &sourceError{err}
	}
	return n, err
}

// throttleAt limits reads through ra to the uploader's byte rate.
func (u *Uploader) throttleAt(ctx context.Context, ra io.ReaderAt) io.ReaderAt {
	if u.limiter == nil {
		return ra
	}
	return &throttledAt{ra: ra, ctx: ctx, u: u}
}

type throttledAt struct {
	ra  io.ReaderAt
	ctx context.Context
	u   *Uploader
}

func (t *throttledAt) ReadAt(p []byte, off int64) (int, error) {
	if err := t.u.wait(t.ctx, len(p)); err != nil {
		return 0, err
	}
	return t.ra.ReadAt(p, off)
}

func (u *Uploader) wait(ctx context.Context, n int) error {
	if u.limiter == nil {
		return nil
	}
	for n > 0 {
		k := min(n, u.limiter.Burst())
		if err := u.limiter.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// deleteKeys deletes objects nothing references, best effort: a failure
// leaves an orphan for garbage collection.
func (u *Uploader) deleteKeys(ctx context.Context, keys []string) {
	for _, k := range keys {
		if err := u.bkt.Delete(ctx, k); err != nil {
			u.metrics.errors.WithLabelValues(ErrKindDelete).Inc()
			u.logger.Debug("delete unreferenced object failed; left to garbage collection", "key", k, "err", err)
			continue
		}
		u.metrics.deleted.Inc()
	}
}

// commit commits done (in offset order) to the partition's manifest: replaced
// ranges and appended segments in one root write, conditional on the root
// it was computed from. A lost race re-reads the root and reconciles each
// segment again: those now committed by someone else, or overlapping what
// is committed, are dropped and their objects deleted. An error of unknown
// outcome re-reads the root to learn whether the write landed. It returns
// the segments committed.
func (u *Uploader) commit(ctx context.Context, p Partition, st *partState, done []uploaded, pr *PartitionReport) ([]uploaded, error) {
	// ambiguous is set once a root write failed without telling whether it
	// landed: from then on no dropped attempt is deleted (one may be
	// committed after all); garbage collection decides later.
	ambiguous := false
	for attempt := 1; ; attempt++ {
		var dropped []uploaded
		c, kept, err := u.buildCommit(ctx, p, st.m, done, &dropped)
		if !ambiguous {
			for _, d := range dropped {
				u.deleteKeys(ctx, d.seg.Keys())
			}
		}
		if err != nil {
			u.metrics.errors.WithLabelValues(ErrKindManifest).Inc()
			return nil, err
		}
		done = kept
		if len(kept) == 0 {
			return nil, nil
		}
		prevGen := st.m.Generation
		etag, err := u.store.write(ctx, c, prevGen, st.etag)
		if err == nil {
			st.m, st.etag = c.Root, etag
			pr.Commits++
			u.committed(kept)
			u.deleteKeys(ctx, c.Unreferenced)
			return kept, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if objstore.IsPreconditionFailed(err) {
			u.metrics.conflicts.Inc()
			pr.CommitConflicts++
			u.logger.Info("manifest changed under the commit; re-reading", "topic", p.Topic, "partition", p.Partition)
			if rerr := u.reload(ctx, p, st); rerr != nil {
				return nil, rerr
			}
			if attempt >= 4*u.opts.Retry.Attempts {
				return nil, fmt.Errorf("commit: lost %d races in a row: %w", attempt, err)
			}
			continue
		}
		u.metrics.errors.WithLabelValues(ErrKindManifest).Inc()
		ambiguous = true
		if attempt >= u.opts.Retry.Attempts {
			return nil, err
		}
		if serr := ctxsleep.Sleep(ctx, u.opts.Retry.backoff(attempt)); serr != nil {
			return nil, err
		}
		// The write may have landed: re-read and see.
		if rerr := u.reload(ctx, p, st); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		if u.landed(ctx, st.m, c.Root, kept) {
			pr.Commits++
			u.committed(kept)
			u.deleteKeys(ctx, c.Unreferenced)
			return kept, nil
		}
	}
}

// maxAttemptAge is the oldest upload attempt a commit may reference: half
// the garbage-collection grace period, so a collector never deletes the
// objects of an attempt that is about to be committed.
func (u *Uploader) maxAttemptAge() time.Duration {
	g := u.opts.GCGrace
	if g <= 0 {
		g = DefaultGCGrace
	}
	return g / 2
}

func (u *Uploader) committed(kept []uploaded) {
	u.metrics.commits.Inc()
	for _, k := range kept {
		if k.replace {
			u.metrics.replaced.Inc()
		} else {
			u.metrics.uploadedSegments.Inc()
		}
	}
}

// landed reports whether cur is the root this uploader tried to write
// (same generation, and it holds the attempts).
func (u *Uploader) landed(ctx context.Context, cur, want *manifest.Manifest, kept []uploaded) bool {
	if cur.Generation != want.Generation {
		return false
	}
	ours := map[string]bool{}
	for _, k := range kept {
		ours[k.seg.Log.Key] = true
	}
	found := 0
	for _, k := range kept {
		err := u.store.segmentsIn(ctx, cur, k.seg.BaseOffset, k.seg.LastOffset, func(s manifest.Segment) {
			if ours[s.Log.Key] {
				found++
			}
		})
		if err != nil {
			return false
		}
	}
	return found == len(kept)
}

// buildCommit computes the commit of done against m. Segments that no longer
// fit (committed meanwhile by another writer, or overlapping it) go to
// dropped.
func (u *Uploader) buildCommit(ctx context.Context, p Partition, m *manifest.Manifest, done []uploaded, dropped *[]uploaded) (*manifest.Commit, []uploaded, error) {
	var kept []uploaded
	var steps []*manifest.Commit
	cur := m
	var appends, replaces []uploaded
	for _, d := range done {
		if age := u.opts.Now().Sub(d.started); age > u.maxAttemptAge() {
			// Garbage collection may take objects this old for orphans.
			u.logger.Warn("upload attempt too old to commit; dropped", "topic", p.Topic, "partition", p.Partition,
				"base_offset", d.seg.BaseOffset, "age", age)
			*dropped = append(*dropped, d)
			continue
		}
		if d.replace {
			replaces = append(replaces, d)
		} else {
			appends = append(appends, d)
		}
	}
	// Appends first: a replaced range then lies below the committed end,
	// which a replace may not move back.
	var segs []manifest.Segment
	for _, d := range appends {
		r := manifest.Range{Base: d.seg.BaseOffset, Last: d.seg.LastOffset}
		if len(segs) == 0 {
			if dec := manifest.Reconcile(cur, r); dec.Action != manifest.ActionAppend {
				*dropped = append(*dropped, d)
				continue
			}
		} else if d.seg.BaseOffset <= segs[len(segs)-1].LastOffset {
			*dropped = append(*dropped, d)
			continue
		}
		segs = append(segs, d.seg)
		kept = append(kept, d)
	}
	if len(segs) > 0 {
		if cur.Generation == 0 && cur.SegmentCount() == 0 {
			// The first commit: the remote log starts where the source
			// log does, inside the first segment.
			start := min(max(p.LogStartOffset, segs[0].BaseOffset), segs[0].LastOffset)
			fresh, err := manifest.New(u.store.prefix, p.Topic, p.Partition, start)
			if err != nil {
				return nil, nil, err
			}
			cur = fresh
		}
		c, err := manifest.Append(cur, u.opts.Policy, segs...)
		if err != nil {
			return nil, nil, err
		}
		steps = append(steps, c)
		cur = c.Root
	}
	for _, d := range replaces {
		c, err := manifest.Replace(ctx, u.store.subs, cur, u.opts.Policy, d.from, d.to, []manifest.Segment{d.seg})
		var ce *manifest.ConflictError
		if errors.As(err, &ce) {
			u.logger.Debug("cleaned segment cannot replace its committed range", "topic", p.Topic, "partition", p.Partition, "err", err)
			*dropped = append(*dropped, d)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		steps = append(steps, c)
		cur = c.Root
		kept = append(kept, d)
	}
	if len(steps) == 0 {
		return nil, nil, nil
	}
	return chainCommit(m, steps), kept, nil
}
