package localtier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

// The broker view reads a live Kafka broker's log dir (one entry of its
// log.dirs) for the sidecar. It never writes, creates, renames, locks or
// deletes anything there: every file is opened with FS.Open, and nothing is
// cached that the broker could invalidate without the view noticing. The
// broker keeps working underneath it — appending to the active segment,
// rolling, deleting (renaming to .deleted), cleaning (.cleaned/.swap) — so
// every call re-lists, sizes are taken once per file and never read past, a
// partial batch at the end of the active segment is the broker mid-write, and
// a segment that vanishes yields ErrSegmentGone so the caller re-lists.

var (
	// ErrSegmentGone reports a segment the broker deleted, replaced or
	// truncated while the view was reading it (or between a listing and the
	// read). Re-list and try again.
	ErrSegmentGone = errors.New("segment is gone: the broker deleted or replaced it")
	// ErrActiveSegment reports an attempt to open the active segment for
	// upload: only rolled segments are immutable.
	ErrActiveSegment = errors.New("segment is the partition's active segment")
)

// metaProperties is the file a Kafka broker writes in every log dir.
const metaProperties = "meta.properties"

// maxBrokerIndexBytes bounds how much of one index file OpenSegment reads
// into memory. Kafka's default segment.index.bytes is 10 MiB, and a rolled
// segment's indexes are trimmed to their entries.
const maxBrokerIndexBytes = 64 << 20

// segmentReadChunk is about how many bytes a BrokerSegmentReader verifies
// and buffers at a time.
const segmentReadChunk = 4 << 20

// BrokerView is a read-only view of a Kafka broker's log dir. It is safe for
// concurrent use.
type BrokerView struct {
	fs  vfs.FS
	dir string

	mu sync.Mutex
	// tails caches the scanned end of rolled segments by log path; an entry
	// is used only while the file's size and modification time are unchanged
	// and dropped when its segment leaves the listing.
	tails map[string]map[int64]tailInfo
}

type tailInfo struct {
	size         int64
	modTime      time.Time
	nextOffset   int64
	maxTimestamp int64
}

// BrokerPartition is one live partition directory of the log dir.
type BrokerPartition struct {
	Topic     string
	Partition int32
	Dir       string
}

// BrokerSegment describes one segment of a broker's partition as listed.
type BrokerSegment struct {
	BaseOffset int64
	// NextOffset is the offset after the segment's last whole batch, found by
	// scanning from the last offset index entry to the end of the file (the
	// base offset when the segment holds no batch).
	NextOffset int64
	// Size is the log file's size when listed; for the active segment it may
	// include a partial batch the broker is still writing.
	Size    int64
	LogPath string
	// Has*Index report which index files exist beside the log.
	HasIndex, HasTimeIndex, HasTxnIndex bool
	// Active is set on the last segment: the one the broker appends to.
	Active bool
	// MaxTimestamp is the largest batch max timestamp, -1 if none.
	MaxTimestamp int64
	// AfterGap is set when offsets between the segment listed before
	// this one and this one may still be held: a segment there was gone
	// by the time it was described, or a log file there is being swapped
	// in or deleted (.cleaned, .swap, .deleted: the broker's cleaner or
	// retention at work). The previous segment then does not answer for
	// every offset up to this one's base.
	AfterGap bool
}

// OpenBrokerView checks that dir looks like a Kafka log dir — it holds
// meta.properties, a checkpoint file or a partition directory — and returns
// a view of it. It reads only.
func OpenBrokerView(fsys vfs.FS, dir string) (*BrokerView, error) {
	fi, err := fsys.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open kafka log dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open kafka log dir: %s is not a directory", dir)
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open kafka log dir: %w", err)
	}
	for _, e := range entries {
		switch name := e.Name(); name {
		case metaProperties, checkpoint.ReplicationOffsetFile, checkpoint.RecoveryPointOffsetFile,
			checkpoint.LogStartOffsetFile, checkpoint.CleanerOffsetFile:
			if !e.IsDir() {
				return &BrokerView{fs: fsys, dir: dir, tails: map[string]map[int64]tailInfo{}}, nil
			}
		default:
			if _, err := topicconfig.ParseDir(name); err == nil && e.IsDir() {
				return &BrokerView{fs: fsys, dir: dir, tails: map[string]map[int64]tailInfo{}}, nil
			}
		}
	}
	return nil, fmt.Errorf("open kafka log dir: %s does not look like a Kafka log dir: it has no %s, no checkpoint files and no topic-partition directories", dir, metaProperties)
}

