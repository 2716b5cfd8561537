// Package objstore owns tiered's object-store seam: the small Bucket
// interface every remote-tier component talks to, its backends (S3 through
// aws-sdk-go-v2, a local filesystem directory, process memory), the bucket
// URL syntax that selects one, and the wrappers that add behaviour without
// flags (Prometheus metrics, key prefixing, fault injection).
//
// Bucket URLs:
//
//	file:///abs/dir
//	mem://name[/prefix]
//	s3://bucket[/prefix]?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true
//
// A URL is opened read-write (Open) by the processes that write (serve,
// sidecar, upload, retention) and read-only (OpenReadOnly) by those that
// only read (fetch, consume --bucket, bucket verify, inspect manifest,
// replay): their Put and Delete fail with ErrReadOnly, and a file://
// directory needs only read permission.
//
// The contract every backend meets is written on the interface methods and
// checked by objtesting.AcceptanceTest. Callers recognise outcomes with
// errors.Is against ErrNotFound, ErrPreconditionFailed, ErrInvalidRange, ErrAccessDenied,
// ErrInvalidKey, ErrSizeMismatch and ErrReadOnly (and, from the file
// backend, ErrSymlink and ErrNotRegular); they never need backend types.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Sentinel errors. Backends wrap them (with the operation, key and the
// backend's own error) so errors.Is recognises them.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrPreconditionFailed: a conditional Put lost (IfAbsent and the key
	// exists, or IfMatch and the current ETag differs or the object is gone).
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrInvalidRange: GetRange asked for an offset beyond the object's end.
	ErrInvalidRange = errors.New("range not satisfiable")
	// ErrInvalidKey: the key is not acceptable (see ValidateKey).
	ErrInvalidKey = errors.New("invalid object key")
	// ErrSizeMismatch: Put's reader yielded a different number of bytes than
	// the size it was given; nothing was written.
	ErrSizeMismatch = errors.New("object size mismatch")
	// ErrBucketNotFound: the bucket itself does not exist. It deliberately
	// does not match ErrNotFound, so a missing bucket is never mistaken for
	// a missing object.
	ErrBucketNotFound = errors.New("bucket does not exist")
	// ErrSymlink: the filesystem backend found a symbolic link where the
	// key's path should be (the object or a directory above it) and
	// refused to follow it: no key resolves outside the bucket directory.
	ErrSymlink = errors.New("symbolic link refused (the filesystem backend follows no links: objects are regular files inside the bucket directory)")
	// ErrNotRegular: the filesystem backend found a FIFO, device or socket
	// at the key; only regular files are objects.
	ErrNotRegular = errors.New("not a regular file")
	// ErrReadOnly: a Put or Delete on a bucket opened read-only
	// (OpenReadOnly); nothing was sent to the store.
	ErrReadOnly = errors.New("bucket opened read-only")
	// ErrAccessDenied: the store refused the request for want of
	// permission (S3 403 AccessDenied: credentials that may only read).
	ErrAccessDenied = errors.New("access denied")
)

// Attrs describes one stored version of an object.
type Attrs struct {
	Size int64
	// ETag identifies the content version. It is opaque: compare it only
	// for equality and pass it back unchanged to IfMatch. The memory and
	// filesystem backends use a quoted hex SHA-256 prefix of the content;
	// S3 returns the server's ETag.
	ETag         string
	LastModified time.Time
}

// ObjectInfo is one entry of a List.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// Condition is the precondition of a Put. The zero value is no condition.
type Condition struct {
	kind condKind
	etag string
}

type condKind uint8

const (
	condNone condKind = iota
	condIfAbsent
	condIfMatch
)

// IfAbsent makes a Put succeed only if no object exists at the key
// (S3 If-None-Match: *).
func IfAbsent() Condition { return Condition{kind: condIfAbsent} }

// IfMatch makes a Put succeed only if the object exists and its current
// ETag equals etag (S3 If-Match).
func IfMatch(etag string) Condition { return Condition{kind: condIfMatch, etag: etag} }

// IsNone reports whether c is the empty condition.
func (c Condition) IsNone() bool { return c.kind == condNone }

// IsIfAbsent reports whether c is IfAbsent.
func (c Condition) IsIfAbsent() bool { return c.kind == condIfAbsent }

// MatchETag returns the ETag of an IfMatch condition.
func (c Condition) MatchETag() (string, bool) { return c.etag, c.kind == condIfMatch }

func (c Condition) String() string {
	switch c.kind {
	case condIfAbsent:
		return "if-absent"
	case condIfMatch:
		return "if-match " + c.etag
	default:
		return "none"
	}
}

// BucketReader is the read half of a Bucket. Code that only reads (the fetch
// service, verify, consume --bucket) takes a BucketReader.
type BucketReader interface {
	// Get returns the whole object. The reader returned by every backend in
	// this package also has an Attrs() Attrs method giving the attributes of
	// exactly the version being read; use GetWithAttrs to reach it.
	// A missing key is ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)

	// GetRange returns length bytes starting at off; length < 0 means to
	// the end. A range reaching past the end is cut at the end (a tail
	// read); off == size gives an empty reader; off > size is
	// ErrInvalidRange; off < 0 is an error. A missing key is ErrNotFound.
	GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)

	// Attributes returns the size, ETag and modification time. A missing
	// key is ErrNotFound.
	Attributes(ctx context.Context, key string) (Attrs, error)

	// List calls fn for every object whose key starts with prefix, in
	// ascending byte order of keys, recursively (no delimiter). An error
	// from fn stops the listing and is returned unchanged. List is for
	// garbage collection and verification only: the read path never lists.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
}

