package localtier

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// File suffixes of a partition directory, as Kafka names them.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	TxnIndexSuffix  = ".txnindex"
	SnapshotSuffix  = ".snapshot"
	CleanedSuffix   = ".cleaned"
	SwapSuffix      = ".swap"
	DeletedSuffix   = ".deleted"
)

// FilenamePrefix is the 20-digit zero-padded base offset Kafka names
// segment files with.
func FilenamePrefix(base int64) string { return fmt.Sprintf("%020d", base) }

// SegmentPath returns dir/<20-digit base><suffix>.
func SegmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, FilenamePrefix(base)+suffix)
}

// ParseSegmentName splits a segment file name into base offset and suffix
// (".log", ".index", ".log.swap", ...). ok is false for other names.
func ParseSegmentName(name string) (base int64, suffix string, ok bool) {
	if len(name) < 21 || name[20] != '.' {
		return 0, "", false
	}
	b, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || b < 0 {
		return 0, "", false
	}
	return b, name[20:], true
}

// segmentOptions carries the topic settings a segment needs.
type segmentOptions struct {
	indexIntervalBytes int64
	maxIndexBytes      int
	suffix             string // "" or SwapSuffix / CleanedSuffix appended to every file
}

// Segment is one .log file of a partition with its indexes. Appends are
// serialised by the owning Log; reads may run concurrently with an append
// because they never look past the size they were given.
type Segment struct {
	fs     vfs.FS
	dir    string
	base   int64
	opts   segmentOptions
	log    vfs.File
	size   int64
	offIdx *index.OffsetIndex
	timIdx *index.TimeIndex
	txnIdx *index.TxnIndex

	nextOffset          int64 // offset after the last batch
	maxTimestamp        int64 // largest batch max timestamp so far
	offsetOfMaxTS       int64 // last offset of the batch holding it
	firstBatchTimestamp int64 // max timestamp of the first batch (segment.ms roll)
	created             time.Time
	bytesSinceIndex     int64
	jitter              int64 // segment.jitter.ms drawn for this segment, -1 until drawn
	// txnIdxCreated: the .txnindex was created since the directory was
	// last synced; flush syncs it so the file's entry is durable too.
	txnIdxCreated bool
}

// rollJitterMs draws this segment's roll jitter once, uniformly in
// [0, maxJitter), as Kafka does per segment.
func (s *Segment) rollJitterMs(maxJitter int64) int64 {
	if maxJitter <= 0 {
		return 0
	}
	if s.jitter < 0 || s.jitter >= maxJitter {
		s.jitter = rand.Int64N(maxJitter)
	}
	return s.jitter
}

func (s *Segment) path(suffix string) string { return SegmentPath(s.dir, s.base, suffix+s.opts.suffix) }

// BaseOffset is the segment's first possible offset.
func (s *Segment) BaseOffset() int64 { return s.base }

// Size is the byte size of the log file.
func (s *Segment) Size() int64 { return s.size }

// NextOffset is the offset after the segment's last batch (the base offset
// when it is empty).
func (s *Segment) NextOffset() int64 { return s.nextOffset }

// MaxTimestamp is the largest batch timestamp in the segment, -1 if none.
func (s *Segment) MaxTimestamp() int64 { return s.maxTimestamp }

// LogPath is the path of the .log file.
func (s *Segment) LogPath() string { return s.path(LogSuffix) }

// createSegment makes a new empty segment with empty indexes.
func createSegment(fsys vfs.FS, dir string, base int64, opts segmentOptions, now time.Time) (*Segment, error) {
	s := &Segment{fs: fsys, dir: dir, base: base, opts: opts, nextOffset: base, maxTimestamp: record.NoTimestamp,
		offsetOfMaxTS: base, firstBatchTimestamp: record.NoTimestamp, created: now, jitter: -1}
	f, err := fsys.OpenFile(s.path(LogSuffix), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", base, err)
	}
	s.log = f
	if err := s.openIndexes(); err != nil {
		_ = f.Close()
		// Leave nothing behind: a retry creates the files again (O_EXCL).
		s.removeFiles()
		return nil, err
	}
	return s, nil
}