// Dir is the log dir's path.
func (v *BrokerView) Dir() string { return v.dir }

// Partitions lists the live partition directories, sorted by topic and
// partition. It re-reads the directory on every call and skips -delete,
// -future and -stray directories and anything that is not a partition.
func (v *BrokerView) Partitions() ([]BrokerPartition, error) {
	entries, err := v.fs.ReadDir(v.dir)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", v.dir, err)
	}
	var out []BrokerPartition
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		info, err := topicconfig.ParseDir(e.Name())
		if err != nil || info.Kind != topicconfig.DirLog {
			continue
		}
		out = append(out, BrokerPartition{Topic: info.Topic, Partition: info.Partition, Dir: filepath.Join(v.dir, e.Name())})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	v.pruneDirs(out)
	return out, nil
}

// pruneDirs forgets the cached segments of partition directories that are
// no longer live (deleted, moved away): with topics created and deleted
// all the time the cache would grow for ever.
func (v *BrokerView) pruneDirs(live []BrokerPartition) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.tails) == 0 {
		return
	}
	dirs := make(map[string]bool, len(live))
	for _, p := range live {
		dirs[p.Dir] = true
	}
	for dir := range v.tails {
		if !dirs[dir] {
			delete(v.tails, dir)
		}
	}
}

// HighWatermarks reads the broker's replication-offset-checkpoint: each
// partition's high watermark as of the broker's last checkpoint (it lags the
// live value by up to replica.high.watermark.checkpoint.interval.ms). A
// missing file reads as an empty map.
func (v *BrokerView) HighWatermarks() (map[checkpoint.TopicPartition]int64, error) {
	return checkpoint.ReadOffsets(v.fs, filepath.Join(v.dir, checkpoint.ReplicationOffsetFile))
}

// LogStartOffsets reads the broker's log-start-offset-checkpoint. A missing
// file reads as an empty map.
func (v *BrokerView) LogStartOffsets() (map[checkpoint.TopicPartition]int64, error) {
	return checkpoint.ReadOffsets(v.fs, filepath.Join(v.dir, checkpoint.LogStartOffsetFile))
}

// LeaderEpochs reads a partition's leader-epoch-checkpoint (no entries if the
// file is missing).
func (v *BrokerView) LeaderEpochs(topic string, partition int32) ([]checkpoint.EpochEntry, error) {
	dir, err := v.partitionDir(topic, partition)
	if err != nil {
		return nil, err
	}
	return checkpoint.ReadLeaderEpochs(v.fs, filepath.Join(dir, checkpoint.LeaderEpochFile))
}

// partitionDir returns the live directory of a partition, or an
// *UnknownTopicOrPartitionError.
func (v *BrokerView) partitionDir(topic string, partition int32) (string, error) {
	if topicconfig.ValidateTopicName(topic) != nil || partition < 0 {
		return "", &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	dir := filepath.Join(v.dir, topicconfig.DirName(topic, partition))
	fi, err := v.fs.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return "", &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	if err != nil {
		return "", fmt.Errorf("stat partition %s: %w", dir, err)
	}
	return dir, nil
}

// segmentFiles is one listing of a partition directory: the base offsets of
// its .log files, sorted, and which index files exist.
type segmentFiles struct {
	dir   string
	bases []int64
	has   map[int64]uint8 // bit per index suffix
	// moving are the bases of .log files being swapped in or deleted
	// (.log.cleaned, .log.swap, .log.deleted).
	moving []int64
}

const (
	hasIndex = 1 << iota
	hasTimeIndex
	hasTxnIndex
)

// list reads a partition directory once. Only exact .log/.index/.timeindex/
// .txnindex names count: .deleted, .cleaned, .swap and .tmp files do not.
func (v *BrokerView) list(topic string, partition int32) (segmentFiles, error) {
	dir, err := v.partitionDir(topic, partition)
	if err != nil {
		return segmentFiles{}, err
	}
	entries, err := v.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return segmentFiles{}, &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	if err != nil {
		return segmentFiles{}, fmt.Errorf("list segments of %s: %w", dir, err)
	}
	sf := segmentFiles{dir: dir, has: map[int64]uint8{}}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		base, suf, ok := ParseSegmentName(e.Name())
		if !ok {
			continue
		}
		switch suf {
		case LogSuffix:
			sf.bases = append(sf.bases, base)
		case IndexSuffix:
			sf.has[base] |= hasIndex
		case TimeIndexSuffix:
			sf.has[base] |= hasTimeIndex
		case TxnIndexSuffix:
			sf.has[base] |= hasTxnIndex
		case LogSuffix + CleanedSuffix, LogSuffix + SwapSuffix, LogSuffix + DeletedSuffix:
			sf.moving = append(sf.moving, base)
		}
	}
	sort.Slice(sf.bases, func(i, j int) bool { return sf.bases[i] < sf.bases[j] })
	return sf, nil
}

