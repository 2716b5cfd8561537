package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Default is the real operating-system filesystem.
var Default FS = osFS{}

type osFS struct{}

var _ File = (*os.File)(nil)

// wrapFile avoids returning a typed-nil *os.File inside a non-nil File.
func wrapFile(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Create(name string) (File, error) { return wrapFile(os.Create(name)) }
func (osFS) Open(name string) (File, error)   { return wrapFile(os.Open(name)) }
func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return wrapFile(os.OpenFile(name, flag, perm))
}
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }
func (osFS) Chtimes(name string, atime, mtime time.Time) error {
	return os.Chtimes(name, atime, mtime)
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	if err := d.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync dir: %w", err), d.Close())
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// Lock takes flock(LOCK_EX|LOCK_NB) on a fresh open file description, so a
// second Lock of the same file fails even within one process. The kernel
// drops the lock when the descriptor is closed or the process dies.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return f, nil
}
