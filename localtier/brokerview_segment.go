package localtier

// Streaming one rolled segment of a broker's log dir for upload: CRC-checked
// batches, the index files, and detection of a segment that changed under us.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// SegmentStats summarises the batches a BrokerSegmentReader delivered.
type SegmentStats struct {
	Batches      int
	FirstOffset  int64 // base offset of the first batch, -1 if none
	NextOffset   int64 // offset after the last batch (the base offset if none)
	MaxTimestamp int64 // -1 if none
}

// BrokerSegmentReader streams one rolled segment's log for upload, verifying
// every batch's CRC as it goes, with the segment's index files read when it
// was opened. It holds the files open, so the bytes are those of the segment
// as opened even if the broker renames it meanwhile; but a segment deleted,
// replaced or truncated before the read finishes fails the read with
// ErrSegmentGone rather than reach io.EOF. Memory stays bounded (a few MiB)
// whatever the segment size. Not safe for concurrent use.
type BrokerSegmentReader struct {
	fs   vfs.FS
	seg  BrokerSegment
	f    vfs.File
	fi   os.FileInfo // of the log as opened
	size int64

	pos   int64 // next file position to scan
	buf   []byte
	off   int
	err   error // sticky; io.EOF at a verified end
	stats SegmentStats

	offIdx, timeIdx, txnIdx []byte
}

