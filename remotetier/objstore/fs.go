package objstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Filesystem layout and guarantees
//
// An object with key "a/b/c" is the plain file <root>/a/b/c holding exactly
// the object's bytes, so operators can read objects with ordinary tools.
// Two names at the root are reserved and refused as first key component:
//
//	<root>/.tiered-tmp/   files being written (never visible as objects)
//	<root>/.tiered-lock   flock(2) file serialising commits
//
// Put streams into a temporary file in .tiered-tmp, hashing as it goes,
// fsyncs it, then — holding the commit lock (a process-wide mutex per root
// plus flock on .tiered-lock, so other processes are excluded too) — checks
// the condition, renames the file into place and fsyncs the directory. A
// crash or a failing reader therefore leaves either the old object or the
// new one, never a partial file; stale temporary files are removed by a
// later read-write open after an hour.
//
// Readers need no lock (they only ever see renamed, complete files), so a
// bucket opened with NewFilesystemReadOnly creates, locks and removes
// nothing: read permission on the tree is enough.
//
// No key resolves outside the root and no symbolic link is followed, on
// reads and writes alike; only regular files are objects (fs_resolve.go).
//
// The ETag is a function of the content (SHA-256 prefix, the same as the
// memory backend's), so it cannot disagree with the data it describes. Put
// stores it in the user.tiered.etag extended attribute of the file before
// the rename, making Attributes and IfMatch O(1); where the filesystem has
// no user xattrs it is recomputed from the content when needed. Objects are
// immutable once renamed into place: editing one in place by hand makes its
// cached ETag wrong.
//
// Because keys map to paths, an object "a" and an object "a/b" cannot both
// exist on this backend; such a Put fails with a clear error.

const (
	fsTmpDir    = ".tiered-tmp"
	fsLockFile  = ".tiered-lock"
	fsXattrName = "user.tiered.etag"
	fsStaleTmp  = time.Hour
)

// Filesystem is the local-directory backend (file:///dir).
type Filesystem struct {
	root     string
	tmp      string
	readOnly bool
	mu       *sync.Mutex // shared by every Filesystem on the same root in this process
	lockFd   *os.File    // this bucket's handle on .tiered-lock; nil when read-only
}

var fsRootLocks = struct {
	sync.Mutex
	m map[string]*sync.Mutex
}{m: map[string]*sync.Mutex{}}

// NewFilesystem opens the directory dir as a bucket for reading and
// writing: it creates .tiered-tmp and .tiered-lock if missing and removes
// temporary files older than an hour. The directory must exist: like a
// missing S3 bucket, a missing directory is an error rather than silently
// created (callers that own a default directory create it).
func NewFilesystem(dir string) (*Filesystem, error) {
	root, err := fsRoot(dir)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(root, fsTmpDir)
	if err := os.Mkdir(tmp, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open filesystem bucket: create %s: %w", tmp, err)
	}
	if st, err := os.Lstat(tmp); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("open filesystem bucket: %s is not a directory (a symbolic link?)", tmp)
	}
	lockFd, err := os.OpenFile(filepath.Join(root, fsLockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open filesystem bucket: %w", err)
	}
	fsRootLocks.Lock()
	mu, ok := fsRootLocks.m[root]
	if !ok {
		mu = new(sync.Mutex)
		fsRootLocks.m[root] = mu
	}
	fsRootLocks.Unlock()
	b := &Filesystem{root: root, tmp: tmp, mu: mu, lockFd: lockFd}
	b.removeStaleTemps()
	return b, nil
}

// NewFilesystemReadOnly opens the directory dir as a bucket for reading
// only: it creates, locks and removes nothing, so read permission on the
// directory tree is all a reader needs (a read-only mount, another user's
// bucket). Put and Delete fail with ErrReadOnly. Readers see only renamed,
// complete objects, so they need no lock.
func NewFilesystemReadOnly(dir string) (*Filesystem, error) {
	root, err := fsRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Filesystem{root: root, readOnly: true}, nil
}

// fsRoot resolves and checks the bucket directory.
func fsRoot(dir string) (string, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("open filesystem bucket %s: %w", dir, err)
	}
	st, err := os.Stat(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("open filesystem bucket: directory %s does not exist: %w", root, ErrBucketNotFound)
		}
		return "", fmt.Errorf("open filesystem bucket: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("open filesystem bucket: %s is not a directory", root)
	}
	return root, nil
}

