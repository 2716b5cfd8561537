package fetchcache_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// coldCombined is fetchkit.ColdCombined's partition and the end of its
// remote range.
func coldCombined(t testing.TB) (fetchcache.Partition, int64) {
	cat, end := fetchkit.ColdCombined(t)
	p, err := cat.Partition(context.Background(), "cold", 0)
	if err != nil {
		t.Fatal(err)
	}
	return p, end
}

// readRemote reads [0, end) through read, 256 KiB at a time, and returns
// the bytes served.
func readRemote(t testing.TB, p fetchcache.Partition, end int64, read func(off int64) fetchcache.View) int64 {
	var n int64
	for off := int64(0); off < end; {
		v := read(off)
		if v.Len == 0 || v.Next <= off {
			t.Fatalf("no progress at offset %d: %+v", off, v)
		}
		n += int64(v.Len)
		off = v.Next
	}
	return n
}

// TestCombinedSharedReadNoCopy: serve's combined catalog serves its remote
// offsets as the cache's memory (SharedReader), as the remote catalog does
// for tiered fetch, so a warm cold read allocates far less than the bytes
// it serves — a copy would allocate at least as many; the view's bytes are
// those Read returns.
func TestCombinedSharedReadNoCopy(t *testing.T) {
	p, end := coldCombined(t)
	if _, ok := p.(fetchcache.SharedReader); !ok {
		t.Fatalf("%T is not a SharedReader", p)
	}
	ctx := context.Background()
	view := func(off int64) fetchcache.View {
		v, err := fetchcache.ReadView(ctx, p, off, 256<<10)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Same bytes as Read, and the cache warmed.
	for off := int64(0); off < end; {
		v := view(off)
		data, err := p.Read(ctx, off, 256<<10)
		if err != nil || !bytes.Equal(v.Bytes(), data) {
			t.Fatalf("view at %d differs from Read (%v)", off, err)
		}
		off = v.Next
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	served := readRemote(t, p, end, view)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	perMiB := float64(alloc) / (float64(served) / (1 << 20))
	t.Logf("served %d bytes, allocated %d (%.0f bytes per MiB served)", served, alloc, perMiB)
	if served < 1<<20 {
		t.Fatalf("served only %d bytes: the setup is too small to measure", served)
	}
	if perMiB > 128<<10 {
		t.Fatalf("combined cold read allocated %.0f bytes per MiB served, want < 128 KiB (no copy of the batch bytes)", perMiB)
	}
}

// BenchmarkCombinedColdRead reports the allocations per MiB a warm cold
// read of serve's combined catalog makes (b.SetBytes: MB/s is bytes served).
func BenchmarkCombinedColdRead(b *testing.B) {
	p, end := coldCombined(b)
	ctx := context.Background()
	view := func(off int64) fetchcache.View {
		v, err := fetchcache.ReadView(ctx, p, off, 256<<10)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	n := readRemote(b, p, end, view) // warm
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		readRemote(b, p, end, view)
	}
}
