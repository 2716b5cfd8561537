package objstore

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Prefixed is a Bucket whose keys all live under a fixed prefix of the
// underlying bucket. It embeds the bucket and overrides the calls that take
// keys.
type Prefixed struct {
	Bucket
	prefix string // ends with "/"
}

// WithPrefix returns b restricted to keys under prefix ("a/b" stores key
// "k" as "a/b/k"). An empty prefix returns b itself.
func WithPrefix(b Bucket, prefix string) (Bucket, error) {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return b, nil
	}
	if err := validateKey(prefix); err != nil {
		return nil, fmt.Errorf("bucket prefix %q: %w", prefix, err)
	}
	return &Prefixed{Bucket: b, prefix: prefix + "/"}, nil
}

func (p *Prefixed) full(op, key string) (string, error) {
	if err := validateKey(key); err != nil {
		return "", &opError{op: op, key: key, kind: ErrInvalidKey, err: err}
	}
	return p.prefix + key, nil
}

// Get implements BucketReader.
func (p *Prefixed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := p.full("get", key)
	if err != nil {
		return nil, err
	}
	return p.Bucket.Get(ctx, k)
}

// GetRange implements BucketReader.
func (p *Prefixed) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	k, err := p.full("get range", key)
	if err != nil {
		return nil, err
	}
	return p.Bucket.GetRange(ctx, k, off, length)
}

// Attributes implements BucketReader.
func (p *Prefixed) Attributes(ctx context.Context, key string) (Attrs, error) {
	k, err := p.full("attributes", key)
	if err != nil {
		return Attrs{}, err
	}
	return p.Bucket.Attributes(ctx, k)
}

// List implements BucketReader; keys are reported without the prefix.
func (p *Prefixed) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return p.Bucket.List(ctx, p.prefix+prefix, func(info ObjectInfo) error {
		info.Key = strings.TrimPrefix(info.Key, p.prefix)
		return fn(info)
	})
}

// Put implements Bucket.
func (p *Prefixed) Put(ctx context.Context, key string, r io.Reader, size int64, cond Condition) (Attrs, error) {
	k, err := p.full("put", key)
	if err != nil {
		return Attrs{}, err
	}
	return p.Bucket.Put(ctx, k, r, size, cond)
}

// Delete implements Bucket.
func (p *Prefixed) Delete(ctx context.Context, key string) error {
	k, err := p.full("delete", key)
	if err != nil {
		return err
	}
	return p.Bucket.Delete(ctx, k)
}
