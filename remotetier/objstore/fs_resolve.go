//go:build unix

package objstore

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Resolving keys below the bucket root
//
// Every path the filesystem backend opens, creates, renames into or unlinks
// is resolved relative to a descriptor of the bucket directory, and no
// component may be a symbolic link: a key therefore never reaches a file
// outside the bucket, whatever links someone planted inside it (a ".log"
// linked to /etc/shadow is refused with ErrSymlink naming the key). On
// Linux 5.6 and later this is one openat2(2) call with RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS; elsewhere, and where openat2 is unavailable (ENOSYS:
// older kernels, some sandboxes), the key is walked one component at a time
// with openat(2) and O_NOFOLLOW, which refuses the same links. Keys cannot
// hold "..", so the walk cannot climb out either. (The walk opens each
// directory for reading, so it needs read permission where openat2 needs
// only search permission.)
//
// List walks the tree with filepath.WalkDir, which follows no link either;
// only the directory it starts from (the prefix's) is checked here first,
// so a link swapped in between the check and the walk could be followed
// for that one List. Reads never are.
//
// Objects are opened with O_NONBLOCK and checked with fstat before any read,
// so a FIFO, device or socket in the bucket is ErrNotRegular at once instead
// of a read that blocks forever.

// openat2Usable is cleared the first time openat2 answers ENOSYS, and by
// tests that exercise the portable walk on Linux.
var openat2Usable atomic.Bool

func init() { openat2Usable.Store(haveOpenat2) }

const (
	// objectOpenFlags open an object for reading without blocking on a
	// FIFO or making a terminal the controlling one.
	objectOpenFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
	dirOpenFlags    = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_DIRECTORY
)

// errEscapes explains EXDEV from RESOLVE_BENEATH.
var errEscapes = errors.New("path resolves outside the bucket directory")

// openRoot opens the bucket directory itself (which may be reached through
// symbolic links: the operator named it).
func openRoot(root string) (int, error) {
	return retryEINTR(func() (int, error) { return unix.Open(root, dirOpenFlags, 0) })
}

// openBeneath opens rel ('/'-separated, validated: no "", "." or ".."
// components) below the directory dirfd with flags, following no symbolic
// link.
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	if openat2Usable.Load() {
		fd, err := openat2Beneath(dirfd, rel, flags)
		switch err {
		case unix.ENOSYS: // kernel before 5.6
			openat2Usable.Store(false)
		case unix.EPERM:
			// Some seccomp profiles refuse unknown system calls with
			// EPERM; opening for reading is otherwise never EPERM, and
			// if it really is, the walk says so too.
		default:
			return fd, err
		}
	}
	return walkBeneath(dirfd, rel, flags)
}

// walkBeneath is openBeneath with openat(2) one component at a time.
func walkBeneath(dirfd int, rel string, flags int) (int, error) {
	cur := dirfd
	closeCur := func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}
	for {
		comp, rest, more := strings.Cut(rel, "/")
		fl := flags | unix.O_NOFOLLOW
		if more {
			fl = dirOpenFlags | unix.O_NOFOLLOW
		}
		fd, err := retryEINTR(func() (int, error) { return unix.Openat(cur, comp, fl, 0) })
		if err != nil {
			// O_NOFOLLOW on a link is ELOOP on Linux and macOS, EMLINK on
			// FreeBSD; O_DIRECTORY on a link may say ENOTDIR. Ask lstat.
			var st unix.Stat_t
			if unix.Fstatat(cur, comp, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
			closeCur()
			return -1, err
		}
		closeCur()
		cur = fd
		if !more {
			return cur, nil
		}
		rel = rest
	}
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		fd, err := f()
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// openObjectFile opens the object at rel below dirfd for reading: a regular
// file, or an error (ErrNotFound for a missing key or a directory, as on S3
// where "a" does not exist when only "a/b" does; ErrSymlink; ErrNotRegular).
func openObjectFile(dirfd int, rel, name string) (*os.File, os.FileInfo, error) {
	fd, err := openBeneath(dirfd, rel, objectOpenFlags)
	if err != nil {
		return nil, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		unix.Close(fd)
		return nil, nil, unix.ENOENT
	default:
		unix.Close(fd)
		return nil, nil, errNotRegular(uint32(st.Mode))
	}
	// Reads of a regular file never block; give os.File a plain
	// descriptor rather than one it would try to put in the poller.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// notRegularError names the kind of file that is not an object.
type notRegularError struct{ kind string }

func (e *notRegularError) Error() string { return "it is a " + e.kind }

func errNotRegular(mode uint32) error {
	kind := "special file"
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		kind = "FIFO"
	case unix.S_IFCHR:
		kind = "character device"
	case unix.S_IFBLK:
		kind = "block device"
	case unix.S_IFSOCK:
		kind = "socket"
	}
	return &notRegularError{kind: kind}
}

// classify maps a resolution or open error to the backend's sentinel
// (nil when none applies).
func classify(err error) error {
	var nr *notRegularError
	switch {
	case errors.As(err, &nr), errors.Is(err, unix.ENXIO):
		return ErrNotRegular
	case errors.Is(err, unix.ELOOP):
		return ErrSymlink
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return ErrNotFound
	}
	return nil
}

// fsOpError wraps a filesystem error of op on key with its sentinel.
func fsOpError(op, key string, err error) error {
	switch kind := classify(err); kind {
	case ErrNotFound:
		return &opError{op: op, key: key, kind: ErrNotFound}
	case ErrSymlink:
		return &opError{op: op, key: key, kind: ErrSymlink}
	case nil:
		if errors.Is(err, unix.EXDEV) {
			err = errEscapes
		}
		return &opError{op: op, key: key, err: err}
	default:
		return &opError{op: op, key: key, kind: kind, err: err}
	}
}

// openDir opens the directory rel below rootfd ("" is rootfd itself, as a
// new descriptor).
func openDir(rootfd int, rel string) (int, error) {
	if rel == "" {
		return unix.FcntlInt(uintptr(rootfd), unix.F_DUPFD_CLOEXEC, 0)
	}
	return openBeneath(rootfd, rel, dirOpenFlags)
}

// mkdirBeneath opens the directory rel below rootfd, creating it and any
// missing parents (fsyncing each new entry's directory so it survives a
// crash). A component that is a file fails with ENOTDIR, a link with
// ELOOP.
func mkdirBeneath(rootfd int, rel string) (int, error) {
	fd, err := openDir(rootfd, rel)
	if err != unix.ENOENT {
		return fd, err
	}
	parent, base := splitKey(rel)
	pfd, err := mkdirBeneath(rootfd, parent)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, base, 0o755); err != nil && err != unix.EEXIST {
		return -1, err
	}
	if err := unix.Fsync(pfd); err != nil {
		return -1, err
	}
	return openBeneath(pfd, base, dirOpenFlags)
}

// removeEmptyDirs removes rel and its parents below rootfd while they are
// empty.
func removeEmptyDirs(rootfd int, rel string) {
	for rel != "" {
		parent, base := splitKey(rel)
		pfd, err := openDir(rootfd, parent)
		if err != nil {
			return
		}
		err = unix.Unlinkat(pfd, base, unix.AT_REMOVEDIR)
		unix.Close(pfd)
		if err != nil {
			return
		}
		rel = parent
	}
}
