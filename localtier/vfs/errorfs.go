package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// ErrInjected is the error an Injector returns (wrapped) for an injected fault.
var ErrInjected = errors.New("vfs: injected error")

// OpKind names an operation an Injector may fail.
type OpKind int

// The operations ErrorFS routes through its Injector. OpCreate covers Create
// and OpenFile with O_CREATE; OpOpen covers Open and other OpenFile calls.
const (
	OpCreate OpKind = iota
	OpOpen
	OpRemove
	OpRemoveAll
	OpRename
	OpMkdirAll
	OpReadDir
	OpStat
	OpSyncDir
	OpLock
	OpFileRead
	OpFileReadAt
	OpFileWrite
	OpFileWriteAt
	OpFileSync
	OpFileTruncate
	OpFileStat
	OpFileClose
	OpChtimes
)

var opNames = [...]string{
	OpCreate:       "create",
	OpOpen:         "open",
	OpRemove:       "remove",
	OpRemoveAll:    "removeall",
	OpRename:       "rename",
	OpMkdirAll:     "mkdirall",
	OpReadDir:      "readdir",
	OpStat:         "stat",
	OpSyncDir:      "syncdir",
	OpLock:         "lock",
	OpFileRead:     "read",
	OpFileReadAt:   "readat",
	OpFileWrite:    "write",
	OpFileWriteAt:  "writeat",
	OpFileSync:     "sync",
	OpFileTruncate: "truncate",
	OpFileStat:     "fstat",
	OpFileClose:    "close",
	OpChtimes:      "chtimes",
}

func (k OpKind) String() string {
	if k >= 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Mutates reports whether the operation can change filesystem state.
func (k OpKind) Mutates() bool {
	switch k {
	case OpOpen, OpReadDir, OpStat, OpFileRead, OpFileReadAt, OpFileStat:
		return false
	}
	return true
}

// Op is one operation offered to an Injector. NewPath is set only for OpRename.
type Op struct {
	Kind    OpKind
	Path    string
	NewPath string
}

func (op Op) String() string {
	if op.Kind == OpRename {
		return fmt.Sprintf("rename %s -> %s", op.Path, op.NewPath)
	}
	return op.Kind.String() + " " + op.Path
}

// Injector decides, before each operation runs, whether it fails. A non-nil
// return is passed to the caller in place of running the operation and
// should wrap ErrInjected.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) error

// MaybeError calls f(op).
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// IndexInjector fails exactly the operation with a given zero-based index,
// counting every operation it is offered. Safe for concurrent use.
type IndexInjector struct {
	index int64
	seen  atomic.Int64
}

// OnIndex returns an Injector that fails the i-th operation (from 0) with
// ErrInjected. Run a workload with i = 0, 1, 2, ... until it succeeds; then
// Fired reports false and every operation has been failed once.
func OnIndex(i int64) *IndexInjector { return &IndexInjector{index: i} }

// MaybeError implements Injector.
func (ii *IndexInjector) MaybeError(op Op) error {
	if n := ii.seen.Add(1) - 1; n == ii.index {
		return fmt.Errorf("%w at op %d (%s)", ErrInjected, n, op)
	}
	return nil
}

// Fired reports whether the injected error has been returned.
func (ii *IndexInjector) Fired() bool { return ii.seen.Load() > ii.index }

// Ops reports how many operations have been offered so far.
func (ii *IndexInjector) Ops() int64 { return ii.seen.Load() }

// ErrorFS wraps an FS and consults an Injector before every operation on
// the FS and on files opened through it (Seek and Name excepted). A failed
// operation does not reach the inner FS, except Close, which always closes
// the inner file so no descriptor leaks, and then reports the injected error.
type ErrorFS struct {
	inner FS
	inj   Injector
}

var _ FS = (*ErrorFS)(nil)

// NewErrorFS returns inner with faults decided by inj.
func NewErrorFS(inner FS, inj Injector) *ErrorFS { return &ErrorFS{inner: inner, inj: inj} }

func (e *ErrorFS) maybe(kind OpKind, path string) error {
	return e.inj.MaybeError(Op{Kind: kind, Path: path})
}

func (e *ErrorFS) wrap(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errorFile{inner: f, inj: e.inj}, nil
}

// Create implements FS.
func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.maybe(OpCreate, name); err != nil {
		return nil, err
	}
	return e.wrap(e.inner.Create(name))
}

// Open implements FS.
func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.maybe(OpOpen, name); err != nil {
		return nil, err
	}
	return e.wrap(e.inner.Open(name))
}

// OpenFile implements FS.
func (e *ErrorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	kind := OpOpen
	if flag&os.O_CREATE != 0 {
		kind = OpCreate
	}
	if err := e.maybe(kind, name); err != nil {
		return nil, err
	}
	return e.wrap(e.inner.OpenFile(name, flag, perm))
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	if err := e.maybe(OpRemove, name); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

// RemoveAll implements FS.
func (e *ErrorFS) RemoveAll(name string) error {
	if err := e.maybe(OpRemoveAll, name); err != nil {
		return err
	}
	return e.inner.RemoveAll(name)
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.inj.MaybeError(Op{Kind: OpRename, Path: oldname, NewPath: newname}); err != nil {
		return err
	}
	return e.inner.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (e *ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.maybe(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.inner.MkdirAll(dir, perm)
}

// ReadDir implements FS.
func (e *ErrorFS) ReadDir(dir string) ([]os.DirEntry, error) {
	if err := e.maybe(OpReadDir, dir); err != nil {
		return nil, err
	}
	return e.inner.ReadDir(dir)
}

// Stat implements FS.
func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.maybe(OpStat, name); err != nil {
		return nil, err
	}
	return e.inner.Stat(name)
}

// Chtimes implements FS.
func (e *ErrorFS) Chtimes(name string, atime, mtime time.Time) error {
	if err := e.maybe(OpChtimes, name); err != nil {
		return err
	}
	return e.inner.Chtimes(name, atime, mtime)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.maybe(OpSyncDir, dir); err != nil {
		return err
	}
	return e.inner.SyncDir(dir)
}

// Lock implements FS. Releasing the lock is never failed.
func (e *ErrorFS) Lock(name string) (io.Closer, error) {
	if err := e.maybe(OpLock, name); err != nil {
		return nil, err
	}
	return e.inner.Lock(name)
}

type errorFile struct {
	inner File
	inj   Injector
}

func (f *errorFile) maybe(kind OpKind) error {
	return f.inj.MaybeError(Op{Kind: kind, Path: f.inner.Name()})
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := f.maybe(OpFileRead); err != nil {
		return 0, err
	}
	return f.inner.Read(p)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.maybe(OpFileReadAt); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.maybe(OpFileWrite); err != nil {
		return 0, err
	}
	return f.inner.Write(p)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.maybe(OpFileWriteAt); err != nil {
		return 0, err
	}
	return f.inner.WriteAt(p, off)
}

func (f *errorFile) Seek(offset int64, whence int) (int64, error) {
	return f.inner.Seek(offset, whence)
}

func (f *errorFile) Stat() (os.FileInfo, error) {
	if err := f.maybe(OpFileStat); err != nil {
		return nil, err
	}
	return f.inner.Stat()
}

func (f *errorFile) Sync() error {
	if err := f.maybe(OpFileSync); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.maybe(OpFileTruncate); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f *errorFile) Close() error {
	if err := f.maybe(OpFileClose); err != nil {
		return errors.Join(err, f.inner.Close())
	}
	return f.inner.Close()
}

func (f *errorFile) Name() string { return f.inner.Name() }
