package localtier

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

// OffsetOutOfRangeError is Kafka's OFFSET_OUT_OF_RANGE: a read below the log
// start offset or past the log end offset.
type OffsetOutOfRangeError struct {
	Dir            string
	Offset         int64
	LogStartOffset int64
	LogEndOffset   int64
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("offset %d is out of range for %s: log start offset %d, log end offset %d",
		e.Offset, filepath.Base(e.Dir), e.LogStartOffset, e.LogEndOffset)
}

// InvalidRecordError is Kafka's INVALID_RECORD / CORRUPT_MESSAGE /
// MESSAGE_TOO_LARGE family: an append refused whole.
type InvalidRecordError struct {
	Code   string // Kafka error name: CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, UNSUPPORTED_VERSION
	Reason string
	Err    error
}

func (e *InvalidRecordError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Reason, e.Err)
	}
	return e.Code + ": " + e.Reason
}

func (e *InvalidRecordError) Unwrap() error { return e.Err }

// LogOptions configure OpenLog.
type LogOptions struct {
	Config topicconfig.Config
	// RecoveryPoint is the offset below which the log was flushed at the
	// last checkpoint; segments from there on are scanned and repaired.
	// Use -1 (or any value below the first segment) to recover everything.
	RecoveryPoint int64
	// LogStartOffset from the log-start-offset checkpoint (0 if unknown).
	LogStartOffset int64
	// LeaderEpoch stamped on appended batches (0 for tiered's own engine).
	LeaderEpoch int32
	Now         func() time.Time
	Logger      *slog.Logger
}

// Log is one partition: its segments in offset order, the last one active.
// Append, Roll, truncation and deletion serialise on the log's lock; reads
// share it.
type Log struct {
	fs     vfs.FS
	dir    string
	now    func() time.Time
	logger *slog.Logger
	epoch  int32

	mu             sync.RWMutex
	cfg            topicconfig.Config
	segments       []*Segment
	logStart       int64
	recoveryPoint  int64
	ongoingTxns    map[int64]int64 // producer id -> first offset of its open transaction
	producers      map[int64]*ProducerEntry
	snapshots      []int64 // offsets of the .snapshot files, ascending (producerstate.go)
	lastSnapOffset int64   // offset of the newest snapshot, or where producer state was loaded from
	unflushed      int64   // records appended since the last flush
	lastFlush      time.Time
	closed         bool
	enc            record.Encoder
	dec            record.Decoder
}

// RecoveryReport says what OpenLog had to repair.
type RecoveryReport struct {
	SegmentsRecovered int
	BytesTruncated    int64
	SegmentsDeleted   int
	SwapsCompleted    int
	TempFilesRemoved  int
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
	l := &Log{fs: fsys, dir: dir, now: opts.Now, logger: opts.Logger, epoch: opts.LeaderEpoch, cfg: opts.Config,
		logStart: opts.LogStartOffset, ongoingTxns: map[int64]int64{}, producers: map[int64]*ProducerEntry{}, lastFlush: opts.Now()}
	if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
		return nil, rep, fmt.Errorf("open log %s: %w", dir, err)
	}
	if err := l.load(opts.RecoveryPoint, &rep); err != nil {
		for _, s := range l.segments {
			_ = s.close()
		}
		return nil, rep, fmt.Errorf("open log %s: %w", dir, err)
	}
	return l, rep, nil
}

func (l *Log) segOpts(suffix string) segmentOptions {
	return segmentOptions{indexIntervalBytes: l.cfg.IndexIntervalBytes, maxIndexBytes: int(l.cfg.SegmentIndexBytes), suffix: suffix}
}

func (l *Log) load(recoveryPoint int64, rep *RecoveryReport) error {
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
	// Recover every segment at or past the recovery point, and any whose
	// indexes are missing or corrupt. Corruption truncates the log there:
	// every later segment is deleted, as Kafka does.
	for i := 0; i < len(l.segments); i++ {
		s := l.segments[i]
		// nextOffset comes from the tail scan openSegment did (when the
		// indexes were sane); it is only trusted below the recovery point.
		unflushed := s.size > 0 && (s.base >= recoveryPoint || s.nextOffset > recoveryPoint ||
			(i+1 < len(l.segments) && l.segments[i+1].base > recoveryPoint))
		if !unflushed && !needs[i] {
			continue
		}
		truncated, err := s.recover()
		if err != nil {
			return err
		}
		rep.SegmentsRecovered++
		if truncated > 0 {
			rep.BytesTruncated += truncated
			l.logger.Warn("truncated corrupt or torn log tail", "segment", s.LogPath(), "bytes", truncated, "valid_bytes", s.size)
			for _, later := range l.segments[i+1:] {
				if err := later.delete(); err != nil {
					return err
				}
				rep.SegmentsDeleted++
			}
			l.segments = l.segments[:i+1]
		}
	}
	// An empty segment past the recovery point is what a roll leaves when
	// power fails before the data reached the disk: its base offset points
	// past data that no longer exists. Drop such segments so the log end
	// is the end of the surviving data (the only segment always stays).
	kept := l.segments[:0]
	for i, s := range l.segments {
		if s.size == 0 && s.base > recoveryPoint && (len(kept) > 0 || i < len(l.segments)-1) {
			if err := s.delete(); err != nil {
				return err
			}
			rep.SegmentsDeleted++
			continue
		}
		kept = append(kept, s)
	}
	l.segments = kept
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
		l.logStart = end
	}
	// As Kafka's LogLoader: what recovery read back from the page cache was
	// never fsynced, so the recovery point stays where the checkpoint put it
	// (a clean Close checkpoints the log end, so nothing is lost there).
	l.recoveryPoint = min(max(recoveryPoint, 0), l.logEndLocked())
	return l.loadProducerState()
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
			// A transaction index swap file without its log: nothing to complete.
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

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

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

