package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that, after a crash at any
// point, path holds either its old contents or data, never a mix: it writes
// path+".tmp", syncs and closes it, renames it over path, then syncs the
// parent directory. On failure the temporary file is removed.
func WriteFileAtomic(fs FS, path string, data []byte) (err error) {
	tmp := path + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	defer func() {
		if err == nil {
			return
		}
		if f != nil {
			_ = f.Close() // the write error is the one worth reporting
		}
		if rerr := fs.Remove(tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", tmp, rerr))
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return fmt.Errorf("close %s: %w", tmp, cerr)
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fs.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("sync dir of %s: %w", path, err)
	}
	return nil
}

// MkdirAllSync is MkdirAll followed by a SyncDir of the parent of every
// directory it created, so the new directories survive a crash.
func MkdirAllSync(fs FS, dir string, perm os.FileMode) error {
	var created []string
	for d := filepath.Clean(dir); ; {
		_, err := fs.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		created = append(created, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := fs.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	for _, d := range created {
		if err := fs.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
	}
	return nil
}
