package compactor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
)

// Cleaner cleans the compacted logs of a log dir: a pool of Config.Threads
// workers, each with its share of the dedupe buffer, choosing the filthiest
// log each time. A log whose cleaning fails is marked uncleanable and left
// alone for the Cleaner's lifetime; the others go on.
type Cleaner struct {
	dir *localtier.LogDir
	cfg Config
	met *metrics
	thr *throttler

	workers chan *worker

	mu          sync.Mutex
	checkpoints map[checkpoint.TopicPartition]int64
	inProgress  map[*localtier.Log]bool
	uncleanable map[checkpoint.TopicPartition]string
}

// New makes a cleaner for dir, reading its cleaner-offset-checkpoint and
// allocating the offset maps (Config.DedupeBufferSize in all).
func New(dir *localtier.LogDir, cfg Config) (*Cleaner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("compactor: %w", err)
	}
	ckpt, err := dir.ReadCleanerCheckpoint()
	if err != nil {
		return nil, fmt.Errorf("compactor: %w", err)
	}
	c := &Cleaner{dir: dir, cfg: cfg, met: newMetrics(cfg.Registerer, cfg.Now),
		thr:     newThrottler(cfg.IOMaxBytesPerSecond, cfg.Now, cfg.Sleep),
		workers: make(chan *worker, cfg.Threads), checkpoints: ckpt,
		inProgress: map[*localtier.Log]bool{}, uncleanable: map[checkpoint.TopicPartition]string{}}
	for range cfg.Threads {
		m, err := NewOffsetMap(cfg.DedupeBufferSize / int64(cfg.Threads))
		if err != nil {
			return nil, fmt.Errorf("compactor: %w", err)
		}
		c.workers <- &worker{m: m, thr: c.thr}
	}
	return c, nil
}

// PassOptions configure one cleaning pass.
type PassOptions struct {
	// Topic limits the pass to one topic; empty means every compacted topic.
	Topic string
	// Force is `tiered compact --now`: ignore min.cleanable.dirty.ratio and
	// min.compaction.lag.ms and clean every compacted log, even one whose
	// dirty part is empty, so tombstones and markers whose delete horizon
	// has passed are dropped. The horizon itself is never ignored.
	Force bool
	// Config is used by RunOnce to make the cleaner (zero fields: defaults).
	Config Config
}

// LogReport is one log's outcome in a pass.
type LogReport struct {
	Topic            string  `json:"topic"`
	Partition        int32   `json:"partition"`
	FirstDirtyOffset int64   `json:"first_dirty_offset"`
	CleanedToOffset  int64   `json:"cleaned_to_offset"`
	FirstUncleanable int64   `json:"first_uncleanable_offset"`
	DirtyRatio       float64 `json:"dirty_ratio"`
	CheckpointReset  bool    `json:"checkpoint_reset,omitempty"`
	SegmentsIn       int     `json:"segments_in"`
	SegmentsOut      int     `json:"segments_out"`
	MapBytesRead     int64   `json:"map_bytes_read"`
	BytesRead        int64   `json:"bytes_read"`
	BytesWritten     int64   `json:"bytes_written"`
	RecordsBefore    int64   `json:"records_before"`
	RecordsAfter     int64   `json:"records_after"`
	KeylessDropped   int64   `json:"keyless_dropped"`
	TombstonesDrop   int64   `json:"tombstones_dropped"`
	AbortedDropped   int64   `json:"aborted_dropped"`
	MarkersDropped   int64   `json:"markers_dropped"`
	EmptyBatchesKept int64   `json:"empty_batches_kept"`
	MapEntries       int     `json:"map_entries"`
	MapUtilization   float64 `json:"map_utilization"`
	DurationSeconds  float64 `json:"duration_seconds"`
	// Error is set when the log could not be cleaned; Uncleanable when it
	// was marked uncleanable for that.
	Error       string `json:"error,omitempty"`
	Uncleanable bool   `json:"uncleanable,omitempty"`
	err         error
}

