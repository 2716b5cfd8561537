package localtier

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/tiered/tiered/localtier/vfs"
)

// The open-file table. A partition holds three or four files per segment
// (.log, .index, .timeindex, maybe .txnindex); 10,000 partitions would hold
// 30,000 descriptors open and a create or a start would fail with EMFILE
// under an ordinary `ulimit -n`. A LogDir therefore opens its files through a
// FileTable: every file stays a vfs.File to its owner, but the descriptor
// under it is closed when the file is the least recently used of more than
// the table's limit, and reopened (same name, same flags minus O_CREATE,
// O_EXCL and O_TRUNC, same position) by the next operation on it. A reopen
// that fails is that operation's error.
//
// A file written since its last Sync is synced before its descriptor is
// closed, so that a write-back error is not lost with the descriptor; such
// an error is returned by the file's next Sync (or Close).
//
// The limit is soft: a file in use by an operation is never closed under it,
// so when every open file is in use a new one is opened beyond the limit
// (by at most the operations running at once).

// DefaultMaxOpenFilesDivisor: with no configured limit, a LogDir may hold
// RLIMIT_NOFILE's soft limit divided by this open, leaving the rest to
// sockets, the bucket and the runtime.
const DefaultMaxOpenFilesDivisor = 2

// MinMaxOpenFiles is the smallest limit a derived default takes.
const MinMaxOpenFiles = 16

// DefaultMaxOpenFiles is the limit a LogDir uses when none is configured:
// half of RLIMIT_NOFILE's soft limit (Go raises the soft limit to the hard
// one at start-up), at least MinMaxOpenFiles.
func DefaultMaxOpenFiles() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	if rl.Cur > 1<<30 {
		return 1 << 29
	}
	return max(MinMaxOpenFiles, int(rl.Cur)/DefaultMaxOpenFilesDivisor)
}

// FileTable bounds the descriptors held by the files opened through its
// FS wrappers. It is safe for concurrent use.
type FileTable struct {
	max int

	mu    sync.Mutex
	lru   fileLRU // the files with a descriptor and no operation running, most recent first
	open  int     // descriptors held
	stats FileTableStats
}

// FileTableStats counts what a table did.
type FileTableStats struct {
	Open      int   // descriptors held now
	Files     int   // files open to their owners (with or without a descriptor)
	Evictions int64 // descriptors closed to stay under the limit
	Reopens   int64 // descriptors reopened on demand
	Failed    int64 // reopens that failed
}

// NewFileTable makes a table holding at most max descriptors (soft, see
// above); max <= 0 means DefaultMaxOpenFiles.
func NewFileTable(max int) *FileTable {
	if max <= 0 {
		max = DefaultMaxOpenFiles()
	}
	return &FileTable{max: max}
}

// Max is the table's limit.
func (t *FileTable) Max() int { return t.max }

// Stats returns the table's counters.
func (t *FileTable) Stats() FileTableStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Open = t.open
	return s
}

// FS wraps fsys: files opened through the result hold their descriptors
// through t. Renames through it follow the open files they move.
func (t *FileTable) FS(fsys vfs.FS) vfs.FS {
	return &tableFS{FS: fsys, t: t, byName: map[string]map[*tableFile]struct{}{}}
}

// reserveLocked makes room for one more descriptor, returning the files
// whose descriptors the caller must close (after unlocking).
func (t *FileTable) reserveLocked() []*tableFile {
	var victims []*tableFile
	for t.open >= t.max {
		v := t.lru.back()
		if v == nil {
			break // every descriptor is in use: go over the limit
		}
		t.lru.remove(v)
		v.evicting = v.f
		v.f = nil
		t.open--
		t.stats.Evictions++
		victims = append(victims, v)
	}
	t.open++
	return victims
}

// evict closes the descriptor a victim gave up, syncing it first if it was
// written since its last sync; an error is kept for the file's next Sync.
func (t *FileTable) evict(v *tableFile) {
	t.mu.Lock()
	f, dirty, name := v.evicting, v.dirty, v.name
	t.mu.Unlock()
	var err error
	if dirty {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("sync %s before closing it: %w", name, err)
		}
	}
	// The close of a descriptor with nothing unsynced loses nothing; its
	// error is dropped, as readers drop it.
	if cerr := f.Close(); cerr != nil && err == nil && dirty {
		err = fmt.Errorf("close %s: %w", name, cerr)
	}
	t.mu.Lock()
	v.evicting = nil
	if dirty && err == nil {
		v.dirty = false
	}
	if err != nil {
		v.sticky = errors.Join(v.sticky, err)
	}
	if v.evicted != nil {
		close(v.evicted)
		v.evicted = nil
	}
	t.mu.Unlock()
}

// tableFS is a vfs.FS whose files hold descriptors through a FileTable.
type tableFS struct {
	vfs.FS
	t *FileTable

	mu     sync.Mutex
	byName map[string]map[*tableFile]struct{} // open files by clean name
}

