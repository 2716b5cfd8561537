package manifest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
)

// Resolver loads sealed sub-manifests for a lookup or commit, so the package
// stays free of I/O. Callers implement it over their object store; wrapped
// in NewSubCache, decoded sub-manifests are kept (a sub-manifest's key names
// its content, which never changes).
type Resolver interface {
	// Load returns the whole object at key. size is the length the manifest
	// recorded; an implementation need read no more than size+1 bytes.
	Load(ctx context.Context, key string, size int64) ([]byte, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, key string, size int64) ([]byte, error)

// Load calls f.
func (f ResolverFunc) Load(ctx context.Context, key string, size int64) ([]byte, error) {
	return f(ctx, key, size)
}

// lookupIndex holds running maxima of max timestamps, which are monotonic
// where the timestamps themselves are not, so "first segment with max
// timestamp >= ts" is a binary search.
type lookupIndex struct {
	subMaxTs []int64
	segMaxTs []int64
}

func buildIndex(refs []SubRef, segs []Segment) *lookupIndex {
	idx := &lookupIndex{subMaxTs: make([]int64, len(refs)), segMaxTs: make([]int64, len(segs))}
	run := int64(NoTimestamp - 1)
	for i, r := range refs {
		run = max(run, r.MaxTimestamp)
		idx.subMaxTs[i] = run
	}
	run = NoTimestamp - 1
	for i, s := range segs {
		run = max(run, s.MaxTimestamp)
		idx.segMaxTs[i] = run
	}
	return idx
}

func (m *Manifest) index() *lookupIndex {
	if m.idx != nil && len(m.idx.subMaxTs) == len(m.Sealed) && len(m.idx.segMaxTs) == len(m.Segments) {
		return m.idx
	}
	return buildIndex(m.Sealed, m.Segments)
}

// NextOffset is the first offset not committed: one past the last segment,
// or LogStartOffset when there is none. The uploader's next segment must
// serve offsets from here on (Reconcile).
func (m *Manifest) NextOffset() int64 {
	if end, ok := m.segmentsEnd(); ok {
		return end
	}
	return m.LogStartOffset
}

// segmentsEnd is one past the last committed segment; false without segments.
func (m *Manifest) segmentsEnd() (int64, bool) {
	switch {
	case len(m.Segments) > 0:
		return m.Segments[len(m.Segments)-1].NextOffset(), true
	case len(m.Sealed) > 0:
		return m.Sealed[len(m.Sealed)-1].LastOffset + 1, true
	}
	return 0, false
}

// SegmentCount is the number of committed segments, sealed and inline.
func (m *Manifest) SegmentCount() int {
	n := len(m.Segments)
	for _, r := range m.Sealed {
		n += r.Segments
	}
	return n
}

// LogBytes is the sum of the committed segments' .log sizes.
func (m *Manifest) LogBytes() int64 {
	var n int64
	for _, r := range m.Sealed {
		n += r.LogBytes
	}
	for _, s := range m.Segments {
		n += s.Log.Size
	}
	return n
}

// Location is where a lookup's segment is: inline (Sub is -1 and Segment is
// it) or in the sealed sub-manifest m.Sealed[Sub], which must be loaded and
// searched with the same lookup.
type Location struct {
	Sub     int
	Segment Segment
}

// LocateOffset finds, without I/O, where the segment serving offset is: the
// first segment whose last offset is at or after offset (offset itself, or
// the next one present when offset fell in a gap left by compaction). An
// offset outside [LogStartOffset, NextOffset) is an *OffsetOutOfRangeError.
// O(log n).
func (m *Manifest) LocateOffset(offset int64) (Location, error) {
	if next := m.NextOffset(); offset < m.LogStartOffset || offset >= next {
		return Location{}, &OffsetOutOfRangeError{Offset: offset, Start: m.LogStartOffset, Next: next}
	}
	if i := sort.Search(len(m.Sealed), func(i int) bool { return m.Sealed[i].LastOffset >= offset }); i < len(m.Sealed) {
		return Location{Sub: i}, nil
	}
	j := sort.Search(len(m.Segments), func(j int) bool { return m.Segments[j].LastOffset >= offset })
	return Location{Sub: -1, Segment: m.Segments[j]}, nil
}

// LocateTimestamp finds, without I/O, where the first segment (in offset
// order) with a max timestamp at or after ts is; ErrTimestampNotFound when
// none has. O(log n).
func (m *Manifest) LocateTimestamp(ts int64) (Location, error) {
	idx := m.index()
	if i := sort.Search(len(idx.subMaxTs), func(i int) bool { return idx.subMaxTs[i] >= ts }); i < len(idx.subMaxTs) {
		return Location{Sub: i}, nil
	}
	if j := sort.Search(len(idx.segMaxTs), func(j int) bool { return idx.segMaxTs[j] >= ts }); j < len(idx.segMaxTs) {
		return Location{Sub: -1, Segment: m.Segments[j]}, nil
	}
	return Location{}, ErrTimestampNotFound
}

// FindOffset returns the segment serving offset (see LocateOffset), loading
// at most one sub-manifest through r.
func (m *Manifest) FindOffset(ctx context.Context, r Resolver, offset int64) (Segment, error) {
	loc, err := m.LocateOffset(offset)
	if err != nil || loc.Sub < 0 {
		return loc.Segment, err
	}
	sub, err := m.LoadSub(ctx, r, loc.Sub)
	if err != nil {
		return Segment{}, fmt.Errorf("find offset %d: %w", offset, err)
	}
	seg, _ := sub.FindOffset(offset) // LoadSub checked the sub covers the ref's range
	return seg, nil
}

// FindTimestamp returns the first segment with a max timestamp at or after
// ts (see LocateTimestamp), loading at most one sub-manifest through r.
func (m *Manifest) FindTimestamp(ctx context.Context, r Resolver, ts int64) (Segment, error) {
	loc, err := m.LocateTimestamp(ts)
	if err != nil || loc.Sub < 0 {
		return loc.Segment, err
	}
	sub, err := m.LoadSub(ctx, r, loc.Sub)
	if err != nil {
		return Segment{}, fmt.Errorf("find timestamp %d: %w", ts, err)
	}
	seg, _ := sub.FindTimestamp(ts) // LoadSub checked the max timestamp
	return seg, nil
}

// FindOffset returns the first segment whose last offset is at or after
// offset.
func (s *SubManifest) FindOffset(offset int64) (Segment, bool) {
	j := sort.Search(len(s.Segments), func(j int) bool { return s.Segments[j].LastOffset >= offset })
	if j == len(s.Segments) {
		return Segment{}, false
	}
	return s.Segments[j], true
}

// FindTimestamp returns the first segment whose max timestamp is at or
// after ts.
func (s *SubManifest) FindTimestamp(ts int64) (Segment, bool) {
	idx := s.idx
	if idx == nil || len(idx.segMaxTs) != len(s.Segments) {
		idx = buildIndex(nil, s.Segments)
	}
	j := sort.Search(len(idx.segMaxTs), func(j int) bool { return idx.segMaxTs[j] >= ts })
	if j == len(s.Segments) {
		return Segment{}, false
	}
	return s.Segments[j], true
}

// LoadSub loads m.Sealed[i] through r and checks it against its reference:
// size, SHA-256, partition, and the summary (range, count, timestamps, bytes).
func (m *Manifest) LoadSub(ctx context.Context, r Resolver, i int) (*SubManifest, error) {
	if i < 0 || i >= len(m.Sealed) {
		return nil, fmt.Errorf("load sub-manifest %d of %d: no such sub-manifest", i, len(m.Sealed))
	}
	sub, err := loadSub(ctx, r, m.owner(), m.Sealed[i])
	if err == nil && i == 0 && sub.Segments[0].LastOffset < m.LogStartOffset {
		return nil, &CorruptManifestError{Key: m.Sealed[i].Key, Reason: fmt.Sprintf(
			"first segment ends at %d, below the log start offset %d", sub.Segments[0].LastOffset, m.LogStartOffset)}
	}
	return sub, err
}

func loadSub(ctx context.Context, r Resolver, o lineage, ref SubRef) (*SubManifest, error) {
	cache, _ := r.(*SubCache)
	if cache != nil {
		// Keyed by the whole reference, so a hit was verified against
		// exactly this reference.
		if sub, ok := cache.get(ref); ok && sub.owner() == o {
			return sub, nil
		}
	}
	data, err := r.Load(ctx, ref.Key, ref.Size)
	if err != nil {
		return nil, fmt.Errorf("load sub-manifest %s: %w", ref.Key, err)
	}
	corrupt := func(format string, args ...any) error {
		return &CorruptManifestError{Key: ref.Key, Reason: fmt.Sprintf(format, args...)}
	}
	if int64(len(data)) != ref.Size {
		return nil, corrupt("%d bytes, the manifest recorded %d", len(data), ref.Size)
	}
	if sum := SHA256Checksum(sha256.Sum256(data)); sum != ref.Checksum {
		return nil, corrupt("checksum %s, the manifest recorded %s", sum, ref.Checksum)
	}
	sub, err := DecodeSub(ref.Key, data)
	if err != nil {
		return nil, err
	}
	if sub.owner() != o {
		return nil, corrupt("belongs to %s, not %s", sub.owner(), o)
	}
	if got := summarize(ref.Key, ref.Size, ref.Checksum, sub.Segments); got != ref {
		return nil, corrupt("content summary %+v does not match the manifest's reference %+v", got, ref)
	}
	if cache != nil {
		cache.put(ref, sub)
	}
	return sub, nil
}

// summarize builds the SubRef for segs encoded as an object of size bytes
// with checksum sum at key.
func summarize(key string, size int64, sum Checksum, segs []Segment) SubRef {
	r := SubRef{Key: key, Size: size, Checksum: sum, BaseOffset: segs[0].BaseOffset,
		LastOffset: segs[len(segs)-1].LastOffset, MinTimestamp: segs[0].MinTimestamp,
		MaxTimestamp: segs[0].MaxTimestamp, Segments: len(segs)}
	for _, s := range segs {
		r.MinTimestamp = min(r.MinTimestamp, s.MinTimestamp)
		r.MaxTimestamp = max(r.MaxTimestamp, s.MaxTimestamp)
		r.LogBytes += s.Log.Size
	}
	return r
}

// Walk calls fn on every committed segment in offset order, loading one
// sealed sub-manifest at a time through r (memory stays bounded by one
// sub-manifest). It stops at fn's first error and returns it.
func (m *Manifest) Walk(ctx context.Context, r Resolver, fn func(Segment) error) error {
	for i := range m.Sealed {
		sub, err := m.LoadSub(ctx, r, i)
		if err != nil {
			return err
		}
		for _, s := range sub.Segments {
			if err := fn(s); err != nil {
				return err
			}
		}
	}
	for _, s := range m.Segments {
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// ReferencedKeys returns, sorted, every key the manifest references: its
// sealed sub-manifests and every segment object. With the manifest's own key
// this is the partition's live set; anything else under the partition's
// directories is garbage once older than the grace period.
func (m *Manifest) ReferencedKeys(ctx context.Context, r Resolver) ([]string, error) {
	var keys []string
	for _, ref := range m.Sealed {
		keys = append(keys, ref.Key)
	}
	err := m.Walk(ctx, r, func(s Segment) error {
		keys = append(keys, s.Keys()...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}