// Root returns the bucket's directory.
func (b *Filesystem) Root() string { return b.root }

// ReadOnly reports whether the bucket was opened with NewFilesystemReadOnly.
func (b *Filesystem) ReadOnly() bool { return b.readOnly }

func (b *Filesystem) removeStaleTemps() {
	entries, err := os.ReadDir(b.tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > fsStaleTmp {
			os.Remove(filepath.Join(b.tmp, e.Name()))
		}
	}
}

// checkKey validates key for this backend (the file name it maps to is
// key itself, resolved below the root by openBeneath).
func (b *Filesystem) checkKey(op, key string) error {
	err := validateKey(key)
	if err == nil {
		first, _, _ := strings.Cut(key, "/")
		switch {
		case first == fsTmpDir || first == fsLockFile:
			err = fmt.Errorf("%q is reserved by the filesystem backend", first)
		default:
			for comp := range strings.SplitSeq(key, "/") {
				if len(comp) > 255 {
					err = errors.New("path component longer than 255 bytes (filesystem backend)")
					break
				}
			}
		}
	}
	if err != nil {
		return &opError{op: op, key: key, kind: ErrInvalidKey, err: err}
	}
	return nil
}

// withRoot runs fn with a descriptor of the bucket directory, opened for
// this call so that a directory replaced under the same name is seen.
func (b *Filesystem) withRoot(op, key string, fn func(rootfd int) error) error {
	rootfd, err := openRoot(b.root)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return &opError{op: op, key: key, err: fmt.Errorf("bucket directory %s vanished: %w", b.root, ErrBucketNotFound)}
		}
		return &opError{op: op, key: key, err: fmt.Errorf("open bucket directory: %w", err)}
	}
	defer syscall.Close(rootfd)
	return fn(rootfd)
}

func (b *Filesystem) readOnlyErr(op, key string) error {
	return &opError{op: op, key: key, kind: ErrReadOnly, err: fmt.Errorf("filesystem bucket %s", b.root)}
}

// lock takes the commit lock: the in-process mutex, then flock.
func (b *Filesystem) lock() (unlock func(), err error) {
	b.mu.Lock()
	if err := flock(b.lockFd); err != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("lock bucket %s: %w", b.root, err)
	}
	return func() {
		funlock(b.lockFd)
		b.mu.Unlock()
	}, nil
}

// openObject opens the object's file, resolved below the root without
// following links: a missing file or a directory is ErrNotFound, a link
// ErrSymlink, a FIFO, device or socket ErrNotRegular (at once: the open
// does not block).
func (b *Filesystem) openObject(op, key string) (*os.File, os.FileInfo, error) {
	if err := b.checkKey(op, key); err != nil {
		return nil, nil, err
	}
	var f *os.File
	var st os.FileInfo
	err := b.withRoot(op, key, func(rootfd int) error {
		var err error
		f, st, err = openObjectFile(rootfd, key, filepath.Join(b.root, filepath.FromSlash(key)))
		if err != nil {
			return fsOpError(op, key, err)
		}
		return nil
	})
	return f, st, err
}

// fileETag returns the ETag of an open object file: from its xattr when
// present and well-formed, else by hashing the content.
func fileETag(f *os.File, size int64) (string, error) {
	if etag, ok := getETagXattr(f); ok {
		return etag, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		return "", fmt.Errorf("hash content: %w", err)
	}
	return contentETag(h.Sum(nil)), nil
}

func wellFormedETag(s string) bool {
	if len(s) != 34 || s[0] != '"' || s[33] != '"' {
		return false
	}
	for _, c := range s[1:33] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Get implements BucketReader.
func (b *Filesystem) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, st, err := b.openObject("get", key)
	if err != nil {
		return nil, err
	}
	etag, err := fileETag(f, st.Size())
	if err != nil {
		f.Close()
		return nil, &opError{op: "get", key: key, err: err}
	}
	return &fsReader{r: io.NewSectionReader(f, 0, st.Size()), f: f,
		attrs: Attrs{Size: st.Size(), ETag: etag, LastModified: st.ModTime()}}, nil
}