// OpenSegment opens the rolled segment with the given base offset for
// upload. A segment that is no longer listed (or disappears while opening)
// is ErrSegmentGone; the active segment is ErrActiveSegment.
func (v *BrokerView) OpenSegment(topic string, partition int32, base int64) (*BrokerSegmentReader, error) {
	sf, err := v.list(topic, partition)
	if err != nil {
		return nil, err
	}
	i := sort.Search(len(sf.bases), func(i int) bool { return sf.bases[i] >= base })
	path := SegmentPath(sf.dir, base, LogSuffix)
	if i == len(sf.bases) || sf.bases[i] != base {
		return nil, fmt.Errorf("open %s: %w", path, ErrSegmentGone)
	}
	if i == len(sf.bases)-1 {
		return nil, fmt.Errorf("open %s: %w", path, ErrActiveSegment)
	}
	f, err := v.openLog(path)
	if err != nil {
		return nil, err
	}
	r := &BrokerSegmentReader{fs: v.fs, f: f,
		stats: SegmentStats{FirstOffset: -1, NextOffset: base, MaxTimestamp: record.NoTimestamp}}
	if r.fi, err = f.Stat(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	r.size = r.fi.Size()
	has := sf.has[base]
	r.seg = BrokerSegment{BaseOffset: base, NextOffset: sf.bases[i+1], Size: r.size, LogPath: path,
		HasIndex: has&hasIndex != 0, HasTimeIndex: has&hasTimeIndex != 0, HasTxnIndex: has&hasTxnIndex != 0,
		MaxTimestamp: record.NoTimestamp}
	for _, x := range []struct {
		suffix    string
		entrySize int
		dst       *[]byte
	}{{IndexSuffix, index.OffsetEntrySize, &r.offIdx}, {TimeIndexSuffix, index.TimeEntrySize, &r.timeIdx}, {TxnIndexSuffix, index.TxnEntrySize, &r.txnIdx}} {
		if *x.dst, err = v.readIndexFile(SegmentPath(sf.dir, base, x.suffix), x.entrySize); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return r, nil
}

// readIndexFile reads an index file whole, without its all-zero tail of
// preallocated entries; nil if it does not exist.
func (v *BrokerView) readIndexFile(path string, entrySize int) ([]byte, error) {
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
	if fi.Size() > maxBrokerIndexBytes {
		return nil, &index.CorruptIndexError{File: path, Reason: fmt.Sprintf("file is %d bytes, more than the %d bytes an index may have here", fi.Size(), maxBrokerIndexBytes)}
	}
	data := make([]byte, fi.Size())
	n, err := f.ReadAt(data, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read index %s: %w", path, err)
	}
	data = data[:n-n%entrySize]
	for len(data) >= entrySize && isZero(data[len(data)-entrySize:]) {
		data = data[:len(data)-entrySize]
	}
	return data, nil
}

// Segment describes the segment as opened. NextOffset is the next
// segment's base offset (an upper bound); Stats has the exact value after
// the read.
func (r *BrokerSegmentReader) Segment() BrokerSegment { return r.seg }

// Size is the number of log bytes Read delivers.
func (r *BrokerSegmentReader) Size() int64 { return r.size }

// Stats summarises the batches read so far; complete once Read returned
// io.EOF.
func (r *BrokerSegmentReader) Stats() SegmentStats { return r.stats }

// OffsetIndex is the .index file as read at open (zero tail dropped), nil if
// it does not exist. It is checked as index.DecodeOffsetEntries does; a bad
// index is an *index.CorruptIndexError, and the caller may rebuild it from
// the log.
func (r *BrokerSegmentReader) OffsetIndex() ([]byte, error) {
	if _, err := index.DecodeOffsetEntries(r.offIdx, r.seg.BaseOffset); err != nil {
		return nil, withIndexFile(err, SegmentPath(filepath.Dir(r.seg.LogPath), r.seg.BaseOffset, IndexSuffix))
	}
	return r.offIdx, nil
}

// TimeIndex is the .timeindex file as read at open, checked like OffsetIndex.
func (r *BrokerSegmentReader) TimeIndex() ([]byte, error) {
	if _, err := index.DecodeTimeEntries(r.timeIdx, r.seg.BaseOffset); err != nil {
		return nil, withIndexFile(err, SegmentPath(filepath.Dir(r.seg.LogPath), r.seg.BaseOffset, TimeIndexSuffix))
	}
	return r.timeIdx, nil
}

// TxnIndex is the .txnindex file as read at open (nil if absent), checked
// like OffsetIndex.
func (r *BrokerSegmentReader) TxnIndex() ([]byte, error) {
	if _, err := index.DecodeAbortedTxns(r.txnIdx, r.seg.BaseOffset); err != nil {
		return nil, withIndexFile(err, SegmentPath(filepath.Dir(r.seg.LogPath), r.seg.BaseOffset, TxnIndexSuffix))
	}
	return r.txnIdx, nil
}

func withIndexFile(err error, path string) error {
	var ce *index.CorruptIndexError
	if errors.As(err, &ce) && ce.File == "" {
		return &index.CorruptIndexError{File: path, Reason: ce.Reason}
	}
	return err
}

// Read implements io.Reader over the segment's log bytes. Every byte it
// returns belongs to a whole batch whose CRC was verified. A corrupt or
// partial batch is a *record.CorruptError naming the file and position; a
// segment the broker deleted, replaced or truncated meanwhile is
// ErrSegmentGone. io.EOF comes only after the whole segment was verified and
// found still in place.
func (r *BrokerSegmentReader) Read(p []byte) (int, error) {
	for r.off == len(r.buf) {
		if r.err != nil {
			return 0, r.err
		}
		if r.pos >= r.size {
			r.err = r.finish()
			continue
		}
		r.fill()
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// fill verifies and buffers the next batches, about segmentReadChunk bytes.
func (r *BrokerSegmentReader) fill() {
	r.buf, r.off = r.buf[:0], 0
	path := r.seg.LogPath
	next, torn, err := scanBatches(r.f, path, r.pos, r.size, true, func(pos int64, b record.Batch) error {
		if r.stats.Batches > 0 && b.BaseOffset() < r.stats.NextOffset || b.BaseOffset() < r.seg.BaseOffset {
			return &record.CorruptError{File: path, Pos: pos, Offset: b.BaseOffset(),
				Reason: fmt.Sprintf("batch offsets [%d, %d] go backwards (previous batch ended at %d, segment base %d)", b.BaseOffset(), b.LastOffset(), r.stats.NextOffset, r.seg.BaseOffset)}
		}
		if r.stats.Batches == 0 {
			r.stats.FirstOffset = b.BaseOffset()
		}
		r.stats.Batches++
		r.stats.NextOffset = b.NextOffset()
		r.stats.MaxTimestamp = max(r.stats.MaxTimestamp, b.MaxTimestamp())
		r.buf = append(r.buf, b...)
		if len(r.buf) >= segmentReadChunk {
			return errStopScan
		}
		return nil
	})
	switch {
	case err != nil:
		r.err = r.gone(err)
	case torn:
		r.err = r.gone(tornRolled(path, next))
	case next <= r.pos:
		r.err = r.gone(&record.CorruptError{File: path, Pos: next, Offset: -1, Reason: "no progress scanning the segment"})
	}
	r.pos = next
}

// gone turns err into ErrSegmentGone if the file changed underneath the
// read: a file that shrank reads as garbage, not as corruption.
func (r *BrokerSegmentReader) gone(err error) error {
	if gerr := r.stillInPlace(); gerr != nil {
		return gerr
	}
	return err
}

// finish checks, at the end of the log, that the segment is still the one
// opened and still in place, and returns io.EOF if so.
func (r *BrokerSegmentReader) finish() error {
	if err := r.stillInPlace(); err != nil {
		return err
	}
	return io.EOF
}

func (r *BrokerSegmentReader) stillInPlace() error {
	path := r.seg.LogPath
	fi, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Size() != r.size {
		return fmt.Errorf("%s changed size from %d to %d while being read: %w", path, r.size, fi.Size(), ErrSegmentGone)
	}
	cur, err := r.fs.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s was deleted while being read: %w", path, ErrSegmentGone)
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if !sameFile(r.fi, cur) {
		return fmt.Errorf("%s was replaced while being read: %w", path, ErrSegmentGone)
	}
	return nil
}

// sameFile compares device and inode where the FS reports them (os.SameFile)
// and falls back to size and modification time.
func sameFile(a, b os.FileInfo) bool {
	if a.Sys() != nil && b.Sys() != nil {
		return os.SameFile(a, b)
	}
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// Close releases the log file.
func (r *BrokerSegmentReader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f, r.buf, r.off = nil, nil, 0
	if r.err == nil {
		r.err = errors.New("read of a closed segment reader")
	}
	return err
}
