package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tiered/tiered/internal/app/daemon"
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
	return r.openDataDirMode(dir, mustExist, false, wait)
}

// openDataDirReadOnly is openDataDir for commands that only read (consume,
// topic describe): recovery happens in memory and no file of the dir
// changes, the lock file aside.
func (r *Runner) openDataDirReadOnly(dir string, wait time.Duration) (d *localtier.LogDir, locked bool, err error) {
	return r.openDataDirMode(dir, true, true, wait)
}

func (r *Runner) openDataDirMode(dir string, mustExist, readOnly bool, wait time.Duration) (d *localtier.LogDir, locked bool, err error) {
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
	d, rep, err := localtier.OpenLogDir(fsys, dir, localtier.LogDirOptions{Now: r.Now, ReadOnly: readOnly})
	if err != nil {
		return nil, fsys.locked, err
	}
	if rc := rep.Recovery; rc.SegmentsRecovered > 0 || rc.BytesTruncated > 0 || rc.SegmentsDeleted > 0 || rc.SwapsCompleted > 0 {
		how := "recovered data dir"
		if readOnly {
			how = "recovered data dir in memory (files left as they are)"
		}
		fmt.Fprintf(r.Stderr, "tiered: %s %s: %d segments recovered, %d bytes truncated, %d segments deleted, %d swaps completed",
			how, dir, rc.SegmentsRecovered, rc.BytesTruncated, rc.SegmentsDeleted, rc.SwapsCompleted)
		if rc.SegmentsRepairedAlone > 0 {
			fmt.Fprintf(r.Stderr, "; %d segments lost their damaged tail alone (%d offsets skipped, later segments kept)", rc.SegmentsRepairedAlone, rc.OffsetsLost)
		}
		fmt.Fprintln(r.Stderr)
	}
	if n := rep.Recovery.LogStartOffsetsClamped; n > 0 {
		fmt.Fprintf(r.Stderr, "tiered: warning: data dir %s: the log start offset checkpoint of %d partitions lies beyond their log end; "+
			"their log start offset was clamped to the log end (see %s)\n", dir, n, filepath.Join(dir, localtier.LogStartOffsetCheckpoint))
	}
	for _, topic := range rep.CreatesRolledBack {
		if readOnly {
			fmt.Fprintf(r.Stderr, "tiered: data dir %s: skipped topic %s, whose create did not finish (the next writing open removes it)\n", dir, topic)
			continue
		}
		fmt.Fprintf(r.Stderr, "tiered: data dir %s: removed the partitions of topic %s, whose create did not finish\n", dir, topic)
	}
	return d, false, nil
}

// dataDirOrServer refuses --data-dir together with --server.
func dataDirOrServer(set map[string]bool, server string) error {
	if set["data-dir"] && set["server"] {
		return usagef("--data-dir and --server cannot be used together")
	}
	if set["server"] && server == "" {
		return usagef("--server needs a URL (e.g. http://127.0.0.1:8080)")
	}
	return nil
}

// openDataDirForWrite is openDataDir for commands that have a --server
// alternative: when a serve process holds the dir, the error says so, names
// it, and points at --server.
func (r *Runner) openDataDirForWrite(dir string, mustExist bool) (*localtier.LogDir, error) {
	return r.openDataDirAs(dir, mustExist, viaServer)
}

// How a command can do its work while serve holds the data dir: the flag
// that reaches serve's HTTP API instead, or, for the commands serve runs
// itself (compaction, retention, uploads), nothing but stopping it.
const (
	viaServer = "--server"
	viaFetch  = "--fetch"
	viaNone   = ""
)

// openDataDirAs is openDataDir waiting the usual time; when another process
// holds the dir, the error names the holder (pid, HTTP address, since when)
// and says what to do instead: via is how the command reaches a serve
// (viaServer, viaFetch) or viaNone.
func (r *Runner) openDataDirAs(dir string, mustExist bool, via string) (*localtier.LogDir, error) {
	d, locked, err := r.openDataDir(dir, mustExist, r.lockWait())
	return d, withHolderHint(dir, locked, err, via)
}

// openDataDirForRead is openDataDirReadOnly with openDataDirAs's hint at
// the holder.
func (r *Runner) openDataDirForRead(dir string, via string) (*localtier.LogDir, error) {
	d, locked, err := r.openDataDirReadOnly(dir, r.lockWait())
	return d, withHolderHint(dir, locked, err, via)
}

// withHolderHint adds who holds the data dir and what to do instead to err
// when locked.
func withHolderHint(dir string, locked bool, err error, via string) error {
	if err != nil && locked {
		return fmt.Errorf("%w; %s", err, holderHint(daemon.ReadHolder(dir), via))
	}
	return err
}

// holderHint says who holds a data dir and how to reach it: via is the flag
// that takes serve's URL instead of --data-dir, or viaNone.
func holderHint(h daemon.Holder, via string) string {
	switch {
	case via != viaNone && h.HTTP != "":
		return fmt.Sprintf("it is held by %s; use %s %s instead of --data-dir", h, via, h.URL())
	case via != viaNone && h.PID == 0:
		return fmt.Sprintf("if it is 'tiered serve', use %s URL to reach it over HTTP", via)
	case via != viaNone:
		return fmt.Sprintf("it is held by %s; if that is 'tiered serve', use %s URL to reach it over HTTP", h, via)
	case h.HTTP != "":
		return fmt.Sprintf("it is held by %s, which does this work itself (its HTTP API: %s); stop it to run this command on the dir", h, h.URL())
	case h.PID == 0:
		return "'tiered serve' does this work itself; stop the process holding the dir to run this command on it"
	default:
		return fmt.Sprintf("it is held by %s; stop it to run this command on the dir", h)
	}
}
