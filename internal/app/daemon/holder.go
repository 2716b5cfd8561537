package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tiered/tiered/localtier/vfs"
)

// LockFile is the data dir's lock file, the one localtier.OpenLogDir flocks.
// While serve holds the dir, the file holds a Holder as JSON so that a second
// process can say who has it.
const LockFile = ".lock"

// Holder describes the process holding a data dir.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"` // "tiered serve"
	HTTP    string    `json:"http,omitempty"`
	Kafka   string    `json:"kafka,omitempty"`
	Started time.Time `json:"started"`
}

// String is e.g. "tiered serve (pid 4242, http 127.0.0.1:8080, since 2026-01-02T15:04:05Z)".
func (h Holder) String() string {
	parts := []string{fmt.Sprintf("pid %d", h.PID)}
	if h.HTTP != "" {
		parts = append(parts, "http "+h.HTTP)
	}
	if !h.Started.IsZero() {
		parts = append(parts, "since "+h.Started.UTC().Format(time.RFC3339))
	}
	cmd := h.Command
	if cmd == "" {
		cmd = "a tiered process"
	}
	return fmt.Sprintf("%s (%s)", cmd, strings.Join(parts, ", "))
}

// URL is the holder's HTTP API base URL, "" when it has none.
func (h Holder) URL() string {
	if h.HTTP == "" {
		return ""
	}
	return "http://" + h.HTTP
}

// ReadHolder returns the holder recorded in dir's lock file, or the zero
// Holder when none is recorded or the recorded process is gone (a holder
// killed with kill -9 leaves its record behind; the flock itself is released).
func ReadHolder(dir string) Holder {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if err != nil {
		return Holder{}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return Holder{}
	}
	var h Holder
	if json.Unmarshal(data, &h) != nil || h.PID <= 0 || !alive(h.PID) {
		return Holder{}
	}
	return h
}

// alive reports whether a process with pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// HeldError is the error of a data dir another process holds.
type HeldError struct {
	Dir    string
	Holder Holder // zero when unknown
}

func (e *HeldError) Error() string {
	if e.Holder.PID == 0 {
		return fmt.Sprintf("data dir %s is in use by another tiered process", e.Dir)
	}
	return fmt.Sprintf("data dir %s is in use by %s", e.Dir, e.Holder)
}

// dirLock is serve's flock on a data dir, taken before anything else touches
// the dir and released last.
type dirLock struct {
	path string
	c    io.Closer
	f    *os.File // the locked file, to record the holder in; nil if not an *os.File
}

// lockDataDir creates dir and flocks its lock file without waiting.
func lockDataDir(dir string) (*dirLock, error) {
	if err := vfs.MkdirAllSync(vfs.Default, dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	c, err := vfs.Default.Lock(path)
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, &HeldError{Dir: dir, Holder: ReadHolder(dir)}
		}
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	l := &dirLock{path: path, c: c}
	l.f, _ = c.(*os.File)
	return l, nil
}

// record writes h into the lock file (best effort: the record is only for
// messages).
func (l *dirLock) record(h Holder) {
	if l.f == nil {
		return
	}
	data, _ := json.Marshal(h)
	if l.f.Truncate(0) == nil {
		_, _ = l.f.WriteAt(append(data, '\n'), 0)
	}
}

// release clears the record and drops the flock.
func (l *dirLock) release() error {
	if l.f != nil {
		_ = l.f.Truncate(0)
	}
	return l.c.Close()
}

// heldLockFS is the filesystem serve opens its log dir through: the log
// dir's own Lock of the lock file serve already holds succeeds without a
// second flock (which would conflict with serve's own) and releases nothing.
type heldLockFS struct {
	vfs.FS
	held string
}

func (f heldLockFS) Lock(name string) (io.Closer, error) {
	if filepath.Clean(name) == filepath.Clean(f.held) {
		return nopCloser{}, nil
	}
	return f.FS.Lock(name)
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
