package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that is safe for concurrent use and strict about
// durability: file data becomes durable only by File.Sync, and directory
// entries (creates, renames, removes) only by SyncDir of the parent (or Sync
// of a File opened on the directory). CrashClone returns the durable state.
//
// Paths are slash-separated and all resolve from one root: "/a/b", "a/b" and
// "a/./b" name the same file.
type MemFS struct {
	mu    sync.Mutex // guards every node, handle and the lock table
	root  *memNode
	locks map[*memNode]bool
}

// memNode is an inode: a directory entry points at one, and it survives
// unlinking for as long as handles or durable entries refer to it.
type memNode struct {
	isDir   bool
	perm    os.FileMode
	modTime time.Time

	data, synced []byte // files: live and last-synced contents

	children, syncedChildren map[string]*memNode // dirs: live and last-synced entries
}

func newDirNode(perm os.FileMode) *memNode {
	return &memNode{
		isDir:          true,
		perm:           perm.Perm(),
		modTime:        time.Now(),
		children:       map[string]*memNode{},
		syncedChildren: map[string]*memNode{},
	}
}

// NewMem returns an empty in-memory filesystem holding only the root directory.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode(0o755), locks: map[*memNode]bool{}}
}

var _ FS = (*MemFS)(nil)

// CrashClone returns a new MemFS holding only what would survive a power
// loss now: each file's contents as of its last Sync and each directory's
// entries as of its last SyncDir. Locks are not carried over.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{} // keeps shared inodes shared, and ends cycles
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := seen[n]; ok {
			return c
		}
		c := &memNode{isDir: n.isDir, perm: n.perm, modTime: n.modTime}
		seen[n] = c
		if n.isDir {
			c.children = make(map[string]*memNode, len(n.syncedChildren))
			for name, child := range n.syncedChildren {
				c.children[name] = clone(child)
			}
			c.syncedChildren = maps.Clone(c.children)
		} else {
			c.data = bytes.Clone(n.synced)
			c.synced = bytes.Clone(n.synced)
		}
		return c
	}
	return &MemFS{root: clone(m.root), locks: map[*memNode]bool{}}
}

