package localtier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

// This file holds the hooks the log cleaner (package compactor) needs: a
// consistent view of a log's segments, read-only scans of segments that do
// not block appends, a writer for a cleaned segment, and Kafka's crash-safe
// replaceSegments. The cleaning policy itself lives in compactor.

// ErrSegmentChanged is returned by the cleaner hooks when a segment they were
// asked about left the log (retention, truncation, another replace) or the
// log was closed while the cleaner worked on it. The cleaning attempt is
// abandoned; nothing is wrong with the log.
var ErrSegmentChanged = errors.New("segment changed or left the log during cleaning")

// CleanerSegment describes one segment as the cleaner plans with it.
type CleanerSegment struct {
	BaseOffset int64
	// NextOffset is the offset after the segment's last batch (BaseOffset
	// when it is empty). After compaction it may be below the next
	// segment's base offset.
	NextOffset int64
	Size       int64
	// MaxTimestamp is the largest batch max timestamp, or, when no batch
	// has one (records without timestamps), the .log file's last-modified
	// time (Unix ms), as Kafka's largestTimestamp; -1 for an empty segment.
	MaxTimestamp int64
	// FirstBatchTimestamp is the max timestamp of the first batch (Kafka's
	// getFirstBatchTimestamp), -1 for an empty segment.
	FirstBatchTimestamp int64
	// OffsetIndexBytes and TimeIndexBytes are the bytes of valid index
	// entries, which grouping segments must keep within segment.index.bytes.
	OffsetIndexBytes int64
	TimeIndexBytes   int64
	Active           bool
}

// CleanerView is a consistent snapshot of a log for the cleaner.
type CleanerView struct {
	Dir              string
	LogStartOffset   int64
	LogEndOffset     int64
	LastStableOffset int64
	Config           topicconfig.Config
	Segments         []CleanerSegment // oldest first; the last is the active one
}

// CleanerView returns the log's segments and offsets under one read lock.
func (l *Log) CleanerView() CleanerView {
	v, untimed := l.cleanerView()
	// Segments whose records carry no timestamp are as old as their file,
	// so min.compaction.lag.ms protects them too. A file gone meanwhile
	// (replaced or deleted) counts as written now: the cleaner leaves it.
	for _, u := range untimed {
		v.Segments[u.i].MaxTimestamp = l.now().UnixMilli()
		if fi, err := l.fs.Stat(u.path); err == nil {
			v.Segments[u.i].MaxTimestamp = fi.ModTime().UnixMilli()
		}
	}
	return v
}

type untimedSegment struct {
	i    int
	path string
}

// cleanerView builds the view under the read lock and lists the non-empty
// segments with no timestamp.
func (l *Log) cleanerView() (CleanerView, []untimedSegment) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var untimed []untimedSegment
	v := CleanerView{Dir: l.dir, LogStartOffset: l.logStart, LogEndOffset: l.logEndLocked(), Config: l.cfg,
		Segments: make([]CleanerSegment, len(l.segments))}
	v.LastStableOffset = v.LogEndOffset
	for _, first := range l.ongoingTxns {
		v.LastStableOffset = min(v.LastStableOffset, first)
	}
	for i, s := range l.segments {
		v.Segments[i] = CleanerSegment{BaseOffset: s.base, NextOffset: s.nextOffset, Size: s.size,
			MaxTimestamp: s.maxTimestamp, FirstBatchTimestamp: s.firstBatchTimestamp,
			OffsetIndexBytes: int64(s.offIdx.SizeInBytes()), TimeIndexBytes: int64(s.timIdx.SizeInBytes()),
			Active: i == len(l.segments)-1}
		if s.size > 0 && s.maxTimestamp < 0 {
			untimed = append(untimed, untimedSegment{i, s.LogPath()})
		}
	}
	return v, untimed
}

