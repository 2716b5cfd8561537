package localtier

// Opening a partition log: recovery the way Kafka's LogLoader does it
// (temporary files, interrupted swaps, segments past the recovery point).

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// RecoveryReport says what OpenLog had to repair.
type RecoveryReport struct {
	SegmentsRecovered int
	BytesTruncated    int64
	SegmentsDeleted   int
	SwapsCompleted    int
	TempFilesRemoved  int
	// SegmentsRepairedAlone counts segments that were truncated while the
	// segments after them stayed (below the recovery point, or any segment
	// of a log opened read-only): the offsets they lost (OffsetsLost) are a
	// gap in the log that reads step over.
	SegmentsRepairedAlone int
	OffsetsLost           int64
	// LogStartOffsetsClamped counts logs whose log start offset checkpoint
	// lay beyond the log end (logged as a warning naming both offsets).
	LogStartOffsetsClamped int
}

func (r *RecoveryReport) add(o RecoveryReport) {
	r.SegmentsRecovered += o.SegmentsRecovered
	r.BytesTruncated += o.BytesTruncated
	r.SegmentsDeleted += o.SegmentsDeleted
	r.SwapsCompleted += o.SwapsCompleted
	r.TempFilesRemoved += o.TempFilesRemoved
	r.SegmentsRepairedAlone += o.SegmentsRepairedAlone
	r.OffsetsLost += o.OffsetsLost
	r.LogStartOffsetsClamped += o.LogStartOffsetsClamped
}

// OpenLog opens (or creates) the partition directory dir and recovers it the
// way Kafka's LogLoader does.
func OpenLog(fsys vfs.FS, dir string, opts LogOptions) (*Log, RecoveryReport, error) {
	var rep RecoveryReport
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{fs: fsys, dir: dir, now: opts.Now, logger: opts.Logger, epoch: opts.LeaderEpoch, cfg: opts.Config, readOnly: opts.ReadOnly,
		logStart: opts.LogStartOffset, ongoingTxns: map[int64]int64{}, producers: map[int64]*ProducerEntry{}, lastFlush: opts.Now()}
	if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
		return nil, rep, fmt.Errorf("open log %s: %w", dir, err)
	}
	if err := l.load(opts, &rep); err != nil {
		for _, s := range l.segments {
			_ = s.close()
		}
		return nil, rep, fmt.Errorf("open log %s: %w", dir, err)
	}
	return l, rep, nil
}