func splitPath(name string) []string {
	c := path.Clean("/" + filepath.ToSlash(name))
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

func pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

// walk resolves parts to a node. m.mu must be held.
func (m *MemFS) walk(op, name string, parts []string) (*memNode, error) {
	n := m.root
	for _, p := range parts {
		if !n.isDir {
			return nil, pathErr(op, name, syscall.ENOTDIR)
		}
		c, ok := n.children[p]
		if !ok {
			return nil, pathErr(op, name, syscall.ENOENT)
		}
		n = c
	}
	return n, nil
}

// walkParent resolves the directory holding name and name's last element.
// m.mu must be held.
func (m *MemFS) walkParent(op, name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", pathErr(op, name, syscall.EINVAL)
	}
	dir, err := m.walk(op, name, parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !dir.isDir {
		return nil, "", pathErr(op, name, syscall.ENOTDIR)
	}
	return dir, parts[len(parts)-1], nil
}

// Create creates or truncates name for reading and writing.
func (m *MemFS) Create(name string) (File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens name read-only.
func (m *MemFS) Open(name string) (File, error) {
	return m.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile honours O_RDONLY/O_WRONLY/O_RDWR, O_CREATE, O_EXCL, O_TRUNC and O_APPEND.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.openNode(name, flag, perm)
	if err != nil {
		return nil, err
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	return &memFile{
		fs:     m,
		n:      n,
		name:   name,
		read:   acc != os.O_WRONLY,
		write:  acc != os.O_RDONLY,
		append: flag&os.O_APPEND != 0,
	}, nil
}

// openNode finds or creates the node OpenFile refers to. m.mu must be held.
func (m *MemFS) openNode(name string, flag int, perm os.FileMode) (*memNode, error) {
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	parts := splitPath(name)
	var n *memNode
	if len(parts) == 0 {
		n = m.root
	} else {
		dir, base, err := m.walkParent("open", name)
		if err != nil {
			return nil, err
		}
		n = dir.children[base]
		switch {
		case n == nil && flag&os.O_CREATE == 0:
			return nil, pathErr("open", name, syscall.ENOENT)
		case n == nil:
			n = &memNode{perm: perm.Perm(), modTime: time.Now()}
			dir.children[base] = n
			dir.modTime = n.modTime
			return n, nil
		case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
			return nil, pathErr("open", name, syscall.EEXIST)
		}
	}
	if n.isDir && acc != os.O_RDONLY {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	if flag&os.O_TRUNC != 0 && acc != os.O_RDONLY && len(n.data) > 0 {
		n.data = nil
		n.modTime = time.Now()
	}
	return n, nil
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.walkParent("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, syscall.ENOENT)
	}
	if n.isDir && len(n.children) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.children, base)
	dir.modTime = time.Now()
	return nil
}

// RemoveAll removes name and everything below it; a missing name is not an error.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(splitPath(name)) == 0 {
		clear(m.root.children)
		return nil
	}
	dir, base, err := m.walkParent("removeall", name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := dir.children[base]; ok {
		delete(dir.children, base)
		dir.modTime = time.Now()
	}
	return nil
}

// Rename moves oldname to newname, replacing a file or an empty directory there.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	lerr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	oldParts, newParts := splitPath(oldname), splitPath(newname)
	if len(oldParts) == 0 || len(newParts) == 0 {
		return lerr(syscall.EBUSY)
	}
	odir, obase, err := m.walkParent("rename", oldname)
	if err != nil {
		return lerr(errors.Unwrap(err))
	}
	src, ok := odir.children[obase]
	if !ok {
		return lerr(syscall.ENOENT)
	}
	ndir, nbase, err := m.walkParent("rename", newname)
	if err != nil {
		return lerr(errors.Unwrap(err))
	}
	if slices.Equal(oldParts, newParts) {
		return nil
	}
	if src.isDir && len(newParts) > len(oldParts) && slices.Equal(newParts[:len(oldParts)], oldParts) {
		return lerr(syscall.EINVAL) // into its own subtree
	}
	if dst, ok := ndir.children[nbase]; ok {
		switch {
		case src.isDir && !dst.isDir:
			return lerr(syscall.ENOTDIR)
		case !src.isDir && dst.isDir:
			return lerr(syscall.EISDIR)
		case dst.isDir && len(dst.children) > 0:
			return lerr(syscall.ENOTEMPTY)
		}
	}
	delete(odir.children, obase)
	ndir.children[nbase] = src
	now := time.Now()
	odir.modTime, ndir.modTime = now, now
	return nil
}

// MkdirAll creates dir and any missing parents.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, p := range splitPath(dir) {
		c, ok := n.children[p]
		if !ok {
			c = newDirNode(perm)
			n.children[p] = c
			n.modTime = c.modTime
		}
		if !c.isDir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = c
	}
	return nil
}

// ReadDir lists dir sorted by name.
func (m *MemFS) ReadDir(dir string) ([]os.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := splitPath(dir)
	n, err := m.walk("readdir", dir, parts)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, pathErr("readdir", dir, syscall.ENOTDIR)
	}
	names := slices.Sorted(maps.Keys(n.children))
	out := make([]os.DirEntry, len(names))
	for i, name := range names {
		out[i] = iofs.FileInfoToDirEntry(n.children[name].info(name))
	}
	return out, nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := splitPath(name)
	n, err := m.walk("stat", name, parts)
	if err != nil {
		return nil, err
	}
	return n.info(baseName(parts)), nil
}

// Chtimes sets name's modification time (MemFS keeps no access time).
func (m *MemFS) Chtimes(name string, _, mtime time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk("chtimes", name, splitPath(name))
	if err != nil {
		return err
	}
	n.modTime = mtime
	return nil
}

func baseName(parts []string) string {
	if len(parts) == 0 {
		return "/"
	}
	return parts[len(parts)-1]
}

