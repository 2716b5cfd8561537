package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Overlay is a copy-on-write view of a base FS that never changes the base:
// files are read from the base until something writes, truncates, renames or
// removes them, and from then on the change lives in memory only. Lock goes
// to the base (the one thing an overlay writes there). Commands that only
// read a data dir open it through an Overlay, so the loader's recovery
// (truncating a torn tail, rebuilding indexes, removing leftovers, completing
// swaps) runs unchanged but in memory, and the files stay as they were.
//
// A truncation that shrinks a base file costs nothing; the first write to a
// base file copies its bytes into memory.
type Overlay struct {
	base  FS
	mu    sync.Mutex
	nodes map[string]*ovNode // cleaned path -> node; nil: removed in the overlay
}

// NewOverlay returns a copy-on-write view of base.
func NewOverlay(base FS) *Overlay {
	return &Overlay{base: base, nodes: map[string]*ovNode{}}
}

// ovNode is a file or directory the overlay has taken over. A directory
// node hides the base directory of the same name (it was created, or
// recreated, in the overlay).
type ovNode struct {
	mu      sync.Mutex
	dir     bool
	src     string // base file holding the first size bytes; "" once data holds them
	size    int64
	data    []byte
	mode    os.FileMode
	modTime time.Time
}

func (n *ovNode) info(name string) os.FileInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	mode := n.mode
	if n.dir {
		mode |= os.ModeDir
	}
	size := n.size
	if n.src == "" {
		size = int64(len(n.data))
	}
	return &memFileInfo{name: filepath.Base(name), size: size, mode: mode, modTime: n.modTime}
}

// toData copies the base bytes into memory. Callers hold n.mu.
func (n *ovNode) toData(base FS) error {
	if n.src == "" {
		return nil
	}
	f, err := base.Open(n.src)
	if err != nil {
		return err
	}
	defer f.Close()
	data := make([]byte, n.size)
	if k, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && int64(k) == n.size) {
		return fmt.Errorf("overlay: copy %s: %w", n.src, err)
	}
	n.src, n.data = "", data
	return nil
}

// lookup finds name's overlay state: n non-nil is an overlay node; hidden
// means removed (itself or an ancestor) or under an overlay directory, so
// the base does not show through. Callers hold o.mu.
func (o *Overlay) lookup(name string) (n *ovNode, hidden bool) {
	if n, ok := o.nodes[name]; ok {
		return n, n == nil
	}
	for d := filepath.Dir(name); ; d = filepath.Dir(d) {
		if an, ok := o.nodes[d]; ok {
			return nil, an == nil || an.dir
		}
		if d == filepath.Dir(d) {
			return nil, false
		}
	}
}

