package localtier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// scanChunk is how much of a log file a scan reads at a time.
const scanChunk = 1 << 20

// errStopScan ends a scan early without an error.
var errStopScan = errors.New("stop scan")

// scanBatches calls fn for every whole batch of f between from and end (the
// file size the caller observed), reading in chunks. It returns the position
// after the last whole batch it visited. A batch that runs past end is a torn
// tail: the scan stops there without error and torn is true. Framing or, with
// verify, checksum errors are returned as *record.CorruptError naming path and
// the file position.
func scanBatches(f vfs.File, path string, from, end int64, verify bool, fn func(pos int64, b record.Batch) error) (next int64, torn bool, err error) {
	buf := make([]byte, 0, min(scanChunk, max(end-from, 0)))
	pos := from
	for pos < end {
		want := int64(scanChunk)
		if end-pos < want {
			want = end - pos
		}
		buf = buf[:want]
		n, err := f.ReadAt(buf, pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return pos, false, fmt.Errorf("read %s at %d: %w", path, pos, err)
		}
		if n < len(buf) {
			// The file shrank underneath us: what is missing is a torn tail.
			buf, end = buf[:n], pos+int64(n)
		}
		it := record.NewIter(buf)
		it.Verify = verify
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			if err := fn(pos+int64(it.Pos()-b.Size()), b); err != nil {
				if errors.Is(err, errStopScan) {
					return pos + int64(it.Pos()), false, nil
				}
				return pos + int64(it.Pos()-b.Size()), false, err
			}
		}
		if err := it.Err(); err != nil {
			return pos + int64(it.Pos()), false, record.WithFile(err, path, pos)
		}
		consumed := int64(it.Pos())
		if it.Truncated() {
			if pos+int64(len(buf)) >= end {
				// The partial batch reaches the end of the data: torn tail.
				return pos + consumed, true, nil
			}
			if consumed == 0 {
				// One batch larger than the chunk: read it whole.
				var hdr [record.LogOverhead]byte
				if _, err := f.ReadAt(hdr[:], pos); err != nil {
					return pos, false, fmt.Errorf("read %s at %d: %w", path, pos, err)
				}
				size := int64(record.LogOverhead) + int64(int32(binary.BigEndian.Uint32(hdr[8:])))
				if pos+size > end {
					return pos, true, nil
				}
				if size > int64(cap(buf)) {
					buf = make([]byte, 0, size)
				}
				want = size
				buf = buf[:want]
				if n, err := f.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
					return pos, false, fmt.Errorf("read %s at %d: %w", path, pos, err)
				} else if n < len(buf) {
					return pos, true, nil
				}
				it := record.NewIter(buf)
				it.Verify = verify
				b, ok := it.Next()
				if !ok {
					if it.Err() != nil {
						return pos, false, record.WithFile(it.Err(), path, pos)
					}
					return pos, true, nil
				}
				if err := fn(pos, b); err != nil {
					if errors.Is(err, errStopScan) {
						return pos + size, false, nil
					}
					return pos, false, err
				}
				consumed = size
			}
		}
		pos += consumed
	}
	return pos, false, nil
}
