package chunkcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TestDiskTierCorruption damages a cached chunk file (the short last chunk,
// so that even a longer file is within the size a chunk file may have) in
// each way a crash or a bad disk can, restarts, and reads: the damage is detected (counted),
// the chunk refetched from the store with the right bytes, and the file
// rewritten good.
func TestDiskTierCorruption(t *testing.T) {
	damage := map[string]func([]byte) []byte{
		"flipped_payload_byte": func(b []byte) []byte { b[3] ^= 1; return b },
		"flipped_checksum":     func(b []byte) []byte { b[len(b)-5] ^= 1; return b },
		"bad_magic":            func(b []byte) []byte { b[len(b)-1] = 'X'; return b },
		"torn_half":            func(b []byte) []byte { return b[:len(b)/2] },
		"torn_trailer":         func(b []byte) []byte { return b[:len(b)-3] },
		"empty":                func(b []byte) []byte { return nil },
		"extra_bytes":          func(b []byte) []byte { return append(b, 0, 0, 0) },
		"wrong_length_field": func(b []byte) []byte {
			b[len(b)-9]++ // low byte of the length
			return b
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			store := objstore.NewMemory()
			want := putObject(t, store, "seg", 250)
			inner := newCounting(store)
			o := CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, ReadAheadChunks: -1,
				CacheDir: t.TempDir(), DiskBytes: 10000}
			c, err := NewCachingBucket(inner, o)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, c, "seg", 0, 250)
			waitIdle(t, c)
			a, _ := store.Attributes(t.Context(), "seg")
			k := chunkKey{"seg", objectVersion(a), 2}
			path := filepath.Join(o.CacheDir, c.disk.fileName(k))
			c.Close()

			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, fn(b), 0o644); err != nil {
				t.Fatal(err)
			}
			inner.takeRanges()

			c = mustCache(t, inner, o)
			if got := readAll(t, c, "seg", 0, 250); !bytes.Equal(got, want) {
				t.Fatal("wrong bytes after corruption")
			}
			waitIdle(t, c)
			if n := testutil.ToFloat64(c.m.corrupt); n != 1 {
				t.Fatalf("corrupt chunks %v, want 1", n)
			}
			calls := inner.takeRanges()
			if len(calls) != 1 || calls[0].off != 200 {
				t.Fatalf("GETs %v, want only the damaged chunk", calls)
			}
			if hits := testutil.ToFloat64(c.m.hits.WithLabelValues(TierDisk)); hits != 2 {
				t.Fatalf("disk hits %v, want the 2 good chunks", hits)
			}
			b, err = os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if p, err := decodeChunkFile(b, 50); err != nil || !bytes.Equal(p, want[200:]) {
				t.Fatalf("chunk file not rewritten good: %v", err)
			}
		})
	}
}

// TestDiskTierRestart: files survive a restart, leftover temporaries are
// removed, foreign files left alone, and a smaller bound trims the oldest.
func TestDiskTierRestart(t *testing.T) {
	store := objstore.NewMemory()
	want := putObject(t, store, "seg", 1000)
	inner := newCounting(store)
	dir := t.TempDir()
	o := CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, ReadAheadChunks: -1, CacheDir: dir, DiskBytes: 10000,
		FetchParallelism: 1}
	c, err := NewCachingBucket(inner, o)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, c, "seg", 0, 1000)
	waitIdle(t, c)
	c.Close()
	inner.takeRanges()
	if err := os.WriteFile(filepath.Join(dir, "x.chunk.123.tmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Reopen with room for 4 files: the 6 oldest go, newest stay.
	o.DiskBytes = 4 * (100 + chunkTrailerLen)
	c = mustCache(t, inner, o)
	if got := c.disk.size(); got != o.DiskBytes {
		t.Fatalf("disk tier holds %d bytes after reload, want %d", got, o.DiskBytes)
	}
	if got := readAll(t, c, "seg", 600, 400); !bytes.Equal(got, want[600:]) {
		t.Fatal("wrong bytes from the reloaded disk tier")
	}
	if calls := inner.takeRanges(); len(calls) != 0 {
		t.Fatalf("GETs %v: the newest four chunks should come from disk", calls)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.chunk.123.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("foreign file touched: %v", err)
	}
	ents, _ := filepath.Glob(filepath.Join(dir, "*"+chunkFileExt))
	if len(ents) != 4 {
		t.Fatalf("%d chunk files, want 4", len(ents))
	}
}

func TestDiskTierLock(t *testing.T) {
	dir := t.TempDir()
	o := CacheOptions{CacheDir: dir, DiskBytes: 1 << 20}
	mustCache(t, objstore.NewMemory(), o)
	if _, err := NewCachingBucket(objstore.NewMemory(), o); err == nil {
		t.Fatal("two caching buckets share one cache dir")
	}
}

func TestChunkFileRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 100, 4096} {
		p := content("x", int64(n))
		got, err := decodeChunkFile(encodeChunkFile(p), int64(n))
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if _, err := decodeChunkFile(encodeChunkFile(p), int64(n)+1); err == nil {
			t.Fatalf("%d bytes accepted as %d", n, n+1)
		}
	}
}