// liveSegmentLocked finds s's current *Segment by base offset. Callers hold mu.
func (l *Log) liveSegmentLocked(base int64) (*Segment, bool) {
	if l.closed {
		return nil, false
	}
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base >= base })
	if i == len(l.segments) || l.segments[i].base != base {
		return nil, false
	}
	return l.segments[i], true
}

func (l *Log) isLiveLocked(s *Segment) bool {
	cur, ok := l.liveSegmentLocked(s.base)
	return ok && cur == s
}

// liveFile reads a segment's log under the log's read lock, failing with
// ErrSegmentChanged once the segment has left the log. The cleaner's long
// scans therefore never hold the lock between reads, and appends go on.
type liveFile struct {
	vfs.File
	l *Log
	s *Segment
}

func (f liveFile) ReadAt(p []byte, off int64) (int, error) {
	f.l.mu.RLock()
	defer f.l.mu.RUnlock()
	if !f.l.isLiveLocked(f.s) {
		return 0, ErrSegmentChanged
	}
	return f.s.log.ReadAt(p, off)
}

// scanTarget resolves seg to its live segment, the position to start from
// and the size to stop at.
func (l *Log) scanTarget(seg CleanerSegment, from int64) (s *Segment, path string, start, end int64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s, ok := l.liveSegmentLocked(seg.BaseOffset)
	if !ok || s.size < seg.Size {
		return nil, "", 0, 0, fmt.Errorf("scan segment %d of %s: %w", seg.BaseOffset, l.dir, ErrSegmentChanged)
	}
	if from > s.base {
		start = int64(s.offIdx.Lookup(from).Position)
	}
	return s, s.LogPath(), start, seg.Size, nil
}

// ScanSegment calls fn for every batch of seg from the batch holding offset
// from (batches before it may be included too: the scan starts at the offset
// index entry at or below from) up to seg.Size bytes, the size the caller
// observed. With verify, CRCs are checked and a mismatch is a
// *record.CorruptError. The batch passed to fn aliases a read buffer and is
// valid only during the call. The log's lock is held only while reading, so
// appends go on; if the segment leaves the log meanwhile the scan fails with
// ErrSegmentChanged. A batch running past seg.Size is reported as a
// *record.CorruptError (segments the cleaner scans are never torn).
func (l *Log) ScanSegment(seg CleanerSegment, from int64, verify bool, fn func(pos int64, b record.Batch) error) error {
	s, path, start, end, err := l.scanTarget(seg, from)
	if err != nil {
		return err
	}
	next, torn, err := scanBatches(liveFile{l: l, s: s}, path, start, end, verify, fn)
	if err != nil {
		return err
	}
	if torn {
		return &record.CorruptError{File: path, Pos: next, Offset: -1, Reason: fmt.Sprintf("batch runs past the segment size %d", end)}
	}
	return nil
}

// SegmentModTime returns the last-modified time (Unix ms) of seg's .log
// file, Kafka's LogSegment.lastModified: the age of records without a
// timestamp, and what the cleaner's delete horizon for legacy (magic 0/1)
// tombstones goes by. Once the segment has left the log it fails with
// ErrSegmentChanged.
func (l *Log) SegmentModTime(seg CleanerSegment) (int64, error) {
	_, path, _, _, err := l.scanTarget(seg, seg.BaseOffset)
	if err != nil {
		return 0, err
	}
	fi, err := l.fs.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("segment %d of %s: %w", seg.BaseOffset, l.dir, ErrSegmentChanged)
	}
	if err != nil {
		return 0, fmt.Errorf("segment %d of %s: %w", seg.BaseOffset, l.dir, err)
	}
	return fi.ModTime().UnixMilli(), nil
}

// headerScanBuf is how much ScanBatchHeaders reads at a time: enough for
// the headers of many small batches, little waste for large ones.
const headerScanBuf = 8 << 10

