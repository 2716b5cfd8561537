package localtier

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/tiered/tiered/internal/x/kafkaerr"
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

// Is makes errors.Is(err, kafkaerr.ErrOffsetOutOfRange) true.
func (e *OffsetOutOfRangeError) Is(target error) bool { return target == kafkaerr.ErrOffsetOutOfRange }

// InvalidRecordError is Kafka's INVALID_RECORD / CORRUPT_MESSAGE /
// MESSAGE_TOO_LARGE family: an append refused whole.
type InvalidRecordError struct {
	Code   string // Kafka error name: CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, UNSUPPORTED_VERSION
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

// CodeInvalidTimestamp is the InvalidRecordError code of Kafka's
// INVALID_TIMESTAMP.
const CodeInvalidTimestamp = "INVALID_TIMESTAMP"

// Is makes errors.Is(err, kafkaerr.ErrInvalidTimestamp) true for an
// INVALID_TIMESTAMP refusal.
func (e *InvalidRecordError) Is(target error) bool {
	return target == kafkaerr.ErrInvalidTimestamp && e.Code == CodeInvalidTimestamp
}

// LogOptions configure OpenLog.
type LogOptions struct {
	Config topicconfig.Config
	// RecoveryPoint is the offset below which the log was flushed at the
	// last checkpoint; segments from there on are scanned and repaired.
	// Use -1 (or any value below the first segment) to recover everything.
	RecoveryPoint int64
	// LogStartOffset from the log-start-offset checkpoint (0 if unknown),
	// and the file it was read from (named in the warning when it lies
	// beyond the log end).
	LogStartOffset     int64
	LogStartOffsetFile string
	// LeaderEpoch stamped on appended batches (0 for tiered's own engine).
	LeaderEpoch int32
	// ReadOnly is set by LogDirOptions.ReadOnly: fsys is a vfs.Overlay, so
	// recovery changes nothing on disk, and a truncated segment never ends
	// the log: the segments after it are kept and a reader continues at the
	// next good segment.
	ReadOnly bool
	Now      func() time.Time
	Logger   *slog.Logger
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
	// readOnly: opened with LogOptions.ReadOnly.
	readOnly bool

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
	// failed is set when an fsync of the log failed: Linux may have
	// dropped the unsynced pages and a later fsync can succeed without
	// them, so the log takes no more appends or flushes (nothing past the
	// recovery point is promised) until it is reopened and recovered.
	failed error
	enc    record.Encoder
	dec    record.Decoder
}

func (l *Log) segOpts(suffix string) segmentOptions {
	return segmentOptions{indexIntervalBytes: l.cfg.IndexIntervalBytes, maxIndexBytes: int(l.cfg.SegmentIndexBytes), suffix: suffix}
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

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
	if l.readOnly {
		return AppendInfo{}, fmt.Errorf("append to %s: the log is open read-only", l.dir)
	}
	data, info, err := l.validateAndAssign(data)
	// The decoder lives as long as the log: a batch that decompressed to
	// many MiB must not stay pinned by it.
	l.dec.Release(keepDecodeBuffers)
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

// keepDecodeBuffers is the most the log's decoder keeps between appends
// (bytes per buffer): batches up to about a MiB decompressed, the default
// max.message.bytes, reuse its buffers.
const keepDecodeBuffers = 1 << 20

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
		if b.ProducerID() >= 0 && b.BaseSequence() < 0 {
			return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: fmt.Sprintf("Invalid sequence number %d in record batch with producerId %d", b.BaseSequence(), b.ProducerID())}
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
		maxTS := int64(record.NoTimestamp)
		for i, r := range recs {
			maxTS = max(maxTS, r.Timestamp)
			if r.Offset-b.BaseOffset() != int64(i) {
				return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: fmt.Sprintf("batch at byte %d: record %d has offset delta %d; inner offsets must be consecutive from 0", pos, i, r.Offset-b.BaseOffset())}
			}
			if cfg.CleanupPolicy.Compact && r.Key == nil {
				return nil, info, &InvalidRecordError{Code: "INVALID_RECORD", Reason: "compacted topic cannot accept message without key"}
			}
			if err := validateTimestamp(cfg, b, r, now); err != nil {
				return nil, info, err
			}
		}
		if !logAppend && (b.MaxTimestamp() != maxTS || b.LogAppendTime()) {
			// As Kafka's LogValidator (batch.setMaxTimestamp): the
			// stored maxTimestamp is the records' largest, CreateTime,
			// not whatever the producer's header claimed.
			b.SetMaxTimestampCreateTime(maxTS)
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
			start := len(out)
			if out, err = l.enc.AppendBatch(out, spec, recs); err != nil {
				return nil, info, err
			}
			// Kafka re-checks the size after recompression
			// (UnifiedLog.append, RecordTooLargeException).
			if size := len(out) - start; int64(size) > cfg.MaxMessageBytes {
				return nil, info, &InvalidRecordError{Code: "MESSAGE_TOO_LARGE", Reason: fmt.Sprintf("the record batch at byte %d is %d bytes once recompressed with %s, which exceeds max.message.bytes (%d)", pos, size, codec.Codec(targetCodec), cfg.MaxMessageBytes)}
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
	// Kafka refuses an append no segment can hold (UnifiedLog.append,
	// RecordBatchTooLargeException). segment.bytes, not the test-only
	// internal.segment.bytes, which exists to make tiny segments.
	if int64(len(data)) > cfg.SegmentBytes {
		return nil, info, &InvalidRecordError{Code: "RECORD_LIST_TOO_LARGE", Reason: fmt.Sprintf("Message batch size is %d bytes in append, which exceeds the maximum configured segment size of %d: send smaller batches or raise the topic's segment.bytes.", len(data), cfg.SegmentBytes)}
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

// validateTimestamp is Kafka's LogValidator.validateTimestamp: on a
// CreateTime topic a record timestamp (other than -1, "none") must lie
// within [now - message.timestamp.before.max.ms, now +
// message.timestamp.after.max.ms] (CheckTimestamp); otherwise a batch must
// not claim LogAppendTime, which only the broker sets.
func validateTimestamp(cfg topicconfig.Config, b record.Batch, r record.Record, now int64) error {
	if cfg.MessageTimestampType == topicconfig.CreateTime && r.Timestamp != record.NoTimestamp {
		return checkTimestamp(cfg, r.Timestamp, now, r.Offset)
	}
	if b.LogAppendTime() {
		return &InvalidRecordError{Code: CodeInvalidTimestamp, Reason: fmt.Sprintf(
			"Invalid timestamp type in message with offset %d. Producer should not set timestamp type to LogAppendTime.", r.Offset)}
	}
	return nil
}

// CheckTimestamp is the timestamp rule Append applies to each record of a
// CreateTime topic, for callers that validate records before encoding them
// (tiered produce's all-or-nothing check): nil for a LogAppendTime topic, a
// timestamp of -1, or one within the topic's message.timestamp.before.max.ms
// / after.max.ms of now (milliseconds); else an INVALID_TIMESTAMP
// *InvalidRecordError.
func CheckTimestamp(cfg topicconfig.Config, ts, now int64) error {
	if cfg.MessageTimestampType != topicconfig.CreateTime || ts == record.NoTimestamp {
		return nil
	}
	return checkTimestamp(cfg, ts, now, -1)
}

// checkTimestamp applies the bounds with Java's wrapping arithmetic, so the
// bounds and the message are Kafka's; offset (-1: none) is the record's, for
// the message. Nothing is formatted unless the check fails: it runs for
// every record appended.
func checkTimestamp(cfg topicconfig.Config, ts, now, offset int64) error {
	diff := now - ts
	if diff > cfg.MessageTimestampBeforeMaxMs || -diff > cfg.MessageTimestampAfterMaxMs {
		of := ""
		if offset >= 0 {
			of = fmt.Sprintf(" of message with offset %d", offset)
		}
		return &InvalidRecordError{Code: CodeInvalidTimestamp, Reason: fmt.Sprintf(
			"Timestamp %d%s is out of range. The timestamp should be within [%d, %d] (%s, %s)",
			ts, of, now-cfg.MessageTimestampBeforeMaxMs, now+cfg.MessageTimestampAfterMaxMs,
			topicconfig.MessageTimestampBeforeMaxMsConfig, topicconfig.MessageTimestampAfterMaxMsConfig)}
	}
	return nil
}

// appendLocked rolls if needed and writes validated, offset-assigned data.
func (l *Log) appendLocked(data []byte, info AppendInfo) error {
	if l.failed != nil {
		return l.failed
	}
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
		if err := l.trackTxn(b, seg, false); err != nil {
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
	} else if err := l.flushLocked(); err != nil {
		// The new segment's file must never be durable before the data
		// below its base offset: an empty segment found after a power
		// failure then always means a roll whose data survived, and its
		// base is the log end (as Kafka's loader takes it).
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
		// Out of the log: remove its files so the next append's roll can
		// create them again (O_EXCL).
		_ = s.close()
		s.removeFiles()
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
	if l.failed != nil {
		return l.failed
	}
	for _, s := range l.segments {
		if s.nextOffset > l.recoveryPoint || s == l.active() {
			if err := s.flush(); err != nil {
				l.failed = &FlushFailedError{Dir: l.dir, Err: err}
				l.logger.Error("fsync failed: the log takes no more appends or flushes until it is reopened", "dir", l.dir, "err", err)
				return l.failed
			}
		}
	}
	l.recoveryPoint = l.logEndLocked()
	l.unflushed = 0
	l.lastFlush = l.now()
	return nil
}

// FlushFailedError is every append and flush of a log after one of its
// fsyncs failed. The kernel may have dropped the data it could not write
// and a retried fsync can then succeed without it (Linux marks the pages
// clean), so nothing is appended or promised durable past the recovery
// point until the log is reopened, when recovery scans what the disk holds
// (Kafka takes the log dir offline the same way). It is a storage error.
type FlushFailedError struct {
	Dir string
	Err error
}

func (e *FlushFailedError) Error() string {
	return fmt.Sprintf("log %s: an fsync failed (%v): data appended since the last good flush may not be on disk, so the log takes no more appends or flushes; check the disk and restart, and recovery will keep what the disk holds", e.Dir, e.Err)
}

func (e *FlushFailedError) Unwrap() error { return e.Err }

// ReadResult is what Read returns.
type ReadResult struct {
	// Data holds whole batches from the one containing the requested
	// offset, each checked (framing, CRC, offsets: see Segment.read); never
	// a partial batch.
	Data           []byte
	LogStartOffset int64
	LogEndOffset   int64
}

// Read returns up to maxBytes of whole batches starting with the batch
// holding offset (at least that whole batch when minOne is set, else
// nothing when it does not fit), as Kafka's Fetch does. Every batch is
// checked first (framing, CRC, offsets within the segment and following
// one another): a bad one is never returned (see Segment.read). Reading at the log end returns no data; below the log start or past
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
		// A segment's batches hold offsets below the next segment's base
		// offset, the active one's below the log end.
		hi := s.nextOffset - 1
		if i+1 < len(l.segments) {
			hi = l.segments[i+1].base - 1
		}
		data, found, err := s.read(offset, maxBytes, s.size, hi, minOne)
		if err != nil {
			return res, err
		}
		if found {
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