func (fs *tableFS) Create(name string) (vfs.File, error) {
	return fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (fs *tableFS) Open(name string) (vfs.File, error) { return fs.OpenFile(name, os.O_RDONLY, 0) }

func (fs *tableFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	t := fs.t
	t.mu.Lock()
	victims := t.reserveLocked()
	t.mu.Unlock()
	for _, v := range victims {
		t.evict(v)
	}
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		t.mu.Lock()
		t.open--
		t.mu.Unlock()
		return nil, err
	}
	file := &tableFile{fs: fs, name: filepath.Clean(name), flag: flag &^ (os.O_CREATE | os.O_EXCL | os.O_TRUNC), perm: perm, f: f}
	t.mu.Lock()
	t.lru.pushFront(file)
	t.stats.Files++
	t.mu.Unlock()
	fs.mu.Lock()
	set := fs.byName[file.name]
	if set == nil {
		set = map[*tableFile]struct{}{}
		fs.byName[file.name] = set
	}
	set[file] = struct{}{}
	fs.mu.Unlock()
	return file, nil
}

// Rename renames the file and points the open files of oldname at newname,
// so that their next reopen finds it.
func (fs *tableFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.FS.Rename(oldname, newname); err != nil {
		return err
	}
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	set := fs.byName[oldname]
	if len(set) == 0 {
		return nil
	}
	delete(fs.byName, oldname)
	dst := fs.byName[newname]
	if dst == nil {
		dst = map[*tableFile]struct{}{}
		fs.byName[newname] = dst
	}
	fs.t.mu.Lock()
	for f := range set {
		f.name = newname
		dst[f] = struct{}{}
	}
	fs.t.mu.Unlock()
	return nil
}

func (fs *tableFS) forget(f *tableFile) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.t.mu.Lock()
	name := f.name
	fs.t.mu.Unlock()
	if set := fs.byName[name]; set != nil {
		delete(set, f)
		if len(set) == 0 {
			delete(fs.byName, name)
		}
	}
}

// tableFile is a vfs.File whose descriptor the table may close while no
// operation runs on it. Fields are guarded by the table's mutex, except pos
// (posMu).
type tableFile struct {
	fs   *tableFS
	name string
	flag int
	perm os.FileMode

	f          vfs.File   // the descriptor, nil when closed by the table
	prev, next *tableFile // in the table's LRU (listed) while f is set and refs == 0
	listed     bool
	refs       int           // operations running
	opening    chan struct{} // closed when a reopen under way ends
	evicting   vfs.File      // a descriptor being closed by the table
	evicted    chan struct{} // closed when evicting ends
	dirty      bool          // written since the last sync
	sticky     error         // a sync or close error of an evicted descriptor
	closed     bool

	posMu sync.Mutex
	pos   int64 // offset of Read, Write and Seek
}

// acquire returns the descriptor, reopening it if the table closed it, and
// keeps it from being closed until release.
func (f *tableFile) acquire() (vfs.File, error) {
	t := f.fs.t
	t.mu.Lock()
	for {
		if f.closed {
			t.mu.Unlock()
			return nil, fmt.Errorf("%s: %w", f.name, os.ErrClosed)
		}
		if f.f != nil {
			f.refs++
			t.lru.remove(f)
			d := f.f
			t.mu.Unlock()
			return d, nil
		}
		if f.opening == nil {
			break
		}
		ch := f.opening
		t.mu.Unlock()
		<-ch
		t.mu.Lock()
	}
	opening := make(chan struct{})
	f.opening = opening
	name := f.name
	var wait chan struct{}
	if f.evicting != nil {
		// The old descriptor is still being synced: reopen after it, so
		// the sync's outcome is known to the file.
		if f.evicted == nil {
			f.evicted = make(chan struct{})
		}
		wait = f.evicted
	}
	victims := t.reserveLocked()
	t.mu.Unlock()
	for _, v := range victims {
		t.evict(v)
	}
	if wait != nil {
		<-wait
	}
	d, err := f.fs.FS.OpenFile(name, f.flag, f.perm)
	if err == nil {
		f.posMu.Lock()
		if f.pos != 0 {
			if _, serr := d.Seek(f.pos, io.SeekStart); serr != nil {
				err = errors.Join(serr, d.Close())
			}
		}
		f.posMu.Unlock()
	}
	t.mu.Lock()
	f.opening = nil
	close(opening)
	if err != nil {
		t.open--
		t.stats.Failed++
		t.mu.Unlock()
		return nil, fmt.Errorf("reopen %s: %w", name, err)
	}
	t.stats.Reopens++
	f.f = d
	f.refs++
	t.mu.Unlock()
	return d, nil
}

// release ends an operation; wrote marks the file as needing a sync.
func (f *tableFile) release(wrote bool) {
	t := f.fs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if wrote {
		f.dirty = true
	}
	f.refs--
	if f.refs == 0 && f.f != nil && !f.closed {
		t.lru.pushFront(f)
	}
}