// removeFiles closes whatever index is open and removes the files of a
// segment that never joined its log.
func (s *Segment) removeFiles() {
	if s.offIdx != nil {
		_ = s.offIdx.Close()
	}
	if s.timIdx != nil {
		_ = s.timIdx.Close()
	}
	if s.txnIdx != nil {
		_ = s.txnIdx.Close()
	}
	for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
		_ = s.fs.Remove(s.path(suf))
	}
}

func (s *Segment) openIndexes() error {
	var err error
	if s.offIdx, err = index.OpenOffsetIndex(s.fs, s.path(IndexSuffix), s.base, s.opts.maxIndexBytes); err != nil {
		return fmt.Errorf("open segment %d: %w", s.base, err)
	}
	if s.timIdx, err = index.OpenTimeIndex(s.fs, s.path(TimeIndexSuffix), s.base, s.opts.maxIndexBytes); err != nil {
		return fmt.Errorf("open segment %d: %w", s.base, err)
	}
	// Kafka creates the .txnindex only when a transaction aborts in the segment.
	_, err = s.fs.Stat(s.path(TxnIndexSuffix))
	switch {
	case err == nil:
		if s.txnIdx, err = index.OpenTxnIndex(s.fs, s.path(TxnIndexSuffix), s.base); err != nil {
			return fmt.Errorf("open segment %d: %w", s.base, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("open segment %d: %w", s.base, err)
	}
	return nil
}

// openSegment opens an existing segment. It loads the indexes but does not
// scan the log; a caller that does not trust the files calls recover. needRecovery
// reports missing or insane indexes.
func openSegment(fsys vfs.FS, dir string, base int64, opts segmentOptions) (s *Segment, needRecovery bool, err error) {
	s = &Segment{fs: fsys, dir: dir, base: base, opts: opts, nextOffset: base, maxTimestamp: record.NoTimestamp,
		offsetOfMaxTS: base, firstBatchTimestamp: record.NoTimestamp, jitter: -1}
	f, err := fsys.OpenFile(s.path(LogSuffix), os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("open segment %d: %w", base, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, false, fmt.Errorf("stat segment %d: %w", base, err)
	}
	s.log, s.size, s.created = f, fi.Size(), fi.ModTime()
	for _, suf := range []string{IndexSuffix, TimeIndexSuffix} {
		if _, err := fsys.Stat(s.path(suf)); errors.Is(err, os.ErrNotExist) {
			needRecovery = true
		} else if err != nil {
			_ = f.Close()
			return nil, false, fmt.Errorf("open segment %d: %w", base, err)
		}
	}
	if err := s.openIndexes(); err != nil {
		// An offset or time index we cannot even load is rebuilt from the log.
		var ce *index.CorruptIndexError
		if !errors.As(err, &ce) || ce.File == s.path(TxnIndexSuffix) {
			_ = f.Close()
			return nil, false, err
		}
		s.removeIndexes()
		if err := s.openIndexes(); err != nil {
			_ = f.Close()
			return nil, false, err
		}
		needRecovery = true
	}
	if err := s.sanityCheck(); err != nil {
		needRecovery = true
	}
	if !needRecovery {
		if err := s.loadTail(); err != nil {
			needRecovery = true
		}
	}
	return s, needRecovery, nil
}

func (s *Segment) sanityCheck() error {
	if err := s.offIdx.SanityCheck(); err != nil {
		return err
	}
	if err := s.timIdx.SanityCheck(); err != nil {
		return err
	}
	if s.txnIdx != nil {
		return s.txnIdx.SanityCheck()
	}
	return nil
}

// loadTail finds nextOffset, the max timestamp and the first batch's
// timestamp of a trusted segment, scanning only from the last index entry.
func (s *Segment) loadTail() error {
	if s.size == 0 {
		return nil
	}
	last := s.timIdx.LastEntry()
	if last.Timestamp != index.NoTimestamp {
		s.maxTimestamp, s.offsetOfMaxTS = last.Timestamp, last.Offset
	}
	var hdr [record.HeaderSize]byte
	if _, err := s.log.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("read first batch of %s: %w", s.LogPath(), err)
	}
	s.firstBatchTimestamp = record.Batch(hdr[:]).MaxTimestamp()
	e := s.offIdx.Lookup(1<<63 - 1)
	if int64(e.Position) > s.size {
		return fmt.Errorf("index entry position %d past the end of %s", e.Position, s.LogPath())
	}
	// Scan the unindexed tail, from the last indexed position to the end.
	_, torn, err := scanBatches(s.log, s.LogPath(), int64(e.Position), s.size, false, func(pos int64, b record.Batch) error {
		s.nextOffset = b.NextOffset()
		if b.MaxTimestamp() > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTS = b.MaxTimestamp(), b.LastOffset()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if torn {
		return fmt.Errorf("torn batch at the end of %s", s.LogPath())
	}
	s.bytesSinceIndex = s.size - int64(e.Position)
	return nil
}

// recover rebuilds the indexes by scanning every batch, verifying CRCs, and
// truncates the log after the last valid batch. It returns the number of
// bytes truncated. A batch whose offsets reach limit (the next segment's
// base offset) is corrupt: it would overlap the next segment.
func (s *Segment) recover(limit int64) (truncated int64, err error) {
	if err := s.offIdx.Reset(); err != nil {
		return 0, err
	}
	if err := s.timIdx.Reset(); err != nil {
		return 0, err
	}
	s.nextOffset, s.maxTimestamp, s.offsetOfMaxTS = s.base, record.NoTimestamp, s.base
	s.firstBatchTimestamp = record.NoTimestamp
	var lastIndexed int64
	valid, _, scanErr := scanBatches(s.log, s.LogPath(), 0, s.size, true, func(pos int64, b record.Batch) error {
		if b.BaseOffset() < s.nextOffset || b.LastOffset()-s.base > 1<<31-1 || b.LastOffset() >= limit {
			return &record.CorruptError{File: s.LogPath(), Pos: pos, Offset: b.BaseOffset(),
				Reason: fmt.Sprintf("batch offsets [%d, %d] out of order or out of range for segment %d", b.BaseOffset(), b.LastOffset(), s.base)}
		}
		if pos == 0 {
			s.firstBatchTimestamp = b.MaxTimestamp()
		}
		if b.MaxTimestamp() > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTS = b.MaxTimestamp(), b.LastOffset()
		}
		if pos-lastIndexed > s.opts.indexIntervalBytes {
			// Same rule as append: more than index.interval.bytes since the last entry.
			if err := s.offIdx.Append(b.LastOffset(), int32(pos)); err != nil {
				return err
			}
			if err := s.timIdx.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTS); err != nil {
				return err
			}
			lastIndexed = pos
		}
		s.nextOffset = b.NextOffset()
		return nil
	})
	if scanErr != nil && !record.IsCorrupt(scanErr) {
		return 0, scanErr
	}
	s.bytesSinceIndex = valid - lastIndexed
	// The .txnindex cannot be rebuilt from this segment alone (a
	// transaction may begin in an earlier one), so it is kept, minus the
	// entries whose abort marker did not survive.
	if s.txnIdx != nil {
		if err := s.txnIdx.TruncateTo(s.nextOffset); err != nil {
			return 0, err
		}
	}
	truncated = s.size - valid
	if truncated > 0 {
		if err := s.log.Truncate(valid); err != nil {
			return 0, fmt.Errorf("truncate %s to %d: %w", s.LogPath(), valid, err)
		}
		s.size = valid
	}
	return truncated, nil
}

// append writes batches (already validated, offsets assigned) at the end of
// the log and adds index entries per batch as Kafka's LogSegment.append
// does: an entry (batch last offset, batch position) once more than
// index.interval.bytes were written since the last one.
func (s *Segment) append(data []byte) error {
	start := s.size
	saved := *s
	if start+int64(len(data)) > 1<<31-1 {
		return fmt.Errorf("append to %s: segment would exceed 2 GiB", s.LogPath())
	}
	if _, err := s.log.WriteAt(data, start); err != nil {
		// Leave no half-written batch behind.
		_ = s.log.Truncate(start)
		return fmt.Errorf("append to %s: %w", s.LogPath(), err)
	}
	s.size += int64(len(data))
	if err := s.indexAppended(data, start); err != nil {
		// Leave the segment as it was: no bytes, no entries, no state.
		s.size, s.nextOffset, s.maxTimestamp, s.offsetOfMaxTS, s.firstBatchTimestamp, s.bytesSinceIndex = saved.size, saved.nextOffset, saved.maxTimestamp, saved.offsetOfMaxTS, saved.firstBatchTimestamp, saved.bytesSinceIndex
		first := record.Batch(data).BaseOffset()
		return errors.Join(err, s.log.Truncate(start), s.offIdx.TruncateTo(first), s.timIdx.TruncateTo(first))
	}
	return nil
}

// indexAppended updates the segment state and indexes for data just written
// at start.
func (s *Segment) indexAppended(data []byte, start int64) error {
	it := record.NewIter(data)
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		pos := start + int64(it.Pos()-b.Size())
		if pos == 0 {
			s.firstBatchTimestamp = b.MaxTimestamp()
		}
		if b.MaxTimestamp() > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTS = b.MaxTimestamp(), b.LastOffset()
		}
		if s.bytesSinceIndex > s.opts.indexIntervalBytes {
			if err := s.offIdx.Append(b.LastOffset(), int32(pos)); err != nil {
				return err
			}
			if err := s.timIdx.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTS); err != nil {
				return err
			}
			s.bytesSinceIndex = 0
		}
		s.bytesSinceIndex += int64(b.Size())
		s.nextOffset = b.NextOffset()
	}
	return nil
}

