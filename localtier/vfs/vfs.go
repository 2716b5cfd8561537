// Package vfs is the filesystem seam under the local tier. Every file the log
// engine touches goes through an FS so tests can inject faults (see errorfs.go)
// and simulate crashes that lose unsynced data (see MemFS.CrashClone).
package vfs

import (
	"errors"
	"io"
	"os"
	"time"
)

// ErrLocked is returned (wrapped, naming the file) by FS.Lock when another
// holder — another process, or another Lock call in this one — has the lock.
var ErrLocked = errors.New("vfs: file already locked")

// File is an open file. ReadAt/WriteAt are positional; Write appends at the
// current offset. Sync makes the file's written data durable.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	Stat() (os.FileInfo, error)
	Sync() error
	Truncate(size int64) error
	Name() string
}

// FS is the set of filesystem operations the local tier needs.
type FS interface {
	// Create creates or truncates the named file for reading and writing.
	Create(name string) (File, error)
	// Open opens the named file read-only.
	Open(name string) (File, error)
	// OpenFile opens with explicit flags (os.O_RDWR, os.O_CREATE, ...).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists the names in dir, sorted.
	ReadDir(dir string) ([]os.DirEntry, error)
	Stat(name string) (os.FileInfo, error)
	// Chtimes sets the named file's access and modification times.
	Chtimes(name string, atime, mtime time.Time) error
	// SyncDir makes directory entries (creates, renames, removes) in dir durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on the named file (flock(2) on
	// the OS filesystem), creating it if needed. Release with the returned closer.
	Lock(name string) (io.Closer, error)
}