// GetRange implements BucketReader.
func (b *Filesystem) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRange(key, off, length); err != nil {
		return nil, err
	}
	f, st, err := b.openObject("get range", key)
	if err != nil {
		return nil, err
	}
	n, err := clampRange(key, st.Size(), off, length)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fsRangeReader{r: io.NewSectionReader(f, off, n), f: f}, nil
}

// Attributes implements BucketReader.
func (b *Filesystem) Attributes(ctx context.Context, key string) (Attrs, error) {
	if err := ctx.Err(); err != nil {
		return Attrs{}, err
	}
	f, st, err := b.openObject("attributes", key)
	if err != nil {
		return Attrs{}, err
	}
	defer f.Close()
	etag, err := fileETag(f, st.Size())
	if err != nil {
		return Attrs{}, &opError{op: "attributes", key: key, err: err}
	}
	return Attrs{Size: st.Size(), ETag: etag, LastModified: st.ModTime()}, nil
}

// List implements BucketReader. It walks only the directory the prefix
// names, collects the matching keys and sorts them by byte order (a plain
// directory walk would put "a/b" before "a-c"). It follows no link: a link
// (or FIFO, device, socket) is listed as a key whose reads fail.
func (b *Filesystem) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := validatePrefix(prefix); err != nil {
		return err
	}
	start := b.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir := prefix[:i]
		if validateKey(dir) != nil {
			return nil // no valid key can start with this prefix
		}
		// The walk below does not follow links, but the directory it
		// starts from is reached through the prefix's components.
		err := b.withRoot("list", prefix, func(rootfd int) error {
			fd, err := openBeneath(rootfd, dir, dirOpenFlags)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
		switch kind := classify(err); {
		case err == nil:
		case kind == ErrNotFound:
			return nil // prefix directory absent
		case kind == ErrSymlink:
			return &opError{op: "list", key: prefix, kind: ErrSymlink}
		default:
			return fsOpError("list", prefix, err)
		}
		start = filepath.Join(b.root, filepath.FromSlash(dir))
	}
	var infos []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // removed while walking, or prefix dir absent
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(b.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if key == fsTmpDir {
				return fs.SkipDir
			}
			// Prune directories that cannot hold keys with the prefix.
			if p != start && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		// Links and special files are listed like objects (with the
		// link's own size), so that whoever reads them learns at once
		// that they are refused (ErrSymlink, ErrNotRegular) instead of
		// finding a key silently missing.
		if key == fsLockFile || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		infos = append(infos, ObjectInfo{Key: key, Size: info.Size(), LastModified: info.ModTime()})
		return nil
	})
	if err != nil {
		return &opError{op: "list", key: prefix, err: err}
	}
	slices.SortFunc(infos, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Put implements Bucket; see the layout comment above for the protocol.
func (b *Filesystem) Put(ctx context.Context, key string, r io.Reader, size int64, cond Condition) (_ Attrs, err error) {
	if err := b.checkKey("put", key); err != nil {
		return Attrs{}, err
	}
	if b.readOnly {
		return Attrs{}, b.readOnlyErr("put", key)
	}
	tmp, err := os.CreateTemp(b.tmp, "put-*")
	if err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // fails harmlessly once renamed into place
	closed := false
	defer func() {
		if !closed {
			tmp.Close()
		}
	}()
	h := sha256.New()
	src := r
	if size >= 0 {
		src = io.LimitReader(r, size+1)
	}
	n, err := io.Copy(io.MultiWriter(tmp, h), readerWithContext(ctx, src))
	if err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	if size >= 0 && n != size {
		return Attrs{}, &opError{op: "put", key: key, kind: ErrSizeMismatch, err: sizeErr(size, n)}
	}
	etag := contentETag(h.Sum(nil))
	setETagXattr(tmp, etag) // best effort: without it the ETag is recomputed
	if err := tmp.Chmod(0o644); err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	if err := tmp.Sync(); err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: fmt.Errorf("fsync: %w", err)}
	}
	st, err := tmp.Stat()
	if err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	if err := ctx.Err(); err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}

	unlock, err := b.lock()
	if err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	defer unlock()
	dir, base := splitKey(key)
	err = b.withRoot("put", key, func(rootfd int) error {
		// The condition is checked before any directory is created, so a
		// lost precondition leaves nothing behind.
		dirfd, err := openDir(rootfd, dir)
		if err == unix.ENOENT {
			if failed := checkCondition(cond, false, nil); failed != nil {
				return &opError{op: "put", key: key, kind: ErrPreconditionFailed, err: failed}
			}
			dirfd, err = mkdirBeneath(rootfd, dir)
		}
		if err != nil {
			if classify(err) == ErrSymlink {
				return &opError{op: "put", key: key, kind: ErrSymlink}
			}
			return &opError{op: "put", key: key, err: fmt.Errorf("key conflicts with an existing object on the filesystem backend: %w", err)}
		}
		defer unix.Close(dirfd)
		failed, err := checkFileCondition(dirfd, base, key, cond)
		if err != nil {
			return fsOpError("put", key, err)
		}
		if failed != nil {
			return &opError{op: "put", key: key, kind: ErrPreconditionFailed, err: failed}
		}
		if err := unix.Renameat(unix.AT_FDCWD, tmpName, dirfd, base); err != nil {
			var st unix.Stat_t
			if unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return &opError{op: "put", key: key, err: fmt.Errorf("key names a directory holding other objects (filesystem backend): %w", err)}
			}
			return &opError{op: "put", key: key, err: fmt.Errorf("rename into place: %w", err)}
		}
		if err := unix.Fsync(dirfd); err != nil {
			return &opError{op: "put", key: key, err: fmt.Errorf("fsync directory: %w", err)}
		}
		return nil
	})
	if err != nil {
		return Attrs{}, err
	}
	return Attrs{Size: n, ETag: etag, LastModified: st.ModTime()}, nil
}