// shouldRoll reports whether an append of size bytes with the given max
// timestamp and last offset must go to a new segment (Kafka's shouldRoll).
// Beyond Kafka's rule, a non-empty segment also rolls when the indexes could
// not take one entry per batch of the append, so a multi-batch append never
// fails half way on a full index.
func (s *Segment) shouldRoll(size int64, batches int, maxTS, lastOffset int64, segmentBytes, segmentMs int64, now time.Time) bool {
	waited := now.Sub(s.created).Milliseconds()
	if s.firstBatchTimestamp >= 0 {
		waited = maxTS - s.firstBatchTimestamp
	}
	return s.size > segmentBytes-size ||
		(s.size > 0 && waited > segmentMs) ||
		s.offIdx.IsFull() || s.timIdx.IsFull() ||
		(s.size > 0 && (s.offIdx.Entries()+batches > s.offIdx.MaxEntries() || s.timIdx.Entries()+batches > s.timIdx.MaxEntries()-1)) ||
		lastOffset-s.base > 1<<31-1 || lastOffset < s.base
}

// onRoll writes the final time index entry. The segment is not fsynced
// here: Log.rollLocked flushes the log right after (before it creates the
// next segment), which makes the rolled segment durable and advances the
// recovery point.
func (s *Segment) onRoll() error {
	if s.maxTimestamp >= 0 {
		if err := s.timIdx.MaybeAppendOnRoll(s.maxTimestamp, s.offsetOfMaxTS); err != nil && !errors.Is(err, index.ErrIndexFull) {
			return err
		}
	}
	return nil
}

