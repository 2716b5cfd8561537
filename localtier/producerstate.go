package localtier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// This file holds the log's producer state, as Kafka's ProducerStateManager
// keeps it: per producer id the epoch, the last sequence and offset written,
// and the open transaction if any. It is persisted in <offset>.snapshot files
// (docs/format/producer-snapshot.md) so a restart does not have to rescan
// the whole log to learn which transactions are still open.
//
// Lifecycle, as Kafka's UnifiedLog and LogLoader:
//   - a snapshot is taken at every roll, named by the new segment's base
//     offset (the state of every batch below it), and at clean close, named
//     by the log end offset; each is written tmp → fsync → rename → fsync
//     dir, so a crash leaves the old set of snapshots or the new one;
//   - on open, snapshots that are no segment's base offset are removed except
//     the newest one above every segment (the clean-close snapshot,
//     removeStraySnapshots), and so are snapshots past the log end (a
//     truncated tail) or below the log start offset; the newest remaining
//     snapshot (no later than the first segment recovery scanned) is loaded
//     (a corrupt one is removed with a warning and the next older one tried;
//     with none the state starts empty at the log start offset), then every
//     batch from the snapshot offset to the log end is replayed, restoring
//     the .txnindex entries a recovered segment lost;
//   - retention removes the snapshots below the new log start offset.
//
// So at most one snapshot per segment plus one above the active segment's
// base exist. Snapshots of segments the cleaner merged away stay until the
// next open removes them as strays; they still describe the state at their
// offset (cleaning never changes offsets or the outcome of a transaction).
//
// Deviations from Kafka: producer ids never expire
// (producer.id.expiration.ms and transactional.id expiration are not
// modelled, so the map grows with the number of producer ids the partition
// has seen), and a snapshot exactly at the log start offset is kept (Kafka
// drops it on load; it is the very state a restart needs when older
// segments were deleted).

// ProducerSnapshotVersion is the only .snapshot version Kafka writes.
const ProducerSnapshotVersion int16 = 1

const (
	snapshotHeaderSize = 10 // version i16, crc u32, entry count i32
	snapshotEntrySize  = 46
	snapshotCRCStart   = 6 // the CRC covers bytes [6, end)
	snapshotTmpSuffix  = SnapshotSuffix + ".tmp"
)

// ProducerEntry is one producer's state: one entry of a .snapshot file.
type ProducerEntry struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the sequence of the producer's last record (its last
	// data batch's base sequence + last offset delta, wrapping past
	// MaxInt32 as Kafka's sequences do); -1 when the producer has no data
	// batch since its epoch last changed.
	LastSequence int32
	// LastOffset is the offset of that record, -1 likewise.
	LastOffset int64
	// OffsetDelta is the last data batch's last offset delta.
	OffsetDelta int32
	// Timestamp is the max timestamp of the producer's last batch, or the
	// timestamp of its last transaction marker if that came later.
	Timestamp int64
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker, -1 if none.
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, -1 if none.
	CurrentTxnFirstOffset int64
}

// CorruptSnapshotError is Kafka's CorruptSnapshotException: a .snapshot file
// that cannot be trusted. The loader removes it and falls back to an older
// snapshot or a scan of the log.
type CorruptSnapshotError struct {
	Path   string // "" when decoding a buffer
	Reason string
}

func (e *CorruptSnapshotError) Error() string {
	if e.Path == "" {
		return "corrupt producer snapshot: " + e.Reason
	}
	return fmt.Sprintf("corrupt producer snapshot %s: %s", e.Path, e.Reason)
}

// Is makes errors.Is(err, kafkaerr.ErrCorrupt) true.
func (e *CorruptSnapshotError) Is(target error) bool { return target == kafkaerr.ErrCorrupt }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendProducerSnapshot appends the .snapshot encoding of entries, in the
// given order, to dst.
func AppendProducerSnapshot(dst []byte, entries []ProducerEntry) []byte {
	start := len(dst)
	dst = slices.Grow(dst, snapshotHeaderSize+snapshotEntrySize*len(entries))
	dst = binary.BigEndian.AppendUint16(dst, uint16(ProducerSnapshotVersion))
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, filled below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ProducerEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(dst[start+2:], crc32.Checksum(dst[start+snapshotCRCStart:], castagnoli))
	return dst
}