// ScanBatchHeaders calls fn with the header of every batch of seg (up to
// seg.Size bytes, so the active segment may be scanned too) without reading
// the batches' records: h holds only the first record.HeaderSize bytes
// (fewer for a legacy message) and size is the whole batch's size. Use it
// for header fields (offsets, producer, attributes), never for Size() or the
// payload. Like ScanSegment it holds the log's lock only while reading.
func (l *Log) ScanBatchHeaders(seg CleanerSegment, fn func(pos int64, size int, h record.Batch) error) error {
	s, path, _, end, err := l.scanTarget(seg, seg.BaseOffset)
	if err != nil {
		return err
	}
	f := liveFile{l: l, s: s}
	buf := make([]byte, headerScanBuf)
	var bufStart, bufLen int64 = 0, 0 // file range held in buf
	for pos := int64(0); pos < end; {
		if pos < bufStart || pos+record.HeaderSize > bufStart+bufLen {
			n := min(int64(len(buf)), end-pos)
			if _, err := f.ReadAt(buf[:n], pos); err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read %s at %d: %w", path, pos, err)
			}
			bufStart, bufLen = pos, n
		}
		h := buf[pos-bufStart : bufLen]
		if len(h) < record.LogOverhead+5 {
			return &record.CorruptError{File: path, Pos: pos, Offset: -1, Reason: "batch header runs past the segment end"}
		}
		length := int64(int32(binary.BigEndian.Uint32(h[8:])))
		magic := int8(h[16])
		size := record.LogOverhead + length
		var bad string
		switch {
		case magic < 0 || magic > record.CurrentMagic:
			bad = fmt.Sprintf("unknown magic %d", magic)
		case length < int64(record.MinLength(magic)):
			bad = fmt.Sprintf("bad batch length %d", length)
		case pos+size > end:
			bad = fmt.Sprintf("batch of %d bytes runs past the segment size %d", size, end)
		case magic == record.CurrentMagic && len(h) < record.HeaderSize:
			bad = "batch header runs past the segment end"
		}
		if bad != "" {
			return &record.CorruptError{File: path, Pos: pos, Offset: int64(binary.BigEndian.Uint64(h)), Reason: bad}
		}
		hl := min(int64(len(h)), size, record.HeaderSize)
		if err := fn(pos, int(size), record.Batch(h[:hl])); err != nil {
			return err
		}
		pos += size
	}
	return nil
}

// cleanedWriteBuffer is how many bytes a CleanedSegment gathers before it
// writes them (Kafka's log.cleaner.io.buffer.size default is 512 KiB split
// between read and write).
const cleanedWriteBuffer = 256 << 10

// CleanedSegment is a segment being written by the cleaner as
// <base>.log.cleaned with its .index/.timeindex/.txnindex .cleaned files.
// Batches are appended in offset order; the indexes follow Kafka's rules
// (an entry after more than index.interval.bytes). It is not part of the log
// until ReplaceSegments swaps it in. Not safe for concurrent use.
type CleanedSegment struct {
	l    *Log
	seg  *Segment
	buf  []byte
	next int64 // offset after the last appended batch
	size int64 // bytes appended, buffered ones included
	done bool
}

// NewCleanedSegment creates the files of a cleaned segment with base offset
// base, removing leftovers of an earlier failed attempt.
func (l *Log) NewCleanedSegment(base int64) (*CleanedSegment, error) {
	l.mu.RLock()
	opts, now, closed := l.segOpts(CleanedSuffix), l.now(), l.closed
	l.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("new cleaned segment %d of %s: %w", base, l.dir, ErrSegmentChanged)
	}
	for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		if err := l.fs.Remove(SegmentPath(l.dir, base, suf+CleanedSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("new cleaned segment %d: %w", base, err)
		}
	}
	s, err := createSegment(l.fs, l.dir, base, opts, now)
	if err != nil {
		return nil, fmt.Errorf("new cleaned segment: %w", err)
	}
	return &CleanedSegment{l: l, seg: s, next: base}, nil
}