func (l *Log) load(opts LogOptions, rep *RecoveryReport) error {
	recoveryPoint := opts.RecoveryPoint
	swapBases, err := l.removeTempFiles(rep)
	if err != nil {
		return err
	}
	if err := l.completeSwaps(swapBases, rep); err != nil {
		return err
	}
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	logs := map[int64]bool{}
	var bases []int64
	for _, e := range entries {
		base, suf, ok := ParseSegmentName(e.Name())
		if ok && suf == LogSuffix {
			logs[base] = true
			bases = append(bases, base)
		}
	}
	// Index files without a log file are leftovers: remove them.
	for _, e := range entries {
		base, suf, ok := ParseSegmentName(e.Name())
		if ok && (suf == IndexSuffix || suf == TimeIndexSuffix || suf == TxnIndexSuffix) && !logs[base] {
			if err := l.fs.Remove(SegmentPath(l.dir, base, suf)); err != nil {
				return err
			}
			rep.TempFilesRemoved++
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var needs []bool
	for _, base := range bases {
		s, need, err := openSegment(l.fs, l.dir, base, l.segOpts(""))
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
		needs = append(needs, need)
	}
	// Kafka's LogLoader rules. A segment below the recovery point was
	// flushed: it is trusted unless its indexes are missing or corrupt (or
	// the tail scan found bytes the indexes do not account for), and then
	// it is recovered alone (loadSegmentFiles): it loses only its own bad
	// tail, the flushed segments after it stay, and the offsets it lost
	// become a gap that reads step over to the next segment. Segments from
	// the one holding the recovery point on were not flushed: they are
	// recovered in order, and the first that had to be truncated ends the
	// log, every later segment being deleted (recoverLog).
	recovered := map[int64]bool{}
	for i := 0; i < len(l.segments); i++ {
		s := l.segments[i]
		// nextOffset comes from the tail scan openSegment did (when the
		// indexes were sane); it is only trusted below the recovery point.
		unflushed := s.size > 0 && (s.base >= recoveryPoint || s.nextOffset > recoveryPoint ||
			(i+1 < len(l.segments) && l.segments[i+1].base > recoveryPoint))
		if !unflushed && !needs[i] {
			continue
		}
		limit := int64(math.MaxInt64)
		if i+1 < len(l.segments) {
			limit = l.segments[i+1].base
		}
		truncated, err := s.recover(limit)
		if err != nil {
			return err
		}
		rep.SegmentsRecovered++
		recovered[s.base] = unflushed
		if truncated == 0 {
			continue
		}
		rep.BytesTruncated += truncated
		if i+1 == len(l.segments) {
			l.logger.Warn("truncated corrupt or torn log tail", "segment", s.LogPath(), "bytes", truncated, "valid_bytes", s.size,
				"read_only", l.readOnly)
			break
		}
		if !unflushed || l.readOnly {
			// A read-only open deletes nothing, even in memory: the reader
			// continues at the next good segment.
			rep.SegmentsRepairedAlone++
			rep.OffsetsLost += max(limit-s.nextOffset, 0)
			msg := "truncated a damaged segment below the recovery point; later segments are kept"
			if l.readOnly {
				msg = "skipping the damaged tail of a segment (read-only: nothing is changed on disk)"
			}
			l.logger.Warn(msg, "segment", s.LogPath(), "bytes", truncated, "valid_bytes", s.size,
				"lost_from_offset", s.nextOffset, "next_segment_base", limit)
			continue
		}
		l.logger.Warn("truncated corrupt or torn log tail", "segment", s.LogPath(), "bytes", truncated, "valid_bytes", s.size,
			"later_segments_deleted", len(l.segments)-i-1)
		for _, later := range l.segments[i+1:] {
			if err := later.delete(); err != nil {
				return err
			}
			rep.SegmentsDeleted++
		}
		l.segments = l.segments[:i+1]
	}
	if len(l.segments) == 0 {
		start := l.logStart
		if start < 0 {
			start = 0
		}
		s, err := createSegment(l.fs, l.dir, start, l.segOpts(""), l.now())
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	if first := l.segments[0].base; l.logStart < first {
		l.logStart = first
	}
	if end := l.logEndLocked(); l.logStart > end {
		// Segments were lost (a truncated tail, files removed by hand) or
		// the checkpoint is wrong. As Kafka's loader, the log continues at
		// its start, but nothing is deleted: the segments stay on disk, and
		// the warning keeps both offsets for an operator to decide.
		l.logger.Warn("log start offset checkpoint is beyond the log end: clamping the log start offset to the log end, which hides every record of the partition",
			"checkpoint", opts.LogStartOffsetFile, "dir", l.dir, "checkpoint_log_start_offset", l.logStart, "log_end_offset", end)
		rep.LogStartOffsetsClamped++
		l.logStart = end
	}
	// As Kafka's LogLoader: what recovery read back from the page cache was
	// never fsynced, so the recovery point stays where the checkpoint put it
	// (a clean Close checkpoints the log end, so nothing is lost there).
	l.recoveryPoint = min(max(recoveryPoint, 0), l.logEndLocked())
	return l.loadProducerState(recovered)
}

// removeTempFiles deletes .deleted and .cleaned files and returns the base
// offsets of .log.swap files to complete (Kafka's
// removeTempFilesAndCollectSwapFiles, with KAFKA-6264's rule for swaps at or
// above the lowest .cleaned offset).
func (l *Log) removeTempFiles(rep *RecoveryReport) ([]int64, error) {
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	minCleaned := int64(1<<63 - 1)
	var cleaned, swaps []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, DeletedSuffix):
			if err := l.fs.Remove(l.path(name)); err != nil {
				return nil, err
			}
			rep.TempFilesRemoved++
		case strings.HasSuffix(name, CleanedSuffix):
			if base, _, ok := ParseSegmentName(name); ok && base < minCleaned {
				minCleaned = base
			}
			cleaned = append(cleaned, name)
		case strings.HasSuffix(name, SwapSuffix):
			swaps = append(swaps, name)
		}
	}
	var bases []int64
	for _, name := range swaps {
		base, suf, ok := ParseSegmentName(name)
		if !ok || base >= minCleaned {
			if err := l.fs.Remove(l.path(name)); err != nil {
				return nil, err
			}
			rep.TempFilesRemoved++
			continue
		}
		switch suf {
		case LogSuffix + SwapSuffix:
			bases = append(bases, base)
		case TxnIndexSuffix + SwapSuffix:
			// Kept: aborted transactions cannot be re-derived from the
			// swapped segment alone. completeSwaps renames it with its log.
		default:
			// Offset and time index swap files are rebuilt from the log.
			if err := l.fs.Remove(l.path(name)); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range swaps {
		base, suf, ok := ParseSegmentName(name)
		if ok && suf == TxnIndexSuffix+SwapSuffix && base < minCleaned && !slices.Contains(bases, base) {
			// A transaction index swap file without its log swap file. The
			// swap's last step renames the .log first: if it is there, the
			// crash came before the .txnindex rename, and as Kafka's loader
			// (which renames every remaining .swap file) it is completed.
			// The aborted transactions cannot be re-derived from the log.
			if _, err := l.fs.Stat(SegmentPath(l.dir, base, LogSuffix)); err == nil {
				if err := l.fs.Rename(l.path(name), SegmentPath(l.dir, base, TxnIndexSuffix)); err != nil {
					return nil, err
				}
				rep.SwapsCompleted++
				continue
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			// Without its log: nothing to complete.
			if err := l.fs.Remove(l.path(name)); err != nil {
				return nil, err
			}
			rep.TempFilesRemoved++
		}
	}
	for _, name := range cleaned {
		if err := l.fs.Remove(l.path(name)); err != nil {
			return nil, err
		}
		rep.TempFilesRemoved++
	}
	return bases, nil
}

// completeSwaps finishes swaps interrupted by a crash: segments the swap
// files replace are deleted and the .swap files renamed into place.
func (l *Log) completeSwaps(bases []int64, rep *RecoveryReport) error {
	if len(bases) == 0 {
		return nil
	}
	minSwap, maxSwap := int64(1<<63-1), int64(-1<<63)
	for _, base := range bases {
		f, err := l.fs.Open(SegmentPath(l.dir, base, LogSuffix+SwapSuffix))
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return err
		}
		next := base
		_, _, err = scanBatches(f, f.Name(), 0, fi.Size(), false, func(_ int64, b record.Batch) error {
			next = b.NextOffset()
			return nil
		})
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("scan swap segment %d: %w", base, err)
		}
		minSwap = min(minSwap, base)
		maxSwap = max(maxSwap, next)
	}
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		base, suf, ok := ParseSegmentName(e.Name())
		if !ok || strings.HasSuffix(suf, SwapSuffix) {
			continue
		}
		if base >= minSwap && base < maxSwap {
			if err := l.fs.Remove(l.path(e.Name())); err != nil {
				return err
			}
		}
	}
	for _, base := range bases {
		if err := l.fs.Rename(SegmentPath(l.dir, base, LogSuffix+SwapSuffix), SegmentPath(l.dir, base, LogSuffix)); err != nil {
			return err
		}
		// Offset and time indexes are rebuilt: remove any stale ones.
		for _, suf := range []string{IndexSuffix, TimeIndexSuffix} {
			if err := l.fs.Remove(SegmentPath(l.dir, base, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		err := l.fs.Rename(SegmentPath(l.dir, base, TxnIndexSuffix+SwapSuffix), SegmentPath(l.dir, base, TxnIndexSuffix))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		rep.SwapsCompleted++
	}
	return l.fs.SyncDir(l.dir)
}