// SyncDir makes dir's current entries durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk("sync", dir, splitPath(dir))
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	if !n.isDir {
		return fmt.Errorf("sync dir: %w", pathErr("sync", dir, syscall.ENOTDIR))
	}
	n.syncedChildren = maps.Clone(n.children)
	return nil
}

// Lock creates name if needed and takes an exclusive lock on its inode, as
// flock(2) would; a second Lock fails with ErrLocked until the first is closed.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.openNode(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if m.locks[n] {
		return nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
	}
	m.locks[n] = true
	return &memLock{fs: m, n: n, name: name}, nil
}

type memLock struct {
	fs     *MemFS
	n      *memNode
	name   string
	closed bool
}

func (l *memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if l.closed {
		return pathErr("close", l.name, os.ErrClosed)
	}
	l.closed = true
	delete(l.fs.locks, l.n)
	return nil
}

func (n *memNode) info(name string) os.FileInfo {
	fi := &memFileInfo{name: name, size: int64(len(n.data)), mode: n.perm, modTime: n.modTime}
	if n.isDir {
		fi.mode |= os.ModeDir
		fi.size = 0
	}
	return fi
}

type memFileInfo struct {
	name    string
	size    int64
	mode    os.FileMode
	modTime time.Time
}

func (fi *memFileInfo) Name() string       { return fi.name }
func (fi *memFileInfo) Size() int64        { return fi.size }
func (fi *memFileInfo) Mode() os.FileMode  { return fi.mode }
func (fi *memFileInfo) ModTime() time.Time { return fi.modTime }
func (fi *memFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *memFileInfo) Sys() any           { return nil }

// memFile is an open handle; its offset and flags are its own, the node is shared.
type memFile struct {
	fs                  *MemFS
	n                   *memNode
	name                string
	pos                 int64
	read, write, append bool
	closed              bool
}

// check validates the handle for op. fs.mu must be held.
func (f *memFile) check(op string, needRead, needWrite bool) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, os.ErrClosed)
	case needRead && !f.read, needWrite && !f.write:
		return pathErr(op, f.name, syscall.EBADF)
	case (needRead || needWrite) && f.n.isDir:
		return pathErr(op, f.name, syscall.EISDIR)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if f.pos >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, errors.New("negative offset"))
	}
	if off >= int64(len(f.n.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.append {
		f.pos = int64(len(f.n.data))
	}
	f.writeAt(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.append {
		return 0, errors.New("vfs: invalid use of WriteAt on file opened with O_APPEND")
	}
	if off < 0 {
		return 0, pathErr("writeat", f.name, errors.New("negative offset"))
	}
	f.writeAt(p, off)
	return len(p), nil
}

// writeAt writes p at off, zero-filling any gap. fs.mu must be held.
func (f *memFile) writeAt(p []byte, off int64) {
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.resize(end)
	}
	copy(f.n.data[off:], p)
	f.n.modTime = time.Now()
}

// resize sets the file length, zero-filling when it grows. The synced copy
// never aliases data, so in-place changes cannot leak into the durable state.
func (n *memNode) resize(size int64) {
	old := int64(len(n.data))
	if size <= old {
		n.data = n.data[:size]
		return
	}
	n.data = slices.Grow(n.data, int(size-old))[:size]
	clear(n.data[old:])
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("seek", false, false); err != nil {
		return 0, err
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = f.pos + offset
	case io.SeekEnd:
		abs = int64(len(f.n.data)) + offset
	default:
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	if abs < 0 {
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	f.pos = abs
	return abs, nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false, false); err != nil {
		return nil, err
	}
	return f.n.info(baseName(splitPath(f.name))), nil
}

// Sync makes the file's data durable; on a directory handle it makes the
// directory's entries durable, as fsync of a directory does.
func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false, false); err != nil {
		return err
	}
	if f.n.isDir {
		f.n.syncedChildren = maps.Clone(f.n.children)
	} else {
		f.n.synced = bytes.Clone(f.n.data)
	}
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", false, true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.n.resize(size)
	f.n.modTime = time.Now()
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Name() string { return f.name }