// Segments lists a partition's segments, oldest first; the last is active.
// A segment the broker deletes while it is being listed is left out.
func (v *BrokerView) Segments(topic string, partition int32) ([]BrokerSegment, error) {
	sf, err := v.list(topic, partition)
	if err != nil {
		return nil, err
	}
	out := make([]BrokerSegment, 0, len(sf.bases))
	gone := false // a segment since the last one in out was gone
	for i, base := range sf.bases {
		active := i == len(sf.bases)-1
		seg, err := v.describe(sf, base, active)
		if errors.Is(err, ErrSegmentGone) {
			gone = true
			continue
		}
		if err != nil {
			return nil, err
		}
		prev := int64(-1)
		if len(out) > 0 {
			prev = out[len(out)-1].BaseOffset
		}
		seg.AfterGap = gone || slices.ContainsFunc(sf.moving, func(m int64) bool { return m >= prev && m < base })
		gone = false
		out = append(out, seg)
	}
	if len(out) > 0 {
		// The listing is a moment: whatever is last now is active.
		out[len(out)-1].Active = true
	}
	v.pruneTails(sf)
	return out, nil
}

// RolledSegmentsBelow returns the segments that are not active and whose
// NextOffset <= hw: every record in them is committed, and the broker will
// not change them again (short of deleting or cleaning them). These are what
// a sidecar may upload.
func (v *BrokerView) RolledSegmentsBelow(topic string, partition int32, hw int64) ([]BrokerSegment, error) {
	segs, err := v.Segments(topic, partition)
	if err != nil {
		return nil, err
	}
	var out []BrokerSegment
	for _, s := range segs {
		if !s.Active && s.NextOffset <= hw {
			out = append(out, s)
		}
	}
	return out, nil
}

// describe stats one segment and finds its end by scanning its tail.
func (v *BrokerView) describe(sf segmentFiles, base int64, active bool) (BrokerSegment, error) {
	path := SegmentPath(sf.dir, base, LogSuffix)
	has := sf.has[base]
	seg := BrokerSegment{BaseOffset: base, NextOffset: base, LogPath: path, Active: active,
		HasIndex: has&hasIndex != 0, HasTimeIndex: has&hasTimeIndex != 0, HasTxnIndex: has&hasTxnIndex != 0,
		MaxTimestamp: record.NoTimestamp}
	f, err := v.openLog(path)
	if err != nil {
		return seg, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return seg, fmt.Errorf("stat %s: %w", path, err)
	}
	seg.Size = fi.Size()
	if !active {
		if t, ok := v.cachedTail(sf.dir, base, fi); ok {
			seg.NextOffset, seg.MaxTimestamp = t.nextOffset, t.maxTimestamp
			return seg, nil
		}
	}
	start := int64(0)
	if seg.HasIndex && seg.HasTimeIndex {
		e, err := v.lookupOffsetIndex(sf.dir, base, 1<<63-1, seg.Size)
		if err != nil {
			return seg, err
		}
		if e.Position > 0 {
			ts, err := v.lastTimestamp(sf.dir, base)
			if err != nil {
				return seg, err
			}
			start, seg.MaxTimestamp = int64(e.Position), ts
		}
	}
	next, maxTS, found, err := scanTail(f, path, start, seg.Size, active)
	if err == nil && start > 0 && !found {
		// The index points at no whole batch (the broker truncated the
		// log, or the index is stale): scan everything.
		seg.MaxTimestamp = record.NoTimestamp
		next, maxTS, found, err = scanTail(f, path, 0, seg.Size, active)
	}
	if err != nil {
		return seg, fmt.Errorf("scan segment %d of %s: %w", base, sf.dir, err)
	}
	if found {
		seg.NextOffset = next
	}
	seg.MaxTimestamp = max(seg.MaxTimestamp, maxTS)
	if !active {
		v.storeTail(sf.dir, base, fi, seg)
	}
	return seg, nil
}