// statLocked is Stat under o.mu.
func (o *Overlay) statLocked(name string) (os.FileInfo, error) {
	n, hidden := o.lookup(name)
	if n != nil {
		return n.info(name), nil
	}
	if hidden {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return o.base.Stat(name)
}

// takeOver makes an overlay node for the base file name (of info fi).
func (o *Overlay) takeOver(name string, fi os.FileInfo) *ovNode {
	n := &ovNode{src: name, size: fi.Size(), mode: fi.Mode().Perm(), modTime: fi.ModTime()}
	o.nodes[name] = n
	return n
}

func (o *Overlay) Create(name string) (File, error) {
	return o.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (o *Overlay) Open(name string) (File, error) { return o.OpenFile(name, os.O_RDONLY, 0) }

func (o *Overlay) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	name = filepath.Clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	write := flag&(os.O_WRONLY|os.O_RDWR) != 0
	n, hidden := o.lookup(name)
	if n == nil && !hidden {
		fi, err := o.base.Stat(name)
		switch {
		case err == nil && fi.IsDir():
			if write {
				return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
			}
			return o.base.Open(name)
		case err == nil:
			if flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL {
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
			}
			if !write {
				return o.base.Open(name)
			}
			n = o.takeOver(name, fi)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	} else if n != nil && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	if n == nil {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if pi, err := o.statLocked(filepath.Dir(name)); err != nil || !pi.IsDir() {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		n = &ovNode{data: []byte{}, mode: perm.Perm(), modTime: time.Now()}
		o.nodes[name] = n
	}
	if n.dir && write {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	if flag&os.O_TRUNC != 0 && write {
		n.mu.Lock()
		n.src, n.data, n.modTime = "", []byte{}, time.Now()
		n.mu.Unlock()
	}
	return &ovFile{o: o, n: n, name: name, read: flag&os.O_WRONLY == 0, write: write, append: flag&os.O_APPEND != 0}, nil
}

func (o *Overlay) Remove(name string) error {
	name = filepath.Clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	fi, err := o.statLocked(name)
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if fi.IsDir() {
		if ents, err := o.readDirLocked(name); err != nil {
			return err
		} else if len(ents) > 0 {
			return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
		}
	}
	o.nodes[name] = nil
	return nil
}

func (o *Overlay) RemoveAll(name string) error {
	name = filepath.Clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.statLocked(name); err != nil {
		return nil
	}
	prefix := name + string(filepath.Separator)
	for k := range o.nodes {
		if strings.HasPrefix(k, prefix) {
			delete(o.nodes, k)
		}
	}
	o.nodes[name] = nil
	return nil
}

func (o *Overlay) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	o.mu.Lock()
	defer o.mu.Unlock()
	fi, err := o.statLocked(oldname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if pi, err := o.statLocked(filepath.Dir(newname)); err != nil || !pi.IsDir() {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if ni, err := o.statLocked(newname); err == nil && ni.IsDir() != fi.IsDir() {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EISDIR}
	}
	if oldname == newname {
		return nil
	}
	return o.renameLocked(oldname, newname, fi)
}

// renameLocked moves oldname (of info fi) to newname; a directory moves
// with everything under it.
func (o *Overlay) renameLocked(oldname, newname string, fi os.FileInfo) error {
	if !fi.IsDir() {
		n, _ := o.lookup(oldname)
		if n == nil {
			n = o.takeOver(oldname, fi)
		}
		o.nodes[newname] = n
		o.nodes[oldname] = nil
		return nil
	}
	ents, err := o.readDirLocked(oldname)
	if err != nil {
		return err
	}
	o.nodes[newname] = &ovNode{dir: true, mode: fi.Mode().Perm(), modTime: fi.ModTime()}
	for _, e := range ents {
		ci, err := o.statLocked(filepath.Join(oldname, e.Name()))
		if err != nil {
			return err
		}
		if err := o.renameLocked(filepath.Join(oldname, e.Name()), filepath.Join(newname, e.Name()), ci); err != nil {
			return err
		}
	}
	prefix := oldname + string(filepath.Separator)
	for k := range o.nodes {
		if strings.HasPrefix(k, prefix) {
			delete(o.nodes, k)
		}
	}
	o.nodes[oldname] = nil
	return nil
}

func (o *Overlay) MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	o.mu.Lock()
	defer o.mu.Unlock()
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := o.statLocked(d)
		if err == nil {
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range slices.Backward(missing) {
		o.nodes[d] = &ovNode{dir: true, mode: perm.Perm(), modTime: time.Now()}
	}
	return nil
}

func (o *Overlay) ReadDir(dir string) ([]os.DirEntry, error) {
	dir = filepath.Clean(dir)
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.readDirLocked(dir)
}

func (o *Overlay) readDirLocked(dir string) ([]os.DirEntry, error) {
	fi, err := o.statLocked(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: syscall.ENOTDIR}
	}
	var out []os.DirEntry
	if n, _ := o.lookup(dir); n == nil {
		ents, err := o.base.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if _, taken := o.nodes[filepath.Join(dir, e.Name())]; !taken {
				out = append(out, e)
			}
		}
	}
	for k, n := range o.nodes {
		if n != nil && filepath.Dir(k) == dir && k != dir {
			out = append(out, fs.FileInfoToDirEntry(n.info(k)))
		}
	}
	slices.SortFunc(out, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (o *Overlay) Stat(name string) (os.FileInfo, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.statLocked(filepath.Clean(name))
}

func (o *Overlay) Chtimes(name string, _, mtime time.Time) error {
	name = filepath.Clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	fi, err := o.statLocked(name)
	if err != nil {
		return err
	}
	n, _ := o.lookup(name)
	if n == nil {
		if fi.IsDir() {
			return nil // base directory times are not tracked
		}
		n = o.takeOver(name, fi)
	}
	n.mu.Lock()
	n.modTime = mtime
	n.mu.Unlock()
	return nil
}

// SyncDir has nothing to make durable.
func (o *Overlay) SyncDir(dir string) error {
	fi, err := o.Stat(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("sync dir %s: %w", dir, syscall.ENOTDIR)
	}
	return nil
}

// Lock locks the base file: the lock is the one thing an Overlay shares
// with other processes.
func (o *Overlay) Lock(name string) (io.Closer, error) { return o.base.Lock(name) }

// ovFile is an open overlay file.
type ovFile struct {
	o                   *Overlay
	n                   *ovNode
	name                string
	pos                 int64
	read, write, append bool
	closed              bool
	src                 File // base file open for reads of n.src
}

func (f *ovFile) check(op string, read, write bool) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.n.dir && (read || write):
		return &fs.PathError{Op: op, Path: f.name, Err: syscall.EISDIR}
	case read && !f.read, write && !f.write:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrPermission}
	}
	return nil
}

func (f *ovFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if errors.Is(err, io.EOF) && n > 0 {
		err = nil
	}
	return n, err
}

func (f *ovFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if f.n.src == "" {
		if off >= int64(len(f.n.data)) {
			return 0, io.EOF
		}
		k := copy(p, f.n.data[off:])
		if k < len(p) {
			return k, io.EOF
		}
		return k, nil
	}
	if off >= f.n.size {
		return 0, io.EOF
	}
	if f.src == nil || f.src.Name() != f.n.src {
		if f.src != nil {
			_ = f.src.Close()
		}
		src, err := f.o.base.Open(f.n.src)
		if err != nil {
			return 0, err
		}
		f.src = src
	}
	want := min(int64(len(p)), f.n.size-off)
	k, err := f.src.ReadAt(p[:want], off)
	if err == nil && want < int64(len(p)) {
		err = io.EOF
	}
	return k, err
}

func (f *ovFile) Write(p []byte) (int, error) {
	if f.append {
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		f.pos = fi.Size()
	}
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	n, err := f.writeAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *ovFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.append {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: errors.New("overlay: WriteAt on a file opened with O_APPEND")}
	}
	return f.writeAt(p, off)
}

func (f *ovFile) writeAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if err := f.n.toData(f.o.base); err != nil {
		return 0, err
	}
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], p)
	f.n.modTime = time.Now()
	return len(p), nil
}

func (f *ovFile) Seek(offset int64, whence int) (int64, error) {
	if f.closed {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrClosed}
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = f.pos
	case io.SeekEnd:
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		base = fi.Size()
	default:
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	if base+offset < 0 {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	f.pos = base + offset
	return f.pos, nil
}

func (f *ovFile) Stat() (os.FileInfo, error) {
	if f.closed {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: fs.ErrClosed}
	}
	return f.n.info(f.name), nil
}

func (f *ovFile) Sync() error { return f.check("sync", false, false) }

func (f *ovFile) Truncate(size int64) error {
	if err := f.check("truncate", false, true); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.modTime = time.Now()
	if f.n.src != "" && size <= f.n.size {
		f.n.size = size // a shrink of base bytes needs no copy
		return nil
	}
	if err := f.n.toData(f.o.base); err != nil {
		return err
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *ovFile) Close() error {
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	if f.src != nil {
		return f.src.Close()
	}
	return nil
}

func (f *ovFile) Name() string { return f.name }
