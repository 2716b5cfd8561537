package manifest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// linearOffset is the reference for FindOffset: the first segment whose
// last offset is at or after offset.
func linearOffset(segs []Segment, start, next, offset int64) (Segment, bool) {
	if offset < start || offset >= next {
		return Segment{}, false
	}
	for _, s := range segs {
		if s.LastOffset >= offset {
			return s, true
		}
	}
	return Segment{}, false
}

func linearTimestamp(segs []Segment, ts int64) (Segment, bool) {
	for _, s := range segs {
		if s.MaxTimestamp >= ts {
			return s, true
		}
	}
	return Segment{}, false
}

func TestLookupsMatchLinearScan(t *testing.T) {
	sizes := []int{1, 1000, 10_000}
	if !testing.Short() && !raceEnabled {
		sizes = append(sizes, 100_000)
	}
	for _, n := range sizes {
		for _, p := range []Policy{DefaultPolicy(), {InlineMax: 7, SubSegments: 3}} {
			if n == 100_000 && p.SubSegments < 100 {
				continue // 33k sub-manifests: slow and adds nothing
			}
			if raceEnabled && n == 10_000 && p.SubSegments >= 100 {
				continue // the race detector makes JSON decoding slow; 1000 covers sealing
			}
			t.Run(fmt.Sprintf("segments=%d/inline=%d/sub=%d", n, p.InlineMax, p.SubSegments), func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(uint64(n), uint64(p.SubSegments)))
				segs := randomSegs(t, rnd, n)
				st := newMemStore()
				m := build(t, st, p, segs, 997)
				if len(m.Segments) > p.InlineMax || (n > p.InlineMax && len(m.Sealed) == 0) {
					t.Fatalf("%d inline, %d sealed", len(m.Segments), len(m.Sealed))
				}
				if got := m.SegmentCount(); got != n {
					t.Fatalf("SegmentCount = %d, want %d", got, n)
				}
				// Lookups run on the decoded root, as a reader sees it.
				m, err := DecodeRoot(m.Key(), st.objs[m.Key()])
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				start, next := m.LogStartOffset, m.NextOffset()
				queries := []int64{start - 1, start, next - 1, next, next + 5, -1}
				for range 200 {
					queries = append(queries, start+rnd.Int64N(next-start))
				}
				for _, s := range segs[:min(50, n)] { // boundaries
					queries = append(queries, s.BaseOffset, s.LastOffset, s.BaseOffset-1, s.LastOffset+1)
				}
				// The first lookups go to the store, to count what they read;
				// the rest through a cache, to keep the test fast.
				cache := NewSubCache(st, 64)
				resolver := func(i int) Resolver {
					if i < 10 || !raceEnabled && i < 40 {
						return st
					}
					return cache
				}
				for i, off := range queries {
					st.loads = 0
					want, ok := linearOffset(segs, start, next, off)
					got, err := m.FindOffset(ctx, resolver(i), off)
					if !ok {
						var oe *OffsetOutOfRangeError
						if !errors.Is(err, ErrOffsetOutOfRange) || !errors.As(err, &oe) || oe.Next != next {
							t.Fatalf("FindOffset(%d) = %v, want out of range", off, err)
						}
						continue
					}
					if err != nil || got.BaseOffset != want.BaseOffset || got.Log.Key != want.Log.Key {
						t.Fatalf("FindOffset(%d) = [%d, %d], %v; want [%d, %d]", off, got.BaseOffset, got.LastOffset, err,
							want.BaseOffset, want.LastOffset)
					}
					if st.loads > 1 {
						t.Fatalf("FindOffset(%d) loaded %d sub-manifests", off, st.loads)
					}
				}
				minTs, maxTs := segs[0].MaxTimestamp, segs[0].MaxTimestamp
				for _, s := range segs {
					minTs, maxTs = min(minTs, s.MaxTimestamp), max(maxTs, s.MaxTimestamp)
				}
				tsq := []int64{-1, 0, minTs, maxTs, maxTs + 1}
				for range 200 {
					tsq = append(tsq, minTs+rnd.Int64N(maxTs-minTs+1))
				}
				for i, ts := range tsq {
					st.loads = 0
					want, ok := linearTimestamp(segs, ts)
					got, err := m.FindTimestamp(ctx, resolver(i), ts)
					if !ok {
						if !errors.Is(err, ErrTimestampNotFound) {
							t.Fatalf("FindTimestamp(%d) = %v, want ErrTimestampNotFound", ts, err)
						}
						continue
					}
					if err != nil || got.BaseOffset != want.BaseOffset {
						t.Fatalf("FindTimestamp(%d) = %d, %v; want %d", ts, got.BaseOffset, err, want.BaseOffset)
					}
					if st.loads > 1 {
						t.Fatalf("FindTimestamp(%d) loaded %d sub-manifests", ts, st.loads)
					}
				}
			})
		}
	}
}

func TestLookupEmpty(t *testing.T) {
	m := newTestManifest(t, 40)
	if m.NextOffset() != 40 || m.SegmentCount() != 0 || m.LogBytes() != 0 {
		t.Fatalf("empty manifest: next %d", m.NextOffset())
	}
	if _, err := m.FindOffset(context.Background(), nil, 40); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("FindOffset on empty = %v", err)
	}
	if _, err := m.FindTimestamp(context.Background(), nil, 0); !errors.Is(err, ErrTimestampNotFound) {
		t.Fatalf("FindTimestamp on empty = %v", err)
	}
}

func TestEpochsForSegment(t *testing.T) {
	cp := []EpochEntry{{0, 0}, {2, 100}, {5, 150}, {7, 300}}
	cases := []struct {
		base, last int64
		want       []EpochEntry
	}{
		{0, 99, []EpochEntry{{0, 0}}},
		{50, 120, []EpochEntry{{0, 50}, {2, 100}}},
		{100, 299, []EpochEntry{{2, 100}, {5, 150}}},
		{120, 400, []EpochEntry{{2, 120}, {5, 150}, {7, 300}}},
		{500, 600, []EpochEntry{{7, 500}}},
	}
	for _, c := range cases {
		got := EpochsForSegment(cp, c.base, c.last)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("EpochsForSegment(%d, %d) = %v, want %v", c.base, c.last, got, c.want)
		}
		s := testSeg(t, c.base, c.last, 100)
		s.LeaderEpochs = got
		if err := s.Validate(); err != nil {
			t.Errorf("segment with those epochs: %v", err)
		}
	}
	if got := EpochsForSegment([]EpochEntry{{3, 10}}, 0, 5); len(got) != 0 {
		t.Errorf("epochs after the segment: %v", got)
	}
}