// scanTail returns the next offset after the last whole batch between start
// and end and the largest batch timestamp there. A partial batch at the end
// is the broker mid-write when active, corruption otherwise.
func scanTail(f vfs.File, path string, start, end int64, active bool) (next, maxTS int64, found bool, err error) {
	maxTS = record.NoTimestamp
	pos, torn, err := scanBatches(f, path, start, end, false, func(_ int64, b record.Batch) error {
		next, found = b.NextOffset(), true
		maxTS = max(maxTS, b.MaxTimestamp())
		return nil
	})
	if err != nil && !(active && preallocatedTail(f, err)) {
		return 0, 0, false, err
	}
	if torn && !active {
		return 0, 0, false, tornRolled(path, pos)
	}
	return next, maxTS, found, nil
}

// preallocatedTail reports whether err, from scanning an active segment,
// stopped at a batch header of zeros: a broker with preallocate on (Kafka's
// log.preallocate) creates the active segment's .log at its full size and
// trims it only on roll, so its data ends where zeros begin. A rolled
// segment's zeros are corruption still.
func preallocatedTail(f vfs.File, err error) bool {
	var ce *record.CorruptError
	if !errors.As(err, &ce) {
		return false
	}
	var hdr [record.LogOverhead]byte
	if _, rerr := f.ReadAt(hdr[:], ce.Pos); rerr != nil {
		return false
	}
	return hdr == [record.LogOverhead]byte{}
}

func tornRolled(path string, pos int64) error {
	return &record.CorruptError{File: path, Pos: pos, Offset: -1, Reason: "partial batch at the end of a rolled segment"}
}

func (v *BrokerView) cachedTail(dir string, base int64, fi os.FileInfo) (tailInfo, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.tails[dir][base]
	if !ok || t.size != fi.Size() || !t.modTime.Equal(fi.ModTime()) {
		return tailInfo{}, false
	}
	return t, true
}

func (v *BrokerView) storeTail(dir string, base int64, fi os.FileInfo, seg BrokerSegment) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := v.tails[dir]
	if m == nil {
		m = map[int64]tailInfo{}
		v.tails[dir] = m
	}
	m[base] = tailInfo{size: fi.Size(), modTime: fi.ModTime(), nextOffset: seg.NextOffset, maxTimestamp: seg.MaxTimestamp}
}

// pruneTails forgets cached segments that are no longer listed.
func (v *BrokerView) pruneTails(sf segmentFiles) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := v.tails[sf.dir]
	if len(m) == 0 {
		return
	}
	live := make(map[int64]bool, len(sf.bases))
	for _, b := range sf.bases {
		live[b] = true
	}
	for b := range m {
		if !live[b] {
			delete(m, b)
		}
	}
}

// openLog opens a segment's log file read-only; a missing file is
// ErrSegmentGone.
func (v *BrokerView) openLog(path string) (vfs.File, error) {
	f, err := v.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", path, ErrSegmentGone)
	}
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	return f, nil
}

// probeIndex binary-searches the fixed-size entries of an index file for the
// last entry that is not all zeros and for which keep holds, reading O(log n)
// entries rather than the whole file. Kafka writes entries in order into a
// file preallocated with zeros (segment.index.bytes) while the segment is
// active, so the non-zero entries are a prefix; keep must hold on a prefix of
// them. It returns nil when no entry qualifies or the file is missing.
func (v *BrokerView) probeIndex(path string, entrySize int, keep func(e []byte) bool) ([]byte, error) {
	f, err := v.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat index %s: %w", path, err)
	}
	n := int(fi.Size() / int64(entrySize))
	buf := make([]byte, entrySize)
	var readErr error
	read := func(i int) []byte {
		if _, err := f.ReadAt(buf, int64(i)*int64(entrySize)); err != nil {
			// The broker shrank the file underneath us (it trims the
			// index when the segment rolls): treat it as absent.
			if readErr == nil && !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("read index %s: %w", path, err)
			}
			return nil
		}
		return buf
	}
	// First entry that is zero, unreadable, or fails keep.
	i := sort.Search(n, func(i int) bool {
		e := read(i)
		return e == nil || isZero(e) || !keep(e)
	})
	if readErr != nil {
		return nil, readErr
	}
	if i == 0 {
		return nil, nil
	}
	e := read(i - 1)
	if readErr != nil || e == nil {
		return nil, readErr
	}
	return append([]byte(nil), e...), nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// lookupOffsetIndex returns the segment's offset index entry with the