func (l *Log) active() *Segment { return l.segments[len(l.segments)-1] }

func (l *Log) logEndLocked() int64 { return l.active().nextOffset }

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the topic configuration in force.
func (l *Log) Config() topicconfig.Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig replaces the topic configuration (topic alter).
func (l *Log) SetConfig(c topicconfig.Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = c
}

// LogStartOffset is the first offset a consumer may read.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// LogEndOffset is the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logEndLocked()
}

// LastStableOffset is the first offset of the earliest open transaction,
// or the log end offset when none is open: READ_COMMITTED consumers and the
// compactor never go past it. As Kafka's, it never lies below the log start
// offset (retention may delete the start of an open transaction).
func (l *Log) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	lso := l.logEndLocked()
	for _, first := range l.ongoingTxns {
		lso = min(lso, first)
	}
	return max(lso, l.logStart)
}

// RecoveryPoint is the offset below which everything is flushed.
func (l *Log) RecoveryPoint() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset   int64
	NextOffset   int64
	Size         int64
	MaxTimestamp int64
	Path         string
	Active       bool
}

// Segments lists the segments, oldest first; the last is the active one.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segments))
	for i, s := range l.segments {
		out[i] = SegmentInfo{BaseOffset: s.base, NextOffset: s.nextOffset, Size: s.size, MaxTimestamp: s.maxTimestamp,
			Path: s.LogPath(), Active: i == len(l.segments)-1}
	}
	return out
}

// Size is the total bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// AppendInfo describes a successful append.
type AppendInfo struct {
	FirstOffset  int64
	LastOffset   int64
	MaxTimestamp int64
	Batches      int
	Records      int
	Bytes        int
	// Durable reports that the records were fsynced before Append returned
	// (flush.messages or flush.ms was reached); otherwise they are in the
	// page cache until the next flush, as with Kafka's defaults.
	Durable bool
}

// Append validates the batches in data as a Kafka leader does, assigns their
// offsets and appends them. Any invalid batch refuses the whole append and
// nothing is written. data is modified in place (offsets, leader epoch).
func (l *Log) Append(data []byte) (AppendInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return AppendInfo{}, errors.New("append: log is closed")
	}
	data, info, err := l.validateAndAssign(data)
	if err != nil {
		return info, err
	}
	if err := l.appendLocked(data, info); err != nil {
		return AppendInfo{}, err
	}
	l.unflushed += int64(info.Records)
	if err := l.maybeFlushLocked(); err != nil {
		return info, fmt.Errorf("append: records written but flush failed: %w", err)
	}
	info.Durable = l.recoveryPoint > info.LastOffset
	return info, nil
}

// maybeFlushLocked flushes when flush.messages records were appended or
// flush.ms passed since the last flush (Kafka's flush policy).
func (l *Log) maybeFlushLocked() error {
	if l.unflushed == 0 {
		return nil
	}
	due := l.unflushed >= l.cfg.FlushMessages
	if !due && l.cfg.FlushMs < math.MaxInt64 {
		due = l.now().Sub(l.lastFlush).Milliseconds() >= l.cfg.FlushMs
	}
	if !due {
		return nil
	}
	return l.flushLocked()
}

// FlushIfDue flushes when the topic's flush.ms has passed since the last
// flush; serve calls it periodically (Kafka's log flusher).
func (l *Log) FlushIfDue() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	return l.maybeFlushLocked()
}