// DecodeProducerSnapshot decodes a whole .snapshot file. Anything but a
// version-1 snapshot of exactly entryCount entries with a matching CRC is a
// *CorruptSnapshotError. The entry count is checked against the data before
// anything is allocated.
func DecodeProducerSnapshot(data []byte) ([]ProducerEntry, error) {
	if len(data) < snapshotHeaderSize {
		return nil, &CorruptSnapshotError{Reason: fmt.Sprintf("%d bytes, shorter than the %d-byte header", len(data), snapshotHeaderSize)}
	}
	if v := int16(binary.BigEndian.Uint16(data)); v != ProducerSnapshotVersion {
		return nil, &CorruptSnapshotError{Reason: fmt.Sprintf("unknown snapshot version %d", v)}
	}
	count := int64(int32(binary.BigEndian.Uint32(data[6:])))
	if count < 0 {
		return nil, &CorruptSnapshotError{Reason: fmt.Sprintf("negative entry count %d", count)}
	}
	if want := snapshotHeaderSize + count*snapshotEntrySize; want != int64(len(data)) {
		return nil, &CorruptSnapshotError{Reason: fmt.Sprintf("%d entries need %d bytes, the snapshot has %d", count, want, len(data))}
	}
	stored, computed := binary.BigEndian.Uint32(data[2:]), crc32.Checksum(data[snapshotCRCStart:], castagnoli)
	if stored != computed {
		return nil, &CorruptSnapshotError{Reason: fmt.Sprintf("stored crc %#08x, computed %#08x", stored, computed)}
	}
	out := make([]ProducerEntry, count)
	p := data[snapshotHeaderSize:]
	for i := range out {
		out[i] = ProducerEntry{
			ProducerID:            int64(binary.BigEndian.Uint64(p)),
			ProducerEpoch:         int16(binary.BigEndian.Uint16(p[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(p[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(p[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(p[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(p[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(p[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(p[38:])),
		}
		p = p[snapshotEntrySize:]
	}
	return out, nil
}

// maxSnapshotBytes bounds the file ReadProducerSnapshot reads: 2^31 bytes is
// far above any real partition's producer count (46 bytes per producer).
const maxSnapshotBytes = math.MaxInt32

// ReadProducerSnapshot reads and decodes the .snapshot file at path.
func ReadProducerSnapshot(fsys vfs.FS, path string) ([]ProducerEntry, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read producer snapshot: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read producer snapshot %s: %w", path, err)
	}
	if fi.Size() > maxSnapshotBytes {
		return nil, &CorruptSnapshotError{Path: path, Reason: fmt.Sprintf("%d bytes, more than any snapshot holds", fi.Size())}
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && len(data) == 0) {
		if errors.Is(err, io.EOF) {
			return nil, &CorruptSnapshotError{Path: path, Reason: "file shrank while being read"}
		}
		return nil, fmt.Errorf("read producer snapshot %s: %w", path, err)
	}
	entries, err := DecodeProducerSnapshot(data)
	var ce *CorruptSnapshotError
	if errors.As(err, &ce) {
		ce.Path = path
	}
	return entries, err
}

// WriteProducerSnapshot writes entries to path atomically (tmp → fsync →
// rename → fsync dir).
func WriteProducerSnapshot(fsys vfs.FS, path string, entries []ProducerEntry) error {
	if err := vfs.WriteFileAtomic(fsys, path, AppendProducerSnapshot(nil, entries)); err != nil {
		return fmt.Errorf("write producer snapshot: %w", err)
	}
	return nil
}

// SnapshotPath is dir/<20-digit offset>.snapshot.
func SnapshotPath(dir string, offset int64) string { return SegmentPath(dir, offset, SnapshotSuffix) }

// nextSequence is Kafka's DefaultRecordBatch.incrementSequence: sequences
// wrap from MaxInt32 to 0.
func nextSequence(seq, increment int32) int32 {
	if int64(seq)+int64(increment) > math.MaxInt32 {
		return increment - (math.MaxInt32 - seq) - 1
	}
	return seq + increment
}

// lastSequence of a v2 batch, -1 when it has no sequence.
func lastSequence(b record.Batch) int32 {
	base := b.BaseSequence()
	if base == record.NoSequence {
		return record.NoSequence
	}
	return nextSequence(base, b.LastOffsetDelta())
}

// Producers returns the producer state, ordered by producer id.
func (l *Log) Producers() []ProducerEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producerEntriesLocked()
}

func (l *Log) producerEntriesLocked() []ProducerEntry {
	out := make([]ProducerEntry, 0, len(l.producers))
	for _, e := range l.producers {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// trackTxn updates the producer state for batch b, as Kafka's
// ProducerAppendInfo does for a replica or on reload (no validation): a
// transactional data batch opens its producer's transaction if none is
// open; a commit or abort marker closes it, and an abort adds an entry to
// seg's .txnindex (seg nil: only rebuild the state, the index already has
// it; restore: seg is a recovered segment whose .txnindex may have lost its
// last entries, and only those are added).
func (l *Log) trackTxn(b record.Batch, seg *Segment, restore bool) error {
	pid := b.ProducerID()
	if pid < 0 {
		return nil
	}
	e := l.producers[pid]
	if e == nil {
		e = &ProducerEntry{ProducerID: pid, ProducerEpoch: record.NoProducerEpoch, LastSequence: record.NoSequence,
			LastOffset: -1, Timestamp: record.NoTimestamp, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}
		l.producers[pid] = e
	}
	if !b.IsControl() {
		e.ProducerEpoch = b.ProducerEpoch()
		e.LastSequence, e.LastOffset, e.OffsetDelta = lastSequence(b), b.LastOffset(), b.LastOffsetDelta()
		e.Timestamp = b.MaxTimestamp()
		if b.IsTransactional() && e.CurrentTxnFirstOffset < 0 {
			e.CurrentTxnFirstOffset = b.BaseOffset()
			l.ongoingTxns[pid] = b.BaseOffset()
		}
		return nil
	}
	recs, err := l.dec.Records(b)
	if err != nil {
		return fmt.Errorf("transaction marker at offset %d: %w", b.BaseOffset(), err)
	}
	if len(recs) == 0 {
		// The cleaner emptied it: the whole transaction is gone from the log.
		return nil
	}
	_, typ, err := record.ParseControlKey(recs[0].Key)
	if err != nil || (typ != record.ControlAbort && typ != record.ControlCommit) {
		return nil // not an end-transaction marker
	}
	coordinatorEpoch := e.CoordinatorEpoch
	if _, ce, err := record.ParseEndTxnValue(recs[0].Value); err == nil {
		coordinatorEpoch = ce
	}
	first := e.CurrentTxnFirstOffset
	if e.ProducerEpoch != b.ProducerEpoch() {
		// Kafka's maybeUpdateProducerEpoch: a new epoch forgets the batches.
		e.ProducerEpoch, e.LastSequence, e.LastOffset, e.OffsetDelta = b.ProducerEpoch(), record.NoSequence, -1, 0
	}
	e.CurrentTxnFirstOffset, e.CoordinatorEpoch, e.Timestamp = -1, coordinatorEpoch, recs[0].Timestamp
	delete(l.ongoingTxns, pid)
	if first < 0 || seg == nil || typ != record.ControlAbort {
		return nil
	}
	lso := b.LastOffset() + 1
	for _, f := range l.ongoingTxns {
		lso = min(lso, f)
	}
	a := index.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: b.LastOffset(), LastStableOffset: lso}
	if restore {
		return seg.restoreAbortedTxn(a)
	}
	return seg.appendAbortedTxn(a)
}

// takeSnapshotLocked writes the producer state to <end>.snapshot, end being
// the log end offset or the base offset of the segment a roll is about to
// create, unless the newest snapshot is already at or past end (Kafka's
// takeSnapshot).
func (l *Log) takeSnapshotLocked(end int64) error {
	if end <= l.lastSnapOffset {
		return nil
	}
	if err := WriteProducerSnapshot(l.fs, SnapshotPath(l.dir, end), l.producerEntriesLocked()); err != nil {
		return err
	}
	if i, found := slices.BinarySearch(l.snapshots, end); !found {
		l.snapshots = slices.Insert(l.snapshots, i, end)
	}
	l.lastSnapOffset = end
	return nil
}

// removeSnapshotsBelowLocked removes the snapshots below offset (the new log
// start offset after retention).
func (l *Log) removeSnapshotsBelowLocked(offset int64) error {
	n := 0
	for n < len(l.snapshots) && l.snapshots[n] < offset {
		if err := l.fs.Remove(SnapshotPath(l.dir, l.snapshots[n])); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.snapshots = l.snapshots[n:]
			return fmt.Errorf("remove producer snapshot: %w", err)
		}
		n++
	}
	l.snapshots = l.snapshots[n:]
	return nil
}

// loadProducerState rebuilds the producer state on open from the newest
// usable snapshot and the batches after it (Kafka's removeStraySnapshots,
// truncateAndReload and rebuildProducerState). The segments are recovered
// and the log start and end offsets final when it runs.
//
// recovered holds the base offsets of the segments recovery scanned: their
// .txnindex entries were written with no fsync ordering against the log, so
// like Kafka's LogSegment.recover (which rebuilds the index from the abort
// markers it replays) the replay starts at a snapshot no later than the first
// of them and adds the entries their .txnindex lost.
func (l *Log) loadProducerState(recovered map[int64]bool) error {
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	bases := make(map[int64]bool, len(l.segments))
	for _, s := range l.segments {
		bases[s.base] = true
	}
	maxBase, end := l.active().base, l.logEndLocked()
	var snaps, stray []int64
	removed := false
	remove := func(name string) error {
		if err := l.fs.Remove(l.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		removed = true
		return nil
	}
	for _, e := range entries {
		off, suf, ok := ParseSegmentName(e.Name())
		switch {
		case !ok || e.IsDir():
		case suf == snapshotTmpSuffix:
			// An interrupted snapshot write: the rename never happened.
			if err := remove(e.Name()); err != nil {
				return err
			}
		case suf == SnapshotSuffix:
			snaps = append(snaps, off)
			if !bases[off] {
				stray = append(stray, off)
			}
		}
	}
	slices.Sort(snaps)
	slices.Sort(stray)
	// Keep the newest stray only when it lies above every segment (the
	// clean-close snapshot); drop what lies past the log end (a truncated
	// tail) or below the log start.
	keep := snaps[:0]
	for _, off := range snaps {
		isStray := !bases[off] && !(off == stray[len(stray)-1] && off > maxBase)
		if isStray || off > end || off < l.logStart {
			if err := remove(FilenamePrefix(off) + SnapshotSuffix); err != nil {
				return err
			}
			continue
		}
		keep = append(keep, off)
	}
	snaps = keep
	limit := end
	for _, s := range l.segments {
		if recovered[s.base] && s.size > 0 {
			limit = s.base
			break
		}
	}
	usable := snaps
	for len(usable) > 0 && usable[len(usable)-1] > limit {
		usable = usable[:len(usable)-1]
	}
	from := l.logStart
	for len(usable) > 0 {
		off := usable[len(usable)-1]
		path := SnapshotPath(l.dir, off)
		loaded, err := ReadProducerSnapshot(l.fs, path)
		var ce *CorruptSnapshotError
		if errors.As(err, &ce) {
			l.logger.Warn("removing corrupt producer snapshot", "path", path, "err", err)
			if err := remove(FilenamePrefix(off) + SnapshotSuffix); err != nil {
				return err
			}
			usable = usable[:len(usable)-1]
			snaps = slices.DeleteFunc(snaps, func(o int64) bool { return o == off })
			continue
		}
		if err != nil {
			return err
		}
		for i := range loaded {
			e := loaded[i]
			l.producers[e.ProducerID] = &e
			if e.CurrentTxnFirstOffset >= 0 {
				l.ongoingTxns[e.ProducerID] = e.CurrentTxnFirstOffset
			}
		}
		from = max(from, off)
		break
	}
	if removed {
		// Removals must be durable: a snapshot past a truncated log end that
		// came back after a crash could be taken for state of newer data.
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	l.snapshots = snaps
	l.lastSnapOffset = from
	if len(snaps) > 0 {
		l.lastSnapOffset = max(from, snaps[len(snaps)-1])
	}
	for _, s := range l.segments {
		if s.nextOffset <= from || s.size == 0 {
			continue
		}
		var pos int64
		if from > s.base {
			pos = int64(s.offIdx.Lookup(from).Position)
		}
		_, _, err := scanBatches(s.log, s.LogPath(), pos, s.size, false, func(_ int64, b record.Batch) error {
			if b.LastOffset() < from {
				return nil
			}
			if recovered[s.base] {
				return l.trackTxn(b, s, true)
			}
			return l.trackTxn(b, nil, false)
		})
		if err != nil {
			return fmt.Errorf("rebuild producer state: %w", err)
		}
	}
	return nil
}