func (s *Segment) flush() error {
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("flush %s: %w", s.LogPath(), err)
	}
	if err := s.offIdx.Flush(); err != nil {
		return err
	}
	if err := s.timIdx.Flush(); err != nil {
		return err
	}
	if s.txnIdx != nil {
		if err := s.txnIdx.Flush(); err != nil {
			return err
		}
	}
	if s.txnIdxCreated {
		// The .txnindex is created by the first abort, long after the
		// segment's other files: without this its entries could be
		// fsynced but the file itself lost.
		if err := s.fs.SyncDir(s.dir); err != nil {
			return fmt.Errorf("flush %s: %w", s.path(TxnIndexSuffix), err)
		}
		s.txnIdxCreated = false
	}
	return nil
}

// appendAbortedTxn records an aborted transaction in the .txnindex,
// creating it on first use.
func (s *Segment) appendAbortedTxn(a index.AbortedTxn) error {
	if s.txnIdx == nil {
		var err error
		if s.txnIdx, err = index.OpenTxnIndex(s.fs, s.path(TxnIndexSuffix), s.base); err != nil {
			return err
		}
		s.txnIdxCreated = true
	}
	return s.txnIdx.Append(a)
}

// restoreAbortedTxn is appendAbortedTxn for the replay of a recovered
// segment: an entry the .txnindex already holds (its last offset is not
// past the last entry's) is skipped. What survived of the file is a prefix
// of its entries, so the replay adds exactly the ones lost.
func (s *Segment) restoreAbortedTxn(a index.AbortedTxn) error {
	if s.txnIdx != nil {
		if last, ok := s.txnIdx.Last(); ok && last.LastOffset >= a.LastOffset {
			return nil
		}
	}
	return s.appendAbortedTxn(a)
}