func (l *Log) validateAndAssign(data []byte) ([]byte, AppendInfo, error) {
	cfg := l.cfg
	info := AppendInfo{MaxTimestamp: record.NoTimestamp}
	next := l.logEndLocked()
	info.FirstOffset = next
	targetCodec, keepProducer, _ := cfg.CompressionCodec()
	logAppend := cfg.MessageTimestampType == topicconfig.LogAppendTime
	now := l.now().UnixMilli()
	it := record.NewIter(data)
	it.Verify = true
	var out []byte // set when a batch had to be re-encoded
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		pos := it.Pos() - b.Size()
		if b.IsLegacy() {
			return nil, info, &InvalidRecordError{Code: "UNSUPPORTED_VERSION", Reason: fmt.Sprintf("batch at byte %d has magic %d; appends take only magic 2 record batches", pos, b.Magic())}
		}
		if int64(b.Size()) > cfg.MaxMessageBytes {
			return nil, info, &InvalidRecordError{Code: "MESSAGE_TOO_LARGE", Reason: fmt.Sprintf("the record batch of %d bytes at byte %d exceeds max.message.bytes (%d)", b.Size(), pos, cfg.MaxMessageBytes)}
		}
		if b.IsControl() {
			return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: "control batches are written by the log itself, not appended by clients"}
		}
		recs, err := l.dec.Records(b)
		if err != nil {
			return nil, info, &InvalidRecordError{Code: "CORRUPT_MESSAGE", Reason: fmt.Sprintf("batch at byte %d", pos), Err: err}
		}
		if len(recs) == 0 {
			return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: fmt.Sprintf("batch at byte %d holds no records", pos)}
		}
		if b.LastOffsetDelta() != int32(len(recs)-1) {
			return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: fmt.Sprintf("batch at byte %d: last offset delta %d does not match its %d records", pos, b.LastOffsetDelta(), len(recs))}
		}
		for i, r := range recs {
			if r.Offset-b.BaseOffset() != int64(i) {
				return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: fmt.Sprintf("batch at byte %d: record %d has offset delta %d; inner offsets must be consecutive from 0", pos, i, r.Offset-b.BaseOffset())}
			}
			if cfg.CleanupPolicy.Compact && r.Key == nil {
				return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: "compacted topic cannot accept message without key"}
			}
		}
		info.Batches++
		info.Records += len(recs)
		if !keepProducer && codec.Codec(targetCodec) != b.Codec() {
			if out == nil {
				out = append([]byte(nil), data[:pos]...)
			}
			spec := record.NewBatchSpec(b.BaseOffset(), codec.Codec(targetCodec))
			spec.Transactional = b.IsTransactional()
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()
			if out, err = l.enc.AppendBatch(out, spec, recs); err != nil {
				return nil, info, err
			}
		} else if out != nil {
			out = append(out, b...)
		}
	}
	if err := it.Err(); err != nil {
		return nil, info, &InvalidRecordError{Code: "CORRUPT_MESSAGE", Reason: "record batch failed validation", Err: err}
	}
	if it.Truncated() || it.Pos() != len(data) {
		return nil, info, &InvalidRecordError{Code: "CORRUPT_MESSAGE", Reason: fmt.Sprintf("incomplete record batch at byte %d of %d", it.Pos(), len(data))}
	}
	if info.Batches == 0 {
		return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: "no record batches to append"}
	}
	if out != nil {
		data = out
	}
	// Assign offsets and stamp the leader epoch (neither is under the CRC).
	it = record.NewIter(data)
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		b.SetBaseOffset(next)
		b.SetPartitionLeaderEpoch(l.epoch)
		if logAppend {
			b.SetMaxTimestampLogAppend(now)
		}
		next = b.NextOffset()
		if b.MaxTimestamp() > info.MaxTimestamp {
			info.MaxTimestamp = b.MaxTimestamp()
		}
	}
	info.LastOffset = next - 1
	info.Bytes = len(data)
	return data, info, nil
}

// appendLocked rolls if needed and writes validated, offset-assigned data.
func (l *Log) appendLocked(data []byte, info AppendInfo) error {
	seg := l.active()
	if seg.shouldRoll(int64(len(data)), info.Batches, info.MaxTimestamp, info.LastOffset, l.cfg.EffectiveSegmentBytes(), l.cfg.MaxSegmentMs()-seg.rollJitterMs(l.cfg.SegmentJitterMs), l.now()) {
		var err error
		if seg, err = l.rollLocked(info.FirstOffset); err != nil {
			return err
		}
	}
	if err := seg.append(data); err != nil {
		return err
	}
	it := record.NewIter(data)
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		if err := l.trackTxn(b, seg); err != nil {
			return err
		}
	}
	return nil
}

// AppendEndTxnMarker writes a commit or abort control batch for a producer,
// as the transaction coordinator does.
func (l *Log) AppendEndTxnMarker(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.logEndLocked()
	key, val := record.EndTxnMarker(commit, coordinatorEpoch)
	spec := record.NewBatchSpec(next, codec.None)
	spec.Control, spec.Transactional = true, true
	spec.ProducerID, spec.ProducerEpoch = producerID, producerEpoch
	spec.PartitionLeaderEpoch = l.epoch
	now := l.now().UnixMilli()
	data, err := l.enc.AppendBatch(nil, spec, []record.Record{{Offset: next, Timestamp: now, Key: key, Value: val}})
	if err != nil {
		return 0, err
	}
	return next, l.appendLocked(data, AppendInfo{FirstOffset: next, LastOffset: next, MaxTimestamp: now, Batches: 1, Records: 1, Bytes: len(data)})
}

