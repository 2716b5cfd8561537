package vfs

import (
	"os"
	"sync"
	"syscall"
)

// DiskFullFS wraps an FS whose disk holds only so many more bytes: file
// writes (Write, WriteAt) consume a byte budget, and a write that does not
// fit writes the bytes that do and fails with syscall.ENOSPC in an
// *os.PathError, as write(2) on a full disk does. Growing a file with
// Truncate is free (sparse, as on Linux). Everything else passes through.
// SetBudget frees space, as an operator deleting files would. Safe for
// concurrent use.
type DiskFullFS struct {
	FS
	mu      sync.Mutex
	left    int64 // bytes that still fit; < 0: unlimited
	written int64
	refused int64 // writes that hit ENOSPC
}

var _ FS = (*DiskFullFS)(nil)

// NewDiskFull returns inner with budget bytes of free space (negative:
// unlimited until SetBudget).
func NewDiskFull(inner FS, budget int64) *DiskFullFS {
	return &DiskFullFS{FS: inner, left: budget}
}

// SetBudget sets the free space to n bytes from now on (negative: unlimited).
func (d *DiskFullFS) SetBudget(n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.left = n
}

// Written reports the bytes written through d.
func (d *DiskFullFS) Written() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.written
}

// Refused reports how many writes failed with ENOSPC.
func (d *DiskFullFS) Refused() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refused
}

// take reserves up to n bytes and reports how many fit.
func (d *DiskFullFS) take(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.left >= 0 && int64(n) > d.left {
		n = int(d.left)
		d.refused++
	}
	if d.left >= 0 {
		d.left -= int64(n)
	}
	d.written += int64(n)
	return n
}

func (d *DiskFullFS) wrap(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &fullFile{File: f, d: d}, nil
}

// Create implements FS.
func (d *DiskFullFS) Create(name string) (File, error) { return d.wrap(d.FS.Create(name)) }

// Open implements FS.
func (d *DiskFullFS) Open(name string) (File, error) { return d.wrap(d.FS.Open(name)) }

// OpenFile implements FS.
func (d *DiskFullFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return d.wrap(d.FS.OpenFile(name, flag, perm))
}

type fullFile struct {
	File
	d *DiskFullFS
}

func (f *fullFile) enospc(op string) error {
	return &os.PathError{Op: op, Path: f.Name(), Err: syscall.ENOSPC}
}

func (f *fullFile) Write(p []byte) (int, error) {
	fit := f.d.take(len(p))
	n, err := f.File.Write(p[:fit])
	if err == nil && fit < len(p) {
		err = f.enospc("write")
	}
	return n, err
}

func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	fit := f.d.take(len(p))
	n, err := f.File.WriteAt(p[:fit], off)
	if err == nil && fit < len(p) {
		err = f.enospc("write")
	}
	return n, err
}