// splitKey splits a key into its directory ("" at the root) and name.
func splitKey(key string) (dir, base string) {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// checkFileCondition runs under the commit lock on the object base in the
// directory dirfd. failed says why the condition does not hold; err is a
// problem reading the current object (a link or FIFO at the key included).
func checkFileCondition(dirfd int, base, key string, cond Condition) (failed, err error) {
	if cond.IsNone() {
		return nil, nil
	}
	f, st, err := openObjectFile(dirfd, base, key)
	exists := err == nil
	if err != nil && classify(err) != ErrNotFound {
		return nil, err
	}
	if exists {
		defer f.Close()
		if cond.kind == condIfMatch {
			etag, err := fileETag(f, st.Size())
			if err != nil {
				return nil, err
			}
			return checkCondition(cond, true, func() string { return etag }), nil
		}
	}
	return checkCondition(cond, exists, nil), nil
}

// Delete implements Bucket. It also removes directories left empty, up to
// (not including) the root. A link at the key is removed itself (never
// what it points to).
func (b *Filesystem) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.checkKey("delete", key); err != nil {
		return err
	}
	if b.readOnly {
		return b.readOnlyErr("delete", key)
	}
	unlock, err := b.lock()
	if err != nil {
		return &opError{op: "delete", key: key, err: err}
	}
	defer unlock()
	dir, base := splitKey(key)
	return b.withRoot("delete", key, func(rootfd int) error {
		dirfd, err := openDir(rootfd, dir)
		if err != nil {
			if classify(err) == ErrNotFound {
				return nil
			}
			return fsOpError("delete", key, err)
		}
		defer unix.Close(dirfd)
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if classify(err) == ErrNotFound {
				return nil
			}
			return &opError{op: "delete", key: key, err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil // not an object
		}
		if err := unix.Unlinkat(dirfd, base, 0); err != nil && err != unix.ENOENT {
			return &opError{op: "delete", key: key, err: err}
		}
		if err := unix.Fsync(dirfd); err != nil {
			return &opError{op: "delete", key: key, err: fmt.Errorf("fsync directory: %w", err)}
		}
		removeEmptyDirs(rootfd, dir)
		return nil
	})
}

// Close implements Bucket.
func (b *Filesystem) Close() error {
	if b.lockFd == nil {
		return nil
	}
	return b.lockFd.Close()
}

type fsReader struct {
	r     *io.SectionReader
	f     *os.File
	attrs Attrs
}

func (r *fsReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *fsReader) Close() error               { return r.f.Close() }
func (r *fsReader) Attrs() Attrs               { return r.attrs }

type fsRangeReader struct {
	r *io.SectionReader
	f *os.File
}

func (r *fsRangeReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *fsRangeReader) Close() error               { return r.f.Close() }