// BaseOffset is the base offset the cleaned segment is named by.
func (c *CleanedSegment) BaseOffset() int64 { return c.seg.base }

// Size is the bytes appended so far.
func (c *CleanedSegment) Size() int64 { return c.size }

// NextOffset is the offset after the last appended batch (the base offset
// while empty).
func (c *CleanedSegment) NextOffset() int64 { return c.next }

// LogPath is the path of the .log.cleaned file.
func (c *CleanedSegment) LogPath() string { return c.seg.LogPath() }

// Append adds one whole batch. Its offsets must lie at or above the base
// offset, after every batch appended before, and within 2^31-1 of the base.
func (c *CleanedSegment) Append(b record.Batch) error {
	if c.done {
		return errors.New("append to cleaned segment: already finished")
	}
	if b.BaseOffset() < c.next || b.LastOffset()-c.seg.base > 1<<31-1 {
		return fmt.Errorf("append to cleaned segment %d: batch [%d, %d] out of order (next offset %d) or out of range",
			c.seg.base, b.BaseOffset(), b.LastOffset(), c.next)
	}
	if c.size+int64(len(b)) > 1<<31-1 {
		return fmt.Errorf("append to cleaned segment %d: segment would exceed 2 GiB", c.seg.base)
	}
	if len(c.buf)+len(b) > cleanedWriteBuffer && len(c.buf) > 0 {
		if err := c.flushBuf(); err != nil {
			return err
		}
	}
	c.buf = append(c.buf, b...)
	c.size += int64(len(b))
	c.next = b.NextOffset()
	return nil
}

func (c *CleanedSegment) flushBuf() error {
	if len(c.buf) == 0 {
		return nil
	}
	if err := c.seg.append(c.buf); err != nil {
		return fmt.Errorf("write cleaned segment: %w", err)
	}
	c.buf = c.buf[:0]
	return nil
}

// AppendAbortedTxn adds an entry to the cleaned segment's .txnindex (the
// aborted transactions whose markers the cleaner keeps), in marker order.
func (c *CleanedSegment) AppendAbortedTxn(a index.AbortedTxn) error {
	if err := c.seg.appendAbortedTxn(a); err != nil {
		return fmt.Errorf("cleaned segment %d: %w", c.seg.base, err)
	}
	return nil
}

// finish writes what is buffered, the last time index entry, and fsyncs
// every file.
func (c *CleanedSegment) finish() error {
	if err := c.flushBuf(); err != nil {
		return err
	}
	if err := c.seg.onRoll(); err != nil {
		return fmt.Errorf("finish cleaned segment %d: %w", c.seg.base, err)
	}
	if err := c.seg.flush(); err != nil {
		return fmt.Errorf("finish cleaned segment %d: %w", c.seg.base, err)
	}
	c.done = true
	return nil
}