// Roll closes the active segment to appends and starts a new one at the log
// end offset, unless the active segment is empty.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active().size == 0 {
		return nil
	}
	_, err := l.rollLocked(l.logEndLocked())
	return err
}

func (l *Log) rollLocked(base int64) (*Segment, error) {
	old := l.active()
	if old.size == 0 && old.base == base {
		return old, nil
	}
	if old.size == 0 {
		// An empty active segment at a lower base would overlap: replace it.
		if err := old.delete(); err != nil {
			return nil, err
		}
		l.segments = l.segments[:len(l.segments)-1]
	} else if err := old.onRoll(); err != nil {
		return nil, fmt.Errorf("roll %s: %w", old.LogPath(), err)
	}
	// Kafka snapshots the producer state at every roll, named by the new
	// segment's base offset, so a restart replays at most the segments above it.
	if err := l.takeSnapshotLocked(base); err != nil {
		return nil, fmt.Errorf("roll: %w", err)
	}
	s, err := createSegment(l.fs, l.dir, base, l.segOpts(""), l.now())
	if err != nil {
		return nil, err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		_ = s.close()
		return nil, fmt.Errorf("roll: %w", err)
	}
	l.segments = append(l.segments, s)
	l.logger.Debug("rolled segment", "dir", l.dir, "new_base", base)
	return s, nil
}

// Flush makes everything appended so far durable and advances the recovery point.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	for _, s := range l.segments {
		if s.nextOffset > l.recoveryPoint || s == l.active() {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
	l.recoveryPoint = l.logEndLocked()
	l.unflushed = 0
	l.lastFlush = l.now()
	return nil
}

// ReadResult is what Read returns.
type ReadResult struct {
	// Data holds whole batches from the one containing the requested offset,
	// possibly ending with a partial batch (as a Kafka fetch response may).
	Data           []byte
	LogStartOffset int64
	LogEndOffset   int64
}

// Read returns up to maxBytes of batches starting with the batch holding
// offset (at least that whole batch when minOne is set), as Kafka's Fetch
// does. Reading at the log end returns no data; below the log start or past
// the end is an *OffsetOutOfRangeError.
func (l *Log) Read(offset int64, maxBytes int, minOne bool) (ReadResult, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	res := ReadResult{LogStartOffset: l.logStart, LogEndOffset: l.logEndLocked()}
	if offset < l.logStart || offset > res.LogEndOffset {
		return res, &OffsetOutOfRangeError{Dir: l.dir, Offset: offset, LogStartOffset: l.logStart, LogEndOffset: res.LogEndOffset}
	}
	i := l.floorSegment(offset)
	for ; i < len(l.segments); i++ {
		s := l.segments[i]
		data, err := s.read(offset, maxBytes, s.size, minOne)
		if err != nil {
			return res, err
		}
		if len(data) > 0 {
			res.Data = data
			return res, nil
		}
	}
	return res, nil
}

// floorSegment is the index of the last segment with base <= offset (0 if none).
func (l *Log) floorSegment(offset int64) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > offset })
	if i == 0 {
		return 0
	}
	return i - 1
}

// OffsetForTimestamp returns the first offset whose record timestamp is >=
// ts, with that timestamp (Kafka's ListOffsets by timestamp). found is false
// when every record is older.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segments {
		if s.maxTimestamp < ts || s.nextOffset <= l.logStart {
			continue
		}
		off, t, ok, err := s.findOffsetByTimestamp(ts, l.logStart)
		if err != nil || ok {
			return off, t, ok, err
		}
	}
	return 0, 0, false, nil
}

// AbortedTxns lists aborted transactions overlapping [from, upTo) for a
// READ_COMMITTED fetch.
func (l *Log) AbortedTxns(from, upTo int64) []index.AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []index.AbortedTxn
	for i := l.floorSegment(from); i < len(l.segments); i++ {
		s := l.segments[i]
		if s.txnIdx == nil {
			continue
		}
		txns, _ := s.txnIdx.CollectAbortedTxns(from, upTo)
		out = append(out, txns...)
	}
	return out
}

// Close flushes and closes every segment.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.flushLocked()
	if err == nil {
		// The clean-close snapshot: the next open replays nothing.
		err = l.takeSnapshotLocked(l.logEndLocked())
	}
	for _, s := range l.segments {
		err = errors.Join(err, s.close())
	}
	return err
}