// SizeReduction is the share of the bytes read that cleaning removed.
func (r LogReport) SizeReduction() float64 {
	if r.BytesRead == 0 {
		return 0
	}
	return 1 - float64(r.BytesWritten)/float64(r.BytesRead)
}

// PassReport is what one pass did.
type PassReport struct {
	Time            time.Time   `json:"time"`
	Force           bool        `json:"now"`
	LogsChecked     int         `json:"logs_checked"`
	LogsCleaned     int         `json:"logs_cleaned"`
	Logs            []LogReport `json:"logs"`
	BytesRead       int64       `json:"bytes_read"`
	BytesWritten    int64       `json:"bytes_written"`
	RecordsBefore   int64       `json:"records_before"`
	RecordsAfter    int64       `json:"records_after"`
	Errors          int         `json:"errors"`
	MaxDirtyRatio   float64     `json:"max_dirty_ratio"`
	DurationSeconds float64     `json:"duration_seconds"`
}

// String renders the report for people: a summary line and one row per
// log cleaned or failed.
func (r PassReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "compaction pass at %s: cleaned %d of %d compacted log(s), read %s, wrote %s, records %d -> %d",
		r.Time.UTC().Format(time.RFC3339), r.LogsCleaned, r.LogsChecked, mb(r.BytesRead), mb(r.BytesWritten), r.RecordsBefore, r.RecordsAfter)
	if r.Errors > 0 {
		fmt.Fprintf(&b, ", %d error(s)", r.Errors)
	}
	b.WriteString("\n")
	if len(r.Logs) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tDIRTY RANGE\tRATIO\tREAD\tWRITTEN\tRECORDS\tREDUCTION\tSTATUS")
		for _, l := range r.Logs {
			status := "cleaned"
			if l.Error != "" {
				status = "error: " + l.Error
			}
			fmt.Fprintf(tw, "%s-%d\t[%d, %d)\t%.2f\t%s\t%s\t%d -> %d\t%.1f%%\t%s\n", l.Topic, l.Partition, l.FirstDirtyOffset,
				l.CleanedToOffset, l.DirtyRatio, mb(l.BytesRead), mb(l.BytesWritten), l.RecordsBefore, l.RecordsAfter,
				100*l.SizeReduction(), status)
		}
		_ = tw.Flush()
	}
	return b.String()
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// RunOnce makes a cleaner for dir and runs one pass (`tiered compact`).
// Per-log failures are in the report (and joined into the error); an
// unknown opts.Topic is a *localtier.UnknownTopicOrPartitionError.
func RunOnce(ctx context.Context, dir *localtier.LogDir, opts PassOptions) (PassReport, error) {
	c, err := New(dir, opts.Config)
	if err != nil {
		return PassReport{}, err
	}
	return c.RunPass(ctx, opts)
}

type candidate struct {
	topic     string
	partition int32
	log       *localtier.Log
}

func (c *Cleaner) candidates(topic string) ([]candidate, error) {
	topics, err := c.dir.SelectTopics(topic)
	if err != nil {
		return nil, err
	}
	var out []candidate
	for _, name := range topics {
		t, ok := c.dir.Topic(name)
		if !ok {
			continue
		}
		for p, l := range t.Partitions {
			if l.Config().CleanupPolicy.Compact {
				out = append(out, candidate{topic: name, partition: int32(p), log: l})
			}
		}
	}
	return out, nil
}

