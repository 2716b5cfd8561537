package chunkcache

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/tiered/tiered/localtier/vfs"
)

// Chunk file layout of the disk tier, one file per chunk:
//
//	┌──────────────────────┬────────────────┬───────────────┬────────────┐
//	│ payload (len bytes)  │ len uint64 BE  │ crc32c uint32 │ "TFC1"     │
//	└──────────────────────┴────────────────┴───────────────┴────────────┘
//	                        └──────────── trailer, 16 bytes ─────────────┘
//
// crc32c (Castagnoli) covers the payload. File name:
// hex(sha256(object NUL version NUL chunkBytes))[:32] "-" index ".chunk", so
// a different chunk size never reads a chunk of another layout. Files are
// written to a ".tmp" name and renamed; there is no fsync, because a torn
// or lost file is caught by the length and checksum check and refetched.
const (
	chunkTrailerLen = 16
	chunkMagic      = "TFC1"
	chunkFileExt    = ".chunk"
	chunkTmpExt     = ".tmp"
	diskLockName    = "LOCK"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorruptChunk is matched by every corruptChunkError.
var errCorruptChunk = errors.New("corrupt cache chunk file")

// corruptChunkError says which chunk file failed its check and how. The
// disk tier answers it by deleting the file and reporting a miss, so the
// chunk is refetched from the store; it is logged and counted, never
// returned to callers.
type corruptChunkError struct {
	Path string
	Err  error
}

func (e *corruptChunkError) Error() string {
	return fmt.Sprintf("%v %s: %v", errCorruptChunk, e.Path, e.Err)
}

func (e *corruptChunkError) Unwrap() []error { return []error{errCorruptChunk, e.Err} }

// encodeChunkFile returns payload followed by its trailer.
func encodeChunkFile(payload []byte) []byte {
	out := make([]byte, len(payload)+chunkTrailerLen)
	copy(out, payload)
	t := out[len(payload):]
	binary.BigEndian.PutUint64(t[0:8], uint64(len(payload)))
	binary.BigEndian.PutUint32(t[8:12], crc32.Checksum(payload, castagnoli))
	copy(t[12:16], chunkMagic)
	return out
}

// decodeChunkFile checks a chunk file's trailer against its content and the
// expected payload length (want < 0: any) and returns the payload, which
// aliases b. It never allocates: the length field is only compared.
func decodeChunkFile(b []byte, want int64) ([]byte, error) {
	if len(b) < chunkTrailerLen {
		return nil, fmt.Errorf("file of %d bytes is shorter than the %d-byte trailer", len(b), chunkTrailerLen)
	}
	t := b[len(b)-chunkTrailerLen:]
	if string(t[12:16]) != chunkMagic {
		return nil, fmt.Errorf("bad magic %q", t[12:16])
	}
	payload := b[:len(b)-chunkTrailerLen]
	n := binary.BigEndian.Uint64(t[0:8])
	if n != uint64(len(payload)) {
		return nil, fmt.Errorf("trailer length %d, payload has %d bytes", n, len(payload))
	}
	if want >= 0 && int64(len(payload)) != want {
		return nil, fmt.Errorf("payload of %d bytes, chunk needs %d", len(payload), want)
	}
	if got, sum := crc32.Checksum(payload, castagnoli), binary.BigEndian.Uint32(t[8:12]); got != sum {
		return nil, fmt.Errorf("checksum %08x, trailer says %08x", got, sum)
	}
	return payload, nil
}

// diskTier keeps chunk files in one directory, bounded by the sum of file
// sizes with LRU eviction. A hit sets the file's modification time, so at
// start it reloads the files already there in LRU order (oldest
// modification first), removes leftover temporaries, and trims to
// the bound; contents are checked on read, not at start. A LOCK file held
// with flock (vfs.FS.Lock) keeps two processes from sharing the directory.
// Every file operation goes through fs.
type diskTier struct {
	fs         vfs.FS
	dir        string
	max        int64
	chunkBytes int64
	m          *cacheMetrics
	log        *slog.Logger
	lock       io.Closer

	mu    sync.Mutex
	lru   *simplelru.LRU[string, int64] // file name → file size
	bytes int64
}

func openDiskTier(fsys vfs.FS, dir string, max, chunkBytes int64, m *cacheMetrics, log *slog.Logger) (*diskTier, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open disk cache: %w", err)
	}
	lock, err := fsys.Lock(filepath.Join(dir, diskLockName))
	if err != nil {
		return nil, fmt.Errorf("lock disk cache %s (another process uses it?): %w", dir, err)
	}
	l, err := simplelru.NewLRU[string, int64](math.MaxInt, nil)
	if err != nil {
		panic(err)
	}
	d := &diskTier{fs: fsys, dir: dir, max: max, chunkBytes: chunkBytes, m: m, log: log, lock: lock, lru: l}
	if err := d.reload(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *diskTier) reload() error {
	ents, err := d.fs.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("reload disk cache: %w", err)
	}
	type file struct {
		name  string
		size  int64
		mtime time.Time
	}
	var files []file
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, chunkTmpExt) && strings.Contains(name, chunkFileExt+"."):
			// A temporary of write's (name.chunk.*.tmp); other files,
			// .tmp ones included, are not the cache's to remove.
			_ = d.fs.Remove(filepath.Join(d.dir, name))
		case isChunkFileName(name) && e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			files = append(files, file{name, info.Size(), info.ModTime()})
		}
	}
	slices.SortFunc(files, func(a, b file) int {
		return cmp.Or(a.mtime.Compare(b.mtime), strings.Compare(a.name, b.name))
	})
	var victims []string
	d.mu.Lock()
	for _, f := range files {
		if f.size > d.chunkBytes+chunkTrailerLen {
			victims = append(victims, f.name) // another layout or garbage
			continue
		}
		d.lru.Add(f.name, f.size)
		d.bytes += f.size
		d.m.bytes.WithLabelValues(TierDisk).Add(float64(f.size))
	}
	victims = append(victims, d.trimLocked()...)
	d.mu.Unlock()
	d.remove(victims)
	return nil
}