// largest offset <= target whose position is within logSize, or {base, 0}.
func (v *BrokerView) lookupOffsetIndex(dir string, base, target, logSize int64) (index.Entry, error) {
	e, err := v.probeIndex(SegmentPath(dir, base, IndexSuffix), index.OffsetEntrySize, func(e []byte) bool {
		rel := int32(binary.BigEndian.Uint32(e))
		pos := int32(binary.BigEndian.Uint32(e[4:]))
		return rel >= 0 && base+int64(rel) <= target && pos >= 0 && int64(pos) <= logSize
	})
	if err != nil || e == nil {
		return index.Entry{Offset: base}, err
	}
	return index.Entry{Offset: base + int64(int32(binary.BigEndian.Uint32(e))), Position: int32(binary.BigEndian.Uint32(e[4:]))}, nil
}

// lastTimestamp is the timestamp of the segment's last time index entry, -1
// if none.
func (v *BrokerView) lastTimestamp(dir string, base int64) (int64, error) {
	e, err := v.probeIndex(SegmentPath(dir, base, TimeIndexSuffix), index.TimeEntrySize, func([]byte) bool { return true })
	if err != nil || e == nil {
		return record.NoTimestamp, err
	}
	return int64(binary.BigEndian.Uint64(e)), nil
}

// Read returns whole batches of a partition starting with the one holding
// offset: at least one batch, then more while they fit in maxBytes, all from
// one segment, and only batches that end below hw (every offset returned is
// < hw). hw is the high watermark the caller trusts — from HighWatermarks, or
// from the broker. A partial batch at the end of the active segment (the
// broker mid-write) ends the read quietly. LogStartOffset in the result is the
// first segment's base offset and LogEndOffset is hw. An offset below the
// first segment or above hw is an *OffsetOutOfRangeError; reading at hw
// returns no data.
func (v *BrokerView) Read(topic string, partition int32, offset int64, maxBytes int, hw int64) (ReadResult, error) {
	for attempt := 0; ; attempt++ {
		res, err := v.read(topic, partition, offset, maxBytes, hw)
		// Retention deleted the segment between listing and reading:
		// list again once; the offset may now be out of range.
		if errors.Is(err, ErrSegmentGone) && attempt == 0 {
			continue
		}
		return res, err
	}
}

func (v *BrokerView) read(topic string, partition int32, offset int64, maxBytes int, hw int64) (ReadResult, error) {
	sf, err := v.list(topic, partition)
	if err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{LogEndOffset: hw}
	if len(sf.bases) == 0 {
		return res, &OffsetOutOfRangeError{Dir: sf.dir, Offset: offset, LogStartOffset: hw, LogEndOffset: hw}
	}
	res.LogStartOffset = sf.bases[0]
	if offset < res.LogStartOffset || offset > hw {
		return res, &OffsetOutOfRangeError{Dir: sf.dir, Offset: offset, LogStartOffset: res.LogStartOffset, LogEndOffset: hw}
	}
	if offset == hw {
		return res, nil
	}
	i := sort.Search(len(sf.bases), func(i int) bool { return sf.bases[i] > offset }) - 1
	for ; i < len(sf.bases); i++ {
		data, done, err := v.readSegment(sf, sf.bases[i], i == len(sf.bases)-1, offset, maxBytes, hw)
		if err != nil || len(data) > 0 || done {
			res.Data = data
			return res, err
		}
	}
	return res, nil
}

// readSegment collects whole batches of one segment for Read. done is set
// when a batch at or past hw was reached.
func (v *BrokerView) readSegment(sf segmentFiles, base int64, active bool, offset int64, maxBytes int, hw int64) (data []byte, done bool, err error) {
	path := SegmentPath(sf.dir, base, LogSuffix)
	f, err := v.openLog(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat %s: %w", path, err)
	}
	size := fi.Size()
	start := int64(0)
	if sf.has[base]&hasIndex != 0 {
		e, err := v.lookupOffsetIndex(sf.dir, base, offset, size)
		if err != nil {
			return nil, false, err
		}
		start = int64(e.Position)
	}
	pos, torn, err := scanBatches(f, path, start, size, false, func(_ int64, b record.Batch) error {
		if b.LastOffset() < offset {
			return nil
		}
		if b.NextOffset() > hw {
			done = true
			return errStopScan
		}
		if len(data) > 0 && len(data)+b.Size() > maxBytes {
			done = true
			return errStopScan
		}
		data = append(data, b...)
		return nil
	})
	if err != nil && !(active && preallocatedTail(f, err)) {
		return nil, false, fmt.Errorf("read segment %d of %s: %w", base, sf.dir, err)
	}
	if torn && !active && !done {
		return nil, false, tornRolled(path, pos)
	}
	return data, done, nil
}
