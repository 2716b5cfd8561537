package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// memRegistry holds the named memory stores, so two Open("mem://x") calls
// in one process share one store.
var memRegistry = struct {
	sync.Mutex
	stores map[string]*memStore
}{stores: map[string]*memStore{}}

type memObject struct {
	data  []byte // never mutated after Put
	attrs Attrs
}

type memStore struct {
	mu      sync.Mutex
	objects map[string]*memObject
	now     func() time.Time
}

// Memory is the in-process backend. Objects live in a map; every version is
// an immutable byte slice, so readers never see a later write.
type Memory struct {
	s *memStore
}

// NewMemory returns an empty memory bucket that nothing else shares.
func NewMemory() *Memory {
	return &Memory{s: &memStore{objects: map[string]*memObject{}, now: time.Now}}
}

// OpenMemory returns the process-wide memory bucket registered under name,
// creating it on first use: every opener of the same name shares it.
func OpenMemory(name string) *Memory {
	memRegistry.Lock()
	defer memRegistry.Unlock()
	s, ok := memRegistry.stores[name]
	if !ok {
		s = &memStore{objects: map[string]*memObject{}, now: time.Now}
		memRegistry.stores[name] = s
	}
	return &Memory{s: s}
}

// DropMemory forgets the named memory bucket (tests use it to free memory).
func DropMemory(name string) {
	memRegistry.Lock()
	delete(memRegistry.stores, name)
	memRegistry.Unlock()
}

// contentETag is the ETag of the memory and filesystem backends: a quoted
// hex prefix (128 bits) of the SHA-256 of the content. Being a function of
// the content, it needs no separate storage that could disagree with it.
func contentETag(sum []byte) string {
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

func (m *Memory) lookup(op, key string) (*memObject, error) {
	if err := validateKey(key); err != nil {
		return nil, &opError{op: op, key: key, kind: ErrInvalidKey, err: err}
	}
	m.s.mu.Lock()
	o, ok := m.s.objects[key]
	m.s.mu.Unlock()
	if !ok {
		return nil, &opError{op: op, key: key, kind: ErrNotFound}
	}
	return o, nil
}

// Get implements BucketReader.
func (m *Memory) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := m.lookup("get", key)
	if err != nil {
		return nil, err
	}
	return &memReader{Reader: bytes.NewReader(o.data), attrs: o.attrs}, nil
}

// GetRange implements BucketReader.
func (m *Memory) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRange(key, off, length); err != nil {
		return nil, err
	}
	o, err := m.lookup("get range", key)
	if err != nil {
		return nil, err
	}
	n, err := clampRange(key, o.attrs.Size, off, length)
	if err != nil {
		return nil, err
	}
	return &memReader{Reader: bytes.NewReader(o.data[off : off+n]), attrs: o.attrs}, nil
}

// Attributes implements BucketReader.
func (m *Memory) Attributes(ctx context.Context, key string) (Attrs, error) {
	if err := ctx.Err(); err != nil {
		return Attrs{}, err
	}
	o, err := m.lookup("attributes", key)
	if err != nil {
		return Attrs{}, err
	}
	return o.attrs, nil
}

// List implements BucketReader.
func (m *Memory) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := validatePrefix(prefix); err != nil {
		return err
	}
	m.s.mu.Lock()
	var infos []ObjectInfo
	for k, o := range m.s.objects {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, ObjectInfo{Key: k, Size: o.attrs.Size, LastModified: o.attrs.LastModified})
		}
	}
	m.s.mu.Unlock()
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

// Put implements Bucket. The content is read fully before the condition is
// checked and the object swapped in under the store's lock.
func (m *Memory) Put(ctx context.Context, key string, r io.Reader, size int64, cond Condition) (Attrs, error) {
	if err := validateKey(key); err != nil {
		return Attrs{}, &opError{op: "put", key: key, kind: ErrInvalidKey, err: err}
	}
	var buf bytes.Buffer
	h := sha256.New()
	src := r
	if size >= 0 {
		src = io.LimitReader(r, size+1)
		buf.Grow(int(min(size, 64<<20)))
	}
	n, err := io.Copy(io.MultiWriter(&buf, h), readerWithContext(ctx, src))
	if err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	if size >= 0 && n != size {
		return Attrs{}, &opError{op: "put", key: key, kind: ErrSizeMismatch, err: sizeErr(size, n)}
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	cur, exists := m.s.objects[key]
	if err := checkCondition(cond, exists, func() string { return cur.attrs.ETag }); err != nil {
		return Attrs{}, &opError{op: "put", key: key, kind: ErrPreconditionFailed, err: err}
	}
	o := &memObject{data: buf.Bytes(), attrs: Attrs{Size: n, ETag: contentETag(h.Sum(nil)), LastModified: m.s.now()}}
	m.s.objects[key] = o
	return o.attrs, nil
}

// Delete implements Bucket.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validateKey(key); err != nil {
		return &opError{op: "delete", key: key, kind: ErrInvalidKey, err: err}
	}
	m.s.mu.Lock()
	delete(m.s.objects, key)
	m.s.mu.Unlock()
	return nil
}

// Close implements Bucket. The named store stays registered.
func (m *Memory) Close() error { return nil }

type memReader struct {
	*bytes.Reader
	attrs Attrs
}

func (r *memReader) Close() error { return nil }
func (r *memReader) Attrs() Attrs { return r.attrs }