// grab picks the filthiest cleanable log among cands (skipping those in
// progress, uncleanable or in skip), marks it in progress and returns it
// (nil if none). It also updates the selection metrics.
func (c *Cleaner) grab(cands []candidate, force bool, skip map[*localtier.Log]bool) *logToClean {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *logToClean
	maxRatio, maxDelay := 0.0, time.Duration(0)
	for _, cand := range cands {
		tp := checkpoint.TopicPartition{Topic: cand.topic, Partition: cand.partition}
		if _, bad := c.uncleanable[tp]; bad {
			continue
		}
		ck, has := c.checkpoints[tp]
		p := planLog(cand.log.CleanerView(), ck, has, now, force)
		p.topic, p.partition, p.log = cand.topic, cand.partition, cand.log
		maxRatio, maxDelay = max(maxRatio, p.ratio), max(maxDelay, p.delay)
		if c.inProgress[cand.log] || skip[cand.log] || !p.cleanable(force) {
			continue
		}
		if best == nil || p.ratio > best.ratio {
			pp := p
			best = &pp
		}
	}
	c.met.maxDirtyRatio.Set(maxRatio)
	c.met.maxDelay.Set(maxDelay.Seconds())
	if best != nil {
		c.inProgress[best.log] = true
	}
	return best
}

// cleanOne cleans a grabbed log with a worker and records the outcome.
func (c *Cleaner) cleanOne(ctx context.Context, w *worker, p *logToClean) LogReport {
	start := c.cfg.Now()
	tp := checkpoint.TopicPartition{Topic: p.topic, Partition: p.partition}
	w.pending = 0
	st, err := w.clean(ctx, p, start.UnixMilli(), c.cfg.ProducerIDExpiration.Milliseconds())
	end := c.cfg.Now()
	rep := LogReport{Topic: p.topic, Partition: p.partition, FirstDirtyOffset: p.firstDirty, CleanedToOffset: st.endOffset,
		FirstUncleanable: p.firstUncleanable, DirtyRatio: p.ratio, CheckpointReset: p.checkpointReset,
		SegmentsIn: st.segmentsIn, SegmentsOut: st.segmentsOut, MapBytesRead: st.mapBytesRead, BytesRead: st.bytesRead,
		BytesWritten: st.bytesWritten, RecordsBefore: st.recordsRead, RecordsAfter: st.recordsKept, KeylessDropped: st.keyless,
		TombstonesDrop: st.tombstonesDropped, AbortedDropped: st.abortedDropped, MarkersDropped: st.markersDropped,
		EmptyBatchesKept: st.emptyBatchesKept, MapEntries: st.mapEntries, MapUtilization: st.mapUtilization,
		DurationSeconds: end.Sub(start).Seconds()}
	m := c.met
	m.bytesRead.Add(float64(st.bytesRead + st.mapBytesRead))
	m.bytesWritten.Add(float64(st.bytesWritten))
	m.keyless.Add(float64(st.keyless))
	c.mu.Lock()
	delete(c.inProgress, p.log)
	if err == nil {
		c.checkpoints[tp] = st.endOffset
		err = c.dir.WriteCleanerCheckpoint(c.checkpoints)
	}
	var marked bool
	if err != nil && !errors.Is(err, localtier.ErrSegmentChanged) && ctx.Err() == nil {
		c.uncleanable[tp] = err.Error()
		marked = true
	}
	m.uncleanable.Set(float64(len(c.uncleanable)))
	c.mu.Unlock()
	logger := c.cfg.Logger
	if err != nil {
		rep.Error, rep.Uncleanable, rep.err = err.Error(), marked, err
		m.failures.Inc()
		if marked {
			logger.Error("log cleaning failed; partition marked uncleanable", "partition", fmt.Sprintf("%s-%d", p.topic, p.partition), "err", err)
		} else {
			logger.Info("log cleaning abandoned", "partition", fmt.Sprintf("%s-%d", p.topic, p.partition), "err", err)
		}
		return rep
	}
	m.runs.Inc()
	m.recordsKept.Add(float64(st.recordsKept))
	m.recordsDropped.Add(float64(st.recordsRead - st.recordsKept))
	m.bufferUtil.Set(st.mapUtilization)
	m.lastDuration.Set(rep.DurationSeconds)
	m.ranAt(end)
	secs := max(rep.DurationSeconds, 1e-9)
	logger.Info("cleaned log",
		"partition", fmt.Sprintf("%s-%d", p.topic, p.partition),
		"dirty_start", p.firstDirty, "dirty_end", st.endOffset, "first_uncleanable", p.firstUncleanable,
		"dirty_ratio", p.ratio, "segments", fmt.Sprintf("%d -> %d", st.segmentsIn, st.segmentsOut),
		"mb_read", float64(st.bytesRead+st.mapBytesRead)/1e6, "mb_written", float64(st.bytesWritten)/1e6,
		"mb_per_sec", float64(st.bytesRead+st.mapBytesRead)/1e6/secs,
		"records_before", st.recordsRead, "records_after", st.recordsKept,
		"keyless_dropped", st.keyless, "size_reduction_pct", 100*rep.SizeReduction(),
		"map_utilization", st.mapUtilization, "duration", end.Sub(start))
	return rep
}

