package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tiered/tiered/localtier"
)

// RemoteLookup asks the remote tier what it holds of one partition of the
// log dir (its topic ID tells which lineage in the bucket is its own). It is
// how the retention pass learns which local segments of a remote-enabled
// topic are safe to delete.
type RemoteLookup func(ctx context.Context, p localtier.PartitionLog) (RemoteState, error)

// PassOptions configure one retention pass.
type PassOptions struct {
	// Topic limits the pass to one topic; empty means every topic.
	Topic string
	// DryRun plans and reports but deletes nothing and writes no checkpoint.
	DryRun bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Remote answers for remote-enabled topics; nil means no bucket, and then
	// their local segments are all kept.
	Remote RemoteLookup
	// Logger gets one line per partition that lost segments, and the warning
	// when retention.bytes deleted data younger than retention.ms. nil discards.
	Logger *slog.Logger
}

// SegmentReport is one deleted (or, in a dry run, deletable) segment.
type SegmentReport struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	BaseOffset   int64  `json:"base_offset"`
	LastOffset   int64  `json:"last_offset"`
	SizeBytes    int64  `json:"size_bytes"`
	MaxTimestamp int64  `json:"max_timestamp"`
	Reason       Reason `json:"reason"`
	// SizeBeatTime: a byte cap deleted it while its time limit would keep it.
	SizeBeatTime bool `json:"size_beat_time,omitempty"`
}

// PartitionReport is the outcome for one partition.
type PartitionReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// LogStartOffset before the pass, and after it (in a dry run: what it
	// would become).
	LogStartOffset    int64 `json:"log_start_offset"`
	NewLogStartOffset int64 `json:"new_log_start_offset"`
	LogEndOffset      int64 `json:"log_end_offset"`
	Segments          int   `json:"deleted_segments"`
	Bytes             int64 `json:"deleted_bytes"`
	// Held says why a segment a rule wanted to delete was kept.
	Held string `json:"held,omitempty"`
	// Error is set when the partition could not be processed.
	Error string `json:"error,omitempty"`
}

// PassReport is what RunOnce did (or, dry run, would do).
type PassReport struct {
	DryRun     bool              `json:"dry_run"`
	Time       time.Time         `json:"time"`
	Segments   []SegmentReport   `json:"segments"`
	Partitions []PartitionReport `json:"partitions"`
	// DeletedSegments and DeletedBytes total Segments.
	DeletedSegments int   `json:"deleted_segments"`
	DeletedBytes    int64 `json:"deleted_bytes"`
}

// String renders the report for people: a summary line, a table of segments
// and any partitions whose deletion was held back or failed.
func (r PassReport) String() string {
	var b strings.Builder
	verb := "deleted"
	if r.DryRun {
		verb = "dry run: would delete"
	}
	fmt.Fprintf(&b, "retention pass at %s: %s %d segment(s), %d bytes, in %d partition(s) checked\n",
		r.Time.UTC().Format(time.RFC3339), verb, r.DeletedSegments, r.DeletedBytes, len(r.Partitions))
	if len(r.Segments) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tBASE OFFSET\tLAST OFFSET\tSIZE\tMAX TIMESTAMP\tREASON")
		for _, s := range r.Segments {
			ts := "-"
			if s.MaxTimestamp >= 0 {
				ts = time.UnixMilli(s.MaxTimestamp).UTC().Format(time.RFC3339Nano)
			}
			reason := string(s.Reason)
			if s.SizeBeatTime {
				reason += " (before its time limit)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Topic, s.Partition, s.BaseOffset, s.LastOffset, s.SizeBytes, ts, reason)
		}
		_ = tw.Flush()
	}
	for _, p := range r.Partitions {
		if p.NewLogStartOffset != p.LogStartOffset {
			fmt.Fprintf(&b, "%s-%d: log start offset %d -> %d\n", p.Topic, p.Partition, p.LogStartOffset, p.NewLogStartOffset)
		}
		if p.Held != "" {
			fmt.Fprintf(&b, "%s-%d: kept: %s\n", p.Topic, p.Partition, p.Held)
		}
		if p.Error != "" {
			fmt.Fprintf(&b, "%s-%d: error: %s\n", p.Topic, p.Partition, p.Error)
		}
	}
	return b.String()
}

// RunOnce runs one retention pass over dir (every topic, or opts.Topic): for
// each partition it plans with Local and, unless opts.DryRun, deletes the
// plan through Log.DeleteSegments, then writes the log dir's checkpoints once
// if anything was deleted. A failing partition does not stop the others;
// the errors are joined. An unknown opts.Topic is a
// *localtier.UnknownTopicOrPartitionError.
func RunOnce(ctx context.Context, dir *localtier.LogDir, opts PassOptions) (PassReport, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	rep := PassReport{DryRun: opts.DryRun, Time: opts.Now(), Segments: []SegmentReport{}, Partitions: []PartitionReport{}}
	topics, err := dir.SelectTopics(opts.Topic)
	if err != nil {
		return rep, err
	}
	var errs []error
	deleted := false
	for _, name := range topics {
		t, ok := dir.Topic(name)
		if !ok {
			continue
		}
		for p, l := range t.Partitions {
			if err := ctx.Err(); err != nil {
				errs = append(errs, err)
				return finish(rep, dir, deleted, opts, errs)
			}
			pr, segs, err := runPartition(ctx, localtier.PartitionLog{Topic: name, Partition: int32(p), TopicID: t.ID, Log: l}, rep.Time, opts)
			if err != nil {
				pr.Error = err.Error()
				errs = append(errs, fmt.Errorf("retention %s-%d: %w", name, p, err))
			}
			if len(segs) > 0 && !opts.DryRun {
				deleted = true
			}
			rep.Partitions = append(rep.Partitions, pr)
			rep.Segments = append(rep.Segments, segs...)
			rep.DeletedSegments += len(segs)
			rep.DeletedBytes += pr.Bytes
		}
	}
	return finish(rep, dir, deleted, opts, errs)
}

