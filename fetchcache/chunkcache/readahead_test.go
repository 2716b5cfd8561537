package chunkcache

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TestReadAheadManyStreams: 8 readers scan one object from different
// starting points, in turns; each is recognised as its own stream, and
// every chunk after a stream's first is read ahead before it is needed.
func TestReadAheadManyStreams(t *testing.T) {
	store := objstore.NewMemory()
	const chunk, size, streams, region = 100, 100 * 100, 8, 1200
	want := putObject(t, store, "seg", size)
	inner := newCounting(store)
	// The in-flight budget admits every stream's read-ahead at once:
	// read-ahead that finds the gates full is skipped (by design), which
	// this test is not about.
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: size, ReadAheadChunks: 3,
		MaxInFlightBytes: size})
	for step := int64(0); step < region; step += 40 {
		for r := range int64(streams) {
			off := r*region + step
			if got := readAll(t, c, "seg", off, 40); string(got) != string(want[off:off+40]) {
				t.Fatalf("stream %d at %d: wrong bytes", r, off)
			}
		}
		waitIdle(t, c)
	}
	eachChunkOnce(t, inner.takeRanges(), chunk)
	// Each stream reads 12 chunks; only its first is not read ahead.
	if u := testutil.ToFloat64(c.m.readAhead.WithLabelValues(ReadAheadUseful)); u < streams*11 {
		t.Fatalf("%v read-ahead chunks useful, want at least %d", u, streams*11)
	}
	if w := testutil.ToFloat64(c.m.readAhead.WithLabelValues(ReadAheadWasted)); w != 0 {
		t.Fatalf("%v wasted with a cache holding everything, want 0", w)
	}
}

// TestReadAheadConcurrentStreams: the same scans at once; racing clients
// and read-ahead still fetch every chunk once and return the right bytes.
func TestReadAheadConcurrentStreams(t *testing.T) {
	store := objstore.NewMemory()
	const chunk, size = 100, 100 * 100
	want := putObject(t, store, "seg", size)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: chunk, MemoryBytes: size, ReadAheadChunks: 3})
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Go(func() {
			for off := int64(r * 1200); off < int64(r*1200+1200); off += 40 {
				if got := readAll(t, c, "seg", off, 40); string(got) != string(want[off:off+40]) {
					t.Errorf("reader %d at %d: wrong bytes", r, off)
					return
				}
			}
		})
	}
	wg.Wait()
	waitIdle(t, c)
	eachChunkOnce(t, inner.takeRanges(), chunk)
}

// TestReadAheadYieldsToClients: with the gets gate taken, read-ahead does
// not wait or fail anything; it just does not happen.
func TestReadAheadYieldsToClients(t *testing.T) {
	store := objstore.NewMemory()
	putObject(t, store, "seg", 1000)
	inner := newCounting(store)
	c := mustCache(t, inner, CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, ReadAheadChunks: 2, MaxConcurrentGets: 1})
	readAll(t, c, "seg", 300, 50) // not chunk 0: no stream yet
	// The first load may still be settling (its bytes weight, a kick)
	// after the read has its chunk: from here on only this test's slot
	// is taken.
	waitIdle(t, c)
	if err := c.gets.Start(context.Background(), 1); err != nil { // a client GET in progress
		t.Fatal(err)
	}
	readAll(t, c, "seg", 350, 40) // sequential, chunk 3 cached: no client GET
	waitIdleExcept(t, c, 1)
	// Checked while the gate is still full: once it is free, a kick may
	// run the held read-ahead, as it should.
	calls := inner.takeRanges()
	waits := testutil.ToFloat64(c.gets.Series().Waits)
	c.gets.Done(1)
	if len(calls) != 1 {
		t.Fatalf("GETs %v: read-ahead ran with the gate full", calls)
	}
	if waits != 0 {
		t.Fatalf("read-ahead waited on the gate (%v waits)", waits)
	}
}

// waitIdleExcept waits for no flight and at most gets GETs in the gets gate.
func waitIdleExcept(t *testing.T, c *CachingBucket, gets int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("no flight and at most %d GETs in the gate", gets), func() bool {
		return c.loading() == 0 && c.gets.InFlight() <= gets
	})
}