// Abort closes the cleaned segment and removes its files (with whatever
// suffix they have reached). Calling it after a successful ReplaceSegments
// does nothing.
func (c *CleanedSegment) Abort() error {
	if c.seg == nil {
		return nil
	}
	files := c.seg.files()
	err := c.seg.close()
	for _, f := range append(files, c.seg.path(TxnIndexSuffix)) {
		if rerr := c.l.fs.Remove(f); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	c.seg = nil
	return err
}

// renameSuffix renames every file of s from its current suffix to suffix.
func (s *Segment) renameSuffix(suffix string) error {
	old := s.opts.suffix
	if err := s.fs.Rename(s.path(LogSuffix), SegmentPath(s.dir, s.base, LogSuffix+suffix)); err != nil {
		return fmt.Errorf("rename segment %d from %q to %q: %w", s.base, old, suffix, err)
	}
	if err := s.offIdx.Rename(SegmentPath(s.dir, s.base, IndexSuffix+suffix)); err != nil {
		return err
	}
	if err := s.timIdx.Rename(SegmentPath(s.dir, s.base, TimeIndexSuffix+suffix)); err != nil {
		return err
	}
	if s.txnIdx != nil {
		if err := s.txnIdx.Rename(SegmentPath(s.dir, s.base, TxnIndexSuffix+suffix)); err != nil {
			return err
		}
	}
	s.opts.suffix = suffix
	return nil
}

// ReplaceSegments swaps the cleaned segment c in for the adjacent non-active
// segments old (as the cleaner saw them: a segment that has changed size or
// left the log since is ErrSegmentChanged, and nothing is replaced). This is
// Kafka's LocalLog.replaceSegments:
//
//  1. c is written out and fsynced (its files are still *.cleaned);
//  2. its files are renamed *.cleaned → *.swap and the directory fsynced:
//     from here on the replacement is committed, the loader completes it;
//  3. under the log's write lock the new segment takes the old ones' place
//     and their files are renamed to *.deleted, so a reader sees either
//     the old segments or the new one, never a mix;
//  4. the directory is fsynced, c's files are renamed *.swap → final names,
//     the directory is fsynced again, and the *.deleted files removed.
//
// A crash at any point leaves files the loader (removeTempFiles,
// completeSwaps) resolves to exactly the old or exactly the new segments.
// The loader finds the old segments a swap replaces by the range
// [swap base offset, offset after its last batch); when the cleaner dropped
// every record of the last old segment, an empty batch holding that
// segment's last offset is appended to c so the range still covers it.
// On error before step 2 the cleaned files are removed; after it the error
// is returned with the log switched in memory, and leftovers are completed by
// the next open.
func (l *Log) ReplaceSegments(c *CleanedSegment, old []CleanerSegment) (err error) {
	if c.seg == nil || c.done {
		return errors.New("replace segments: cleaned segment already used")
	}
	if len(old) == 0 || old[0].BaseOffset != c.seg.base {
		return fmt.Errorf("replace segments: cleaned segment %d must replace segments starting at its base offset", c.seg.base)
	}
	committed := false
	defer func() {
		if err != nil && !committed {
			err = errors.Join(err, c.Abort())
		}
	}()
	if err := l.checkReplaceable(old); err != nil {
		return err
	}
	last := old[len(old)-1]
	if len(old) > 1 && c.next <= last.BaseOffset {
		// Sentinel: keep the swap's offset range reaching the last old segment.
		off := max(last.NextOffset-1, last.BaseOffset)
		spec := record.NewBatchSpec(off, codec.None)
		spec.LastOffsetDelta = 0
		var enc record.Encoder
		b, err := enc.AppendBatch(nil, spec, nil)
		if err != nil {
			return err
		}
		if err := c.Append(b); err != nil {
			return err
		}
	}
	if limit := max(last.NextOffset, last.BaseOffset+1); c.next > limit {
		return fmt.Errorf("replace segments: cleaned segment ends at %d, past the replaced segments' end %d", c.next, limit)
	}
	// Step 1.
	if err := c.finish(); err != nil {
		return err
	}
	// As Kafka, the cleaned segment keeps the last replaced segment's
	// last-modified time: the age of records without timestamps, which
	// retention.ms and min.compaction.lag.ms go by.
	lastPath := SegmentPath(l.dir, last.BaseOffset, LogSuffix)
	l.mu.RLock()
	if s, ok := l.liveSegmentLocked(last.BaseOffset); ok {
		lastPath = s.LogPath()
	}
	l.mu.RUnlock()
	fi, err := l.fs.Stat(lastPath)
	if err != nil {
		return fmt.Errorf("replace segments: %w", err)
	}
	if err := l.fs.Chtimes(c.seg.LogPath(), fi.ModTime(), fi.ModTime()); err != nil {
		return fmt.Errorf("replace segments: %w", err)
	}
	// Step 2. Several new segments would go in descending base order; there is one.
	if err := c.seg.renameSuffix(SwapSuffix); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("replace segments: %w", err)
	}
	committed = true
	// Step 3.
	victims, err := l.switchSegments(c.seg, old)
	if victims == nil {
		if aerr := c.Abort(); aerr != nil {
			return errors.Join(err, aerr)
		}
		return errors.Join(err, l.fs.SyncDir(l.dir))
	}
	c.seg = nil
	if err != nil {
		// Some old files kept their names: leave the .swap files for the
		// loader, whose swap completion deletes them.
		return err
	}
	return l.finishSwap(victims)
}

