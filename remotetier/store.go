package remotetier

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// subCacheEntries is how many decoded sub-manifests a store keeps (each
// about 200 KB of JSON when encoded).
const subCacheEntries = 64

// manifestStore reads and writes the manifests of one bucket.
type manifestStore struct {
	bkt    objstore.Bucket
	prefix string
	subs   *manifest.SubCache
}

func newManifestStore(bkt objstore.Bucket, prefix string) (*manifestStore, error) {
	p, err := manifest.NormalizePrefix(prefix)
	if err != nil {
		return nil, err
	}
	s := &manifestStore{bkt: bkt, prefix: p}
	s.subs = manifest.NewSubCache(manifest.ResolverFunc(s.loadObject), subCacheEntries)
	return s, nil
}

// loadObject reads a whole sub-manifest object, at most size+1 bytes.
func (s *manifestStore) loadObject(ctx context.Context, key string, size int64) ([]byte, error) {
	rc, err := s.bkt.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, size+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return data, nil
}

// load reads a partition's root manifest and its ETag. A partition without
// one gets a new manifest (generation 0, ETag "") whose log starts at
// logStart.
func (s *manifestStore) load(ctx context.Context, topic string, partition int32, logStart int64) (*manifest.Manifest, string, error) {
	return s.loadID(ctx, topic, "", partition, logStart)
}

// loadID is load in the lineage of keyID ("" = name-only).
func (s *manifestStore) loadID(ctx context.Context, topic, keyID string, partition int32, logStart int64) (*manifest.Manifest, string, error) {
	key, err := manifest.ManifestKeyID(s.prefix, topic, keyID, partition)
	if err != nil {
		return nil, "", err
	}
	rc, attrs, err := objstore.GetWithAttrs(ctx, s.bkt, key)
	if objstore.IsNotFound(err) {
		m, err := manifest.NewID(s.prefix, topic, keyID, partition, max(logStart, 0))
		return m, "", err
	}
	if err != nil {
		return nil, "", fmt.Errorf("read manifest: %w", err)
	}
	data, err := manifest.ReadLimited(key, rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, "", fmt.Errorf("read manifest: %w", err)
	}
	m, err := manifest.DecodeRoot(key, data)
	if err != nil {
		return nil, "", err
	}
	return m, attrs.ETag, nil
}

// write stores a commit computed from a manifest of generation prevGen read
// with ETag etag: new sub-manifests first (if absent: their keys name their
// content), then the root, conditionally. It returns the root's new ETag; a
// lost race is objstore.ErrPreconditionFailed.
func (s *manifestStore) write(ctx context.Context, c *manifest.Commit, prevGen int64, etag string) (string, error) {
	for _, sub := range c.Subs {
		_, err := s.bkt.Put(ctx, sub.Ref.Key, bytes.NewReader(sub.Data), int64(len(sub.Data)), objstore.IfAbsent())
		if err != nil && !objstore.IsPreconditionFailed(err) {
			return "", fmt.Errorf("write sub-manifest: %w", err)
		}
	}
	data, err := manifest.EncodeRoot(c.Root)
	if err != nil {
		return "", err
	}
	cond := objstore.IfMatch(etag)
	if prevGen == 0 {
		cond = objstore.IfAbsent()
	}
	attrs, err := s.bkt.Put(ctx, c.Root.Key(), bytes.NewReader(data), int64(len(data)), cond)
	if err != nil {
		return "", fmt.Errorf("write manifest: %w", err)
	}
	return attrs.ETag, nil
}

// segmentsIn calls fn on every committed segment overlapping [from, to], in
// offset order, loading only the sub-manifests that hold them.
func (s *manifestStore) segmentsIn(ctx context.Context, m *manifest.Manifest, from, to int64, fn func(manifest.Segment)) error {
	for i, ref := range m.Sealed {
		if ref.LastOffset < from || ref.BaseOffset > to {
			continue
		}
		sub, err := m.LoadSub(ctx, s.subs, i)
		if err != nil {
			return err
		}
		for _, sg := range sub.Segments {
			if sg.LastOffset >= from && sg.BaseOffset <= to {
				fn(sg)
			}
		}
	}
	for _, sg := range m.Segments {
		if sg.LastOffset >= from && sg.BaseOffset <= to {
			fn(sg)
		}
	}
	return nil
}

// chainCommit applies several commits one after the other and merges them
// into one: the sub-manifests the final root references, and every key an
// earlier root referenced that the final one does not.
func chainCommit(base *manifest.Manifest, steps []*manifest.Commit) *manifest.Commit {
	if len(steps) == 1 {
		return steps[0]
	}
	final := steps[len(steps)-1].Root
	live := map[string]bool{}
	for _, ref := range final.Sealed {
		live[ref.Key] = true
	}
	created := map[string]bool{}
	out := &manifest.Commit{Root: final}
	seen := map[string]bool{}
	for _, c := range steps {
		for _, sub := range c.Subs {
			created[sub.Ref.Key] = true
			if live[sub.Ref.Key] && !seen[sub.Ref.Key] {
				seen[sub.Ref.Key] = true
				out.Subs = append(out.Subs, sub)
			}
		}
	}
	for _, c := range steps {
		for _, k := range c.Unreferenced {
			if !live[k] && !created[k] {
				out.Unreferenced = append(out.Unreferenced, k)
			}
		}
	}
	return out
}
