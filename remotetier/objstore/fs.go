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
// later Open after an hour.
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
	root   string
	tmp    string
	mu     *sync.Mutex // shared by every Filesystem on the same root in this process
	lockFd *os.File    // this bucket's handle on .tiered-lock
}

var fsRootLocks = struct {
	sync.Mutex
	m map[string]*sync.Mutex
}{m: map[string]*sync.Mutex{}}

// NewFilesystem opens the directory dir as a bucket. The directory must
// exist: like a missing S3 bucket, a missing directory is an error rather
// than silently created (callers that own a default directory create it).
func NewFilesystem(dir string) (*Filesystem, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open filesystem bucket %s: %w", dir, err)
	}
	st, err := os.Stat(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open filesystem bucket: directory %s does not exist: %w", root, ErrBucketNotFound)
		}
		return nil, fmt.Errorf("open filesystem bucket: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("open filesystem bucket: %s is not a directory", root)
	}
	tmp := filepath.Join(root, fsTmpDir)
	if err := os.Mkdir(tmp, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open filesystem bucket: create %s: %w", tmp, err)
	}
	lockFd, err := os.OpenFile(filepath.Join(root, fsLockFile), os.O_RDWR|os.O_CREATE, 0o644)
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

// Root returns the bucket's directory.
func (b *Filesystem) Root() string { return b.root }

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

// path validates key and maps it to its file.
func (b *Filesystem) path(op, key string) (string, error) {
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
		return "", &opError{op: op, key: key, kind: ErrInvalidKey, err: err}
	}
	return filepath.Join(b.root, filepath.FromSlash(key)), nil
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

// openObject opens the object's file; a missing file or a directory is
// ErrNotFound.
func (b *Filesystem) openObject(op, key string) (*os.File, os.FileInfo, error) {
	p, err := b.path(op, key)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil, &opError{op: op, key: key, kind: ErrNotFound}
		}
		return nil, nil, &opError{op: op, key: key, err: err}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, &opError{op: op, key: key, err: err}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &opError{op: op, key: key, kind: ErrNotFound}
	}
	return f, st, nil
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
// directory walk would put "a/b" before "a-c").
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
		if !d.Type().IsRegular() || key == fsLockFile || !strings.HasPrefix(key, prefix) {
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
	final, err := b.path("put", key)
	if err != nil {
		return Attrs{}, err
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
	if err := b.checkFileCondition(final, cond); err != nil {
		return Attrs{}, &opError{op: "put", key: key, kind: ErrPreconditionFailed, err: err}
	}
	dir := filepath.Dir(final)
	if err := mkdirAllSync(b.root, dir); err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: fmt.Errorf("key conflicts with an existing object on the filesystem backend: %w", err)}
	}
	if err := os.Rename(tmpName, final); err != nil {
		if st, serr := os.Stat(final); serr == nil && st.IsDir() {
			err = fmt.Errorf("key names a directory holding other objects (filesystem backend): %w", err)
		}
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	if err := syncDir(dir); err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	return Attrs{Size: n, ETag: etag, LastModified: st.ModTime()}, nil
}

// checkFileCondition runs under the commit lock.
func (b *Filesystem) checkFileCondition(final string, cond Condition) error {
	if cond.IsNone() {
		return nil
	}
	f, err := os.Open(final)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	if exists {
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		exists = st.Mode().IsRegular()
		if cond.kind == condIfMatch && exists {
			etag, err := fileETag(f, st.Size())
			if err != nil {
				return err
			}
			return checkCondition(cond, true, func() string { return etag })
		}
	}
	return checkCondition(cond, exists, nil)
}

// Delete implements Bucket. It also removes directories left empty, up to
// (not including) the root.
func (b *Filesystem) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	final, err := b.path("delete", key)
	if err != nil {
		return err
	}
	unlock, err := b.lock()
	if err != nil {
		return &opError{op: "delete", key: key, err: err}
	}
	defer unlock()
	st, err := os.Lstat(final)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return &opError{op: "delete", key: key, err: err}
	}
	if st.IsDir() {
		return nil // not an object
	}
	if err := os.Remove(final); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &opError{op: "delete", key: key, err: err}
	}
	dir := filepath.Dir(final)
	if err := syncDir(dir); err != nil {
		return &opError{op: "delete", key: key, err: err}
	}
	for dir != b.root && os.Remove(dir) == nil {
		dir = filepath.Dir(dir)
	}
	return nil
}

// Close implements Bucket.
func (b *Filesystem) Close() error { return b.lockFd.Close() }

// mkdirAllSync creates dir and any missing parents below root, fsyncing
// each new directory's parent so the new entries survive a crash.
func mkdirAllSync(root, dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if dir == root {
		return fmt.Errorf("bucket directory %s vanished", root)
	}
	parent := filepath.Dir(dir)
	if err := mkdirAllSync(root, parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
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