// Bucket is the object-store seam.
type Bucket interface {
	BucketReader

	// Put stores exactly size bytes read from r at key, replacing any
	// object there, atomically: readers see the old object or the whole new
	// one, never a part. size < 0 means unknown (read to EOF). If r yields
	// a different number of bytes than size the Put fails with
	// ErrSizeMismatch and nothing is stored. cond is checked atomically with
	// the write; when it does not hold the error is ErrPreconditionFailed.
	// Large objects are streamed: memory use does not grow with size.
	Put(ctx context.Context, key string, r io.Reader, size int64, cond Condition) (Attrs, error)

	// Delete removes the object. Deleting a missing key succeeds
	// (idempotent).
	Delete(ctx context.Context, key string) error

	// Close releases the backend's resources (idle connections, locks).
	Close() error
}

// AttrsReader is implemented by the readers Get returns.
type AttrsReader interface {
	io.ReadCloser
	Attrs() Attrs
}

// GetWithAttrs returns the object together with the attributes of the very
// version being read, so that a later Put with IfMatch(attrs.ETag) is a
// correct compare-and-swap. When the reader does not carry attributes (a
// foreign Bucket implementation) it falls back to Attributes before and
// after the Get and retries until both agree.
func GetWithAttrs(ctx context.Context, b BucketReader, key string) (io.ReadCloser, Attrs, error) {
	for attempt := 0; ; attempt++ {
		var before Attrs
		if attempt > 0 {
			var err error
			if before, err = b.Attributes(ctx, key); err != nil {
				return nil, Attrs{}, err
			}
		}
		rc, err := b.Get(ctx, key)
		if err != nil {
			return nil, Attrs{}, err
		}
		if ar, ok := rc.(AttrsReader); ok {
			return rc, ar.Attrs(), nil
		}
		if attempt == 0 {
			// First time: learn that this reader has no attributes.
			rc.Close()
			continue
		}
		after, err := b.Attributes(ctx, key)
		if err != nil {
			rc.Close()
			return nil, Attrs{}, err
		}
		if after.ETag == before.ETag && after.Size == before.Size {
			return rc, after, nil
		}
		rc.Close()
		if attempt > 10 {
			return nil, Attrs{}, fmt.Errorf("get %q: object kept changing while read", key)
		}
	}
}

// MaxKeyLen is the longest key accepted, in bytes (S3's limit).
const MaxKeyLen = 1024

// ValidateKey reports whether key is usable on every backend: non-empty,
// valid UTF-8, at most MaxKeyLen bytes, no NUL, and '/'-separated
// components that are neither empty nor "." nor "..". So "a/b c/d=e+f%"
// is fine while "/a", "a//b", "a/", "a/../b" are refused, on S3 too, so
// that a key that works on one backend works on all.
func ValidateKey(key string) error {
	if err := validateKey(key); err != nil {
		return &opError{op: "validate", key: key, kind: ErrInvalidKey, err: err}
	}
	return nil
}

func validateKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("key longer than %d bytes", MaxKeyLen)
	case !utf8.ValidString(key):
		return errors.New("key is not valid UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return errors.New("key contains NUL")
	}
	for comp := range strings.SplitSeq(key, "/") {
		switch comp {
		case "":
			return errors.New("key has an empty path component (leading, trailing or double '/')")
		case ".", "..":
			return fmt.Errorf("key has a %q path component", comp)
		}
	}
	return nil
}

// validatePrefix accepts "" or a prefix that is itself a valid key or a
// valid key followed by '/'; List prefixes may also end mid-component.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 || len(prefix) > MaxKeyLen {
		return &opError{op: "list", key: prefix, kind: ErrInvalidKey, err: errors.New("bad prefix")}
	}
	return nil
}

// opError carries the operation and key, the sentinel kind (for errors.Is)
// and the underlying cause.
type opError struct {
	op, key string
	kind    error // a sentinel or nil
	err     error // cause, may be nil
}

func (e *opError) Error() string {
	var b strings.Builder
	b.WriteString(e.op)
	if e.key != "" {
		fmt.Fprintf(&b, " %q", e.key)
	}
	if e.kind != nil {
		b.WriteString(": ")
		b.WriteString(e.kind.Error())
	}
	if e.err != nil {
		b.WriteString(": ")
		b.WriteString(e.err.Error())
	}
	return b.String()
}

func (e *opError) Unwrap() []error {
	var out []error
	if e.kind != nil {
		out = append(out, e.kind)
	}
	if e.err != nil {
		out = append(out, e.err)
	}
	return out
}

// IsNotFound reports whether err means the object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsPreconditionFailed reports whether err means a conditional Put lost.
func IsPreconditionFailed(err error) bool { return errors.Is(err, ErrPreconditionFailed) }

// checkRange validates GetRange arguments common to all backends.
func checkRange(key string, off, length int64) error {
	if off < 0 {
		return &opError{op: "get range", key: key, err: fmt.Errorf("negative offset %d", off)}
	}
	return nil
}

// clampRange resolves a GetRange against an object of the given size,
// returning the byte count to read.
func clampRange(key string, size, off, length int64) (int64, error) {
	if off > size {
		return 0, &opError{op: "get range", key: key, kind: ErrInvalidRange,
			err: fmt.Errorf("offset %d beyond size %d", off, size)}
	}
	n := size - off
	if length >= 0 && length < n {
		n = length
	}
	return n, nil
}