// fileName is the chunk's file name (see the layout comment).
func (d *diskTier) fileName(k chunkKey) string {
	h := sha256.New()
	h.Write([]byte(k.object))
	h.Write([]byte{0})
	h.Write([]byte(k.version))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(d.chunkBytes, 10)))
	return hex.EncodeToString(h.Sum(nil)[:16]) + "-" + strconv.FormatInt(k.index, 10) + chunkFileExt
}

// isChunkFileName reports whether name has the form of fileName's names
// (32 hex digits, "-", an index, ".chunk"): other files in the directory,
// whatever their extension, are not the tier's to count or evict.
func isChunkFileName(name string) bool {
	hash, rest, ok := strings.Cut(strings.TrimSuffix(name, chunkFileExt), "-")
	if !ok || len(hash) != 32 || !strings.HasSuffix(name, chunkFileExt) {
		return false
	}
	if _, err := hex.DecodeString(hash); err != nil {
		return false
	}
	_, err := strconv.ParseUint(rest, 10, 63)
	return err == nil
}

// has reports whether the chunk has a file (without reading or checking
// it, and without making it recently used).
func (d *diskTier) has(k chunkKey) bool {
	name := d.fileName(k)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lru.Contains(name)
}

// get reads and checks the chunk file; any failure is a miss (a corrupt
// file is deleted, logged and counted). want is the chunk's length.
func (d *diskTier) get(k chunkKey, want int64) ([]byte, bool) {
	name := d.fileName(k)
	d.mu.Lock()
	size, ok := d.lru.Get(name)
	d.mu.Unlock()
	if !ok {
		return nil, false
	}
	path := filepath.Join(d.dir, name)
	data, err := readChunkFile(d.fs, path, size, want)
	if err == nil {
		// The modification time orders the files at the next reload.
		now := time.Now()
		_ = d.fs.Chtimes(path, now, now)
		return data, true
	}
	if errors.Is(err, errCorruptChunk) {
		d.m.corrupt.Inc()
		d.log.Warn("disk cache chunk failed its check; refetching", "chunk", k.String(), "err", err)
	} else if !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("disk cache read failed; refetching", "chunk", k.String(), "err", err)
	}
	d.drop(name)
	return nil, false
}