// FuzzDecodeChunkFile: any file content is either rejected or decodes to a
// payload that re-encodes to the same file; decoding never panics, and a
// good file decodes without allocating.
func FuzzDecodeChunkFile(f *testing.F) {
	f.Add(encodeChunkFile([]byte("hello chunk")), int64(11))
	f.Add(encodeChunkFile(nil), int64(0))
	f.Add([]byte("TFC1"), int64(-1))
	f.Add(append(make([]byte, 12), "TFC1"...), int64(-1))
	long := encodeChunkFile(content("k", 300))
	long[len(long)-16] = 0xff // huge length field
	f.Add(long, int64(300))
	f.Fuzz(func(t *testing.T, b []byte, want int64) {
		p, err := decodeChunkFile(b, want)
		if err != nil {
			return
		}
		if allocs := testing.AllocsPerRun(1, func() { decodeChunkFile(b, want) }); allocs != 0 {
			t.Fatalf("decoding a good file allocated %v times", allocs)
		}
		if !bytes.Equal(encodeChunkFile(p), b) {
			t.Fatal("accepted file does not re-encode to itself")
		}
	})
}

// TestDecodeChunkFileHostileLength: a trailer claiming an enormous payload
// is rejected without allocating anything near that size (the length is
// only compared, never used to size a buffer).
func TestDecodeChunkFileHostileLength(t *testing.T) {
	b := encodeChunkFile(content("k", 300))
	binary.BigEndian.PutUint64(b[len(b)-16:], 1<<62)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := decodeChunkFile(b, -1); err == nil {
			t.Fatal("hostile length accepted")
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<10 {
		t.Fatalf("100 rejections allocated %d bytes", n)
	}
}

// TestDiskTierReloadLeavesForeignTemporaries: the reload removes only the
// temporaries a chunk write leaves (name.chunk.*.tmp), not every .tmp file
// in the directory: a cache dir shared with other files (--cache-dir /tmp,
// say) lost theirs at each start.
func TestDiskTierReloadLeavesForeignTemporaries(t *testing.T) {
	dir := t.TempDir()
	foreign := []string{"notes.tmp", "upload.part.tmp", "chunk.tmp"}
	for _, name := range append([]string{"x.chunk.123.tmp"}, foreign...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustCache(t, objstore.NewMemory(), CacheOptions{CacheDir: dir, DiskBytes: 1 << 20})
	if _, err := os.Stat(filepath.Join(dir, "x.chunk.123.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover chunk temporary not removed: %v", err)
	}
	for _, name := range foreign {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("foreign file %s removed: %v", name, err)
		}
	}
}

// TestDiskTierReloadLeavesForeignChunkNames: a file ending in .chunk that
// is not named as the tier names its files is neither counted in the bound
// nor removed — before, a large one was deleted at start as "another
// layout" and a small one counted and later evicted (deleted) as a chunk.
func TestDiskTierReloadLeavesForeignChunkNames(t *testing.T) {
	dir := t.TempDir()
	foreign := map[string]int{"video.chunk": 5000, "notes.chunk": 10, "0123-4.chunk": 10,
		"0123456789abcdef0123456789abcdeg-1.chunk": 10, "0123456789abcdef0123456789abcdef-x.chunk": 10}
	for name, n := range foreign {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ours := "0123456789abcdef0123456789abcdef-7.chunk" // another object's chunk: counted, and evicted below
	if err := os.WriteFile(filepath.Join(dir, ours), make([]byte, 50), 0o644); err != nil {
		t.Fatal(err)
	}
	store := objstore.NewMemory()
	putObject(t, store, "seg", 400)
	o := CacheOptions{ChunkBytes: 100, MemoryBytes: 1000, ReadAheadChunks: -1, CacheDir: dir, DiskBytes: 2 * (100 + chunkTrailerLen)}
	c := mustCache(t, store, o)
	if got := c.disk.size(); got != 50 {
		t.Fatalf("disk tier counts %d bytes at start, want the 50 of its own file", got)
	}
	readAll(t, c, "seg", 0, 400) // 4 chunks through a bound of 2: evictions
	waitIdle(t, c)
	for name := range foreign {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("foreign file %s removed: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ours)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the tier's own oldest file was not evicted: %v", err)
	}
}