func finish(rep PassReport, dir *localtier.LogDir, deleted bool, opts PassOptions, errs []error) (PassReport, error) {
	if deleted {
		if err := dir.Checkpoint(); err != nil {
			errs = append(errs, fmt.Errorf("retention: %w", err))
		}
	}
	return rep, errors.Join(errs...)
}

func runPartition(ctx context.Context, pl localtier.PartitionLog, now time.Time, opts PassOptions) (PartitionReport, []SegmentReport, error) {
	topic, partition, l := pl.Topic, pl.Partition, pl.Log
	pr := PartitionReport{Topic: topic, Partition: partition, LogStartOffset: l.LogStartOffset(), LogEndOffset: l.LogEndOffset()}
	pr.NewLogStartOffset = pr.LogStartOffset
	cfg := l.Config()
	infos, err := l.RetentionSegments()
	if err != nil {
		return pr, nil, err
	}
	var remote RemoteState
	if cfg.RemoteStorageEnable && opts.Remote != nil {
		if remote, err = opts.Remote(ctx, pl); err != nil {
			return pr, nil, fmt.Errorf("ask remote tier: %w", err)
		}
	}
	dec := Local(FromLog(infos), cfg, pr.LogStartOffset, now, remote)
	pr.Held = dec.Held
	if len(dec.Delete) == 0 {
		return pr, nil, nil
	}
	report := func(s Segment, d Deletion) SegmentReport {
		return SegmentReport{Topic: topic, Partition: partition, BaseOffset: s.BaseOffset, LastOffset: s.LastOffset,
			SizeBytes: s.Size, MaxTimestamp: s.MaxTimestamp, Reason: d.Reason, SizeBeatTime: d.SizeBeatTime}
	}
	var segs []SegmentReport
	if opts.DryRun {
		for _, d := range dec.Delete {
			segs = append(segs, report(d.Segment, d))
			pr.Bytes += d.Segment.Size
		}
		pr.Segments = len(segs)
		pr.NewLogStartOffset = dec.NewLogStartOffset
		return pr, segs, nil
	}
	gone, err := l.DeleteSegments(dec.UpTo())
	for _, g := range gone {
		s := Segment{BaseOffset: g.BaseOffset, LastOffset: g.NextOffset - 1, Size: g.Size, MaxTimestamp: g.MaxTimestamp}
		segs = append(segs, report(s, planned(dec, g.BaseOffset)))
		pr.Bytes += g.Size
	}
	pr.Segments = len(segs)
	pr.NewLogStartOffset = l.LogStartOffset()
	logDeletions(opts.Logger, topic, partition, cfg.RetentionMs, segs, pr)
	return pr, segs, err
}

// planned finds the planned deletion covering base: a segment the log
// replaced between planning and deleting (a compactor swap) is reported with
// the reason of the planned segment it starts in.
func planned(dec Decision, base int64) Deletion {
	for _, d := range dec.Delete {
		if base <= d.Segment.LastOffset {
			return d
		}
	}
	return dec.Delete[len(dec.Delete)-1]
}

func logDeletions(logger *slog.Logger, topic string, partition int32, retentionMs int64, segs []SegmentReport, pr PartitionReport) {
	if len(segs) == 0 {
		return
	}
	logger.Info("retention deleted segments", "topic", topic, "partition", partition, "segments", len(segs),
		"bytes", pr.Bytes, "log_start_offset", pr.NewLogStartOffset)
	var early, localEarly []SegmentReport
	for _, s := range segs {
		if !s.SizeBeatTime {
			continue
		}
		if s.Reason == ReasonRetentionBytes {
			early = append(early, s)
		} else {
			localEarly = append(localEarly, s)
		}
	}
	summary := func(ss []SegmentReport) (bytes, newest int64) {
		newest = -1
		for _, s := range ss {
			bytes += s.SizeBytes
			newest = max(newest, s.MaxTimestamp)
		}
		return bytes, newest
	}
	if len(early) > 0 {
		bytes, newest := summary(early)
		logger.Warn("retention.bytes deleted data younger than retention.ms: the byte cap, not the time limit, decided the replay window",
			"topic", topic, "partition", partition, "segments", len(early), "bytes", bytes,
			"newest_deleted_timestamp", time.UnixMilli(newest).UTC().Format(time.RFC3339Nano),
			"retention_ms", retentionMs, "log_start_offset", pr.NewLogStartOffset)
	}
	if len(localEarly) > 0 {
		bytes, newest := summary(localEarly)
		logger.Info("local.retention.bytes deleted local copies younger than local.retention.ms (the remote tier holds them)",
			"topic", topic, "partition", partition, "segments", len(localEarly), "bytes", bytes,
			"newest_deleted_timestamp", time.UnixMilli(newest).UTC().Format(time.RFC3339Nano))
	}
}