// readChunkFile reads a chunk file of the indexed size. A size that
// disagrees with the index or the expected length is corruption; the
// buffer is sized from the index, which is bounded by the chunk size.
func readChunkFile(fsys vfs.FS, path string, size, want int64) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() != size || size != want+chunkTrailerLen {
		return nil, &corruptChunkError{Path: path, Err: fmt.Errorf("file has %d bytes, expected %d", info.Size(), want+chunkTrailerLen)}
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil, &corruptChunkError{Path: path, Err: err}
	}
	payload, err := decodeChunkFile(buf, want)
	if err != nil {
		return nil, &corruptChunkError{Path: path, Err: err}
	}
	return payload, nil
}

// put writes the chunk (tmp + rename) unless present, then evicts the
// least recently used files until the bound holds.
func (d *diskTier) put(k chunkKey, payload []byte) {
	name := d.fileName(k)
	size := int64(len(payload)) + chunkTrailerLen
	if size > d.max {
		return
	}
	d.mu.Lock()
	present := d.lru.Contains(name)
	d.mu.Unlock()
	if present {
		return
	}
	if err := d.write(name, payload); err != nil {
		d.log.Warn("disk cache write failed", "chunk", k.String(), "err", err)
		return
	}
	d.mu.Lock()
	if d.lru.Contains(name) {
		d.mu.Unlock()
		return // a concurrent writer of the same chunk won; same content
	}
	d.lru.Add(name, size)
	d.bytes += size
	d.m.bytes.WithLabelValues(TierDisk).Add(float64(size))
	victims := d.trimLocked()
	d.mu.Unlock()
	d.remove(victims)
}

func (d *diskTier) write(name string, payload []byte) (err error) {
	tmp, err := vfs.CreateTemp(d.fs, d.dir, name+".*"+chunkTmpExt)
	if err != nil {
		return fmt.Errorf("create chunk file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			d.fs.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(encodeChunkFile(payload)); err != nil {
		return fmt.Errorf("write chunk file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close chunk file: %w", err)
	}
	// Hits set the time with time.Now too: the file system's own
	// timestamps are coarser and would misorder the reload.
	now := time.Now()
	_ = d.fs.Chtimes(tmp.Name(), now, now)
	if err := d.fs.Rename(tmp.Name(), filepath.Join(d.dir, name)); err != nil {
		return fmt.Errorf("rename chunk file: %w", err)
	}
	return nil
}

// trimLocked evicts least recently used entries until the bound holds and
// returns the file names to remove (outside the lock).
func (d *diskTier) trimLocked() []string {
	var victims []string
	for d.bytes > d.max {
		name, size, ok := d.lru.RemoveOldest()
		if !ok {
			break
		}
		d.bytes -= size
		d.m.bytes.WithLabelValues(TierDisk).Sub(float64(size))
		d.m.evictions.WithLabelValues(TierDisk).Inc()
		victims = append(victims, name)
	}
	return victims
}

func (d *diskTier) drop(name string) {
	d.mu.Lock()
	size, ok := d.lru.Peek(name)
	if ok {
		d.lru.Remove(name)
		d.bytes -= size
		d.m.bytes.WithLabelValues(TierDisk).Sub(float64(size))
	}
	d.mu.Unlock()
	_ = d.fs.Remove(filepath.Join(d.dir, name))
}

func (d *diskTier) remove(names []string) {
	for _, n := range names {
		if err := d.fs.Remove(filepath.Join(d.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("disk cache evict failed", "file", n, "err", err)
		}
	}
}

// names lists the cached files from least to most recently used.
func (d *diskTier) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lru.Keys()
}

func (d *diskTier) size() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bytes
}

// close releases the lock; the files stay for the next start. The bytes
// gauge is returned to what it was before this tier opened.
func (d *diskTier) close() error {
	d.mu.Lock()
	d.m.bytes.WithLabelValues(TierDisk).Sub(float64(d.bytes))
	d.bytes = 0
	d.lru.Purge()
	d.mu.Unlock()
	return d.lock.Close()
}
