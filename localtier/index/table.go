package index

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sync"

	"github.com/tiered/tiered/localtier/vfs"
)

// table is the part shared by the three index types: fixed-size entries kept
// in memory, mirrored by an append-only file.
type table struct {
	mu        sync.RWMutex
	fsys      vfs.FS
	path      string
	f         vfs.File // nil when read-only, or for a txn index not created yet
	readOnly  bool
	entrySize int
	buf       []byte // the valid entries, len(buf) = n * entrySize
	fileLen   int64  // length of the file as last read or written
	// lazy defers writing appended entries to the file until flush or
	// close, as Kafka's mmap'd indexes do: an append costs no system call.
	// Entries lost in a crash are rebuilt from the log by recovery.
	lazy    bool
	written int // bytes of buf known to be in the file
}

// maxIndexFileBytes bounds what we read into memory. Kafka's index size is an
// int, and nothing it writes comes near this.
const maxIndexFileBytes = math.MaxInt32

// load takes data, the whole file, keeping its whole entries minus a tail of
// all-zero entries (unwritten preallocated space).
func (t *table) load(data []byte) {
	t.fileLen = int64(len(data))
	n := len(data) / t.entrySize
	for n > 0 && allZero(data[(n-1)*t.entrySize:n*t.entrySize]) {
		n--
	}
	t.buf = append([]byte(nil), data[:n*t.entrySize]...)
	t.written = len(t.buf)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readAll reads the whole of f.
func readAll(f vfs.File, path string) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat index %s: %w", path, err)
	}
	size := st.Size()
	if size > maxIndexFileBytes {
		return nil, corruptf(path, "file is %d bytes, larger than any index", size)
	}
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(data)) {
		return nil, fmt.Errorf("read index %s: %w", path, err)
	}
	return data, nil
}

// openWritable opens (creating if needed) and loads path.
func (t *table) openWritable(create bool) error {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := t.fsys.OpenFile(t.path, flag, 0o644)
	if err != nil {
		return fmt.Errorf("open index %s: %w", t.path, err)
	}
	data, err := readAll(f, t.path)
	if err != nil {
		return errors.Join(err, f.Close())
	}
	t.f = f
	t.load(data)
	return nil
}

// openReadOnly loads path without keeping it open.
func (t *table) openReadOnly() error {
	t.readOnly = true
	f, err := t.fsys.Open(t.path)
	if err != nil {
		return fmt.Errorf("open index %s: %w", t.path, err)
	}
	data, err := readAll(f, t.path)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close index %s: %w", t.path, cerr)
	}
	if err != nil {
		return err
	}
	t.load(data)
	return nil
}

func (t *table) n() int { return len(t.buf) / t.entrySize }

func (t *table) entry(i int) []byte { return t.buf[i*t.entrySize : (i+1)*t.entrySize] }

func (t *table) writable() error {
	if t.readOnly {
		return fmt.Errorf("index %s: %w", t.path, ErrReadOnly)
	}
	if t.f == nil && t.fsys == nil {
		return fmt.Errorf("index %s: %w", t.path, ErrClosed)
	}
	return nil
}

// appendEntry writes e after the last valid entry. Callers hold mu.
func (t *table) appendEntry(e []byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	if t.f == nil { // a transaction index is created on first append, like Kafka's
		if err := t.openWritable(true); err != nil {
			return err
		}
	}
	t.buf = append(t.buf, e...)
	if t.lazy {
		return nil
	}
	if err := t.writePending(); err != nil {
		t.buf = t.buf[:len(t.buf)-len(e)]
		return err
	}
	return nil
}

// writePending writes the entries appended since the last write.
func (t *table) writePending() error {
	if t.f == nil || t.written == len(t.buf) {
		return nil
	}
	off := int64(t.written)
	n, err := t.f.WriteAt(t.buf[t.written:], off)
	if end := off + int64(n); end > t.fileLen {
		t.fileLen = end
	}
	if err != nil {
		return fmt.Errorf("append to index %s: %w", t.path, err)
	}
	t.written = len(t.buf)
	return nil
}

// truncateEntries keeps the first n entries, in memory and in the file.
func (t *table) truncateEntries(n int) error {
	if err := t.writable(); err != nil {
		return err
	}
	size := int64(n * t.entrySize)
	if t.f != nil && t.fileLen != size {
		if err := t.f.Truncate(size); err != nil {
			return fmt.Errorf("truncate index %s to %d entries: %w", t.path, n, err)
		}
		t.fileLen = size
	}
	t.buf = t.buf[:size]
	t.written = min(t.written, len(t.buf))
	return nil
}

func (t *table) flush() error {
	if t.readOnly || t.f == nil {
		return nil
	}
	if err := t.writePending(); err != nil {
		return err
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("sync index %s: %w", t.path, err)
	}
	return nil
}

// close trims the file to its valid entries (Kafka's trimToValidSize) and
// closes it. The in-memory entries stay readable.
func (t *table) close() error {
	if t.f == nil {
		t.fsys = nil
		return nil
	}
	var errs []error
	if err := t.writePending(); err != nil {
		errs = append(errs, err)
	}
	if size := int64(len(t.buf)); t.fileLen != size {
		if err := t.f.Truncate(size); err != nil {
			errs = append(errs, fmt.Errorf("trim index %s: %w", t.path, err))
		} else {
			t.fileLen = size
		}
	}
	if err := t.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close index %s: %w", t.path, err))
	}
	t.f = nil
	t.fsys = nil
	return errors.Join(errs...)
}

func (t *table) rename(newPath string) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := t.writePending(); err != nil {
		return err
	}
	err := t.fsys.Rename(t.path, newPath)
	if err != nil && !(t.f == nil && errors.Is(err, fs.ErrNotExist)) {
		return fmt.Errorf("rename index %s to %s: %w", t.path, newPath, err)
	}
	t.path = newPath
	return nil
}

// remove closes the file and deletes it; a missing file is not an error.
func (t *table) remove() error {
	if err := t.writable(); err != nil {
		return err
	}
	fsys := t.fsys
	var errs []error
	if t.f != nil {
		if err := t.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close index %s: %w", t.path, err))
		}
		t.f = nil
	}
	t.fsys = nil
	if err := fsys.Remove(t.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("delete index %s: %w", t.path, err))
	}
	t.buf = t.buf[:0]
	return errors.Join(errs...)
}

// sizeCheck reports a file whose length is not a whole number of entries.
func (t *table) sizeCheck() error {
	if t.fileLen%int64(t.entrySize) != 0 {
		return corruptf(t.path, "found %d bytes, which is not a multiple of the entry size %d", t.fileLen, t.entrySize)
	}
	return nil
}

// relative converts offset to an entry's relative offset.
func relative(path string, base, offset int64) (int32, error) {
	rel := offset - base
	if rel < 0 || rel > math.MaxInt32 {
		return 0, fmt.Errorf("index %s: offset %d with base offset %d: %w", path, offset, base, ErrOffsetOverflow)
	}
	return int32(rel), nil
}