// RunPass cleans every cleanable compacted log (of opts.Topic, or all) at
// most once, filthiest first, with up to Config.Threads at a time.
func (c *Cleaner) RunPass(ctx context.Context, opts PassOptions) (PassReport, error) {
	start := c.cfg.Now()
	rep := PassReport{Time: start, Force: opts.Force, Logs: []LogReport{}}
	cands, err := c.candidates(opts.Topic)
	if err != nil {
		return rep, err
	}
	rep.LogsChecked = len(cands)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	attempted := map[*localtier.Log]bool{}
	for range c.cfg.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := <-c.workers
			defer func() { c.workers <- w }()
			for ctx.Err() == nil {
				mu.Lock()
				p := c.grab(cands, opts.Force, attempted)
				if p != nil {
					attempted[p.log] = true
				}
				mu.Unlock()
				if p == nil {
					return
				}
				lr := c.cleanOne(ctx, w, p)
				mu.Lock()
				rep.Logs = append(rep.Logs, lr)
				if lr.Error != "" {
					errs = append(errs, fmt.Errorf("compact %s-%d: %w", lr.Topic, lr.Partition, lr.err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(rep.Logs, func(i, j int) bool {
		a, b := rep.Logs[i], rep.Logs[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	for _, l := range rep.Logs {
		if l.Error != "" {
			rep.Errors++
			continue
		}
		rep.LogsCleaned++
		rep.BytesRead += l.BytesRead + l.MapBytesRead
		rep.BytesWritten += l.BytesWritten
		rep.RecordsBefore += l.RecordsBefore
		rep.RecordsAfter += l.RecordsAfter
	}
	rep.MaxDirtyRatio = 0
	for _, cand := range cands {
		c.mu.Lock()
		ck, has := c.checkpoints[checkpoint.TopicPartition{Topic: cand.topic, Partition: cand.partition}]
		c.mu.Unlock()
		rep.MaxDirtyRatio = max(rep.MaxDirtyRatio, planLog(cand.log.CleanerView(), ck, has, c.cfg.Now(), false).ratio)
	}
	rep.DurationSeconds = c.cfg.Now().Sub(start).Seconds()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// Run cleans logs until ctx ends: Config.Threads goroutines each take the
// filthiest cleanable log, clean it, and sleep Config.Backoff when there is
// none. It returns nil when ctx is done.
func (c *Cleaner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range c.cfg.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := <-c.workers
			defer func() { c.workers <- w }()
			for ctx.Err() == nil {
				cands, err := c.candidates("")
				var p *logToClean
				if err == nil {
					p = c.grab(cands, false, nil)
				}
				if p == nil {
					if c.cfg.Sleep(ctx, c.cfg.Backoff) != nil {
						return
					}
					continue
				}
				c.cleanOne(ctx, w, p)
			}
		}()
	}
	wg.Wait()
	return nil
}

// Uncleanable lists the partitions marked uncleanable, with the error.
func (c *Cleaner) Uncleanable() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.uncleanable))
	for tp, e := range c.uncleanable {
		out[tp.String()] = e
	}
	return out
}
