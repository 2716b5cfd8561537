package manifest

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"testing"
)

const (
	testPrefix = "tiered/prod"
	testTopic  = "orders.v1"
	testPart   = int32(3)
)

// testSeg returns a valid segment of the test partition serving [base, last]
// with max timestamp ts.
func testSeg(t testing.TB, base, last, ts int64) Segment {
	t.Helper()
	return testSegAttempt(t, base, last, ts, fmt.Sprintf("%016x%016x", base, uint64(last)*0x9e3779b97f4a7c15))
}

func testSegAttempt(t testing.TB, base, last, ts int64, attempt string) Segment {
	t.Helper()
	keys, err := DataKeys(testPrefix, testTopic, testPart, base, attempt)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(s string) Checksum { return CRC32CChecksum(crc32.Checksum([]byte(s), castagnoli)) }
	return Segment{
		BaseOffset: base, LastOffset: last, RecordCount: last - base + 1,
		MinTimestamp: ts - 10, MaxTimestamp: ts,
		LeaderEpochs: []EpochEntry{{Epoch: 4, StartOffset: base}},
		Log:          Object{Key: keys.Log, Size: 1000 + base%977, Checksum: sum(keys.Log)},
		Index:        Object{Key: keys.Index, Size: 8 * (base % 13), Checksum: sum(keys.Index)},
		TimeIndex:    Object{Key: keys.TimeIndex, Size: 12 * (base % 13), Checksum: sum(keys.TimeIndex)},
		UploadTimeMs: 1_700_000_000_000 + base, Uploader: "broker-1", AttemptID: attempt,
	}
}

func newTestManifest(t testing.TB, logStart int64) *Manifest {
	t.Helper()
	m, err := New(testPrefix, testTopic, testPart, logStart)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// memStore is an object store for commits: it applies the commit protocol
// and counts what lookups read.
type memStore struct {
	objs      map[string][]byte
	loads     int
	bytesRead int64
}

func newMemStore() *memStore { return &memStore{objs: map[string][]byte{}} }

func (s *memStore) Load(_ context.Context, key string, _ int64) ([]byte, error) {
	b, ok := s.objs[key]
	if !ok {
		return nil, fmt.Errorf("load %s: not found", key)
	}
	s.loads++
	s.bytesRead += int64(len(b))
	return b, nil
}

// apply stores a commit's sub-manifests (if absent: an existing object must
// be identical) and then its root.
func (s *memStore) apply(t testing.TB, c *Commit) []byte {
	t.Helper()
	for _, ns := range c.Subs {
		if old, ok := s.objs[ns.Ref.Key]; ok && !bytes.Equal(old, ns.Data) {
			t.Fatalf("sub-manifest %s rewritten with different content", ns.Ref.Key)
		}
		s.objs[ns.Ref.Key] = ns.Data
	}
	root, err := EncodeRoot(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	s.objs[c.Root.Key()] = root
	return root
}

// build appends segments [0, n) of the given sizes in batches, returning
// the manifest and the flat list.
func build(t testing.TB, st *memStore, p Policy, segs []Segment, batch int) *Manifest {
	t.Helper()
	m := newTestManifest(t, 0)
	if len(segs) > 0 {
		m.LogStartOffset = segs[0].BaseOffset
	}
	for i := 0; i < len(segs); i += batch {
		c, err := Append(m, p, segs[i:min(i+batch, len(segs))]...)
		if err != nil {
			t.Fatal(err)
		}
		st.apply(t, c)
		m = c.Root
	}
	return m
}

// randomSegs returns n segments with random lengths, gaps and timestamps
// (mostly increasing, sometimes out of order, as CreateTime allows).
func randomSegs(t testing.TB, rnd interface {
	Int64N(int64) int64
	IntN(int) int
}, n int) []Segment {
	segs := make([]Segment, 0, n)
	next, ts := int64(rnd.Int64N(50)), int64(1_600_000_000_000)
	for range n {
		if rnd.IntN(4) == 0 {
			next += rnd.Int64N(20) // a compaction gap
		}
		last := next + rnd.Int64N(40)
		ts += rnd.Int64N(1000) - 100
		segs = append(segs, testSeg(t, next, last, max(ts, 0)))
		next = last + 1
	}
	return segs
}

// flatten returns every committed segment in order.
func flatten(t testing.TB, m *Manifest, r Resolver) []Segment {
	t.Helper()
	var out []Segment
	if err := m.Walk(context.Background(), r, func(s Segment) error {
		out = append(out, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
