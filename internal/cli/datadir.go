package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
)

// lockWaitFS retries Lock while another process holds the file, for up to
// wait, and remembers whether the last failure was that the lock was held.
type lockWaitFS struct {
	vfs.FS
	wait   time.Duration
	locked bool
}

func (f *lockWaitFS) Lock(name string) (io.Closer, error) {
	deadline := time.Now().Add(f.wait)
	for {
		c, err := f.FS.Lock(name)
		f.locked = errors.Is(err, vfs.ErrLocked)
		if !f.locked || !time.Now().Before(deadline) {
			return c, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *Runner) lockWait() time.Duration {
	if r.LockWait > 0 {
		return r.LockWait
	}
	return 2 * time.Second
}

// openDataDir locks and loads dir. Commands that only read pass
// mustExist so that a mistyped --data-dir is an error, not a new empty dir.
// locked reports that the failure was another process holding the dir.
func (r *Runner) openDataDir(dir string, mustExist bool, wait time.Duration) (d *localtier.LogDir, locked bool, err error) {
	if mustExist {
		st, err := os.Stat(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, fmt.Errorf("data dir %s does not exist", dir)
		}
		if err != nil {
			return nil, false, fmt.Errorf("data dir: %w", err)
		}
		if !st.IsDir() {
			return nil, false, fmt.Errorf("data dir %s is not a directory", dir)
		}
	}
	fsys := &lockWaitFS{FS: vfs.Default, wait: wait}
	d, rep, err := localtier.OpenLogDir(fsys, dir, localtier.LogDirOptions{Now: r.Now})
	if err != nil {
		return nil, fsys.locked, err
	}
	if rc := rep.Recovery; rc.SegmentsRecovered > 0 || rc.BytesTruncated > 0 || rc.SegmentsDeleted > 0 || rc.SwapsCompleted > 0 {
		fmt.Fprintf(r.Stderr, "tiered: recovered data dir %s: %d segments recovered, %d bytes truncated, %d segments deleted, %d swaps completed\n",
			dir, rc.SegmentsRecovered, rc.BytesTruncated, rc.SegmentsDeleted, rc.SwapsCompleted)
	}
	return d, false, nil
}