// checkReplaceable verifies old still describes adjacent, unchanged,
// non-active segments of the log.
func (l *Log) checkReplaceable(old []CleanerSegment) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, err := l.oldSegmentsLocked(old)
	return err
}

func (l *Log) oldSegmentsLocked(old []CleanerSegment) (first int, err error) {
	if l.closed {
		return 0, fmt.Errorf("replace segments of %s: %w", l.dir, ErrSegmentChanged)
	}
	first = sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base >= old[0].BaseOffset })
	for k, o := range old {
		i := first + k
		if i >= len(l.segments)-1 || l.segments[i].base != o.BaseOffset || l.segments[i].size != o.Size {
			return 0, fmt.Errorf("replace segments of %s: segment %d: %w", l.dir, o.BaseOffset, ErrSegmentChanged)
		}
	}
	return first, nil
}

// switchSegments puts seg in place of old in memory and renames the old
// segments' files to .deleted, all under the write lock.
func (l *Log) switchSegments(seg *Segment, old []CleanerSegment) (victims []*Segment, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first, err := l.oldSegmentsLocked(old)
	if err != nil {
		// The old segments changed between the check and now (retention,
		// truncation, close): the live log keeps what it has, so take the
		// committed swap back off the disk.
		return nil, err
	}
	victims = append([]*Segment(nil), l.segments[first:first+len(old)]...)
	segs := make([]*Segment, 0, len(l.segments)-len(old)+1)
	segs = append(segs, l.segments[:first]...)
	segs = append(segs, seg)
	segs = append(segs, l.segments[first+len(old):]...)
	l.segments = segs
	var errs []error
	for _, v := range victims {
		files := v.files()
		errs = append(errs, v.close())
		for _, f := range files {
			if err := l.fs.Rename(f, f+DeletedSuffix); err != nil {
				errs = append(errs, fmt.Errorf("replace segments: %w", err))
			}
		}
	}
	return victims, errors.Join(errs...)
}

// finishSwap is step 4 of ReplaceSegments.
func (l *Log) finishSwap(victims []*Segment) error {
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("replace segments: %w", err)
	}
	l.mu.Lock()
	seg, ok := l.liveSegmentLocked(victims[0].base)
	var err error
	if ok && seg.opts.suffix == SwapSuffix {
		err = seg.renameSuffix("")
	}
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("replace segments: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("replace segments: %w", err)
	}
	var errs []error
	for _, v := range victims {
		for _, f := range v.files() {
			if err := l.fs.Remove(f + DeletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("replace segments: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// ReadCleanerCheckpoint reads the log dir's cleaner-offset-checkpoint: per
// compacted partition, the first offset not yet cleaned. A missing file reads
// as empty.
func (d *LogDir) ReadCleanerCheckpoint() (map[checkpoint.TopicPartition]int64, error) {
	m, err := checkpoint.ReadOffsets(d.fs, filepath.Join(d.dir, CleanerCheckpoint))
	if err != nil {
		return nil, fmt.Errorf("read cleaner checkpoint: %w", err)
	}
	return m, nil
}

// WriteCleanerCheckpoint replaces the cleaner-offset-checkpoint durably.
func (d *LogDir) WriteCleanerCheckpoint(m map[checkpoint.TopicPartition]int64) error {
	if err := checkpoint.WriteOffsets(d.fs, filepath.Join(d.dir, CleanerCheckpoint), m); err != nil {
		return fmt.Errorf("write cleaner checkpoint: %w", err)
	}
	return nil
}