// findBatch returns the position and size of the first batch whose last
// offset is >= offset, looking no further than maxPos. ok is false if there
// is none. The batches it passes over on the way are checked with chain
// (which begins at the index entry's batch); the one found is not.
func (s *Segment) findBatch(offset int64, maxPos int64, chain *record.Chain) (pos int64, size int, ok bool, err error) {
	e := s.offIdx.Lookup(offset)
	start := int64(e.Position)
	if start > 0 {
		chain.StartAt(e.Offset)
	}
	_, _, err = scanBatches(s.log, s.LogPath(), start, maxPos, false, func(p int64, b record.Batch) error {
		if b.LastOffset() >= offset {
			pos, size, ok = p, b.Size(), true
			return errStopScan
		}
		// The batch's length places the next one: checked too.
		if err := b.VerifyCRC(); err != nil {
			return record.WithFile(err, s.LogPath(), p)
		}
		if err := chain.Check(b); err != nil {
			return record.WithFile(err, s.LogPath(), p)
		}
		return nil
	})
	return pos, size, ok, err
}

// read returns whole batches of the log starting at the batch holding
// offset, within maxBytes but at least that whole batch when minOne is set
// (Kafka's Fetch). Every batch returned passed its checks (framing, CRC,
// header, and offsets within [s.base, hi] following one another, see
// record.Chain), and so did the offset of the batch after the last one: a
// batch failing them is never returned (record.CheckBatches). When the
// first batch fails, the read is a *record.CorruptError naming the file and
// position; when a later one does, the batches before it are returned and
// the read starting at it fails. found is false when the segment has no batch holding offset or a
// later one (the read goes on in the next segment).
func (s *Segment) read(offset int64, maxBytes int, maxPos, hi int64, minOne bool) (data []byte, found bool, err error) {
	chain := record.NewChain(s.base, hi)
	pos, size, ok, err := s.findBatch(offset, maxPos, &chain)
	if err != nil || !ok {
		return nil, false, err
	}
	n := int64(maxBytes)
	if minOne && int64(size) > n {
		n = int64(size)
	}
	n = min(n, maxPos-pos)
	if n < int64(size) {
		return nil, true, nil // the first batch does not fit and minOne is unset
	}
	// Read 8 bytes more: the base offset of the batch after the last one
	// returned, which must follow it.
	buf := make([]byte, min(n+8, maxPos-pos))
	if _, err := s.log.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
		return nil, true, fmt.Errorf("read %s at %d: %w", s.LogPath(), pos, err)
	}
	keep, err := record.CheckBatches([][]byte{buf[:n]}, &chain, true, buf[n:])
	if err != nil {
		return nil, true, record.WithFile(err, s.LogPath(), pos)
	}
	return buf[:keep], true, nil
}

