package manifest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// asSections lays each segment's indexes out as the uploader writes them:
// sections of one indexes object (format version 2).
func asSections(b *testing.B, segs []Segment) []Segment {
	for i, s := range segs {
		segs[i] = sectionsSeg(b, s.BaseOffset, s.LastOffset, s.MaxTimestamp, s.Index.Size, s.TimeIndex.Size)
	}
	return segs
}

// BenchmarkFindOffset measures serving one offset of a partition with 1k,
// 10k and 100k committed segments under the default policy.
//
// cold: what a reader without caches does per lookup: decode the root's
// bytes, locate, load and decode at most one sub-manifest. bytes/lookup is
// what it reads (root plus one sub-manifest); root-bytes is the root alone.
// warm: the root decoded and sub-manifests cached (SubCache), as a fetch
// service runs: a binary search.
func BenchmarkFindOffset(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1_000, 10_000, 100_000} {
		rnd := rand.New(rand.NewPCG(uint64(n), 1))
		segs := asSections(b, randomSegs(b, rnd, n))
		st := newMemStore()
		m := build(b, st, DefaultPolicy(), segs, 1000)
		key := m.Key()
		root := st.objs[key]
		start, next := m.LogStartOffset, m.NextOffset()
		offsets := make([]int64, 1024)
		for i := range offsets {
			offsets[i] = start + rnd.Int64N(next-start)
		}
		b.Run(fmt.Sprintf("segments=%d/cold", n), func(b *testing.B) {
			b.ReportAllocs()
			st.bytesRead, st.loads = 0, 0
			lookups := 0
			for b.Loop() {
				off := offsets[lookups%len(offsets)]
				lookups++
				m, err := DecodeRoot(key, root)
				if err != nil {
					b.Fatal(err)
				}
				if s, err := m.FindOffset(ctx, st, off); err != nil || s.LastOffset < off {
					b.Fatalf("FindOffset(%d) = %+v, %v", off, s, err)
				}
			}
			b.ReportMetric(float64(int64(len(root))*int64(lookups)+st.bytesRead)/float64(lookups), "bytes/lookup")
			b.ReportMetric(float64(len(root)), "root-bytes")
			b.ReportMetric(float64(st.loads)/float64(lookups), "subs/lookup")
		})
		b.Run(fmt.Sprintf("segments=%d/warm", n), func(b *testing.B) {
			b.ReportAllocs()
			m, err := DecodeRoot(key, root)
			if err != nil {
				b.Fatal(err)
			}
			cache := NewSubCache(st, len(m.Sealed)+1)
			for i := range m.Sealed {
				if _, err := m.LoadSub(ctx, cache, i); err != nil {
					b.Fatal(err)
				}
			}
			lookups := 0
			for b.Loop() {
				off := offsets[lookups%len(offsets)]
				lookups++
				if _, err := m.FindOffset(ctx, cache, off); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppend measures one commit of one segment onto a root holding
// DefaultInlineMax segments (about every 256th commit also seals), including
// encoding the new root, as the uploader does per commit.
func BenchmarkAppend(b *testing.B) {
	rnd := rand.New(rand.NewPCG(7, 7))
	segs := asSections(b, randomSegs(b, rnd, 20_000))
	st := newMemStore()
	m := build(b, st, DefaultPolicy(), segs[:10_000], 1000)
	b.ReportAllocs()
	i := 10_000
	for b.Loop() {
		c, err := Append(m, DefaultPolicy(), segs[i])
		if err != nil {
			b.Fatal(err)
		}
		enc, err := EncodeRoot(c.Root)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(enc)))
		m = c.Root
		if i++; i == len(segs) {
			b.StopTimer()
			i = 10_000
			m = build(b, st, DefaultPolicy(), segs[:10_000], 1000)
			b.StartTimer()
		}
	}
}