// with runs op on the descriptor, holding it open; wrote marks the file as
// needing a sync.
func with[T any](f *tableFile, wrote bool, op func(vfs.File) (T, error)) (T, error) {
	d, err := f.acquire()
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.release(wrote)
	return op(d)
}

// ReadAt and WriteAt, the hot paths, hold the descriptor without with's
// closure, which would be allocated on every call.
func (f *tableFile) ReadAt(p []byte, off int64) (int, error) {
	d, err := f.acquire()
	if err != nil {
		return 0, err
	}
	defer f.release(false)
	return d.ReadAt(p, off)
}

func (f *tableFile) WriteAt(p []byte, off int64) (int, error) {
	d, err := f.acquire()
	if err != nil {
		return 0, err
	}
	defer f.release(true)
	return d.WriteAt(p, off)
}

func (f *tableFile) Read(p []byte) (int, error) {
	return with(f, false, func(d vfs.File) (int, error) {
		f.posMu.Lock()
		defer f.posMu.Unlock()
		n, err := d.Read(p)
		f.pos += int64(n)
		return n, err
	})
}

func (f *tableFile) Write(p []byte) (int, error) {
	return with(f, true, func(d vfs.File) (int, error) {
		f.posMu.Lock()
		defer f.posMu.Unlock()
		n, err := d.Write(p)
		if f.flag&os.O_APPEND != 0 {
			if pos, serr := d.Seek(0, io.SeekCurrent); serr == nil {
				f.pos = pos
			}
		} else {
			f.pos += int64(n)
		}
		return n, err
	})
}

func (f *tableFile) Seek(offset int64, whence int) (int64, error) {
	return with(f, false, func(d vfs.File) (int64, error) {
		f.posMu.Lock()
		defer f.posMu.Unlock()
		pos, err := d.Seek(offset, whence)
		if err == nil {
			f.pos = pos
		}
		return pos, err
	})
}

func (f *tableFile) Stat() (os.FileInfo, error) {
	return with(f, false, func(d vfs.File) (os.FileInfo, error) { return d.Stat() })
}

func (f *tableFile) Truncate(size int64) error {
	_, err := with(f, true, func(d vfs.File) (struct{}, error) { return struct{}{}, d.Truncate(size) })
	return err
}

// Sync syncs the descriptor and reports, once, an error an eviction met.
func (f *tableFile) Sync() error {
	d, err := f.acquire()
	if err != nil {
		return err
	}
	err = d.Sync()
	t := f.fs.t
	t.mu.Lock()
	sticky := f.sticky
	f.sticky = nil
	if err == nil && sticky == nil {
		f.dirty = false
	}
	t.mu.Unlock()
	f.release(false)
	return errors.Join(err, sticky)
}

func (f *tableFile) Name() string {
	t := f.fs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	return f.name
}

// Close closes the descriptor if the table has not, and reports an error an
// eviction met that no Sync reported.
func (f *tableFile) Close() error {
	t := f.fs.t
	t.mu.Lock()
	if f.closed {
		t.mu.Unlock()
		return fmt.Errorf("close %s: %w", f.name, os.ErrClosed)
	}
	for f.opening != nil || f.evicting != nil {
		var ch chan struct{}
		if f.opening != nil {
			ch = f.opening
		} else {
			if f.evicted == nil {
				f.evicted = make(chan struct{})
			}
			ch = f.evicted
		}
		t.mu.Unlock()
		<-ch
		t.mu.Lock()
	}
	f.closed = true
	d := f.f
	f.f = nil
	t.lru.remove(f)
	if d != nil {
		t.open--
	}
	t.stats.Files--
	sticky := f.sticky
	f.sticky = nil
	t.mu.Unlock()
	f.fs.forget(f)
	var err error
	if d != nil {
		err = d.Close()
	}
	return errors.Join(err, sticky)
}

// fileLRU is an intrusive list of the table's idle files: pushing and
// removing allocate nothing (every read and write of a file through the
// table leaves and re-enters it).
type fileLRU struct {
	front, tail *tableFile
}

func (l *fileLRU) pushFront(f *tableFile) {
	if f.listed {
		l.remove(f)
	}
	f.prev, f.next, f.listed = nil, l.front, true
	if l.front != nil {
		l.front.prev = f
	} else {
		l.tail = f
	}
	l.front = f
}

// remove takes f out of the list if it is in it.
func (l *fileLRU) remove(f *tableFile) {
	if !f.listed {
		return
	}
	if f.prev != nil {
		f.prev.next = f.next
	} else {
		l.front = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else {
		l.tail = f.prev
	}
	f.prev, f.next, f.listed = nil, nil, false
}

// back is the least recently used idle file, or nil.
func (l *fileLRU) back() *tableFile { return l.tail }