// findOffsetByTimestamp returns the first record at or after startOffset
// with timestamp >= ts.
func (s *Segment) findOffsetByTimestamp(ts int64, startOffset int64) (offset, timestamp int64, ok bool, err error) {
	// As Kafka: the time index only picks where to start scanning; records
	// are filtered by startOffset alone (the entry's offset is the last of a
	// batch whose earlier records may carry the same timestamp).
	e := s.timIdx.Lookup(ts)
	start := int64(s.offIdx.Lookup(max(e.Offset, startOffset)).Position)
	var d record.Decoder
	_, _, err = scanBatches(s.log, s.LogPath(), start, s.size, false, func(p int64, b record.Batch) error {
		if b.MaxTimestamp() < ts || b.LastOffset() < startOffset {
			return nil
		}
		recs, err := d.Records(b)
		if err != nil {
			return record.WithFile(err, s.LogPath(), p)
		}
		for _, r := range recs {
			if r.Timestamp >= ts && r.Offset >= startOffset {
				offset, timestamp, ok = r.Offset, r.Timestamp, true
				return errStopScan
			}
		}
		return nil
	})
	return offset, timestamp, ok, err
}

func (s *Segment) close() error {
	var errs []error
	if s.maxTimestamp >= 0 {
		if err := s.timIdx.MaybeAppendOnRoll(s.maxTimestamp, s.offsetOfMaxTS); err != nil && !errors.Is(err, index.ErrIndexFull) && !errors.Is(err, index.ErrClosed) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.offIdx.Close(), s.timIdx.Close())
	if s.txnIdx != nil {
		errs = append(errs, s.txnIdx.Close())
	}
	errs = append(errs, s.log.Close())
	return errors.Join(errs...)
}

// indexFiles lists the segment's files that exist, log first.
func (s *Segment) files() []string {
	out := []string{s.path(LogSuffix), s.path(IndexSuffix), s.path(TimeIndexSuffix)}
	if s.txnIdx != nil {
		out = append(out, s.path(TxnIndexSuffix))
	}
	return out
}

// removeIndexes removes the offset and time indexes, which recovery rebuilds
// from the log. The .txnindex stays: it cannot be rebuilt from the segment
// alone (a damaged one fails the open, naming the file).
func (s *Segment) removeIndexes() {
	for _, suf := range []string{IndexSuffix, TimeIndexSuffix} {
		_ = s.fs.Remove(s.path(suf))
	}
}

// delete closes the segment and removes its files the way Kafka does:
// rename each to .deleted, sync the directory, then remove them.
func (s *Segment) delete() error {
	files := s.files()
	closeErr := s.close()
	var deleted []string
	for _, f := range files {
		if err := s.fs.Rename(f, f+DeletedSuffix); err != nil {
			return errors.Join(closeErr, fmt.Errorf("delete segment %d: %w", s.base, err))
		}
		deleted = append(deleted, f+DeletedSuffix)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return errors.Join(closeErr, fmt.Errorf("delete segment %d: %w", s.base, err))
	}
	for _, f := range deleted {
		if err := s.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete segment %d: %w", s.base, err)
		}
	}
	return closeErr
}

// isTempName reports the leftover suffixes the loader must resolve.
func isTempName(name string) bool {
	return strings.HasSuffix(name, CleanedSuffix) || strings.HasSuffix(name, SwapSuffix) || strings.HasSuffix(name, DeletedSuffix)
}
